"""A unix-socket proxy between two emulated boards: frame timestamps and fault injection.

:class:`ProxiedEmulation` is :class:`splitter.toolchain.emulator.Emulation` with one
:class:`LinkProxy` on every board-to-board link. The emulation connects boards with unix-socket
chardevs (the lower device index listens, the other connects to the same path); right after the
listening QEMU has created its socket, the socket file is renamed to ``<path>.real`` (a listening
AF_UNIX socket stays reachable under its new name) and the proxy listens on the original path, so
the connecting QEMU reaches the proxy, which relays to ``<path>.real``.

The proxy parses the frames of docs/protocol.md in both directions and records, per frame, the
wall-clock time of its first and last byte (``splitter bench`` turns them into per-link transfer
times). Faults, for the tests of docs/protocol.md's retransmission:

* ``corrupt_rate``: every forwarded byte is XORed with a non-zero random byte with this
  probability; the random stream is indexed by byte position per direction (numpy PCG64 seeded
  with ``seed``), so a run is reproducible whatever the socket chunking;
* ``drop``: a :class:`DropRule` removing the n-th frame of a type sent by one side (the proxy then
  stores and forwards whole frames so the dropped frame vanishes completely).

The host's own links have no proxy: :class:`CountingTransport` wraps a host link's transport and
counts the bytes written and read (``tests/test_wire_bytes.py`` compares both kinds of count
with :mod:`splitter.cost.wire`'s prediction).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from splitter import protocol as P
from splitter.device.transport import Transport
from splitter.errors import LinkError
from splitter.toolchain.emulator import EmulatedDevice, Emulation

#: Bytes read from a socket at a time.
RECV_BYTES = 4096
#: Seconds a proxy waits for the listening QEMU's socket file.
SOCKET_WAIT_S = 10.0


@dataclass(frozen=True)
class DropRule:
    """Drop the ``nth`` (1-based) frame of type ``ftype`` sent by device ``sender``."""

    sender: str
    ftype: int = int(P.FrameType.TENSOR)
    nth: int = 1


@dataclass(frozen=True)
class FaultSpec:
    """Faults of one link: byte corruption probability (seeded) and an optional frame drop."""

    corrupt_rate: float = 0.0
    seed: int = 0
    drop: DropRule | None = None


@dataclass(frozen=True)
class FrameEvent:
    """One frame seen by a proxy: sender, type, seq, payload length, first/last byte times."""

    sender: str
    receiver: str
    type: int
    seq: int
    length: int
    t_start: float
    t_end: float
    submodel: int | None = None  # TENSOR/RESULT chunk's sub-model
    total: int | None = None  # TENSOR/RESULT chunk's tensor size
    crc_ok: bool = True
    dropped: bool = False

    @property
    def wire_bytes(self) -> int:
        """Bytes on the wire: payload + :data:`splitter.protocol.OVERHEAD`."""
        return self.length + P.OVERHEAD


class CountingTransport(Transport):
    """Any transport, counting the bytes written to and read from it and noting every frame's
    ``(direction, type, seq)`` (``"w"`` written, ``"r"`` read) so retransmissions show."""

    def __init__(self, inner: Transport) -> None:
        self.inner, self.url = inner, inner.url
        self.written = 0
        self.read_bytes = 0
        self.frames: list[tuple[str, int, int]] = []
        self._split = {"w": FrameSplitter(), "r": FrameSplitter()}

    def open(self) -> None:
        """Open the wrapped transport."""
        self.inner.open()

    def close(self) -> None:
        """Close the wrapped transport."""
        self.inner.close()

    def read(self, n: int, timeout: float) -> bytes:
        """Read through, counting what came."""
        data = self.inner.read(n, timeout)
        self.read_bytes += len(data)
        self._note("r", data)
        return data

    def write(self, data: bytes) -> None:
        """Count and write through."""
        self.written += len(data)
        self._note("w", data)
        self.inner.write(data)

    def _note(self, way: str, data: bytes) -> None:
        for kind, raw, _t in self._split[way].feed(data, 0.0):
            if kind == "frame":
                ftype, seq, _len = P.HEADER.unpack_from(raw, len(P.SYNC))
                self.frames.append((way, ftype, seq))


def resent(frames: list[tuple[int, int]]) -> int:
    """Data frames of one direction's ``(type, seq)`` list sent again right after themselves
    (stop and wait: a retransmission follows its original), plus NACKs."""
    data = [f for f in frames if f[0] not in P.UNACKED]
    again = sum(1 for a, b in itertools.pairwise(data) if a == b)
    return again + sum(1 for f in frames if f[0] == P.FrameType.NACK)


class FrameSplitter:
    """Cuts a byte stream into whole frames and noise, remembering when each frame began.

    ``feed(data, t)`` returns ``[(kind, bytes, t_first)]`` with ``kind`` ``"frame"`` or
    ``"noise"``; bytes of an incomplete frame are kept for the next call.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._t_first = 0.0

    def feed(self, data: bytes, t: float) -> list[tuple[str, bytes, float]]:
        """Append ``data`` (received at ``t``) and return the complete units."""
        if not self._buf:
            self._t_first = t
        self._buf += data
        units: list[tuple[str, bytes, float]] = []
        while self._buf:
            start = self._buf.find(P.SYNC)
            if start != 0:
                cut = len(self._buf) - 1 if start < 0 else start
                if cut <= 0:
                    break
                units.append(("noise", bytes(self._buf[:cut]), self._t_first))
                del self._buf[:cut]
                continue
            head = len(P.SYNC) + P.HEADER.size
            if len(self._buf) < head:
                break
            _type, _seq, length = P.HEADER.unpack_from(self._buf, len(P.SYNC))
            if length > P.MAX_PAYLOAD:
                units.append(("noise", bytes(self._buf[:1]), self._t_first))
                del self._buf[:1]
                continue
            end = head + length + P.CRC.size
            if len(self._buf) < end:
                break
            units.append(("frame", bytes(self._buf[:end]), self._t_first))
            del self._buf[:end]
            self._t_first = t
        return units


def frame_event(raw: bytes, sender: str, receiver: str, t0: float, t1: float) -> FrameEvent:
    """Decode one whole frame's bytes (from :class:`FrameSplitter`) into a :class:`FrameEvent`."""
    ftype, seq, length = P.HEADER.unpack_from(raw, len(P.SYNC))
    body = raw[len(P.SYNC) : len(raw) - P.CRC.size]
    (crc,) = P.CRC.unpack_from(raw, len(raw) - P.CRC.size)
    payload = body[P.HEADER.size :]
    sub = total = None
    if ftype in (P.FrameType.TENSOR, P.FrameType.RESULT) and len(payload) >= P.CHUNK.size:
        chunk = P.decode_chunk(payload)
        sub, total = chunk.submodel, chunk.total
    return FrameEvent(
        sender, receiver, ftype, seq, length, t0, t1, sub, total, crc == P.crc32(body)
    )


class ByteCorrupter:
    """Seeded per-byte corruption: byte ``i`` of the stream is hit iff ``u_i < rate``.

    ``u_i`` and the XOR mask ``x_i`` (1..255) come from blocks drawn in a fixed order, so the
    outcome depends only on the byte position, not on how the stream was chunked.
    """

    BLOCK = 1 << 16

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self._rng = np.random.default_rng(seed)
        self._u = np.empty(0)
        self._x = np.empty(0, dtype=np.uint8)
        self._pos = 0  # position of the next byte within the current block
        self.corrupted = 0

    def apply(self, data: bytes) -> bytes:
        """``data`` with the bytes whose position draws below ``rate`` XORed."""
        if self.rate <= 0.0 or not data:
            return data
        out = np.frombuffer(data, dtype=np.uint8).copy()
        done = 0
        while done < len(out):
            if self._pos >= len(self._u):
                self._u = self._rng.random(self.BLOCK)
                self._x = self._rng.integers(1, 256, self.BLOCK, dtype=np.uint8)
                self._pos = 0
            n = min(len(out) - done, len(self._u) - self._pos)
            hit = self._u[self._pos : self._pos + n] < self.rate
            out[done : done + n][hit] ^= self._x[self._pos : self._pos + n][hit]
            self.corrupted += int(hit.sum())
            self._pos += n
            done += n
        return out.tobytes()


@dataclass
class _Direction:
    """One direction of a proxied link: who sends, the parser, the faults applied."""

    sender: str
    receiver: str
    corrupter: ByteCorrupter
    drop: DropRule | None
    splitter: FrameSplitter = field(default_factory=FrameSplitter)
    seen_of_type: int = 0
    dropped: int = 0


class LinkProxy:
    """Relay between the connecting board (``client``) and the listening one (``server``)."""

    def __init__(
        self,
        listen_path: Path,
        target_path: Path,
        server: str,
        client: str,
        faults: FaultSpec | None = None,
    ) -> None:
        self.listen_path, self.target_path = Path(listen_path), Path(target_path)
        self.server, self.client = server, client
        self.faults = faults or FaultSpec()
        self.events: list[FrameEvent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        seed = self.faults.seed
        drop = self.faults.drop
        self._dirs = {
            client: _Direction(
                client,
                server,
                ByteCorrupter(self.faults.corrupt_rate, seed),
                drop if drop and drop.sender == client else None,
            ),
            server: _Direction(
                server,
                client,
                ByteCorrupter(self.faults.corrupt_rate, seed + 1),
                drop if drop and drop.sender == server else None,
            ),
        }

    @property
    def name(self) -> str:
        """``"<server>-<client>"``: the link's two devices."""
        return f"{self.server}-{self.client}"

    @property
    def corrupted(self) -> int:
        """Bytes corrupted so far (both directions)."""
        return sum(d.corrupter.corrupted for d in self._dirs.values())

    @property
    def dropped(self) -> int:
        """Frames dropped so far (both directions)."""
        return sum(d.dropped for d in self._dirs.values())

    def snapshot(self) -> list[FrameEvent]:
        """A copy of the frame events recorded so far."""
        with self._lock:
            return list(self.events)

    def start(self) -> None:
        """Listen on ``listen_path``; relay the first connection to ``target_path``."""
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(str(self.listen_path))
        lsock.listen(1)
        lsock.settimeout(0.1)
        self._socks.append(lsock)
        self._spawn(self._accept, lsock)

    def stop(self) -> None:
        """Close every socket and join the relay threads."""
        self._stop.set()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self._threads:
            t.join(timeout=2.0)

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"proxy-{self.name}")
        self._threads.append(t)
        t.start()

    def _accept(self, lsock: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                csock, _ = lsock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            ssock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                ssock.connect(str(self.target_path))
            except OSError:
                csock.close()
                ssock.close()
                return
            self._socks += [csock, ssock]
            self._spawn(self._pump, csock, ssock, self._dirs[self.client])
            self._spawn(self._pump, ssock, csock, self._dirs[self.server])
            return

    def _pump(self, src: socket.socket, dst: socket.socket, way: _Direction) -> None:
        """Copy ``src`` to ``dst`` frame-aware: log frames, drop/corrupt as configured."""
        while not self._stop.is_set():
            try:
                data = src.recv(RECV_BYTES)
            except OSError:
                return
            if not data:
                return
            now = time.monotonic()
            units = way.splitter.feed(data, now)
            forward = self._observe(way, units, now)
            if way.drop is None:
                forward = data  # pass-through: forward at once, do not wait for whole frames
            try:
                dst.sendall(way.corrupter.apply(forward))
            except OSError:
                return

    def _observe(self, way: _Direction, units: list[tuple[str, bytes, float]], now: float) -> bytes:
        """Record the frames of ``units``; return the bytes to forward (minus a dropped frame)."""
        out = bytearray()
        for kind, raw, t0 in units:
            if kind == "noise":
                out += raw
                continue
            ev = frame_event(raw, way.sender, way.receiver, t0, now)
            drop = False
            if way.drop is not None and ev.type == way.drop.ftype and ev.crc_ok:
                way.seen_of_type += 1
                drop = way.seen_of_type == way.drop.nth
            if drop:
                way.dropped += 1
                ev = replace(ev, dropped=True)
            else:
                out += raw
            with self._lock:
                self.events.append(ev)
        return bytes(out)


@dataclass
class ProxiedEmulation(Emulation):
    """:class:`Emulation` with a :class:`LinkProxy` on every board-to-board link.

    ``faults`` maps a device-name pair (either order) to the faults of that link.
    """

    faults: dict[tuple[str, str], FaultSpec] = field(default_factory=dict)
    proxies: list[LinkProxy] = field(default_factory=list)

    def proxy(self, a: str, b: str) -> LinkProxy:
        """The proxy between devices ``a`` and ``b`` (either order)."""
        for p in self.proxies:
            if {p.server, p.client} == {a, b}:
                return p
        raise KeyError(f"no proxied link between {a} and {b}")

    def stop(self) -> None:
        """Stop every proxy, then every QEMU (by PID)."""
        for p in self.proxies:
            p.stop()
        self.proxies = []
        super().stop()

    def _start_one(self, qemu: str, dev: dict[str, Any], elf: Path) -> EmulatedDevice:
        emu = super()._start_one(qemu, dev, elf)
        assert self._tmp is not None
        if self.link_fault is not None:  # the base class's own proxies are wired instead
            return emu
        names = {d["index"]: d["name"] for d in self.wiring["devices"]}
        for link in dev["links"]:
            if link["peer_index"] < 0 or not link["server"]:
                continue
            a, b = sorted((dev["index"], link["peer_index"]))
            sock = self._tmp / f"l{a}-{b}.sock"
            self._interpose(sock, dev["name"], names[link["peer_index"]])
        return emu

    def _interpose(self, sock: Path, server: str, client: str) -> None:
        """Move the listening QEMU's socket aside and listen in its place."""
        deadline = time.monotonic() + SOCKET_WAIT_S
        while not sock.exists():
            if time.monotonic() > deadline:
                raise LinkError(f"emulated device {server}: socket {sock} never appeared")
            time.sleep(0.01)
        real = sock.with_name(sock.name + ".real")
        os.replace(sock, real)
        spec = self.faults.get((server, client)) or self.faults.get((client, server))
        proxy = LinkProxy(sock, real, server, client, spec)
        proxy.start()
        self.proxies.append(proxy)
