"""Cut a DAG of ops into the smallest single-entry / single-exit regions (super-nodes).

The ops form a networkx DiGraph (edges = activation tensors) with a virtual ``SOURCE`` feeding
the consumers of the graph input and a virtual ``SINK`` fed by every graph output (and by any
dead-end op, so every op lies on a SOURCE -> SINK path). An op ``v`` is a *cut point* when

* ``v`` dominates SINK (``networkx.immediate_dominators`` from SOURCE) and post-dominates SOURCE
  (dominators of the reversed graph from SINK): every SOURCE -> SINK path passes through ``v``, so
  every other op is an ancestor or a descendant of ``v`` and the only edges from
  ``ancestors + {v}`` to ``descendants`` leave ``v``;
* ``v`` hands exactly one tensor to later ops (or to SINK);
* with several sink tensors (a multi-output graph), ``v`` produces none of them, so the whole
  tail that builds the outputs stays in one final region (the virtual sink).

Every cut point ends a region, so exactly one tensor crosses each boundary; because *every* such
op is a cut, the regions are as small as they can be. A region with one op is an ordinary layer;
one with several ops is a super-node whose ops keep a valid (stable topological) schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from splitter.errors import InputFileError, ShapeError
from splitter.ir import Graph, Op

SOURCE = -1
SINK = -2


@dataclass(frozen=True)
class Region:
    """A run of ops between two cuts: its single ``input`` and ``output`` tensor names."""

    ops: tuple[Op, ...]
    input: str
    output: str


def op_digraph(graph: Graph) -> nx.DiGraph:
    """Ops as nodes ``0..n-1`` (their index in ``graph.ops``) plus ``SOURCE``/``SINK``.

    An edge ``a -> b`` carries tensor names in its ``tensors`` attribute.
    """
    producer = _producers(graph)
    dag = nx.DiGraph()
    dag.add_nodes_from([SOURCE, SINK, *range(len(graph.ops))])
    consumed: set[str] = set()
    for b, op in enumerate(graph.ops):
        for name in op.inputs:
            if name in graph.inputs:
                a = SOURCE
            elif name in producer:
                a = producer[name]
            else:
                raise ShapeError(
                    f"{graph.source_path or graph.name}: op '{op.name}' reads tensor '{name}' "
                    "that is neither a graph input nor produced by an op; re-export the model"
                )
            _add_edge(dag, a, b, name)
            consumed.add(name)
        if not op.inputs:
            _add_edge(dag, SOURCE, b, "")
    for name in sink_tensors(graph):
        _add_edge(dag, producer.get(name, SOURCE), SINK, name)
    if not nx.is_directed_acyclic_graph(dag):
        raise ShapeError(f"{graph.source_path or graph.name}: the op graph has a cycle")
    return dag


def sink_tensors(graph: Graph) -> tuple[str, ...]:
    """Graph outputs followed by dead-end op outputs (produced, never consumed, not outputs)."""
    consumed = {name for op in graph.ops for name in op.inputs}
    dead = tuple(
        name
        for op in graph.ops
        for name in op.outputs
        if name not in consumed and name not in graph.outputs
    )
    return tuple(graph.outputs) + dead


def _producers(graph: Graph) -> dict[str, int]:
    producer: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for name in op.outputs:
            if name in producer:
                raise ShapeError(
                    f"{graph.source_path or graph.name}: tensor '{name}' is produced twice "
                    f"(ops '{graph.ops[producer[name]].name}' and '{op.name}')"
                )
            producer[name] = i
    return producer


def _add_edge(dag: nx.DiGraph, a: int, b: int, name: str) -> None:
    if dag.has_edge(a, b):
        dag.edges[a, b]["tensors"].append(name)
    else:
        dag.add_edge(a, b, tensors=[name])


def _dominator_chain(dag: nx.DiGraph, start: int, target: int) -> set[int]:
    """Ops on the immediate-dominator chain of ``target`` in ``dag`` rooted at ``start``."""
    idom = nx.immediate_dominators(dag, start)
    chain: set[int] = set()
    node = idom.get(target, start)
    while node != start:
        chain.add(node)
        node = idom[node]
    return chain


def cut_points(graph: Graph, dag: nx.DiGraph) -> set[int]:
    """Indices of the ops that end a region (module docstring)."""
    dominators = _dominator_chain(dag, SOURCE, SINK)
    post_dominators = _dominator_chain(dag.reverse(copy=False), SINK, SOURCE)
    sinks = set(sink_tensors(graph))
    cuts = set()
    for v in dominators & post_dominators:
        handed = {t for _, _, ts in dag.out_edges(v, data="tensors") for t in ts}
        if len(handed) != 1:
            continue
        if len(sinks) > 1 and handed & sinks:
            continue
        cuts.add(v)
    return cuts


def schedule(dag: nx.DiGraph) -> list[int]:
    """Op indices in a stable topological order (ties broken by file order)."""
    order = nx.lexicographical_topological_sort(dag, key=lambda n: (n == SINK, n))
    return [n for n in order if n not in (SOURCE, SINK)]


def single_input(graph: Graph) -> None:
    """Raise unless ``graph`` has exactly one input: a super-node chain's cut after the input
    layer carries one tensor (a model with several inputs is chained at operator granularity,
    :func:`splitter.graph.chain.build_chain`)."""
    if len(graph.inputs) != 1:
        raise InputFileError(
            f"{graph.source_path or graph.name}: a super-node chain needs exactly one graph "
            f"input, the model has {len(graph.inputs)} ({', '.join(graph.inputs) or 'none'}); "
            "chain it with --granularity op"
        )


def find_regions(graph: Graph) -> list[Region]:
    """Split ``graph`` (single input) into minimal single-entry / single-exit regions."""
    single_input(graph)
    dag = op_digraph(graph)
    cuts = cut_points(graph, dag)
    regions: list[Region] = []
    current: list[int] = []
    entry = graph.inputs[0]
    for v in schedule(dag):
        current.append(v)
        if v in cuts:
            (exit_name,) = {t for _, _, ts in dag.out_edges(v, data="tensors") for t in ts}
            regions.append(Region(tuple(graph.ops[i] for i in current), entry, exit_name))
            entry, current = exit_name, []
    if current:
        regions.append(Region(tuple(graph.ops[i] for i in current), entry, graph.outputs[-1]))
    return regions
