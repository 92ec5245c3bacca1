"""Host side of the link: a reliable frame session per board endpoint, and one inference.

:class:`HostLink` runs over a byte :class:`~splitter.device.transport.Transport` (a serial port
``/dev/ttyUSB0``, QEMU's ``socket://127.0.0.1:PORT``, ``tcp://HOST:PORT``; see
``splitter/device/transport.py``) with the stop-and-wait ARQ of docs/protocol.md: every data
frame is retransmitted until ACKed (NACK or timeout), received data frames are ACKed
(duplicates re-ACKed and dropped), CRC errors are NACKed. Nothing here blocks longer than its
timeout: a silent board raises :class:`LinkError` naming it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from splitter import protocol as P
from splitter.device.transport import Transport, open_transport
from splitter.errors import LinkError, escaped

ACK_TIMEOUT_S = 1.0
RETRIES = 8
PING_TIMEOUT_S = 0.3
#: Silence inside a frame after which the rest of it is given up (the sender waits for us).
BYTE_GAP_S = 0.1
#: Longest single transport read while waiting (s): the granularity of the byte-gap check.
POLL_S = 0.02
#: Seconds between checks of the other host links for a board's ERROR while waiting a result.
WATCH_PERIOD_S = 0.25
#: Most data frames kept unread (received while sending): a board flooding the host while it
#: sends is a LinkError, not unbounded memory. A legitimate backlog is one output tensor's
#: RESULT chunks (a 1 MiB output is ~1040 chunks of 1012 B) plus its TIMING and ERROR.
MAX_INBOX = 4096


class DeviceError(LinkError):
    """A board sent an ERROR frame (its text names the board and what failed)."""


class SilentError(LinkError):
    """A board sent no data frame within the receive timeout."""


class DeadlineError(SilentError):
    """A board kept sending but did not complete the awaited data before the deadline."""


class MalformedFrameError(LinkError):
    """A board sent a frame whose payload breaks docs/protocol.md (size, offsets, type)."""


@dataclass
class Timing:
    """Cycles one device spent in one sub-model (from TIMING frames)."""

    submodel: int
    device: int
    cycles: int


@dataclass
class InferenceResult:
    """Output tensor bytes (every output's, concatenated, and ``tensors`` one per output), per
    sub-model cycles and the wall time of the exchange."""

    data: bytes
    timings: list[Timing] = field(default_factory=list)
    seconds: float = 0.0
    tensors: list[bytes] = field(default_factory=list)


class HostLink:
    """One endpoint to one device, speaking the splitter frame protocol over a transport.

    ``port`` is a URL for :func:`~splitter.device.transport.open_transport` (opened here) or an
    opened :class:`~splitter.device.transport.Transport` (closed by :meth:`close`).
    """

    def __init__(
        self,
        port: str | Transport,
        device: str,
        *,
        baud: int = 115200,
        ack_timeout: float = ACK_TIMEOUT_S,
        retries: int = RETRIES,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.device = device
        self.ack_timeout, self.retries, self.log = ack_timeout, retries, log
        #: progress of tensor transfers: called with ("send" | "receive", bytes done, total)
        self.on_bytes: Callable[[str, int, int], None] | None = None
        if isinstance(port, str):
            port = open_transport(port, baud=baud, peer=f"device {device}")
        self.transport = port
        self.url = port.url
        self._decoder = P.FrameDecoder()
        self._pending: deque[tuple[str, P.Frame]] = deque()
        self._inbox: deque[P.Frame] = deque()
        self._tx_seq = 0
        self._rx_seq: int | None = None
        #: plan tag of the board's firmware (from its PONG), sent in every TENSOR chunk
        self.plan_tag = 0
        #: answers a board's request while the host waits for a result (True: served), e.g.
        #: segment weights (:class:`splitter.segments.server.WeightServer`); None: no requests
        self.serve: Callable[[HostLink, P.Frame], bool] | None = None

    def close(self) -> None:
        """Close the transport."""
        self.transport.close()

    def __enter__(self) -> HostLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw frames ------------------------------------------------------------------------
    def _write(self, frame: P.Frame) -> None:
        if self.log:
            self.log(f"-> {self.device} {frame.name} seq={frame.seq} len={len(frame.payload)}")
        self.transport.write(frame.encode())

    def _next_raw(self, deadline: float) -> tuple[str, P.Frame] | None:
        """The next decoded ``(status, frame)`` or ``None`` at the deadline."""
        last = time.monotonic()
        while not self._pending:
            now = time.monotonic()
            if now >= deadline:
                return None
            data = self.transport.read(P.MAX_PAYLOAD, min(POLL_S, deadline - now))
            if data:
                last = now
                self._pending.extend(self._decoder.feed(data))
            elif now - last > BYTE_GAP_S and self._decoder.pending:
                last = now  # a frame stalled mid-way (corrupted length): resynchronise
                self._pending.extend(self._decoder.drop_partial())
        status, frame = self._pending.popleft()
        if self.log:
            self.log(
                f"<- {self.device} {frame.name} seq={frame.seq} len={len(frame.payload)}"
                + (" CRC ERROR" if status == "bad" else "")
            )
        return status, frame

    # -- ping ------------------------------------------------------------------------------
    def ping(self, timeout: float = 10.0) -> P.Pong:
        """PING until a PONG arrives (the board may still be booting); resets its seq state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._write(P.Frame(P.FrameType.PING, 0))
            wait = min(deadline, time.monotonic() + PING_TIMEOUT_S)
            while (got := self._next_raw(wait)) is not None:
                status, frame = got
                if status == "ok" and frame.type == P.FrameType.PONG:
                    try:
                        pong = P.decode_pong(frame.payload)
                        self.plan_tag = P.plan_tag(pong.plan_hash)
                        return pong
                    except ValueError as exc:
                        raise LinkError(
                            f"{self.url}: device {self.device} answered a malformed PONG ({exc})"
                        ) from None
        raise LinkError(
            f"{self.url}: device {self.device} does not answer PING within {timeout:.0f} s; "
            "check the port, the wiring and that its firmware is flashed"
        )

    # -- reliable send / receive -------------------------------------------------------------
    def send(
        self, ftype: int, payload: bytes, tries: int | None = None, until: float | None = None
    ) -> int:
        """Send one data frame, retransmitting on NACK or timeout until ACKed.

        Returns the number of transmissions it took; :class:`LinkError` after ``tries``
        (default: the link's ``retries``) or once the absolute ``until`` (``time.monotonic``)
        has passed, whichever comes first.
        """
        tries = tries or self.retries
        self._tx_seq = (self._tx_seq + 1) & 0xFF
        frame = P.Frame(ftype, self._tx_seq, payload)
        for attempt in range(1, tries + 1):
            if until is not None and time.monotonic() >= until:
                raise LinkError(
                    f"{self.url}: device {self.device} did not acknowledge {frame.name} within "
                    f"the deadline ({attempt - 1} tries; it stopped answering)"
                )
            self._write(frame)
            deadline = time.monotonic() + self.ack_timeout
            if until is not None:
                deadline = min(deadline, until)
            while (got := self._next_raw(deadline)) is not None:
                status, reply = got
                if status == "bad":
                    continue
                if reply.type == P.FrameType.ACK and reply.seq == frame.seq:
                    return attempt
                if reply.type == P.FrameType.NACK and reply.seq == frame.seq:
                    break
                self._absorb(reply)
        raise LinkError(
            f"{self.url}: device {self.device} did not acknowledge {frame.name} after "
            f"{tries} tries of {self.ack_timeout:.1f} s"
        )

    def _absorb(self, frame: P.Frame) -> None:
        """A data frame arriving out of turn: ACK it and keep it (re-ACK duplicates)."""
        if frame.type in P.UNACKED:
            return
        if frame.seq != self._rx_seq and len(self._inbox) >= MAX_INBOX:
            raise LinkError(
                f"{self.url}: device {self.device} flooded the host with more than {MAX_INBOX} "
                "data frames it did not read yet; check its firmware (splitter build / flash)"
            )
        self._write(P.Frame(P.FrameType.ACK, frame.seq))
        if frame.seq != self._rx_seq:
            self._rx_seq = frame.seq
            self._inbox.append(frame)

    def receive(self, timeout: float) -> P.Frame:
        """The next data frame (ACKed; CRC errors NACKed), or :class:`LinkError` at timeout."""
        deadline = time.monotonic() + timeout
        while not self._inbox:
            got = self._next_raw(deadline)
            if got is None:
                raise SilentError(
                    f"{self.url}: device {self.device} sent nothing for {timeout:.1f} s "
                    "(it stopped answering)"
                )
            status, frame = got
            if status == "bad":
                self._write(P.Frame(P.FrameType.NACK, frame.seq))
            else:
                self._absorb(frame)
        frame = self._inbox.popleft()
        if frame.type == P.FrameType.ERROR:
            raise DeviceError(f"device error reported via {self.device}: {decode_error(frame)}")
        return frame


def decode_error(frame: P.Frame) -> str:
    """Text of an ERROR frame: code, device index, argument, message.

    The message is device text: control characters (ANSI escapes, newlines, BEL...) are
    escaped as ``\\x1b`` etc. (:func:`device_text`) so a board cannot drive the terminal.
    """
    p = frame.payload
    if len(p) < 4:
        return f"malformed ERROR frame of {len(p)} bytes"
    return f"{device_text(p[4:])} (code {p[0]}, device {p[1]}, arg {p[2]})"


def device_text(raw: bytes) -> str:
    """Bytes a board sent as text, safe to print: decoded as UTF-8 (invalid bytes become
    U+FFFD), then every non-printable character escaped (``repr`` escapes: ``\\x1b``,
    ``\\n``, ``\\u202e``), so no control sequence reaches a terminal."""
    return escaped(raw.decode("utf-8", "replace"))


def _malformed(link: HostLink, frame: P.Frame, why: str) -> MalformedFrameError:
    """The error for a frame breaking docs/protocol.md, naming the board, link and frame."""
    return MalformedFrameError(
        f"{link.url}: device {link.device} sent a malformed {frame.name} frame "
        f"(seq {frame.seq}, {len(frame.payload)} B): {why}; check its firmware (splitter build "
        "/ flash)"
    )


def decode_timing(link: HostLink, frame: P.Frame) -> list[Timing]:
    """The TIMING records of ``frame`` (12 bytes each); :class:`MalformedFrameError` when the
    payload is not a whole number of records."""
    try:
        return [Timing(*rec) for rec in P.decode_timing(frame.payload)]
    except ValueError as exc:
        raise _malformed(link, frame, str(exc)) from None


def decode_result_chunk(
    link: HostLink, frame: P.Frame, nbytes: int, got: int, tensor: int = 0
) -> P.Chunk:
    """A RESULT chunk of output ``tensor`` (``nbytes`` long, ``[0, got)`` arrived), checked.

    Accepted: the chunk's tensor index is ``tensor``, ``total == nbytes``,
    ``offset + len(data) <= nbytes``, ``offset <= got`` (chunks arrive in order; a re-chunked
    retransmission may overlap what arrived, docs/protocol.md), non-empty data unless the tensor
    is empty. Anything else is a :class:`LinkError`.
    """
    try:
        chunk = P.decode_chunk(frame.payload)
    except ValueError as exc:
        raise _malformed(link, frame, str(exc)) from None
    if chunk.tensor != tensor:
        raise _malformed(link, frame, f"output tensor {chunk.tensor} while receiving {tensor}")
    if chunk.total != nbytes:
        raise LinkError(
            f"device {link.device}: RESULT of {chunk.total} B, expected {nbytes} B (output "
            f"tensor {tensor}); the board runs a different plan"
        )
    end = chunk.offset + len(chunk.data)
    if end > nbytes:
        raise _malformed(link, frame, f"chunk [{chunk.offset}, {end}) beyond {nbytes} B")
    if not chunk.data and nbytes:
        raise _malformed(link, frame, f"empty chunk at offset {chunk.offset}")
    if chunk.offset > got:
        raise LinkError(
            f"device {link.device}: RESULT chunk out of order (offset {chunk.offset}, "
            f"{got} B received)"
        )
    return chunk


MIN_CHUNK = 32


def send_tensor(link: HostLink, submodel: int, data: bytes, until: float | None = None) -> None:
    """An empty TIMING, then one tensor as TENSOR chunks for ``submodel``
    (:func:`send_tensors` with one tensor)."""
    send_tensors(link, submodel, [data], until)


def send_tensors(
    link: HostLink, submodel: int, tensors: Sequence[bytes], until: float | None = None
) -> None:
    """An empty TIMING, then every tensor in order as TENSOR chunks for ``submodel``; the chunk
    header's tensor index is the position in ``tensors`` (the sub-model's inputs in plan.json).

    Every chunk carries the plan tag of the firmware that answered PING; a board running
    another plan rejects it with an ERROR naming itself.
    """
    link.send(P.FrameType.TIMING, b"", until=until)
    sent, total = 0, sum(len(d) for d in tensors)
    for t, data in enumerate(tensors):
        _send_chunks(link, submodel, t, data, until, (sent, total))
        sent += len(data)


def _send_chunks(
    link: HostLink,
    submodel: int,
    tensor: int,
    data: bytes,
    until: float | None,
    progress: tuple[int, int],
) -> None:
    """Tensor ``tensor`` as TENSOR chunks.

    The chunk size adapts to the line (as the firmware does): a chunk that is not ACKed within
    two transmissions is re-sent as two halves (down to :data:`MIN_CHUNK` bytes, where twice the
    retry count applies); a chunk ACKed at once doubles the size again. Nothing is sent after
    the absolute ``until`` (``time.monotonic``): a board that stops answering is named then.
    ``progress`` is ``(bytes of the earlier tensors, bytes of all)`` for :attr:`HostLink.on_bytes`.
    """
    size, off = P.CHUNK_DATA, 0
    while off < len(data) or (off == 0 and not data):
        part = data[off : off + size]
        payload = P.CHUNK.pack(submodel, tensor, link.plan_tag, len(data), off) + part
        small = len(part) <= MIN_CHUNK
        try:
            attempts = link.send(
                P.FrameType.TENSOR, payload, tries=2 * link.retries if small else 2, until=until
            )
        except LinkError:
            if small or (until is not None and time.monotonic() >= until):
                raise
            size = len(part) // 2
            continue
        off += len(part)
        if link.on_bytes is not None:
            link.on_bytes("send", progress[0] + off, progress[1])
        size = min(P.CHUNK_DATA, size * 2) if attempts == 1 else size
        if not data:
            break


def receive_result(
    link: HostLink, nbytes: int, timeout: float, watch: Sequence[HostLink] = ()
) -> tuple[bytes, list[Timing], float]:
    """:func:`receive_results` of one output tensor of ``nbytes`` bytes."""
    data, timings, t_first = receive_results(link, [nbytes], timeout, watch)
    return data[0], timings, t_first


def receive_results(
    link: HostLink, sizes: Sequence[int], timeout: float, watch: Sequence[HostLink] = ()
) -> tuple[list[bytes], list[Timing], float]:
    """TIMING then the RESULT chunks of every output tensor (``sizes[t]`` bytes each, in order)
    from the last device, reassembled; with the monotonic time the first frame arrived (the
    start of the result's transfer, for ``splitter bench``).

    Chunks arrive in order but a re-chunked retransmission may overlap bytes already received,
    so progress is the highest byte received (``got = max(got, offset + len)``), never a sum;
    a chunk at offset 0 restarts the tensor. While waiting, the other host links (``watch``)
    are polled for an ERROR frame: a board that gives up on a board-to-board link reports it on
    its link 0, which may not be the link the result comes on; that error is raised at once.
    """
    bufs = [bytearray(n) for n in sizes]
    t, got, t_first = 0, 0, 0.0
    timings: list[Timing] = []
    deadline = time.monotonic() + timeout
    frames, done, total = 0, 0, sum(sizes)
    while t < len(sizes):
        _check_deadline(link, deadline, timeout, frames, done + got, total)
        try:
            frame = _receive_watching(link, deadline, watch)
        except SilentError:
            if not frames:
                raise  # nothing at all: the board stopped answering
            # frames came, then silence until the deadline: the deadline ended the wait (a
            # loaded host can reach it inside the last short receive, after the check above)
            raise _deadline_error(link, timeout, frames, done + got, total) from None
        frames += 1
        t_first = t_first or time.monotonic()
        if frame.type == P.FrameType.TIMING:
            timings = decode_timing(link, frame)
        elif frame.type == P.FrameType.RESULT:
            if _stale(frame, sizes, t):
                continue
            chunk = decode_result_chunk(link, frame, sizes[t], got, t)
            if chunk.offset == 0:
                got = 0
            bufs[t][chunk.offset : chunk.offset + len(chunk.data)] = chunk.data
            got = max(got, chunk.offset + len(chunk.data))
            if link.on_bytes is not None:
                link.on_bytes("receive", done + got, total)
            if got == sizes[t]:
                t, done, got = t + 1, done + sizes[t], 0
        elif link.serve is None or not link.serve(link, frame):
            raise _malformed(link, frame, "a board sends the host only TIMING, RESULT or ERROR")
    return [bytes(b) for b in bufs], timings, t_first


def _stale(frame: P.Frame, sizes: Sequence[int], t: int) -> bool:
    """A chunk of an output tensor before ``t``, within it: the board re-sent (re-chunked) a
    chunk whose ACK was lost after the host had the whole tensor; it is dropped."""
    try:
        c = P.decode_chunk(frame.payload)
    except ValueError:
        return False
    return c.tensor < t and c.total == sizes[c.tensor] and c.offset + len(c.data) <= c.total


def _check_deadline(
    link: HostLink, deadline: float, timeout: float, frames: int, got: int, nbytes: int
) -> None:
    """:class:`DeadlineError` once ``deadline`` passed: the deadline is absolute from the start
    of the wait, so frames that keep arriving (a board flooding TIMING) never extend it."""
    if time.monotonic() >= deadline:
        raise _deadline_error(link, timeout, frames, got, nbytes)


def _deadline_error(
    link: HostLink, timeout: float, frames: int, got: int, nbytes: int
) -> DeadlineError:
    """The result did not complete within ``timeout``: what arrived, naming the board."""
    return DeadlineError(
        f"{link.url}: device {link.device} did not deliver the result within "
        f"{timeout:.1f} s ({frames} frames, {got} of {nbytes} B received)"
    )


def _receive_watching(link: HostLink, deadline: float, watch: Sequence[HostLink]) -> P.Frame:
    """``link.receive`` until ``deadline``, checking the ``watch`` links for errors meanwhile."""
    while True:
        left = deadline - time.monotonic()
        step = min(max(0.01, left), WATCH_PERIOD_S) if watch else max(0.01, left)
        try:
            return link.receive(step)
        except SilentError:
            if left <= step:
                raise
        for other in watch:
            try:
                other.receive(0.01)  # other frames there are dropped: only errors matter
            except DeviceError:
                raise
            except LinkError:
                pass


def to_wire(x: np.ndarray) -> bytes:
    """A tensor as the link sends it: its own dtype, little-endian (docs/protocol.md)."""
    return np.ascontiguousarray(x).astype(x.dtype.newbyteorder("<")).tobytes()


def infer(
    links: Sequence[HostLink],
    first: str,
    last: str,
    x: np.ndarray | Sequence[np.ndarray],
    out_bytes: int | Sequence[int],
    *,
    timeout: float = 60.0,
) -> InferenceResult:
    """Send the input(s) ``x`` to device ``first``, return the RESULT of device ``last``
    (little-endian; the output tensors' bytes one after another when ``out_bytes`` lists
    several, :attr:`InferenceResult.tensors` keeps them apart)."""
    by_name = {ln.device: ln for ln in links}
    xs = [x] if isinstance(x, np.ndarray) else list(x)
    sizes = [out_bytes] if isinstance(out_bytes, int) else list(out_bytes)
    t0 = time.monotonic()
    send_tensors(by_name[first], 0, [to_wire(a) for a in xs], until=t0 + timeout)
    left = max(t0 + timeout - time.monotonic(), 0.0)
    data, timings, _ = receive_results(by_name[last], sizes, left)
    return InferenceResult(b"".join(data), timings, time.monotonic() - t0, data)
