"""A serial port another program holds: `splitter run`/`bench` say it is busy (one line, exit 2).

The port is a real pseudo-terminal (``os.openpty``); the test holds its slave with pyserial's
``exclusive=True`` (an ``flock``), as a serial monitor or a second splitter process would. No
board answers on it: the busy error must come at open time, before any PING.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import serial
from test_e2e_support import MODELS, cli

from splitter.compile import CompileOptions, compile_model
from splitter.device.host import HostLink
from splitter.errors import LinkError

ONE_F405 = """[link]
baud = 115200

[[device]]
name = "solo"
mcu = "STM32F405RG"
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled (not built) tiny-CNN plan on one board, so ``--port PORT`` needs no name."""
    tmp = tmp_path_factory.mktemp("port_busy")
    (tmp / "solo.toml").write_text(ONE_F405)
    compile_model(MODELS / "tiny_cnn.onnx", tmp / "solo.toml", tmp / "out", CompileOptions())
    np.save(tmp / "x.npy", np.zeros((1, 1, 28, 28), dtype=np.float32))
    return tmp / "out"


@pytest.fixture
def pty_path() -> Iterator[str]:
    """The slave path of a fresh pseudo-terminal (``/dev/pts/N``); its master stays open."""
    master, slave = os.openpty()
    try:
        yield os.ttyname(slave)
    finally:
        os.close(slave)
        os.close(master)


@pytest.fixture
def held(pty_path: str) -> Iterator[str]:
    """``pty_path``, held with an exclusive lock by this test process."""
    holder = serial.Serial(pty_path, exclusive=True)
    try:
        yield pty_path
    finally:
        holder.close()


def one_line_exit_2(proc: object) -> str:
    """The single stderr line of a failed command (asserting exit code 2)."""
    assert getattr(proc, "returncode", None) == 2, getattr(proc, "stderr", "")
    lines = str(getattr(proc, "stderr", "")).strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


def assert_busy_line(line: str, port: str) -> None:
    """The line names the port and the device, says busy and what to do."""
    assert line.startswith(f"splitter: error: {port}: "), line
    assert "device solo" in line and "busy" in line and "close it and retry" in line


def test_a_second_host_link_on_the_same_port_is_refused(pty_path: str) -> None:
    """splitter's own links take the lock: a second one (another run/bench) is told busy."""
    with HostLink(pty_path, "solo"):
        with pytest.raises(LinkError, match=r"busy") as info:
            HostLink(pty_path, "other")
        assert pty_path in str(info.value) and "device other" in str(info.value)
    with HostLink(pty_path, "solo"):  # released on close: the port opens again
        pass


def test_run_on_a_busy_port(out: Path, held: str) -> None:
    x = out.parent / "x.npy"
    proc = cli("run", str(out), "--port", held, "--input", str(x), "--timeout", "5", timeout=30)
    assert_busy_line(one_line_exit_2(proc), held)


def test_bench_on_a_busy_port(out: Path, held: str) -> None:
    proc = cli("bench", str(out), "-n", "1", "--port", held, "--timeout", "5", timeout=30)
    assert_busy_line(one_line_exit_2(proc), held)


def test_run_on_a_free_silent_port_is_not_called_busy(out: Path, pty_path: str) -> None:
    """Control: the same pty unlocked opens; the error is then the silent board's."""
    x = out.parent / "x.npy"
    proc = cli("run", str(out), "--port", pty_path, "--input", str(x), "--timeout", "1",
               timeout=30)  # fmt: skip
    line = one_line_exit_2(proc)
    assert "busy" not in line and "solo" in line
