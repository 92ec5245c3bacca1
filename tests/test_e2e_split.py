"""A layer no board holds, split over several emulated STM32F405 boards (issue 27), end to end.

* ``tiny_cnn.onnx`` (float) over three F405s with 72 KiB of flash (``split_tiny3.toml``): conv3's
  55,488 B of weights fit no board after its firmware code, so ``compile`` splits it into
  output-channel slices on different boards; the boards' output equals onnxruntime's.
* The MLPerf Tiny AD autoencoder (int8 TFLite) over four F405s with 84 KiB of flash
  (``split_ad4.toml``): its first and last dense layers are split; bit-exact with LiteRT.

* ``dw_wide.onnx`` (float, models/make_dw_wide.py) over three F405s with 80 KiB of flash
  (``split_dw3.toml``): its 7x7 depthwise conv (102,400 B) fits no board, so it is split by
  channels, each slice reading a slice of the input channels; the output equals onnxruntime's.
* ``dw_wide_qdq.onnx``, the same model as QDQ int8 ONNX, over four F405s with 43 KiB
  (``split_dw_qdq4.toml``): the depthwise conv is split the same way in the QDQ file; ``run``'s
  own check passes (onnxruntime, one output step: the int8 kernels round as TFLite's integer
  arithmetic, tests/test_qdq.py says where that differs from onnxruntime's float QDQ
  evaluation), the output is within one step of onnxruntime's optimised session and bit-exact
  with the unsplit model's generated C, and the rewritten QDQ file is bit-exact with the user's
  under onnxruntime (``compile``'s validation).

``compile`` validates all four (float within 1e-5, int8 bit-exact) before writing anything; the
builds are the real cross compiler's, the runs real QEMUs over real pseudo-serial links. The
bench of the split float plan shows the estimate holds as for any plan: every link's bytes are
the plan's, and each board's compute time is the estimate's within the emulator's usual error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from test_e2e_mlperf import litert
from test_e2e_support import BOARDS, MODELS, TOL, cli, qemu_pids, random_input, reference

from splitter.compile import CompileOptions, compile_model
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

#: |estimated - measured| / measured of an emulated board's compute: issue 12's bound for every
#: plan (README, kernel cost table: max <= 15 %)
COMPUTE_TOL = 0.15


def _build(model: str, boards: str, out: Path, **split: int) -> Path:
    """``compile`` (library; the planner choosing the split unless ``split`` fixes it), then
    ``make EMULATOR=1`` for every device."""
    options = CompileOptions(force=True, split_layers=split)
    compile_model(MODELS / model, BOARDS / boards, out, options)
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    for dev in wiring["devices"]:
        run_make(out / "firmware" / dev["name"], emulator=True)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("tiny_cnn.onnx", "split_tiny3.toml", tmp_path_factory.mktemp("st") / "out")


@pytest.fixture(scope="module")
def ad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two layers fixed at 2 slices each (``--split-layer``): the planner's own choice plans
    9 k combinations of this 20-layer chain, minutes on a loaded machine; the choice itself is
    tested on tiny_cnn (tests/test_layer_split.py)."""
    out = tmp_path_factory.mktemp("sad") / "out"
    return _build("mlperf_ad_autoencoder_int8.tflite", "split_ad4.toml", out,
                  fully_connected_0=2, fully_connected_9=2)  # fmt: skip


def _splits(out: Path) -> list[dict[str, Any]]:
    plan = json.loads((out / "plan.json").read_text())
    validation = json.loads((out / "validation.json").read_text())
    assert validation["passed"] is True
    return list(plan["layer_splits"])


def test_float_onnx_split_runs_on_three_boards_as_onnxruntime(tiny: Path, tmp_path: Path) -> None:
    (split,) = _splits(tiny)
    assert split["layer"] == "conv3" and split["slices"] >= 2 and len(set(split["devices"])) >= 2
    assert "layer conv3 split into" in (tiny / "report.md").read_text()
    x = random_input((1, 1, 28, 28), seed=27)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(tiny), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--no-check", "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference("tiny_cnn.onnx", x)))) <= TOL
    assert qemu_pids(str(tiny)) == []


def test_int8_tflite_split_runs_on_four_boards_bit_exact(ad: Path, tmp_path: Path) -> None:
    splits = _splits(ad)
    assert {s["layer"] for s in splits} == {"fully_connected_0", "fully_connected_9"}
    assert all(len(set(s["devices"])) >= 2 for s in splits)
    x = np.random.default_rng(27).integers(-128, 127, size=(1, 640), endpoint=True)
    np.save(tmp_path / "x.npy", x.astype(np.int8))
    run = cli("run", str(ad), "--input", str(tmp_path / "x.npy"), "--emulate", "--no-check",
              "--output", str(tmp_path / "y.npy"), "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y = np.load(tmp_path / "y.npy")
    ref = litert("mlperf_ad_autoencoder_int8.tflite", x.astype(np.int8))
    assert y.dtype == np.int8 and np.array_equal(y, ref) and len(set(y.ravel().tolist())) > 1
    assert qemu_pids(str(ad)) == []


#: the boards file of each split plan fixture
BOARDS_OF = {"tiny": "split_tiny3.toml", "dw": "split_dw3.toml", "dw_qdq": "split_dw_qdq4.toml"}


@pytest.mark.parametrize("which", ["tiny", "dw", "dw_qdq"])
def test_split_plan_estimate_matches_the_emulated_bench(
    which: str, request: pytest.FixtureRequest
) -> None:
    """Every link carries the planned bytes and every board's compute is the estimate within
    the kernel table's bound, the depthwise splits too: their operator-granularity layers'
    compaction ``memmove`` s are in the estimate (without them ``dw_wide``'s input-slice board
    ran 45 % over it)."""
    out: Path = request.getfixturevalue(which)
    proc = cli("bench", str(out), "--emulate", "--icount", "-n", "1", "--json",
               "--target", str(BOARDS / BOARDS_OF[which]))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    bench = json.loads(proc.stdout)
    est = bench["estimate"]
    plan = json.loads((out / "plan.json").read_text())
    sizes = [sum(t["bytes"] for t in s["outputs"]) for s in plan["submodels"]]
    measured_links = [ln["bytes"] for ln in bench["links"]]
    assert measured_links[1:-1] == sizes[:-1]  # every hop carries exactly the planned bytes
    assert [ln["bytes"] for ln in est["links"]] == measured_links
    predicted = {s["index"]: s["seconds"] for s in est["submodels"]}
    for dev in bench["devices"]:
        for sub in dev["submodels"]:
            measured = float(np.median(sub["cycles"])) / dev["clock_hz"]
            error = abs(predicted[sub["index"]] - measured) / measured
            assert error <= COMPUTE_TOL, (sub["index"], predicted[sub["index"]], measured)
    assert qemu_pids(str(out)) == []


@pytest.mark.parametrize("which", ["tiny", "ad", "dw", "dw_qdq"])
def test_split_plans_link_within_their_figures(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The part images of the split plans (the real cross compiler, not the emulator build):
    weights and arena exactly the plan's, code within the 2 % of tests/test_firmware_fit.py
    (the concat, the input slices and the extra kernel calls included: the code table fits
    the keys only operator-granularity chains have, an input slice's key took its largest op
    figure before, +2.9 % on ``dw_wide``'s input-slice board), runtime RAM at most 64 B
    under."""
    from test_firmware_fit import check_builds

    out: Path = request.getfixturevalue(which)
    assert check_builds(out, tmp_path / "kernel-objects") >= 2


@pytest.fixture(scope="module")
def dw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("dw_wide.onnx", "split_dw3.toml", tmp_path_factory.mktemp("sdw") / "out")


@pytest.fixture(scope="module")
def dw_qdq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdwq") / "out"
    return _build("dw_wide_qdq.onnx", "split_dw_qdq4.toml", out)


def _run(out: Path, x: np.ndarray, tmp: Path, *, check: bool = False) -> np.ndarray:
    """``splitter run --emulate`` of ``x``; ``check``: with ``run``'s own comparison with
    onnxruntime (a difference above its tolerance fails the run)."""
    np.save(tmp / "x.npy", x)
    flags = [] if check else ["--no-check"]
    run = cli("run", str(out), "--input", str(tmp / "x.npy"), "--emulate", *flags,
              "--output", str(tmp / "y.npy"), "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr + run.stdout
    assert not check or "check: max-abs difference to onnxruntime" in run.stdout
    assert qemu_pids(str(out)) == []
    return np.asarray(np.load(tmp / "y.npy"))


def _depthwise_split(out: Path) -> dict[str, Any]:
    """The plan's one split: the depthwise ``dw``, its slices on at least two boards."""
    (split,) = _splits(out)
    assert split["layer"] == "dw" and split["slices"] >= 2 and len(set(split["devices"])) >= 2
    plan = json.loads((out / "plan.json").read_text())
    names = {n for s in plan["submodels"] for n in (s["first_name"], s["last_name"])}
    assert any(n.startswith("dw.in") or n.startswith("dw.slice") for n in names)
    return split


def test_depthwise_split_runs_on_three_boards_as_onnxruntime(dw: Path, tmp_path: Path) -> None:
    _depthwise_split(dw)
    x = random_input((1, 16, 4, 4), seed=27)
    y = _run(dw, x, tmp_path)
    assert float(np.max(np.abs(y - reference("dw_wide.onnx", x)))) <= TOL


def test_qdq_depthwise_split_runs_on_four_boards_as_onnxruntime(
    dw_qdq: Path, tmp_path: Path
) -> None:
    """The split QDQ model on the emulated boards, without ``--no-check``: ``run`` compares
    with onnxruntime itself (the unoptimised session compile's validation runs, one output
    step allowed: the int8 kernels round as TFLite's integer arithmetic, tests/test_qdq.py);
    the output is within one step of onnxruntime's optimised session too (its int8 GEMM
    without the AVX2 saturation, ``ORT_EXACT_INT8``: with it this test failed by 17 steps,
    split or not) and bit-exact with the unsplit model's generated C on the host (the split
    changes no byte)."""
    from onnx import numpy_helper
    from test_codegen_support import build_host, planner
    from test_qdq import _host_run

    from splitter.codegen.model_c import generate_device_c
    from splitter.importers import load_chain

    _depthwise_split(dw_qdq)
    model = onnx.load(MODELS / "dw_wide_qdq.onnx")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    step = float(inits["logits_scale"])
    chain = load_chain(MODELS / "dw_wide_qdq.onnx")
    gen = generate_device_c(chain, [(0, 0, len(chain) - 1)], "solo", planner=planner())
    exe = build_host(gen, tmp_path)
    x = random_input((1, 16, 4, 4), seed=27)
    y = _run(dw_qdq, x, tmp_path, check=True).ravel()
    ref = reference("dw_wide_qdq.onnx", x).ravel()
    assert float(np.max(np.abs(y - ref))) <= 1.01 * step, np.round((y - ref) / step)
    want = _host_run(exe, 0, x.tobytes(), tmp_path, "<f4", 10)
    assert np.array_equal(y, want) and len(set(y.tolist())) > 1
