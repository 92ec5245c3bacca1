"""Run the examples of the README and the docs and compare their shown output.

A ```` ```console ```` block holds commands (lines starting ``$ ``), each followed by the output
it prints (stdout and stderr together). In the shown output ``...`` stands for any text,
including several lines; the path of the working directory and of the repository are removed
from what a command prints, so ``wrote out`` is shown for ``wrote /tmp/.../out``. A
```` ```python ```` block is run as a script in the same directory and must not fail. Blocks of
one file run in order in one fresh directory where ``models``, ``tests`` and ``docs`` are the
repository's (read only by convention). ``make demo`` runs the commands of the Makefile's
``demo`` recipe.

A block that shows commands but is neither (a synopsis with placeholders such as ``OUT``) is a
```` ```text ```` block. :func:`stray_commands` finds untagged blocks that look like commands.

``python tests/docs_examples.py FILE...`` (``make docs-examples``) rewrites the shown output of
every console block whose output no longer matches with what the commands print now; review the
diff and put back the ``...`` you want.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
#: documentation files whose examples run (README.md and every page under docs/)
FILES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
#: environment of the commands: the venv's splitter first on PATH, no progress lines, a fixed
#: terminal width for rich's tables
ENV = {"SPLITTER_PROGRESS": "off", "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


@dataclass
class Step:
    """One command of a console block, the output shown for it, and where it is in the file."""

    command: str
    shown: str
    start: int  # offset of the shown output in the file
    end: int


@dataclass
class Block:
    """A fenced block of a documentation file."""

    lang: str
    body: str
    start: int  # offset of the body in the file
    line: int


def blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` with its language tag."""
    return [
        Block(m.group(1), m.group(2), m.start(2), text.count("\n", 0, m.start()) + 1)
        for m in BLOCK.finditer(text)
    ]


def steps(block: Block) -> list[Step]:
    """The commands of a console block with the output shown after each."""
    out: list[Step] = []
    pos = 0
    lines = block.body.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        pos += len(line)
        i += 1
        if not line.startswith("$ "):
            continue
        command = line[2:].rstrip("\n")
        while command.endswith("\\") and i < len(lines):  # continued line
            command = command[:-1] + lines[i].strip()
            pos += len(lines[i])
            i += 1
        start = pos
        while i < len(lines) and not lines[i].startswith("$ "):
            pos += len(lines[i])
            i += 1
        shown = block.body[start:pos]
        out.append(Step(command, shown, block.start + start, block.start + pos))
    return out


def stray_commands(text: str) -> list[int]:
    """Lines of untagged / shell blocks that start with a command a user would type:
    they must be console blocks (run) or text blocks (synopses)."""
    starts = re.compile(r"^\s*(splitter|make|python) ", re.M)
    return [
        b.line
        for b in blocks(text)
        if b.lang in ("", "sh", "bash", "shell") and starts.search(b.body)
    ]


def demo_commands() -> list[str]:
    """The recipe of the Makefile's ``demo`` target with the venv's tools, echo lines left out."""
    recipe, inside = [], False
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("demo:"):
            inside = True
            continue
        if inside and not line.startswith("\t"):
            break
        if inside and not line.lstrip().startswith("@"):
            recipe.append(line.strip().replace("$(VENV)/bin/", ""))
    return recipe


def run(command: str, cwd: Path) -> str:
    """Run one shown command in ``cwd``; its stdout and stderr, paths of cwd and ROOT removed."""
    return run_rc(command, cwd)[0]


def run_rc(command: str, cwd: Path) -> tuple[str, int]:
    """:func:`run`, and the exit code of the last command."""
    commands = demo_commands() if command == "make demo" else [command]
    env = {**os.environ, **ENV, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    printed, rc = "", 0
    for cmd in commands:
        proc = subprocess.run(
            ["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
        )
        printed += proc.stdout + proc.stderr
        rc = proc.returncode
    for path in (str(cwd.resolve()), str(cwd), str(ROOT)):
        printed = printed.replace(path + "/", "").replace(path, ".")
    text = "\n".join(line.rstrip() for line in printed.splitlines())
    return text + ("\n" if text else ""), rc


def matches(shown: str, printed: str) -> bool:
    """``printed`` is ``shown`` with each ``...`` standing for any text (lines included)."""
    norm = "\n".join(line.rstrip() for line in shown.splitlines()).strip("\n")
    parts = [re.escape(p) for p in norm.split("...")]
    return re.fullmatch(".*?".join(parts), printed.strip("\n"), re.S) is not None


def workdir(tmp: Path) -> Path:
    """A fresh directory with the repository's ``models``, ``tests`` and ``docs`` linked in."""
    for name in ("models", "tests", "docs"):
        (tmp / name).symlink_to(ROOT / name)
    return tmp


def check_file(name: str, tmp: Path) -> list[str]:
    """Run every example of one file in order; the mismatches (command, shown, printed)."""
    text = (ROOT / name).read_text()
    cwd = workdir(tmp)
    failures = []
    for block in blocks(text):
        if block.lang == "python":
            script = cwd / "example.py"
            script.write_text(block.body)
            out, rc = run_rc(f"python {script.name}", cwd)
            if rc != 0:
                failures.append(f"{name}:{block.line}: python block failed:\n{out}")
        elif block.lang == "console":
            for step in steps(block):
                printed = run(step.command, cwd)
                if not matches(step.shown, printed):
                    failures.append(
                        f"{name}:{block.line}: $ {step.command}\n--- shown\n{step.shown}"
                        f"--- printed\n{printed}"
                    )
    return failures


def regenerate(name: str, tmp: Path) -> int:
    """Rewrite the shown output of the console steps of ``name`` that do not match; how many."""
    path = ROOT / name
    text = path.read_text()
    cwd = workdir(tmp)
    edits = []
    for block in blocks(text):
        if block.lang == "python":
            (cwd / "example.py").write_text(block.body)
            run("python example.py", cwd)
        elif block.lang == "console":
            for step in steps(block):
                printed = run(step.command, cwd)
                if not matches(step.shown, printed):
                    edits.append((step.start, step.end, printed))
    for start, end, printed in reversed(edits):
        text = text[:start] + printed + text[end:]
    path.write_text(text)
    return len(edits)


if __name__ == "__main__":
    import tempfile

    for arg in sys.argv[1:] or FILES:
        with tempfile.TemporaryDirectory(prefix="splitter-docs-") as d:
            print(f"{arg}: {regenerate(arg, Path(d))} block(s) rewritten")
