"""Reading the console UART of standalone firmware (``compile --app standalone``).

The generated example (``splitter/firmware_templates/app.c.j2``) prints one line per result on
the console of the board that ends the chain, and one line per new error on every board that has
a console::

    result <inference> class <argmax> score <value> out <hex of every output, comma-separated>
    status <code> device <d> link <l> inference <k> lost <n> clock <c>: <text>

:class:`Console` connects to the emulator's host endpoints (``socket://host:port``), never
writes a byte, and collects those lines with the host time each arrived.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass, field

from splitter.errors import LinkError

_RESULT = re.compile(
    r"result (\d+) class (\d+) score (\S+) out ((?:crc)?[0-9a-f]*(?:,(?:crc)?[0-9a-f]*)*)"
)
_STATUS = re.compile(
    r"status (-?\d+) device (\d+) link (\d+) inference (\d+) lost (\d+) clock (\d+): (.*)"
)


@dataclass(frozen=True)
class ConsoleResult:
    """One ``result`` line: the head's inference number, the printed class and score, every
    output's bytes (empty for one printed as a CRC) and the host time it arrived."""

    inference: int
    cls: int
    score: str
    outputs: tuple[bytes, ...]
    at: float


@dataclass(frozen=True)
class ConsoleStatus:
    """One ``status`` line (splitter.h ``splitter_status_t``) and the board that printed it."""

    board: str
    code: int
    device: int
    link: int
    inference: int
    lost: int
    clock: int
    text: str


@dataclass
class Console:
    """Read-only connections to the console endpoints of an emulation, by device name."""

    endpoints: dict[str, str]
    socks: dict[str, socket.socket] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    results: dict[str, list[ConsoleResult]] = field(default_factory=dict)
    statuses: list[ConsoleStatus] = field(default_factory=list)
    _partial: dict[str, bytes] = field(default_factory=dict)

    def __enter__(self) -> Console:
        for name, url in self.endpoints.items():
            host, port = url.removeprefix("socket://").rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=10)
            s.settimeout(0.05)
            self.socks[name] = s
            self.text[name] = ""
            self.results[name] = []
            self._partial[name] = b""
        return self

    def __exit__(self, *exc: object) -> None:
        for s in self.socks.values():
            s.close()

    def pump(self) -> None:
        """Read what has arrived on every console; parse complete lines."""
        for name, s in self.socks.items():
            try:
                data = s.recv(65536)
            except TimeoutError:
                continue
            now = time.monotonic()
            buf = self._partial[name] + data
            *lines, self._partial[name] = buf.split(b"\n")
            for raw in lines:
                self._line(name, raw.decode(errors="replace").strip(), now)

    def _line(self, name: str, line: str, now: float) -> None:
        self.text[name] += line + "\n"
        if m := _RESULT.fullmatch(line):
            outs = tuple(b"" if h.startswith("crc") else bytes.fromhex(h) for h in m[4].split(","))
            self.results[name].append(ConsoleResult(int(m[1]), int(m[2]), m[3], outs, now))
        elif m := _STATUS.fullmatch(line):
            code, dev, link, k, lost, clock = (int(g) for g in m.groups()[:6])
            self.statuses.append(ConsoleStatus(name, code, dev, link, k, lost, clock, m[7]))

    def wait_results(self, device: str, count: int, timeout: float) -> list[ConsoleResult]:
        """Pump until ``device`` printed ``count`` results; LinkError with the consoles' text
        after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while len(self.results[device]) < count:
            if time.monotonic() > deadline:
                raise LinkError(
                    f"device {device}: {len(self.results[device])} of {count} results on its "
                    f"console after {timeout:.0f} s; consoles: {self.text}"
                )
            self.pump()
        return self.results[device]

    def wait_for(self, device: str, needle: str, timeout: float) -> None:
        """Pump until ``device``'s console printed ``needle``; LinkError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while needle not in self.text[device]:
            if time.monotonic() > deadline:
                raise LinkError(
                    f"device {device}: no {needle!r} after {timeout:.0f} s: {self.text}"
                )
            self.pump()
