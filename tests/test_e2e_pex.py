"""PEX partial execution end to end: a model that fits no emulated STM32F405 run op by op runs
channel by channel on two of them (issue 16, "What must be shown").

``models/pex_irb_48.onnx`` (models/build.py): each inverted-residual block's expanded tensor is
221,184 B of float32, more than the F405's 128 KiB arena region. ``--partial-execution off`` finds
no plan; with the loops each block fits, so the plan below puts one block on each board (both
sub-models run a loop). The firmware is built with the real cross compiler, run on QEMU, and its
output compared with onnxruntime. An int8 model (MLPerf VWW, full-integer TFLite) runs with row
loops (``splitter/cost/rows.py``) on two emulated F405s, bit for bit LiteRT.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_e2e_support import BOARDS, MODELS, TOL, cli, qemu_pids, random_input, reference

from splitter.compile import CompileOptions, compile_model
from splitter.errors import InfeasibleError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.partition.partial import plan_partial
from splitter.toolchain.build import run_make, section_sizes

MODEL = "pex_irb_48.onnx"
BOARD_FILE = "e2e_pex.toml"
#: QEMU's F405 arena region (SRAM1 + SRAM2 at 0x20000000), bytes.
REGION = 128 * 1024
#: Chain layers (loops fused): input, stem, block 1 (loop), block 2 (loop), head conv, classifier.
ASSIGNMENT = (0, 0, 0, 1, 1, 1)


def test_no_plan_without_partial_execution() -> None:
    chain = load_chain(str(MODELS / MODEL))
    boards = load_boards(BOARDS / BOARD_FILE)
    with pytest.raises(InfeasibleError):
        plan_partial(chain, boards, "off")
    fused, plan = plan_partial(chain, boards, "auto")
    assert any(layer.loops for layer in fused.layers) and plan.submodels
    assert sum(c.macs for c in fused.costs) == sum(c.macs for c in chain.costs)  # zero extra


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pex") / "out"
    options = CompileOptions(force=True, partial_execution="on", assignment=ASSIGNMENT)
    compile_model(MODELS / MODEL, BOARDS / BOARD_FILE, root, options)
    return root


def test_each_submodel_runs_a_loop_and_its_arena_is_the_estimate(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    for sub, dev in zip(plan["submodels"], plan["devices"], strict=True):
        pex = sub["partial_execution"]
        assert len(pex["loops"]) == 1 and "over 96 channels" in pex["loops"][0]
        assert pex["ram_whole_bytes"] > REGION > sub["ram_bytes"]
        assert pex["saved_bytes"] == pex["ram_whole_bytes"] - sub["ram_bytes"]
        header = (out / "firmware" / dev["name"] / "model.h").read_text()
        arena = int(re.search(r"MODEL_ARENA_BYTES (\d+)u", header).group(1))  # type: ignore[union-attr]
        assert arena == dev["ram_used"] == sub["ram_bytes"]
    assert "<h2>Partial execution</h2>" in (out / "report.html").read_text()
    assert "partial execution (PEX), RAM" in (out / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_runs_on_two_emulated_f405(out: Path, tmp_path: Path) -> None:
    """The linked ``.arena`` is the planned RAM (4-byte aligned) and fits the 128 KiB region."""
    plan = json.loads((out / "plan.json").read_text())
    for dev in plan["devices"]:
        elf = run_make(out / "firmware" / dev["name"], emulator=True)
        arena = section_sizes(elf)[".arena"]
        assert arena == (dev["ram_used"] + 3) // 4 * 4 and arena < REGION
    x = random_input((1, 3, 48, 48), seed=16)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / MODEL))  # fmt: skip
    assert run.returncode == 0, run.stderr
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 10)
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= TOL
    assert qemu_pids(str(out)) == []


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_int8_row_loops_on_two_emulated_f405(tmp_path: Path) -> None:
    """MLPerf Tiny VWW (full-integer TFLite) with its PEX loops forced on (two row loops, the
    second in bands of four rows, and a channel loop of 16 channels per iteration, the boards
    holding them; models/boards/mlperf_vww2.toml) cross-built and run on two emulated F405s:
    each linked ``.arena`` is the planned RAM, the output bit for bit LiteRT's."""
    from test_e2e_mlperf import litert

    model = "mlperf_vww_mobilenet_v1_025_int8.tflite"
    out = tmp_path / "out"
    compile_model(MODELS / model, BOARDS / "mlperf_vww2.toml", out,
                  CompileOptions(force=True, partial_execution="on"))  # fmt: skip
    plan = json.loads((out / "plan.json").read_text())
    loops = [
        lp for s in plan["submodels"] for lp in s.get("partial_execution", {}).get("loops", [])
    ]
    assert sum(1 for lp in loops if re.search(r" over \d+ rows\b", lp)) == 2
    assert sum(1 for lp in loops if re.search(r" over 12 rows, 4 per iteration\b", lp)) == 1
    assert sum(1 for lp in loops if re.search(r" channels, 16 per iteration\b", lp)) == 1
    for dev in plan["devices"]:
        elf = run_make(out / "firmware" / dev["name"], emulator=True)
        assert section_sizes(elf)[".arena"] == (dev["ram_used"] + 3) // 4 * 4
    shape = tuple(plan["submodels"][0]["inputs"][0]["shape"])
    x = np.random.default_rng(13).integers(-128, 127, size=shape, endpoint=True).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate", "--no-check",
              "--output", str(tmp_path / "y.npy"), "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y, ref = np.load(tmp_path / "y.npy"), litert(model, x)
    assert np.array_equal(y, ref), np.max(np.abs(y.astype(int) - ref.astype(int)))
    assert qemu_pids(str(out)) == []
