"""The simulated pipelined run (splitter/report/pipeline.py) against SPEC.md eq. 13 and eq. 17.

The simulation places every task of N inferences on the devices' timelines, event by event; it
knows nothing of eq. 17's formula. Its steady-state waiting time must equal eq. 17 on the
thesis's reference cases and wherever eq. 17's model applies (``eq17_applies``), and its first
result must arrive after exactly the latency of eq. 13.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_helpers import CASES, case_boards, thesis_costs

from splitter.partition import make_problem, solve
from splitter.partition.problem import close, evaluate
from splitter.report.pipeline import (
    Stage,
    eq17_applies,
    eq17_terms,
    simulate,
    spans,
    steady_waiting,
)


def stages_of(ev) -> list[Stage]:  # type: ignore[no-untyped-def]
    return [
        Stage(dev, c, x)
        for (dev, _, _), c, x in zip(ev.submodels, ev.sub_compute, ev.sub_transfer, strict=True)
    ]


@pytest.mark.parametrize("case", CASES, ids=[c["model"] for c in CASES])
def test_simulated_throughput_is_eq17_on_reference_cases(case: dict) -> None:
    problem = make_problem(thesis_costs(case["model"]), case_boards(case))
    plan = solve(problem, "throughput")
    assert plan.throughput_per_s == pytest.approx(case["throughput_per_s"], abs=5e-7)
    ev = evaluate(problem, plan.assignment)
    stages = stages_of(ev)
    w = steady_waiting(stages)
    assert close(w, ev.waiting_s), (w, ev.waiting_s)
    assert close(1 / w, plan.throughput_per_s)
    sim = simulate(stages, 6)
    assert close(sim.latency_s, ev.latency_s)  # the first inference meets an empty pipeline
    # every device is busy with one task at a time
    for dev in {s.device for s in stages}:
        busy = sorted((t.start, t.end) for t in sim.tasks if t.device == dev and t.end > t.start)
        assert all(a[1] <= b[0] + 1e-12 for a, b in pairwise(busy))


@pytest.mark.parametrize("case", CASES, ids=[c["model"] for c in CASES])
def test_eq17_terms_are_the_evaluation(case: dict) -> None:
    problem = make_problem(thesis_costs(case["model"]), case_boards(case))
    ev = evaluate(problem, solve(problem, "throughput").assignment)
    terms = eq17_terms(stages_of(ev))
    assert terms.bottleneck == ev.bottleneck
    assert close(terms.waiting_s, ev.waiting_s)


def test_eq17_optimistic_when_a_link_between_others_lies_inside_the_bottleneck() -> None:
    """Device 0 runs sub-models 0 and 3; the link 1 -> 2 lies inside its range, which eq. 17
    leaves out, so device 0 is held longer than eq. 17's W."""
    stages = [Stage(0, 1.0, 0.1), Stage(1, 0.2, 0.5), Stage(2, 0.2, 0.1), Stage(0, 1.0, 0.0)]
    terms = eq17_terms(stages)
    assert terms.bottleneck == 0 and terms.other_links[0] == pytest.approx(0.5)
    assert not eq17_applies(stages)
    w = steady_waiting(stages)
    assert close(w, spans(stages)[0])
    assert w == pytest.approx(terms.waiting_s + 0.5)


@st.composite
def plans(draw: st.DrawFn) -> list[Stage]:
    d = draw(st.integers(2, 4))
    k = draw(st.integers(1, 6))
    devs = [draw(st.integers(0, d - 1))]
    for _ in range(k - 1):
        devs.append(draw(st.sampled_from([i for i in range(d) if i != devs[-1]])))
    times = st.floats(0.0, 1.0, allow_nan=False)
    return [
        Stage(dev, draw(times), draw(times) if j + 1 < k else 0.0) for j, dev in enumerate(devs)
    ]


@settings(max_examples=150, deadline=None)
@given(plans())
def test_simulation_equals_eq17_where_its_model_applies(stages: list[Stage]) -> None:
    sim = simulate(stages, 3)
    assert close(sim.latency_s, sum(s.compute_s + s.transfer_s for s in stages))
    if eq17_applies(stages):
        assert close(steady_waiting(stages), eq17_terms(stages).waiting_s)


@settings(max_examples=100, deadline=None)
@given(plans())
def test_one_submodel_per_device_is_max_of_device_loads(stages: list[Stage]) -> None:
    """A plain pipeline (no device twice): W = max_i (L_i + S_i), eq. 17 and reference [9]."""
    once: dict[int, Stage] = {}
    for s in stages:
        once.setdefault(s.device, s)
    stages = list(once.values())
    stages[-1] = Stage(stages[-1].device, stages[-1].compute_s, 0.0)
    assert eq17_applies(stages)
    loads = max(s.compute_s + s.transfer_s for s in stages)
    assert close(steady_waiting(stages), loads)
