"""The arena rule (splitter/cost/memory.py) on hand-built layers."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from splitter.cost.layer import itemsize_function
from splitter.cost.memory import LayerMemory, plan_layer_memory
from splitter.graph.builder import GraphBuilder
from splitter.graph.chain import build_chain
from splitter.ir import Graph, Layer, Op


def _plan(b: GraphBuilder, ops: Sequence[Op], inp: str, out: str, act: int | None = None):
    return plan_layer_memory(ops, b.tensors, inp, out, itemsize_function(act))


def _overlap(m: LayerMemory, a: str, b: str) -> bool:
    return m.offsets[a] < m.offsets[b] + m.sizes[b] and m.offsets[b] < m.offsets[a] + m.sizes[a]


def test_single_op_layer_is_input_plus_output() -> None:
    b = GraphBuilder((1, 96, 112, 112))
    y = b.conv(b.input, 96, 3, stride=2, pad=1, groups=96)
    m = _plan(b, b.ops, b.input, y, act=1)
    assert m.size == 96 * 112 * 112 + 96 * 56 * 56 == 1505280
    assert m.offsets[b.input] == 0
    assert m.offsets[y] == 96 * 112 * 112
    assert m.size == m.offsets[y] + m.sizes[y]


def test_dtype_itemsize_is_used_without_override() -> None:
    b = GraphBuilder((1, 4), dtype="int8")
    y = b.op("relu", b.input)
    assert _plan(b, b.ops, b.input, y).size == 8
    assert _plan(b, b.ops, b.input, y, act=4).size == 32


def test_input_layer_is_one_buffer() -> None:
    b = GraphBuilder((1, 3, 8, 8))
    m = _plan(b, (), b.input, b.input)
    assert (m.size, m.offsets[b.input]) == (3 * 64 * 4, 0)


def test_reshape_aliases_its_input() -> None:
    b = GraphBuilder((1, 48, 1, 1))
    y = b.op("relu", b.input)
    z = b.op("reshape", y, shape=(1, 48))
    m = _plan(b, b.ops, b.input, z)
    assert m.offsets[z] == m.offsets[y] == 192
    assert m.size == 384


def test_fused_conv_pool_keeps_conv_output_live_and_output_on_top() -> None:
    b = GraphBuilder((1, 1, 28, 28))
    c = b.conv(b.input, 16, 3, act="relu")
    p = b.op("maxpool", c, kernel=(2, 2), strides=(2, 2))
    m = _plan(b, b.ops, b.input, p)
    assert m.offsets[c] == 3136  # cannot overlap the conv's input
    assert m.offsets[p] == 3136 + 43264  # above the live conv output
    assert m.size == 3136 + 43264 + 10816


def test_residual_block_peak_keeps_the_skip_live() -> None:
    # x -> expand -> dw -> project -> add(x): x stays live until the add
    b = GraphBuilder((1, 24, 56, 56))
    e = b.conv(b.input, 144, 1)
    d = b.conv(e, 144, 3, pad=1, groups=144)
    p = b.conv(d, 24, 1)
    a = b.op("add", b.input, p)
    m = _plan(b, b.ops, b.input, a, act=1)
    x, big = 24 * 56 * 56, 144 * 56 * 56
    for t in (e, d, p):
        assert not _overlap(m, b.input, t)  # skip tensor live through the whole block
    assert not _overlap(m, e, d)  # dw reads e while writing d
    assert m.offsets[p] == 0 + x  # e is dead by then: first fit reuses its space
    assert m.size == x + 2 * big  # peak during the dw op; the output sits below it
    assert m.offsets[a] + m.sizes[a] == m.size
    assert m.offsets[a] >= m.offsets[p] + m.sizes[p]


def test_output_is_above_everything_live_during_the_last_op() -> None:
    b = GraphBuilder((1, 100))
    u = b.op("relu", b.input)
    v = b.op("relu", b.input)
    w = b.op("add", u, v)
    m = _plan(b, b.ops, b.input, w)
    top_live = max(m.offsets[t] + m.sizes[t] for t in (u, v))
    assert m.offsets[w] >= top_live
    assert m.size == m.offsets[w] + m.sizes[w] == 4 * 400


@st.composite
def layer_graphs(draw: st.DrawFn) -> Graph:
    """Random DAGs over (1, n) tensors of random widths: relu, reshape (alias) and add."""
    b = GraphBuilder((1, draw(st.integers(1, 64))))
    available = [b.input]
    for i in range(draw(st.integers(1, 14))):
        window = available[-draw(st.integers(1, min(5, len(available)))) :]
        first = draw(st.sampled_from(window))
        kind = draw(st.sampled_from(["relu", "reshape", "add", "concat"]))
        if kind == "relu":
            available.append(b.op("relu", first, name=f"op{i}"))
        elif kind == "reshape":
            available.append(b.op("reshape", first, shape=(1, -1), name=f"op{i}"))
        else:
            other = draw(st.sampled_from(window))
            same = b.tensors[other].shape == b.tensors[first].shape
            if kind == "add" and same:
                available.append(b.op("add", first, other, name=f"op{i}"))
            else:
                available.append(b.op("concat", first, other, axis=1, name=f"op{i}"))
    return b.build(available[-1])


def _aliases(layer: Layer) -> set[str]:
    """Reshape outputs that alias their source (all but an output that would alias the input)."""
    life = _intervals(layer)
    return {op.outputs[0] for op in layer.ops if op.kind == "reshape"} - set(life)


def _intervals(layer: Layer) -> dict[str, tuple[int, int]]:
    """Live interval of every tensor of the layer, recomputed from the ops (aliases merged)."""
    assert layer.input is not None
    last = max(len(layer.ops) - 1, 0)
    root = {op.outputs[0]: op.inputs[0] for op in layer.ops if op.kind == "reshape"}

    def r(t: str) -> str:
        return r(root[t]) if t in root else t

    if r(layer.output.name) == layer.input.name and any(o.kind != "reshape" for o in layer.ops):
        del root[layer.output.name]  # the arena rule gives this output its own block (a copy)
    life = {layer.input.name: [0, 0]}
    for k, op in enumerate(layer.ops):
        for t in op.inputs:
            life[r(t)][1] = max(life[r(t)][1], k)
        if op.outputs[0] not in root:
            life[op.outputs[0]] = [k, k]
    life[r(layer.output.name)][1] = last
    return {t: (a, b) for t, (a, b) in life.items()}


@settings(max_examples=80, deadline=None)
@given(layer_graphs(), st.sampled_from([None, 1, 2]))
def test_random_layers_never_overlap_live_tensors(graph: Graph, act: int | None) -> None:
    chain = build_chain(graph, activation_bytes=act)
    for layer in chain.layers:
        assert layer.input is not None
        m = plan_layer_memory(
            layer.ops, graph.tensors, layer.input.name, layer.output.name, itemsize_function(act)
        )
        assert m.size == layer.cost.ram
        assert m.offsets[layer.input.name] == 0
        out = layer.output.name
        assert m.size == m.offsets[out] + m.sizes[out]
        assert all(m.offsets[t] + m.sizes[t] <= m.size for t in m.offsets)
        life = _intervals(layer)
        names = sorted(life)
        for i, a in enumerate(names):
            for b_ in names[i + 1 :]:
                (s1, e1), (s2, e2) = life[a], life[b_]
                if s1 <= e2 and s2 <= e1 and m.sizes[a] and m.sizes[b_]:
                    assert not _overlap(m, a, b_), (layer.name, a, b_)
        for op in layer.ops:  # an alias shares its source's bytes
            if op.kind == "reshape" and op.outputs[0] in _aliases(layer):
                assert m.offsets[op.outputs[0]] == m.offsets[op.inputs[0]]
