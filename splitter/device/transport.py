"""Byte transports between the host and a board: the one seam where the host touches a wire.

Modelled on microTVM's ``python/tvm/micro/transport.py``: a :class:`Transport` is opened,
read with a timeout, written and closed, and knows nothing of frames; :class:`HostLink`
(``splitter/device/host.py``) speaks the frame protocol over any of them. Implementations:

* :class:`SerialTransport`: pyserial ``serial_for_url``: a serial port (``/dev/ttyUSB0``,
  ``COM3``) or any pyserial URL, e.g. ``socket://127.0.0.1:PORT`` (QEMU's ``-serial tcp``) or
  ``loop://``; ports are opened exclusively (``flock``);
* :class:`SocketTransport`: a TCP stream (``tcp://HOST:PORT``) or an already connected socket
  (``SocketTransport.from_socket``, e.g. one end of ``socket.socketpair()`` in tests);
* :class:`LoggingTransport`: wraps any transport and logs every read and write as hex (as
  microTVM's ``TransportLogger``).

``open_transport(url)`` picks the implementation from the URL. Another transport (USB bulk,
BLE, ...) is one new class here plus one C file implementing ``splitter/firmware_templates/link.h``.
"""

from __future__ import annotations

import abc
import errno
import select
import socket
import time
from collections.abc import Callable
from types import TracebackType

import serial

from splitter.errors import LinkError

#: errno of opening a port another process holds: its flock (EWOULDBLOCK) or TIOCEXCL (EBUSY).
BUSY_ERRNOS = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EBUSY)
TCP_SCHEME = "tcp://"
#: Largest read handed back at once (bytes).
READ_CHUNK = 4096
#: Longest a write may block (s): a board that stops reading (its receive buffer full while it
#: floods us) fails the write instead of hanging the host; 1 KiB frames at 9600 baud take ~1 s.
WRITE_TIMEOUT_S = 5.0


class TransportError(LinkError):
    """A transport failed to open, read or write (the message names the URL and the peer)."""


class Transport(abc.ABC):
    """A bidirectional byte stream with timeouts; ``open`` before use, ``close`` after."""

    #: what the transport is connected to (a port name or URL), for messages
    url: str = ""

    @abc.abstractmethod
    def open(self) -> None:
        """Connect (no-op when open); :class:`TransportError` saying why not."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the port or connection (idempotent)."""

    @abc.abstractmethod
    def read(self, n: int, timeout: float) -> bytes:
        """Between 1 and ``n`` bytes as soon as any arrived; ``b""`` after ``timeout`` seconds."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Send all of ``data``; :class:`TransportError` when the connection failed."""

    def __enter__(self) -> Transport:
        self.open()
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SerialTransport(Transport):
    """A pyserial port or URL (``/dev/ttyACM0``, ``socket://HOST:PORT``, ``loop://``)."""

    def __init__(self, url: str, *, baud: int = 115200, peer: str = "the board") -> None:
        self.url, self.baud, self.peer = url, baud, peer
        self._port: serial.SerialBase | None = None

    def open(self) -> None:
        """Open exclusively (pyserial ``exclusive=True``: ``flock`` on POSIX); no-op when open.

        A port another program holds (lock taken: EWOULDBLOCK; TIOCEXCL: EBUSY) is a one-line
        error saying so; any other failure names the port and the cause.
        """
        if self._port is not None:
            return
        try:
            port = serial.serial_for_url(
                self.url,
                baudrate=self.baud,
                timeout=0,
                write_timeout=WRITE_TIMEOUT_S,
                exclusive=True,
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            if getattr(exc, "errno", None) in BUSY_ERRNOS:
                raise TransportError(
                    f"{self.url}: port of {self.peer} is busy (another program holds it: a "
                    "serial monitor, a flasher or another splitter run/bench); close it and retry"
                ) from None
            raise TransportError(
                f"{self.url}: cannot open the port of {self.peer} ({exc})"
            ) from None
        sock = getattr(port, "_socket", None)
        if isinstance(sock, socket.socket):  # socket:// (QEMU): no Nagle delay on small frames
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._port = port

    def close(self) -> None:
        """Close the port."""
        if self._port is not None:
            self._port.close()
            self._port = None

    def _opened(self) -> serial.SerialBase:
        if self._port is None:
            raise TransportError(f"{self.url}: port of {self.peer} is not open")
        return self._port

    def read(self, n: int, timeout: float) -> bytes:
        """One byte within ``timeout``, then whatever else is waiting (up to ``n``)."""
        port = self._opened()
        try:
            port.timeout = max(0.0, timeout)
            first = port.read(1)
            if not first:
                return b""
            port.timeout = 0  # non-blocking: what is there (in_waiting is 0/1 on socket://)
            rest = port.read(n - 1) if n > 1 else b""
        except (serial.SerialException, OSError) as exc:
            raise TransportError(f"{self.url}: {self.peer} link failed ({exc})") from None
        return bytes(first + rest)

    def write(self, data: bytes) -> None:
        """Write (blocking until the driver took it)."""
        try:
            self._opened().write(data)
        except (serial.SerialException, OSError) as exc:
            raise TransportError(f"{self.url}: write to {self.peer} failed ({exc})") from None


class SocketTransport(Transport):
    """A stream socket: ``tcp://HOST:PORT``, or a connected socket via :meth:`from_socket`."""

    def __init__(self, url: str, *, peer: str = "the board", connect_timeout: float = 5.0) -> None:
        self.url, self.peer, self.connect_timeout = url, peer, connect_timeout
        self._sock: socket.socket | None = None

    @classmethod
    def from_socket(
        cls, sock: socket.socket, url: str, *, peer: str = "the board"
    ) -> SocketTransport:
        """Wrap an already connected socket (``open`` is then a no-op)."""
        t = cls(url, peer=peer)
        t._sock = sock
        return t

    def open(self) -> None:
        """Connect to ``tcp://HOST:PORT`` (no-op when already connected)."""
        if self._sock is not None:
            return
        host, _, port = self.url.removeprefix(TCP_SCHEME).rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=self.connect_timeout)
        except (OSError, ValueError) as exc:
            raise TransportError(f"{self.url}: cannot connect to {self.peer} ({exc})") from None
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock

    def close(self) -> None:
        """Close the connection."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _opened(self) -> socket.socket:
        if self._sock is None:
            raise TransportError(f"{self.url}: connection to {self.peer} is not open")
        return self._sock

    def read(self, n: int, timeout: float) -> bytes:
        """``recv`` once the socket is readable; a closed peer is an error, not a timeout."""
        sock = self._opened()
        try:
            ready, _, _ = select.select([sock], [], [], max(0.0, timeout))
            if not ready:
                return b""
            data = sock.recv(n)
        except OSError as exc:
            raise TransportError(f"{self.url}: {self.peer} link failed ({exc})") from None
        if not data:
            raise TransportError(f"{self.url}: {self.peer} closed the connection")
        return data

    def write(self, data: bytes) -> None:
        """``sendall`` within :data:`WRITE_TIMEOUT_S` (a peer that stops reading is an error)."""
        try:
            self._opened().settimeout(WRITE_TIMEOUT_S)
            self._opened().sendall(data)
        except OSError as exc:
            raise TransportError(f"{self.url}: write to {self.peer} failed ({exc})") from None


class LoggingTransport(Transport):
    """Any transport, with every read and write logged as ``name <- hex`` / ``name -> hex``."""

    def __init__(self, inner: Transport, log: Callable[[str], None], name: str = "") -> None:
        self.inner, self.log, self.name = inner, log, name or inner.url
        self.url = inner.url
        self._opened = False

    def open(self) -> None:
        """Open the wrapped transport (logged once, when ``open_transport`` opens it)."""
        if not self._opened:
            self.log(f"{self.name}: open {self.url}")
            self._opened = True
        self.inner.open()

    def close(self) -> None:
        """Close the wrapped transport."""
        self.log(f"{self.name}: close")
        self.inner.close()

    def read(self, n: int, timeout: float) -> bytes:
        """Read and log what came (timeouts are not logged: the host polls)."""
        t0 = time.monotonic()
        data = self.inner.read(n, timeout)
        if data:
            self.log(f"{self.name} <- {data.hex(' ')} ({time.monotonic() - t0:.3f} s)")
        return data

    def write(self, data: bytes) -> None:
        """Log and write."""
        self.log(f"{self.name} -> {data.hex(' ')}")
        self.inner.write(data)


def open_transport(
    url: str,
    *,
    baud: int = 115200,
    peer: str = "the board",
    log: Callable[[str], None] | None = None,
) -> Transport:
    """An opened transport for ``url``: ``tcp://`` -> :class:`SocketTransport`, anything else
    (a port name, ``socket://``, ``loop://``, ``rfc2217://``) -> :class:`SerialTransport`;
    wrapped in a :class:`LoggingTransport` when ``log`` is given."""
    t: Transport
    if url.startswith(TCP_SCHEME):
        t = SocketTransport(url, peer=peer)
    else:
        t = SerialTransport(url, baud=baud, peer=peer)
    if log is not None:
        t = LoggingTransport(t, log)
    t.open()
    return t
