"""Super-nodes: random DAGs (hypothesis) become strict chains with one tensor per boundary."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter.errors import InputFileError, ShapeError
from splitter.graph.builder import GraphBuilder
from splitter.graph.chain import build_chain
from splitter.graph.supernodes import find_regions
from splitter.ir import Chain, Graph


@st.composite
def random_dags(draw: st.DrawFn) -> Graph:
    """Ops over (1, 4) tensors: 'relu' on one earlier tensor, 'add' over 2-3 earlier tensors."""
    b = GraphBuilder((1, 4))
    available = [b.input]
    n = draw(st.integers(1, 18))
    for i in range(n):
        window = available[-draw(st.integers(1, min(6, len(available)))) :]
        k = draw(st.integers(1, min(3, len(window))))
        inputs = draw(st.lists(st.sampled_from(window), min_size=k, max_size=k, unique=True))
        kind = "relu" if len(inputs) == 1 else "add"
        available.append(b.op(kind, *inputs, name=f"op{i}"))
    inner = available[1:-1]
    extra = draw(st.lists(st.sampled_from(inner), max_size=2, unique=True)) if inner else []
    return b.build(available[-1], *extra)


def crossing(chain: Chain, j: int) -> set[str]:
    """Tensors made in layers <= j (or the graph input) that layers > j or the outputs need."""
    graph = chain.graph
    assert graph is not None
    made = set(graph.inputs) | {
        t for layer in chain.layers[: j + 1] for op in layer.ops for t in op.outputs
    }
    needed = {t for layer in chain.layers[j + 1 :] for op in layer.ops for t in op.inputs}
    return made & (needed | set(graph.outputs))


def check_chain(graph: Graph, chain: Chain) -> None:
    """Every op exactly once, topological schedule, one tensor across every boundary."""
    scheduled = [op for layer in chain.layers for op in layer.ops]
    assert sorted(map(id, scheduled)) == sorted(map(id, graph.ops))
    seen = set(graph.inputs)
    for op in scheduled:
        assert set(op.inputs) <= seen, f"{op.name} scheduled before its inputs"
        seen.update(op.outputs)
    assert chain.layers[0].kind == "input" and chain.layers[0].ops == ()
    last_made = {t for op in chain.layers[-1].ops for t in op.outputs}
    assert set(graph.outputs) <= last_made, "every graph output comes out of the last layer"
    for j in range(len(chain.layers) - 1):
        assert crossing(chain, j) == {chain.layers[j].output.name}
        nxt = chain.layers[j + 1].input
        assert nxt is not None and nxt.name == chain.layers[j].output.name


def check_minimal(graph: Graph, chain: Chain) -> None:
    """No layer could be cut after an inner op whose output alone crosses (minimal regions)."""
    sinks = set(graph.outputs)
    order = [op for layer in chain.layers for op in layer.ops]
    ends = {len([o for lay in chain.layers[: j + 1] for o in lay.ops]) for j in range(len(chain))}
    for p, op in enumerate(order[:-1], start=1):
        if p in ends:
            continue
        made = set(graph.inputs) | {t for o in order[:p] for t in o.outputs}
        needed = {t for o in order[p:] for t in o.inputs} | sinks
        dead = {t for o in order for t in o.outputs} - {t for o in order for t in o.inputs} - sinks
        crosses = made & (needed | dead)
        multi = len(sinks | dead) > 1
        assert not (crosses == set(op.outputs) and not (multi and crosses & (sinks | dead)))


@settings(max_examples=120, deadline=None)
@given(random_dags())
def test_random_dag_becomes_a_valid_minimal_chain(graph: Graph) -> None:
    chain = build_chain(graph)
    check_chain(graph, chain)
    check_minimal(graph, chain)


def test_residual_block_is_one_super_node_between_ordinary_layers() -> None:
    b = GraphBuilder((1, 8, 8, 8))
    x = b.conv(b.input, 8, 1, name="stem")
    y = b.conv(x, 8, 3, pad=1, name="body1")
    y = b.conv(y, 8, 3, pad=1, name="body2")
    z = b.op("add", x, y, name="res_add")
    w = b.conv(z, 4, 1, name="head")
    graph = b.build(w)
    chain = build_chain(graph)
    check_chain(graph, chain)
    assert [layer.op_label for layer in chain.layers] == [
        "input",
        "conv2d",
        "super(3 ops)",
        "conv2d",
    ]
    assert chain.layers[2].name == "body1..res_add"
    assert [op.name for op in chain.layers[2].ops] == ["body1", "body2", "res_add"]


def test_two_inputs_take_the_op_chain_and_regions_refuse_them() -> None:
    """A super-node cut carries one tensor: find_regions refuses two graph inputs in one line
    naming --granularity op, and build_chain takes the op chain for them (issue 29)."""
    b = GraphBuilder((1, 4))
    y = b.op("relu", b.input)
    graph = b.build(y)
    tensors = {**graph.tensors, "other": graph.tensors["input"].__class__("other", (1, 4))}
    two = Graph("two", graph.ops, tensors, ("input", "other"), graph.outputs)
    with pytest.raises(InputFileError, match=r"exactly one graph input.*2.*--granularity op"):
        find_regions(two)
    chain = build_chain(two)
    assert chain.granularity == "op"
    assert [t.name for t in chain.layers[0].boundary] == ["input"]  # "other" is read by no op


def test_multiple_outputs_collapse_the_tail_into_one_sink_layer() -> None:
    b = GraphBuilder((1, 4))
    x = b.op("relu", b.input, name="trunk")
    head1 = b.op("sigmoid", x, name="head1")
    head2 = b.op("tanh", x, name="head2")
    graph = b.build(head1, head2)
    chain = build_chain(graph)
    check_chain(graph, chain)
    assert [layer.op_label for layer in chain.layers] == ["input", "relu", "super(2 ops)"]
    assert chain.layers[-1].output.name == head2
    assert chain.layers[-1].cost.out_bytes == 32  # both outputs are delivered


def test_unknown_tensor_is_a_shape_error() -> None:
    b = GraphBuilder((1, 4))
    y = b.op("relu", b.input)
    graph = b.build(y)
    bad = graph.ops[0].__class__("r", "relu", ("ghost",), ("z",))
    broken = Graph("g", (*graph.ops, bad), {**graph.tensors}, graph.inputs, ("z",))
    with pytest.raises(ShapeError, match="ghost"):
        build_chain(broken)
