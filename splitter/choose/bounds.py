"""Bounds that settle a candidate set of boards without solving its plan.

Each board type (:class:`~splitter.choose.parts.Candidate`) is costed once per chain variant the
planner may use (the imported chain; its operator-granularity chain when it has super-nodes,
:mod:`splitter.partition.granularity`; its PEX chain, :mod:`splitter.partition.partial`): the
usable flash and RAM after the lower-bound firmware reserves, and each layer's time. For a set
``M`` (a multiset of board types) and a variant:

* memory: the set fails when ``sum_{c in M} FLASH_c < sum_j FLASH_j`` (SPEC.md constraint (1))
  or some layer fits no board of the set alone (constraints (4)-(5));
* latency: ``I >= sum_j min_{c in M} L_jc + H + sum of the k smallest comm_j`` (every layer
  runs somewhere; ``H`` the host's input and output transfers the reported latency counts; a
  plan whose layers no ``m`` boards of the set can hold in flash has at least ``k = m - 1``
  cuts at distinct layers, each sending ``OUT_j``);
* waiting time: ``W >= max(max_j min_c L_jc, T, min_j comm_j if k >= 1)``, ``T`` the water
  level at which the boards, each at its fastest MAC rate, absorb every MAC
  (:func:`splitter.partition.bnb.balance_bound`), and a board that sends waits on its send;
* energy: ``E >= sum_j min_c L_jc (delta_c + S_M) + S_M (H + the k cuts)``
  (:func:`splitter.partition.problem.energy_tables`: every board is powered for the whole
  latency, ``S_M`` their sleep powers' sum).

Each bound is taken twice, for the plans that run everything on one board of the set (exact
but for the TIMING records: that board's time, no transfer) and for the plans that use two or
more boards (at least one cut, so at least the cheapest transfer); the set's bound is the least
over both and over the variants that pass its memory test (a plan may use any of them), so it
is a lower bound of what any plan of the set reaches: a set whose bound misses the target is
never solved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from splitter.choose.parts import Candidate
from splitter.cost.pex_chain import partial_chain
from splitter.graph.chain import build_chain
from splitter.hardware.boards import boards_from_dict
from splitter.ir import Boards, Chain
from splitter.partition import host_constant
from splitter.partition.bnb import balance_bound, mac_rates
from splitter.partition.planner import chain_problem


@dataclass(frozen=True)
class Variant:
    """One chain variant costed on every candidate (rows: candidates, columns: layers)."""

    name: str
    flash_total: int
    dev_flash: np.ndarray  # (C,) usable flash after the lower-bound code reserve
    times: np.ndarray  # (C, n) L_jc, inf where layer j does not fit candidate c alone
    rates: np.ndarray  # (C,) fastest MAC rate (MACs per s)
    macs: float
    host_s: float
    #: seconds of a cut after layer ``j`` (``comm_j``, ``j < n - 1``), ascending
    cuts: np.ndarray


@dataclass(frozen=True)
class SetBound:
    """What the bounds say of one set: ``fits`` (some variant passes the memory test) and the
    lower bounds of latency (s), waiting time (s) and energy (J, inf without energy data)."""

    fits: bool
    latency_s: float
    waiting_s: float
    energy_j: float


def variants(chain: Chain, activation_bytes: int | None) -> list[tuple[str, Chain]]:
    """The chains a plan of ``chain`` may use: as imported and by operators, each as it is
    and with its PEX loops."""
    out = []
    for name, base in granularities(chain, activation_bytes):
        out.append((name, base))
        fused = partial_chain(base, activation_bytes)
        if fused is not base:
            out.append((f"{name}+pex", fused))
    return out


def granularities(chain: Chain, activation_bytes: int | None) -> list[tuple[str, Chain]]:
    """``chain`` (super-nodes) and, when it has super-nodes, its operator-granularity chain."""
    out = [("supernode", chain)]
    if chain.graph is not None and any(layer.kind == "super" for layer in chain.layers):
        op = build_chain(chain.graph, activation_bytes=activation_bytes, granularity="op")
        out.append(("op", op))
    return out


def device_table(candidate: Candidate, name: str) -> dict[str, object]:
    """The ``[[device]]`` table of one board of ``candidate`` (what boards.toml gets)."""
    table: dict[str, object] = {"name": name, "mcu": candidate.name}
    if candidate.board is not None:
        table["board"] = candidate.board
    return table


def cost_variants(
    chain: Chain, candidates: Sequence[Candidate], activation_bytes: int | None, baud: int
) -> list[Variant]:
    """Cost every variant of ``chain`` on every candidate alone (module docstring)."""
    out = []
    for name, v in variants(chain, activation_bytes):
        flash, times, rates, host = [], [], [], 0.0
        total = 0
        for c in candidates:
            boards = boards_from_dict({"link": {"baud": baud}, "device": [device_table(c, "x")]})
            p = chain_problem(v, boards, upper=False)
            flash.append(int(p.dev_flash[0]))
            times.append(np.where(p.allowed[:, 0], p.t[:, 0], np.inf))
            rates.append(mac_rates(p)[0])
            total, host = int(p.flash.sum()), host_constant(p)
        macs = float(sum(c.macs for c in v.costs))
        cuts = np.sort(np.asarray(p.comm[:-1], dtype=float))
        out.append(
            Variant(
                name, total, np.array(flash), np.array(times), np.array(rates), macs, host, cuts
            )
        )
    return out


def set_bound(
    variants_: Sequence[Variant],
    idx: Sequence[int],
    run_w: np.ndarray,
    wait_w: np.ndarray,
    caps: tuple[float, float] = (np.inf, np.inf),
) -> SetBound:
    """The bounds of the set ``idx`` (candidate indices, repeats allowed); ``run_w`` /
    ``wait_w`` per candidate (nan without energy data). The energy bound counts only the kinds
    of plan (one board, or a split) whose latency and waiting bounds may meet ``caps`` (the
    target's latency and waiting time): the energy sought is that of a plan meeting it."""
    best = SetBound(False, np.inf, np.inf, np.inf)
    ids = np.asarray(idx)
    sleep = float(wait_w[ids].sum())
    for v in variants_:
        if v.dev_flash[ids].sum() < v.flash_total:
            continue
        t = v.times[ids]  # (k, n)
        if not np.isfinite(t.min(axis=0)).all():
            continue
        delta = run_w[ids] - wait_w[ids] + sleep
        options = _alone(v, ids, t, delta, sleep) + _split(v, ids, t, delta, sleep)
        for lat, wait, energy in options:
            meets = lat <= caps[0] * (1 + 1e-9) and wait <= caps[1] * (1 + 1e-9)
            best = SetBound(
                True,
                min(best.latency_s, lat),
                min(best.waiting_s, wait),
                min(best.energy_j, energy) if meets and np.isfinite(energy) else best.energy_j,
            )
    return best


Option = tuple[float, float, float]


def _alone(
    v: Variant, ids: np.ndarray, t: np.ndarray, delta: np.ndarray, sleep: float
) -> list[Option]:
    """Plans that run every layer on one board of the set (the others powered, idle): its
    ``(I, W, E)`` exactly up to the TIMING records, ``(L + H, L, L (delta + S) + S H)``."""
    out = []
    for r, c in enumerate(ids):
        if v.dev_flash[c] >= v.flash_total and np.isfinite(t[r]).all():
            total = float(t[r].sum())
            out.append((total + v.host_s, total, total * float(delta[r]) + sleep * v.host_s))
    return out


def _split(
    v: Variant, ids: np.ndarray, t: np.ndarray, delta: np.ndarray, sleep: float
) -> list[Option]:
    """Plans over two or more boards: at least ``max(1, cuts_needed)`` cuts (module
    docstring); none when the set has one board or the chain one layer."""
    if len(ids) < 2 or len(v.cuts) == 0:
        return []
    cut = max(1, cuts_needed(v, ids))
    transfers = float(v.cuts[:cut].sum())
    fastest = t.min(axis=0)
    latency = float(fastest.sum()) + v.host_s + transfers
    balance = balance_bound([0.0] * len(ids), list(v.rates[ids]), v.macs)
    waiting = max(float(fastest.max()), balance, float(v.cuts[0]))
    energy = float((delta[:, None] * t).min(axis=0).sum()) + sleep * (v.host_s + transfers)
    return [(latency, waiting, energy)]


def cuts_needed(v: Variant, ids: np.ndarray) -> int:
    """Least number of cuts of any plan on the set: ``m - 1`` with ``m`` the fewest of its
    boards whose flash together holds every layer's (largest first)."""
    flash = np.sort(v.dev_flash[ids])[::-1]
    held = np.cumsum(flash)
    m = int(np.searchsorted(held, v.flash_total)) + 1
    return min(m, len(ids)) - 1


def set_boards(candidates: Sequence[Candidate], idx: Sequence[int], baud: int) -> dict[str, object]:
    """The boards.toml object of a set: one ``[[device]]`` per board, named after its part."""
    devices: list[dict[str, object]] = []
    seen: dict[str, int] = {}
    for i in idx:
        c = candidates[i]
        stem = c.name.lower().removeprefix("stm32")
        seen[stem] = seen.get(stem, 0) + 1
        devices.append(device_table(c, f"{stem}_{seen[stem]}"))
    return {"link": {"baud": baud}, "device": devices}


def parse_set(candidates: Sequence[Candidate], idx: Sequence[int], baud: int) -> Boards:
    """The parsed :class:`Boards` of a set."""
    return boards_from_dict(set_boards(candidates, idx, baud), "choose")
