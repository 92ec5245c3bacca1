"""The crash test's machinery (``tests/test_crash_safety.py``, ``benchmarks/kill_test.py``).

A command (``compile``, ``build``, ``segment``) runs in a forked child of the test process (the
heavy modules are imported once, so a run costs what the command costs) and is ended abruptly:

* at its ``N``-th file operation (``SPLITTER_CRASH_AT=N``, :func:`splitter.outputs.crash_point`:
  ``os._exit`` with no clean-up, as a power cut or ``kill -9`` would), for every ``N`` until the
  command completes; or
* by ``SIGKILL`` to its process group (the command and its ``make`` / ``gcc``) after a delay.

After each run ``OUT`` must be byte for byte the previous output or the complete new one
(:func:`snapshot` of every file's SHA-256 and every directory), as SQLite's crash test checks
its database after every simulated crash (https://sqlite.org/testing.html#crash_testing).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from splitter import outputs

Snapshot = dict[str, str]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root``: a file's SHA-256, ``"dir"`` or ``"link -> target"``; ``{}``
    when ``root`` does not exist."""
    if not root.exists():
        return {}
    found: Snapshot = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = f"link -> {os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def run_forked(
    argv: Sequence[str],
    *,
    crash_at: int | None = None,
    kill_after: float = 0,
    count_to: Path | None = None,
) -> int:
    """Run ``splitter ARGV`` in a forked child (its own process group, output discarded); its
    exit code, or ``-9`` when ``kill_after`` seconds passed first and it was SIGKILLed. A child
    that completes writes its number of file operations to ``count_to``."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            if crash_at is not None:
                os.environ[outputs.CRASH_ENV] = str(crash_at)
            outputs.reset_file_operations()
            from splitter.cli import _run

            code = _run(list(argv))
            if count_to is not None:
                count_to.write_text(str(outputs.file_operations()))
        finally:
            os._exit(code)
    if kill_after > 0:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.005)
        with _suppress_lookup():
            os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class _suppress_lookup:
    """``with``: ignore ProcessLookupError (the child ended just before the kill)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return kind is ProcessLookupError


@dataclass
class Outcome:
    """What one kill point left: the exit code and which output ``OUT`` is."""

    point: str
    code: int
    state: str  # "previous" | "new" | "torn"


@dataclass
class Sweep:
    """Kill points of one command against its previous and new ``OUT``."""

    name: str
    argv: list[str]
    out: Path
    previous: Path  # a copy of the previous OUT (or a path that does not exist: no OUT)
    new: Snapshot = field(default_factory=dict)
    #: file operations of a complete run (the crash points are 1..points)
    points: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    def restore(self) -> None:
        """Put the previous ``OUT`` back (and drop what killed runs left next to it)."""
        if self.out.exists():
            shutil.rmtree(self.out)
        for junk in self.out.parent.glob(f".{self.out.name}.*"):
            shutil.rmtree(junk, ignore_errors=True)
        if self.previous.exists():
            shutil.copytree(self.previous, self.out, symlinks=True)

    def reference(self) -> None:
        """Run the command to completion once: the new ``OUT``."""
        self.restore()
        before = snapshot(self.out)
        count = self.out.parent / f"{self.name}.points"
        code = run_forked(self.argv, crash_at=10**9, count_to=count)
        assert code == 0, f"{self.name}: the uninterrupted run failed ({code})"
        self.new = snapshot(self.out)
        self.points = int(count.read_text())
        assert self.new != before, f"{self.name}: the new output equals the previous one"

    def kill(self, point: str, *, crash_at: int | None = None, kill_after: float = 0) -> Outcome:
        """One kill point: restore, run, kill, classify ``OUT``."""
        self.restore()
        previous = snapshot(self.out)
        code = run_forked(self.argv, crash_at=crash_at, kill_after=kill_after)
        now = snapshot(self.out)
        state = "previous" if now == previous else "new" if now == self.new else "torn"
        outcome = Outcome(point, code, state)
        self.outcomes.append(outcome)
        return outcome


def spread(n: int, k: int) -> list[int]:
    """``k`` crash points spread evenly over ``1..n`` (both ends included)."""
    if n <= k:
        return list(range(1, n + 1))
    return sorted({1 + round(i * (n - 1) / (k - 1)) for i in range(k)})
