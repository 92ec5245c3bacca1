"""``splitter calibrate``: correction factors of the compute estimate per part, from a bench.

Model (:mod:`splitter.cost.calibration`): sub-model ``k`` takes ``m_k = sum_c x_c e_kc``
cycles, ``e_kc`` the estimate's cycles of op class ``c`` (``conv``, ``depthwise``, ``dense``,
``other``) and ``x_c`` the factor (measured / estimated) of the part that ran it. The factor
multiplies whatever the estimate is, so it corrects it rather than replacing it.

* **Per part.** Every sub-model benched on a device of part ``P`` is one equation of ``P``'s
  system; identical parts get identical factors by construction. ``--also OUT2`` pools the
  benches of other compiled models (more distinct sub-models per part).
* **Per class when the data identifies the classes**: the equations, weighted by ``1 / m_k``
  (relative residuals, so a large sub-model does not drown a small one), have full column rank
  and non-negative least squares gives every class a positive factor. Otherwise one factor
  ``x`` for all classes, minimising ``sum_k ((x E_k - m_k) / m_k)^2`` (``E_k = sum_c e_kc``):
  ``x = sum_k r_k / sum_k r_k^2`` with ``r_k = E_k / m_k``; the fit says why.
* **Fit error**: the largest ``|predicted - measured| / measured`` over the part's sub-models, in
  %. With as many sub-models as unknowns the fit is exact and cannot be checked against its own
  data; it says so.
* **Kind**: a bench under QEMU (``bench --emulate``) gives an *emulated* calibration
  (``[calibration.emulated.PART]``, used only to predict emulated runs), one over ``--port`` a
  *real* one (``[calibration.real.PART]``). Measured cycles are SysTick ticks of the emulated
  168 MHz core under QEMU (whatever part the device stands for), core cycles at the device's
  clock on a real board; the estimate's cycles count at the same clock
  (:func:`splitter.cost.calibration.timing_clock_hz`).

Refused (one line, exit 2, nothing written) when the data contradicts the factors: a real
calibration asked of emulated data (``bench --emulate``, or fewer cycles per MAC than a real
core can take, :data:`MIN_REAL_CYCLES_PER_MAC`: QEMU boards benched over ``--port``); two
devices of the same part whose measured / predicted ratios differ by more than the allowance; a
sub-model the fit misses by more than the allowance.
The allowance is ``max_error`` (``--max-error``, default :data:`MAX_ERROR_PCT` %) plus three times
the largest run-to-run spread ``(max - min) / median`` of the part's sub-models (0 under QEMU's
``-icount``, whose cycles are deterministic), so a disagreement must exceed the noise.

NNLS: Lawson & Hanson's active-set algorithm (*Solving Least Squares Problems*, 1974, ch. 23),
in numpy (scipy is not a dependency; at most four unknowns).

The calibrated board file is the original text (comments kept) with the written
``[calibration.KIND.PART]`` tables replaced or appended; it is parsed back before being written
atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from splitter.bench.estimate import (
    SubModelCost,
    compute_seconds,
    find_target,
    read_json,
    submodel_costs,
)
from splitter.bench.results import BENCH_FILE, write_atomic
from splitter.bench.stats import error_pct, median
from splitter.errors import BoardFileError, InputFileError, escaped
from splitter.inputs import read_input_text
from splitter.ir import Boards, Calibration, Device
from splitter.manifest import read_manifest

CLASSES = ("conv", "depthwise", "dense", "other")
#: Default limit of the fit error (``--max-error``), %: the issue's target for predicting other
#: models from a calibration.
MAX_ERROR_PCT = 10.0
#: Largest condition number of the (column-normalised, weighted) per-class system: beyond it the
#: classes are not told apart by the data, whatever the rank says.
MAX_CONDITION = 1e4


#: Fewest cycles per MAC a real Cortex-M can take with the project's kernels: they execute at
#: least 1.76 instructions per MAC (int8 dense, ``_dsp`` variant; benchmarks/results/kernels.md)
#: and a core retires at most one instruction per cycle (M0+, M4: Arm DDI 0484C 3.3, DDI 0439B
#: 3.3.1), two on the dual-issue M7 (DDI 0489F 1.2): 1.76 / 2 = 0.88, rounded down. QEMU under
#: ``-icount shift=0`` counts 0.168 ticks per instruction: 0.3-0.6 per MAC on whole sub-models.
MIN_REAL_CYCLES_PER_MAC = 0.8

#: What each kind of calibration predicts (the board file's comment and the CLI say it).
USED_FOR = {
    "emulated": "emulated calibration, used only to predict emulated runs (plan --emulated)",
    "real": "real-board calibration, used to predict runs on the parts",
}


class CalibrationRefused(InputFileError):
    """The bench's own data contradicts the factors calibrate would write."""


@dataclass(frozen=True)
class Measured:
    """One benched sub-model: measured cycles (median), run-to-run spread, estimate by class."""

    index: int
    device: str
    cycles: float
    spread: float  # (max - min) / median over the runs
    estimated: Mapping[str | None, float]

    @property
    def estimated_total(self) -> float:
        """``E_k = sum_c e_kc``."""
        return float(sum(self.estimated.values()))


@dataclass
class PartFit:
    """The factors of one part and how well they explain the part's sub-models."""

    part: str
    kind: str
    factor: float
    by_class: dict[str, float]
    method: str
    subs: list[Measured]
    exact: bool = False

    def calibration(self, bench: str = "") -> Calibration:
        """As the board file's ``[calibration.KIND.PART]``."""
        return Calibration(
            self.kind, self.part, self.factor, dict(self.by_class), self.method,
            self.error_pct, bench,
        )  # fmt: skip

    def predicted(self, sub: Measured) -> float:
        """``sum_c x_c e_kc``."""
        return float(sum(self._factor(c) * e for c, e in sub.estimated.items()))

    def _factor(self, cls: str | None) -> float:
        return self.by_class.get(cls, self.factor) if cls is not None else self.factor

    def residual_pct(self, sub: Measured) -> float:
        """``100 (predicted - measured) / measured``."""
        return error_pct(self.predicted(sub), sub.cycles) or 0.0

    @property
    def error_pct(self) -> float | None:
        """Largest |residual| in %; ``None`` when the fit is exact by construction."""
        if self.exact:
            return None
        return max(abs(self.residual_pct(s)) for s in self.subs)

    @property
    def devices(self) -> list[str]:
        """The part's devices that ran sub-models, in bench order."""
        return list(dict.fromkeys(s.device for s in self.subs))

    def device_ratio(self, device: str) -> float:
        """Measured / predicted cycles over ``device``'s sub-models (1: the fit is exact on it)."""
        subs = [s for s in self.subs if s.device == device]
        return sum(s.cycles for s in subs) / sum(self.predicted(s) for s in subs)

    @property
    def noise(self) -> float:
        """Largest run-to-run relative spread of the part's sub-models."""
        return max(s.spread for s in self.subs)

    @property
    def fit_text(self) -> str:
        """The method and its error, as printed."""
        err = self.error_pct
        how = "exact, not checkable" if err is None else f"fit error {err:.2f} %"
        return f"{self.method}; {how}"


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


def one_factor(subs: Sequence[Measured]) -> float:
    """``x = sum_k r_k / sum_k r_k^2``, ``r_k = E_k / m_k`` (least relative squares)."""
    r = np.array([s.estimated_total / s.cycles for s in subs])
    return float(r.sum() / (r * r).sum())


def _columns(subs: Sequence[Measured]) -> list[str | None]:
    """The op classes (``None``: unclassified) with estimated cycles in some sub-model."""
    seen = {c for s in subs for c, e in s.estimated.items() if e > 0}
    return [c for c in (*CLASSES, None) if c in seen]


def class_factors(subs: Sequence[Measured]) -> tuple[dict[str | None, float] | None, str]:
    """Per-class factors by weighted NNLS, or ``None`` and why the data does not identify them."""
    cols = _columns(subs)
    names = ", ".join(c or "unclassified" for c in cols)
    a = np.array([[s.estimated.get(c, 0.0) / s.cycles for c in cols] for s in subs])
    a = a.reshape(len(subs), len(cols))
    if len(cols) < 2:
        return None, f"one class ({names})"
    rank = int(np.linalg.matrix_rank(a))
    if rank < len(cols):
        return None, f"{rank} independent equation(s) for {len(cols)} classes ({names})"
    norm = a / np.linalg.norm(a, axis=0)
    if np.linalg.cond(norm) > MAX_CONDITION:
        return None, f"the sub-models' class mixes are too alike to tell {names} apart"
    x = nnls(a, np.ones(len(subs)))
    if not (x > 0).all():
        zero = ", ".join(c or "unclassified" for c, v in zip(cols, x, strict=True) if v <= 0)
        return None, f"the per-class fit gives {zero} no positive factor"
    return {c: float(v) for c, v in zip(cols, x, strict=True)}, names


def fit_part(part: str, kind: str, subs: Sequence[Measured]) -> PartFit:
    """The factors of ``part`` from its sub-models (module docstring)."""
    where = f"{len(subs)} sub-model(s) on {len({s.device for s in subs})} device(s)"
    pooled = one_factor(subs)
    by_class, why = class_factors(subs)
    if by_class is None:
        method = f"one factor for all classes over {where} (not per class: {why})"
        return PartFit(part, kind, pooled, {}, method, list(subs), exact=len(subs) == 1)
    exact = len(subs) == len(by_class)
    default = by_class.pop(None, pooled)
    named = {str(c): v for c, v in by_class.items()}
    method = f"per-class NNLS over {where}, classes {why}"
    return PartFit(part, kind, default, named, method, list(subs), exact=exact)


def check_fit(fit: PartFit, max_error: float, bench: str) -> None:
    """Refuse (:class:`CalibrationRefused`) factors the fit's own data contradicts."""
    devices = fit.devices
    allowed = max_error + 300.0 * fit.noise
    if len(devices) > 1:
        ratios = {d: fit.device_ratio(d) for d in devices}
        lo, hi = min(ratios, key=ratios.__getitem__), max(ratios, key=ratios.__getitem__)
        spread = 100.0 * (ratios[hi] / ratios[lo] - 1.0)
        if spread > allowed:
            raise CalibrationRefused(
                f"{bench}: devices {lo} and {hi} are both {fit.part} but measured / predicted "
                f"differs by {spread:.1f} % between them (allowed {allowed:.1f} % = --max-error + "
                f"3 x run-to-run noise; {fit.method}); nothing written: bench a split with more "
                "distinct sub-models per part, check both boards' clocks, or raise --max-error"
            )
    err = fit.error_pct
    if err is not None and err > allowed:
        worst = max(fit.subs, key=lambda s: abs(fit.residual_pct(s)))
        raise CalibrationRefused(
            f"{bench}: the {fit.part} factors ({fit.method}) miss sub-model {worst.index} on "
            f"{worst.device} by {fit.residual_pct(worst):+.1f} % (allowed {allowed:.1f} % = "
            "--max-error + 3 x run-to-run noise); "
            "nothing written: bench a split with more distinct sub-models per part or raise "
            "--max-error"
        )


def measurements(
    bench: Mapping[str, Any],
    devices: Mapping[str, Device],
    costs: Mapping[int, SubModelCost] | None = None,
) -> dict[str, list[Measured]]:
    """Per part, the bench's sub-models with the uncalibrated estimate on their devices (from
    the planner's per-layer ``costs`` when given, else from bench.json's MACs by class)."""
    out: dict[str, list[Measured]] = {}
    for d in bench["devices"]:
        dev = devices[d["device"]]
        for s in d["submodels"]:
            runs = [float(c) for c in s["cycles"]]
            mid = median(runs)
            if mid <= 0:
                raise InputFileError(
                    f"bench.json: sub-model {s['index']} on {d['device']} measured 0 cycles; "
                    "re-run splitter bench"
                )
            own = SubModelCost(int(s["index"]), dev.name, int(s["macs"]), s["macs_by_class"])
            est = (costs or {}).get(own.index, own).estimated_cycles(dev)
            if sum(est.values()) <= 0:
                continue  # nothing estimated (no MACs): no equation for any factor
            spread = (max(runs) - min(runs)) / mid
            out.setdefault(dev.part.name, []).append(
                Measured(int(s["index"]), dev.name, mid, spread, est)
            )
    return out


def fit_all(
    bench: Mapping[str, Any],
    boards: Boards,
    max_error: float,
    bench_name: str,
    kind: str,
    costs: Mapping[int, SubModelCost] | None = None,
) -> list[PartFit]:
    """One checked :class:`PartFit` per part that ran a sub-model."""
    devices = {d.name: d for d in boards.devices}
    return fit_parts(measurements(bench, devices, costs), kind, max_error, bench_name)


def fit_parts(
    by_part: Mapping[str, Sequence[Measured]], kind: str, max_error: float, bench_name: str
) -> list[PartFit]:
    """:func:`fit_part` and :func:`check_fit` for every part."""
    fits = []
    for part, subs in by_part.items():
        fit = fit_part(part, kind, subs)
        check_fit(fit, max_error, bench_name)
        fits.append(fit)
    return fits


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def table_lines(fit: PartFit, bench: str) -> list[str]:
    """The ``[calibration.KIND.PART]`` table of ``fit``."""
    lines = [
        f"# `splitter calibrate` from {bench}: {USED_FOR[fit.kind]}",
        f"[calibration.{fit.kind}.{_key(fit.part)}]",
        f"factor = {_fmt(fit.factor)}",
    ]
    if fit.by_class:
        classes = ", ".join(f"{c} = {_fmt(v)}" for c, v in fit.by_class.items())
        lines.append(f"by_class = {{ {classes} }}")
    lines.append(f"fit = {_quote(fit.method)}")
    if fit.error_pct is not None:
        lines.append(f"error_pct = {_fmt(fit.error_pct)}")
    lines.append(f"bench = {_quote(bench)}")
    return lines


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key(part: str) -> str:
    bare = part.replace("-", "").replace("_", "").isalnum() and part.isascii()
    return part if bare else _quote(part)


def calibrated_text(text: str, fits: Sequence[PartFit], bench: str) -> str:
    """``text`` without the ``[calibration.KIND.PART]`` tables ``fits`` replace, plus theirs."""
    replaced = {(f.kind, f.part) for f in fits}
    out: list[str] = []
    for head, body in _split_sections(text.splitlines()):
        if head is not None and _calibration_key(head) in replaced:
            while out and out[-1].startswith("# `splitter calibrate`"):
                out.pop()  # the comment that introduced the replaced table
            continue
        out += ([head] if head is not None else []) + body
    while out and not out[-1].strip():
        out.pop()
    for f in fits:
        out += ["", *table_lines(f, bench)]
    return "\n".join(out).lstrip("\n") + "\n"


def _calibration_key(head: str) -> tuple[str, str] | None:
    """``(kind, part)`` of a ``[calibration.KIND.PART]`` header line, else ``None``."""
    import tomllib

    try:
        parsed = tomllib.loads(head.split("#", 1)[0].strip())
    except tomllib.TOMLDecodeError:
        return None
    cal = parsed.get("calibration")
    if isinstance(cal, dict) and len(cal) == 1:
        kind, parts = next(iter(cal.items()))
        if isinstance(parts, dict) and len(parts) == 1:
            return str(kind), str(next(iter(parts)))
    return None


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
class CalibrationResult:
    """The result: fits, the calibrated file's text and path, and the re-check per device."""

    fits: list[PartFit]
    kind: str
    text: str
    source: Path
    path: Path | None = None
    check: list[dict[str, Any]] = field(default_factory=list)


def bench_kind(bench: Mapping[str, Any], kind: str | None, where: str) -> str:
    """``"emulated"`` for a bench under QEMU, ``"real"`` over ``--port``; ``kind`` must agree."""
    measured = "emulated" if bench.get("emulated") else "real"
    if kind == "real" and measured == "emulated":
        raise CalibrationRefused(
            f"{where}: the bench ran on the emulator (bench --emulate): its data gives an "
            "emulated calibration, never a real one; bench the boards over --port for a real "
            "calibration, or drop --kind real"
        )
    return kind or measured


def check_real(bench: Mapping[str, Any], where: str) -> None:
    """Refuse a real calibration from cycles no real core can reach
    (:data:`MIN_REAL_CYCLES_PER_MAC`): such data comes from an emulator (e.g. QEMU boards benched
    over ``--port``)."""
    for d in bench["devices"]:
        for s in d["submodels"]:
            per_mac = median(s["cycles"]) / max(1, int(s["macs"]))
            if per_mac < MIN_REAL_CYCLES_PER_MAC:
                raise CalibrationRefused(
                    f"{where}: sub-model {s['index']} on {d['device']} took {per_mac:.3f} cycles "
                    f"per MAC, fewer than a real Cortex-M can ({MIN_REAL_CYCLES_PER_MAC:g}): "
                    "emulated data, never a real calibration; nothing written: bench the boards "
                    "themselves, or bench --emulate for an emulated calibration"
                )


@dataclass
class BenchData:
    """One ``OUT``'s bench, plan, board file and the planner's per-sub-model costs."""

    out: Path
    bench: dict[str, Any]
    source: Path
    boards: Boards
    costs: dict[int, SubModelCost]

    @property
    def label(self) -> str:
        """``OUT/bench.json`` as error messages and the board file name it."""
        return escaped(self.out / BENCH_FILE)

    def measured(self, kind: str, prefix: str = "") -> dict[str, list[Measured]]:
        """Per part, the sub-models (device names prefixed with ``prefix``)."""
        from splitter.hardware.boards import for_prediction

        devices = {d.name: d for d in for_prediction(self.boards, kind == "emulated").devices}
        by_part = measurements(self.bench, devices, self.costs)
        return {
            part: [replace(m, device=prefix + m.device) for m in subs]
            for part, subs in by_part.items()
        }


def load_bench(out_dir: str | Path, target: str | Path | None = None) -> BenchData:
    """Read ``OUT/bench.json``, ``OUT/plan.json`` and the board file (``target`` or the plan's)."""
    from splitter.hardware.boards import load_boards

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
    names = {d.name for d in boards.devices}
    missing = [d["device"] for d in bench["devices"] if d["device"] not in names]
    if missing:
        raise BoardFileError(
            f"{source}: has no device {missing[0]!r} of the bench; pass the plan's board file"
        )
    return BenchData(out, bench, source, boards, {c.index: c for c in submodel_costs(plan)})


def calibrate(
    out_dir: str | Path,
    output: str | Path | None = None,
    target: str | Path | None = None,
    max_error: float = MAX_ERROR_PCT,
    kind: str | None = None,
    also: Sequence[str | Path] = (),
) -> CalibrationResult:
    """Fit from ``OUT/bench.json`` (pooled with the benches of the ``also`` OUTs, each with its
    own plan's board file), check, write the calibrated board file, re-check the estimates."""
    import tomllib

    from splitter.hardware.boards import boards_from_dict, for_prediction

    main = load_bench(out_dir, target)
    kind = bench_kind(main.bench, kind, main.label)
    by_part: dict[str, list[Measured]] = {}
    for k, data in enumerate([main, *(load_bench(o) for o in also)]):
        if bench_kind(data.bench, None, data.label) != bench_kind(main.bench, None, main.label):
            raise CalibrationRefused(
                f"{data.label}: an {'emulated' if data.bench.get('emulated') else 'real'} bench "
                f"cannot be pooled with {main.label}'s; calibrate them apart"
            )
        if kind == "real":
            check_real(data.bench, data.label)
        for part, subs in data.measured(kind, f"{data.out.name}/" if k else "").items():
            by_part.setdefault(part, []).extend(subs)
    label = ", ".join([main.label, *(escaped(Path(o) / BENCH_FILE) for o in also)])
    fits = fit_parts(by_part, kind, max_error, label)
    text = read_input_text(main.source, "board file", error=BoardFileError)
    text = calibrated_text(text, fits, label)
    calibrated = boards_from_dict(tomllib.loads(text), str(output or main.source))
    result = CalibrationResult(fits, kind, text, main.source)
    result.check = recheck(main.costs, main.bench, for_prediction(calibrated, kind == "emulated"))
    if output is not None:
        result.path = write_atomic(Path(output), text)
    return result


def recheck(
    costs: Mapping[int, SubModelCost], bench: Mapping[str, Any], boards: Boards
) -> list[dict[str, Any]]:
    """Per device: the planner's compute estimate with ``boards`` vs the measured seconds."""
    devices = {d.name: d for d in boards.devices}
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
                "part": dev.part.name,
                "calibration": dev.calibration_label,
                "estimated_s": est,
                "measured_s": measured,
                "error_pct": error_pct(est, measured),
            }
        )
    return rows
