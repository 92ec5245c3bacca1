"""``splitter calibrate``: fit cycles per MAC per device and op class from ``OUT/bench.json``.

Model (the planner's, ``splitter.partition.problem.layer_time``): a sub-model ``k`` on device
``i`` takes ``c_k = sum_c MAC_kc * CpM_ic`` cycles, ``MAC_kc`` its MACs of class ``c`` (conv,
depthwise, dense, other; from its file's layer chain). With the measured ``c_k`` (median over the
runs) of every sub-model of the device as equations, ``CpM_i`` is the non-negative least-squares
solution of ``A x = c`` (``A[k, c] = MAC_kc``), only over the classes the device's sub-models
contain. A device with fewer independent equations than classes (one sub-model and two classes,
the usual case) borrows the class *ratios* of a pooled fit over every device with the same core
(under QEMU all devices are the same emulated F405 running the same kernels), scaled by one
factor so its own total is exact; when the pool is underdetermined too, it gets one
class-independent ``CpM_i = sum_k c_k / sum_k MAC_k`` for all its classes (also exact on its
total). Classes a device did not run get the pooled values scaled the same way, so a re-plan that
moves layers still has per-class figures. Every device's report says which fit it got.

NNLS: Lawson & Hanson's active-set algorithm (*Solving Least Squares Problems*, 1974, ch. 23),
in numpy. scipy.optimize.nnls is the same algorithm, but scipy is not a dependency of splitter
and the systems here have at most four unknowns, so a 30-line numpy version is enough.

Clock: under QEMU the firmware's cycles are SysTick ticks of the emulated 168 MHz core (with
``-icount shift=0``: instructions x 0.168). An emulated device keeps its own ``clock_mhz`` ``f``
(a real part may not reach 168 MHz) and its fitted cycles per MAC are scaled by ``f / 168`` so
that ``MAC * CpM / f`` is still the measured (emulated) time; on real boards the cycles are core
cycles at the device's own clock, used as fitted.

The calibrated boards file is the original text with, per ``[[device]]``, its ``clock_mhz``,
``cpm`` and ``cpm_by_class`` lines replaced (comments kept); it is parsed back with the boards
parser before being written atomically.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from splitter.bench.estimate import find_target, read_json
from splitter.bench.report import BENCH_FILE, write_atomic
from splitter.bench.stats import error_pct, median
from splitter.errors import BoardFileError, InputFileError, escaped
from splitter.hardware.qemu import EMULATOR
from splitter.inputs import read_input_text
from splitter.manifest import PlanManifest, read_manifest

CLASSES = ("conv", "depthwise", "dense", "other")
#: A per-class fit whose device total misses the measurement by more than this (relative) is
#: replaced by the exact class-independent ratio.
CLASS_FIT_TOLERANCE = 0.005
EMULATED_CLOCK_MHZ = EMULATOR.clock_hz / 1e6
REPLACED_KEYS = ("clock_mhz", "cpm", "cpm_by_class")


@dataclass
class DeviceFit:
    """The fit of one device: its cpm per class, the default cpm, the clock, how it was fit."""

    device: str
    clock_mhz: float
    cpm: float
    cpm_by_class: dict[str, float]
    method: str
    measured_cycles: float
    predicted_cycles: float
    submodels: list[int] = field(default_factory=list)

    @property
    def error_pct(self) -> float | None:
        """Predicted vs measured cycles of the device's sub-models, in %."""
        return error_pct(self.predicted_cycles, self.measured_cycles)


def nnls(a: np.ndarray, b: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """``argmin ||a x - b||_2`` subject to ``x >= 0`` (Lawson-Hanson active set)."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 1e-10 * max(1.0, float(np.abs(a).max(initial=0.0))) * max(m, n)
    for _ in range(max_iter):
        w = a.T @ (b - a @ x)
        if passive.all() or w[~passive].max(initial=-np.inf) <= tol:
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
    return x


def _system(subs: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Classes present, ``A[k, c] = MAC_kc`` and the median cycles ``c_k`` of ``subs``."""
    present = [c for c in CLASSES if any(s["macs_by_class"].get(c, 0) for s in subs)]
    a = np.array([[float(s["macs_by_class"].get(c, 0)) for c in present] for s in subs])
    cycles = np.array([median(s["cycles"]) for s in subs], dtype=float)
    return present, a.reshape(len(subs), len(present)), cycles


def class_fit(subs: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """NNLS cycles per MAC per class over ``subs``; ``None`` when underdetermined or a class
    gets no positive value (a board file needs every ``cpm_by_class`` entry > 0)."""
    present, a, cycles = _system(subs)
    if not present or np.linalg.matrix_rank(a) < len(present):
        return None
    x = nnls(a, cycles)
    if not all(v > 0 for v in x):
        return None
    return {c: float(v) for c, v in zip(present, x, strict=True)}


def fit_device(
    device: str,
    clock_mhz: float,
    subs: Sequence[Mapping[str, Any]],
    pooled: Mapping[str, float] | None = None,
    pool_size: str = "",
) -> DeviceFit:
    """Fit one device from its bench sub-models (``cycles`` per run, ``macs_by_class``).

    In order: the device's own per-class NNLS (if determined, positive and within
    :data:`CLASS_FIT_TOLERANCE` of its total); else the ``pooled`` per-class values of devices
    with the same core, scaled by one factor so the device's total is exact; else one
    class-independent ``sum c_k / sum MAC_k``. Classes the device did not run get the pooled
    values scaled the same way (or its default ``cpm``).
    """
    present, a, cycles = _system(subs)
    macs = np.array([float(s["macs"]) for s in subs])
    total, ratio = float(cycles.sum()), float(cycles.sum() / macs.sum()) if macs.sum() else 0.0
    unclassified = float(macs.sum() - a.sum())
    index = [int(s["index"]) for s in subs]
    own = class_fit(subs)
    if own is not None:
        pred = sum(float(a[:, k].sum()) * own[c] for k, c in enumerate(present))
        pred += unclassified * ratio
        if abs(pred - total) <= CLASS_FIT_TOLERANCE * total:
            by_class = {**_scaled(pooled, a, present, total - unclassified * ratio), **own}
            method = f"per-class NNLS over {len(subs)} sub-model(s), classes {', '.join(present)}"
            return DeviceFit(device, clock_mhz, ratio, by_class, method, total, pred, index)
    why = (
        f"{len(subs)} sub-model(s) give too few equations for {len(present)} classes "
        f"({', '.join(present) or 'none'})"
    )
    if pooled is not None and all(c in pooled for c in present):
        by_class = _scaled(pooled, a, present, total - unclassified * ratio)
        method = f"{why}: class ratios of the pooled fit ({pool_size}) scaled to its total"
        return DeviceFit(device, clock_mhz, ratio, by_class, method, total, total, index)
    by_class = {c: ratio for c in present}
    method = f"{why}: one cpm for all of them"
    return DeviceFit(device, clock_mhz, ratio, by_class, method, total, ratio * macs.sum(), index)


def _scaled(
    pooled: Mapping[str, float] | None, a: np.ndarray, present: Sequence[str], target: float
) -> dict[str, float]:
    """``s * pooled_c`` for every pooled class, ``s`` making ``sum_kc MAC_kc s pooled_c`` equal
    ``target`` (the device's cycles minus those of unclassified MACs)."""
    if not pooled:
        return {}
    base = sum(float(a[:, k].sum()) * pooled.get(c, 0.0) for k, c in enumerate(present))
    if base <= 0 or target <= 0:
        return {}
    return {c: v * target / base for c, v in pooled.items()}


def fit_all(bench: Mapping[str, Any], boards_clock_mhz: Mapping[str, float]) -> list[DeviceFit]:
    """One :class:`DeviceFit` per device of bench.json that ran a sub-model.

    Devices with the same core are pooled (under QEMU every device is the same emulated F405
    core running the same kernels; on real boards, the same part) for :func:`class_fit`.
    """
    emulated = bool(bench.get("emulated"))
    devices = [d for d in bench["devices"] if d["submodels"]]
    pools: dict[str, list[Mapping[str, Any]]] = {}
    for d in devices:
        pools.setdefault(_pool_key(d, emulated), []).append(d)
    fits = []
    for d in devices:
        members = pools[_pool_key(d, emulated)]
        subs = [s for m in members for s in m["submodels"]]
        pooled = class_fit(subs) if len(members) > 1 else None
        size = f"{len(subs)} sub-models on {len(members)} devices"
        clock = boards_clock_mhz.get(d["device"], float(d["clock_hz"]) / 1e6)
        fit = fit_device(d["device"], clock, d["submodels"], pooled, size)
        fits.append(_at_own_clock(fit, EMULATED_CLOCK_MHZ) if emulated else fit)
    return fits


def _at_own_clock(fit: DeviceFit, measured_mhz: float) -> DeviceFit:
    """Cycles counted at ``measured_mhz`` re-expressed at the device's clock ``f``: every cpm
    times ``f / measured_mhz``, so ``MAC * CpM / f`` (the predicted time) is unchanged."""
    scale = fit.clock_mhz / measured_mhz
    fit.cpm *= scale
    fit.cpm_by_class = {c: v * scale for c, v in fit.cpm_by_class.items()}
    return fit


def _pool_key(device: Mapping[str, Any], emulated: bool) -> str:
    return f"qemu-{EMULATOR.machine}" if emulated else str(device.get("part", device["device"]))


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def device_lines(fit: DeviceFit) -> list[str]:
    """The TOML lines the calibration sets in a ``[[device]]`` table."""
    classes = ", ".join(f"{c} = {_fmt(v)}" for c, v in fit.cpm_by_class.items())
    return [
        f"clock_mhz = {_fmt(fit.clock_mhz)}",
        f"cpm = {_fmt(fit.cpm)}",
        f"cpm_by_class = {{ {classes} }}",
        f"# calibrated: {fit.method}",
    ]


_KEY_RE = re.compile(r"^\s*(?P<key>[A-Za-z0-9_-]+)\s*=")
_NAME_RE = re.compile(r"""^\s*name\s*=\s*["'](?P<name>[^"']+)["']""")


def calibrated_text(text: str, fits: Sequence[DeviceFit], header: str) -> str:
    """The board file ``text`` with every fitted device's clock/cpm/cpm_by_class replaced."""
    by_name = {f.device: f for f in fits}
    sections = _split_sections(text.splitlines())
    out = [header] if header else []
    for head, body in sections:
        if head is None or head.strip() != "[[device]]":
            out += ([head] if head is not None else []) + body
            continue
        name = next((m["name"] for ln in body if (m := _NAME_RE.match(ln))), None)
        fit = by_name.get(name or "")
        if fit is None:
            out += [head, *body]
            continue
        kept = [ln for ln in body if not ((m := _KEY_RE.match(ln)) and m["key"] in REPLACED_KEYS)]
        while kept and not kept[-1].strip():
            kept.pop()
        out += [head, *kept, *device_lines(fit), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _split_sections(lines: list[str]) -> list[tuple[str | None, list[str]]]:
    """``[(header line or None for the preamble, body lines)]`` in file order."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for ln in lines:
        if ln.lstrip().startswith("["):
            sections.append((ln, []))
        else:
            sections[-1][1].append(ln)
    return sections


@dataclass
class Calibration:
    """The result: fits, the calibrated file's text and path, and the re-check per device."""

    fits: list[DeviceFit]
    text: str
    source: Path
    path: Path | None = None
    check: list[dict[str, Any]] = field(default_factory=list)


def calibrate(
    out_dir: str | Path, output: str | Path | None = None, target: str | Path | None = None
) -> Calibration:
    """Fit from ``OUT/bench.json``, write the calibrated board file, re-check the estimates."""
    from splitter.hardware.boards import boards_from_dict, load_boards

    out = Path(out_dir)
    bench = read_json(out / BENCH_FILE, "bench results", f"run `splitter bench {out}` first")
    plan = read_manifest(out)
    source = find_target(plan, target or bench.get("target"))
    if source is None:
        raise InputFileError(
            f"{out}/bench.json: names no board file; pass --target BOARDS.toml (the one the plan "
            "was compiled with)"
        )
    boards = load_boards(source)
    fits = fit_all(bench, {d.name: d.clock_hz / 1e6 for d in boards.devices})
    missing = [f.device for f in fits if f.device not in {d.name for d in boards.devices}]
    if missing:
        raise BoardFileError(
            f"{source}: has no device {missing[0]!r} of the bench; pass the plan's board file"
        )
    mhz = f"{EMULATED_CLOCK_MHZ:g}"
    how = f"QEMU: cycles are SysTick ticks at {mhz} MHz, so clock_mhz = {mhz}"
    header = (
        f"# Calibrated by `splitter calibrate` from {escaped(out / BENCH_FILE)} "
        f"({how if bench.get('emulated') else 'real boards: cycles at each clock'})."
    )
    text = calibrated_text(
        read_input_text(source, "board file", error=BoardFileError), fits, header
    )
    import tomllib

    calibrated = boards_from_dict(tomllib.loads(text), str(output or source))
    result = Calibration(fits, text, source)
    result.check = recheck(out, plan, bench, calibrated)
    if output is not None:
        result.path = write_atomic(Path(output), text)
    return result


def recheck(
    out_dir: Path, plan: PlanManifest, bench: Mapping[str, Any], boards: Any
) -> list[dict[str, Any]]:
    """Per device: the planner's compute estimate with ``boards`` vs the measured seconds."""
    from splitter.bench.estimate import compute_seconds, submodel_costs

    devices = {d.name: d for d in boards.devices}
    costs = {c.index: c for c in submodel_costs(plan)}
    rows = []
    for d in bench["devices"]:
        if not d["submodels"]:
            continue
        dev = devices[d["device"]]
        measured = sum(median(s["cycles"]) for s in d["submodels"]) / float(d["clock_hz"])
        est = sum(compute_seconds(costs[int(s["index"])], dev) for s in d["submodels"])
        rows.append(
            {
                "device": d["device"],
                "estimated_s": est,
                "measured_s": measured,
                "error_pct": error_pct(est, measured),
            }
        )
    return rows
