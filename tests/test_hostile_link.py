"""A hostile board on the host link (issue 18, item 4): deadlines, malformed frames, device text.

The board is a real fake: threads speaking docs/protocol.md over a real socket (one end of
``socket.socketpair()``, or a TCP server that ``splitter run --port tcp://...`` connects to), the
host is the real :class:`~splitter.device.host.HostLink` over
:class:`~splitter.device.transport.SocketTransport`. Each case is one named test. Wall-clock
assertions use generous slack: they catch "the deadline was extended" (seconds to forever),
never scheduling jitter.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from splitter import protocol as P
from splitter.cli import main
from splitter.device import host as H
from splitter.device import run as R
from splitter.device import transport as T
from splitter.device.host import (
    DeadlineError,
    DeviceError,
    HostLink,
    MalformedFrameError,
    SilentError,
    receive_result,
    send_tensor,
)
from splitter.device.transport import SocketTransport, TransportError
from splitter.errors import LinkError, ValidationError
from splitter.manifest import read_manifest

MODEL = Path(__file__).resolve().parent.parent / "models" / "tiny_cnn.onnx"
#: Slack on top of a deadline (s): generous, the bug it catches is 20 s or a hang.
SLACK = 4.0
#: A flood stops by itself after this long (s), so a regression fails instead of hanging.
FLOOD_LIMIT = 30.0
#: ANSI clear-screen, set-title (OSC), bell, newline and a right-to-left override.
ANSI = "\x1b[2J\x1b]0;pwned\x07boom\nsecond line\u202e"

Script = Callable[["FakeBoard"], None]


class FakeBoard:
    """A board on one socket: answers PING with ``pong``, ACKs every data frame of the host,
    collects TENSOR chunks and, once the input is complete (or at once with ``eager``), runs
    ``script`` in its own thread to send whatever frames the case needs (:meth:`send`)."""

    def __init__(
        self,
        sock: socket.socket,
        script: Script,
        *,
        pong: P.Pong | None = None,
        eager: bool = False,
        reads: bool = True,
    ) -> None:
        self.sock, self.script, self.pong, self.reads = sock, script, pong, reads
        self.stop = threading.Event()
        self._seq = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._started = False
        if eager:
            self._start_script()
        if reads:
            self._spawn(self._serve)

    def _spawn(self, fn: Callable[[], None]) -> None:
        th = threading.Thread(target=fn, daemon=True)
        th.start()
        self._threads.append(th)

    def _start_script(self) -> None:
        if not self._started:
            self._started = True
            self._spawn(lambda: self.script(self))

    def raw(self, data: bytes) -> None:
        """Send bytes as they are (the socket may be closed by the host: ignored)."""
        with self._lock:
            try:
                self.sock.sendall(data)
            except OSError:
                self.stop.set()

    def send(self, ftype: int, payload: bytes = b"") -> None:
        """One data frame with the next sequence number (the host's ACK is not awaited)."""
        self._seq = (self._seq + 1) & 0xFF
        self.raw(P.encode_frame(ftype, self._seq, payload))

    def _serve(self) -> None:
        dec = P.FrameDecoder()
        got = 0
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            for status, frame in dec.feed(data):
                if status != "ok":
                    continue
                if frame.type == P.FrameType.PING and self.pong is not None:
                    self.raw(P.encode_frame(P.FrameType.PONG, 0, P.encode_pong(self.pong)))
                elif frame.type not in P.UNACKED:
                    self.raw(P.encode_frame(P.FrameType.ACK, frame.seq))
                if frame.type == P.FrameType.TENSOR:
                    chunk = P.decode_chunk(frame.payload)
                    got = chunk.offset + len(chunk.data)
                    if got >= chunk.total:
                        self._start_script()

    def close(self) -> None:
        self.stop.set()
        for th in self._threads:
            th.join(FLOOD_LIMIT + 5.0)
        self.sock.close()


def flood(board: FakeBoard) -> None:
    """TIMING frames (one valid record each), back to back, until stopped."""
    t_end = time.monotonic() + FLOOD_LIMIT
    record = P.TIMING.pack(0, 1, 0, 1234)
    while not board.stop.is_set() and time.monotonic() < t_end:
        board.send(P.FrameType.TIMING, record)
        time.sleep(0.001)


@pytest.fixture
def pair() -> Iterator[Callable[..., tuple[HostLink, FakeBoard]]]:
    """``make(script, **kw)``: a HostLink to device d1 over a socket pair, a FakeBoard on the
    other end; both closed after the test."""
    made: list[tuple[HostLink, FakeBoard]] = []

    def make(script: Script, **kw: object) -> tuple[HostLink, FakeBoard]:
        host_sock, board_sock = socket.socketpair()
        link = HostLink(SocketTransport.from_socket(host_sock, "pair://d1"), "d1", ack_timeout=0.2)
        board = FakeBoard(board_sock, script, eager=True, **kw)  # type: ignore[arg-type]
        made.append((link, board))
        return link, board

    yield make
    for link, board in made:
        board.stop.set()
        link.close()
        board.close()


def assert_project_error(exc: BaseException, device: str = "d1") -> str:
    """A LinkError naming the board, one line, no raw ValueError/struct.error, no controls."""
    text = str(exc)
    assert isinstance(exc, LinkError), repr(exc)
    assert not isinstance(exc, (ValueError, struct.error)), repr(exc)
    assert f"device {device}" in text, text
    assert all(ch.isprintable() for ch in text), repr(text)
    return text


def result_chunk(data: bytes, offset: int, total: int) -> bytes:
    return P.CHUNK.pack(0, 0, 0, total, offset) + data


# -- deadline --------------------------------------------------------------------------------
def test_timing_flood_does_not_extend_the_deadline(pair: Callable[..., Any]) -> None:
    link, _board = pair(flood)
    t0 = time.monotonic()
    with pytest.raises(DeadlineError) as info:
        receive_result(link, 100, timeout=1.0)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 1.0 + SLACK, elapsed
    text = assert_project_error(info.value)
    assert "within 1.0 s" in text and "0 of 100 B" in text


def test_timing_flood_with_an_empty_result_expected(pair: Callable[..., Any]) -> None:
    """``nbytes == 0`` waits for one (empty) RESULT; TIMING frames alone never end the wait."""
    link, _board = pair(flood)
    t0 = time.monotonic()
    with pytest.raises(DeadlineError):
        receive_result(link, 0, timeout=0.5)
    assert time.monotonic() - t0 < 0.5 + SLACK


def test_result_trickle_does_not_extend_the_deadline(pair: Callable[..., Any]) -> None:
    """One valid overlapping RESULT chunk re-sent forever makes no progress past the deadline."""

    def trickle(board: FakeBoard) -> None:
        t_end = time.monotonic() + FLOOD_LIMIT
        while not board.stop.is_set() and time.monotonic() < t_end:
            board.send(P.FrameType.RESULT, result_chunk(b"\x01" * 10, 0, 100))
            time.sleep(0.005)

    link, _board = pair(trickle)
    t0 = time.monotonic()
    with pytest.raises(DeadlineError, match=r"10 of 100 B"):
        receive_result(link, 100, timeout=1.0)
    assert time.monotonic() - t0 < 1.0 + SLACK


def test_flooding_board_that_never_reads_fails_the_write(
    pair: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host ACKs every frame; a board that floods but never reads fills the socket buffer,
    and the host's ACK write fails after WRITE_TIMEOUT_S instead of blocking forever."""
    monkeypatch.setattr(T, "WRITE_TIMEOUT_S", 0.5)

    def fast_flood(board: FakeBoard) -> None:
        t_end = time.monotonic() + FLOOD_LIMIT
        record = P.TIMING.pack(0, 1, 0, 1234) * 80
        while not board.stop.is_set() and time.monotonic() < t_end:
            board.send(P.FrameType.TIMING, record)

    link, _board = pair(fast_flood, reads=False)
    t0 = time.monotonic()
    with pytest.raises(LinkError) as info:
        receive_result(link, 100, timeout=10.0)
    assert time.monotonic() - t0 < 10.0 + SLACK
    assert isinstance(info.value, (TransportError, DeadlineError)), repr(info.value)
    assert "d1" in str(info.value)


# -- malformed frames ------------------------------------------------------------------------
def test_short_result_chunk_is_a_link_error(pair: Callable[..., Any]) -> None:
    link, _board = pair(lambda b: b.send(P.FrameType.RESULT, b"\x00\x00\x00\x00\x05"))
    with pytest.raises(MalformedFrameError) as info:
        receive_result(link, 100, timeout=3.0)
    text = assert_project_error(info.value)
    assert "malformed RESULT frame" in text and "shorter than its header" in text


def test_13_byte_timing_record_is_a_link_error(pair: Callable[..., Any]) -> None:
    link, _board = pair(lambda b: b.send(P.FrameType.TIMING, P.TIMING.pack(0, 1, 0, 5) + b"\x00"))
    with pytest.raises(MalformedFrameError) as info:
        receive_result(link, 100, timeout=3.0)
    text = assert_project_error(info.value)
    assert "malformed TIMING frame" in text and "13 bytes" in text


MALFORMED = {
    "timing_of_11_bytes": (P.FrameType.TIMING, P.TIMING.pack(0, 1, 0, 5)[:11], "multiple of"),
    "result_total_differs": (P.FrameType.RESULT, result_chunk(b"x" * 10, 0, 99), "RESULT of 99"),
    "result_beyond_total": (P.FrameType.RESULT, result_chunk(b"x" * 10, 95, 100), "beyond"),
    "result_offset_out_of_range": (
        P.FrameType.RESULT,
        result_chunk(b"x", 0xFFFFFFFF, 100),
        "beyond",
    ),
    "result_gap": (P.FrameType.RESULT, result_chunk(b"x" * 10, 50, 100), "out of order"),
    "result_empty_chunk": (P.FrameType.RESULT, result_chunk(b"", 0, 100), "empty chunk"),
    "unknown_type": (0x42, b"hello", "malformed 0x42 frame"),
    "tensor_to_the_host": (P.FrameType.TENSOR, result_chunk(b"x", 0, 1), "malformed TENSOR"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_frame_is_a_link_error(pair: Callable[..., Any], case: str) -> None:
    ftype, payload, words = MALFORMED[case]
    link, _board = pair(lambda b: b.send(ftype, payload))
    t0 = time.monotonic()
    with pytest.raises(LinkError) as info:
        receive_result(link, 100, timeout=3.0)
    assert time.monotonic() - t0 < 3.0  # raised when the frame came, not at the deadline
    assert words in assert_project_error(info.value)


def test_overlapping_chunks_then_a_gap_is_a_link_error(pair: Callable[..., Any]) -> None:
    """Overlap with bytes already received is a re-chunked retransmission (docs/protocol.md)
    and accepted; a chunk starting past the bytes received is not."""

    def script(b: FakeBoard) -> None:
        b.send(P.FrameType.RESULT, result_chunk(b"a" * 60, 0, 100))
        b.send(P.FrameType.RESULT, result_chunk(b"b" * 30, 30, 100))  # overlap: fine
        b.send(P.FrameType.RESULT, result_chunk(b"c" * 10, 70, 100))  # gap [60, 70)

    link, _board = pair(script)
    with pytest.raises(LinkError, match=r"out of order \(offset 70, 60 B received\)"):
        receive_result(link, 100, timeout=3.0)


def test_lying_length_field_ends_within_the_deadline(pair: Callable[..., Any]) -> None:
    """A header claiming 1000 bytes followed by silence, then a length above MAX_PAYLOAD:
    both are noise; the wait ends at the deadline with the board named."""

    def script(b: FakeBoard) -> None:
        b.raw(P.SYNC + P.HEADER.pack(P.FrameType.RESULT, 1, 1000) + b"\x00" * 10)
        time.sleep(0.3)
        b.raw(P.SYNC + P.HEADER.pack(P.FrameType.RESULT, 2, 0xFFFF) + b"\x00" * 64)

    link, _board = pair(script)
    t0 = time.monotonic()
    with pytest.raises(SilentError) as info:
        receive_result(link, 100, timeout=1.0)
    assert time.monotonic() - t0 < 1.0 + SLACK
    assert_project_error(info.value)


# -- device text -----------------------------------------------------------------------------
def test_error_text_with_ansi_escapes_is_escaped(pair: Callable[..., Any]) -> None:
    link, _board = pair(lambda b: b.send(P.FrameType.ERROR, bytes([3, 1, 0, 0]) + ANSI.encode()))
    with pytest.raises(DeviceError) as info:
        receive_result(link, 100, timeout=3.0)
    text = str(info.value)
    assert "\x1b" not in text and "\x07" not in text and "\n" not in text
    assert "\u202e" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07boom\\nsecond line\\u202e" in text
    assert "(code 3, device 1, arg 0)" in text and "via d1" in text


def test_short_error_frame_names_the_board(pair: Callable[..., Any]) -> None:
    link, _board = pair(lambda b: b.send(P.FrameType.ERROR, b"\x01"))
    with pytest.raises(DeviceError, match=r"via d1: malformed ERROR frame of 1 bytes"):
        receive_result(link, 100, timeout=3.0)


# -- through ``splitter run`` ----------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn compiled for one board d0 (plan.json, wiring.json; firmware not built)."""
    root = tmp_path_factory.mktemp("hostile_link")
    boards = root / "boards.toml"
    boards.write_text('[[device]]\nname = "d0"\nmcu = "STM32F446RE"\n')
    out = root / "out"
    with pytest.raises(SystemExit) as info:
        main(["compile", str(MODEL), "--target", str(boards), "-o", str(out)])
    assert info.value.code in (0, None)
    return out


def serve_board(out: Path, script: Script) -> Iterator[str]:
    """A TCP fake of board d0 of ``out`` (right PONG); yields its ``tcp://`` URL."""
    manifest = read_manifest(out)
    pong = P.Pong(
        P.PROTOCOL_VERSION, 0, 1, P.plan_hash(manifest.to_dict()), "d0", P.FIRMWARE_VERSION
    )
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10.0)
    boards: list[FakeBoard] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        boards.append(FakeBoard(conn, script, pong=pong))

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    th.join(2.0)
    server.close()
    for b in boards:
        b.close()


def splitter_run(
    out: Path, script: Script, tmp_path: Path, capsys: pytest.CaptureFixture[str], timeout: float
) -> tuple[int, str, float]:
    """``splitter run OUT --input x.npy --port tcp://... --timeout T``: exit code, stderr and
    the time it took."""
    spec = read_manifest(out).input
    x = np.random.default_rng(0).standard_normal(spec.shape).astype(spec.dtype)
    np.save(tmp_path / "x.npy", x)
    gen = serve_board(out, script)
    url = next(gen)
    t0 = time.monotonic()
    try:
        with pytest.raises(SystemExit) as info:
            main(
                [
                    "run",
                    str(out),
                    "--input",
                    str(tmp_path / "x.npy"),
                    "--port",
                    url,
                    "--timeout",
                    str(timeout),
                ]
            )
        elapsed = time.monotonic() - t0
    finally:
        next(gen, None)
    return int(info.value.code or 0), capsys.readouterr().err, elapsed


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("splitter: error: "), err
    assert all(ch.isprintable() for ch in lines[0]), repr(lines[0])
    return lines[0]


def test_nan_result_fails_the_run_check(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = read_manifest(compiled).output
    y = np.zeros(spec.shape, dtype="<f4")
    y.flat[1] = np.nan

    def answer(b: FakeBoard) -> None:
        b.send(P.FrameType.TIMING, P.TIMING.pack(0, 0, 0, 1000))
        for payload in P.chunk_payloads(0, y.tobytes()):
            b.send(P.FrameType.RESULT, payload)

    code, err, _ = splitter_run(compiled, answer, tmp_path, capsys, timeout=10.0)
    line = one_line_error(code, err)
    assert "boards' output has 1 non-finite value(s) (NaN/Inf)" in line and "index 1" in line


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_output_fails_check_output(bad: float) -> None:
    ref = np.array([0.5, 0.25, 0.125], dtype=np.float32)
    y = ref.copy()
    y[2] = bad
    with pytest.raises(ValidationError, match=r"non-finite value\(s\).*index 2"):
        R.check_output(y, ref)
    with pytest.raises(ValidationError, match=r"reference output"):
        R.check_output(ref, y)
    assert R.check_output(ref, ref) == 0.0


def test_timing_flood_run_honours_timeout(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The measured case: ``splitter run --timeout 3`` against a TIMING flood took 20.5 s."""
    code, err, elapsed = splitter_run(compiled, flood, tmp_path, capsys, timeout=3.0)
    line = one_line_error(code, err)
    assert "device d0 did not deliver the result within 3.0 s" in line, line
    assert elapsed < 3.0 + SLACK, elapsed


def test_error_text_with_ansi_escapes_reaches_the_terminal_escaped(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(b: FakeBoard) -> None:
        b.send(P.FrameType.ERROR, bytes([3, 0, 0, 0]) + ANSI.encode())

    code, err, _ = splitter_run(compiled, fail, tmp_path, capsys, timeout=10.0)
    line = one_line_error(code, err)
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err
    assert "\\x1b[2J" in line and "(code 3, device 0, arg 0)" in line


def test_cli_error_line_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defence in depth: whatever text an error carries (here a path), the CLI's one error line
    has its control characters escaped (click strips some ANSI only when not on a terminal)."""
    out = tmp_path / "o\x1b[31mut\x07"
    with pytest.raises(SystemExit) as info:
        main(["run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate"])
    line = one_line_error(int(info.value.code or 0), capsys.readouterr().err)
    assert "o\\x1b[31mut\\x07" in line


def test_flood_while_the_host_sends_is_bounded(
    pair: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data frames arriving while the host waits for an ACK are kept for later: a flood of
    them is a LinkError past MAX_INBOX frames, not unbounded memory."""
    monkeypatch.setattr(H, "MAX_INBOX", 50)
    link, _board = pair(flood, reads=False)  # floods, never ACKs the host's frames
    t0 = time.monotonic()
    with pytest.raises(LinkError) as info:
        send_tensor(link, 0, b"\x00" * 100)
    assert time.monotonic() - t0 < 8 * 0.2 + SLACK
    assert "flooded the host with more than 50 data frames" in assert_project_error(info.value)


def test_frames_then_silence_until_the_deadline_is_a_deadline_error(
    pair: Callable[..., Any],
) -> None:
    """A board that sent part of a result and then fell silent: the wait ends at the deadline
    with what arrived (a DeadlineError), not "sent nothing" (issue 43, item 10: on a loaded
    machine the trickle test reached the deadline inside its last short receive)."""
    link, _board = pair(lambda b: b.send(P.FrameType.RESULT, result_chunk(b"\x01" * 10, 0, 100)))
    with pytest.raises(DeadlineError, match=r"1 frames, 10 of 100 B"):
        receive_result(link, 100, timeout=0.5)
