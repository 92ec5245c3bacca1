"""The ``auto`` portfolio (splitter/partition/portfolio.py), B&B orderings and ``--time-limit``
on the CLI.

The portfolio must return what the exact solvers return (same plan, SPEC.md tie rule), through
each of its paths: the bnb probe, the cpsat/bnb race (MobileNet v1 0.30 over four boards, where
bnb alone needs minutes), dp for latency with CP-SAT joining it after a head start (MLPerf VWW
on four small F405s, where dp alone stalls). Timings are the benchmark's (benchmarks/solvers.py),
never asserted here.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from partition_helpers import thesis_costs
from test_plan_cli import run_cli

from splitter.hardware.catalog import get_part
from splitter.ir import Boards, Device, LayerCost, LinkSpec
from splitter.partition import make_problem, solve
from splitter.partition.bnb import solve_bnb
from splitter.partition.portfolio import race

ROOT = Path(__file__).resolve().parents[1]
FOUR = ("STM32H743ZI", "STM32F446RE", "STM32F401RE", "STM32H723ZG")


def boards_of(parts: tuple[str, ...]) -> Boards:
    devs = []
    for k, name in enumerate(parts):
        part = get_part(name)
        devs.append(
            Device(f"d{k}", part, round(part.flash_kib * 1024), round(part.ram_kib * 1024),
                   part.clock_mhz * 1e6, part.cpm)
        )  # fmt: skip
    return Boards(tuple(devs), LinkSpec(115200, 10))


@pytest.fixture(scope="module")
def four_boards() -> object:
    return make_problem(thesis_costs("mobilenet_v1_030"), boards_of(FOUR))


def test_auto_races_cpsat_where_bnb_stalls(four_boards: object) -> None:
    """bnb alone cannot prove this instance in 0.5 s; auto proves it, with cpsat's answer
    (after the exact polish), as every exact solver would."""
    stalled = solve_bnb(four_boards, "throughput", time_limit=0.5)
    assert not stalled.optimal and stalled.gap is not None and 0 < stalled.gap <= 1
    auto = solve(four_boards, "throughput", "auto")
    cpsat = solve(four_boards, "throughput", "cpsat")
    assert auto.optimal and auto.solver in ("cpsat", "bnb")
    assert auto.assignment == cpsat.assignment


def test_race_first_proof_stops_the_other(four_boards: object) -> None:
    name, result = race(four_boards, "throughput", 30.0, {}, {})
    assert result.optimal and name in ("cpsat", "bnb")


def test_race_time_limit_returns_the_best_answer_unproved(four_boards: object) -> None:
    """Neither entrant proves anything in 1 ms: the better answer comes back, not optimal."""
    _name, result = race(four_boards, "throughput", 0.001, {}, {})
    assert not result.optimal and result.assignment is not None


def test_auto_proves_a_tight_flash_latency_instance() -> None:
    """MLPerf VWW int8 over four F405s cut to 84 KiB has no plan. In the planner's repair round
    (two devices' reserves raised to their code) dp alone may not prove it in its time (its
    passes stall on the flash: within 3 s on a loaded machine it gives up with "not a proof of
    infeasibility", on an idle one it gets through; so dp alone is not asserted here); the
    latency race lets CP-SAT join after dp's head start and prove it: the user gets the reason
    (not enough flash), never "no feasible assignment found"."""
    from splitter.errors import InfeasibleError
    from splitter.hardware.boards import load_boards
    from splitter.importers import load_chain
    from splitter.partition.planner import plan_chain

    chain = load_chain(ROOT / "models" / "mlperf_vww_mobilenet_v1_025_int8.tflite")
    boards = load_boards(ROOT / "models" / "boards" / "split_ad4.toml")
    with pytest.raises(InfeasibleError, match="not enough flash"):
        plan_chain(chain, boards, "latency", "auto")


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_auto_equals_full_search(seed: int, objective: str) -> None:
    rng = random.Random(seed)
    n, d = rng.randint(3, 9), rng.randint(2, 3)
    costs = [LayerCost(rng.randint(0, 300_000), rng.randint(1_000, 50_000),
                       rng.randint(10_000, 3_000_000), rng.randint(100, 20_000))
             for _ in range(n)]  # fmt: skip
    problem = make_problem(costs, boards_of(("STM32F446RE", "STM32L4R5ZI", "STM32F401RE")[:d]))
    try:
        want = solve(problem, objective, "fs")
    except Exception as exc:  # infeasible: auto must say so too
        with pytest.raises(type(exc)):
            solve(problem, objective, "auto")
        return
    got = solve(problem, objective, "auto")
    assert got.optimal and got.assignment == want.assignment


def test_bnb_orderings_on_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """--var-order / --val-order reach bnb (same optimum whatever the order); with a solver
    that has no orderings they are refused, one line, exit 2."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    model, boards = str(root / "models/tiny_cnn.onnx"), str(root / "models/boards/e2e_tiny2.toml")
    base = ["plan", model, "--target", boards, "--objective", "throughput"]
    plans = []
    for var, val in (("input", "fastest"), ("mrv", "lcv"), ("degree", "free_flash")):
        code, out, err = run_cli(capsys, *base, "--solver", "bnb", "--var-order", var,
                                 "--val-order", val, "--json")  # fmt: skip
        assert code == 0, err
        plans.append(out)
    import json

    assert len({json.dumps(json.loads(p)["assignment"]) for p in plans}) == 1
    code, _, err = run_cli(capsys, *base, "--solver", "cpsat", "--var-order", "mrv")
    assert code == 2
    assert err.strip() == (
        "splitter: error: --var-order orders branch and bound; use it with --solver bnb or auto; "
        "see 'splitter plan --help'"
    )


def test_time_limit_on_plan_and_compile(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    """A solve stopped by --time-limit says so, with its gap (plan); compile takes it too."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    profile = f"{root / 'models/profiles/thesis_profiles.json'}#mobilenet_v1_030"
    toml = Path(str(tmp_path)) / "four.toml"
    toml.write_text("[link]\nbaud = 115200\n" + "".join(
        f'[[device]]\nname = "d{k}"\nmcu = "{p}"\n' for k, p in enumerate(FOUR)))  # fmt: skip
    args = ["plan", profile, "--target", str(toml), "--objective", "throughput", "--solver", "bnb",
            "--time-limit", "0.2"]  # fmt: skip
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "not proved optimal (stopped by the time limit), gap " in out
    code, out, err = run_cli(capsys, *args, "--json")
    m = json.loads(out)
    assert m["optimal"] is False and 0 < m["gap"] <= 1
    code, out, err = run_cli(
        capsys, "compile", str(root / "models/tiny_cnn.onnx"), "-t",
        str(root / "models/boards/demo.toml"), "-o", str(Path(str(tmp_path)) / "o"),
        "--no-firmware", "--no-validate", "--solver", "cpsat", "--time-limit", "5", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["solver"] == "cpsat"


#: A CP-SAT model that takes far longer than the test waits: SIGINT lands mid-search.
_LONG_SOLVE = """
import os, signal, threading
from ortools.sat.python import cp_model
from splitter.partition.cpsat import solve_stoppable
m = cp_model.CpModel()
x = [m.new_int_var(0, 1000, f"x{i}") for i in range(60)]
for i in range(59):
    m.add(x[i] * 7 + x[i + 1] * 13 != 500 + i)
m.add_all_different(x)
m.add(sum(x) <= 30000)
m.maximize(sum((i % 7 + 1) * x[i] * (1 if i % 2 else -1) for i in range(60)))
s = cp_model.CpSolver()
s.parameters.max_time_in_seconds = 600
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    status = solve_stoppable(s, m)
except KeyboardInterrupt:
    print("interrupted")
else:
    print("returned", s.status_name(status))
"""


def test_ctrl_c_during_cpsat_interrupts_instead_of_returning_a_plan() -> None:
    """CP-SAT's own SIGINT catching would end the search and hand back a plan; Ctrl-C must
    interrupt the command instead (and promptly: the solve's time limit here is 600 s)."""
    r = subprocess.run(
        [sys.executable, "-c", _LONG_SOLVE], capture_output=True, text=True, timeout=120,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not inherited SIG_IGN
    )  # fmt: skip
    assert r.stdout.strip() == "interrupted", r.stdout + r.stderr
