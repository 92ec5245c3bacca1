"""The four MLPerf Tiny v1 networks, int8 TFLite from the real converter, on emulated boards.

Each model (``models/mlperf_*_int8.tflite``, written by ``models/make_tflite.py --mlperf``) is
compiled for two emulated STM32F405 boards whose flash limits force a split
(``models/boards/mlperf_*2.toml``), built with arm-none-eabi-gcc, run under QEMU through the CLI
and compared with LiteRT's own output: bit-exact (int8 in, int8 out). ResNet-8's residual
blocks are super-nodes of the chain, so its cut falls between two blocks (after the second
stack), which is where the flash limit needs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_e2e_support import MODELS, cli, qemu_pids, shared_build
from test_tflite_support import interpreter

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

#: model file -> (board file, the MACs of the whole network as `splitter inspect` counts them)
CASES = {
    "mlperf_kws_ds_cnn_int8.tflite": ("mlperf_kws2.toml", 2.7e6),
    "mlperf_vww_mobilenet_v1_025_int8.tflite": ("mlperf_vww2.toml", 7.7e6),
    "mlperf_ic_resnet8_int8.tflite": ("mlperf_ic2.toml", 12.6e6),
    "mlperf_ad_autoencoder_int8.tflite": ("mlperf_ad2.toml", 0.26e6),
}


def litert(model: str, x: np.ndarray) -> np.ndarray:
    """LiteRT's output of ``models/<model>`` for the int8 input ``x``."""
    it = interpreter(MODELS / model)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return np.asarray(it.get_tensor(it.get_output_details()[0]["index"]))


@pytest.mark.parametrize("model", sorted(CASES))
def test_mlperf_model_split_over_two_boards_is_bit_exact(
    model: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    boards, macs = CASES[model]
    out = shared_build(tmp_path_factory, model, boards, Path(model).stem)
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    assert abs(sum(s["macs"] for s in plan["submodels"]) - macs) <= 0.05 * macs
    shape = tuple(plan["submodels"][0]["inputs"][0]["shape"])
    x = np.random.default_rng(13).integers(-128, 127, size=shape, endpoint=True).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate", "--no-check",
              "--output", str(tmp_path / "y.npy"), "--timeout", "120")  # fmt: skip
    assert run.returncode == 0, run.stderr
    y, ref = np.load(tmp_path / "y.npy"), litert(model, x)
    assert y.dtype == np.int8 and y.shape == ref.shape
    assert np.array_equal(y, ref), np.max(np.abs(y.astype(int) - ref.astype(int)))
    assert len(set(y.ravel().tolist())) > 1  # not a constant output
    assert qemu_pids(str(out)) == []
