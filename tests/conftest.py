"""Shared test settings: progress display off (``splitter/cli/progress.py``), so a command's
stderr is exactly its error line; ``tests/test_cli_progress.py`` turns it on where it checks it.

The firmware builds of the suite go through ccache when it is installed (``make system-deps``
installs it; ``SPLITTER_TEST_CCACHE=0`` turns it off): every device project compiles the same
kernel library and runtime sources (~4 s of arm-none-eabi-gcc per device), and ccache runs the
real compiler once per distinct preprocessed source and flags, then hands the later builds the
identical object. The cache lives for one run (a temporary directory the xdist workers share,
removed at the end), so every run still compiles everything at least once.

Modules holding a slow, QEMU or toolchain test run first (:func:`pytest_collection_modifyitems`)
and pytest-xdist distributes by work stealing (``--dist worksteal`` in pyproject.toml): a run
then ends on short tests, not with one worker alone on a long one.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("SPLITTER_PROGRESS", "off")

#: the compilers run through ccache (masquerade: a symlink named like the compiler, first on PATH);
#: the host gcc for the kernel objects the host tests link (``test_codegen_support``), which each
#: xdist worker compiles once, from the same sources and flags
CACHED_COMPILERS = ("arm-none-eabi-gcc", "gcc")


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


#: markers of the tests that take seconds (QEMU, arm-none-eabi-gcc, large models)
HEAVY_MARKERS = ("slow", "qemu", "toolchain")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with a heavy test first; each module stays whole (its module fixtures are set up
    once per worker) and the order is otherwise the collection's. Every xdist worker sorts the
    same collection the same way, as the scheduler requires."""
    heavy = {
        item.nodeid.split("::")[0]
        for item in items
        if any(item.get_closest_marker(m) for m in HEAVY_MARKERS)
    }
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in heavy)
