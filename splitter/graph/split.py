"""Split inside a layer (issue 27): a conv or dense op becomes ``k`` output-channel slices.

A conv2d (any ``groups``: plain, grouped, depthwise) or dense op ``y = f(x)`` with ``C`` output
channels is rewritten into
``k`` ops ``y_i = f_i(x)``, slice ``i`` computing the channels ``[r_i, r_{i+1})`` with
``r_i = floor(i * C / k)`` (balanced, every slice at least one channel), followed by one
``concat`` of the ``y_i`` along the channel axis, named as the original output, so every reader
of ``y`` is untouched:

* weights: ``W_i = W[r_i:r_{i+1}]``, ``B_i = B[r_i:r_{i+1}]`` (``W`` is ``(O, I, kh, kw)`` for a
  conv, ``(out, in)`` for a dense op, :mod:`splitter.ir`), so the slices' weights sum to the op's
  (no byte is duplicated; the same rows as the LO-SC slices of :mod:`splitter.segments.firmware`);
* int8: a per-channel weight / bias quantisation (``w_scale``, ``w_zero_point``, ``b_scale``,
  ``b_zero_point`` with one entry per output channel) is sliced with the rows; a per-tensor one
  is kept. Every slice's output keeps the original output's quantisation, so the concat copies
  bytes (inputs and output share one quantisation) and the result is bit-exact;
* a fused activation is element-wise, so each slice keeps it;
* the channel axis is 1 for an NCHW conv, the last axis otherwise (NHWC conv, dense);
* a grouped conv (``G = groups > 1``, depthwise when every group has one input channel) is cut
  at group boundaries: the ``k`` slices take groups ``[g_i, g_{i+1})`` with
  ``g_i = floor(i * G / k)``, i.e. output channels ``[g_i * O/G, g_{i+1} * O/G)``, and slice ``i``
  reads only its input channels ``[g_i * I/G, g_{i+1} * I/G)``: a ``slice`` op ``N.in<i>``
  (writing ``<y>.in<i>``, the input's dtype and quantisation, so int8 copies bytes) before the
  slice's conv, which has ``groups = g_{i+1} - g_i``. The input channel slices together are
  the input once more (``I`` channels, not ``k * I``); their copy is one MAC-equivalent per
  element in the compute estimate, as any slice.

The slices all read ``x``, so at operator granularity (:mod:`splitter.graph.opchain`) ``x`` stays
live across every cut between them and the cost model counts that transfer like any other live
tensor. Names: slice ``i`` of op ``N`` is ``N.slice<i>`` writing ``<y>.slice<i>``, the concat is
``N.concat`` (the source rewrite, :mod:`splitter.slicing.split_source`, writes the same names
into the model file).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from splitter.errors import SplitRequestError
from splitter.ir import Graph, Op, QuantParams, TensorSpec

#: Op kinds whose output channels can be sliced.
SPLITTABLE_KINDS = ("conv2d", "dense")
#: Per-output-channel attributes of an int8 op (sliced with the weight rows when per-channel).
_CHANNEL_ATTRS = ("w_scale", "w_zero_point", "b_scale", "b_zero_point")


@dataclass(frozen=True)
class LayerSplit:
    """One split: op ``op`` (``channels`` output channels) into ``len(ranges)`` slices."""

    op: str
    channels: int
    ranges: tuple[tuple[int, int], ...]

    @property
    def slices(self) -> int:
        """``k``, the number of slices."""
        return len(self.ranges)

    def slice_name(self, i: int) -> str:
        """The op name of slice ``i``."""
        return f"{self.op}.slice{i}"

    @property
    def concat_name(self) -> str:
        """The op name of the concat joining the slices."""
        return f"{self.op}.concat"


def slice_ranges(channels: int, k: int) -> tuple[tuple[int, int], ...]:
    """``[r_i, r_{i+1})`` with ``r_i = floor(i * C / k)``: sizes differ by at most one."""
    bounds = [i * channels // k for i in range(k + 1)]
    return tuple(itertools.pairwise(bounds))


def channel_axis(op: Op, graph: Graph) -> int:
    """The output's channel axis: 1 for an NCHW conv, the last axis otherwise (NHWC, dense, and
    a QDQ ONNX graph's int8 tensors, which are NHWC: :mod:`splitter.importers.onnx_qdq`)."""
    out = graph.tensors[op.outputs[0]]
    nchw = op.kind == "conv2d" and graph.layout == "NCHW" and out.dtype != "int8"
    return 1 if nchw else len(out.shape) - 1


def why_not_splittable(op: Op, graph: Graph) -> str | None:
    """Why ``op`` cannot be split into output-channel slices, or None when it can."""
    if op.kind not in SPLITTABLE_KINDS:
        return f"it is a {op.kind} op, without output channels to slice"
    if set(op.weights) - {"W", "B"} or "W" not in op.weights:
        return "its weights are not a plain W / B pair"
    out = graph.tensors[op.outputs[0]]
    if out.quant is not None and out.quant.axis is not None:
        return "its output is quantised per channel"
    return None


def conv_groups(op: Op) -> int:
    """A conv's ``groups`` (1 for a plain conv and for a dense op)."""
    return int(op.attr("groups", 1)) if op.kind == "conv2d" else 1


def split_unit(op: Op) -> int:
    """Output channels a slice boundary may not cut: ``O / groups`` (a group's channels stay
    together; a depthwise conv's depth multiplier), 1 for a plain conv or a dense op."""
    groups = conv_groups(op)
    return int(op.weights["W"].shape[0]) // groups if groups > 1 else 1


def max_slices(op: Op) -> int:
    """The most slices ``op`` can be cut into: its groups when grouped, else its channels."""
    return int(op.weights["W"].shape[0]) // split_unit(op)


def layer_split(op: Op, k: int) -> LayerSplit:
    """``op`` cut into ``k`` balanced slices of whole units (:func:`split_unit`)."""
    channels, unit = int(op.weights["W"].shape[0]), split_unit(op)
    ranges = tuple((a * unit, b * unit) for a, b in slice_ranges(channels // unit, k))
    return LayerSplit(op.name, channels, ranges)


def splittable_ops(graph: Graph) -> list[Op]:
    """The ops of ``graph`` :func:`why_not_splittable` accepts, in graph order."""
    return [op for op in graph.ops if why_not_splittable(op, graph) is None]


def resolve_splits(graph: Graph, requested: Mapping[str, int], where: str) -> list[LayerSplit]:
    """The :class:`LayerSplit` of each ``name -> k`` request (``name`` a layer or op name);
    raises :class:`SplitRequestError` naming the layer and what can be split."""
    by_name = {op.name: op for op in graph.ops}
    out = []
    for name, k in requested.items():
        op = by_name.get(name)
        can = ", ".join(o.name for o in splittable_ops(graph)) or "none"
        if op is None:
            raise SplitRequestError(
                f"{where}: --split-layer {name}:{k}: no layer {name!r}; splittable layers: {can}"
            )
        why = why_not_splittable(op, graph)
        if why is not None:
            raise SplitRequestError(
                f"{where}: --split-layer {name}:{k}: {name} cannot be split ({why}); "
                f"splittable layers: {can}"
            )
        most = max_slices(op)
        if not 1 <= k <= most:
            raise SplitRequestError(f"{where}: --split-layer {name}:{k}: {_too_many(op, most)}")
        out.append(layer_split(op, k))
    return out


def _too_many(op: Op, most: int) -> str:
    """What ``K`` may be for ``op``, for the error of a request above it."""
    channels = int(op.weights["W"].shape[0])
    if most == channels:
        return f"{op.name} has {channels} output channels; give K from 1 to {channels}"
    return (
        f"{op.name} is a conv of {most} groups ({channels} output channels, split at group "
        f"boundaries); give K from 1 to {most}"
    )


def split_graph(graph: Graph, splits: Sequence[LayerSplit]) -> Graph:
    """``graph`` with every split of ``splits`` (``k > 1``) applied (module docstring)."""
    todo = {s.op: s for s in splits if s.slices > 1}
    if not todo:
        return graph
    tensors = dict(graph.tensors)
    ops: list[Op] = []
    for op in graph.ops:
        split = todo.get(op.name)
        if split is None:
            ops.append(op)
            continue
        axis = channel_axis(op, graph)
        parts = [_slice_op(op, split, i, axis, tensors) for i in range(split.slices)]
        if conv_groups(op) > 1:  # each slice reads its input channels only
            pairs = [_grouped(op, p, split, i, axis, tensors) for i, p in enumerate(parts)]
            parts = [conv for _, conv in pairs]
            ops.extend(o for pair in pairs for o in pair)
        else:
            ops.extend(parts)
        ops.append(
            Op(
                name=split.concat_name,
                kind="concat",
                inputs=tuple(p.outputs[0] for p in parts),
                outputs=op.outputs,
                attrs={"axis": axis, "act": None},
                source_nodes=(split.concat_name,),
            )
        )
    return replace(graph, ops=tuple(ops), tensors=tensors)


def slice_groups(op: Op, split: LayerSplit, i: int) -> int:
    """``groups`` of slice ``i``'s conv: ``g_{i+1} - g_i`` for a grouped conv, else 1."""
    if conv_groups(op) == 1:
        return 1
    r0, r1 = split.ranges[i]
    return (r1 - r0) // split_unit(op)


def input_channels(op: Op, split: LayerSplit, i: int) -> tuple[int, int]:
    """``[c0, c1)``: the input channels slice ``i`` of a grouped conv reads (module docstring)."""
    unit = split_unit(op)
    per_group_in = int(op.weights["W"].shape[1])
    r0, r1 = split.ranges[i]
    return r0 // unit * per_group_in, r1 // unit * per_group_in


def _grouped(
    op: Op, part: Op, split: LayerSplit, i: int, axis: int, tensors: dict[str, TensorSpec]
) -> tuple[Op, Op]:
    """The ``slice`` op of slice ``i``'s input channels, then the slice's conv reading it with
    ``groups`` its own group count."""
    x = tensors[op.inputs[0]]
    c0, c1 = input_channels(op, split, i)
    starts, ends = [0] * len(x.shape), list(x.shape)
    starts[axis], ends[axis] = c0, c1
    name = f"{op.outputs[0]}.in{i}"
    tensors[name] = TensorSpec(name, tuple(e - b for b, e in zip(starts, ends, strict=True)),
                               x.dtype, x.quant)  # fmt: skip
    cut = Op(
        name=f"{op.name}.in{i}",
        kind="slice",
        inputs=(x.name,),
        outputs=(name,),
        attrs={"starts": tuple(starts), "ends": tuple(ends), "steps": (1,) * len(x.shape)},
        source_nodes=(f"{op.name}.in{i}",),
    )
    groups = slice_groups(op, split, i)
    conv = replace(part, inputs=(name, *part.inputs[1:]), attrs={**part.attrs, "groups": groups})
    return cut, conv


def _slice_op(op: Op, split: LayerSplit, i: int, axis: int, tensors: dict[str, TensorSpec]) -> Op:
    """Slice ``i`` of ``op``; its output spec is added to ``tensors``."""
    r0, r1 = split.ranges[i]
    out = tensors[op.outputs[0]]
    shape = list(out.shape)
    shape[axis] = r1 - r0
    name = f"{out.name}.slice{i}"
    tensors[name] = TensorSpec(name, tuple(shape), out.dtype, out.quant)
    weights = {key: np.ascontiguousarray(w[r0:r1]) for key, w in op.weights.items()}
    return Op(
        name=split.slice_name(i),
        kind=op.kind,
        inputs=op.inputs,
        outputs=(name,),
        attrs=_slice_attrs(op.attrs, split.channels, r0, r1),
        weights=weights,
        source_nodes=(split.slice_name(i),),
    )


def _slice_attrs(attrs: Mapping[str, Any], channels: int, r0: int, r1: int) -> dict[str, Any]:
    """``attrs`` with the per-channel quantisation entries cut to ``[r0, r1)``."""
    out = dict(attrs)
    for key in _CHANNEL_ATTRS:
        value = out.get(key)
        if isinstance(value, tuple) and len(value) == channels and channels > 1:
            out[key] = value[r0:r1]
    if "weight_tensors" in out:
        out["weight_tensors"] = {k: f"{v}.slice{r0}_{r1}" for k, v in out["weight_tensors"].items()}
    return out


def slice_quant(q: QuantParams | None, channels: int, r0: int, r1: int) -> QuantParams | None:
    """A weight quantisation cut to rows ``[r0, r1)`` when per channel, else unchanged."""
    if q is None or len(q.scale) != channels or channels == 1:
        return q
    return QuantParams(q.scale[r0:r1], q.zero_point[r0:r1], q.axis)
