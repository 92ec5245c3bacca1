"""``splitter plan`` as a library call: import a model or profile, solve, build the manifest.

:func:`plan` is what the CLI's ``plan`` command does before it renders; it writes nothing. The
returned :class:`PlanResult` holds the costed chain, the parsed boards, the solver's
:class:`~splitter.ir.Plan` and the plan manifest (:class:`~splitter.manifest.PlanManifest`, the
object ``splitter plan --json`` prints and ``compile`` writes as ``OUT/plan.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from splitter.compile import CompileOptions, StepCallback
from splitter.ir import Boards, Chain, Plan
from splitter.manifest import PlanManifest

#: Progress callback: called with a line while the solver searches (best, bound, gap).
ProgressCallback = Callable[[str], None]


@dataclass(frozen=True, eq=False)
class PlanResult:
    """What :func:`plan` found: the chain it planned (with PEX loops fused where used), the
    boards, the plan and its manifest."""

    chain: Chain
    boards: Boards
    plan: Plan
    manifest: PlanManifest


def plan(
    model: str | Path,
    target: str | Path,
    options: CompileOptions | None = None,
    on_step: StepCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> PlanResult:
    """Place the layers of ``model`` (ONNX, TFLite, or a CSV/JSON layer profile, ``file#name``
    for one profile of several) on the devices of the boards file ``target``.

    ``options`` takes the fields of :class:`~splitter.compile.CompileOptions` that planning
    uses (objective, solver and ``solver_options``, ``input_shapes``, ``activation_bytes``,
    ``granularity`` including ``"auto"``, ``emulated``, ``host_io``, ``partial_execution``).
    Raises :class:`~splitter.errors.InfeasibleError` (a :class:`~splitter.errors.SplitterError`)
    with the reason and the remedies when no plan fits.

    Example::

        result = splitter.plan("models/tiny_cnn.onnx", "models/boards/e2e_tiny2.toml")
        result.manifest.latency_s, [s.device for s in result.manifest.submodels]
    """
    from splitter.compile import make_manifest, make_split_plan
    from splitter.hardware.boards import for_prediction, load_boards
    from splitter.importers import load_chain
    from splitter.partition.granularity import auto_granularity

    opts = options or CompileOptions()
    step = on_step or (lambda _text: None)
    boards = for_prediction(load_boards(target), opts.emulated)
    step(f"importing {model}")
    auto = opts.granularity == "auto"
    chain = load_chain(
        model,
        input_shapes=opts.input_shapes or None,
        activation_bytes=opts.activation_bytes,
        granularity="supernode" if auto else opts.granularity,
    )
    if auto:
        chain = auto_granularity(chain, boards, opts.activation_bytes)
    solver = opts.solver or "auto"
    step(f"solving ({solver}, {opts.objective})")
    if on_progress is not None:
        opts = replace(opts, solver_options={**opts.solver_options, "on_progress": on_progress})
    chain, result, splits = make_split_plan(chain, boards, opts)
    manifest = make_manifest(result, chain, boards, model, target, opts, splits)
    return PlanResult(chain, boards, result, manifest)
