"""The fault proxy's parts on real unix sockets (no QEMU): framing, seeded corruption, drops."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter import protocol as P
from splitter.bench.faults import ByteCorrupter, DropRule, FaultSpec, FrameSplitter, LinkProxy


def frames() -> list[bytes]:
    return [
        P.encode_frame(P.FrameType.TIMING, 1, b""),
        P.encode_frame(P.FrameType.TENSOR, 2, P.chunk_payloads(1, bytes(range(200)))[0]),
        P.encode_frame(P.FrameType.ACK, 2),
    ]


@given(cuts=st.lists(st.integers(1, 400), max_size=8))
def test_splitter_finds_frames_whatever_the_chunking(cuts: list[int]) -> None:
    stream = b"\x00\xa5junk" + b"".join(frames())
    sp = FrameSplitter()
    units, pos = [], 0
    for c in [*cuts, len(stream)]:
        units += sp.feed(stream[pos : pos + c], 0.0)
        pos += c
    got = [raw for kind, raw, _ in units if kind == "frame"]
    assert got == frames()
    noise = b"".join(raw for kind, raw, _ in units if kind == "noise")
    assert noise == b"\x00\xa5junk"


@settings(max_examples=30)
@given(cuts=st.lists(st.integers(1, 5000), max_size=6), seed=st.integers(0, 1000))
def test_corruption_depends_only_on_byte_position(cuts: list[int], seed: int) -> None:
    data = bytes(20000)
    whole = ByteCorrupter(0.01, seed).apply(data)
    parts, pos, c = [], 0, ByteCorrupter(0.01, seed)
    for n in [*cuts, len(data)]:
        parts.append(c.apply(data[pos : pos + n]))
        pos += n
    assert b"".join(parts) == whole
    hit = np.count_nonzero(np.frombuffer(whole, dtype=np.uint8))
    assert hit == c.corrupted and 100 <= hit <= 320  # ~1 % of 20000, binomial 6 sigma


def _pair(tmp_path: Path, spec: FaultSpec) -> tuple[LinkProxy, socket.socket, socket.socket]:
    """server <- proxy <- client over unix sockets, as between two QEMUs."""
    real, front = tmp_path / "l.sock.real", tmp_path / "l.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(real))
    srv.listen(1)
    proxy = LinkProxy(front, real, "srv", "cli", spec)
    proxy.start()
    cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cli.connect(str(front))
    conn, _ = srv.accept()
    srv.close()
    conn.settimeout(2.0)
    return proxy, cli, conn


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def test_proxy_relays_and_logs_frames(tmp_path: Path) -> None:
    proxy, cli, conn = _pair(tmp_path, FaultSpec())
    try:
        data = b"".join(frames())
        cli.sendall(data)
        assert _read(conn, len(data)) == data
        conn.sendall(P.encode_frame(P.FrameType.ACK, 7))
        assert _read(cli, P.OVERHEAD) == P.encode_frame(P.FrameType.ACK, 7)
        time.sleep(0.05)
        ev = proxy.snapshot()
        assert [(e.sender, e.type) for e in ev] == [
            ("cli", P.FrameType.TIMING),
            ("cli", P.FrameType.TENSOR),
            ("cli", P.FrameType.ACK),
            ("srv", P.FrameType.ACK),
        ]
        assert ev[1].submodel == 1 and ev[1].total == 200 and ev[1].crc_ok
    finally:
        proxy.stop()
        cli.close()
        conn.close()


def test_proxy_drops_the_nth_frame_of_a_type(tmp_path: Path) -> None:
    rule = DropRule(sender="cli", ftype=int(P.FrameType.TENSOR), nth=2)
    proxy, cli, conn = _pair(tmp_path, FaultSpec(drop=rule))
    try:
        t1 = P.encode_frame(P.FrameType.TENSOR, 1, b"x" * 20)
        t2 = P.encode_frame(P.FrameType.TENSOR, 2, b"y" * 20)
        t3 = P.encode_frame(P.FrameType.TENSOR, 3, b"z" * 20)
        cli.sendall(t1 + t2 + t3)
        assert _read(conn, len(t1) + len(t3)) == t1 + t3
        assert proxy.dropped == 1
        assert [e.seq for e in proxy.snapshot() if e.dropped] == [2]
    finally:
        proxy.stop()
        cli.close()
        conn.close()
