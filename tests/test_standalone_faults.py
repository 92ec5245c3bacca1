"""Standalone chains keep going without a PC: a middle board reset, a bad link.

tiny_cnn.onnx over three emulated F405s (a: layers 0-1, b: layer 2, c: the rest) in
``--app standalone``; the test only reads the consoles. A reset of the middle board b (its QEMU
killed and booted again mid-run) loses the inferences in flight: the tail reports the gap
(status code 16, the number lost) on its console and to the head, and the later results are
correct again without any help. A link that corrupts and drops bytes (the fault proxy of
``splitter.bench.faults``) costs retransmissions, never a wrong result.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_e2e_support import MODELS, TOL, qemu_pids
from test_standalone_e2e import check, standalone

from splitter import protocol as P
from splitter.bench.faults import DropRule, FaultSpec, ProxiedEmulation
from splitter.device.console import Console
from splitter.toolchain import emulator as E

pytestmark = [pytest.mark.slow, pytest.mark.toolchain, pytest.mark.qemu]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    """The built 3-board standalone chain and the references of its three samples."""
    x = np.random.default_rng(8).standard_normal((3, 1, 1, 28, 28)).astype(np.float32)
    out = standalone(tmp_path_factory.mktemp("faults"), "tiny_cnn.onnx", (0, 0, 1, 2, 2), x)
    sess = ort.InferenceSession(str(MODELS / "tiny_cnn.onnx"))
    return out, [np.asarray(sess.run(None, {"input": xi})[0]) for xi in x]


def test_middle_board_reset_recovers_and_reports_the_loss(
    chain: tuple[Path, list[np.ndarray]],
) -> None:
    out, refs = chain
    with E.Emulation(out, icount=True) as emu, Console(emu.endpoints) as con:
        con.wait_results("c", 5, timeout=120)
        emu.devices[1].process.kill()  # b loses power
        down = time.monotonic() + 3.0
        while time.monotonic() < down:
            con.pump()
        emu.restart("b")
        before = len(con.results["c"])
        con.wait_results("c", before + 10, timeout=180)
    assert qemu_pids(str(out)) == []
    results = con.results["c"]
    for r in results:  # every result printed, before and after the reset, is right
        ref = refs[r.inference % len(refs)]
        got = np.frombuffer(r.outputs[0], "<f4").reshape(ref.shape)
        assert float(np.max(np.abs(got - ref))) <= TOL, r.inference
    numbers = [r.inference for r in results]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    missing = numbers[-1] + 1 - len(numbers)
    assert missing > 0  # inferences were lost while b was down ...
    lost = [s for s in con.statuses if s.board == "c" and s.code == 16]
    assert lost and lost[-1].lost == missing  # ... and the tail reports exactly those
    assert any(s.board == "a" and s.code == 16 for s in con.statuses)  # and a hears of it


def test_corrupting_and_dropping_links_give_correct_results(
    chain: tuple[Path, list[np.ndarray]],
) -> None:
    out, refs = chain
    tensor, timing = int(P.FrameType.TENSOR), int(P.FrameType.TIMING)
    faults = {
        ("a", "b"): FaultSpec(corrupt_rate=0.002, seed=3, drop=DropRule("a", tensor, 4)),
        ("b", "c"): FaultSpec(corrupt_rate=0.002, seed=4, drop=DropRule("b", timing, 2)),
    }
    with ProxiedEmulation(out, icount=True, faults=faults) as emu, Console(emu.endpoints) as con:
        results = con.wait_results("c", 8, timeout=300)[:8]
        corrupted = sum(p.corrupted for p in emu.proxies)
        dropped = sum(p.dropped for p in emu.proxies)
    assert corrupted > 0 and dropped == 2
    check(results, refs, exact=False)
