"""Every command shown in the README and the docs runs, and prints what the page shows
(``tests/docs_examples.py`` says how a page shows commands and output; ``make docs-examples``
rewrites drifted output for review as a diff)."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_examples import (
    FILES,
    ROOT,
    Block,
    blocks,
    check_file,
    matches,
    stray_commands,
)

#: pages whose examples build firmware or boot QEMU (the README's quick start and make demo)
SLOW = {"README.md"}


def _has_examples(name: str) -> bool:
    return any(b.lang in ("console", "python") for b in blocks((ROOT / name).read_text()))


def _param(name: str) -> object:
    marks = [pytest.mark.slow, pytest.mark.toolchain, pytest.mark.qemu] if name in SLOW else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(n) for n in FILES if _has_examples(n)])
def test_examples_print_what_the_page_shows(name: str, tmp_path: Path) -> None:
    failures = check_file(name, tmp_path)
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("name", FILES)
def test_every_command_is_run_or_a_synopsis(name: str) -> None:
    """A block that shows commands is a console block (run here) or a text block (a synopsis
    with placeholders); an untagged or shell block of commands would go unchecked."""
    lines = stray_commands((ROOT / name).read_text())
    assert not lines, f"{name}: command blocks at lines {lines}: tag them console or text"


def test_synopsis_blocks_have_placeholders() -> None:
    """A text block of commands stands for a form, not a command to copy: it has a placeholder
    (an upper-case word such as OUT or MODEL, or [options])."""
    for name in FILES:
        for block in blocks((ROOT / name).read_text()):
            cmds = [ln for ln in block.body.splitlines() if ln.startswith("splitter ")]
            if block.lang == "text" and cmds:
                assert all("[" in c or any(w.isupper() for w in c.split()) for c in cmds), (
                    f"{name}:{block.line}: a runnable command in a text block: make it console"
                )


def test_ellipsis_matching() -> None:
    """``...`` stands for any text, lines included; everything else must be equal."""
    assert matches("wrote out\n...\nbuilt 2\n", "wrote out\na\nb\nbuilt 2\n")
    assert matches("latency ... ms\n", "latency 12.5 ms\n")
    assert not matches("latency 1 ms\n", "latency 2 ms\n")
    assert not matches("a\nb\n", "a\n")
    assert blocks("```console\n$ x\ny\n```\n") == [Block("console", "$ x\ny\n", 11, 1)]
