"""PEX partial execution in the planner and the generated C (issue 16 item 1).

* MobileNetV2-1.0 224 with 8-bit activations: the chain with its loops fused peaks at the PEX
  paper's 376,320 B (1,505,280 B run op by op), zero extra MACs, same FLASH; every layer's
  planned arena equals the DP's loop memory; split over three boards (models/boards/
  pex_mnv2.toml) no plan exists without loops and every sub-model of the plan with them shows
  its own reduction.
* MobileNetV2-1.0 224 int8 as deployed (models/mobilenet_v2_224_int8.tflite, TensorFlow's
  converter, int8 input and output), exact: the primary evidence for issue 16's "<= 376 kB":
  1,505,280 B op by op -> 296,068 B with 13 row + 3 channel loops, zero extra MACs, generated
  arena = estimate; split over models/boards/pex_mnv2_tflite.toml each looped sub-model shows
  its reduction; the first sub-model's row loops run bit for bit as LiteRT on the host. The
  QDQ int8 tests (onnxruntime's quantisation of the float model, float input) are secondary.
* Generated C: a hand-built net with every loop shape the generator emits (generating 3x3 conv,
  standalone activations, depthwise 5x5 stride 2, accumulating pointwise conv with a fused
  activation, a loop starting on a full tensor, a loop ending by writing planes of a full output)
  and MobileNetV2 float (17 loops, residual blocks) compiled with gcc (ASan + UBSan) and run on
  the host against onnxruntime; the generated arena (``MODEL_ARENA_BYTES``) equals the estimate.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_codegen_host import TOL, split3, sub_model_ref
from test_codegen_support import Net, build_host, run_host
from test_graph_chain import _models_build

from splitter.codegen.model_c import generate_device_c
from splitter.cost.layer import itemsize_function
from splitter.cost.layer_table import partial_report
from splitter.cost.pex import partial_schedule
from splitter.cost.pex_chain import EXECUTABLE, fuse_layers, partial_chain
from splitter.errors import InfeasibleError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain, load_model
from splitter.ir import Chain, ChannelLoop
from splitter.partition.partial import plan_partial
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.tflite_slice import slice_tflite
from splitter.slicing.validate import TfliteRunner

BOARDS = Path(__file__).resolve().parent.parent / "models" / "boards"


@pytest.fixture(scope="module")
def mnv2() -> Path:
    return Path(_models_build().ensure_model("mobilenet_v2_224"))


def test_mobilenet_v2_8bit_chain_peaks_at_376_kb(mnv2: Path) -> None:
    chain = load_chain(str(mnv2), activation_bytes=1)
    fused = partial_chain(chain, 1)
    assert max(c.ram for c in chain.costs) == 1_505_280
    assert max(c.ram for c in fused.costs) == 376_320  # PEX Table 3: '376 kB'
    assert sum(c.macs for c in fused.costs) == sum(c.macs for c in chain.costs)  # zero extra
    assert sum(c.flash for c in fused.costs) == sum(c.flash for c in chain.costs)
    looped = [layer for layer in fused.layers if layer.loops]
    assert len(looped) == 17  # one loop per inverted-residual block (and the stem)
    # the arena plan of each fused layer is the scheduler's memory of its loop
    schedule = partial_schedule(
        chain.graph,  # type: ignore[arg-type]
        itemsize_function(1),
        ops=[op for layer in chain.layers for op in layer.ops],
        rules=EXECUTABLE,
        everywhere=True,
    )
    assert schedule.peak == 376_320 and len(schedule.loops) == 17
    assert all(layer.cost.ram < layer.whole_ram for layer in looped)


def test_mobilenet_v2_split_plan_reduction_per_submodel(mnv2: Path) -> None:
    chain = load_chain(str(mnv2), activation_bytes=1)
    boards = load_boards(BOARDS / "pex_mnv2.toml")
    with pytest.raises(InfeasibleError):
        plan_partial(chain, boards, "off", activation_bytes=1)
    fused, plan = plan_partial(chain, boards, "auto", activation_bytes=1)
    with_loops = 0
    for sub in plan.submodels:
        layers = fused.layers[sub.first : sub.last + 1]
        ram = max(layer.cost.ram for layer in layers)
        whole = max(layer.whole_ram or layer.cost.ram for layer in layers)
        assert ram <= boards.devices[sub.device_index].ram_bytes
        if any(layer.loops for layer in layers):
            with_loops += 1
            assert ram < whole  # this board's own reduction
    assert with_loops >= 2  # the classifier alone needs no loop


def _fuse(
    chain: Chain,
    spans: list[tuple[int, int, int]],
    ops: list[tuple[str, ...]] | None = None,
    step: int = 1,
) -> Chain:
    """Chain with layers ``first..last`` fused into one loop over ``channels`` per span (the
    loop over the op names ``ops[k]`` of span ``k`` when given, else all the layers' ops),
    ``step`` channels per iteration."""
    layers, pos = [], 0
    for k, (first, last, channels) in enumerate(spans):
        layers.extend(chain.layers[pos:first])
        group = chain.layers[first : last + 1]
        names = tuple(op.name for layer in group for op in layer.ops)
        loop = ChannelLoop(ops[k] if ops else names, channels, step=step)
        fused = fuse_layers(chain, group, [loop], itemsize_function(None))
        layers.append(fused)
        pos = last + 1
    layers.extend(chain.layers[pos:])
    return replace(chain, layers=tuple(replace(x, index=k) for k, x in enumerate(layers)))


def _loops_net() -> Net:
    n = Net("pexloops", (1, 4, 10, 10), seed=5)
    a = n.conv("x", 4, 12, 3, pad=1)  # generates one channel: 3x3 window
    b = n.unary("relu", a)
    c = n.conv(b, 12, 12, 5, stride=2, pad=2, groups=12, act="relu6")  # depthwise 5x5 s2
    d = n.unary("sigmoid", c)
    e = n.conv(d, 12, 6, 1, act="relu")  # accumulates, activation after the loop
    f = n.conv(e, 6, 6, 3, pad=1, groups=6)  # starts on planes of a full tensor
    g = n.conv(f, 6, 9, 1, bias=False)  # accumulates, no bias
    h = n.conv(g, 9, 16, 1)  # generates (pointwise)
    i = n.conv(h, 16, 16, 3, pad=1, groups=16, act="tanh")  # writes planes of a full output
    n.pool("maxpool", i, 2, 2)
    return n


def test_generated_loops_match_onnxruntime(tmp_path: Path) -> None:
    net = _loops_net()
    model = net.onnx_model()
    path = tmp_path / "pexloops.onnx"
    onnx.save(model, str(path))
    chain = _fuse(net.chain(model), [(1, 5, 12), (6, 7, 6), (8, 9, 16)])
    assert sum(1 for layer in chain.layers if layer.loops) == 3
    gen = generate_device_c(chain, [(0, 0, len(chain) - 1)], "solo")
    assert gen.arena_bytes == max(c.ram for c in chain.costs)
    assert gen.files["model.c"].count("for (int c = 0;") == 3
    exe = build_host(gen, tmp_path / "solo")
    x = np.random.default_rng(2).standard_normal(net.input_shape).astype(np.float32)
    sess = sub_model_ref(path, chain, 0, len(chain) - 1, tmp_path)
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    got = run_host(exe, 0, x, tmp_path / "solo")
    assert float(np.max(np.abs(got - ref.ravel()))) <= TOL * max(1.0, float(np.max(np.abs(ref))))


@pytest.mark.slow
def test_mobilenet_v2_float_loops_on_host(mnv2: Path, tmp_path: Path) -> None:
    """Float MobileNetV2 with its 17 loops in three sub-models on two devices: arena bytes are
    the estimate (1,505,280 B = 4 x 376,320: float accumulates in place), outputs match."""
    chain = partial_chain(load_chain(str(mnv2)))
    assert max(c.ram for c in chain.costs) == 1_505_280
    ranges = split3(len(chain))
    devices = {"dev0": [(0, *ranges[0]), (2, *ranges[2])], "dev1": [(1, *ranges[1])]}
    exes, rows = {}, {}
    for dev, rs in devices.items():
        gen = generate_device_c(chain, rs, dev)
        layers = [chain.layers[j] for _, a, b in rs for j in range(a, b + 1)]
        assert gen.arena_bytes == max(layer.cost.ram for layer in layers)
        assert f"#define MODEL_ARENA_BYTES {gen.arena_bytes}u" in gen.files["model.h"]
        exes[dev] = build_host(gen, tmp_path / dev)
        rows.update({sm: (dev, k) for k, (sm, _, _) in enumerate(rs)})
    x = np.random.default_rng(11).standard_normal(chain.layers[0].output.shape).astype(np.float32)
    for sm, (first, last) in enumerate(ranges):
        sess = sub_model_ref(mnv2, chain, first, last, tmp_path)
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        dev, row = rows[sm]
        got = run_host(exes[dev], row, x, tmp_path / dev)
        err = float(np.max(np.abs(got - ref.ravel())))
        assert err <= TOL * max(1.0, float(np.max(np.abs(ref)))), (sm, err)
        x = ref


@pytest.fixture(scope="module")
def irb_qdq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``models/pex_irb_48.onnx`` quantised to QDQ int8."""
    work = tmp_path_factory.mktemp("qdq")
    return _quantise(BOARDS.parent / "pex_irb_48.onnx", work, (1, 3, 48, 48), samples=8)


def _quantise(src: Path, work: Path, shape: tuple[int, ...], samples: int) -> Path:
    """``src`` quantised to QDQ int8 (per-channel weights) by onnxruntime, as
    models/make_exported.py quantises resnet_tv_28 (seeded normal calibration inputs)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(16)
    data = iter([rng.standard_normal(shape).astype(np.float32) for _ in range(samples)])
    name = onnx.load(str(src)).graph.input[0].name

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(data, None)
            return None if x is None else {name: x}

    out, pre = work / f"{src.stem}_qdq.onnx", work / "pre.onnx"
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=True)  # fmt: skip
    return out


def _host_bytes(exe: Path, row: int, data: bytes, work: Path) -> bytes:
    import subprocess

    (work / "in.bin").write_bytes(data)
    res = subprocess.run([str(exe), str(row), str(work / "in.bin"), str(work / "out.bin")],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return (work / "out.bin").read_bytes()


@pytest.mark.slow
def test_int8_loops_are_bit_exact_with_the_ops_run_whole(irb_qdq: Path, tmp_path: Path) -> None:
    """int8 loops give the very bytes of the int8 kernels run op by op, which follow LiteRT's
    arithmetic (tests/test_qdq.py, tests/test_tflite_loaded.py): the scheduler's row loops
    (each block's expand -> dw -> project streaming rows, NCHW QDQ graph, NHWC int8 tensors),
    then forced channel loops (int32 accumulators requantised in place) with the accumulating
    output both at the bottom and at the top of the arena (two splits); arena bytes == the
    estimate."""
    chain = load_chain(str(irb_qdq))
    fused = partial_chain(chain)
    looped = [layer for layer in fused.layers if layer.loops]
    assert len(looped) == 2 and all(layer.cost.ram < layer.whole_ram for layer in looped)
    assert [lp.by for layer in looped for lp in layer.loops] == ["row", "row"]
    assert max(c.ram for c in fused.costs) < max(c.ram for c in chain.costs)
    assert sum(c.macs for c in fused.costs) == sum(c.macs for c in chain.costs)
    n = len(chain)
    whole = build_host(generate_device_c(chain, [(0, 0, n - 1)], "whole"), tmp_path / "whole")
    gen = generate_device_c(fused, [(0, 0, len(fused) - 1)], "pex")
    assert gen.arena_bytes == max(c.ram for c in fused.costs)
    exe = build_host(gen, tmp_path / "pex")
    # loops the scheduler did not pick: block 1's dw reading channel c of its full input ->
    # project; block 2's whole expand -> dw -> project, whose int32 accumulators are the layer
    # output: at the top of the arena (sub-model 1 starts at layer 3), then at the bottom
    block_2 = ("block_2_expand", "block_2_dw", "block_2_project")
    other = _fuse(chain, [(3, 3, 96), (4, 6, 96)], [("block_1_dw", "block_1_project"), block_2])
    m = len(other)
    ranges = [(0, 0, 2), (1, 3, m - 1), (2, 3, 3), (3, 4, m - 1)]
    gen = generate_device_c(other, ranges, "b")
    assert gen.arena_bytes == max(c.ram for c in other.costs)
    assert gen.files["model.c"].count("k_q_pex_requant_dsp(") == 4  # the host build: dsp
    forced = build_host(gen, tmp_path / "b")
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32).tobytes()
        want = _host_bytes(whole, 0, x, tmp_path / "whole")
        assert _host_bytes(exe, 0, x, tmp_path / "pex") == want
        _check_split(forced, x, want, tmp_path / "b")


def _check_split(forced: Path, x: bytes, want: bytes, where: Path) -> None:
    """The four sub-models of the forced split (0 then 1; 0, 2 then 3) give ``want``."""
    mid = _host_bytes(forced, 0, x, where)
    assert _host_bytes(forced, 1, mid, where) == want
    block_1 = _host_bytes(forced, 2, mid, where)
    assert _host_bytes(forced, 3, block_1, where) == want


@pytest.mark.slow
@pytest.mark.parametrize("step", [16, 5])
def test_int8_channel_loops_of_several_channels_are_bit_exact(
    irb_qdq: Path, tmp_path: Path, step: int
) -> None:
    """Channel loops of ``step`` channels per iteration (96 channels: 5 leaves a last iteration
    of one): the generating pointwise and the slab-to-slab depthwise on the tuned whole-op
    kernels, a depthwise reading channels of its full input plane by plane, a depthwise ending
    its loop (its slab copied into its full output), the accumulating conv ``step`` input
    channels per pass, its output at the top and at the bottom of the arena; the bytes of the
    ops run whole, the arena the estimate."""
    chain = load_chain(str(irb_qdq))
    whole = build_host(generate_device_c(chain, [(0, 0, len(chain) - 1)], "w"), tmp_path / "w")
    block_2 = ("block_2_expand", "block_2_dw", "block_2_project")
    other = _fuse(chain, [(3, 3, 96), (4, 6, 96)], [("block_1_dw", "block_1_project"), block_2],
                  step=step)  # fmt: skip
    m = len(other)
    gen = generate_device_c(other, [(0, 0, 2), (1, 3, m - 1), (2, 3, 3), (3, 4, m - 1)], "b")
    assert gen.arena_bytes == max(c.ram for c in other.costs)
    text = gen.files["model.c"]
    assert text.count("k_q_pex_accumulate_g_dsp(") == 4 * (1 + (96 % step > 0))
    assert "k_q_pointwise_dsp(" in text and "k_q_depthwise_dsp(" in text
    forced = build_host(gen, tmp_path / "b")
    # a loop ending with the depthwise: its slab copied into its full output (k_q_pex_put)
    ends = _fuse(chain, [(4, 6, 96)], [block_2[:2]], step=step)
    gen = generate_device_c(ends, [(0, 0, len(ends) - 1)], "e")
    assert gen.arena_bytes == max(c.ram for c in ends.costs)
    assert "k_q_pex_put(" in gen.files["model.c"]
    put = build_host(gen, tmp_path / "e")
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32).tobytes()
        want = _host_bytes(whole, 0, x, tmp_path / "w")
        assert _host_bytes(put, 0, x, tmp_path / "e") == want
        _check_split(forced, x, want, tmp_path / "b")


def _rebanded(chain: Chain, fused: Chain, band: int) -> Chain:
    """``fused`` (``partial_chain(chain)``) with every row loop in bands of ``band`` rows."""
    layers = []
    for layer in fused.layers:
        if not any(lp.by == "row" for lp in layer.loops):
            layers.append(layer)
            continue
        names = {op.name for op in layer.ops}
        group = [x for x in chain.layers if x.ops and {op.name for op in x.ops} <= names]
        loops = [replace(lp, band=band) if lp.by == "row" else lp for lp in layer.loops]
        layers.append(replace(fuse_layers(chain, group, loops, itemsize_function(None)),
                              index=layer.index))  # fmt: skip
    return replace(fused, layers=tuple(layers))


@pytest.mark.slow
@pytest.mark.parametrize("band", [3, 16])
def test_int8_row_loops_in_bands_are_bit_exact(irb_qdq: Path, tmp_path: Path, band: int) -> None:
    """Row loops computing bands of rows (3: bands that do not divide the 24 and 12 output
    rows; 16: the 12-row loop in one call) give the very bytes of the ops run whole; their
    windows (and the depthwise's line ring) make the arena larger than one row at a time, and
    the generated arena is the estimate. ``partial_chain(wide=True)`` picks bands within the
    one-row schedule's peak."""
    chain = load_chain(str(irb_qdq))
    one = partial_chain(chain)
    wide = partial_chain(chain, wide=True)
    assert {lp.band for layer in wide.layers for lp in layer.loops} == {2}
    assert max(c.ram for c in wide.costs) <= max(c.ram for c in one.costs)
    fused = _rebanded(chain, one, band)
    pairs = zip(one.layers, fused.layers, strict=True)
    looped = [(a.cost.ram, b.cost.ram) for a, b in pairs if a.loops]
    assert len(looped) == 2 and all(a < b for a, b in looped)
    n = len(chain)
    whole = build_host(generate_device_c(chain, [(0, 0, n - 1)], "whole"), tmp_path / "whole")
    gen = generate_device_c(fused, [(0, 0, len(fused) - 1)], "pex")
    assert gen.arena_bytes == max(c.ram for c in fused.costs)
    assert gen.files["model.c"].count(f"rows */ /* {band} rows per iteration */") == 2
    exe = build_host(gen, tmp_path / "pex")
    rng = np.random.default_rng(band)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32).tobytes()
        assert _host_bytes(exe, 0, x, tmp_path / "pex") == _host_bytes(
            whole, 0, x, tmp_path / "whole"
        )


@pytest.fixture(scope="module")
def mnv2_qdq(mnv2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MobileNetV2-1.0 224 quantised to QDQ int8 (per-channel weights, per-tensor
    activations) by onnxruntime."""
    return _quantise(mnv2, tmp_path_factory.mktemp("mnv2q"), (1, 3, 224, 224), samples=2)


def test_mobilenet_v2_int8_loops(mnv2_qdq: Path) -> None:
    """MobileNetV2 QDQ int8 (float input; the TFLite tests below are the deployable model), exact:
    from its int8 input on (what a full-integer model holds, the
    PEX paper's counting) the activation peak drops from 1,505,280 B to 290,692 B, under the
    paper's 376 kB, with zero extra MACs. Row loops (exact, no accumulators) take the big
    blocks; channel loops alone need int32 accumulators (602,112 B). The first row loop runs
    the stem and blocks 1-2 (6 convs) with windows of 4, 2, 2, 3 and 1 rows: 224x224x3 input +
    56x56x24 output + the windows + one scratch block for the loop's tuned conv kernels, the
    largest (the stem's: its 3x3x3 weights re-laid at K' = 32, 4 + 4 K' + 32 K' = 1,156 B).
    The QUANTIZE of the float input (602,112 + 150,528 B) is the chain's own peak (a
    full-integer model has no such layer). Arena == estimate."""
    chain = load_chain(str(mnv2_qdq))
    fused = partial_chain(chain)
    body = [layer for layer in fused.layers if layer.kind not in ("input", "quantize")]
    assert max(c.ram for c in chain.costs[2:]) == 1_505_280
    windows = 4 * 112 * 32 + 2 * 112 * 32 + 2 * 112 * 16 + 3 * 112 * 96 + 1 * 56 * 96
    scratch = 4 + 4 * 32 + 2 * 32 * 32  # the stem conv's int16 re-laid weights (conv_padded_k)
    assert max(layer.cost.ram for layer in body) == 224 * 224 * 3 + 56 * 56 * 24 + windows + scratch
    assert max(layer.cost.ram for layer in body) == 290_692 <= 376_000
    assert sum(c.macs for c in fused.costs) == sum(c.macs for c in chain.costs)
    assert sum(c.flash for c in fused.costs) == sum(c.flash for c in chain.costs)
    loops = [lp for layer in fused.layers for lp in layer.loops]
    rows = [lp for lp in loops if lp.by == "row"]
    assert len(rows) == 13 and len(loops) == 16
    assert rows[0].ops[0] == "features_0_conv" and rows[0].ops[-1] == "features_2_project"
    # channel loops only (what the planner had before row loops): 32-bit accumulators
    channels = partial_schedule(
        chain.graph,  # type: ignore[arg-type]
        itemsize_function(None),
        ops=[op for layer in chain.layers[2:] for op in layer.ops],
        accumulator_bytes=4,
        rules=EXECUTABLE,
    )
    assert channels.peak == 602_112
    assert max(c.ram for c in fused.costs) == 602_112 + 150_528  # the float input's QUANTIZE
    gen = generate_device_c(fused, [(0, 0, len(fused) - 1)], "one")
    assert gen.arena_bytes == max(c.ram for c in fused.costs)
    assert gen.files["model.c"].count("/* PEX row loop:") == 13


def test_mobilenet_v2_int8_split_plan_reduction_per_submodel(mnv2_qdq: Path) -> None:
    """MobileNetV2 int8 over three boards (models/boards/pex_mnv2_int8.toml): no plan without
    partial execution; with it two sub-models hold loops, each with its own reduction; each
    sub-model's generated arena equals its estimate."""
    chain = load_chain(str(mnv2_qdq))
    boards = load_boards(BOARDS / "pex_mnv2_int8.toml")
    with pytest.raises(InfeasibleError):
        plan_partial(chain, boards, "off")
    fused, plan = plan_partial(chain, boards, "auto")
    reduced = []
    for sub in plan.submodels:
        layers = fused.layers[sub.first : sub.last + 1]
        ram = max(layer.cost.ram for layer in layers)
        assert ram <= boards.devices[sub.device_index].ram_bytes
        body = [layer for layer in layers if layer.kind not in ("input", "quantize")]
        if any(layer.loops for layer in body):
            with_loops = max(layer.cost.ram for layer in body)
            whole = max(layer.whole_ram or layer.cost.ram for layer in body)
            assert with_loops < whole  # this board's own reduction
            reduced.append((with_loops, whole))
            gen = generate_device_c(fused, [(0, sub.first, sub.last)], "d")
            assert gen.arena_bytes == ram
    assert len(reduced) >= 2
    assert reduced[0] == (290_692, 1_505_280)


MNV2_TFLITE = BOARDS.parent / "mobilenet_v2_224_int8.tflite"


@pytest.fixture(scope="module")
def mnv2_tflite() -> tuple[Chain, Chain]:
    """The full-integer MobileNetV2-1.0 224 TFLite (TensorFlow's converter, int8 input and
    output; models/make_tflite.py --mnv2) and its chain with PEX loops fused."""
    chain = load_chain(str(MNV2_TFLITE))
    return chain, partial_chain(chain)


def test_mobilenet_v2_tflite_int8_peaks_under_376_kb(mnv2_tflite: tuple[Chain, Chain]) -> None:
    """The int8 MobileNetV2 a user deploys (int8 input, no QUANTIZE layer): the activation peak
    `inspect` reports drops from 1,505,280 B run op by op to 296,068 B with partial execution,
    under the PEX paper's 376 kB, zero extra MACs, same FLASH. The first row loop runs the stem
    and blocks 1-2 (6 convs); TF SAME padding (stride 2 pads 0 rows on top, 1 below) gives
    windows of 4, 3, 3, 3 and 1 rows (torchvision's pad 1 in the QDQ model: 4, 2, 2, 3, 1).
    Row loops take the big blocks (plus one scratch block of their tuned conv kernels, the
    largest: the stem's 3x3x3 weights re-laid as int16, K' = 32, 4 + 4 K' + 2 * 32 K' B),
    channel loops (int32 accumulators) three of 7x7 / 14x14.
    The generated arena equals the estimate."""
    chain, fused = mnv2_tflite
    assert chain.layers[0].output.dtype == "int8" and chain.layers[1].kind != "quantize"
    windows = 4 * 112 * 32 + 3 * 112 * 32 + 3 * 112 * 16 + 3 * 112 * 96 + 1 * 56 * 96
    peak = 224 * 224 * 3 + 56 * 56 * 24 + windows + 4 + 4 * 32 + 2 * 32 * 32
    assert max(c.ram for c in chain.costs) == 1_505_280
    assert max(c.ram for c in fused.costs) == peak == 296_068 <= 376_000
    report = partial_report(chain)  # what `splitter inspect` prints
    assert report is not None and "int8_peak_bytes" not in report
    assert (report["ordinary_peak_bytes"], report["peak_bytes"]) == (1_505_280, peak)
    assert sum(c.macs for c in fused.costs) == sum(c.macs for c in chain.costs)
    assert sum(c.flash for c in fused.costs) == sum(c.flash for c in chain.costs)
    loops = [lp for layer in fused.layers for lp in layer.loops]
    assert [lp.by for lp in loops].count("row") == 13 and len(loops) == 16
    assert (loops[0].ops[0], loops[0].ops[-1], len(loops[0].ops)) == ("conv_2d_0", "conv_2d_5", 6)
    gen = generate_device_c(fused, [(0, 0, len(fused) - 1)], "one")
    assert gen.arena_bytes == peak
    assert gen.files["model.c"].count("/* PEX row loop:") == 13


def test_mobilenet_v2_tflite_int8_split_plan_reduction_per_submodel(
    mnv2_tflite: tuple[Chain, Chain],
) -> None:
    """The TFLite MobileNetV2 over three 320 KiB boards (models/boards/pex_mnv2_tflite.toml):
    no plan without partial execution; with it two sub-models hold loops, each with its own
    reduction (296,068 B from 1,505,280 B; the 7x7x960 block's 54,244 B from 94,420 B with one
    row per iteration, 3,844 of them the 960 -> 160 projection's im2col scratch, 87,844 B in
    the bands of rows the plan takes since the board holds them); each sub-model's generated
    arena equals its estimate."""
    chain = mnv2_tflite[0]
    boards = load_boards(BOARDS / "pex_mnv2_tflite.toml")
    with pytest.raises(InfeasibleError):
        plan_partial(chain, boards, "off")
    fused, plan = plan_partial(chain, boards, "auto")
    reduced = []
    for sub in plan.submodels:
        layers = fused.layers[sub.first : sub.last + 1]
        ram = max(layer.cost.ram for layer in layers)
        assert ram <= boards.devices[sub.device_index].ram_bytes
        looped = [layer for layer in layers if layer.loops]
        if looped:
            with_loops = max(layer.cost.ram for layer in looped)
            whole = max(layer.whole_ram for layer in looped)
            assert with_loops < whole  # this board's own reduction
            reduced.append((with_loops, whole))
            gen = generate_device_c(fused, [(0, sub.first, sub.last)], "d")
            assert gen.arena_bytes == ram
            one_row = partial_chain(chain).layers[sub.first : sub.last + 1]
            reduced.append((max(layer.cost.ram for layer in one_row if layer.loops), whole))
    # the plan takes the row loops in bands of rows (the boards hold them; faster), the second
    # sub-model's then needing 87,844 B of its 94,420 B; one row per iteration: 54,244 B
    assert reduced[:4] == [(296_068, 1_505_280), (296_068, 1_505_280), (87_844, 94_420),
                           (54_244, 94_420)]  # fmt: skip


@pytest.mark.slow
def test_mobilenet_v2_tflite_row_loops_bit_exact_with_litert(
    mnv2_tflite: tuple[Chain, Chain], tmp_path: Path
) -> None:
    """The first sub-model of the TFLite MobileNetV2 with its two row loops (the stem and
    blocks 1-2 with TF SAME stride-2 padding, then block 3 with its residual ADD), built with
    gcc (ASan + UBSan) on the host: bit for bit LiteRT's output of the same sub-model file."""
    from test_codegen_tflite import build, model_input, run

    fused = mnv2_tflite[1]
    assert [len(lp.ops) for layer in fused.layers[1:3] for lp in layer.loops] == [6, 3]
    ranges = [(0, 2), (3, len(fused) - 1)]
    gen = generate_device_c(fused, [(0, *ranges[0])], "d")
    assert gen.arena_bytes == max(layer.cost.ram for layer in fused.layers[:3])
    exe = build(gen, tmp_path)
    cuts = cuts_from_ranges(fused, [(k, *r) for k, r in enumerate(ranges)], ["d", "e"])
    sub = slice_tflite(load_model(MNV2_TFLITE), cuts)[0]
    x = model_input(fused.layers[0].output, seed=11)
    runner = TfliteRunner(sub.data)
    ref = runner.run({runner.inputs[0].name: x})[runner.outputs[0].name]
    got = run(exe, 0, x, fused.layers[2].output, tmp_path)
    assert len(np.unique(got)) > 64  # not a saturated or constant map
    assert np.array_equal(got, ref.reshape(got.shape))


@pytest.mark.slow
def test_int8_tflite_loops_bit_exact_with_litert(tmp_path: Path) -> None:
    """MLPerf Tiny VWW (MobileNet v1 0.25, full-integer TFLite): three row loops (the stem and
    the first blocks' convs, windows across four ops, a stride-2 depthwise last) and a
    pointwise -> depthwise channel loop of 16 channels per iteration (the depthwise's slab
    copied into its full NHWC output) lower the peak (55,332 -> 42,500 B); three sub-models on
    two devices, each bit for bit LiteRT's output of the same sub-model file."""
    from test_codegen_tflite import check_tflite_model
    from test_codegen_tflite import split3 as split3_tflite

    path = BOARDS.parent / "mlperf_vww_mobilenet_v1_025_int8.tflite"
    chain = load_chain(str(path))
    fused = partial_chain(chain)
    loops = [lp for layer in fused.layers for lp in layer.loops]
    assert [(lp.by, lp.step) for lp in loops] == [("row", 1)] * 3 + [("channel", 16)]
    assert [len(lp.ops) for lp in loops[:3]] == [4, 4, 4]
    assert (max(c.ram for c in chain.costs), max(c.ram for c in fused.costs)) == (55_332, 42_500)
    check_tflite_model(fused, path, split3_tflite(len(fused)), tmp_path)


def _wide_block(work: Path) -> Chain:
    """An int8 (QDQ) 1x1 16 -> 256, 3x3 depthwise, 1x1 256 -> 16 block at 8x8: its channel
    loop is the model's peak."""
    n = Net("wide", (1, 16, 8, 8), seed=2)
    a = n.conv("x", 16, 256, 1, act="relu6")
    b = n.conv(a, 256, 256, 3, pad=1, groups=256, act="relu6")
    n.reshape(n.global_avgpool(n.conv(b, 256, 16, 1)), (1, 16))
    onnx.save(n.onnx_model(), str(work / "wide.onnx"))
    return load_chain(str(_quantise(work / "wide.onnx", work, (1, 16, 8, 8), samples=2)))


def test_planner_falls_back_to_one_channel_per_iteration(tmp_path: Path) -> None:
    """Channel loops of four channels per iteration hold more (four channels of each inner
    tensor, the tuned kernels' scratch); on a board with RAM for the one-channel loop but not
    for the four-channel one the plan still fits, with one channel per iteration; with RAM
    for both it takes four."""
    import re

    chain = _wide_block(tmp_path)
    ram = {s: max(c.ram for c in partial_chain(chain, None, s).costs) for s in (1, 4)}
    assert ram[1] < ram[4] < max(c.ram for c in chain.costs)

    def boards(size: int) -> Path:
        path = tmp_path / f"b{size}.toml"
        path.write_text(f'[link]\nbaud = 115200\n\n[[device]]\nname = "a"\n'
                        f'mcu = "STM32F405RG"\nram = "{size}"\n')  # fmt: skip
        return path

    with pytest.raises(InfeasibleError) as err:  # the firmware's own RAM besides the arena
        plan_partial(chain, load_boards(boards(8000)), "on")
    short = re.search(r"needs .* \(short by (\d+) B\)", str(err.value))
    assert short is not None, err.value
    own = 8000 - (ram[1] - int(short[1]))
    for size, step in ((own + (ram[1] + ram[4]) // 2, 1), (own + ram[4], 4)):
        fused, plan = plan_partial(chain, load_boards(boards(size)), "on")
        assert [lp.step for layer in fused.layers for lp in layer.loops] == [step]
        assert plan.submodels


def test_no_loops_are_tried_when_the_weights_exceed_every_board_s_flash(
    mnv2_tflite: tuple[Chain, Chain],
) -> None:
    """The TFLite MobileNetV2's 3.4 MB of weights on two F405s of 164 KiB flash
    (mlperf_vww2.toml): loops lower RAM only, so ``auto`` answers with the failure without
    loops, the flash shortfall (SPEC.md (1)), and ``loops_cannot_fit`` says so; the three
    1.5 MiB-flash boards of pex_mnv2_tflite.toml hold the weights, so there it is false (and
    the looped plan above fits)."""
    from splitter.partition.partial import loops_cannot_fit

    chain = mnv2_tflite[0]
    small = load_boards(BOARDS / "mlperf_vww2.toml")
    assert sum(layer.cost.flash for layer in chain.layers) > sum(
        d.flash_bytes for d in small.devices
    )
    assert loops_cannot_fit(chain, small)
    with pytest.raises(InfeasibleError, match="not enough flash"):
        plan_partial(chain, small, "auto")
    assert not loops_cannot_fit(chain, load_boards(BOARDS / "pex_mnv2_tflite.toml"))
