"""The atomic output directory: swap into place, marker, refusals, and disk-full safety."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import splitter.outputs as outputs
from splitter.errors import OutputError
from splitter.outputs import MARKER, OutputDir


def _write(out: Path, text: str, force: bool = False) -> Path:
    with OutputDir(out, force=force) as w:
        w.write_text("plan.json", text)
        w.write_bytes("submodels/00_a.onnx", b"x" * 1000)
    return out


def _leftovers(parent: Path, name: str) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


def test_writes_marker_and_replaces_its_own_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "m-split"
    _write(out, "one")
    (out / "stale.txt").write_text("from the first run")
    _write(out, "two")
    assert (out / "plan.json").read_text() == "two"
    assert (out / MARKER).read_text().startswith("splitter ")
    assert not (out / "stale.txt").exists()  # replaced as a whole, not merged
    assert _leftovers(tmp_path, "m-split") == []
    assert oct((out).stat().st_mode & 0o777) == oct(0o777 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_foreign_directory_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "precious.txt").write_text("keep")
    with pytest.raises(OutputError, match=r"not written by splitter.*--force"):
        _write(out, "x")
    assert (out / "precious.txt").read_text() == "keep"
    _write(out, "x", force=True)
    assert (out / "plan.json").exists() and not (out / "precious.txt").exists()


def test_empty_existing_directory_is_used(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    _write(out, "x")
    assert (out / "plan.json").read_text() == "x"


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("a file")
    with pytest.raises(OutputError, match="is a file"):
        _write(out, "x")
    assert out.read_text() == "a file"


def _unwritable_parent(tmp_path: Path) -> Path:
    """A directory this process cannot create entries in (root ignores mode bits: use /sys)."""
    if os.geteuid() == 0:
        return Path("/sys")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked


def test_unwritable_parent_is_refused(tmp_path: Path) -> None:
    parent = _unwritable_parent(tmp_path)
    with pytest.raises(OutputError, match=r"not writable|cannot create") as info:
        _write(parent / "splitter-out-test", "x")
    assert "\n" not in str(info.value)


def test_disk_full_mid_write_keeps_the_previous_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _write(tmp_path / "m-split", "previous")
    calls = {"n": 0}
    real_write = os.write

    def write_until_full(fd: int, data: memoryview) -> int:
        calls["n"] += 1
        if calls["n"] >= 2:  # the first file fits, the disk fills during the second
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data[:100])  # short writes, as the OS may do

    monkeypatch.setattr(outputs, "_os_write", write_until_full)
    with pytest.raises(OutputError, match=r"No space left on device.*free disk space"):
        _write(out, "new")
    assert (out / "plan.json").read_text() == "previous"
    assert (out / "submodels" / "00_a.onnx").stat().st_size == 1000
    assert _leftovers(tmp_path, "m-split") == []


def test_exception_inside_the_block_discards_the_new_output(tmp_path: Path) -> None:
    out = _write(tmp_path / "m-split", "previous")
    with pytest.raises(RuntimeError), OutputDir(out) as w:
        w.write_text("plan.json", "half")
        raise RuntimeError("validation failed")
    assert (out / "plan.json").read_text() == "previous"
    assert _leftovers(tmp_path, "m-split") == []
