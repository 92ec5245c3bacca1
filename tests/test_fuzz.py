"""The project's own fuzz suite (issue 18, item 6): seeded hostile inputs on every surface.

Cases come from :mod:`tests.fuzz_cases` (deterministic, ``SEED``): corrupted and structurally
wrong ONNX/TFLite files, boards files, payload names, profiles, ``.npy`` inputs, output
folders, tampered compile outputs, special files (FIFOs, devices), and mutated link frames
driven through :mod:`splitter.device.host` over a socket pair. CLI cases run in-process through
:func:`splitter.cli.main`; each asserts:

- exit code 0 or 2; on 2 exactly one stderr line ``splitter: error: ...``; never a
  ``Traceback``, ``internal error`` or ``please report``;
- it finishes within :data:`CASE_TIMEOUT` (a ``SIGALRM`` turns a hang into a failure);
- nothing outside OUT is created, removed or changed (the sandbox is snapshot before/after);
- no payload ran: the ``PWNED`` marker never appears, and ``make -n`` (which evaluates
  ``$(shell ...)``) in every generated or built firmware folder does not create it either.

``splitter build`` is run with ``run_make`` replaced by a stub that records the folder (it must
resolve inside OUT), runs ``make -n`` there and stops with a project error: no cross-compile.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import fuzz_cases as F
import numpy as np
import pytest

from splitter import protocol as P
from splitter.cli import main
from splitter.device.host import HostLink, receive_result
from splitter.device.transport import SocketTransport
from splitter.errors import LinkError, ToolchainError
from splitter.toolchain import build as B

ROOT = Path(__file__).resolve().parent.parent
#: Seconds one CLI case may take before it counts as a hang.
CASE_TIMEOUT = 20.0
#: Link cases: the host's deadline and the slack on top of it (catches hangs, not jitter).
LINK_TIMEOUT, LINK_SLACK = 0.25, 3.0

#: Cases failing on a bug another helper of issue 18 is fixing (items 1-3, 5): id -> reason.
KNOWN: dict[str, str] = {}


class Hang(BaseException):
    """Raised by the alarm: a BaseException so no ``except Exception`` in the code swallows it."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"no answer within {CASE_TIMEOUT} s")


_BASE: dict[str, Path] = {}


def _base_out() -> Path:
    """A good compile output with firmware (tiny_cnn over two F405), made once per process."""
    if "out" not in _BASE:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="fuzz-base-"))
        atexit.register(shutil.rmtree, root, True)
        out = root / "out"
        with pytest.raises(SystemExit) as info:
            main(
                [
                    "compile",
                    str(F.ONNX_MODEL),
                    "-t",
                    str(F.MODELS / "boards" / "e2e_tiny2.toml"),
                    "-o",
                    str(out),
                    "--no-validate",
                ]
            )
        assert info.value.code in (0, None)
        _BASE["out"] = out
    return _BASE["out"]


CASES = F.all_cli_cases(_base_out)


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[case.id])] if case.id in KNOWN else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` except under ``skip``: (mode, size, mtime_ns), symlinks not
    followed."""
    seen: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d != skip]
        for name in dirnames + filenames:
            path = here / name
            if path == skip:
                continue
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):  # a folder's mtime changes when OUT is made in it
                seen[str(path.relative_to(root))] = (st.st_mode, 0, 0)
            else:
                seen[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def make_n(folder: Path, pwned: Path) -> None:
    """``make -n`` in ``folder``: parsing the Makefile evaluates every ``$(shell ...)``."""
    try:
        has_makefile = (folder / "Makefile").is_file()
    except OSError:  # e.g. a 300-character device name: no such folder
        has_makefile = False
    if has_makefile:
        subprocess.run(
            ["make", "-n", "-C", str(folder)],
            capture_output=True,
            timeout=20,
            check=False,
            env={**os.environ, "PATH": os.environ.get("PATH", "")},
        )
    assert not pwned.exists(), f"payload ran in {folder}/Makefile"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[F.Sandbox]:
    sb = F.Sandbox(
        tmp_path, tmp_path / "in", tmp_path / "w", tmp_path / "w" / "out", tmp_path / "PWNED"
    )
    sb.inputs.mkdir()
    sb.work.mkdir()
    monkeypatch.chdir(sb.work)
    yield sb


@pytest.fixture
def stub_make(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """``run_make`` recording each folder; the toolchain is never run."""
    folders: list[Path] = []

    def fake(device_dir: Path, *, emulator: bool = False, **_kw: object) -> Path:
        folders.append(Path(device_dir))
        raise ToolchainError(f"{device_dir}: stub make (fuzz suite)")

    monkeypatch.setattr(B, "run_make", fake)
    monkeypatch.setattr(B, "require_toolchain", lambda: "arm-none-eabi-gcc")
    return folders


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``splitter argv`` in-process under the alarm: (exit code, stdout, stderr)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT)
    code: Any = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    captured = capsys.readouterr()
    return (0 if code is None else int(code)), captured.out, captured.err


#: The child of :func:`run_isolated`: the same stubbed ``run_make`` as in-process cases.
CHILD = """
import sys
import splitter.toolchain.build as B
from splitter.errors import ToolchainError

def fake(device_dir, *, emulator=False, **_kw):
    raise ToolchainError(f"{device_dir}: stub make (fuzz suite)")

B.run_make = fake
B.require_toolchain = lambda: "arm-none-eabi-gcc"
from splitter.cli import main

main(sys.argv[1:])
"""
#: Address-space limit of an isolated case (bytes): reading ``/dev/zero`` fails, not the host.
CHILD_MEMORY = 3 << 30


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def run_isolated(argv: list[str], sb: F.Sandbox) -> tuple[int, str, str]:
    """``splitter argv`` in a child with a memory limit and :data:`CASE_TIMEOUT`: for cases
    that may block in a system call or fill memory (FIFOs, devices)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, *argv],
            cwd=sb.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=CASE_TIMEOUT,
            preexec_fn=_limit_child,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {CASE_TIMEOUT} s: splitter {argv}")
    return proc.returncode, proc.stdout, proc.stderr


def assert_clean_exit(code: int, err: str) -> None:
    """Exit 0 or 2; an error is one line; never a traceback or an internal error."""
    assert "Traceback" not in err and "please report" not in err, err
    assert "internal error" not in err, err
    assert code in (0, 2), f"exit {code}: {err}"
    if code == 2:
        lines = err.strip("\n").split("\n")
        assert len(lines) == 1, err
        assert lines[0].startswith("splitter: error: ") or lines[0].startswith("Error: "), err
        assert all(ch.isprintable() for ch in lines[0]), repr(lines[0])


@pytest.mark.parametrize("case", _params())
def test_cli_case(
    case: F.Case,
    sandbox: F.Sandbox,
    stub_make: list[Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = case.make(sandbox)
    before = snapshot(sandbox.root, sandbox.out)
    if case.isolate:
        code, _out, err = run_isolated(argv, sandbox)
    else:
        code, _out, err = run_cli(argv, capsys)
    assert_clean_exit(code, err)
    after = snapshot(sandbox.root, sandbox.out)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"changed outside OUT: {changed}"
    assert not sandbox.pwned.exists(), "payload executed"
    out = sandbox.out.resolve()
    stage = out.parent / f".{out.name}.stage"  # build compiles in a staged copy of OUT
    for folder in stub_make:
        inside = folder.resolve().is_relative_to(out) or folder.resolve().is_relative_to(stage)
        assert inside, f"make in {folder}, outside OUT"
        make_n(folder, sandbox.pwned)
    if code == 0 and (sandbox.out / "firmware").is_dir():
        for folder in (sandbox.out / "firmware").iterdir():
            if folder.is_dir():
                make_n(folder, sandbox.pwned)


def test_enough_cases() -> None:
    """The issue asks for >= 500 generated cases; every category is present."""
    cats = {c.category for c in CASES}
    assert len(CASES) + len(LINK_CASES) >= 500
    assert cats >= {
        "onnx",
        "tflite",
        "boards",
        "payload",
        "profile",
        "npy",
        "out",
        "tamper",
        "special",
    }
    assert len({c.id for c in CASES}) == len(CASES)


def test_generation_is_deterministic() -> None:
    a = [c.id for c in F.all_cli_cases(_base_out)]
    assert a == [c.id for c in CASES]


# -- link frames -----------------------------------------------------------------------------
RESULT_BYTES = 40


def _good_stream() -> list[bytes]:
    """What a board sends after a run: TIMING, then the 40-byte result in two RESULT chunks."""
    data = np.arange(10, dtype="<f4").tobytes()
    frames = [P.encode_frame(P.FrameType.TIMING, 1, P.TIMING.pack(0, 1, 0, 1234))]
    for seq, off in ((2, 0), (3, 24)):
        payload = P.CHUNK.pack(0, 0, 0, RESULT_BYTES, off) + data[off : off + 24]
        frames.append(P.encode_frame(P.FrameType.RESULT, seq, payload))
    return frames


def _link_stream(i: int) -> bytes:
    """Case ``i``: the good stream with frames mutated at the byte, payload or frame level."""
    rng = np.random.default_rng(F.SEED + 100 + i)
    frames = _good_stream()
    kind = i % 8
    if kind == 0:  # byte flips anywhere
        buf = bytearray(b"".join(frames))
        for pos in rng.integers(0, len(buf), size=int(rng.integers(1, 6))):
            buf[int(pos)] ^= 1 << int(rng.integers(0, 8))
        return bytes(buf)
    if kind == 1:  # a re-framed payload of random length/content, valid CRC
        ftype = int(
            rng.choice(
                [
                    P.FrameType.RESULT,
                    P.FrameType.TIMING,
                    P.FrameType.ERROR,
                    P.FrameType.PONG,
                    P.FrameType.TENSOR,
                    0,
                    0xFF,
                ]
            )
        )
        n = int(rng.integers(0, P.MAX_PAYLOAD + 1))
        payload = rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
        frames.insert(int(rng.integers(0, len(frames) + 1)), P.encode_frame(ftype, 9, payload))
    elif kind == 2:  # RESULT chunk headers with hostile offsets/totals
        off = int(rng.choice([0, 1, 39, 40, 41, 2**31, 2**32 - 1]))
        total = int(rng.choice([0, 1, 40, 39, 2**32 - 1]))
        data = rng.integers(0, 256, size=int(rng.integers(0, 64)), dtype=np.uint8).tobytes()
        frames[1] = P.encode_frame(P.FrameType.RESULT, 2, P.CHUNK.pack(0, 0, 0, total, off) + data)
    elif kind == 3:  # TIMING records of odd lengths and values
        n = int(rng.integers(0, 40))
        payload = rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
        frames[0] = P.encode_frame(P.FrameType.TIMING, 1, payload)
    elif kind == 4:  # ERROR text: control characters, invalid UTF-8, long
        text = bytes(rng.integers(0, 256, size=int(rng.integers(0, 300)), dtype=np.uint8))
        frames.insert(1, P.encode_frame(P.FrameType.ERROR, 7, b"\x1b[2J\x1b]0;x\x07" + text))
    elif kind == 5:  # non-finite / extreme result values
        vals = rng.choice(np.array([np.nan, np.inf, -np.inf, 3e38, 0.0], "<f4"), size=10)
        data = vals.astype("<f4").tobytes()
        frames[1:] = [
            P.encode_frame(
                P.FrameType.RESULT,
                2 + k,
                P.CHUNK.pack(0, 0, 0, RESULT_BYTES, off) + data[off : off + 24],
            )
            for k, off in enumerate((0, 24))
        ]
    elif kind == 6:  # truncated stream, duplicated or reordered frames
        order = rng.permutation(len(frames)).tolist() + rng.integers(0, 3, size=2).tolist()
        raw = b"".join(frames[j] for j in order)
        return raw[: int(rng.integers(0, len(raw) + 1))]
    else:  # noise and fake sync bytes between frames, wrong lengths in the header
        noise = P.SYNC + P.HEADER.pack(P.FrameType.RESULT, 1, int(rng.integers(0, 65536)))
        frames.insert(
            int(rng.integers(0, len(frames) + 1)),
            noise + rng.integers(0, 256, size=int(rng.integers(0, 32)), dtype=np.uint8).tobytes(),
        )
    return b"".join(frames)


LINK_CASES = list(range(120))


@pytest.mark.parametrize("i", LINK_CASES)
def test_link_frames(i: int) -> None:
    """The host either returns the 40 bytes or raises the project's LinkError naming the board,
    one printable line, within the deadline plus slack."""
    stream = _link_stream(i)
    host_sock, board_sock = socket.socketpair()
    link = HostLink(SocketTransport.from_socket(host_sock, "pair://d1"), "d1", ack_timeout=0.1)
    sender = threading.Thread(target=_send_quietly, args=(board_sock, stream), daemon=True)
    sender.start()
    t0 = time.monotonic()
    try:
        data, _timings, _t = receive_result(link, RESULT_BYTES, timeout=LINK_TIMEOUT)
        assert len(data) == RESULT_BYTES
    except LinkError as exc:
        text = str(exc)
        assert "d1" in text, text
        assert "\n" not in text and all(ch.isprintable() for ch in text), repr(text)
    finally:
        elapsed = time.monotonic() - t0
        link.close()
        board_sock.close()
        sender.join(5)
    assert elapsed < LINK_TIMEOUT + LINK_SLACK, elapsed


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def test_link_cases_cover_every_mutation_kind() -> None:
    assert {i % 8 for i in LINK_CASES} == set(range(8))
