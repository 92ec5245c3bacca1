"""Bytes on the wire (splitter/cost/wire.py) against the protocol's encoder and real transfers.

* the formula against the frames :mod:`splitter.protocol` encodes for a transfer;
* real transfers of the host's :func:`~splitter.device.host.send_tensor` through the fault proxy
  (splitter/bench/faults.py) to a receiving :class:`~splitter.device.host.HostLink`, for message
  sizes around the chunk size: the proxy's count per direction equals the prediction exactly;
* KWS-CNN on three emulated boards (models/boards/e2e_kws3.toml, the build
  tests/test_e2e_kws.py shares): the proxies on the board-to-board links and a byte counter on
  the host's link count, per link and direction, exactly the bytes plan.json predicts
  (TIMING records growing along the chain included).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from partition_helpers import CASES, case_boards, thesis_costs
from test_e2e_support import MODELS, gone, shared_build

from splitter import protocol as P
from splitter.bench.faults import CountingTransport, DropRule, FaultSpec, LinkProxy, resent
from splitter.bench.runner import BenchConfig, one_run, open_session, random_input
from splitter.cli import main
from splitter.cost.wire import Wire, wire
from splitter.device.host import HostLink, send_tensor, to_wire
from splitter.device.transport import SocketTransport
from splitter.errors import BoardFileError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.manifest import HOST, PlanManifest, read_manifest
from splitter.partition import evaluate, make_problem, solve
from splitter.partition.planner import build_manifest, plan_chain

#: message sizes: small, around one chunk (CHUNK_DATA = 1012 today), two chunks, large
SIZES = (1, 40, P.CHUNK_DATA - 1, P.CHUNK_DATA, P.CHUNK_DATA + 1, 2 * P.CHUNK_DATA,
         2 * P.CHUNK_DATA + 1, 40_000)  # fmt: skip


def encoded(nbytes: int, records: int) -> tuple[int, int]:
    """Bytes of the frames the protocol's encoder builds for a transfer: (forward, back)."""
    data = bytes(range(256)) * (nbytes // 256 + 1)
    timing = P.encode_frame(P.FrameType.TIMING, 1, bytes(P.TIMING.size * records))
    chunks = [P.encode_frame(P.FrameType.TENSOR, 2 + k, c)
              for k, c in enumerate(P.chunk_payloads(0, data[:nbytes]))]  # fmt: skip
    acks = [P.encode_frame(P.FrameType.ACK, k + 1) for k in range(1 + len(chunks))]
    return len(timing) + sum(map(len, chunks)), sum(map(len, acks))


@pytest.mark.parametrize("records", [0, 1, 5])
@pytest.mark.parametrize("nbytes", [0, *SIZES])
def test_formula_equals_the_encoded_frames(nbytes: int, records: int) -> None:
    w = wire(nbytes, records)
    assert (w.forward, w.back) == encoded(nbytes, records)
    assert w.total == w.clean and w.payload == nbytes


def test_retransmission_budget_scales_the_clean_bytes() -> None:
    clean, noisy = wire(5000, 2), wire(5000, 2, retransmit=0.1)
    assert noisy.clean == clean.clean
    assert noisy.total == pytest.approx(1.1 * clean.clean)
    with pytest.raises(ValueError):
        wire(10, -1)


@contextmanager
def proxied_pair(
    tmp_path: Path, spec: FaultSpec | None = None
) -> Iterator[tuple[LinkProxy, HostLink, HostLink]]:
    """sender (``cli``) -> proxy -> receiver (``srv``) over unix sockets, as between QEMUs."""
    real, front = tmp_path / "l.sock.real", tmp_path / "l.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(real))
    srv.listen(1)
    proxy = LinkProxy(front, real, "srv", "cli", spec or FaultSpec())
    proxy.start()
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cli.connect(str(front))
    conn, _ = srv.accept()
    srv.close()
    sender = HostLink(SocketTransport.from_socket(cli, "unix://cli"), "srv", ack_timeout=0.3)
    receiver = HostLink(SocketTransport.from_socket(conn, "unix://srv"), "cli")
    try:
        yield proxy, sender, receiver
    finally:
        proxy.stop()
        sender.close()
        receiver.close()


def receive_tensor(link: HostLink, nbytes: int, got: list[int]) -> None:
    """TIMING, then chunks until ``nbytes`` arrived (each ACKed by ``HostLink.receive``)."""
    assert link.receive(5.0).type == P.FrameType.TIMING
    done = 0
    while done < nbytes:
        c = P.decode_chunk(link.receive(5.0).payload)
        done = max(done, c.offset + len(c.data))
    got.append(done)


def counted(events: list, sender: str) -> int:
    """Bytes of every frame ``sender`` put on the link."""
    return sum(e.wire_bytes for e in events if e.sender == sender)


def test_proxy_counts_the_predicted_bytes_per_message_size(tmp_path: Path) -> None:
    with proxied_pair(tmp_path) as (proxy, sender, receiver):
        for nbytes in SIZES:
            before = len(proxy.snapshot())
            got: list[int] = []
            rx = threading.Thread(target=receive_tensor, args=(receiver, nbytes, got))
            rx.start()
            send_tensor(sender, 0, bytes(nbytes))  # returns once the last chunk is ACKed
            rx.join(10.0)
            assert got == [nbytes]
            events = proxy.snapshot()[before:]
            w = wire(nbytes, 0)
            assert (counted(events, "cli"), counted(events, "srv")) == (w.forward, w.back), nbytes
            assert all(e.crc_ok and not e.dropped for e in events)


def test_a_retransmission_adds_its_frame_and_shows(tmp_path: Path) -> None:
    drop = DropRule(sender="cli", ftype=int(P.FrameType.TENSOR), nth=2)
    with proxied_pair(tmp_path, FaultSpec(drop=drop)) as (proxy, sender, receiver):
        got: list[int] = []
        rx = threading.Thread(target=receive_tensor, args=(receiver, 5000, got))
        rx.start()
        send_tensor(sender, 0, bytes(5000))
        rx.join(10.0)
        events = proxy.snapshot()
    w, again = wire(5000, 0), [e for e in events if e.dropped]
    assert got == [5000] and len(again) == 1
    assert counted(events, "cli") == w.forward + again[0].wire_bytes
    assert counted(events, "srv") == w.back
    assert resent([(e.type, e.seq) for e in events if e.sender == "cli"]) == 1
    assert resent([(e.type, e.seq) for e in events if e.sender == "srv"]) == 0


# --- three emulated boards ------------------------------------------------------------------


def predicted_bytes(out: Path) -> tuple[Counter[tuple[str, str]], list[Wire]]:
    """Bytes per (sender, receiver) of one inference, from plan.json's sub-models and the
    formula; checks the manifest's own ``wire_bytes`` on the way."""
    plan = read_manifest(out)
    subs, want = plan.submodels, Counter[tuple[str, str]]()
    transfers = [(HOST, subs[0].device, wire(plan.host_io.input.bytes, 0))]
    for k, sub in enumerate(subs):
        to = subs[k + 1].device if k + 1 < len(subs) else HOST
        w = wire(sub.out_bytes, k + 1)
        assert sub.wire_bytes == w.clean
        transfers.append((sub.device, to, w))
    assert plan.host_io.input.wire_bytes == transfers[0][2].clean
    assert plan.host_io.output.wire_bytes == transfers[-1][2].clean
    for src, dst, w in transfers:
        want[(src, dst)] += w.forward
        want[(dst, src)] += w.back
    return want, [w for _, _, w in transfers]


def one_counted_run(s: Any, x: bytes, nbytes: int) -> tuple[Counter[tuple[str, str]], int, Any]:
    """One inference: bytes per (sender, receiver) on every link, frames sent again, sample."""
    hosts = {name: link.transport for name, link in s.links.items()}
    assert all(isinstance(t, CountingTransport) for t in hosts.values())  # counting from PONG
    before = {name: (t.written, t.read_bytes, len(t.frames)) for name, t in hosts.items()}
    t0 = time.monotonic()
    sample = one_run(s, x, nbytes, 60.0)
    time.sleep(0.3)  # the proxies' threads note the last board-to-board ACKs
    events = [e for p in s.proxies for e in p.snapshot() if e.t_start >= t0]
    got, again = Counter[tuple[str, str]](), 0
    for e in events:
        got[(e.sender, e.receiver)] += e.wire_bytes
    for who in {e.sender for e in events}:
        again += resent([(e.type, e.seq) for e in events if e.sender == who])
    for name, t in hosts.items():
        written, read, nframes = before[name]
        got[(HOST, name)] += t.written - written
        got[(name, HOST)] += t.read_bytes - read
        for way in ("w", "r"):
            again += resent([(ft, sq) for w, ft, sq in t.frames[nframes:] if w == way])
    return got, again, sample


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_emulated_links_carry_the_predicted_bytes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Exact on a run without retransmissions; a loaded machine can starve a QEMU past its
    peer's ACK timeout, and then the frames sent again only add bytes (up to 3 runs)."""
    out = shared_build(tmp_path_factory, "kws_cnn.onnx", "e2e_kws3.toml", "wire")
    want, transfers = predicted_bytes(out)
    plan = read_manifest(out)
    x = to_wire(random_input(plan.input, 3))
    runs = []
    with ExitStack() as stack:
        s = open_session(stack, out, BenchConfig(runs=1, emulate=True, icount=False), plan)
        pids, proxies = s.pids, len(s.proxies)
        for _ in range(3):
            runs.append(one_counted_run(s, x, plan.output.nbytes))
            if runs[-1][1] == 0:
                break
    assert gone(pids) and proxies == 3
    for got, again, _ in runs[:-1]:
        assert again > 0 and all(got[k] >= v for k, v in want.items()) and set(got) == set(want)
    got, again, sample = runs[-1]
    assert again == 0, f"every run retransmitted frames: {[r[1] for r in runs]}"
    assert dict(got) == dict(want)
    assert (sample.in_wire, sample.out_wire) == (transfers[0].clean, transfers[-1].clean)
    sizes = sorted(w.payload for w in transfers)
    assert sizes[0] < P.CHUNK_DATA < sizes[-1]  # small and large messages


# --- the planner's use of it ------------------------------------------------------------------


def manifest_of(model: str, boards_text: str, tmp_path: Path, host_io: bool = True) -> Any:
    """plan + build_manifest of ``models/<model>`` on a board file written from ``boards_text``."""
    path = tmp_path / "boards.toml"
    path.write_text(boards_text)
    boards, chain = load_boards(path), load_chain(MODELS / model)
    plan = plan_chain(chain, boards, host_io=host_io)
    return build_manifest(
        plan, chain, boards, model_path=MODELS / model, boards_path=path, host_io=host_io
    )


TWO_F405 = """
[link]
baud = 115200
{extra}
[[device]]
name = "a"
mcu = "STM32F405RG"
flash = "62 KiB"
[[device]]
name = "b"
mcu = "STM32F405RG"
flash = "84 KiB"
"""


def test_host_io_is_in_the_latency_unless_excluded(tmp_path: Path) -> None:
    on = manifest_of("tiny_cnn.onnx", TWO_F405.format(extra=""), tmp_path)
    off = manifest_of("tiny_cnn.onnx", TWO_F405.format(extra=""), tmp_path, host_io=False)
    assert on.link_model == off.link_model == "wire"
    assert on.host_io.counted and not off.host_io.counted
    assert on.assignment == off.assignment  # a constant of the latency: same optimum
    assert on.host_io == replace(off.host_io, counted=True)
    inp = wire(3136, 0)  # tiny_cnn's 1x1x28x28 float32 input, after an empty TIMING
    assert on.host_io.input.wire_bytes == inp.clean
    assert on.host_io.input.seconds == pytest.approx(inp.clean * 10 / 115200)
    assert on.latency_s == pytest.approx(off.latency_s + on.host_io.seconds, rel=1e-12)
    assert PlanManifest.from_json(on.to_json()) == on


def test_retransmission_budget_scales_link_times(tmp_path: Path) -> None:
    clean = manifest_of("tiny_cnn.onnx", TWO_F405.format(extra=""), tmp_path)
    noisy = manifest_of("tiny_cnn.onnx", TWO_F405.format(extra="retransmit = 0.25"), tmp_path)
    assert noisy.retransmit == 0.25 and noisy.assignment == clean.assignment
    assert len(noisy.submodels) == 2 and clean.submodels[0].transfer_s > 0
    sub = noisy.submodels[0]
    assert sub.transfer_s == pytest.approx(1.25 * clean.submodels[0].transfer_s)
    assert sub.wire_bytes == math.ceil(1.25 * clean.submodels[0].wire_bytes)
    bad = TWO_F405.format(extra="retransmit = -1")
    with pytest.raises(BoardFileError, match="retransmit"):
        manifest_of("tiny_cnn.onnx", bad, tmp_path)


def test_profiles_keep_the_thesis_link_model() -> None:
    case = CASES[0]
    problem = make_problem(thesis_costs(case["model"]), case_boards(case))
    plan = solve(problem, "latency", "dp")
    ev = evaluate(problem, plan.assignment)
    assert problem.link_model.name == "payload" and not problem.link_model.host_io
    assert ev.host_io_s == 0.0 and all(w.total == w.payload for w in ev.sub_wire)
    assert plan.latency_s == pytest.approx(case["latency_s"], rel=1e-6)


def test_plan_prints_wire_bytes_and_host_io(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boards = tmp_path / "b.toml"
    boards.write_text(TWO_F405.format(extra=""))
    for extra, where in (((), "in the latency"), (("--no-host-io",), "not in the latency")):
        with pytest.raises(SystemExit) as info:
            main(["plan", str(MODELS / "tiny_cnn.onnx"), "--target", str(boards), *extra])
        out = capsys.readouterr().out
        assert info.value.code in (0, None)
        assert f"3200 / {wire(3200, 1).clean}" in out  # a -> b: payload / on the wire
        assert f"40 / {wire(40, 2).clean}" in out  # b -> host, after two TIMING records
        assert f"input 3136 B ({wire(3136, 0).clean} B on the wire)" in out and where in out
