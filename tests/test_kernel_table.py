"""The kernel cost table (splitter/cost/kernel_costs.json): fresh, complete, and what it means.

The table is measured by ``make costs`` (splitter/measure/kernel_table.py) under QEMU -icount;
its ``sources`` hash covers the kernels, the C generator, the cost features and the compiler
version, so a kernel change without regenerating the table fails here, naming the command.
How well the table predicts whole sub-models is ``benchmarks/costs.py``'s job; the one
measurement here (tiny_cnn, one ELF, a few seconds) checks that the instruction counts are
reproducible: the same sources give the same counts as the table holds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from splitter.cost.cpi import EMULATED_INSTRUCTIONS_PER_S, device_cpi
from splitter.cost.kernels import (
    build_isa,
    build_key,
    copies,
    kernel_table,
    op_features,
    op_terms,
    part_build_key,
)
from splitter.graph.chain import build_chain
from splitter.hardware.catalog import get_part
from splitter.importers import load_model
from splitter.ir import Chain, Device, LayerCost, Op, QuantParams, TensorSpec
from splitter.partition.problem import layer_time, table_time

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


@pytest.mark.toolchain
def test_table_was_measured_from_the_current_sources() -> None:
    from splitter.measure.kernel_table import sources_hash

    assert kernel_table()["sources"] == sources_hash(), (
        "splitter/cost/kernel_costs.json is stale (kernels, codegen, the cost features or the "
        "compiler changed); regenerate it with `make costs` and commit it"
    )


def test_generator_and_table_take_the_isa_from_the_core() -> None:
    """Codegen's int8 variant and the table's build both come from ``Core.isa``."""
    from splitter.codegen.ops.q8_variants import isa_of
    from splitter.hardware.cores import CORES

    for core in CORES.values():
        assert isa_of(core.name) == core.isa == build_key(core.name).split(".")[1]


def test_every_core_has_a_build() -> None:
    builds = set(kernel_table()["builds"])
    for cpu in ("cortex-m0plus", "cortex-m4", "cortex-m7"):
        assert build_key(cpu) in builds
        assert build_key(cpu, emulated=True) in builds


@pytest.mark.parametrize("model", ["tiny_cnn.onnx", "mlperf_kws_ds_cnn_int8.tflite",
                                   "tiny_cnn_float.tflite"])  # fmt: skip
def test_the_models_kernels_are_in_the_table(model: str) -> None:
    """Every op of these models has a fitted variant (not the fallback) on every build."""
    graph = load_model(MODELS / model).graph
    for build, entry in kernel_table()["builds"].items():
        for op in graph.ops:
            for term in op_terms(op, graph.tensors, graph.layout, isa=build_isa(build)):
                if op.kind == "reshape":
                    continue
                assert term.variant in entry["variants"], (build, term.variant)


def _conv(pads: tuple[int, int, int, int], groups: int = 1) -> tuple[Op, dict[str, TensorSpec]]:
    w = np.zeros((8, 4 // groups, 3, 3), np.float32)
    attrs = {"kernel": (3, 3), "strides": (1, 1), "pads": pads, "groups": groups, "act": "relu"}
    op = Op("c", "conv2d", ("x",), ("y",), attrs, {"W": w})
    oh = 6 + pads[0] + pads[2] - 2
    tensors = {"x": TensorSpec("x", (1, 4, 6, 6), "float32"),
               "y": TensorSpec("y", (1, 8, oh, oh), "float32")}  # fmt: skip
    return op, tensors


def test_conv_features_by_hand() -> None:
    """k_conv2d's blocked path on a 6x6 input, 3x3 kernel, pad 1, 8 channels (2 blocks of 4):
    interior columns 1..4 (lo 1, hi 5) run as 2 pixel pairs per row, columns 0 and 5 one at a
    time; valid kernel rows per output row 2, 3, 3, 3, 3, 2 (16), columns the same. The fast
    and border MACs add up to the valid MACs, ``8 * 4 * 16 * 16``."""
    op, tensors = _conv((1, 1, 1, 1))
    f = op_features(op, tensors, "NCHW")
    assert f == {"call": 1, "rows": 12, "pair": 24, "pix": 24, "mac": 2 * 4 * 4 * 4 * 3 * 16,
                 "inner": 2 * 2 * 4 * 16, "edge": 2 * 4 * 4 * 16 * 4}  # fmt: skip
    assert f["mac"] + f["edge"] == 8 * 4 * 16 * 16
    op, tensors = _conv((0, 0, 0, 0))
    f = op_features(op, tensors, "NCHW")
    assert f["edge"] == 0 and f["mac"] == 8 * 4 * 9 * 16  # 4x4 outputs, all interior pairs
    terms = op_terms(op, tensors, "NCHW")
    assert [t.variant for t in terms] == ["conv2d.conv/NCHW/float32", "act.relu/NCHW/float32"]


def test_pool_loops_by_hand() -> None:
    """3x3 max pool, stride 1, pad 1 on 5x5, 2 channels: the valid tap rows per output row are
    2, 3, 3, 3, 2 (13), the same per column, so 13 x 13 valid taps a channel. NCHW
    (``pool_nchw``): per channel, row, output, valid tap row (a ``kx`` loop) and valid tap;
    NHWC (``pool_nhwc``): per output row, pixel, output, valid tap row, valid tap (a channel
    loop each) and valid tap x channel."""
    op = Op("p", "maxpool", ("x",), ("y",), {"kernel": (3, 3), "strides": (1, 1),
                                             "pads": (1, 1, 1, 1)})  # fmt: skip
    tensors = {"x": TensorSpec("x", (1, 2, 5, 5), "float32"),
               "y": TensorSpec("y", (1, 2, 5, 5), "float32")}  # fmt: skip
    f = op_features(op, tensors, "NCHW")
    assert f == {"call": 1, "in": 2, "rows": 10, "out": 50, "inner": 2 * 5 * 13,
                 "mac": 2 * 13 * 13}  # fmt: skip
    nhwc = {"x": TensorSpec("x", (1, 5, 5, 2), "float32"),
            "y": TensorSpec("y", (1, 5, 5, 2), "float32")}  # fmt: skip
    f = op_features(op, nhwc, "NHWC")
    assert (f["rows"], f["pix"], f["out"], f["edge"], f["inner"], f["mac"]) == (
        5, 25, 50, 5 * 13, 13 * 13, 2 * 13 * 13)  # fmt: skip


def test_pad_reduce_dense_copy_loops_by_hand() -> None:
    """``k_pad`` of (1, 3, 4, 5) to (1, 3, 5, 6): the output filled (90), 12 input rows of 5
    copied (5 < 8: no pass of gcc's 8-way unrolled copy, 5 steps each); a mean over 3 x 3 of
    10 NHWC channels (``k_mean``: red 9 = one unrolled pass of 8 plus 1); an int8 dense
    1280 -> 10 (two blocks of four rows, two lone rows); a reshape copying 10 floats (two
    passes of 4, 2 left) only when it writes the layer's output."""
    pad = Op("p", "pad", ("x",), ("y",), {"pads": (0, 0, 0, 0, 0, 0, 1, 1)})
    tensors = {"x": TensorSpec("x", (1, 3, 4, 5), "float32"),
               "y": TensorSpec("y", (1, 3, 5, 6), "float32")}  # fmt: skip
    assert op_features(pad, tensors, "NCHW") == {"call": 1, "out": 90, "rows": 12, "in": 60,
                                                 "pair": 0, "gen": 12 * 5}  # fmt: skip
    mean = Op("m", "mean", ("x",), ("y",), {"axes": (1, 2), "keepdims": False})
    tensors = {"x": TensorSpec("x", (1, 3, 3, 10), "float32"),
               "y": TensorSpec("y", (1, 10), "float32")}  # fmt: skip
    assert op_features(mean, tensors, "NHWC") == {"call": 1, "rows": 1, "out": 10, "mac": 90,
                                                  "pair": 10, "gen": 10}  # fmt: skip
    q = QuantParams((0.02,), (0,), None)
    dense = Op("d", "dense", ("x",), ("y",), {}, {"W": np.zeros((10, 1280), np.int8)})
    tensors = {"x": TensorSpec("x", (1, 1280), "int8", q), "y": TensorSpec("y", (1, 10), "int8", q)}
    assert op_features(dense, tensors, "NHWC") == {
        "call": 1, "out": 10, "rows": 4, "mac": 8 * 1280, "gen": 2 * 1280, "edge": 0,
        "inner": 0}  # fmt: skip
    flat = Op("f", "reshape", ("x",), ("y",), {"shape": (1, 10)})
    tensors = {"x": TensorSpec("x", (1, 10, 1, 1), "float32"),
               "y": TensorSpec("y", (1, 10), "float32")}  # fmt: skip
    assert [t.variant for t in op_terms(flat, tensors, "NCHW")] == ["reshape/NCHW/float32"]
    (term,) = op_terms(flat, tensors, "NCHW", copy=copies(flat, "y"))
    assert term.variant == "reshape.copy/NCHW/float32"
    assert term.features == {"call": 1, "out": 10, "pair": 2, "gen": 2}


def test_emulated_builds_follow_the_parts_int8_variant() -> None:
    g0, f4, h7 = (get_part(n) for n in ("STM32G071RB", "STM32F405RG", "STM32H743ZI"))
    assert part_build_key(g0) == "M0+.plain" and part_build_key(g0, emulated=True) == "M4F.plain"
    assert part_build_key(f4) == "M4F.dsp" == part_build_key(f4, emulated=True)
    assert part_build_key(h7) == "M7.dsp"


def _device(name: str, **kw: object) -> Device:
    part = get_part(name)
    args: dict[str, object] = {"name": "d", "part": part, "flash_bytes": 1 << 20,
                               "ram_bytes": 1 << 17, "clock_hz": part.clock_mhz * 1e6,
                               "cpm": part.cpm, **kw}  # fmt: skip
    return Device(**args)  # type: ignore[arg-type]


def test_layer_time_uses_the_table_on_uncalibrated_devices() -> None:
    per_build = (("M4F.dsp", 5000.0), ("M4F.plain", 7000.0), ("M0+.plain", 9000.0))
    cost = LayerCost(macs=1000, instructions=(*per_build, ("M7.dsp", 5000.0)))
    f4 = _device("STM32F405RG")
    cpi = device_cpi(f4)
    assert cpi.wait_states == 5  # RM0090 table 10: 168 MHz at 2.7-3.6 V
    assert layer_time(cost, f4) == pytest.approx(5000 * cpi.value / f4.clock_hz)
    g0 = _device("STM32G071RB")
    assert layer_time(cost, g0) == pytest.approx(9000 * device_cpi(g0).value / g0.clock_hz)
    assert table_time(cost, g0, emulated=True) == pytest.approx(7000 / EMULATED_INSTRUCTIONS_PER_S)
    calibrated = _device("STM32F405RG", cpm=2.5)
    assert layer_time(cost, calibrated) == pytest.approx(1000 * 2.5 / calibrated.clock_hz)
    # a profile's layer (no instructions) keeps the flat cycles per MAC
    assert layer_time(LayerCost(macs=1000), f4) == pytest.approx(1000 * f4.cpm / f4.clock_hz)


def test_a_real_core_needs_at_least_the_emulators_instructions() -> None:
    """Every catalog part gets a CPI between 0.8 (the M7's dual issue is the only way below one
    cycle per instruction) and 3, labelled as a model with its family's sources."""
    from splitter.hardware.catalog import parts

    for part in parts():
        cpi = device_cpi(_device(part.name))
        assert 0.8 <= cpi.value <= 3.0, part.name
        assert f"{part.family} flash" in cpi.label and "CPI" in cpi.label


def test_chain_layers_carry_table_instructions() -> None:
    chain = build_chain(load_model(MODELS / "tiny_cnn.onnx").graph)
    builds = set(kernel_table()["builds"])
    for layer in chain.layers[1:]:
        got = dict(layer.cost.instructions)
        assert set(got) == builds and all(v > 0 for v in got.values())


@pytest.mark.toolchain
@pytest.mark.qemu
@pytest.mark.slow
def test_measurement_reproduces_the_tables_counts(tmp_path: Path) -> None:
    """tiny_cnn's ops measured again: the same instruction counts as the table's samples
    (within one SysTick tick, 6 instructions: the emulator counts deterministically)."""
    from splitter.measure.kernel_table import SUBMODEL, measure_chain

    chain = build_chain(load_model(MODELS / "tiny_cnn.onnx").graph)
    samples = [s for s in measure_chain(chain, "M4F.dsp", tmp_path) if s.op != SUBMODEL]
    table = {(m, j, op): n for m, j, op, n in kernel_table()["samples"]["M4F.dsp"]}
    assert samples
    for s in samples:
        assert abs(s.instructions - table[(s.model, s.layer, s.op)]) <= 6.5, s.op


def _looped(model: str) -> Chain:
    from splitter.cost.pex_chain import partial_chain

    return partial_chain(build_chain(load_model(MODELS / model).graph))


@pytest.mark.parametrize("model", ["pex_irb_48.onnx", "tiny_cnn_int8.tflite"])
def test_pex_loop_layers_are_costed_by_their_loop_kernels(model: str) -> None:
    """A fused PEX layer's instructions are its loops' (measured for every loop of models/),
    not the sum of its ops run whole: the int8 loops call one-channel kernels, slower per MAC."""
    from splitter.cost.kernels import (
        layer_ops_instructions,
        loop_signature,
        ops_instructions,
    )

    chain = _looped(model)
    assert chain.graph is not None
    tensors, layout = chain.graph.tensors, chain.graph.layout or "NCHW"
    looped = [layer for layer in chain.layers if layer.loops]
    assert looped
    measured = kernel_table()["builds"]["M4F.dsp"]["measured"]
    for layer in looped:
        by_name = {op.name: op for op in layer.ops}
        for loop in layer.loops:
            ops = [by_name[n] for n in loop.ops]
            sig = loop_signature(ops, loop.channels, tensors, layout, loop.by, loop.step, loop.band)
            assert sig in measured
        got = dict(layer.cost.instructions)["M4F.dsp"]
        assert got == pytest.approx(layer_ops_instructions(layer, tensors, layout, "M4F.dsp"))
        whole = ops_instructions(layer.ops, tensors, layout, "M4F.dsp")
        assert abs(got / whole - 1) > 0.02, layer.name


def test_probes_go_before_ops_and_loops() -> None:
    """The measuring harness probes each op outside a loop and each loop as a whole."""
    from splitter.codegen.model_c import generate_device_c
    from splitter.measure.kernel_table import insert_probes

    chain = _looped("tiny_cnn_int8.tflite")
    j = next(k for k, layer in enumerate(chain.layers) if layer.loops)
    gen = generate_device_c(chain, [(0, j, j)], "probe", core="cortex-m4")
    src, probed = insert_probes(gen.files["model.c"], chain, {0: j})
    layer = chain.layers[j]
    inside = {name for loop in layer.loops for name in loop.ops}
    outside = [i for i, op in enumerate(layer.ops) if op.name not in inside]
    assert sorted(probed[0]) == sorted([*outside, *(-1 - k for k in range(len(layer.loops)))])
    assert src.count("probe();") == len(probed[0])


def test_measured_keys_are_json_signatures() -> None:
    """The measured entries are keyed by JSON arrays (issue #28: no Python ``repr`` keys):
    ``[variant, shapes, constants, attributes]`` per op, ``["pex" | "pex-row", channels,
    [op signatures]]`` per loop, each in the canonical compact form ``op_signature`` writes;
    every op of ``tiny_cnn.onnx``'s layers finds its entry."""
    import json

    from splitter.cost.kernels import op_signature, signature_key
    from splitter.graph.chain import build_chain

    for entry in kernel_table()["builds"].values():
        for key in entry["measured"]:
            data = json.loads(key)
            assert signature_key(data) == key
            if data[0].startswith("pex"):
                assert isinstance(data[1], int) and all(len(s) == 4 for s in data[2]), key
            else:
                assert len(data) == 4 and "/" in data[0], key
    chain = build_chain(load_model(MODELS / "tiny_cnn.onnx").graph)
    assert chain.graph is not None
    measured = kernel_table()["builds"]["M4F.dsp"]["measured"]
    ops = [op for layer in chain.layers for op in layer.ops]
    assert ops and all(op_signature(op, chain.graph.tensors, "NCHW") in measured for op in ops)


def _split_op_chain(model: str, op: str, k: int) -> Chain:
    """The operator-granularity chain of ``model`` with ``op`` split into ``k`` slices (what
    the planner costs for a layer split)."""
    from splitter.graph.split import layer_split, split_graph

    graph = load_model(MODELS / model).graph
    target = next(o for o in graph.ops if o.name == op)
    return build_chain(split_graph(graph, [layer_split(target, k)]), granularity="op")


def test_probes_go_before_the_compaction_moves() -> None:
    """Each layer of an operator-granularity chain ends with its compaction ``memmove`` s; the
    harness probes them as one sample of their own (so no op's count holds them), whose bytes
    are the ones the firmware moves."""
    from splitter.codegen.model_c import generate_device_c
    from splitter.cost.code import compaction_moves
    from splitter.measure.kernel_table import MOVES_PROBE, insert_probes, layer_moves

    chain = _split_op_chain("dw_wide_qdq.onnx", "dw", 3)
    layers = dict(enumerate(range(1, len(chain.layers))))
    ranges = [(k, j, j) for k, j in layers.items()]
    gen = generate_device_c(chain, ranges, "probe", core="cortex-m4")
    src, probed = insert_probes(gen.files["model.c"], chain, layers)
    moved = 0
    for k, j in layers.items():
        n = compaction_moves(chain, j)
        assert len(layer_moves(chain, j)) == n
        assert (probed[k][-1:] == [MOVES_PROBE]) == (n > 0), chain.layers[j].name
        moved += n > 0
    assert moved >= 5 and src.count("probe();") == sum(map(len, probed.values()))


def test_op_layers_count_their_compaction_moves() -> None:
    """An operator-granularity layer's instructions are its ops' plus its compaction moves'
    (the table's ``move`` fit: about 4 instructions a byte, ``k_libc.c``'s byte loop): the
    concat of ``dw_wide_qdq``'s split moves its 8 KiB result down, as many instructions as the
    concat's own copies."""
    from splitter.cost.kernels import MOVE, moves_instructions, ops_instructions
    from splitter.measure.kernel_table import layer_moves

    chain = _split_op_chain("dw_wide_qdq.onnx", "dw", 3)
    assert chain.graph is not None
    tensors, layout = chain.graph.tensors, chain.graph.layout or "NCHW"
    for build, entry in kernel_table()["builds"].items():
        coef = entry["variants"][MOVE]["coef"]
        assert 2.0 <= coef["out"] <= 12.0, build  # a called memmove: a byte a loop turn
    j = next(j for j, layer in enumerate(chain.layers) if layer.name == "dw.concat")
    layer = chain.layers[j]
    moved = layer_moves(chain, j)
    assert sum(n for _, _, n in moved) == 8192
    ops = ops_instructions(layer.ops, tensors, layout, "M4F.dsp")
    moves = moves_instructions(moved, "M4F.dsp")
    assert dict(layer.cost.instructions)["M4F.dsp"] == pytest.approx(ops + moves, abs=0.1)
    assert 0.5 * ops <= moves <= 2 * ops


def test_a_squeeze_ending_a_layer_is_measured_and_costed_as_a_copy() -> None:
    """The grid's classifier end (1x1 conv, mean, squeeze): the squeeze writes the layer's
    output, which the ping-pong arena moves away from its input, so the generated C calls
    ``k_copy``; the table's sample and the planner's layer cost both take ``reshape.copy``."""
    from splitter.codegen.model_c import generate_device_c
    from splitter.cost.kernels import layer_ops_instructions, op_instructions
    from splitter.measure.kernel_grid import SQUEEZE_WALK, mean_chain
    from splitter.measure.kernel_table import _sample, copied_ops

    chain = mean_chain("NCHW", "float32", SQUEEZE_WALK)
    assert chain.graph is not None
    j = len(chain.layers) - 1
    layer = chain.layers[j]
    squeeze = layer.ops[-1]
    assert squeeze.kind == "reshape" and squeeze.outputs[0] == layer.output.name
    gen = generate_device_c(chain, [(0, j - 1, j - 1), (1, j, j)], "probe", core="cortex-m4")
    moved = copied_ops(gen.files["model.c"])
    sample = _sample(chain, j, len(layer.ops) - 1, 100.0, "M4F.dsp", moved)
    assert sample.terms[0].variant == "reshape.copy/NCHW/float32"
    tensors = chain.graph.tensors
    assert layer_ops_instructions(layer, tensors, "NCHW", "M4F.dsp") == pytest.approx(
        sum(op_instructions(op, tensors, "NCHW", "M4F.dsp", copy=op is squeeze) for op in layer.ops)
    )
    alone = generate_device_c(chain, [(0, j, j)], "probe", core="cortex-m4")
    assert not copied_ops(alone.files["model.c"])  # the layer sets the arena: zero-copy
