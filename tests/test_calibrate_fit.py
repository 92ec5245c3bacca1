"""The calibration's pieces: numpy NNLS, per-device fits, the calibrated board file's text."""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter.bench.calibrate import calibrated_text, fit_all, fit_device, nnls
from splitter.hardware.boards import boards_from_dict, load_boards

BOARDS = Path(__file__).resolve().parents[1] / "models" / "boards"


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
@given(
    m=st.integers(1, 6),
    n=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
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


def test_fit_device_per_class_when_determined() -> None:
    subs = [
        {"index": 0, "cycles": [70000, 70000], "macs": 100000, "macs_by_class": {"conv": 100000}},
        {"index": 2, "cycles": [9000], "macs": 20000, "macs_by_class": {"dense": 20000}},
    ]
    fit = fit_device("d", 168.0, subs)
    assert fit.cpm_by_class == pytest.approx({"conv": 0.7, "dense": 0.45})
    assert "NNLS" in fit.method
    assert fit.error_pct == pytest.approx(0.0, abs=1e-9)


def test_fit_device_falls_back_to_one_cpm_with_too_few_equations() -> None:
    subs = [
        {
            "index": 1,
            "cycles": [50000],
            "macs": 80000,
            "macs_by_class": {"conv": 70000, "other": 10000},
        }
    ]
    fit = fit_device("d", 168.0, subs)
    assert fit.cpm_by_class == pytest.approx({"conv": 0.625, "other": 0.625})
    assert fit.cpm == pytest.approx(0.625)
    assert "too few equations" in fit.method
    assert fit.predicted_cycles == pytest.approx(50000)


def test_calibrated_text_keeps_comments_and_replaces_keys() -> None:
    text = (BOARDS / "e2e_kws3.toml").read_text()
    text = text.replace('name = "d0"', 'name = "d0"\ncpm = 9\nclock_mhz = 84')
    subs = [{"index": 0, "cycles": [1000], "macs": 2000, "macs_by_class": {"conv": 2000}}]
    fits = [fit_device("d0", 168.0, subs), fit_device("d2", 168.0, subs)]
    out = calibrated_text(text, fits, "# header")
    assert out.startswith("# header\n")
    assert "# conv1 + fc1 + fc2" in out  # comments survive
    boards = boards_from_dict(tomllib.loads(out))
    d0, d1, d2 = boards.devices
    assert d0.clock_hz == 168e6 and d0.cpm == 0.5 and dict(d0.cpm_by_class) == {"conv": 0.5}
    assert (
        dict(d1.cpm_by_class) == {}
        and d1.cpm == load_boards(BOARDS / "e2e_kws3.toml").devices[1].cpm
    )
    assert dict(d2.cpm_by_class) == {"conv": 0.5}
    assert d0.flash_bytes == 54 * 1024  # e2e_kws3.toml's d0 budget, kept


def test_pooled_fit_gives_class_ratios_to_underdetermined_devices() -> None:
    true = {"conv": 0.5, "depthwise": 0.9, "dense": 0.4}

    def sub(index: int, **macs: int) -> dict[str, object]:
        cycles = sum(true[c] * m for c, m in macs.items())
        return {"index": index, "cycles": [cycles], "macs": sum(macs.values()),
                "macs_by_class": macs}  # fmt: skip

    bench = {
        "emulated": True,
        "devices": [
            {"device": "x", "clock_hz": 168e6, "submodels": [sub(0, conv=1000, depthwise=300)]},
            {"device": "y", "clock_hz": 168e6, "submodels": [sub(1, conv=400, dense=2000)]},
            {"device": "z", "clock_hz": 168e6, "submodels": [sub(2, depthwise=50, dense=70)]},
        ],
    }
    fits = {f.device: f for f in fit_all(bench, {})}
    for f in fits.values():
        assert f.clock_mhz == 168.0  # the devices of this bench run at 168 MHz
        assert "pooled" in f.method
        assert f.cpm_by_class == pytest.approx(true, rel=1e-9)  # exact data: scale 1
        assert f.predicted_cycles == pytest.approx(f.measured_cycles)


def test_emulated_fit_keeps_the_device_clock() -> None:
    """An 80 MHz part calibrated under QEMU (168 MHz ticks) keeps 80 MHz; its cpm is scaled by
    80/168 so that MAC * cpm / f is still the measured time."""
    bench = {
        "emulated": True,
        "devices": [
            {
                "device": "l4",
                "clock_hz": 80e6,
                "submodels": [
                    {"index": 0, "cycles": [168_000], "macs": 1000, "macs_by_class": {"conv": 1000}}
                ],
            }
        ],
    }
    (fit,) = fit_all(bench, {})
    assert fit.clock_mhz == 80.0
    assert fit.cpm == pytest.approx(168 * 80 / 168)
    assert 1000 * fit.cpm / 80e6 == pytest.approx(168_000 / 168e6)  # the measured seconds
    assert fit.cpm_by_class == pytest.approx({"conv": fit.cpm})
