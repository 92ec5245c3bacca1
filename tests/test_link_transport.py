"""Host transports (splitter/device/transport.py) over real sockets, and one result reassembly.

No mocks: TCP servers on 127.0.0.1, ``socket.socketpair()`` and pyserial's ``loop://``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from splitter import protocol as P
from splitter.device.host import HostLink, Timing, receive_result
from splitter.device.transport import (
    LoggingTransport,
    SerialTransport,
    SocketTransport,
    Transport,
    TransportError,
    open_transport,
)


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """A TCP server on 127.0.0.1 echoing one connection until it closes."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5.0)

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    yield server.getsockname()
    server.close()
    th.join(2.0)


def read_exactly(t: Transport, n: int, timeout: float = 2.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += t.read(n - len(out), 0.1)
    return out


@pytest.mark.parametrize("scheme", ["tcp", "socket"])
def test_echo_over_a_local_tcp_server(echo_server: tuple[str, int], scheme: str) -> None:
    host, port = echo_server
    with open_transport(f"{scheme}://{host}:{port}") as t:
        assert isinstance(t, SocketTransport if scheme == "tcp" else SerialTransport)
        payload = bytes(range(256)) * 8
        t.write(payload)
        assert read_exactly(t, len(payload)) == payload


def test_read_timeout_returns_nothing_in_time(echo_server: tuple[str, int]) -> None:
    host, port = echo_server
    with open_transport(f"tcp://{host}:{port}") as t:
        t0 = time.monotonic()
        assert t.read(10, 0.2) == b""
        assert 0.15 <= time.monotonic() - t0 < 1.0


def test_closed_peer_is_an_error_not_a_timeout() -> None:
    a, b = socket.socketpair()
    t = SocketTransport.from_socket(a, "pair://a", peer="device x")
    b.close()
    with pytest.raises(TransportError, match=r"pair://a: device x closed the connection"):
        t.read(1, 1.0)
    t.close()


def test_nobody_listening_is_a_one_line_error() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(TransportError, match=rf"tcp://127.0.0.1:{port}: cannot connect to dev"):
        open_transport(f"tcp://127.0.0.1:{port}", peer="dev")


def test_serial_loop_url() -> None:
    with open_transport("loop://") as t:
        t.write(b"hello")
        assert read_exactly(t, 5) == b"hello"


def test_logging_transport_logs_both_directions() -> None:
    lines: list[str] = []
    with open_transport("loop://", log=lines.append) as t:
        assert isinstance(t, LoggingTransport)
        t.write(b"\xa5\x5a")
        assert t.read(2, 1.0) == b"\xa5\x5a"
    assert lines[0] == "loop://: open loop://"
    assert "loop:// -> a5 5a" in lines
    assert any(line.startswith("loop:// <- a5 5a") for line in lines)
    assert lines[-1] == "loop://: close"


def board_end() -> tuple[HostLink, socket.socket]:
    """A HostLink over one end of a socket pair; the test plays the board on the other."""
    host_sock, board = socket.socketpair()
    link = HostLink(SocketTransport.from_socket(host_sock, "pair://d1"), "d1", ack_timeout=0.2)
    return link, board


def test_host_link_pings_over_a_socket_pair() -> None:
    link, board = board_end()
    pong = P.Pong(P.PROTOCOL_VERSION, 1, 1, "0011223344556677", "d1", P.FIRMWARE_VERSION)

    def answer() -> None:
        dec = P.FrameDecoder()
        while True:
            for _status, frame in dec.feed(board.recv(64)):
                if frame.type == P.FrameType.PING:
                    board.sendall(P.encode_frame(P.FrameType.PONG, 0, P.encode_pong(pong)))
                    return

    th = threading.Thread(target=answer, daemon=True)
    th.start()
    with link:
        assert link.ping(timeout=2.0) == pong
    th.join(2.0)
    board.close()


def test_retransmitted_chunk_is_counted_once() -> None:
    """A board re-chunks a RESULT chunk whose ACK was lost: [0,60) then [0,30) [30,60) [60,100).

    Progress is the highest byte received, so the result is complete only after the last chunk
    (a sum of chunk lengths would reach 100 B after the third chunk, with bytes 60..99 unset).
    """
    link, board = board_end()
    data = bytes(range(100))
    timing = P.TIMING.pack(0, 1, 0, 12345)
    frames = [P.encode_frame(P.FrameType.TIMING, 1, timing)]
    for seq, (lo, hi) in enumerate([(0, 60), (0, 30), (30, 60), (60, 100)], start=2):
        chunk = P.CHUNK.pack(0, 0, 0, len(data), lo) + data[lo:hi]
        frames.append(P.encode_frame(P.FrameType.RESULT, seq, chunk))
    board.sendall(b"".join(frames[:4]))  # the last chunk comes later

    def late() -> None:
        time.sleep(0.3)
        board.sendall(frames[4])

    th = threading.Thread(target=late, daemon=True)
    th.start()
    with link:
        t0 = time.monotonic()
        got, timings, t_first = receive_result(link, len(data), timeout=5.0)
    th.join(2.0)
    assert got == data
    assert timings == [Timing(0, 1, 12345)]
    assert t0 <= t_first and time.monotonic() - t0 >= 0.25  # waited for the last chunk
    acks = list(P.FrameDecoder().feed(board.recv(4096)))
    assert [f.seq for _s, f in acks] == [1, 2, 3, 4, 5]
    board.close()
