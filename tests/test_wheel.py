"""What users install is what is tested: the wheel built from the checkout, installed into a
clean virtual environment, compiles and builds a shipped model from a folder outside the
checkout, and holds only the ``splitter`` package.

The wheel is built from a copy of the tracked files (``git ls-files``), so the build never
writes into the checkout other tests read. The new environment is clean of splitter: it has
no editable install and no path to the checkout; it reaches the already-installed third-party
dependencies (onnxruntime, ortools, ...) through one ``.pth`` line naming the test
environment's ``site-packages`` (a ``.pth`` line only extends ``sys.path``: the editable
install's finder there is never run), so the test needs no download.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]


def _tracked_copy(dest: Path) -> Path:
    """The tracked files of the checkout (with their working-tree content) under ``dest``."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel`` builds from a copy of the checkout."""
    src = _tracked_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(src),
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("splitter-*.whl")
    return built


@pytest.fixture(scope="module")
def clean_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the wheel installed (no dependencies fetched: see the module doc)."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=False)
    (purelib,) = (env / "lib").glob("python3*/site-packages")
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (purelib / "test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return env


def test_the_wheel_holds_only_the_splitter_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"splitter"}
    for data in (
        "splitter/cost/code_sizes.json",
        "splitter/cost/kernel_costs.json",
        "splitter/hardware/catalog.toml",
        "splitter/firmware_templates/runtime.c",
        "splitter/firmware_templates/main.c.j2",
        "splitter/firmware_templates/kernels/kernels_q8_opt.c",
    ):
        assert data in names, data


def test_the_installed_wheel_compiles_and_builds_outside_the_checkout(
    clean_env: Path, tmp_path: Path
) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(ROOT / "models" / "tiny_cnn.onnx", work)
    shutil.copy(ROOT / "models" / "boards" / "e2e_tiny2.toml", work / "boards.toml")
    exe = clean_env / "bin" / "splitter"
    # nothing may lead the installed package back to the checkout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = subprocess.run(
        [clean_env / "bin" / "python", "-c", "import splitter; print(splitter.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(clean_env), where
    for args in (
        ["compile", "tiny_cnn.onnx", "--target", "boards.toml", "-o", "out"],
        ["build", "out", "--no-emulator"],
    ):
        done = subprocess.run([exe, *args], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    elfs = sorted((work / "out" / "firmware").glob("*/build/*/firmware.elf"))
    assert elfs, sorted(p.name for p in (work / "out" / "firmware").rglob("*"))
