"""Calibration mechanics without a bench: NNLS, per-part fits, refusals, the board file's tables,
and which calibration a plan uses (emulated factors never reach a prediction of real boards)."""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter.bench.calibrate import (
    CalibrationRefused,
    Measured,
    bench_kind,
    calibrated_text,
    check_fit,
    check_real,
    fit_all,
    fit_part,
    nnls,
)
from splitter.cli import main
from splitter.errors import BoardFileError
from splitter.hardware.boards import boards_from_dict, for_prediction, load_boards
from splitter.ir import LayerCost
from splitter.partition.problem import layer_time as compute_seconds

ROOT = Path(__file__).resolve().parents[1]
BOARDS = ROOT / "models" / "boards"
F405 = "STM32F405RG"
#: The catalog F405's cycles per MAC: the uncalibrated estimate is MAC * 9.
CPM = 9.0


def brute_nnls(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest residual over every support set whose unconstrained solution is >= 0."""
    best = float(np.linalg.norm(b))
    n = a.shape[1]
    for k in range(1, n + 1):
        for cols in itertools.combinations(range(n), k):
            x = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (x >= -1e-12).all():
                best = min(best, float(np.linalg.norm(a[:, cols] @ x - b)))
    return best


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_nnls_matches_brute_force(m: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1e6, (m, n))
    b = rng.normal(0, 1e6, m)
    x = nnls(a, b)
    assert (x >= 0).all()
    got = float(np.linalg.norm(a @ x - b))
    assert got <= brute_nnls(a, b) * (1 + 1e-7) + 1e-6


def test_nnls_recovers_a_nonnegative_solution() -> None:
    a = np.array([[1e5, 2e4, 0], [3e5, 0, 1e3], [0, 5e4, 2e3], [2e5, 1e5, 0]], dtype=float)
    truth = np.array([0.7, 0.45, 1.3])
    assert np.allclose(nnls(a, a @ truth), truth, rtol=1e-9)


def sub(index: int, factors: dict[str, float], runs: int = 1, **macs: int) -> dict[str, Any]:
    """A bench.json sub-model whose cycles are ``sum_c factors_c * MAC_c * CPM``."""
    cycles = sum(factors[c] * m * CPM for c, m in macs.items())
    return {"index": index, "cycles": [cycles] * runs, "macs": sum(macs.values()),
            "macs_by_class": macs}  # fmt: skip


def bench(emulated: bool, **devices: list[dict[str, Any]]) -> dict[str, Any]:
    clock = 168e6
    return {
        "emulated": emulated,
        "devices": [
            {"device": name, "part": F405, "clock_hz": clock, "submodels": subs}
            for name, subs in devices.items()
        ],
    }


def f405s(*names: str, extra: str = "") -> Any:
    text = '[link]\nbaud = 115200\n' + "".join(
        f'[[device]]\nname = "{n}"\nmcu = "{F405}"\n' for n in names
    ) + extra  # fmt: skip
    return boards_from_dict(tomllib.loads(text))


TRUE = {"conv": 0.05, "depthwise": 0.09, "dense": 0.04}


def test_identical_parts_get_identical_factors_per_class_when_identified() -> None:
    b = bench(
        True,
        x=[sub(0, TRUE, conv=1000, depthwise=300), sub(3, TRUE, dense=500)],
        y=[sub(1, TRUE, conv=400, dense=2000)],
        z=[sub(2, TRUE, depthwise=50, dense=70)],
    )
    (fit,) = fit_all(b, f405s("x", "y", "z"), 10.0, "bench.json", "emulated")
    assert fit.part == F405 and fit.devices == ["x", "y", "z"]
    assert fit.by_class == pytest.approx(TRUE, rel=1e-9)
    assert "per-class NNLS over 4 sub-model(s) on 3 device(s)" in fit.method
    assert fit.error_pct == pytest.approx(0.0, abs=1e-6)  # 4 equations, 3 unknowns: checked
    assert not fit.exact


def test_one_factor_when_the_classes_are_not_identified_and_it_says_why() -> None:
    b = bench(True, x=[sub(0, TRUE, conv=1000, depthwise=300)])
    (fit,) = fit_all(b, f405s("x"), 10.0, "bench.json", "emulated")
    assert fit.by_class == {} and fit.exact and fit.error_pct is None
    assert "one factor for all classes" in fit.method and "1 independent equation" in fit.method
    assert "exact, not checkable" in fit.fit_text
    assert fit.predicted(fit.subs[0]) == pytest.approx(fit.subs[0].cycles)


def test_identical_parts_disagreeing_are_refused() -> None:
    """Two F405s: one factor cannot explain both (0.05 vs 0.09 per MAC), the classes are not
    identifiable from two sub-models of three classes."""
    b = bench(
        True,
        x=[sub(0, TRUE, conv=1000, dense=10)],
        y=[sub(1, TRUE, depthwise=1000, conv=10, dense=5)],
    )
    with pytest.raises(CalibrationRefused, match=r"devices \w and \w are both STM32F405RG"):
        fit_all(b, f405s("x", "y"), 10.0, "bench.json", "emulated")
    fits = fit_all(b, f405s("x", "y"), 200.0, "bench.json", "emulated")  # user accepts it
    assert len(fits) == 1


def test_disagreement_within_noise_is_accepted() -> None:
    """The same disagreement with a large run-to-run spread is not beyond noise."""
    noisy = sub(1, TRUE, depthwise=1000, conv=10, dense=5)
    noisy["cycles"] = [noisy["cycles"][0] * s for s in (0.7, 1.0, 1.3)]
    b = bench(False, x=[sub(0, TRUE, conv=1000, dense=10)], y=[noisy])
    (fit,) = fit_all(b, f405s("x", "y"), 40.0, "bench.json", "real")
    assert fit.noise == pytest.approx(0.6)


def test_residuals_above_the_limit_are_refused() -> None:
    """One device, three sub-models of one class whose cycles per MAC differ by 2x."""
    subs = [sub(k, {"conv": f}, conv=1000) for k, f in enumerate((0.05, 0.1, 0.07))]
    b = bench(True, x=subs)
    with pytest.raises(CalibrationRefused, match=r"miss sub-model \d on x by [+-]\d+\.\d %"):
        fit_all(b, f405s("x"), 10.0, "bench.json", "emulated")


def test_real_calibration_of_emulated_data_is_refused() -> None:
    with pytest.raises(CalibrationRefused, match="emulated calibration, never a real one"):
        bench_kind({"emulated": True}, "real", "bench.json")
    assert bench_kind({"emulated": True}, None, "b") == "emulated"
    emulated_over_ports = bench(False, x=[sub(0, {"conv": 0.05}, conv=1000)])  # 0.45 per MAC
    with pytest.raises(CalibrationRefused, match="fewer than a real Cortex-M can"):
        check_real(emulated_over_ports, "bench.json")
    check_real(bench(False, x=[sub(0, {"conv": 0.2}, conv=1000)]), "bench.json")  # 1.8 per MAC
    assert bench_kind({"emulated": False}, None, "b") == "real"


def test_check_fit_is_quiet_on_consistent_data() -> None:
    m = [Measured(k, "x", 100.0 * (k + 1), 0.0, {"conv": 50.0 * (k + 1)}) for k in range(3)]
    fit = fit_part(F405, "real", m)
    assert fit.factor == pytest.approx(2.0)
    check_fit(fit, 0.1, "b")


def test_benches_of_several_models_pool_per_part() -> None:
    """Two benches of one class each cannot identify two classes; pooled they can (the second
    bench's devices are named after its OUT)."""
    from splitter.bench.calibrate import fit_parts

    one = [Measured(0, "a", 900.0, 0.0, {"conv": 1000.0, "dense": 10.0}),
           Measured(1, "b", 45.0, 0.0, {"conv": 10.0, "dense": 100.0})]  # fmt: skip
    (alone,) = fit_parts({F405: one[:1]}, "emulated", 10.0, "b")
    assert alone.by_class == {}
    two = [*one, Measured(0, "kws/d0", 2000.0, 0.0, {"conv": 2000.0, "dense": 500.0})]
    (pooled,) = fit_parts({F405: two}, "emulated", 10.0, "b1, b2")
    assert set(pooled.by_class) == {"conv", "dense"} and "3 sub-model(s) on 3" in pooled.method


def test_tables_replace_their_old_versions_and_keep_the_rest() -> None:
    text = (BOARDS / "e2e_kws3.toml").read_text()
    b = bench(True, d0=[sub(0, TRUE, conv=1000)], d1=[sub(1, TRUE, conv=2000)])
    fits = fit_all(b, load_boards(BOARDS / "e2e_kws3.toml"), 10.0, "b.json", "emulated")
    once = calibrated_text(text, fits, "b.json")
    twice = calibrated_text(once, fits, "b.json")
    assert once == twice  # the table is replaced, not appended again
    assert "# conv1 + fc1 + fc2" in once  # comments survive
    assert once.count("[calibration.emulated.STM32F405RG]") == 1
    parsed = boards_from_dict(tomllib.loads(once))
    assert [d.calibration for d in parsed.devices] == [None] * 3  # real prediction: unused
    emu = for_prediction(parsed, emulated=True)
    first, *others = [d.calibration for d in emu.devices]
    assert first is not None and all(c == first for c in others)  # one table for the part
    assert first.factor == pytest.approx(0.05) and first.error_pct == pytest.approx(0.0)
    assert parsed.devices[0].flash_bytes == 54 * 1024  # e2e_kws3.toml's d0 budget, kept


EXTRA = f"""
[calibration.emulated.{F405}]
factor = 0.05
by_class = {{ conv = 0.04 }}
[calibration.real.{F405}]
factor = 1.5
"""


def test_each_prediction_uses_its_own_calibration() -> None:
    boards = f405s("a", "b", extra=EXTRA)
    cost = LayerCost(macs=1000, macs_by_class=(("conv", 600), ("dense", 400)))
    real, emu = boards.devices[0], for_prediction(boards, emulated=True).devices[0]
    assert real.calibration_label == "real" and emu.calibration_label == "emulated"
    assert compute_seconds(cost, real) == pytest.approx(1.5 * 1000 * CPM / 168e6)
    assert compute_seconds(cost, emu) == pytest.approx((0.04 * 600 + 0.05 * 400) * CPM / 168e6)
    only_emulated = f405s("a", extra=EXTRA.split("[calibration.real")[0])
    assert only_emulated.devices[0].calibration is None  # never used for real boards
    assert compute_seconds(cost, only_emulated.devices[0]) == pytest.approx(1000 * CPM / 168e6)


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ("[calibration.guessed.X]\nfactor = 1\n", "'guessed'"),
        ("[calibration.real.X]\nby_class = { conv = 1 }\n", "lacks factor"),
        ("[calibration.real.X]\nfactor = 0\n", "factor = 0"),
        ("[calibration.real.X]\nfactor = 1\nby_class = { gemm = 1 }\n", "'gemm'"),
        ("[calibration.real.X]\nfactor = 1\nerror_pct = -1\n", "error_pct"),
        ("[calibration.real.X]\nfactor = 1\nslope = 2\n", "'slope'"),
    ],
)
def test_bad_calibration_tables(table: str, match: str) -> None:
    with pytest.raises(BoardFileError, match=match):
        f405s("a", extra=table)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


@pytest.mark.parametrize(
    ("extra", "emulated", "label"),
    [
        ("", False, "none"),
        ("", True, "none"),
        (EXTRA.split("[calibration.real")[0], False, "none"),  # emulated only: not for boards
        (EXTRA.split("[calibration.real")[0], True, "emulated"),
        (EXTRA, False, "real"),
        (EXTRA, True, "emulated"),
    ],
)
def test_plan_json_says_which_calibration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: str, emulated: bool, label: str
) -> None:
    boards = tmp_path / "b.toml"
    boards.write_text((BOARDS / "e2e_tiny2.toml").read_text() + extra)
    args = ["plan", str(ROOT / "models" / "tiny_cnn.onnx"), "--target", str(boards), "--json"]
    code, out, err = run_cli(capsys, *args, *(["--emulated"] if emulated else []))
    assert code == 0, err
    plan = json.loads(out)
    assert plan["calibration"] == label
    assert plan["prediction"] == ("emulator" if emulated else "boards")
    assert {d["calibration"] for d in plan["devices"]} == {label}
    code, text, err = run_cli(capsys, *args[:-1], *(["--emulated"] if emulated else []))
    assert code == 0, err
    assert f"calibration: {label}" in text
