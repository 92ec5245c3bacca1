"""Boot one QEMU :data:`~splitter.hardware.qemu.EMULATOR` per device, wired as WIRING.md says.

The n-th link of a device is its firmware's n-th USART, which is QEMU's n-th ``-serial``
(USART1, USART2, USART3, UART4, UART5, USART6; see ../shared/notes/emulated-stm32.md).
Board-to-board links are unix-socket chardevs (the lower device index listens); a host link is
``-serial tcp:127.0.0.1:PORT,server=on,wait=on,nodelay=on`` and the host connects with
pyserial's ``socket://`` URL. Parts other than the F405 run as an F405 with the plan's own code
(the firmware's EMULATOR=1 build), which every report says.

:class:`Emulation` is a context manager: every QEMU it starts is killed by PID on exit, also
on error and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from splitter.errors import InputFileError, LinkError, ToolchainError
from splitter.hardware.qemu import EMULATOR
from splitter.manifest import read_manifest, read_wiring
from splitter.outputs import contained

QEMU = "qemu-system-arm"
QEMU_INSTALL = "apt-get install --no-install-recommends qemu-system-arm"
MACHINE = EMULATOR.machine
ELF = Path("build/emulator/firmware.elf")
START_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 3


@dataclass
class EmulatedDevice:
    """One running QEMU: its device, process and host endpoint (if it faces the host)."""

    name: str
    index: int
    part: str
    process: subprocess.Popen[bytes]
    command: list[str]
    endpoint: str | None = None
    log: Path | None = None


@dataclass
class Emulation:
    """``with Emulation(out_dir, icount=True) as emu: emu.endpoints -> {device: url}``.

    ``build=True`` runs ``make EMULATOR=1`` for a device whose emulator ELF is missing.
    ``link_fault(src, dst, data) -> data`` (fault injection): every board-to-board link then
    goes through a Python proxy that passes each block of bytes from ``src`` to ``dst`` through
    it (both QEMUs listen, the proxy connects to both).
    """

    out_dir: Path | str
    icount: bool = True
    build: bool = True
    link_fault: LinkFault | None = None
    devices: list[EmulatedDevice] = field(default_factory=list)
    wiring: dict[str, Any] = field(default_factory=dict)
    fault_proxies: list[LinkProxy] = field(default_factory=list)
    _tmp: Path | None = None

    # -- public API ------------------------------------------------------------------------
    @property
    def endpoints(self) -> dict[str, str]:
        """Host-facing endpoints by device name (``socket://127.0.0.1:PORT``)."""
        return {d.name: d.endpoint for d in self.devices if d.endpoint}

    @property
    def pids(self) -> list[int]:
        """PIDs of every QEMU this emulation started."""
        return [d.process.pid for d in self.devices]

    @property
    def note(self) -> str:
        """The sentence every report prints about parts other than the emulated chip."""
        others = self.wiring.get("emulated_as_f405", "")
        base = f"emulated on {EMULATOR.title}"
        own = f"emulated as an {EMULATOR.short} with the plan's own code"
        return f"{base}; {others} {own}" if others else base

    def __enter__(self) -> Emulation:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Build if needed, then start every QEMU in device order (servers before clients)."""
        qemu = shutil.which(QEMU)
        if qemu is None:
            raise ToolchainError(f"{QEMU} not found; install it: {QEMU_INSTALL}")
        read_manifest(self.out_dir)  # both manifests checked before anything is built or run
        self.wiring = read_wiring(self.out_dir)
        if self.build:
            names = [d["name"] for d in self.wiring["devices"]]
            build_missing_emulator_elfs(Path(self.out_dir), names)
        self._tmp = Path(tempfile.mkdtemp(prefix="splitter-emu-"))
        for dev in self.wiring["devices"]:
            ddir = contained(self.out_dir, f"firmware/{dev['name']}")
            elf = ddir / ELF
            if not elf.exists():
                raise InputFileError(f"{elf}: missing; run `splitter build {self.out_dir}`")
            self.devices.append(self._start_one(qemu, dev, elf))
        if self.link_fault is not None:
            self._start_proxies(self.link_fault)

    def _start_proxies(self, fault: LinkFault) -> None:
        assert self._tmp is not None
        names = {d["index"]: d["name"] for d in self.wiring["devices"]}
        for dev in self.wiring["devices"]:
            for link in dev["links"]:
                peer = link["peer_index"]
                if peer >= 0 and dev["index"] < peer:
                    a, b, ch = dev["index"], peer, link.get("channel", "")
                    paths = (
                        self._tmp / f"l{a}-{b}{ch}-{a}.sock",
                        self._tmp / f"l{a}-{b}{ch}-{b}.sock",
                    )
                    self.fault_proxies.append(LinkProxy(names[a], names[b], paths, fault))

    def stop(self) -> None:
        """Kill every QEMU started here, by PID, and wait for each to exit."""
        for p in self.fault_proxies:
            p.close()
        self.fault_proxies = []
        for d in self.devices:
            if d.process.poll() is None:
                d.process.kill()
        for d in self.devices:
            with contextlib.suppress(subprocess.TimeoutExpired):
                d.process.wait(timeout=5)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def restart(self, name: str) -> None:
        """Kill device ``name``'s QEMU (a board reset or power loss) and boot it again with the
        same command line; its neighbours' socket chardevs reconnect (``reconnect=1``) or accept
        the new connection. Only for devices without a host link (their TCP port would change
        hands)."""
        d = next(x for x in self.devices if x.name == name)
        if d.endpoint is not None:
            raise ValueError(f"device {name} faces the host; restart a middle board")
        d.process.kill()
        d.process.wait(timeout=5)
        for arg in d.command:  # a listening chardev binds its socket path again
            if arg.startswith("socket,") and "server=on" in arg:
                path = arg.split("path=", 1)[1].split(",", 1)[0]
                Path(path).unlink(missing_ok=True)
        assert d.log is not None
        with d.log.open("ab") as fh:
            d.process = subprocess.Popen(
                d.command, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        _wait_started(d, None)

    def check_alive(self) -> None:
        """Raise :class:`LinkError` naming a device whose QEMU exited."""
        for d in self.devices:
            rc = d.process.poll()
            if rc is not None:
                tail = d.log.read_text()[-300:] if d.log and d.log.exists() else ""
                raise LinkError(f"emulated device {d.name}: QEMU exited with code {rc}: {tail}")

    # -- internals ---------------------------------------------------------------------------
    def _start_one(self, qemu: str, dev: dict[str, Any], elf: Path) -> EmulatedDevice:
        """Start one QEMU; retry with another TCP port if the free one was taken meanwhile."""
        for attempt in range(PORT_ATTEMPTS):
            cmd, endpoint = self._command(qemu, dev, elf)
            log = self._tmp_dir() / f"{dev['name']}.log"
            with log.open("wb") as fh:
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, preexec_fn=_die_with_parent
                )
            emu = EmulatedDevice(dev["name"], dev["index"], dev["part"], proc, cmd, endpoint, log)
            self.devices.append(emu)  # stop() kills it if waiting fails
            try:
                _wait_started(emu, endpoint)
            except LinkError:
                in_use = proc.poll() is not None and "in use" in log.read_text(errors="replace")
                if not in_use or attempt == PORT_ATTEMPTS - 1:
                    raise
                self.devices.pop()  # exited: try another port
                continue
            self.devices.pop()  # the caller appends it
            return emu
        raise AssertionError("unreachable")  # pragma: no cover

    def _tmp_dir(self) -> Path:
        assert self._tmp is not None
        return self._tmp

    def _command(self, qemu: str, dev: dict[str, Any], elf: Path) -> tuple[list[str], str | None]:
        """QEMU command line of one device and its host endpoint (if it faces the host)."""
        tmp = self._tmp_dir()
        cmd = [qemu, "-M", MACHINE, "-display", "none", "-monitor", "none", "-nodefaults"]
        if self.icount:
            cmd += ["-icount", "shift=0"]
        cmd += ["-kernel", str(elf)]
        endpoint = None
        for link in dev["links"]:
            if link["peer_index"] < 0:
                port = free_port()
                cmd += ["-serial", f"tcp:127.0.0.1:{port},server=on,wait=on,nodelay=on"]
                endpoint = f"socket://127.0.0.1:{port}"
                continue
            a, b = sorted((dev["index"], link["peer_index"]))
            ch = link.get("channel", "")  # "r": the return link of --result-on head
            sock = tmp / f"l{a}-{b}{ch}.sock"
            cid = f"l{link['index']}"
            if self.link_fault is not None:  # both sides listen; the proxy connects to both
                sock = tmp / f"l{a}-{b}{ch}-{dev['index']}.sock"
                cmd += ["-chardev", f"socket,id={cid},path={sock},server=on,wait=off"]
            elif link["server"]:
                cmd += ["-chardev", f"socket,id={cid},path={sock},server=on,wait=off"]
            else:
                _wait_path(sock, dev["name"])
                cmd += ["-chardev", f"socket,id={cid},path={sock},reconnect=1"]
            cmd += ["-serial", f"chardev:{cid}"]
        return cmd, endpoint


LinkFault = Callable[[str, str, bytes], bytes]


class LinkProxy:
    """Connects two listening QEMU unix sockets and pumps bytes through a fault function."""

    def __init__(self, a: str, b: str, paths: tuple[Path, Path], fault: LinkFault) -> None:
        self.names, self.fault = (a, b), fault
        self.socks = [_connect_unix(p, n) for p, n in zip(paths, (a, b), strict=True)]
        for src, dst in ((0, 1), (1, 0)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: int, dst: int) -> None:
        try:
            while data := self.socks[src].recv(4096):
                out = self.fault(self.names[src], self.names[dst], data)
                if out:
                    self.socks[dst].sendall(out)
        except OSError:
            pass

    def close(self) -> None:
        """Close both connections (the pump threads end)."""
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def _connect_unix(path: Path, device: str) -> socket.socket:
    """Connect to QEMU's listening socket ``path``, retrying while it is bound but not yet
    listening (the file appears at ``bind``, before ``listen``: a loaded machine can see
    ``ECONNREFUSED`` in between) until :data:`START_TIMEOUT_S`."""
    _wait_path(path, device)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
            return s
        except ConnectionRefusedError:
            s.close()
            if time.monotonic() > deadline:
                raise LinkError(
                    f"emulated device {device}: peer socket {path} refused connections for "
                    f"{START_TIMEOUT_S:.0f} s"
                ) from None
            time.sleep(0.01)


def build_missing_emulator_elfs(out_dir: Path, devices: list[str]) -> None:
    """``make EMULATOR=1`` in the projects of ``devices`` whose emulator ELF is missing, in a
    staged copy of ``OUT`` swapped into place when every build succeeded
    (:func:`splitter.outputs.staged_copy`): a process killed mid-link never leaves a torn ELF
    that a later ``make`` would take as up to date."""
    from splitter.outputs import errors_named_in, staged_copy
    from splitter.toolchain.build import run_make

    dirs = {d: contained(out_dir, f"firmware/{d}") for d in devices}
    missing = [d for d, ddir in dirs.items() if not (ddir / ELF).exists()]
    if not missing:
        return
    with staged_copy(out_dir) as stage, errors_named_in(stage, out_dir):
        for name in missing:
            run_make(stage / "firmware" / name, emulator=True, debug_dir=dirs[name].absolute())


def _die_with_parent() -> None:
    """In the QEMU child: get SIGKILL when the parent dies (Linux prctl PR_SET_PDEATHSIG), so
    even a killed splitter leaves no emulator behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_path(path: Path, device: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise LinkError(f"emulated device {device}: peer socket {path} never appeared")
        time.sleep(0.01)


def _wait_started(emu: EmulatedDevice, endpoint: str | None) -> None:
    """Wait until QEMU listens on its TCP endpoint (or its sockets exist); fail if it exits."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        rc = emu.process.poll()
        if rc is not None:
            tail = emu.log.read_text()[-400:] if emu.log else ""
            raise LinkError(f"emulated device {emu.name}: QEMU exited with code {rc}: {tail}")
        if endpoint is None or _listening(endpoint):
            return
        time.sleep(0.02)
    raise LinkError(f"emulated device {emu.name}: QEMU did not open {endpoint} in time")


def _listening(endpoint: str) -> bool:
    """Whether a TCP server listens (QEMU's -serial tcp server=on) on the endpoint's port."""
    _host, port = endpoint.removeprefix("socket://").rsplit(":", 1)
    try:
        out = Path("/proc/net/tcp").read_text()
    except OSError:
        return True
    want = f":{int(port):04X} "
    return any(want in line and line.split()[3] == "0A" for line in out.splitlines()[1:])
