"""The search of ``splitter choose``: the cheapest (fewest, most frugal) set of boards whose
optimal plan meets a latency or throughput target, proved by exhausting the cheaper sets.

Candidate sets are the multisets of up to ``max_boards`` board types (a set is what is bought;
the order of its boards does not change what its optimal plan reaches). Each set is first
settled by the bounds of :mod:`splitter.choose.bounds` (memory, then the target); the rest are
solved in the order of the quantity minimised, ``jobs`` at a time in worker processes:

* ``price``: ascending price (then fewer boards); the first price at which a solved set meets
  the target is the answer's; every set of that price is solved to break the tie (fewer boards,
  then the better figure), and the search stops at the first dearer set: every cheaper set was
  pruned or solved without meeting the target;
* ``boards``: ascending number of boards, then price, the same way;
* ``energy``: ascending energy bound; each set's least energy meeting the target is solved
  (``--objective energy`` with the target as its bound) and the search stops once the next
  bound is no lower than the best energy found.

The answer is proved optimal when every solve it depends on was proved (a solve stopped by its
time limit that missed the target might have met it). With ``front`` every set the bounds do
not settle is solved, for the Pareto front of price, figure and energy; by default (``front``
None) only when at most :data:`FRONT_SETS` are left, otherwise the front is that of the sets
solved (``front_complete`` False, said in the outputs).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

import numpy as np

from splitter.choose.bounds import (
    SetBound,
    Variant,
    cost_variants,
    granularities,
    parse_set,
    set_bound,
)
from splitter.choose.parts import Candidate
from splitter.errors import InfeasibleError, SolverError
from splitter.ir import Boards, Chain, Plan
from splitter.partition.partial import plan_partial

MINIMISE = ("price", "boards", "energy")
#: the most sets left after the answer that the default front still solves
FRONT_SETS = 200
TOL = 1e-9


@dataclass(frozen=True)
class Target:
    """What a set must reach: ``latency`` (s, at most) or ``throughput`` (per s, at least)."""

    kind: str
    value: float

    @property
    def objective(self) -> str:
        """The planning objective that decides whether a set reaches it."""
        return self.kind

    def met(self, plan: Plan) -> bool:
        """Whether ``plan`` reaches the target (1e-9 relative tolerance)."""
        if self.kind == "latency":
            return plan.latency_s <= self.value * (1 + TOL)
        return plan.throughput_per_s >= self.value * (1 - TOL)

    def out_of_reach(self, value_bound: float | None) -> bool:
        """Whether a proved lower bound on the objective's value (latency, or waiting time
        ``1 / throughput``: :attr:`splitter.ir.Plan.value_bound`) shows no plan meets it."""
        if value_bound is None:
            return False
        if self.kind == "latency":
            return value_bound > self.value * (1 + TOL)
        return value_bound * self.value * (1 - TOL) > 1.0

    def bound_options(self) -> dict[str, float]:
        """The energy objective's bound that keeps its plans on target."""
        if self.kind == "latency":
            return {"max_latency_s": self.value}
        return {"max_waiting_s": 1.0 / self.value}

    def describe(self) -> str:
        """``latency <= 80 ms`` / ``throughput >= 10 /s``."""
        if self.kind == "latency":
            return f"latency <= {self.value * 1e3:g} ms"
        return f"throughput >= {self.value:g} /s"


@dataclass
class SetResult:
    """What became of one candidate set."""

    idx: tuple[int, ...]
    price: float
    #: "memory" / "target" (settled by a bound), "order" (after the answer in the search order:
    #: its bound or key cannot beat it), "solved", or "open" (not reached)
    status: str
    bound: SetBound | None
    meets: bool = False
    proved: bool = True
    latency_s: float | None = None
    throughput_per_s: float | None = None
    energy_j: float | None = None  # energy of the target objective's plan
    least_energy_j: float | None = None  # least energy of a plan meeting the target
    granularity: str = ""
    pex: bool = False
    note: str = ""

    @property
    def boards(self) -> int:
        """Number of boards."""
        return len(self.idx)


@dataclass
class SearchStats:
    """How the search went: sets considered, settled by each bound, solved, and its time."""

    sets: int = 0
    pruned: dict[str, int] = field(default_factory=lambda: {"memory": 0, "target": 0, "order": 0})
    solved: int = 0
    seconds: float = 0.0
    #: solves and seconds until the answer was proved (before the front's extra solves)
    solved_to_answer: int = 0
    seconds_to_answer: float = 0.0

    @property
    def pruned_total(self) -> int:
        """Sets settled without a solve."""
        return sum(self.pruned.values())

    @property
    def pruned_fraction(self) -> float:
        """Fraction of the candidate sets the proved answer needed no solve of."""
        return (self.sets - self.solved_to_answer) / self.sets if self.sets else 0.0


# --- the work of one set (in a worker process) ----------------------------------------------


@dataclass(frozen=True)
class Work:
    """What every solve of a search shares (set once per worker process)."""

    chain: Chain
    candidates: tuple[Candidate, ...]
    target: Target
    time_limit: float
    activation_bytes: int | None
    baud: int


_WORK: list[Work] = []


def _init(work: Work) -> None:
    _WORK[:] = [work]


def _solve_set(idx: tuple[int, ...]) -> dict[str, object]:
    """Plan the set for the target's objective and, when it meets the target and has energy
    data, its least energy under the target (in a worker; returns plain data)."""
    w = _WORK[0]
    target, act, limit = w.target, w.activation_bytes, w.time_limit
    boards = parse_set(w.candidates, idx, w.baud)
    found = _best_plan(w, boards)
    if isinstance(found, dict):
        return found
    planned, used, plan = found
    out: dict[str, object] = {
        "meets": target.met(plan),
        # a set that misses the target is settled when its plan is optimal or the planner's
        # proved bound already misses it
        "proved": plan.optimal or target.out_of_reach(plan.value_bound),
        "latency_s": plan.latency_s,
        "throughput_per_s": plan.throughput_per_s,
        "energy_j": plan.energy_j,
        "granularity": used.granularity,
        "pex": any(layer.loops for layer in used.layers),
    }
    if out["meets"] and plan.energy_j is not None:
        try:
            caps = target.bound_options()
            _, frugal = plan_partial(
                planned, boards, "auto", "energy", "auto", act, time_limit=limit,
                max_latency_s=caps.get("max_latency_s"), max_waiting_s=caps.get("max_waiting_s"),
            )  # fmt: skip
            out["least_energy_j"] = frugal.energy_j if target.met(frugal) else plan.energy_j
            # the set meets the target whether or not its target plan is optimal: the least
            # energy is proved when the energy solve (bounded by the target) is
            out["proved"] = frugal.optimal
        except InfeasibleError:
            out["least_energy_j"] = plan.energy_j
        except SolverError:
            out["least_energy_j"], out["proved"] = plan.energy_j, False
    return out


def _best_plan(w: Work, boards: Boards) -> tuple[Chain, Chain, Plan] | dict[str, object]:
    """The plan of the target's objective on ``boards``: super-node granularity first (PEX
    loops when nothing fits without), then, when that misses the target, operator granularity;
    the better of the two. ``(chain planned, chain with loops, plan)`` or the outcome of a set
    no plan fits."""
    best: tuple[Chain, Chain, Plan] | None = None
    proved, note = True, "no plan fits"
    for _name, base in granularities(w.chain, w.activation_bytes):
        if best is not None and w.target.met(best[2]):
            break
        try:
            used, plan = plan_partial(
                base, boards, "auto", w.target.objective, "auto", w.activation_bytes,
                time_limit=w.time_limit,
            )  # fmt: skip
        except InfeasibleError:
            continue
        except SolverError as exc:
            proved, note = False, str(exc)
            continue
        if best is None or _figure(w.target, plan) < _figure(w.target, best[2]):
            best = (base, used, plan)
    if best is None:
        return {"meets": False, "proved": proved, "note": note}
    return best


def _figure(target: Target, plan: Plan) -> float:
    """The target's figure of a plan as a quantity to minimise."""
    if target.kind == "latency":
        return plan.latency_s
    return 1.0 / plan.throughput_per_s if plan.throughput_per_s > 0 else math.inf


# --- the search -----------------------------------------------------------------------------


def multisets(
    n_types: int, max_boards: int, caps: Sequence[int | None]
) -> Iterator[tuple[int, ...]]:
    """Every multiset of 1..``max_boards`` board types, each type at most its cap."""
    for k in range(1, max_boards + 1):
        for combo in itertools.combinations_with_replacement(range(n_types), k):
            if all(caps[i] is None or combo.count(i) <= caps[i] for i in set(combo)):  # type: ignore[operator]
                yield combo


class Search:
    """One ``choose`` search (module docstring); :meth:`run` fills ``results`` and ``stats``."""

    def __init__(
        self,
        chain: Chain,
        candidates: Sequence[Candidate],
        target: Target,
        *,
        max_boards: int,
        minimise: str = "price",
        jobs: int = 1,
        time_limit: float = 30.0,
        activation_bytes: int | None = None,
        baud: int = 115200,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self.chain, self.cands, self.target = chain, list(candidates), target
        self.max_boards, self.minimise, self.jobs = max_boards, minimise, max(1, jobs)
        self.work = Work(chain, tuple(candidates), target, time_limit, activation_bytes, baud)
        self.on_progress = on_progress
        self.stats = SearchStats()
        self.results: dict[tuple[int, ...], SetResult] = {}
        nan = float("nan")
        clocks = [c.part.clock_mhz * 1e6 for c in self.cands]
        self.run_w = np.array(
            [
                c.energy.run_w(f) if c.energy else nan
                for c, f in zip(self.cands, clocks, strict=True)
            ]
        )
        self.wait_w = np.array(
            [
                c.energy.wait_w(f) if c.energy else nan
                for c, f in zip(self.cands, clocks, strict=True)
            ]
        )
        self.pool: ProcessPoolExecutor | None = None
        #: every set the bounds did not settle was solved (the Pareto front is complete)
        self.front_complete = False
        self.all_sets: list[SetResult] = []
        self.variants: list[Variant] = []

    # --- bounds ---

    def _enumerate(self) -> list[SetResult]:
        """Every candidate set with its price, not yet bounded (status "new")."""
        w = self.work
        self.variants = cost_variants(self.chain, self.cands, w.activation_bytes, w.baud)
        caps = [c.max_count for c in self.cands]
        prices = [c.price_usd for c in self.cands]
        out = [
            SetResult(idx, round(sum(prices[i] for i in idx), 6), "new", None)
            for idx in multisets(len(self.cands), self.max_boards, caps)
        ]
        self.stats.sets = len(out)
        return out

    def _bound(self, r: SetResult) -> None:
        """Bound ``r``; count and record it when the memory or the target bound settles it."""
        if r.bound is not None:
            return
        r.bound = set_bound(self.variants, r.idx, self.run_w, self.wait_w, self._caps())
        r.status = "open"
        if not r.bound.fits:
            r.status = "memory"
        elif not self._may_meet(r.bound):
            r.status = "target"
        if r.status != "open":
            self.stats.pruned[r.status] += 1
            self.results[r.idx] = r

    def _caps(self) -> tuple[float, float]:
        """The target as (latency cap, waiting-time cap), seconds."""
        if self.target.kind == "latency":
            return (self.target.value, math.inf)
        return (math.inf, 1.0 / self.target.value)

    def _may_meet(self, bound: SetBound) -> bool:
        if self.target.kind == "latency":
            return bound.latency_s <= self.target.value * (1 + TOL)
        return bound.waiting_s <= (1.0 / self.target.value) * (1 + TOL)

    def _key(self, r: SetResult) -> tuple[float, ...]:
        if self.minimise == "price":
            return (r.price, r.boards)
        if self.minimise == "boards":
            return (r.boards, r.price)
        assert r.bound is not None
        return (r.bound.energy_j, r.price)

    # --- solving ---

    def _solve(self, batch: Sequence[SetResult]) -> None:
        """Solve ``batch`` (in parallel with ``jobs`` > 1) and record the outcomes."""
        if self.pool is not None:
            outcomes = list(self.pool.map(_solve_set, [r.idx for r in batch]))
        else:
            outcomes = [_solve_set(r.idx) for r in batch]
        for r, got in zip(batch, outcomes, strict=True):
            r.status = "solved"
            for key, value in got.items():
                setattr(r, key, value)
            self.results[r.idx] = r
            self.stats.solved += 1

    def _report(self, best: SetResult | None) -> None:
        if self.on_progress is None:
            return
        s = self.stats
        found = "none yet" if best is None else f"best ${best.price:.2f} ({best.boards} boards)"
        self.on_progress(
            f"choose: {s.sets} sets, {s.pruned_total} settled by bounds, {s.solved} solved, {found}"
        )

    def run(self, front: bool | None = False) -> SetResult | None:
        """Search; the answer (None when no set meets the target)."""
        start = time.perf_counter()
        _init(self.work)
        if self.jobs > 1:
            ctx = get_context("fork")
            args = (self.work,)
            self.pool = ProcessPoolExecutor(
                self.jobs, mp_context=ctx, initializer=_init, initargs=args
            )
        try:
            sets = self._enumerate()
            if self.minimise == "energy":  # the order is the energy bound's: bound them all
                for r in sets:
                    self._bound(r)
                sets = [r for r in sets if r.status == "open"]
            sets.sort(key=self._key)
            self.all_sets = sets
            answer = self._ordered(sets)
            self.stats.solved_to_answer = self.stats.solved
            self.stats.seconds_to_answer = time.perf_counter() - start
            rest = [] if front is False else self._unsettled(sets)
            if front is False:
                self.front_complete = self.stats.pruned["order"] == 0
            else:
                self.front_complete = not rest or bool(front) or len(rest) <= FRONT_SETS
            if rest and self.front_complete:
                for k in range(0, len(rest), 4 * self.jobs):
                    self._solve(rest[k : k + 4 * self.jobs])
                    self._report(answer)
        finally:
            if self.pool is not None:
                self.pool.shutdown()
                self.pool = None
        self.stats.seconds = time.perf_counter() - start
        return answer

    def _unsettled(self, sets: list[SetResult]) -> list[SetResult]:
        """The sets after the answer that the bounds do not settle (bounded now; the search's
        statistics, which are the proved answer's, do not count them)."""
        rest = []
        for r in sets:
            if r.status != "order":
                continue
            if r.bound is None:
                r.bound = set_bound(self.variants, r.idx, self.run_w, self.wait_w, self._caps())
            if r.bound.fits and self._may_meet(r.bound):
                rest.append(r)
        return rest

    def _ordered(self, sets: list[SetResult]) -> SetResult | None:
        """Bound and solve ``sets`` in order until the answer is settled (module docstring);
        the sets after it are never bounded (status "order")."""
        answer: SetResult | None = None
        step = 2 * self.jobs
        k = 0
        while k < len(sets):
            batch: list[SetResult] = []
            while k < len(sets) and len(batch) < step:
                r = sets[k]
                if answer is not None and self._beyond(r, answer):
                    break
                self._bound(r)
                if r.status == "open":
                    batch.append(r)
                k += 1
            if not batch:
                break
            self._solve(batch)
            for r in batch:
                if r.meets and (answer is None or self._better(r, answer)):
                    answer = r
            self._report(answer)
        for r in sets[k:]:
            if r.status in ("new", "open"):
                self.stats.pruned["order"] += 1
                r.status = "order"
                self.results[r.idx] = r
        return answer

    def _beyond(self, r: SetResult, answer: SetResult) -> bool:
        """No set from ``r`` on in the order can beat ``answer``."""
        if self.minimise == "price":
            return r.price > answer.price + 1e-9
        if self.minimise == "boards":
            return r.boards > answer.boards
        best = answer.least_energy_j if answer.least_energy_j is not None else math.inf
        assert r.bound is not None
        return r.bound.energy_j >= best * (1 - TOL)

    def _better(self, r: SetResult, answer: SetResult) -> bool:
        """Is ``r`` preferred to ``answer``: the minimised quantity, then price, boards and the
        target's figure (lower latency or higher throughput)."""
        figure = (
            (r.latency_s or 0.0) if self.target.kind == "latency" else -(r.throughput_per_s or 0.0)
        )
        other = (
            (answer.latency_s or 0.0)
            if self.target.kind == "latency"
            else -(answer.throughput_per_s or 0.0)
        )
        energy = r.least_energy_j if r.least_energy_j is not None else math.inf
        other_e = answer.least_energy_j if answer.least_energy_j is not None else math.inf
        if self.minimise == "price":
            return (r.price, r.boards, figure) < (answer.price, answer.boards, other)
        if self.minimise == "boards":
            return (r.boards, r.price, figure) < (answer.boards, answer.price, other)
        return (energy, r.price, r.boards) < (other_e, answer.price, answer.boards)

    def proved(self, answer: SetResult | None) -> tuple[bool, str]:
        """Whether the answer is proved optimal, and why not."""
        unproved = [r for r in self.results.values() if r.status == "solved" and not r.proved]
        if answer is not None and self.minimise != "energy":
            # a set that meets the target does so whether or not its plan is optimal: only the
            # sets ahead of the answer that missed it unproved leave a doubt
            unproved = [r for r in unproved if not r.meets and self._key(r) <= self._key(answer)]
        elif answer is not None and answer.least_energy_j is not None:
            # an unproved set whose energy bound is no lower than the answer's energy cannot
            # beat it, whether it meets the target or not
            best = answer.least_energy_j * (1 - TOL)
            unproved = [r for r in unproved if r.bound is None or r.bound.energy_j < best]
        if unproved:
            names = "+".join(self.cands[i].name for i in unproved[0].idx)
            return (
                False,
                f"the plans of {len(unproved)} set(s) were not proved optimal (e.g. {names}: the "
                "time limit, or the planner's fallback to upper-bound firmware reserves); "
                "raise --time-limit",
            )
        return True, ""

    def best_reachable(self) -> SetResult | None:
        """No set meets the target: the set with the best figure, proved by solving every set
        whose bound could beat the best found (memory-feasible sets in bound order)."""
        for r in self.all_sets:
            self._bound(r)
        fits = [r for r in self.results.values() if r.status != "memory"]
        fits += [r for r in self.all_sets if r.idx not in self.results]
        lat = self.target.kind == "latency"

        def lower(r: SetResult) -> float:
            assert r.bound is not None
            return r.bound.latency_s if lat else r.bound.waiting_s

        fits.sort(key=lower)
        best: SetResult | None = None

        def figure(r: SetResult) -> float:
            if lat:
                return r.latency_s if r.latency_s is not None else math.inf
            return 1.0 / r.throughput_per_s if r.throughput_per_s else math.inf

        for r in fits:
            if best is not None and lower(r) >= figure(best):
                break
            if r.status != "solved":
                self._solve([r])
            if r.latency_s is not None and (best is None or figure(r) < figure(best)):
                best = r
        return best
