"""Write an output directory atomically: all of it, or nothing changes.

Everything is built in a temporary directory next to ``OUT`` (same filesystem, so renames are
atomic), then swapped in: the old ``OUT`` is renamed aside, the new one renamed into place, the
old one deleted. A failure at any point before the swap (bad cut, validation error, disk full,
permission) removes the temporary directory and leaves the previous ``OUT`` untouched.

An existing ``OUT`` is replaced only when splitter made it (it holds the marker file
:data:`MARKER`) or is empty, unless ``force`` is given. Every OS failure becomes a one-line
:class:`~splitter.errors.OutputError` naming the path and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from splitter.errors import InputFileError, OutputError

#: Marker file identifying a directory splitter wrote (holds the splitter version).
MARKER = ".splitter-out"

#: The low-level write every file goes through (a module attribute so tests can inject ENOSPC).
_os_write = os.write


class OutputDir:
    """An output directory under construction; ``with OutputDir(out) as w: w.write_text(...)``.

    Leaving the ``with`` block normally commits (swaps the new directory into place); leaving it
    with an exception discards the temporary directory.
    """

    def __init__(self, target: str | Path, *, force: bool = False) -> None:
        self.target = normalised_target(target)
        self.force = force
        self.root: Path = self.target  # the temporary directory once entered
        self._entered = False

    def __enter__(self) -> OutputDir:
        check_target(self.target, force=self.force)
        parent = self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            with sigint_deferred():  # a Ctrl-C lands after root is known, so it is discarded
                self.root = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-", dir=parent))
                self._entered = True
            os.chmod(self.root, 0o777 & ~_umask())  # mkdtemp makes it 0700
        except OSError as exc:
            self.discard()
            raise _os_error(self.target, "create a directory next to it", exc) from exc
        except BaseException:  # Ctrl-C right after mkdtemp: __exit__ will not run
            self.discard()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.discard()
            return
        try:
            self.commit()
        except BaseException:  # e.g. Ctrl-C while the marker is written
            self.discard()
            raise

    # --- writing ---------------------------------------------------------------------------

    def path(self, relative: str | Path) -> Path:
        """Absolute path of ``relative`` inside the directory being built (parents created)."""
        path = self.root / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(self.target, f"create {Path(relative).parent}", exc) from exc
        return path

    def write_bytes(self, relative: str | Path, data: bytes) -> Path:
        """Write ``data`` to ``relative``; an OS failure is an :class:`OutputError`."""
        path = self.path(relative)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _os_error(self.target, f"write {relative}", exc) from exc
        return path

    def write_text(self, relative: str | Path, text: str) -> Path:
        """Write UTF-8 ``text`` to ``relative``."""
        return self.write_bytes(relative, text.encode("utf-8"))

    def write_json(self, relative: str | Path, obj: Any) -> Path:
        """Write ``obj`` as indented JSON (trailing newline) to ``relative``."""
        return self.write_text(relative, json.dumps(obj, indent=2, sort_keys=False) + "\n")

    # --- finishing -------------------------------------------------------------------------

    def commit(self) -> Path:
        """Write the marker and swap the new directory into place; returns ``target``."""
        from splitter import __version__

        self.write_text(MARKER, f"splitter {__version__}\n")
        with sigint_deferred():  # Ctrl-C between the two renames would leave no OUT at all
            return self._swap()

    def _swap(self) -> Path:
        """Rename the previous ``OUT`` aside and the new one into place."""
        aside = None
        try:
            if self.target.exists():
                aside = Path(
                    tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=self.target.parent)
                )
                os.rename(self.target, aside / "out")
            os.rename(self.root, self.target)
        except OSError as exc:
            if aside is not None and (aside / "out").exists() and not self.target.exists():
                os.rename(aside / "out", self.target)  # put the previous OUT back
            self.discard()
            raise _os_error(self.target, "move the new output into place", exc) from exc
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        return self.target

    def discard(self) -> None:
        """Delete the temporary directory (the previous ``OUT`` is untouched)."""
        if self._entered and self.root != self.target:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) for the duration of the block; one that arrived meanwhile is
    raised as :class:`KeyboardInterrupt` when the block ends (only in the main thread, the only
    one Python delivers signals to)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def normalised_target(target: str | Path) -> Path:
    """``target`` made absolute with its parent resolved (``OUT/../OUT`` is ``OUT``).

    Only the parent is resolved: a last component that is a symlink stays a symlink (and is
    refused by :func:`check_target`), while ``..`` inside the path can no longer make
    ``mkdir(parents=True)`` create folders beside the output or the swap miss its target.
    """
    path = Path(target).absolute()
    if path.name in ("", ".", ".."):
        return path.resolve()
    return path.parent.resolve() / path.name


def check_target(target: Path, *, force: bool = False) -> None:
    """Refuse targets that are files or foreign directories, before any work is done.

    An OS failure while looking (a name longer than NAME_MAX, a loop of symlinks, no
    permission) is an :class:`OutputError` too.
    """
    try:
        _check_target(target, force)
    except OSError as exc:
        raise _os_error(target, "inspect it", exc) from None


def _check_target(target: Path, force: bool) -> None:
    if target.is_symlink() and not target.is_dir():
        raise OutputError(f"{target}: is a symbolic link, not a directory; choose another -o")
    if target.exists() and not target.is_dir():
        raise OutputError(
            f"{target}: exists and is a file, not a directory; remove it or choose another -o"
        )
    if target.is_dir() and not force and not (target / MARKER).exists() and any(target.iterdir()):
        raise OutputError(
            f"{target}: directory exists and was not written by splitter (no {MARKER}); "
            "use --force to replace it or choose another -o"
        )
    parent = _existing_parent(target)
    if not parent.is_dir():
        raise OutputError(f"{target}: parent {parent} is not a directory; choose another -o")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{target}: parent directory {parent} is not writable; choose another -o")


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _existing_parent(target: Path) -> Path:
    """The nearest ancestor of ``target`` that exists."""
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write returned 0 bytes")
        view = view[written:]


def _os_error(target: Path, action: str, exc: OSError) -> OutputError:
    """A one-line :class:`OutputError` for an OS failure, with a fix per errno."""
    fixes = {
        errno.ENOSPC: "free disk space",
        errno.EDQUOT: "free disk space (quota exceeded)",
        errno.EACCES: "check permissions or choose another -o",
        errno.EPERM: "check permissions or choose another -o",
        errno.EROFS: "the filesystem is read-only; choose another -o",
        errno.ENOTDIR: "a parent of the path is a file; choose another -o",
        errno.ENAMETOOLONG: "a name in the path is too long; choose a shorter -o",
    }
    fix = fixes.get(exc.errno or 0, "choose another -o")
    reason = exc.strerror or str(exc)
    return OutputError(
        f"{target}: cannot {action} ({reason}); {fix}; the previous output is unchanged"
    )


def contained(out_dir: str | Path, relative: str | Path) -> Path:
    """``out_dir / relative`` resolved (symlinks and ``..`` followed), which must stay inside the
    resolved ``out_dir``; else a one-line :class:`~splitter.errors.InputFileError`.

    Every path derived from a compile output's own files (a device name of ``wiring.json``, a
    sub-model ``file`` of ``plan.json``) goes through here before anything is read, built, run or
    written there, so a tampered manifest cannot reach outside ``OUT``.
    """
    root = Path(out_dir).resolve()
    rel = str(relative)
    try:
        path = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loop, NUL byte
        raise InputFileError(f"{root}: path {rel!a} cannot be resolved ({exc})") from None
    if "\0" in rel or not path.is_relative_to(root):
        raise InputFileError(
            f"{root}: path {rel!a} leads outside the output directory; "
            "the compile output was tampered with, re-run `splitter compile`"
        )
    return path
