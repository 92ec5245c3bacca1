"""The documentation site builds with warnings as errors (``mkdocs build --strict``).

A broken link or anchor, a page left out of the navigation, a docstring mkdocstrings cannot read
or a CLI command mkdocs-click cannot render fails here. Nothing is fetched (``mkdocs.yml``).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mkdocs(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # not -q: mkdocs 1.6 then drops the warnings before --strict counts them
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
           "-d", str(tmp_path / "site")]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_docs_build_strictly(tmp_path: Path) -> None:
    """The site builds without a warning; the CLI and API references hold every command and
    every public name."""
    proc = _mkdocs(tmp_path, ROOT / "mkdocs.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    cli = (site / "reference" / "cli.html").read_text()
    from splitter.cli import COMMANDS

    for name in COMMANDS:
        assert f'id="splitter-{name}"' in cli, name
    api = (site / "reference" / "api.html").read_text()
    for name in ("plan", "compile_model", "CompileOptions", "load_chain", "load_boards"):
        assert f"{name}" in api, name
    index = html.unescape(re.sub(r"<[^>]+>", "", (site / "index.html").read_text()))
    assert "splitter run out --input x.npy --emulate" in index  # the README's quick start


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """--strict is really on: the same site with one page linking to a missing page fails."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nsee [nowhere](missing.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\ndocs_dir: docs\nstrict: true\ntheme:\n  name: material\n")
    proc = _mkdocs(tmp_path, config)
    assert proc.returncode != 0
    assert "missing.md" in proc.stdout + proc.stderr


def test_public_api_names_resolve() -> None:
    """``splitter.<name>`` is the object of the module it lives in, for every name of
    ``__all__`` (loaded on first use)."""
    import importlib

    import splitter

    for name, module in splitter._EXPORTS.items():
        assert getattr(splitter, name) is getattr(importlib.import_module(module), name)
    assert set(splitter.__all__) == {"__version__", *splitter._EXPORTS}


def test_what_the_quick_start_leaves_is_ignored_by_git() -> None:
    """The README's quick start writes ``out/`` and ``x.npy``, its Python example ``out-py/``:
    none of them shows up in ``git status`` of the clone (issue 43, item 8)."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    for path, written in (("out/", "-o out "), ("out-py/", '"out-py"'), ("x.npy", "'x.npy'")):
        assert written in readme, f"the README no longer writes {path}: update this test"
        probe = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-q", "--no-index", path], check=False
        )
        assert probe.returncode == 0, f"{path} is not in .gitignore"
