"""A model with two outputs end to end on two emulated F405 boards (issue 15, item 4).

``models/two_heads.onnx`` (a CNN trunk feeding a classification and a box head) is compiled
with the trunk on board ``a`` and both heads on board ``b`` (models/boards/e2e_tiny2.toml),
validated, built with arm-none-eabi-gcc and run in QEMU: board ``b`` sends the host a RESULT of
two tensors (tensor index 0 and 1 in the chunk header, docs/protocol.md), each compared with
onnxruntime by name. One compile + build per session (``shared_build`` style, module fixture).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_cli_json import DOCS, assert_shape
from test_e2e_support import BOARDS, MODELS, TOL, cli, qemu_pids, random_input

from splitter.compile import CompileOptions, compile_model
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = MODELS / "two_heads.onnx"
OUTPUTS = ["classes/out", "box/out"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled (trunk on ``a``, heads on ``b``), validated and built for the emulator."""
    out = tmp_path_factory.mktemp("two_heads") / "out"
    opts = CompileOptions(force=True, assignment=(0, 0, 0, 1))
    result = compile_model(MODEL, BOARDS / "e2e_tiny2.toml", out, opts)
    assert result.validation is not None and result.validation.passed
    for dev in ("a", "b"):
        run_make(out / "firmware" / dev, emulator=True)
    return out


def reference(x: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {"input": x}), strict=True))


def test_plan_and_firmware_carry_both_outputs(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    assert [t["name"] for t in plan["submodels"][-1]["outputs"]] == OUTPUTS
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    b = next(d for d in wiring["devices"] if d["name"] == "b")
    outs = b["submodels"][0]["outputs"]
    assert [(t["name"], t["nbytes"]) for t in outs] == [("classes/out", 40), ("box/out", 16)]
    # both outputs live in the arena and do not overlap
    (o0, o1) = sorted((t["offset"], t["offset"] + t["nbytes"]) for t in outs)
    assert o0[1] <= o1[0] and o1[1] <= b["arena_bytes"]


def test_run_two_outputs_equal_onnxruntime(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 1, 28, 28), seed=5)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", f"input={tmp_path / 'x.npy'}", "--emulate",
               "--output", str(tmp_path / "y.npz"), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert_shape(res, DOCS["run"], "run --input NAME=X.npy, two outputs")
    assert [(o["name"], o["shape"]) for o in res["outputs"]] == [
        ("classes/out", [1, 10]),
        ("box/out", [1, 4]),
    ]
    assert sorted(res["check"]["outputs"]) == sorted(OUTPUTS)
    got = np.load(tmp_path / "y.npz")
    ref = reference(x)
    for name in OUTPUTS:
        assert float(np.max(np.abs(got[name] - ref[name]))) <= TOL
    assert not np.allclose(got["classes/out"][0, :4], got["box/out"][0])  # not one tensor twice
    assert qemu_pids(str(out)) == []


def test_several_outputs_need_an_npz_output(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 1, 28, 28), seed=6)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
               "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "classes/out, box/out" in lines[0] and "Y.npz" in lines[0]
