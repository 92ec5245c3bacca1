"""Summary statistics of repeated measurements and the estimate-vs-measured error."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summary(values: Sequence[float]) -> dict[str, float]:
    """``n, mean, std, min, p50, p95, max`` of ``values`` (numpy, linear-interpolated quantiles)."""
    if not values:
        return {"n": 0}
    a = np.asarray(values, dtype=float)
    return {
        "n": int(a.size),
        "mean": float(a.mean()),
        "std": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min": float(a.min()),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


def error_pct(estimate: float, measured: float) -> float | None:
    """``100 * (estimate - measured) / measured``; ``None`` when nothing was measured."""
    if measured == 0:
        return None
    return 100.0 * (estimate - measured) / measured


def median(values: Sequence[float]) -> float:
    """The median (0.0 for no values)."""
    return float(np.median(np.asarray(values, dtype=float))) if values else 0.0
