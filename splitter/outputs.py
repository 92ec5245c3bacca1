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
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from splitter.errors import InputFileError, OutputError
from splitter.signals import deferred

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
            write_durable(path, data)
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
        from splitter.version import __version__

        self.write_text(MARKER, f"splitter {__version__}\n")
        self.write_text(FILES, hash_listing(self.root))
        try:
            flush_to_disk(self.root)  # every file and directory entry on disk before the swap
        except OSError as exc:
            raise _os_error(self.target, "flush the new output to disk", exc) from exc
        with sigint_deferred():  # Ctrl-C between the two renames would leave no OUT at all
            return self._swap()

    def _swap(self) -> Path:
        """Rename the previous ``OUT`` aside and the new one into place."""
        try:
            swap_into_place(self.root, self.target)
        except OSError as exc:
            self.discard()
            raise _os_error(self.target, "move the new output into place", exc) from exc
        return self.target

    def discard(self) -> None:
        """Delete the temporary directory (the previous ``OUT`` is untouched)."""
        if self._entered and self.root != self.target:
            shutil.rmtree(self.root, ignore_errors=True)


#: Hold back SIGINT and SIGTERM during a block (:func:`splitter.signals.deferred`).
sigint_deferred = deferred


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


# --- crash safety ------------------------------------------------------------------------------

#: Environment variable of the crash test: ``N`` makes the process end abruptly (``os._exit``,
#: no clean-up, as a kill -9 or a power cut would) at its ``N``-th file operation; see
#: :func:`crash_point` and ``tests/test_crash_safety.py`` (SQLite's crash test injects faults
#: the same way, https://sqlite.org/testing.html#crash_testing).
CRASH_ENV = "SPLITTER_CRASH_AT"
#: Exit code of a process ended by :data:`CRASH_ENV`.
CRASH_EXIT = 86

_crash = {"count": 0}


def crash_point() -> None:
    """Count one file operation; end the process here when it is the ``$SPLITTER_CRASH_AT``-th.

    Called before every write, rename, directory swap and deletion of an output, so the crash
    test can stop a command between any two of them."""
    _crash["count"] += 1
    at = os.environ.get(CRASH_ENV, "")
    if at.isdigit() and _crash["count"] == int(at):
        os._exit(CRASH_EXIT)


def file_operations() -> int:
    """How many :func:`crash_point` calls this process made (the crash test's range)."""
    return _crash["count"]


def reset_file_operations() -> None:
    """Restart the count (an in-process crash test runs several commands)."""
    _crash["count"] = 0


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path`` of a directory that is not in place yet; it reaches
    the disk with everything else in :func:`flush_to_disk`, before the directory is swapped in
    (so a power cut cannot leave a torn file in place of a complete one: ext4's
    ``data=ordered`` does not order a new file's data before a later rename of its folder)."""
    crash_point()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def flush_to_disk(root: Path) -> None:
    """Every file and directory entry under ``root`` on disk: one Linux ``syncfs`` of its
    filesystem (about 0.1 s where fsyncing 70 files one by one takes 0.5 s), else ``fsync``
    of each file and directory."""
    import ctypes

    crash_point()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
        if syncfs is not None and syncfs(fd) == 0:
            return
    except OSError:
        pass
    finally:
        os.close(fd)
    fsync_files(root)
    fsync_tree(root)


def fsync_tree(root: Path) -> None:
    """``fsync`` every directory under ``root`` (and ``root``), so their entries are on disk."""
    for dirpath, _dirs, _files in os.walk(root):
        fsync_dir(Path(dirpath))


def fsync_dir(path: Path) -> None:
    """``fsync`` a directory: its entries (a rename into it, a new file) reach the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False
    where the kernel, libc or filesystem cannot, and nothing was changed."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def swap_into_place(new: Path, target: Path) -> None:
    """Make the complete directory ``new`` be ``target``; at every instant ``target`` is the
    previous directory or ``new`` (never missing) where :func:`exchange` works.

    With a previous ``target`` the two names are exchanged in one step and the previous one
    (now at ``new``'s name) deleted; otherwise ``new`` is renamed. The parent is fsynced so the
    swap survives a power cut. Without ``renameat2`` the previous ``target`` is renamed aside
    first (a crash between the two renames leaves it aside, under ``.NAME.old-*``)."""
    crash_point()
    if target.exists() and not target.is_symlink():
        if exchange(new, target):
            fsync_dir(target.parent)
            crash_point()
            shutil.rmtree(new, ignore_errors=True)
            return
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rename(target, aside / "out")
        crash_point()
        try:
            os.rename(new, target)
        except OSError:
            os.rename(aside / "out", target)  # put the previous one back
            raise
        fsync_dir(target.parent)
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.rename(new, target)
    fsync_dir(target.parent)


# --- hashes of the generated files -------------------------------------------------------------

#: The list of every file splitter generated in ``OUT`` with its SHA-256, in ``sha256sum``
#: format (``sha256sum -c files.sha256`` checks it); each build directory has its own.
FILES = "files.sha256"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes, in hex (FIPS 180-4)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def hash_listing(root: Path, skip: tuple[str, ...] = ("build",)) -> str:
    """``sha256sum`` lines for every file under ``root`` except :data:`FILES` and the files
    under a directory named in ``skip`` (build directories carry their own list)."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(root)
        if rel.name == FILES or any(part in skip for part in rel.parts[:-1]):
            continue
        lines.append(f"{file_hash(path)}  {rel.as_posix()}\n")
    return "".join(lines)


def edited_files(root: Path) -> list[str]:
    """The files of ``root``'s :data:`FILES` list that are missing or differ from their hash
    (paths relative to ``root``); a list that is not in ``sha256sum`` format is reported as
    edited itself."""
    text = (root / FILES).read_text(encoding="utf-8", errors="replace")
    changed = []
    for line in text.splitlines():
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel or rel.startswith("/") or ".." in rel.split("/"):
            return [FILES]
        path = root / rel
        if not path.is_file() or file_hash(path) != digest:
            changed.append(rel)
    return changed


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


#: The flag a user passes to build, flash or run an output whose generated files they edited.
ALLOW_EDITED = "--allow-edited"


def verify_output(out_dir: str | Path, *, allow_edited: bool = False) -> None:
    """Check every file splitter generated in ``out_dir`` against its :data:`FILES` hash
    (``OUT/files.sha256``, and ``files.sha256`` of each ``build/<target>`` directory) before
    ``build``, ``flash`` or ``run`` uses them; an edited, missing or unlisted output is a
    one-line :class:`~splitter.errors.InputFileError` naming the file, unless the user says the
    edit is on purpose (``allow_edited``)."""
    if allow_edited:
        return
    root = Path(out_dir)
    if not (root / FILES).is_file():
        if not (root / MARKER).is_file():
            return  # not a splitter output at all: the manifest reader says what is wrong
        raise InputFileError(
            f"{root / FILES}: missing, so the generated files cannot be checked; re-run "
            f"`splitter compile` (or pass {ALLOW_EDITED} to use the files as they are)"
        )
    changed = edited_files(root)
    for listing in sorted(root.glob(f"firmware/*/build/*/{FILES}")):
        changed += [f"{listing.parent.relative_to(root)}/{r}" for r in edited_files(listing.parent)]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise InputFileError(
            f"{root / changed[0]}: edited since splitter wrote it{more} (its SHA-256 differs from "
            f"{FILES}); re-run `splitter compile`, or pass {ALLOW_EDITED} if the edit is on purpose"
        )


@contextlib.contextmanager
def staged_copy(out_dir: str | Path) -> Iterator[Path]:
    """A full copy of ``OUT`` to change (``build`` compiles in it), swapped into place when the
    block ends normally and deleted when it raises: ``OUT`` is the previous output or the
    complete new one at every instant (:func:`swap_into_place`).

    The copy sits next to ``OUT`` under a fixed name (``.NAME.stage``), so what is compiled
    there is byte for byte what compiling in ``OUT`` gives (the linker map names objects by
    that path; the compiler's debug paths are mapped back to ``OUT``). Before the swap every
    ``firmware/*/build/*`` directory gets its own :data:`FILES` list and everything is fsynced.
    """
    target = normalised_target(out_dir)
    stage = target.parent / f".{target.name}.stage"
    try:
        if stage.exists():
            shutil.rmtree(stage)  # what a killed build left behind
        shutil.copytree(target, stage, symlinks=True, copy_function=_copy_regular)
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise _os_error(target, "copy it to build in", exc) from exc
    try:
        yield stage
        for build in sorted(stage.glob("firmware/*/build/*")):
            if build.is_dir():
                write_durable(build / FILES, hash_listing(build, skip=()).encode())
        flush_to_disk(stage)
        with sigint_deferred():
            swap_into_place(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _copy_regular(src: str, dst: str) -> None:
    """``shutil.copy2`` of a regular file; anything else in ``OUT`` (a FIFO, a device, a socket
    put there by hand) is an :class:`~splitter.errors.InputFileError`, never opened."""
    import stat

    if not stat.S_ISREG(os.lstat(src).st_mode):
        raise InputFileError(
            f"{src}: not a regular file (a FIFO, device or socket?); remove it, or re-run "
            "`splitter compile`"
        )
    shutil.copy2(src, dst)


def fsync_files(root: Path) -> None:
    """``fsync`` every regular file under ``root`` (what a compiler or linker wrote)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


@contextlib.contextmanager
def errors_named_in(stage: Path, target: str | Path) -> Iterator[None]:
    """Re-raise a :class:`~splitter.errors.SplitterError` from work in the staged copy with the
    copy's path replaced by ``target``'s, so the message names the file the user knows."""
    from splitter.errors import SplitterError

    try:
        yield
    except SplitterError as exc:
        text = str(exc).replace(str(stage), str(normalised_target(target)))
        if text == str(exc):
            raise
        raise type(exc)(text) from None


def relist(path: str | Path) -> None:
    """``path`` was rewritten by splitter itself inside an output (``report.html`` by ``bench``
    or ``report``): its line of that output's :data:`FILES` follows, so ``build``, ``flash`` and
    ``run`` do not take splitter's own rewrite for an edit. A file not listed stays unlisted."""
    path = Path(path).absolute()
    for root in list(path.parents)[:4]:
        listing = root / FILES
        if not listing.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        lines = listing.read_text(encoding="utf-8", errors="replace").splitlines()
        new = [f"{file_hash(path)}  {rel}" if ln.partition("  ")[2] == rel else ln for ln in lines]
        if new != lines:
            fd, tmp = tempfile.mkstemp(prefix=f".{FILES}.", dir=root)
            with os.fdopen(fd, "w") as fh:
                fh.write("\n".join(new) + "\n")
            os.replace(tmp, listing)
        return
