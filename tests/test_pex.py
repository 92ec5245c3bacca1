"""PEX partial execution (splitter.cost.pex): the paper's MobileNet-v2 figure, hand cases, and
the dynamic programme against brute force over every set of loops."""

from __future__ import annotations

import numpy as np
import pytest
from test_graph_chain import _models_build

from splitter.cost.layer import itemsize_function
from splitter.cost.pex import partial_role, partial_schedule
from splitter.importers import load_graph
from splitter.ir import Graph, Op, TensorSpec

ONE_BYTE = itemsize_function(1)


def test_mobilenet_v2_224_int8_peak_is_pex_376_kb() -> None:
    """PEX Table 3: 1505 kB ordinary, 376 kB with partial execution (8-bit activations)."""
    graph = load_graph(_models_build().ensure_model("mobilenet_v2_224"))
    answer = partial_schedule(graph, ONE_BYTE)
    assert answer.ordinary_peak == 1_505_280
    # conv0 input 224x224x3 + one channel of conv0 and of the depthwise (112x112 each) + the
    # 112x112x16 projection output: 150528 + 2 * 12544 + 200704
    assert answer.peak == 376_320  # the paper's '376 kB' (it rounds 1_505_280 to '1505 kB')
    assert round(answer.peak / 1000) == 376 and answer.peak <= 376 * 1024
    first = answer.loops[0]
    assert answer.describe(first).startswith("features_0_conv -> features_1_dw -> features_1_")
    assert first.channels == 32
    # with 32-bit accumulators (what integer kernels need) the projection output costs 4x
    assert partial_schedule(graph, ONE_BYTE, accumulator_bytes=4).peak > answer.peak


def _spec(name: str, c: int, hw: int) -> TensorSpec:
    return TensorSpec(name, (1, c, hw, hw))


def _conv(name: str, src: str, dst: str, groups: int = 1) -> Op:
    return Op(name, "conv2d", (src,), (dst,), {"groups": groups})


def test_conv_dw_conv_loop_by_hand() -> None:
    """x(8ch) -> conv -> a(16ch) -> dw -> b(16ch) -> conv -> y(4ch), 10x10, one byte each."""
    tensors = {
        "x": _spec("x", 8, 10),
        "a": _spec("a", 16, 10),
        "b": _spec("b", 16, 10),
        "y": _spec("y", 4, 10),
    }
    ops = (_conv("c1", "x", "a"), _conv("dw", "a", "b", groups=16), _conv("c2", "b", "y"))
    graph = Graph("g", ops, tensors, ("x",), ("y",), layout="NCHW")
    answer = partial_schedule(graph, ONE_BYTE)
    assert answer.ordinary_peak == 1600 + 1600  # dw: a + b whole (x is dead after c1)
    assert answer.peak == 800 + 100 + 100 + 400  # x + a channel + b channel + y
    assert [(lp.first, lp.last, lp.channels) for lp in answer.loops] == [(0, 2, 16)]
    two = partial_schedule(graph, ONE_BYTE, channels_per_step=2)
    assert two.peak == 800 + 200 + 200 + 400


def test_roles() -> None:
    tensors = {"a": _spec("a", 16, 4), "b": _spec("b", 16, 4), "c": _spec("c", 8, 4)}
    assert partial_role(_conv("c", "a", "b"), tensors, "NCHW") == "aggregate"
    assert partial_role(_conv("d", "a", "b", groups=16), tensors, "NCHW") == "channelwise"
    assert partial_role(_conv("g", "a", "c", groups=8), tensors, "NCHW") == ""  # grouped
    assert partial_role(Op("s", "softmax", ("a",), ("b",)), tensors, "NCHW") == ""
    assert partial_role(Op("r", "relu", ("a",), ("b",)), tensors, "NCHW") == "channelwise"


def _random_graph(rng: np.random.Generator) -> Graph:
    """A chain of convs / depthwise convs / relus with an occasional residual add."""
    tensors: dict[str, TensorSpec] = {}
    ops: list[Op] = []
    c = int(rng.integers(2, 9))
    hw = int(rng.integers(2, 6))
    cur = "t0"
    tensors[cur] = _spec(cur, c, hw)
    skip: str | None = None
    for k in range(int(rng.integers(2, 9))):
        kind = rng.choice(["conv", "dw", "relu", "add"])
        out = f"t{k + 1}"
        if kind == "conv":
            c = int(rng.integers(2, 9))
            ops.append(_conv(f"op{k}", cur, out))
        elif kind == "dw":
            ops.append(_conv(f"op{k}", cur, out, groups=c))
        elif kind == "add" and skip is not None and tensors[skip].shape == tensors[cur].shape:
            ops.append(Op(f"op{k}", "add", (cur, skip), (out,)))
        else:
            ops.append(Op(f"op{k}", "relu", (cur,), (out,)))
        tensors[out] = _spec(out, c, hw)
        if rng.random() < 0.3:
            skip = out
        cur = out
    return Graph("r", tuple(ops), tensors, ("t0",), (cur,), layout="NCHW")


@pytest.mark.parametrize("seed", range(60))
def test_least_peak_equals_brute_force(seed: int) -> None:
    """Every sequence of ordinary steps and pairwise-disjoint loops, its peak computed directly."""
    from splitter.cost.pex import _Liveness, _loops

    graph = _random_graph(np.random.default_rng(seed))
    answer = partial_schedule(graph, ONE_BYTE)
    live = _Liveness(graph.ops, graph, ONE_BYTE)
    steps = [live.step(k) for k in range(len(graph.ops))]
    candidates = [lp for group in _loops(graph.ops, graph, live, 1, None).values() for lp in group]
    n = len(steps)

    def least(pos: int) -> int:
        """Least peak of ops pos..n-1: run op pos whole, or start any loop there (brute force)."""
        if pos == n:
            return 0
        options = [max(steps[pos], least(pos + 1))]
        options += [max(lp.memory, least(lp.last + 1)) for lp in candidates if lp.first == pos]
        return min(options)

    best = least(0)
    assert answer.peak == best
    assert answer.ordinary_peak == max(steps)
    covered = {k for lp in answer.loops for k in range(lp.first, lp.last + 1)}
    uncovered = [steps[k] for k in range(n) if k not in covered]
    assert max([lp.memory for lp in answer.loops] + uncovered) == answer.peak  # the schedule
    assert len(covered) == sum(lp.last - lp.first + 1 for lp in answer.loops)  # disjoint
