"""Cuts carrying several tensors (issue 15) end to end on emulated STM32F405 boards.

* ``long_skip.onnx`` at ``--granularity op`` over four boards with 400 KiB of flash each
  (``models/boards/long_skip4.toml``): each inner hop carries the skip and the main path; the
  boards' output equals onnxruntime's.
* The MLPerf Tiny int8 ResNet-8 at ``--granularity op`` over ``mlperf_ic2.toml`` (the board file
  of its super-node end-to-end test): the plan cuts inside the third residual block (the block
  input's two branches cross); bit-exact with LiteRT.

A sub-model receives its input tensors packed from arena offset 0 in plan.json order and leaves
its outputs packed there (``splitter/cost/oparena.py``), so every hop is one contiguous block.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_e2e_mlperf import litert
from test_e2e_support import BOARDS, MODELS, TOL, cli, qemu_pids, random_input, reference

from splitter.compile import CompileOptions, compile_model
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]


def _build(model: str, boards: str, out: Path) -> Path:
    """``compile --granularity op`` (library), then ``make EMULATOR=1`` for every device."""
    options = CompileOptions(force=True, granularity="op")
    compile_model(MODELS / model, BOARDS / boards, out, options)
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    for dev in wiring["devices"]:
        run_make(out / "firmware" / dev["name"], emulator=True)
    return out


@pytest.fixture(scope="module")
def long_skip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("long_skip.onnx", "long_skip4.toml", tmp_path_factory.mktemp("ls") / "out")


@pytest.fixture(scope="module")
def resnet8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("r8") / "out"
    return _build("mlperf_ic_resnet8_int8.tflite", "mlperf_ic2.toml", out)


def test_long_skip_over_four_boards_equals_onnxruntime(long_skip: Path, tmp_path: Path) -> None:
    plan = json.loads((long_skip / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b", "c", "d"]
    assert [len(s["inputs"]) for s in plan["submodels"]] == [1, 2, 2, 2]
    x = random_input((1, 3, 16, 16), seed=7)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(long_skip), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--no-check", "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y, ref = np.load(tmp_path / "y.npy"), reference("long_skip.onnx", x)
    assert y.shape == ref.shape == (1, 10)
    assert float(np.max(np.abs(y - ref))) <= TOL
    assert qemu_pids(str(long_skip)) == []


def test_resnet8_cut_inside_a_block_is_bit_exact(resnet8: Path, tmp_path: Path) -> None:
    plan = json.loads((resnet8 / "plan.json").read_text())
    subs = plan["submodels"]
    assert [s["device"] for s in subs] == ["a", "b"]
    crossing = [t["name"] for t in subs[1]["inputs"]]
    assert len(crossing) == 2 and any("s3_conv1" in n for n in crossing)
    x = np.random.default_rng(13).integers(-128, 127, size=(1, 32, 32, 3), endpoint=True)
    np.save(tmp_path / "x.npy", x.astype(np.int8))
    run = cli("run", str(resnet8), "--input", str(tmp_path / "x.npy"), "--emulate", "--no-check",
              "--output", str(tmp_path / "y.npy"), "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y, ref = np.load(tmp_path / "y.npy"), litert("mlperf_ic_resnet8_int8.tflite", x.astype(np.int8))
    assert y.dtype == np.int8 and np.array_equal(y, ref)
    assert len(set(y.ravel().tolist())) > 1
    assert qemu_pids(str(resnet8)) == []
