"""Helpers of the end-to-end tests on emulated boards (compile, build, CLI, QEMU PIDs).

Everything is real: ``splitter.compile.compile_model``, ``make EMULATOR=1`` with
arm-none-eabi-gcc, ``qemu-system-arm``, the CLI in a subprocess. The module holds one test
itself: that the helper which finds stray QEMU processes sees a QEMU this test starts.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from splitter.compile import CompileOptions, compile_model
from splitter.hardware.boards import for_prediction, load_boards
from splitter.importers import load_chain
from splitter.manifest import read_manifest
from splitter.partition.problem import evaluate, make_problem
from splitter.toolchain.build import run_make

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
BOARDS = MODELS / "boards"
#: Tolerance of the issue: boards' output vs onnxruntime, max-abs.
TOL = 1e-4


def compile_and_build(model: str, boards: str, out: Path) -> Path:
    """``splitter compile`` (library) then ``make EMULATOR=1`` for every device; returns OUT."""
    compile_model(MODELS / model, BOARDS / boards, out, CompileOptions(force=True))
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    for dev in wiring["devices"]:
        run_make(out / "firmware" / dev["name"], emulator=True)
    return out


def shared_build(factory: pytest.TempPathFactory, model: str, boards: str, name: str) -> Path:
    """A private copy of OUT for ``model`` on ``boards``, compiled and built once per session.

    Under pytest-xdist the workers share the session's base directory: the first worker to get
    the lock compiles and builds there, the others wait and copy. Each caller gets its own copy,
    so the QEMU command lines (which contain the ELF paths) tell whose QEMU is whose.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = factory.getbasetemp().parent if worker else factory.getbasetemp()
    shared = base / "e2e-shared" / f"{Path(model).stem}-{Path(boards).stem}"
    shared.parent.mkdir(parents=True, exist_ok=True)
    with open(shared.parent / f"{shared.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / ".built").exists():
            compile_and_build(model, boards, shared / "out")
            (shared / ".built").write_text("ok")
    own = factory.mktemp(name) / "out"
    shutil.copytree(shared / "out", own)
    return own


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    """Run ``python -m splitter ARGS`` from the repository root; the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "splitter", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


def qemu_pids(marker: str) -> list[int]:
    """PIDs of live qemu-system-arm processes whose command line contains ``marker``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if "qemu-system-arm" in cmd and marker in cmd and state != "Z":
            pids.append(int(proc.name))
    return pids


def gone(pids: list[int]) -> bool:
    """Whether none of ``pids`` is a live (non-zombie) process any more."""
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z":
            return False
    return True


#: onnxruntime session option (``kOrtSessionOptionsConfigAvx2PrecisionMode``): its x86-64 u8 x s8
#: int8 GEMM, which the default graph optimisations run a QDQ graph's convolutions on
#: (``QLinearConv`` with the activations moved to uint8), multiplies with AVX2 ``VPMADDUBSW``,
#: whose int16 sum of two products saturates (255 * 127 * 2 > 32767) on a CPU without VNNI; the
#: option takes the exact path. Without it, on this machine, ``dw_wide_qdq.onnx``'s ``expand``
#: outputs differ from onnxruntime's own unoptimised (float QDQ) run by up to 85 steps and the
#: logits by up to 23 (40 seeded inputs); with it, by none.
ORT_EXACT_INT8 = ("session.x64quantprecision", "1")


def reference(model: str, x: np.ndarray) -> np.ndarray:
    """onnxruntime's output of ``models/<model>`` for ``x`` (its default optimised session,
    the int8 GEMM without saturation: :data:`ORT_EXACT_INT8`)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry(*ORT_EXACT_INT8)
    sess = ort.InferenceSession(str(MODELS / model), options, providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, {sess.get_inputs()[0].name: x})[0])


def random_input(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A seeded standard-normal float32 input."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def planner_errors(
    out: Path, calibrated: Path, model: str, emulated: bool = True
) -> dict[str, float]:
    """Per device: the planner's compute time (calibrated boards, plan's assignment) vs bench, %.

    The planner's own code computes it: ``make_problem`` + ``evaluate`` on the original model's
    chain with the plan's per-layer assignment, predicting an emulated run (the benches here are
    emulated) unless ``emulated`` is false.
    """
    plan = read_manifest(out)
    bench = json.loads((out / "bench.json").read_text())
    boards = for_prediction(load_boards(calibrated), emulated)
    index = {d.name: i for i, d in enumerate(boards.devices)}
    chain = load_chain(MODELS / model)
    problem = make_problem(chain.costs, boards, [layer.name for layer in chain.layers])
    ev = evaluate(problem, [index[plan.devices[i].name] for i in plan.assignment])
    errors = {}
    for d in bench["devices"]:
        measured = sum(float(np.median(s["cycles"])) for s in d["submodels"]) / d["clock_hz"]
        predicted = ev.compute[index[d["device"]]]
        errors[d["device"]] = 100.0 * (predicted - measured) / measured
    return errors


def test_qemu_pids_sees_a_running_qemu(tmp_path: Path) -> None:
    marker = str(tmp_path / "marker.elf")
    proc = subprocess.Popen(
        ["qemu-system-arm", "-M", "netduinoplus2", "-display", "none", "-monitor", "none",
         "-nodefaults", "-kernel", "/dev/null", "-S", "-name", marker],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in qemu_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in qemu_pids(marker)
    finally:
        proc.kill()
        proc.wait()
    assert qemu_pids(marker) == []
    assert gone([proc.pid])
    assert os.getpid() not in qemu_pids("")
