"""Operator granularity (issue 15): fused op groups, live tensors at every cut, order choice,
pass-through RAM, and the super-node chain reproduced exactly on models without branches."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter.cost.oparena import compaction, plan_op_layer
from splitter.errors import InputFileError
from splitter.graph.builder import GraphBuilder
from splitter.graph.chain import build_chain
from splitter.graph.opchain import _dag, choose_order, exact_order, fuse_ops, order_cost
from splitter.importers import load_chain, load_model
from splitter.ir import Graph
from splitter.manifest import submodel_boundaries

MODELS = Path(__file__).resolve().parent.parent / "models"
#: models without a branch: op granularity must give the super-node chain layer for layer
CHAINS = (
    "tiny_cnn.onnx",
    "kws_cnn.onnx",
    "kws_ds_cnn.onnx",
    "mobilenet_v1_025.onnx",
    "yamnet_256.onnx",
    "voxceleb.onnx",
    "mlperf_kws_ds_cnn_int8.tflite",
    "mlperf_vww_mobilenet_v1_025_int8.tflite",
    "sine_float.tflite",
)

F = 4  # bytes per float32


def skip_graph() -> Graph:
    """``x -> a (conv 4ch) -> b (conv) -> c (conv) -> add(c, a) -> dense``, 8x8 maps."""
    g = GraphBuilder((1, 2, 8, 8))
    a = g.conv(g.input, 4, 3, pad=1, name="a", seed=1)
    b = g.conv(a, 4, 3, pad=1, name="b", seed=2)
    c = g.conv(b, 4, 3, pad=1, name="c", seed=3)
    s = g.op("add", c, a, name="join")
    flat = g.op("reshape", s, shape=(1, -1), name="flat")
    return g.build(g.dense(flat, 3))


@pytest.mark.parametrize("name", CHAINS)
def test_models_without_branches_are_the_super_node_chain(name: str) -> None:
    """The same layers and costs, but the compute: an operator-granularity layer's firmware
    ends with the compaction ``memmove`` s that bring its output down to offset 0 (the
    super-node chain's firmware alternates the arena's ends instead), and its instructions
    count them; a reshape writing the layer's output stays a view there (the super-node
    chain's arena moves that output, so its reshape is a ``k_copy``,
    :func:`splitter.cost.kernels.copies`)."""
    from dataclasses import replace

    from splitter.cost.kernels import moves_instructions
    from splitter.cost.layer import table_instructions
    from splitter.measure.kernel_table import layer_moves

    graph = load_model(MODELS / name).graph
    supern, op = build_chain(graph), build_chain(graph, granularity="op")
    assert op.granularity == "op" and supern.granularity == "supernode"
    assert [(x.name, x.kind, replace(x.cost, instructions=())) for x in op.layers] == [
        (x.name, x.kind, replace(x.cost, instructions=())) for x in supern.layers
    ]
    assert all(len(layer.boundary) == 1 for layer in op.layers)
    for j, (a, b) in enumerate(zip(op.layers, supern.layers, strict=True)):
        moves = layer_moves(op, j)
        views = table_instructions(b.ops, graph.tensors, graph.layout or "NCHW")
        want = {k: v + moves_instructions(moves, k) for k, v in views}
        assert dict(a.cost.instructions) == pytest.approx(want, abs=0.11), a.name


def test_skip_tensor_crosses_every_cut_inside_the_branch() -> None:
    chain = build_chain(skip_graph(), granularity="op")
    assert [layer.name for layer in chain.layers] == ["input", "a", "b", "c", "join", "dense_5"]
    crossing = [[t.name for t in layer.boundary] for layer in chain.layers]
    assert crossing == [
        ["input"],
        ["a:out"],
        ["a:out", "b:out"],
        ["a:out", "c:out"],
        ["flat:out"],  # the reshape joined the add's layer
        ["dense_5:out"],
    ]
    fmap = 4 * 8 * 8 * F
    assert [layer.cost.out_bytes for layer in chain.layers[:5]] == [
        2 * 64 * F,
        fmap,
        2 * fmap,
        2 * fmap,
        fmap,
    ]
    # RAM_j: received tensors (the held skip included) + what the layer writes
    c, join = chain.layers[3], chain.layers[4]
    assert c.cost.ram == 3 * fmap  # holds a, reads b, writes c
    assert join.cost.ram == 3 * fmap  # reads a and c, writes the sum
    assert [t.name for t in join.reads] == ["c:out", "a:out"]
    assert build_chain(skip_graph()).layers[2].kind == "super"  # supernode: one block


def test_sub_model_boundaries_carry_every_live_tensor() -> None:
    chain = build_chain(skip_graph(), granularity="op")
    ins, outs = submodel_boundaries(chain, 3, 3)  # layer c alone: passes the skip on
    assert [t.name for t in ins] == ["a:out", "b:out"]
    assert [t.name for t in outs] == ["a:out", "c:out"]
    assert [t.name for t in submodel_boundaries(chain, 0, 1)[1]] == ["a:out"]
    assert [t.name for t in submodel_boundaries(chain, 4, 5)[1]] == ["dense_5:out"]


def test_order_keeps_live_bytes_low_on_resnet8() -> None:
    """The shortcut conv runs before the block's second conv: the wide input of the stage dies
    one layer earlier (two 32-channel maps cross instead of a 16-channel 32x32 one)."""
    graph = load_model(MODELS / "resnet8.onnx").graph
    chain = build_chain(graph, granularity="op")
    names = [layer.name for layer in chain.layers]
    assert names.index("stage2_shortcut") < names.index("stage2_conv2")
    groups = fuse_ops(graph)
    dag = _dag(groups, graph, lambda t: graph.tensors[t].nbytes)
    own = order_cost(dag, range(len(groups)))
    chosen = order_cost(dag, choose_order(groups, graph, lambda t: graph.tensors[t].nbytes))
    assert chosen < own
    assert max(layer.cost.out_bytes for layer in chain.layers[:-1]) == chosen[0]


def _all_orders(dag: object, n: int) -> list[list[int]]:
    preds = dag.preds  # type: ignore[attr-defined]
    out = []
    for perm in itertools.permutations(range(1, n)):
        order, done, ok = [0], 1, True
        for g in perm:
            if preds[g] & ~done:
                ok = False
                break
            order.append(g)
            done |= 1 << g
        if ok:
            out.append(order)
    return out


@st.composite
def random_dags(draw: st.DrawFn) -> Graph:
    """Up to 7 ops over 4x4 maps of 2, 4 or 6 channels: each op convolves an earlier tensor
    or adds two of the same width; every unread tensor is a graph output."""
    g = GraphBuilder((1, 2, 4, 4))
    made = [g.input]
    for k in range(draw(st.integers(2, 7))):
        a = draw(st.sampled_from(made))
        same = [t for t in made if g.tensors[t].shape == g.tensors[a].shape]
        if draw(st.booleans()) and len(same) > 1:
            made.append(g.op("add", a, draw(st.sampled_from(same)), name=f"add{k}"))
        else:
            width = 2 * draw(st.integers(1, 3))
            made.append(g.conv(a, width, 1, name=f"c{k}", seed=k))
    unread = [t for t in made[1:] if not any(t in op.inputs for op in g.ops)]
    return g.build(*unread)


@settings(max_examples=40, deadline=None)
@given(random_dags())
def test_exact_order_matches_brute_force(graph: Graph) -> None:
    groups = fuse_ops(graph)
    dag = _dag(groups, graph, lambda t: graph.tensors[t].nbytes)
    best = min(order_cost(dag, order) for order in _all_orders(dag, len(groups)))
    exact = exact_order(dag)
    assert exact is not None and order_cost(dag, exact) == best
    assert exact_order(dag, limit=1) is None or len(groups) <= 2  # the cap gives up


def test_past_the_state_cap_the_heuristics_order_a_valid_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("splitter.graph.opchain.EXACT_STATES", 1)
    monkeypatch.setattr(
        "splitter.graph.opchain.exact_order", lambda dag, limit=1: None, raising=True
    )
    chain = build_chain(load_model(MODELS / "resnet8.onnx").graph, granularity="op")
    seen = {chain.graph.inputs[0]} if chain.graph else set()
    for layer in chain.layers[1:]:
        assert all(t.name in seen for t in layer.reads), layer.name
        seen.add(layer.output.name)
        seen.update(op.outputs[0] for op in layer.ops)


def test_compaction_moves_down_in_order_or_stages() -> None:
    assert compaction([("a", 8, 0, 4), ("b", 16, 4, 4)], 20) == (
        ("a", 8, 0, 4),
        ("b", 16, 4, 4),
    )
    staged = compaction([("y1", 8, 0, 4), ("y2", 0, 4, 8)], 12)  # targets swap the sources
    assert staged == (("y1", 8, 12, 4), ("y2", 0, 16, 8), ("y1", 12, 0, 4), ("y2", 16, 4, 8))


def test_layer_arena_packs_inputs_and_places_outputs_above() -> None:
    graph = skip_graph()
    join = next(op for op in graph.ops if op.name == "join")
    flat = next(op for op in graph.ops if op.name == "flat")
    plan = plan_op_layer(
        (join, flat), ["a:out", "c:out"], ["flat:out"], graph.tensors, lambda s: s.itemsize
    )
    fmap = 4 * 8 * 8 * F
    assert plan.offsets["a:out"] == 0 and plan.offsets["c:out"] == fmap
    assert plan.offsets["join:out"] == plan.offsets["flat:out"] == 2 * fmap  # view aliases
    assert plan.size == 3 * fmap
    assert plan.moves == (("flat:out", 2 * fmap, 0, fmap),)


def test_granularity_is_checked_and_profiles_ignore_it() -> None:
    with pytest.raises(InputFileError, match="granularity 'ops' is unknown"):
        build_chain(skip_graph(), granularity="ops")
    profile = MODELS / "profiles" / "thesis_profiles.json"
    assert len(load_chain(f"{profile}#tiny_cnn", granularity="op")) == 5


@settings(max_examples=40, deadline=None)
@given(random_dags())
def test_layer_arenas_keep_every_live_tensor_intact(graph: Graph) -> None:
    """Simulate each op layer on a byte arena: received tensors written packed, each op's
    outputs and scratch written at their offsets in order, then the compaction moves; every
    tensor live after the layer must then hold its own bytes at its packed offset."""
    chain = build_chain(graph, granularity="op")
    before = [graph.inputs[0]]
    for layer in chain.layers:
        after = [t.name for t in layer.boundary]
        plan = plan_op_layer(layer.ops, before, after, graph.tensors, lambda s: s.itemsize)
        assert plan.size == layer.cost.ram
        arena = np.full(plan.size, -1, np.int64)

        def write(name: str, tag: int, arena: np.ndarray = arena, plan: object = plan) -> None:
            off, n = plan.offsets[name], plan.sizes[name]  # type: ignore[attr-defined]
            arena[off : off + n] = tag * 10_000 + np.arange(n)

        tags = {name: k + 1 for k, name in enumerate(graph.tensors)}
        for name in before:
            write(name, tags[name])
        for op in layer.ops:
            if f"{op.name}:scratch" in plan.offsets:
                write(f"{op.name}:scratch", 9_999)
            if op.kind != "reshape":
                write(op.outputs[0], tags[op.outputs[0]])
        for _name, src, dst, n in plan.moves:
            arena[dst : dst + n] = arena[src : src + n].copy()
        offset = 0
        for name in after:
            n = graph.tensors[name].nbytes
            assert np.array_equal(arena[offset : offset + n], tags[name] * 10_000 + np.arange(n))
            offset += n
        before = after
