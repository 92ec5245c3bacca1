"""Fault injection between two emulated boards (splitter/bench/faults.py's proxy on link a-b).

Tiny-CNN over models/boards/e2e_tiny2.toml; the proxy sits on the unix socket between the QEMUs
of ``a`` and ``b``. Every test checks the QEMUs it started are gone afterwards (by PID).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_e2e_support import TOL, gone, random_input, reference, shared_build

from splitter import protocol as P
from splitter.bench.faults import ByteCorrupter, DropRule, FaultSpec, LinkProxy
from splitter.bench.runner import BenchConfig, RunSample, one_run, open_session
from splitter.errors import LinkError
from splitter.manifest import read_manifest

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = "tiny_cnn.onnx"
TIMEOUT_S = 30.0
OUT_BYTES = 40
RATE_SPARSE = 0.0005


def _hits(rate: float, seed: int, nbytes: int) -> bool:
    """Whether the a->b corrupter hits the first ``nbytes`` bytes.

    ``a`` (device 0) listens, so it is the proxy's server, whose direction LinkProxy seeds with
    ``seed + 1``.
    """
    c = ByteCorrupter(rate, seed + 1)
    c.apply(bytes(nbytes))
    return c.corrupted > 0


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, "e2e_tiny2.toml", "fault")


def run_with_faults(
    out: Path, spec: FaultSpec, x: np.ndarray
) -> tuple[RunSample | LinkError, LinkProxy, list[int], float]:
    """One inference with ``spec`` on link a-b: the sample or the LinkError, proxy, PIDs, time."""
    cfg = BenchConfig(runs=1, emulate=True, faults={("a", "b"): spec}, timeout=TIMEOUT_S)
    result: Any
    with ExitStack() as stack:
        s = open_session(stack, out, cfg, read_manifest(out))
        pids, proxy = s.pids, s.proxies[0]
        t0 = time.monotonic()
        try:
            result = one_run(s, x.astype("<f4").tobytes(), OUT_BYTES, TIMEOUT_S)
        except LinkError as exc:
            result = exc
        elapsed = time.monotonic() - t0
    assert len(pids) == 2 and gone(pids)
    return result, proxy, pids, elapsed


def output(sample: RunSample) -> np.ndarray:
    return np.frombuffer(sample.output, dtype="<f4").reshape(1, 10)


def test_dropped_frame_is_retransmitted(out: Path) -> None:
    x = random_input((1, 1, 28, 28), seed=11)
    drop = DropRule(sender="a", ftype=int(P.FrameType.TENSOR), nth=2)
    got, proxy, _, _ = run_with_faults(out, FaultSpec(drop=drop), x)
    assert isinstance(got, RunSample), got
    assert float(np.max(np.abs(output(got) - reference(MODEL, x)))) <= TOL
    assert proxy.dropped == 1
    dropped = [e for e in proxy.events if e.dropped]
    assert len(dropped) == 1 and dropped[0].sender == "a"
    again = [e.dropped for e in proxy.events if e.sender == "a" and e.seq == dropped[0].seq]
    # the frame got through in a copy the proxy let pass: the resend after the drop, or (on a
    # loaded machine, where a late ACK makes the sender resend and the proxy drops that copy)
    # the first one: [True, False] or [False, True]
    assert sorted(again) == [False, True], again


def test_corrupting_1pct_of_bytes_is_repaired_or_names_the_link(out: Path) -> None:
    # At 1 % a 1 KiB frame is almost surely hit (P(clean) = 0.99^1034 ~ 3e-5): the result must
    # still be right through retransmission (e.g. with shorter frames after NACKs), or board a
    # must report the link to b by name, well within the host timeout. Never a hang or bad data.
    x = random_input((1, 1, 28, 28), seed=12)
    got, proxy, _, elapsed = run_with_faults(out, FaultSpec(corrupt_rate=0.01, seed=7), x)
    assert proxy.corrupted > 0
    assert elapsed < TIMEOUT_S
    if isinstance(got, LinkError):
        text = str(got)
        assert "no answer from b on link 1" in text and "a:" in text
        return
    assert float(np.max(np.abs(output(got) - reference(MODEL, x)))) <= TOL
    sent = [e.seq for e in proxy.events if e.sender == "a" and e.type == P.FrameType.TENSOR]
    assert len(set(sent)) < len(sent)  # frames were sent again
    nacks = [e for e in proxy.events if e.sender == "b" and e.type == P.FrameType.NACK]
    assert nacks


def test_sparse_corruption_is_repaired_by_retransmission(out: Path) -> None:
    # 0.05 % of bytes, with the first seed that hits the first 3 KB from a to b: a few frames
    # are damaged, NACKed and sent again.
    x = random_input((1, 1, 28, 28), seed=13)
    seed = next(k for k in range(1000) if _hits(RATE_SPARSE, k, 3000))
    got, proxy, _, _ = run_with_faults(out, FaultSpec(corrupt_rate=RATE_SPARSE, seed=seed), x)
    assert proxy.corrupted > 0
    assert isinstance(got, RunSample), got
    assert float(np.max(np.abs(output(got) - reference(MODEL, x)))) <= TOL
    data = [e for e in proxy.events if e.sender == "a" and e.type == P.FrameType.TENSOR]
    assert len({e.seq for e in data}) < len(data)  # at least one retransmission
