"""Turn a canonical :class:`Graph` into a costed strict :class:`Chain` of layers.

1. :func:`~splitter.graph.supernodes.find_regions` cuts the DAG into minimal single-entry /
   single-exit regions (one op: an ordinary layer; several: a super-node, kind ``"super"``).
2. Zero-cost reshapes join the PRECEDING layer (its output becomes the reshaped tensor); a
   reshape right after the graph input joins the input layer.
3. A maxpool / avgpool / global_avgpool directly after an ordinary conv2d / dense / add layer
   joins it (the thesis's fused conv+pool block; the kind stays the first op's kind).
4. A softmax directly after a dense layer joins it: X-CUBE-AI's optimised graph merges a
   classifier's softmax into its Dense node (thesis Tables 7, 11, 13, 14: the last Dense row's
   kMACC is ``in*out + out + 15*out``), so Tiny-CNN is Input + 3 conv blocks + dense. After a conv
   (MobileNet's ``Conv2D_preds``) the softmax stays a layer, as the tables' ``Predictions`` row.
5. Layer 0 is the explicit input layer (kind ``"input"``, 0 MAC, 0 FLASH, RAM = OUT = input
   bytes); every layer is costed by :func:`splitter.cost.layer.layer_cost`.

A model with several graph inputs is always chained at operator granularity
(:mod:`splitter.graph.opchain`): a super-node chain carries one tensor per cut, while the cut
after the input layer must carry every input to the first board, as an op chain's cut carries
every live tensor (issue 29).
"""

from __future__ import annotations

from dataclasses import dataclass

from splitter import ops
from splitter.cost.layer import itemsize_function, layer_cost
from splitter.errors import InputFileError, ShapeError
from splitter.graph.opchain import build_op_layers
from splitter.graph.supernodes import Region, find_regions
from splitter.ir import Chain, Graph, Layer, Op
from splitter.ops import ZERO_COST_KINDS

#: Pools (splitter.ops.POOL_KINDS); each joins a directly preceding layer of a kind in its
#: ``joins``.
POOL_KINDS = ops.POOL_KINDS


@dataclass(frozen=True)
class _Group:
    """A region on its way to becoming a layer; ``kind`` is fixed when the region is cut."""

    ops: tuple[Op, ...]
    input: str
    output: str
    kind: str
    pooled: bool = False


#: Chain granularities: branches collapsed into super-nodes, or one layer per fused op group.
GRANULARITIES = ("supernode", "op")


def build_chain(
    graph: Graph, *, activation_bytes: int | None = None, granularity: str = "supernode"
) -> Chain:
    """The costed chain of ``graph``; layer 0 is the input layer.

    ``activation_bytes`` overrides the bytes per activation element in RAM_j and OUT_j;
    ``granularity`` is ``"supernode"`` (this module) or ``"op"`` (:mod:`splitter.graph.opchain`,
    always taken for a graph with several inputs: module docstring).
    """
    where = graph.source_path or graph.name
    if activation_bytes is not None and activation_bytes < 1:
        raise ShapeError(f"activation bytes must be >= 1, got {activation_bytes}")
    if granularity not in GRANULARITIES:
        raise InputFileError(
            f"granularity {granularity!r} is unknown; use one of {', '.join(GRANULARITIES)}"
        )
    if not graph.ops or not graph.outputs:
        raise InputFileError(f"{where}: the model has no operators or no outputs; nothing to split")
    itemsize_of = itemsize_function(activation_bytes)
    if not graph.inputs:
        raise InputFileError(f"{where}: the model has no graph input; re-export it with one")
    if granularity == "op" or len(graph.inputs) > 1:
        layers = build_op_layers(graph, itemsize_of)
        return Chain(
            graph.name, tuple(layers), graph=graph, source_path=graph.source_path, granularity="op"
        )
    groups = group_layers(graph)
    last = len(groups) - 1
    layers = []
    for index, group in enumerate(groups):
        outs = _sink_outputs(graph, group) if index == last else None
        cost = layer_cost(
            group.ops, graph.tensors, group.input, group.output, itemsize_of, out_names=outs,
            layout=graph.layout,
        )  # fmt: skip
        layers.append(
            Layer(
                index=index,
                name=_layer_name(group),
                kind=group.kind,
                ops=group.ops,
                input=graph.tensor(group.input),
                output=graph.tensor(group.output),
                cost=cost,
            )
        )
    return Chain(graph.name, tuple(layers), graph=graph, source_path=graph.source_path)


def group_layers(graph: Graph) -> list[_Group]:
    """Regions with reshapes and pools merged, preceded by the input group."""
    entry = graph.inputs[0]
    groups = [_Group((), entry, entry, "input")]
    for region in find_regions(graph):
        prev = groups[-1]
        if all(op.kind in ZERO_COST_KINDS for op in region.ops):
            groups[-1] = _merge(prev, region, prev.kind, prev.pooled)
        elif _fuses_pool(prev, region):
            groups[-1] = _merge(prev, region, prev.kind, pooled=True)
        elif _fuses_softmax(prev, region):
            groups[-1] = _merge(prev, region, prev.kind, prev.pooled)
        else:
            kind = region.ops[0].kind if len(region.ops) == 1 else "super"
            groups.append(_Group(region.ops, region.input, region.output, kind))
    return groups


def _merge(prev: _Group, region: Region, kind: str, pooled: bool) -> _Group:
    return _Group(prev.ops + region.ops, prev.input, region.output, kind, pooled)


def _fuses_pool(prev: _Group, region: Region) -> bool:
    """A single pool op right after an ordinary conv2d/dense/add layer without a pool yet."""
    return (
        len(region.ops) == 1
        and region.ops[0].kind in POOL_KINDS
        and prev.kind in ops.OPS[region.ops[0].kind].joins
        and not prev.pooled
    )


def _fuses_softmax(prev: _Group, region: Region) -> bool:
    """A single softmax op right after a dense layer that has not fused one yet."""
    return (
        len(region.ops) == 1
        and region.ops[0].kind == "softmax"
        and prev.kind in ops.OPS["softmax"].joins
        and prev.ops[-1].kind != "softmax"
    )


def _sink_outputs(graph: Graph, group: _Group) -> tuple[str, ...]:
    """Tensors the last layer delivers: every graph output (one for single-output models)."""
    produced = {name for op in group.ops for name in op.outputs}
    outs = tuple(name for name in graph.outputs if name in produced or name == group.output)
    return outs or (group.output,)


def _layer_name(group: _Group) -> str:
    """Input tensor name for the input layer, first op's name, ``first..last`` for a super-node."""
    if group.kind == "input":
        return group.input
    if group.kind == "super":
        return f"{group.ops[0].name}..{group.ops[-1].name}"
    return group.ops[0].name
