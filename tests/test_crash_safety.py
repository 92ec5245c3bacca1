"""Crash safety, proven by killing: ``compile`` (with firmware), ``segment`` and ``build`` are
ended abruptly at their file operations and by SIGKILL at several moments, and each time
``OUT`` must be byte for byte the previous output or the complete new one
(``tests/crash_support.py``).

The suite runs a sample of the points (a dozen crash points of ``compile``, a few of
``segment`` and ``build``, timed kills); ``benchmarks/kill_test.py`` runs every point and more
timed kills (results in ``benchmarks/results/kill_test.md``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from crash_support import Sweep, run_forked, spread

from splitter import outputs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _ccache_keyed_by_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's ccache (``conftest.py``) shares objects across directories
    (``CCACHE_NOHASHDIR``), and an object compiled with ``-g`` carries the directory it was
    first compiled in: a build here could then take, between its reference run and a kill
    point, objects naming another test's directory, and ``OUT`` would differ from the reference
    by those bytes alone (seen once in CI as a "torn" build). Keyed by directory, the runs of
    one sweep share only their own objects."""
    monkeypatch.delenv("CCACHE_NOHASHDIR", raising=False)


MODEL = str(ROOT / "models" / "tiny_cnn.onnx")
BOARDS = str(ROOT / "models" / "boards" / "e2e_tiny2.toml")
ONE_BOARD = '[link]\nbaud = 115200\n[[device]]\nname = "f4"\nmcu = "STM32F405RG"\n'


def compile_sweep(tmp: Path) -> Sweep:
    """``compile`` with firmware over a previous output compiled without firmware."""
    out, previous = tmp / "out", tmp / "previous"
    assert (
        run_forked(["compile", MODEL, "--target", BOARDS, "-o", str(previous), "--no-firmware"])
        == 0
    )
    return Sweep("compile", ["compile", MODEL, "--target", BOARDS, "-o", str(out)], out, previous)


def segment_sweep(tmp: Path) -> Sweep:
    """``segment -o`` over a previous segment output with a smaller segment memory."""
    board = tmp / "one.toml"
    board.write_text(ONE_BOARD)
    out, previous = tmp / "seg", tmp / "seg-previous"
    base = ["segment", MODEL, "--target", str(board)]
    assert run_forked([*base, "--segment-memory", "60 KiB", "-o", str(previous)]) == 0
    return Sweep("segment", [*base, "--segment-memory", "80 KiB", "-o", str(out)], out, previous)


def build_sweep(tmp: Path) -> Sweep:
    """``build --no-emulator`` of a fresh compile output (the previous ``OUT``: not built)."""
    out, previous = tmp / "built", tmp / "built-previous"
    assert run_forked(["compile", MODEL, "--target", BOARDS, "-o", str(previous)]) == 0
    return Sweep("build", ["build", str(out), "--no-emulator"], out, previous)


def emulate_sweep(tmp: Path) -> Sweep:
    """``emulate`` of a compiled, never built ``OUT``: it builds the emulator firmware first
    (in a staged copy, as ``build`` does), then boots the boards for a moment."""
    out, previous = tmp / "emu", tmp / "emu-previous"
    assert run_forked(["compile", MODEL, "--target", BOARDS, "-o", str(previous)]) == 0
    return Sweep("emulate", ["emulate", str(out), "--duration", "0.1"], out, previous)


def check(sweep: Sweep, k: int, delays: list[float]) -> None:
    """Run ``k`` crash points spread over the command's file operations and the timed kills;
    every ``OUT`` is the previous or the new one."""
    sweep.reference()
    for n in spread(sweep.points, k):
        outcome = sweep.kill(f"op {n}", crash_at=n)
        assert outcome.code == outputs.CRASH_EXIT, f"{sweep.name} op {n}: exit {outcome.code}"
    for t in delays:
        sweep.kill(f"{t:.2f} s", kill_after=t)
    torn = [o for o in sweep.outcomes if o.state == "torn"]
    assert not torn, f"{sweep.name}: OUT torn at {[o.point for o in torn]}"
    states = {o.state for o in sweep.outcomes}
    assert "previous" in states, f"{sweep.name}: no kill point left the previous output"


def test_compile_killed_between_file_operations(tmp_path: Path) -> None:
    sweep = compile_sweep(tmp_path)
    check(sweep, 12, [0.4])
    assert sweep.points >= 60  # plan.json, sub-models, reports, two firmware projects
    assert sweep.outcomes[11].state == "new"  # a crash after the swap: the new output


def test_segment_killed_between_file_operations(tmp_path: Path) -> None:
    check(segment_sweep(tmp_path), 6, [])


@pytest.mark.toolchain
def test_build_killed_between_file_operations_and_during_make(tmp_path: Path) -> None:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("arm-none-eabi-gcc missing; install: make system-deps")
    sweep = build_sweep(tmp_path)
    check(sweep, 6, [0.5])
    assert sweep.points >= 4  # the build lists, the flush and the swap


@pytest.mark.toolchain
@pytest.mark.qemu
def test_emulate_killed_while_it_builds_the_emulator_firmware(tmp_path: Path) -> None:
    """``emulate`` (and ``run`` / ``bench --emulate``) build a missing emulator ELF before
    booting; killed during that build, OUT is the previous or the new output, never a torn ELF
    a later ``make`` would take as up to date (it built in place before)."""
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.fail("arm-none-eabi-gcc or qemu-system-arm missing; install: make system-deps")
    sweep = emulate_sweep(tmp_path)
    check(sweep, 4, [0.5])
    assert sweep.points >= 4


def test_swap_never_leaves_out_missing(tmp_path: Path) -> None:
    """The previous ``OUT`` and the new one trade names in one step (renameat2), so no
    instant exists without ``OUT`` (the two-rename swap had one between its renames)."""
    old, new = tmp_path / "out", tmp_path / "new"
    old.mkdir()
    (old / "a").write_text("old")
    new.mkdir()
    (new / "a").write_text("new")
    assert outputs.exchange(new, old)
    assert (old / "a").read_text() == "new" and (new / "a").read_text() == "old"
