"""``splitter choose`` (issue 26): the answer on three shipped models against a brute force over
every set of up to 3 boards of a reduced catalog, the bounds, the outputs and bad input."""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from splitter.choose import Target, choose, pareto_front
from splitter.choose.bounds import cost_variants, parse_set, set_bound
from splitter.choose.output import boards_toml, write
from splitter.choose.parts import load_parts_file
from splitter.choose.search import SetResult
from splitter.cli import cli, main
from splitter.errors import InfeasibleError
from splitter.graph.chain import build_chain
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.partition.partial import plan_partial

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
REDUCED = """
[[part]]
name = "STM32G071RB"
[[part]]
name = "STM32F401RE"
[[part]]
name = "STM32F446RE"
[[part]]
name = "STM32F405RG"
"""

#: (model, target, what it shows): one board suffices; it needs three boards (and operator
#: granularity or not, whichever plans); it needs PEX partial execution on every set
CASES = [
    ("mlperf_kws_ds_cnn_int8.tflite", Target("latency", 0.3), "one board"),
    ("long_skip.onnx", Target("latency", 60.0), "several boards"),
    ("pex_irb_48.onnx", Target("latency", 5.0), "PEX"),
]


@pytest.fixture(scope="module")
def reduced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("choose") / "parts.toml"
    path.write_text(REDUCED)
    return path


def _meets(chain, boards, target: Target) -> bool:
    """Brute force: does any plan of the planner (super-node or operator granularity, PEX when
    nothing fits without) meet the target on ``boards``?"""
    bases = [chain]
    if chain.graph is not None and any(layer.kind == "super" for layer in chain.layers):
        bases.append(build_chain(chain.graph, granularity="op"))
    for base in bases:
        try:
            _, plan = plan_partial(base, boards, "auto", "latency", "auto", time_limit=30.0)
        except InfeasibleError:
            continue
        if plan.latency_s <= target.value * (1 + 1e-9):
            return True
    return False


@pytest.mark.parametrize(("model", "target", "shows"), CASES, ids=[c[2] for c in CASES])
def test_no_cheaper_set_of_up_to_three_boards_meets_the_target(
    reduced: Path, model: str, target: Target, shows: str
) -> None:
    result = choose(MODELS / model, target, max_boards=3, parts_file=reduced, front=False)
    a = result.answer
    assert a is not None and a.meets and result.proved
    if shows == "one board":
        assert a.boards == 1
    elif shows == "several boards":
        assert a.boards >= 2
    else:
        assert a.pex
    chain = load_chain(MODELS / model)
    cands = result.candidates
    for k in range(1, 4):
        for idx in itertools.combinations_with_replacement(range(len(cands)), k):
            price = sum(cands[i].price_usd for i in idx)
            if price < a.price - 1e-9:
                assert not _meets(chain, parse_set(cands, idx, 115200), target), idx
    assert _meets(chain, parse_set(cands, a.idx, 115200), target)


def test_bounds_never_exceed_a_solved_plan(reduced: Path) -> None:
    """The latency bound of a set is at most what its plan reaches, on every single board."""
    chain = load_chain(MODELS / "mlperf_kws_ds_cnn_int8.tflite")
    cands = load_parts_file(reduced)
    variants = cost_variants(chain, cands, None, 115200)
    nan = np.full(len(cands), np.nan)
    for i in range(len(cands)):
        bound = set_bound(variants, (i,), nan, nan)
        try:
            _, plan = plan_partial(chain, parse_set(cands, (i,), 115200), "auto", "latency")
        except InfeasibleError:
            continue
        assert bound.fits
        assert bound.latency_s <= plan.latency_s * (1 + 1e-9)
        assert bound.waiting_s <= 1 / plan.throughput_per_s * (1 + 1e-9)


def test_minimise_energy_and_boards_and_the_written_files(reduced: Path, tmp_path: Path) -> None:
    model = MODELS / "mlperf_kws_ds_cnn_int8.tflite"
    frugal = choose(
        model, Target("latency", 1.0), max_boards=2, parts_file=reduced, minimise="energy"
    )
    fewest = choose(
        model, Target("latency", 1.0), max_boards=2, parts_file=reduced, minimise="boards"
    )
    assert frugal.answer is not None and fewest.answer is not None
    assert fewest.answer.boards == 1
    solved = [r for r in frugal.results if r.meets]
    assert frugal.answer.least_energy_j == min(r.least_energy_j for r in solved)  # front=True
    front = pareto_front(frugal.results, frugal.target)
    assert frugal.answer in front
    files = write(frugal, tmp_path / "out")
    assert [p.name for p in files] == ["boards.toml", "choose.json", "choose.html"]
    boards = load_boards(tmp_path / "out" / "boards.toml")
    assert [d.part.name for d in boards.devices] == frugal.names(frugal.answer)
    data = json.loads((tmp_path / "out" / "choose.json").read_text())
    assert data["answer"]["parts"] == frugal.names(frugal.answer)
    assert data["front"] and "<svg" in (tmp_path / "out" / "choose.html").read_text()
    assert tomllib.loads(boards_toml(frugal))["device"]
    write(frugal, tmp_path / "out")  # an earlier choose output may be replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    r = CliRunner().invoke(
        cli, ["choose", str(model), "--latency-ms", "1000", "--parts", str(reduced), "-o",
              str(tmp_path / "mine"), "--jobs", "1"],
    )  # fmt: skip
    assert r.exit_code != 0 and (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_a_plan_not_proved_optimal_still_bounds_every_plan(reduced: Path) -> None:
    """The planner's ``value_bound`` (its relaxation's proved optimum) is never above the value
    of the plan it returns, equals it when the plan is proved optimal, and a target below it is
    out of reach (how ``choose`` settles a set whose plan was repaired)."""
    from splitter.partition.planner import plan_value

    chain = load_chain(MODELS / "mlperf_vww_mobilenet_v1_025_int8.tflite")
    cands = load_parts_file(reduced)
    seen_bounds = 0
    for idx in itertools.combinations_with_replacement(range(len(cands)), 2):
        try:
            _, plan = plan_partial(chain, parse_set(cands, idx, 115200), "auto", "throughput")
        except InfeasibleError:
            continue
        value = plan_value(plan, "throughput")
        if plan.value_bound is None:
            continue
        seen_bounds += 1
        assert plan.value_bound <= value * (1 + 1e-9), idx
        if plan.optimal:
            assert math.isclose(plan.value_bound, value, rel_tol=1e-9), idx
        beyond = Target("throughput", 1.01 / plan.value_bound)
        assert beyond.out_of_reach(plan.value_bound) and not beyond.met(plan)
        assert not Target("throughput", 0.99 / plan.value_bound).out_of_reach(plan.value_bound)
    assert seen_bounds > 0
    assert not Target("latency", 1.0).out_of_reach(None)
    assert Target("latency", 1.0).out_of_reach(1.01) and not Target("latency", 1.0).out_of_reach(
        1.0
    )


def test_least_energy_over_three_boards_is_proved_against_brute_force(reduced: Path) -> None:
    """``--minimise energy`` with up to three boards: the answer is proved, and no set of up to
    three boards of the reduced catalog has a plan meeting the target with less energy
    (brute force: every set's least-energy plan under the target's bound, solved directly)."""
    model = MODELS / "mlperf_kws_ds_cnn_int8.tflite"
    target = Target("latency", 0.5)
    result = choose(model, target, max_boards=3, parts_file=reduced, minimise="energy", front=False)
    a = result.answer
    assert a is not None and a.meets and result.proved, result.proof_note
    assert a.least_energy_j is not None
    chain = load_chain(model)
    cands = result.candidates
    least = math.inf
    for k in range(1, 4):
        for idx in itertools.combinations_with_replacement(range(len(cands)), k):
            try:
                _, plan = plan_partial(chain, parse_set(cands, idx, 115200), "auto", "energy",
                                       "auto", max_latency_s=target.value)  # fmt: skip
            except InfeasibleError:
                continue
            if target.met(plan) and plan.energy_j is not None:
                least = min(least, plan.energy_j)
    assert math.isclose(a.least_energy_j, least, rel_tol=1e-9), (a.least_energy_j, least)


def test_pareto_front_drops_dominated_sets() -> None:
    t = Target("latency", 1.0)
    none = None
    a = SetResult((0,), 10.0, "solved", none, meets=True, latency_s=0.5, least_energy_j=2.0)  # type: ignore[arg-type]
    b = SetResult((1,), 12.0, "solved", none, meets=True, latency_s=0.6, least_energy_j=3.0)  # type: ignore[arg-type]
    c = SetResult((2,), 12.0, "solved", none, meets=True, latency_s=0.2, least_energy_j=3.0)  # type: ignore[arg-type]
    d = SetResult((3,), 5.0, "solved", none, meets=False, latency_s=2.0, least_energy_j=1.0)  # type: ignore[arg-type]
    assert pareto_front([a, b, c, d], t) == [a, c]


BAD = [
    (["--latency-ms", "-5"], "--latency-ms -5: give a number > 0"),
    (["--latency-ms", "0"], "--latency-ms 0: give a number > 0"),
    (["--latency-ms", "nan"], "--latency-ms nan: give a number > 0"),
    (["--latency-ms", "1e30"], "at most"),
    (["--throughput", "inf"], "--throughput inf: give a number > 0"),
    ([], "give exactly one target"),
    (["--latency-ms", "10", "--throughput", "5"], "give exactly one target"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_targets_are_one_line_exit_2(args, message, tmp_path, capsys) -> None:
    model = str(MODELS / "mlperf_kws_ds_cnn_int8.tflite")
    with pytest.raises(SystemExit) as exc:
        main(["choose", model, *args, "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ("", "the part list is empty"),
        ('[[part]]\nname = "STM32F446RE"\nprice = -3\n', "price = -3; give a number > 0"),
        ('[[part]]\nname = "STM32F446RE"\nprice = nan\n', "price = nan; give a number > 0"),
        ('[[part]]\nname = "STM32F446RE"\nprice = 1e9\n', "at most 100000"),
        ('[[part]]\nname = "STM32F999"\n', "unknown MCU part"),
        ('[[part]]\nname = "STM32F446RE"\n[[part]]\nname = "STM32F446RE"\n', "listed twice"),
    ],
)
def test_bad_part_lists_are_one_line_exit_2(parts, message, tmp_path, capsys) -> None:
    path = tmp_path / "parts.toml"
    path.write_text(parts)
    model = str(MODELS / "mlperf_kws_ds_cnn_int8.tflite")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "choose",
                model,
                "--latency-ms",
                "100",
                "--parts",
                str(path),
                "-o",
                str(tmp_path / "o"),
            ]
        )
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and message in err and len(err.splitlines()) == 1, err


def test_a_target_nothing_meets_names_the_best_reachable_set(
    reduced: Path, tmp_path, capsys
) -> None:
    model = str(MODELS / "mlperf_kws_ds_cnn_int8.tflite")
    with pytest.raises(SystemExit) as exc:
        main(["choose", model, "--latency-ms", "1", "--parts", str(reduced), "--max-boards", "2",
              "--jobs", "1", "-o", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "no set of up to 2 boards reaches latency <= 1 ms; the best reachable latency is" in err
    best_ms = float(err.split("the best reachable latency is ")[1].split(" ms")[0])
    assert math.isfinite(best_ms) and best_ms > 1
    assert "with STM32" in err and not (tmp_path / "o").exists()


def test_energy_minimisation_refuses_a_listed_part_without_energy_data(
    tmp_path, capsys, monkeypatch
) -> None:
    """A part whose energy data is missing (here: taken out of the shipped table) is refused by
    name when the energy objective needs it, never given a default."""
    import splitter.choose.parts as parts

    shipped = parts.energies()
    monkeypatch.setattr(
        parts, "energies", lambda: {k: v for k, v in shipped.items() if k != "STM32F446RE"}
    )
    path = tmp_path / "parts.toml"
    path.write_text('[[part]]\nname = "STM32F446RE"\n[[part]]\nname = "STM32F401RE"\n')
    model = str(MODELS / "mlperf_kws_ds_cnn_int8.tflite")
    with pytest.raises(SystemExit) as exc:
        main(["choose", model, "--latency-ms", "100", "--minimise", "energy", "--parts",
              str(path), "-o", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "part STM32F446RE has no energy data" in err and "[energy.STM32F446RE]" in err
