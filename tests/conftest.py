"""Shared test settings: progress display off (``splitter/cli/progress.py``), so a command's
stderr is exactly its error line; ``tests/test_cli_progress.py`` turns it on where it checks it.

The firmware builds of the suite go through ccache when it is installed (``make system-deps``
installs it; ``SPLITTER_TEST_CCACHE=0`` turns it off): every device project compiles the same
kernel library and runtime sources (~4 s of arm-none-eabi-gcc per device), and ccache runs the
real compiler once per distinct preprocessed source and flags, then hands the later builds the
identical object. The cache lives for one run (a temporary directory the xdist workers share,
removed at the end), so every run still compiles everything at least once.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SPLITTER_PROGRESS", "off")

#: the compilers run through ccache (masquerade: a symlink named like the compiler, first on PATH)
CACHED_COMPILERS = ("arm-none-eabi-gcc",)


def pytest_configure(config: pytest.Config) -> None:
    """In the main process (the xdist workers inherit its environment): ccache on PATH."""
    if hasattr(config, "workerinput") or os.environ.get("SPLITTER_TEST_CCACHE") == "0":
        return
    ccache = shutil.which("ccache")
    if ccache is None or "SPLITTER_TEST_CCACHE_DIR" in os.environ:
        return
    root = Path(tempfile.mkdtemp(prefix="splitter-ccache-"))
    (root / "bin").mkdir()
    for name in CACHED_COMPILERS:
        if shutil.which(name) is not None:
            (root / "bin" / name).symlink_to(ccache)
    os.environ["SPLITTER_TEST_CCACHE_DIR"] = str(root)
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["CCACHE_DIR"] = str(root / "cache")
    # the device projects differ in directory only: do not hash it (-g records it; the ELFs'
    # loaded bytes do not depend on it), and take the headers written just before `make`
    os.environ["CCACHE_NOHASHDIR"] = "1"
    os.environ["CCACHE_SLOPPINESS"] = "include_file_mtime,include_file_ctime"
    config.add_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))
