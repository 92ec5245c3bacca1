"""Read a user's input file safely: a regular file of bounded size, parsed with a depth limit.

Every reader of a file a user names (model ``.onnx``/``.tflite``, boards ``.toml``, profile
``.csv``/``.json``, ``--input .npy``, a compile output's JSON) goes through
:func:`read_input_file`, so a FIFO, a device such as ``/dev/zero``, a directory, a symlink to any
of them, or a file above the size limit is refused with one line naming the file and the fix,
instead of blocking forever or filling memory. The file is checked with ``os.stat`` before it is
opened, opened with ``O_NONBLOCK`` (opening a FIFO never waits for a writer) and checked again
with ``os.fstat`` on the open descriptor (the path may have been swapped in between).

Parsed documents are held to :data:`MAX_DEPTH` levels of nesting (:func:`parse_json`,
:func:`parse_toml`); Python's parsers recurse, so a deeply nested document is a one-line error,
never a ``RecursionError``.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from splitter.errors import InputFileError, SplitterError

#: Largest model file read (ONNX protobufs are limited to 2 GiB; MCU models are far smaller).
MODEL_MAX_BYTES = 1 << 30
#: Largest text document read (boards files, profiles, plan/wiring/bench JSON).
TEXT_MAX_BYTES = 16 << 20
#: Largest ``.npy`` input read.
ARRAY_MAX_BYTES = 256 << 20
#: Deepest nesting of arrays/tables/objects accepted in a JSON or TOML document.
MAX_DEPTH = 64

_CHUNK = 1 << 20


def read_input_file(
    path: str | Path,
    what: str,
    max_bytes: int,
    *,
    error: type[SplitterError] = InputFileError,
) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in errors, e.g. "ONNX model").

    Raises ``error`` (one line, naming the file and the fix) when the path is missing, is not a
    regular file (directory, FIFO, device, socket, or a symlink to one), is larger than
    ``max_bytes``, or cannot be read.
    """
    p = Path(path)
    try:
        _check_stat(p, os.stat(p), what, max_bytes, error)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{p}: {what} not found (no such file); check the path") from None
    except OSError as exc:
        raise error(f"{p}: cannot read the {what} ({exc.strerror}); check the path") from None
    try:
        _check_stat(p, os.fstat(fd), what, max_bytes, error)
        return _read_bounded(fd, p, what, max_bytes, error)
    except OSError as exc:
        raise error(f"{p}: cannot read the {what} ({exc.strerror}); check the file") from None
    finally:
        os.close(fd)


def read_input_text(
    path: str | Path,
    what: str,
    max_bytes: int = TEXT_MAX_BYTES,
    *,
    error: type[SplitterError] = InputFileError,
    generated: bool = False,
) -> str:
    """:func:`read_input_file` decoded as UTF-8. A leading BOM is dropped from a user's file
    (RFC 8259 section 8.1 lets a parser ignore it; editors on Windows write one); a file splitter
    ``generated`` never has one, nor a NUL byte, so there either means the file was edited."""
    data = read_input_file(path, what, max_bytes, error=error)
    if generated and data.startswith(b"\xef\xbb\xbf"):
        raise error(
            f"{path}: the {what} starts with a UTF-8 byte order mark, which splitter never "
            "writes (the file was edited); re-run `splitter compile`"
        )
    nul = data.find(b"\0") if generated else -1
    if nul >= 0:
        raise error(
            f"{path}: the {what} holds a NUL byte at offset {nul} (the file was "
            "edited or damaged); re-run `splitter compile`"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: the {what} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def parse_json(
    text: str | bytes, where: str, *, error: type[SplitterError] = InputFileError
) -> Any:
    """``json.loads(text)`` held to :data:`MAX_DEPTH`; every failure is one line from ``error``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); fix it"
        ) from None
    except RecursionError:
        raise error(_too_deep(where)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise error(f"{where}: not valid JSON ({' '.join(str(exc).split())}); fix it") from None
    check_depth(data, where, error=error)
    return data


def parse_toml(text: str, where: str, *, error: type[SplitterError] = InputFileError) -> Any:
    """``tomllib.loads(text)`` held to :data:`MAX_DEPTH`; failures are one line from ``error``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML ({exc}); fix the syntax") from None
    except RecursionError:
        raise error(_too_deep(where)) from None
    check_depth(data, where, error=error)
    return data


def check_depth(data: Any, where: str, *, error: type[SplitterError] = InputFileError) -> None:
    """Raise ``error`` when lists/dicts in ``data`` nest deeper than :data:`MAX_DEPTH`, or a key
    or string holds a NUL character.

    Walks iteratively (an explicit stack), so the check itself cannot overflow Python's stack.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str) and "\0" in item:
            raise error(_nul(where, item))
        if not isinstance(item, dict | list):
            continue
        bad_key = next((k for k in item if isinstance(k, str) and "\0" in k), None)
        if isinstance(item, dict) and bad_key is not None:
            raise error(_nul(where, bad_key))
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            raise error(_too_deep(where))
        stack.extend((child, depth + 1) for child in children)


def _nul(where: str, text: str) -> str:
    """A NUL character (``\\u0000``) in a JSON string: no name, path or text splitter reads may
    hold one (C strings and file names end at it)."""
    return f"{where}: the string {text[:40]!a} contains a NUL character (\\u0000); remove it"


def _too_deep(where: str) -> str:
    return f"{where}: nested deeper than {MAX_DEPTH} levels; flatten the document"


def _check_stat(
    p: Path, st: os.stat_result, what: str, max_bytes: int, error: type[SplitterError]
) -> None:
    """Refuse anything but a regular file of at most ``max_bytes``."""
    if not stat.S_ISREG(st.st_mode):
        raise error(
            f"{p}: the {what} is {_kind(st.st_mode)}, not a regular file; "
            "give the path of a regular file"
        )
    if st.st_size > max_bytes:
        raise error(
            f"{p}: the {what} is {st.st_size} bytes, above the limit of {max_bytes} bytes; "
            "give a smaller file"
        )


def _kind(mode: int) -> str:
    """``a directory``, ``a FIFO (named pipe)``, ``a character device``... for ``mode``."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _read_bounded(fd: int, p: Path, what: str, max_bytes: int, error: type[SplitterError]) -> bytes:
    """Read ``fd`` to its end, refusing more than ``max_bytes`` (the file may grow meanwhile)."""
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, _CHUNK):
        total += len(chunk)
        if total > max_bytes:
            raise error(
                f"{p}: the {what} is above the limit of {max_bytes} bytes; give a smaller file"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def read_npy(path: str | Path) -> np.ndarray:
    """The single array of the ``.npy`` file ``path`` (no pickles, at most
    :data:`ARRAY_MAX_BYTES`); an ``.npz`` archive or anything else is an :class:`InputFileError`.
    """
    data = read_input_file(path, ".npy input", ARRAY_MAX_BYTES)
    if data.startswith(b"PK\x03\x04"):
        raise InputFileError(
            f"{path}: is an .npz archive, not a .npy array; save one array with numpy.save"
        )
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError, SyntaxError...
        raise InputFileError(
            f"{path}: cannot read .npy input ({' '.join(str(exc).split())[:120]}); "
            "save it with numpy.save"
        ) from None
    if not isinstance(array, np.ndarray):
        raise InputFileError(f"{path}: not a .npy array; save one array with numpy.save")
    return array


def read_npz(path: str | Path, what: str = "labelled data") -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive ``path`` by name (no pickles; the archive and the sum
    of its arrays' uncompressed sizes at most :data:`ARRAY_MAX_BYTES`, so no zip bomb)."""
    import zipfile

    data = read_input_file(path, what, ARRAY_MAX_BYTES)
    fix = "save it with numpy.savez(path, x=inputs, y=labels)"
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
        if sum(i.file_size for i in infos) > ARRAY_MAX_BYTES:
            raise InputFileError(
                f"{path}: {what} holds more than {ARRAY_MAX_BYTES >> 20} MiB of arrays; "
                "use a smaller set"
            )
        out = {}
        for info in infos:
            name = info.filename.removesuffix(".npy")
            array = np.load(io.BytesIO(archive.read(info)), allow_pickle=False)
            if not isinstance(array, np.ndarray):
                raise ValueError(f"member {name} is not an array")
            out[name] = array
    except InputFileError:
        raise
    except Exception as exc:  # zipfile and numpy raise many kinds
        raise InputFileError(
            f"{path}: cannot read the {what} as .npz ({' '.join(str(exc).split())[:120]}); {fix}"
        ) from None
    return out
