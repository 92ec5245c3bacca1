"""A model with two graph inputs end to end on two emulated F405 boards (issue 29).

``models/two_inputs.onnx`` (an ``rgb`` and a ``depth`` branch added) is compiled over
``models/boards/two_inputs2.toml`` (both boards' flash limited, so the plan splits it), validated,
built with arm-none-eabi-gcc and run in QEMU: the host sends both inputs to the head board as
tensors 0 and 1 of one TENSOR (docs/protocol.md), exactly as a middle board of an
operator-granularity chain receives several tensors from its predecessor, and the result must
equal onnxruntime's. ``run`` takes the inputs by name and as an ``.npz``; ``bench`` sends both.
The standalone firmware compiles both inputs of each ``--input`` sample into the head board and
feeds itself (no byte from the PC).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_e2e_support import BOARDS, MODELS, TOL, cli, qemu_pids

from splitter.compile import CompileOptions, compile_model
from splitter.device.console import Console
from splitter.toolchain import emulator as E
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = MODELS / "two_inputs.onnx"
SHAPES = {"rgb": (1, 3, 16, 16), "depth": (1, 1, 16, 16)}


def inputs(seed: int, n: int | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs by name (one sample, or a stack of ``n``)."""
    rng = np.random.default_rng(seed)
    lead = () if n is None else (n,)
    return {k: rng.standard_normal((*lead, *s)).astype(np.float32) for k, s in SHAPES.items()}


def reference(feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


def free_boards(tmp: Path) -> Path:
    """``two_inputs2.toml``'s two F405s with their whole flash (the tests fix the split)."""
    boards = tmp / "boards.toml"
    text = (BOARDS / "two_inputs2.toml").read_text()
    boards.write_text(text.replace('flash = "30 KiB"', "").replace('flash = "34 KiB"', ""))
    return boards


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled by the planner (it splits: a | b), validated and built for the emulator."""
    out = tmp_path_factory.mktemp("two_inputs") / "out"
    result = compile_model(MODEL, BOARDS / "two_inputs2.toml", out, CompileOptions(force=True))
    assert result.validation is not None and result.validation.passed
    assert [s.device for s in result.manifest.submodels] == ["a", "b"]
    for dev in ("a", "b"):
        run_make(out / "firmware" / dev, emulator=True)
    return out


def test_run_by_name_and_npz_equal_onnxruntime(out: Path, tmp_path: Path) -> None:
    x = inputs(7)
    for name, a in x.items():
        np.save(tmp_path / f"{name}.npy", a)
    np.savez(tmp_path / "x.npz", **x)
    ref = reference(x)
    by_name = [
        "--input",
        f"rgb={tmp_path / 'rgb.npy'}",
        "--input",
        f"depth={tmp_path / 'depth.npy'}",
    ]
    for given in (by_name, ["--input", str(tmp_path / "x.npz")]):
        proc = cli("run", str(out), *given, "--emulate", "--output", str(tmp_path / "y.npy"))
        assert proc.returncode == 0, proc.stderr
        got = np.load(tmp_path / "y.npy")
        assert float(np.max(np.abs(got - ref))) <= TOL
    swapped = reference({"rgb": x["rgb"], "depth": -x["depth"]})
    assert float(np.max(np.abs(swapped - ref))) > TOL  # the depth input matters
    proc = cli("run", str(out), "--input", f"rgb={tmp_path / 'rgb.npy'}", "--emulate")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "depth" in lines[-1] and "--input depth=X.npy" in lines[-1]
    assert qemu_pids(str(out)) == []


def test_bench_sends_both_inputs(out: Path, tmp_path: Path) -> None:
    proc = cli("bench", str(out), "--emulate", "-n", "2", "--no-pipeline", "--json")
    assert proc.returncode == 0, proc.stderr
    bench = json.loads(proc.stdout)
    host_in = [t for t in bench["links"] if t["from"] == "host"]
    assert host_in and host_in[0]["bytes"] == 4096, host_in
    assert qemu_pids(str(out)) == []


def test_standalone_feeds_both_inputs_itself(tmp_path: Path) -> None:
    """--app standalone with two samples of each input compiled into the head (given by name):
    the tail prints results equal to onnxruntime's on sample ``inference mod 2``."""
    x = inputs(11, n=2)
    files = []
    for name, a in x.items():
        np.save(tmp_path / f"{name}.npy", a)
        files.append(f"{name}={tmp_path / f'{name}.npy'}")
    boards = free_boards(tmp_path)
    opts = CompileOptions(
        force=True, validate=False, app="standalone", input_files=tuple(files),
        assignment=(0, 0, 0, 0, 0, 1, 1),
    )  # fmt: skip
    res = compile_model(MODEL, boards, tmp_path / "out", opts)
    for dev in ("a", "b"):
        run_make(res.out_dir / "firmware" / dev, emulator=True)
    with E.Emulation(res.out_dir, icount=True) as emu, Console(emu.endpoints) as con:
        results = con.wait_results("b", 4, timeout=120)[:4]
    assert [r.inference for r in results] == [0, 1, 2, 3]
    refs = [reference({k: v[i] for k, v in x.items()}) for i in range(2)]
    for r in results:
        ref = refs[r.inference % 2]
        got = np.frombuffer(r.outputs[0], "<f4").reshape(ref.shape)
        assert float(np.max(np.abs(got - ref))) <= TOL, r.inference
    assert qemu_pids(str(res.out_dir)) == []


def test_int8_tflite_two_inputs_bit_exact_on_two_boards(tmp_path: Path) -> None:
    """two_inputs_int8.tflite cut after the first int8 conv layers (a | b), built and run: the
    boards' int8 logits equal LiteRT's (built-in kernels) bit for bit."""
    model = MODELS / "two_inputs_int8.tflite"
    opts = CompileOptions(force=True, assignment=(0, 0, 0, 0, 1, 1, 1, 1))
    res = compile_model(model, free_boards(tmp_path), tmp_path / "out", opts)
    assert res.validation is not None and res.validation.passed
    for dev in {s.device for s in res.manifest.submodels}:
        run_make(res.out_dir / "firmware" / dev, emulator=True)
    rng = np.random.default_rng(9)
    x = {
        t.name: rng.integers(-128, 128, t.shape).astype(np.int8)
        for t in res.manifest.submodels[0].inputs
    }
    np.savez(tmp_path / "x.npz", **x)
    proc = cli("run", str(res.out_dir), "--emulate", "--input", str(tmp_path / "x.npz"),
               "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "max-abs difference to LiteRT 0 " in proc.stdout + proc.stderr
    got = np.load(tmp_path / "y.npy")
    from splitter.slicing.validate import TfliteRunner

    runner = TfliteRunner(model)
    ref = runner.run(x)[runner.outputs[0].name]
    assert got.dtype == np.int8 and np.array_equal(got, ref)
    assert qemu_pids(str(res.out_dir)) == []
