"""Which boards to buy: ``splitter choose`` as a library (issue 26).

:func:`choose` imports a model, takes the board types (every catalog part with a list price, or
the user's ``--parts`` list), and searches the sets of up to ``max_boards`` boards for the
cheapest (``minimise="price"``), the fewest (``"boards"``) or the most frugal (``"energy"``:
least energy per inference) set whose optimal plan meets the target
(:mod:`splitter.choose.search`). The result carries the answer, whether it is proved optimal,
the search's statistics and the Pareto front of price, figure and energy over the solved sets;
:mod:`splitter.choose.output` writes ``boards.toml``, ``choose.json`` and ``choose.html``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from splitter.choose.bounds import set_boards
from splitter.choose.parts import Candidate, catalog_candidates, load_parts_file
from splitter.choose.search import MINIMISE, Search, SearchStats, SetResult, Target
from splitter.errors import InfeasibleError, InputFileError
from splitter.importers import load_chain

#: the most boards a search takes (C(types + N - 1, N) sets grow fast)
MAX_BOARDS = 8

__all__ = ["MINIMISE", "ChooseResult", "Target", "choose", "pareto_front"]


@dataclass
class ChooseResult:
    """What :func:`choose` found (module docstring)."""

    model: str
    target: Target
    minimise: str
    max_boards: int
    candidates: list[Candidate]
    skipped: list[str]
    answer: SetResult | None
    proved: bool
    proof_note: str
    stats: SearchStats
    results: list[SetResult] = field(default_factory=list)
    baud: int = 115200

    def names(self, r: SetResult) -> list[str]:
        """The part names of a set, one per board."""
        return [self.candidates[i].name for i in r.idx]

    def label(self, r: SetResult) -> str:
        """``2 x STM32F446RE + STM32L4R5ZI``."""
        counts: dict[str, int] = {}
        for name in self.names(r):
            counts[name] = counts.get(name, 0) + 1
        return " + ".join(f"{k} x {n}" if k > 1 else n for n, k in counts.items())

    @property
    def front(self) -> list[SetResult]:
        """The Pareto front of the solved sets meeting the target (:func:`pareto_front`)."""
        return pareto_front(self.results, self.target)

    def boards_object(self) -> dict[str, object] | None:
        """The chosen set as a boards.toml object (None without an answer)."""
        if self.answer is None:
            return None
        return set_boards(self.candidates, self.answer.idx, self.baud)


def _figure(r: SetResult, target: Target) -> float:
    """The target's figure as a quantity to minimise: latency, or ``1 / throughput``."""
    if target.kind == "latency":
        return r.latency_s if r.latency_s is not None else math.inf
    return 1.0 / r.throughput_per_s if r.throughput_per_s else math.inf


def energy_of(r: SetResult) -> float:
    """The least energy per inference of a set meeting the target (inf when unknown)."""
    if r.least_energy_j is not None:
        return r.least_energy_j
    return r.energy_j if r.energy_j is not None else math.inf


def pareto_front(results: Sequence[SetResult], target: Target) -> list[SetResult]:
    """The solved sets meeting the target that no other such set dominates in (price, figure,
    energy): none is at least as good in all three and better in one. By price."""
    pts = [(r, (r.price, _figure(r, target), energy_of(r))) for r in results if r.meets]

    def dominated(p: tuple[float, ...]) -> bool:
        return any(all(a <= b for a, b in zip(q, p, strict=True)) and q != p for _, q in pts)

    return sorted((r for r, p in pts if not dominated(p)), key=lambda r: (r.price, r.boards))


def candidates_for(
    minimise: str, parts_file: str | Path | None
) -> tuple[list[Candidate], list[str]]:
    """The board types of a search and notes on the catalog parts left out. With
    ``minimise="energy"`` a part without energy data is refused from a user's list and left
    out (with a note) of the catalog's."""
    if parts_file is not None:
        cands, notes = load_parts_file(parts_file), list[str]()
        missing = [c.name for c in cands if c.energy is None]
        if minimise == "energy" and missing:
            raise InputFileError(
                f"{parts_file}: part {missing[0]} has no energy data, so its energy cannot be "
                f"compared; add [energy.{missing[0]}] to splitter/hardware/energy.toml or drop it"
            )
        return cands, notes
    cands, notes = catalog_candidates()
    if minimise == "energy":
        notes += [
            f"{c.name}: no energy data (left out of --minimise energy)"
            for c in cands
            if c.energy is None
        ]
        cands = [c for c in cands if c.energy is not None]
    return cands, notes


def choose(
    model: str | Path,
    target: Target,
    *,
    max_boards: int = 3,
    minimise: str = "price",
    parts_file: str | Path | None = None,
    candidates: Sequence[Candidate] | None = None,
    jobs: int = 1,
    time_limit: float = 30.0,
    front: bool = True,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    activation_bytes: int | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> ChooseResult:
    """Search the sets of up to ``max_boards`` boards (module docstring). Raises
    :class:`InfeasibleError` naming the best reachable figure and its set when no set meets
    the target."""
    if minimise not in MINIMISE:
        raise InputFileError(f"--minimise {minimise}: use one of {', '.join(MINIMISE)}")
    skipped: list[str] = []
    if candidates is None:
        cands, skipped = candidates_for(minimise, parts_file)
    else:
        cands = list(candidates)
    if not cands:
        raise InputFileError(
            "choose: no board type to choose from; give --parts with [[part]] tables"
        )
    chain = load_chain(model, input_shapes=input_shapes, activation_bytes=activation_bytes)
    search = Search(
        chain, cands, target, max_boards=max_boards, minimise=minimise, jobs=jobs,
        time_limit=time_limit, activation_bytes=activation_bytes, on_progress=on_progress,
    )  # fmt: skip
    answer = search.run(front=front)
    if answer is None:
        best = search.best_reachable()
        raise InfeasibleError(_unreachable(str(model), target, max_boards, best, cands))
    proved, note = search.proved(answer)
    return ChooseResult(
        model=str(model), target=target, minimise=minimise, max_boards=max_boards,
        candidates=cands, skipped=skipped, answer=answer, proved=proved, proof_note=note,
        stats=search.stats, results=list(search.results.values()),
    )  # fmt: skip


def _unreachable(
    model: str, target: Target, max_boards: int, best: SetResult | None, cands: Sequence[Candidate]
) -> str:
    """The one-line error of a target no set meets: the best reachable figure and its set."""
    head = f"{model}: no set of up to {max_boards} boards reaches {target.describe()}"
    if best is None:
        return (
            f"{head}: the model fits no set of them; allow more boards (--max-boards) or "
            "bigger parts"
        )
    names = " + ".join(cands[i].name for i in best.idx)
    if target.kind == "latency":
        got = f"the best reachable latency is {best.latency_s * 1e3:.3f} ms"  # type: ignore[operator]
    else:
        got = f"the best reachable throughput is {best.throughput_per_s:.4g} /s"
    return f"{head}; {got}, with {names} (${best.price:.2f}); relax the target or allow more boards"
