"""``splitter plan``: the thesis's reference cases through the CLI, JSON shape, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from partition_helpers import CASES, case_boards_toml, profile_csv

from splitter.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXACT = {
    "latency": ("fs", "bnb", "dp", "cpsat", "auto"),
    "throughput": ("fs", "bnb", "cpsat", "auto"),
}
FS_FITS = {"kws_cnn", "tiny_cnn"}  # 2^30 candidates of mobilenet exceed the full-search limit


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``splitter`` in-process through its real entry point; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


@pytest.fixture(scope="module")
def case_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("cases")
    files = {}
    for case in CASES:
        profile = base / f"{case['model']}.csv"
        profile.write_text(profile_csv(case["model"]))
        boards = base / f"{case['model']}.toml"
        boards.write_text(case_boards_toml(case))
        files[case["model"]] = (profile, boards)
    return files


PARAMS = [
    (case["model"], objective, solver)
    for case in CASES
    for objective in ("latency", "throughput")
    for solver in EXACT[objective]
    if solver != "fs" or case["model"] in FS_FITS
]


@pytest.mark.parametrize(("model", "objective", "solver"), PARAMS)
def test_reference_case_through_cli(
    capsys: pytest.CaptureFixture[str], case_files, model: str, objective: str, solver: str
) -> None:
    case = next(c for c in CASES if c["model"] == model)
    profile, boards = case_files[model]
    code, out, err = run_cli(
        capsys, "plan", str(profile), "--target", str(boards), "--objective", objective,
        "--solver", solver, "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    if objective == "latency":
        assert data["latency_s"] == pytest.approx(case["latency_s"], rel=1e-6)
    else:
        assert data["throughput_per_s"] == pytest.approx(case["throughput_per_s"], rel=1e-6)
    want = [[dev, first, last] for dev, _, first, last in case[f"{objective}_submodels"]]
    got = [[s["device_index"], s["first"], s["last"]] for s in data["submodels"]]
    assert got == want
    assert [s["mcu"] for s in data["submodels"]] == [
        m for _, m, _, _ in case[f"{objective}_submodels"]
    ]
    assert data["optimal"] is True and data["objective"] == objective
    for key in ("schema", "solver", "nodes", "throughput_ref9_per_s", "latency_s"):
        assert key in data
    assert data["nodes"] > 0


def test_ds_through_cli_is_not_claimed_optimal(capsys, case_files) -> None:
    profile, boards = case_files["tiny_cnn"]
    code, out, _ = run_cli(
        capsys, "plan", str(profile), "--target", str(boards), "--objective", "throughput",
        "--solver", "ds", "--json",
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0 and data["optimal"] is False
    assert data["throughput_per_s"] < 0.341194  # thesis: DS misses this optimum


def test_human_output_lists_submodels(capsys, case_files) -> None:
    profile, boards = case_files["kws_cnn"]
    code, out, _ = run_cli(capsys, "plan", str(profile), "--target", str(boards))
    assert code == 0
    assert "STM32L433RC" in out and "STM32L412KB" in out and "proved optimal" in out
    assert "0.822190" in out


def test_non_adjacent_submodels_on_one_device(capsys, case_files) -> None:
    profile, _ = case_files["kws_cnn"]
    target = ROOT / "models" / "boards" / "three_small_middle.toml"
    code, out, _ = run_cli(capsys, "plan", str(profile), "--target", str(target), "--json")
    data = json.loads(out)
    devices = [s["device"] for s in data["submodels"]]
    assert code == 0 and len(devices) > len(set(devices))


def _bad(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


BAD_BOARDS = [
    ('[[device]]\nname = "a"\nmcu = "STM32F4O1RE"\n', "did you mean STM32F411RE, STM32F401RE"),
    (
        '[[device]]\nname = "a"\nmcu = "STM32L433RC"\n'
        '[[device]]\nname = "a"\nmcu = "STM32L412KB"\n',
        "unique",
    ),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "75 %"\n', "75 %"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "-1 MiB"\n', "-1 MiB"),
    ('[link]\nbaud = 0\n[[device]]\nname = "a"\nmcu = "STM32F401RE"\n', "baud"),
    ("[link]\nbaud = 115200\n", "device"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nextra = 1\n', "'extra'"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_BOARDS)
def test_bad_board_file_through_cli(capsys, case_files, tmp_path, text: str, needle: str) -> None:
    profile, _ = case_files["kws_cnn"]
    target = _bad(tmp_path, text)
    code, out, err = run_cli(capsys, "plan", str(profile), "--target", str(target))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(target) in err and needle in err


def test_layer_fitting_no_device_is_explained(capsys, case_files, tmp_path) -> None:
    profile, _ = case_files["kws_cnn"]  # a 120 KiB dense layer
    target = _bad(tmp_path, '[[device]]\nname = "a"\nmcu = "STM32F401RB"\nflash = "64 KiB"\n')
    code, _, err = run_cli(capsys, "plan", str(profile), "--target", str(target))
    assert code == 2 and err.count("\n") == 1
    assert "not enough flash" in err or "more than any device" in err
    assert "short by" in err and str(target) in err


def test_ram_constraint_explained(capsys, tmp_path) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text(
        "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"
        "Input,1x1x1,1x1x1,0,1,0\nConv,1x1x1,8x8x8,1,300,10\n"
    )
    target = _bad(tmp_path, '[[device]]\nname = "a"\nmcu = "STM32F446RE"\n')
    code, _, err = run_cli(capsys, "plan", str(profile), "--target", str(target))
    assert code == 2
    assert "more than any device" in err and "layer 1 (Conv)" in err
    assert 'what plans: mcu = "' in err  # the smallest catalog part with the RAM


def test_plan_subprocess_exit_code(case_files, tmp_path) -> None:
    """The installed entry point: exit 2, one line on stderr, no traceback."""
    profile, _ = case_files["kws_cnn"]
    target = _bad(tmp_path, '[[device]]\nname = "a"\nmcu = "NOPE"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "plan", str(profile), "--target", str(target)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and "NOPE" in proc.stderr


@pytest.mark.parametrize("solver", ["auto", "fs", "ds", "bnb", "dp", "cpsat"])
def test_time_limit_is_accepted_by_every_solver(
    capsys: pytest.CaptureFixture[str], case_files, solver: str
) -> None:
    """``--time-limit`` with any solver (auto picks fs here): a plan, never a TypeError."""
    profile, boards = case_files["kws_cnn"]
    code, out, err = run_cli(
        capsys, "plan", str(profile), "--target", str(boards), "--objective", "latency",
        "--solver", solver, "--time-limit", "5", "--json",
    )  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)
    assert plan["submodels"] and plan["latency_s"] > 0
    assert plan["optimal"] is (solver != "ds")
