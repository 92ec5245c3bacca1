"""``splitter compile`` as a library call: import -> plan -> slice -> validate -> write ``OUT``.

:func:`compile_model` is the whole pipeline; the CLI (``splitter/cli/compile_cmd.py``) only
parses arguments and renders. The output directory (:mod:`splitter.outputs`) is written
atomically, so a failure anywhere (bad cut, failed validation, disk full) leaves a previous
``OUT`` untouched:

* ``plan.json``: the plan manifest (:class:`splitter.manifest.PlanManifest`), the same object
  ``plan --json`` prints: per sub-model its device, layers, file, FLASH, RAM, MACs and boundary
  tensors, per device budgets and totals, and per device its links;
* ``submodels/NN_<device>.onnx|.tflite``;
* ``validation.json`` (``{"skipped": true}`` with ``--no-validate``); with ``--quantize int8``
  its ``quantization`` object is the accuracy cost against the float model
  (:func:`splitter.slicing.quantize.quantization_cost`);
* ``<model>_int8.onnx`` with ``--quantize int8``: the QDQ model splitter quantised, planned and
  sliced (``plan.json`` names it; ``run`` checks the boards against it);
* ``report.md``: layer table, plan table, estimates, validation;
* ``firmware/``: the C projects of :mod:`splitter.codegen.firmware` (the single firmware hook,
  :func:`generate_firmware_hook`), unless the C generator cannot handle the model.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from splitter.codegen.escape import md_code, md_text
from splitter.errors import (
    InfeasibleError,
    InputFileError,
    SolverError,
    UnsupportedOpError,
    ValidationError,
)
from splitter.graph.split import LayerSplit
from splitter.hardware.energy import NO_ENERGY
from splitter.importers import LoadedModel
from splitter.ir import Boards, Chain, FirmwareUse, Plan, SubModel, TensorSpec
from splitter.manifest import MANIFEST_FILE, PlanManifest
from splitter.outputs import OutputDir, check_target, normalised_target
from splitter.slicing.boundaries import Cut, SlicedModel, cuts_from_manifest
from splitter.slicing.validate import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    ValidationReport,
    float_range_from_metadata,
    load_input_samples,
    require_pass,
    validate_models,
)

if TYPE_CHECKING:
    from splitter.codegen.firmware import AppOptions

#: Step callback: called with a short description when a (possibly slow) step starts.
StepCallback = Callable[[str], None]


@dataclass(frozen=True)
class CompileOptions:
    """Everything ``splitter compile`` takes besides the model, the boards and ``OUT``."""

    objective: str = "latency"
    solver: str | None = None
    #: ``time_limit``, ``var_order``, ``val_order`` ... as :func:`splitter.partition.solve` takes
    solver_options: Mapping[str, object] = field(default_factory=dict)
    validate: bool = True
    #: validation (and ``--app standalone``) inputs as ``compile --input`` takes them:
    #: ``"X.npy"`` (one input), ``"NAME=X.npy"`` per input, or ``"X.npz"`` keyed by input name
    #: (:func:`splitter.slicing.validate.load_input_samples`, docs/guide/inputs.md)
    input_files: tuple[str, ...] = ()
    force: bool = False
    #: static shape per input name (``--input-shape NAME=DIMS``, repeatable), for dynamic dims
    input_shapes: Mapping[str, tuple[int, ...]] | None = None
    activation_bytes: int | None = None
    #: chain granularity: "supernode" (branches collapsed), "op" (cuts carry live tensors) or
    #: "auto" (``splitter.partition.granularity``)
    granularity: str = "supernode"
    samples: int = DEFAULT_SAMPLES
    seed: int = DEFAULT_SEED
    #: generate the C firmware projects into ``OUT/firmware`` (codegen)
    firmware: bool = True
    #: evaluate this per-layer device assignment instead of solving (tests, what-if runs)
    assignment: tuple[int, ...] | None = None
    #: labelled set (``.npz`` with inputs ``x`` and labels ``y``): accuracy in the validation
    data_file: str | None = None
    #: plan for a run on the emulator (QEMU's clock, emulated calibrations)
    emulated: bool = False
    #: count the host's input and output transfers in the latency (``--no-host-io``: not)
    host_io: bool = True
    #: PEX partial execution: "off", "auto" or "on" (:mod:`splitter.partition.partial`)
    partial_execution: str = "auto"
    #: layer splits (:mod:`splitter.partition.layer_split`): "auto" (layers no board holds),
    #: "search" (also try the heaviest layer), "off"; and the user's fixed ``{layer: k}``
    split: str = "auto"
    split_layers: Mapping[str, int] = field(default_factory=dict)
    #: independent watchdog timeout of every board's firmware in ms (0: none;
    #: :mod:`splitter.codegen.watchdog`)
    watchdog_ms: int = 0
    #: how the firmware is used (``splitter.codegen.firmware.APP_MODES``): the host-driven
    #: harness, a standalone firmware per board, or a library for the product's own project
    app: str = "harness"
    #: the board that delivers results in standalone / library mode: "tail" (or "head")
    result_on: str = "tail"
    #: quantise a float ONNX model first (``"int8"``: :mod:`splitter.slicing.quantize`) on the
    #: samples of ``calibration_data`` (``.npy``)
    quantize: str | None = None
    calibration_data: str | None = None


@dataclass(frozen=True, eq=False)
class CompileResult:
    """What :func:`compile_model` produced (``out_dir`` already in place)."""

    out_dir: Path
    chain: Chain
    boards: Boards
    plan: Plan
    submodels: tuple[SlicedModel, ...]
    validation: ValidationReport | None
    manifest: PlanManifest
    timings: dict[str, float] = field(default_factory=dict)
    firmware: str = ""  # "generated in firmware/", or why not
    #: ``--quantize``: the quantised model's cost against the float model
    quantization: Mapping[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary: where things are and the headline numbers."""
        val = self.validation
        return {
            "out_dir": str(self.out_dir),
            "model": self.chain.source_path,
            "objective": self.plan.objective,
            "solver": self.plan.solver,
            "optimal": self.plan.optimal,
            "gap": self.plan.gap,
            "latency_s": self.plan.latency_s,
            "throughput_per_s": self.plan.throughput_per_s,
            "energy_j": self.plan.energy_j,
            "product": None if self.manifest.product is None else self.manifest.product.to_dict(),
            "harness": None if self.manifest.harness is None else self.manifest.harness.to_dict(),
            "prediction": "emulator" if self.manifest.emulated else "boards",
            "calibration": self.manifest.calibration,
            "submodels": [
                {
                    "index": s.cut.index,
                    "device": s.cut.device,
                    "first_layer": s.cut.first,
                    "last_layer": s.cut.last,
                    "file": f"submodels/{s.file_name}",
                    "bytes": len(s.data),
                }
                for s in self.submodels
            ],
            "validation": None if val is None else {"passed": val.passed, **_worst(val)},
            **({} if self.quantization is None else {"quantization": dict(self.quantization)}),
            "firmware": self.firmware,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
        }


def default_out_dir(model: str | Path) -> Path:
    """``<model stem>-split`` in the current directory."""
    return Path.cwd() / f"{Path(str(model).split('#', 1)[0]).stem}-split"


def compile_model(
    model: str | Path,
    target: str | Path,
    out: str | Path | None = None,
    options: CompileOptions | None = None,
    on_step: StepCallback | None = None,
) -> CompileResult:
    """Plan, slice, validate and write ``out``; see the module docstring for the layout."""
    opts = options or CompileOptions()
    step = on_step or (lambda _text: None)
    out_dir = Path(out) if out is not None else default_out_dir(model)
    check_target(normalised_target(out_dir), force=opts.force)  # fail before the slow work
    timings: dict[str, float] = {}
    clock = _Clock(timings, step)
    check_quantize_options(opts)
    with tempfile.TemporaryDirectory(prefix="splitter-quantize-") as tmp:
        quantized = None
        if opts.quantize:
            with clock("quantize", f"quantising {Path(model).name} to {opts.quantize}"):
                quantized = quantize_step(Path(model), opts, Path(tmp), out_dir)
        try:
            return _compile(model, target, out_dir, opts, clock, quantized)
        except InfeasibleError as exc:
            if quantized is None:
                raise
            raise InfeasibleError(_without_path(str(exc), quantized.path)) from None


def _without_path(message: str, path: Path) -> str:
    """``message`` without the advice that names ``path`` (the quantised model in a temporary
    directory, gone when compile returns): the "; or "-separated remedies that mention it go."""
    if str(path) not in message:
        return message
    head, sep, tail = message.partition("; what plans: ")
    kept = [r for r in tail.split("; or ") if str(path) not in r] if sep else []
    if kept:
        return head + sep + "; or ".join(kept)
    return head.replace(str(path), path.name)


@dataclass(frozen=True)
class Quantized:
    """A model splitter quantised: where it is now, where ``OUT`` will hold it, its cost."""

    path: Path
    final: Path
    cost: Mapping[str, Any]


def check_quantize_options(opts: CompileOptions) -> None:
    """``--quantize`` and ``--calibration-data`` come together; one line otherwise."""
    from splitter.slicing.quantize import SCHEMES

    if opts.quantize is not None and opts.quantize not in SCHEMES:
        raise InputFileError(
            f"--quantize {opts.quantize}: not a scheme splitter runs; use --quantize "
            f"{' or '.join(SCHEMES)}"
        )
    if opts.quantize and not opts.calibration_data:
        raise InputFileError(
            f"--quantize {opts.quantize} needs --calibration-data X.npy (float32 samples of "
            "the model's input, one array or a stack of them)"
        )
    if opts.calibration_data and not opts.quantize:
        raise InputFileError(
            f"{opts.calibration_data}: --calibration-data is read by --quantize int8 only; add "
            "--quantize int8 or drop it"
        )


def quantize_step(model: Path, opts: CompileOptions, tmp: Path, out_dir: Path) -> Quantized:
    """Quantise ``model`` into ``tmp`` and measure its cost against the float model on the
    ``--data`` inputs, else on the calibration samples."""
    from splitter.slicing.quantize import calibration_samples, quantization_cost, quantize_int8

    assert opts.calibration_data is not None
    name = f"{model.stem}_{opts.quantize}.onnx"
    path = quantize_int8(model, opts.calibration_data, tmp / name)
    if opts.data_file:
        from splitter.importers import load_chain
        from splitter.slicing.validate import load_labelled

        chain = load_chain(path)
        out_size = math.prod(chain.layers[-1].output.shape)
        samples = list(load_labelled(opts.data_file, chain.layers[0].output, out_size).inputs)
        source = f"--data {opts.data_file}"
    else:
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
        dims = graph.input[0].type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
        samples = calibration_samples(opts.calibration_data, graph.input[0].name, shape)
        source = f"calibration {opts.calibration_data}"
    cost = quantization_cost(model, path, samples, source)
    return Quantized(path, out_dir.resolve() / name, cost)


def _compile(
    model: str | Path,
    target: str | Path,
    out_dir: Path,
    opts: CompileOptions,
    clock: _Clock,
    quantized: Quantized | None,
) -> CompileResult:
    """:func:`compile_model` from the import on (of the quantised model, if there is one)."""
    source = quantized.path if quantized else model
    with clock("import", f"importing {Path(source).name}"):
        loaded, chain, boards = _load(source, target, opts)
        check_input_files(chain, opts.input_files)
        check_data_file(chain, opts)
        boards = replace(boards, firmware=firmware_use(chain, opts))
    with clock("plan", "solving the partition"):
        chain, plan, splits = plan_with_samples(chain, boards, opts)
    if splits:
        from splitter.slicing.split_source import split_loaded

        loaded = split_loaded(loaded, splits)
    named = quantized.final if quantized else model
    manifest = make_manifest(plan, chain, boards, named, target, opts, splits)
    if opts.firmware and opts.watchdog_ms:
        from splitter.codegen.firmware import check_watchdog

        check_watchdog(boards, manifest, opts.watchdog_ms)  # before slicing and validating
    app = app_options(manifest, opts, boards)  # an --app the plan cannot support: refused here
    cuts = cuts_from_manifest(manifest)
    with clock("slice", f"slicing into {len(cuts)} sub-model{'' if len(cuts) == 1 else 's'}"):
        sliced = slice_model(loaded, cuts)
    report = None
    if opts.validate:
        with clock("validate", f"validating on {opts.samples}+ inputs"):
            report = validate_submodels(loaded, sliced, opts)
    if quantized is not None and report is not None:
        report = replace(report, quantization=dict(quantized.cost))
    with clock("write", f"writing {out_dir}"):
        final, firmware = _write(
            out_dir, opts, chain, boards, (plan, manifest, app), sliced, report, clock, quantized
        )
    cost = quantized.cost if quantized else None
    return CompileResult(
        final, chain, boards, plan, tuple(sliced), report, manifest, clock.timings, firmware, cost
    )


class _Clock:
    """Times named steps into ``timings`` and announces each through the step callback."""

    def __init__(self, timings: dict[str, float], step: StepCallback) -> None:
        self.timings, self.step = timings, step

    @contextmanager
    def __call__(self, name: str, text: str) -> Iterator[None]:
        self.step(text)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = time.perf_counter() - start


# --- steps --------------------------------------------------------------------------------


def _load(
    model: str | Path, target: str | Path, opts: CompileOptions
) -> tuple[LoadedModel, Chain, Boards]:
    """Read the model once (:func:`load_model`), cost it as a chain, parse the board file."""
    from splitter.graph.chain import build_chain
    from splitter.hardware.boards import for_prediction, load_boards
    from splitter.importers import MODEL_SUFFIXES, load_model

    if Path(model).suffix.lower() not in MODEL_SUFFIXES:
        raise InputFileError(
            f"{model}: compile needs an .onnx or .tflite model (a layer profile has no weights "
            "to slice); use 'splitter plan' for profiles"
        )
    loaded = load_model(model, input_shapes=opts.input_shapes)
    auto = opts.granularity == "auto"
    granularity = "supernode" if auto else opts.granularity
    chain = build_chain(
        loaded.graph, activation_bytes=opts.activation_bytes, granularity=granularity
    )
    boards = for_prediction(load_boards(target), opts.emulated)
    if auto:
        from splitter.partition.granularity import auto_granularity

        chain = auto_granularity(chain, boards, opts.activation_bytes)
    return loaded, chain, boards


def graph_input_specs(chain: Chain) -> tuple[TensorSpec, ...]:
    """The model's inputs in the graph's order (a layer profile: its input layer's tensor)."""
    if chain.graph is None:
        return (chain.layers[0].input or chain.layers[0].output,)
    return tuple(chain.graph.tensors[name] for name in chain.graph.inputs)


def check_input_files(chain: Chain, input_files: Sequence[str | Path]) -> None:
    """Reject ``--input`` files of the wrong shape or dtype, or an input left out, before any
    slow step (:func:`~splitter.slicing.validate.load_input_samples`)."""
    load_input_samples(input_files, graph_input_specs(chain))


def firmware_use(chain: Chain, opts: CompileOptions) -> FirmwareUse:
    """What the planner counts for ``--app`` / ``--result-on``: the mode and, in standalone
    mode, how many sample inputs the head board compiles in (those of ``--input``, else
    ``codegen.firmware.APP_DEFAULT_SAMPLES`` seeded ones)."""
    from splitter.codegen.firmware import APP_DEFAULT_SAMPLES, APP_MODES

    if opts.app not in APP_MODES:
        raise InputFileError(f"--app {opts.app!r}: choose one of {', '.join(APP_MODES)}")
    samples = 0
    if opts.app == "standalone":
        loaded = load_input_samples(opts.input_files, graph_input_specs(chain))
        samples = len(loaded) or APP_DEFAULT_SAMPLES
    return FirmwareUse(opts.app, opts.result_on, samples)


def check_data_file(chain: Chain, opts: CompileOptions) -> None:
    """Reject a bad ``--data`` set (or one given with ``--no-validate``) before any slow step."""
    if opts.data_file is None:
        return
    if not opts.validate:
        raise InputFileError(
            f"{opts.data_file}: --data is used by the validation; drop --no-validate"
        )
    inputs = graph_input_specs(chain)
    if len(inputs) != 1:
        raise InputFileError(
            f"{opts.data_file}: --data (a labelled set) takes a model with one input, this one "
            f"has {len(inputs)} ({', '.join(t.name for t in inputs)}); validate with --input "
            "NAME=X.npy per input, or one .npz keyed by input name, instead"
        )
    from math import prod

    from splitter.slicing.validate import load_labelled

    load_labelled(opts.data_file, chain.layers[0].output, prod(chain.layers[-1].output.shape))


def plan_with_samples(
    chain: Chain, boards: Boards, opts: CompileOptions
) -> tuple[Chain, Plan, tuple[LayerSplit, ...]]:
    """:func:`make_split_plan`; when no plan fits only because of the standalone head's sample
    inputs (a plan without them does), the refusal names the head and its samples."""
    from splitter.errors import BoardFileError, SplitterError
    from splitter.partition.planner import firmware_needs, link_model

    try:
        return make_split_plan(chain, boards, opts)
    except SplitterError:
        use = boards.firmware
        if use.app != "standalone" or not use.samples:
            raise
        bare = replace(boards, firmware=replace(use, samples=0))
        try:
            found, plan, _ = make_split_plan(chain, bare, opts)
        except SplitterError:
            pass
        else:
            head = plan.submodels[0]
            dev = boards.devices[head.device_index]
            need = firmware_needs(found, bare, plan.submodels)[head.device_index]
            weights = sum(
                found.layers[j].cost.flash
                for s in plan.submodels
                if s.device_index == head.device_index
                for j in range(s.first, s.last + 1)
            )
            samples = use.samples * link_model(found).input_bytes
            raise BoardFileError(
                f"device {dev.name}: --app standalone adds {samples} B of sample inputs to its "
                f"{weights + (need[0] if need else 0)} B of weights and code, above its "
                f"{dev.flash_bytes} B of flash; pass fewer --input samples, give it more flash "
                "or use --app library"
            ) from None
        raise


def make_split_plan(
    chain: Chain, boards: Boards, opts: CompileOptions
) -> tuple[Chain, Plan, tuple[LayerSplit, ...]]:
    """:func:`make_plan` over the layer splits of :mod:`splitter.partition.layer_split`: the
    chain planned (the op chain of the split graph when a layer is split), the plan and the
    splits."""
    from splitter.partition.layer_split import op_chain_of, plan_with_splits

    found = plan_with_splits(
        chain,
        boards,
        lambda c: make_plan(c, boards, opts),
        op_chain_of(opts.activation_bytes),
        requested=opts.split_layers,
        mode=opts.split,
        objective=opts.objective,
        trial_fn=lambda c: make_plan(c, boards, opts, explain=False),
    )
    return found.chain, found.plan, found.splits


def make_plan(
    chain: Chain, boards: Boards, opts: CompileOptions, *, explain: bool = True
) -> tuple[Chain, Plan]:
    """Solve the partition, or evaluate ``opts.assignment`` when one is given (with
    ``partial_execution="on"`` the assignment is over the chain with its loops fused); returns
    the chain the plan is for (:mod:`splitter.partition.partial`) and the plan. ``explain``:
    a "does not fit" error carries the remedies that plan (:mod:`splitter.remedies`)."""
    from splitter.cost.pex_chain import partial_chain
    from splitter.partition.partial import plan_partial
    from splitter.remedies import plan_or_explain

    if opts.assignment is not None:
        if opts.partial_execution == "on":
            chain = partial_chain(chain, opts.activation_bytes)
        plan = plan_from_assignment(
            chain, boards, opts.assignment, opts.objective, host_io=opts.host_io
        )
        return chain, plan
    solve = plan_or_explain if explain else plan_partial
    return solve(
        chain, boards, opts.partial_execution, opts.objective, opts.solver or "auto",
        opts.activation_bytes, host_io=opts.host_io, **opts.solver_options,
    )  # fmt: skip


def plan_from_assignment(
    chain: Chain,
    boards: Boards,
    assignment: Sequence[int],
    objective: str = "latency",
    *,
    host_io: bool = True,
) -> Plan:
    """A :class:`Plan` for a given per-layer device assignment (SPEC.md objectives)."""
    from splitter.partition.planner import chain_problem, firmware_overflow
    from splitter.partition.problem import evaluate

    problem = chain_problem(chain, boards, upper=False, host_io=host_io)
    ev = evaluate(problem, assignment)
    if not ev.feasible:
        raise SolverError(f"assignment {list(assignment)} is infeasible: {ev.violations[0]}")
    plan = Plan(
        objective=objective,
        solver="given",
        optimal=False,
        nodes=1,
        solve_time_s=0.0,
        assignment=tuple(ev.assignment),
        submodels=tuple(SubModel(k, d, f, last) for k, (d, f, last) in enumerate(ev.submodels)),
        latency_s=ev.latency_s,
        throughput_per_s=ev.throughput_per_s,
        throughput_ref9_per_s=ev.throughput_ref9_per_s,
    )
    over = firmware_overflow(chain, boards, plan)
    if over is not None:
        raise SolverError(f"assignment {list(assignment)} is infeasible: {over}")
    return plan


def make_manifest(
    plan: Plan,
    chain: Chain,
    boards: Boards,
    model: str | Path,
    target: str | Path,
    opts: CompileOptions,
    splits: Sequence[LayerSplit] = (),
) -> PlanManifest:
    """The plan manifest, exactly as ``splitter plan --json`` prints it for the same inputs."""
    from splitter.partition.planner import build_manifest

    return build_manifest(
        plan,
        chain,
        boards,
        model_path=model,
        boards_path=target,
        input_shapes=opts.input_shapes,
        activation_bytes=opts.activation_bytes,
        host_io=opts.host_io,
        splits=splits,
    )


def slice_model(model: LoadedModel, cuts: Sequence[Cut]) -> list[SlicedModel]:
    """Sub-model files' contents for ``cuts``; each file exposes the cut's boundary tensors."""
    if model.format == "onnx":
        from splitter.slicing.onnx_slice import slice_onnx

        sliced = slice_onnx(model, cuts)
    else:
        from splitter.slicing.tflite_slice import slice_tflite

        sliced = slice_tflite(model, cuts)
    for sub in sliced:
        _check_io(sub)
    return sliced


def _check_io(sub: SlicedModel) -> None:
    """The file's inputs/outputs are the manifest's boundary tensors (names and shapes)."""
    cut = sub.cut
    for want, got in ((cut.inputs, sub.inputs), (cut.outputs, sub.outputs)):
        got = tuple(_as_held(t, w) for t, w in zip(got, want, strict=False))
        if [(t.name, t.shape) for t in want] != [(t.name, t.shape) for t in got]:
            raise ValidationError(
                f"sub-model {sub.file_name}: file exposes "
                f"{[(t.name, t.shape) for t in got]} but the plan says "
                f"{[(t.name, t.shape) for t in want]}; the cut is wrong, report it"
            )


def _as_held(got: TensorSpec, want: TensorSpec) -> TensorSpec:
    """``got`` (a sub-model file's tensor) in the layout the plan holds it: a rank-4 int8
    tensor of an NCHW QDQ ONNX file is NHWC in the plan (``splitter.importers.onnx_qdq``)."""
    nhwc = tuple(got.shape[p] for p in (0, 2, 3, 1)) if len(got.shape) == 4 else got.shape
    if want.dtype == "int8" and got.dtype == "int8" and want.shape == nhwc:
        return replace(got, shape=nhwc)
    return got


def validate_submodels(
    model: LoadedModel, sliced: Sequence[SlicedModel], opts: CompileOptions
) -> ValidationReport:
    """Run the original and the chain; raise :class:`ValidationError` unless it passes.

    Float inputs are standard normal unless the model's metadata gives ``input_range``.
    """
    float_range = float_range_from_metadata(model.graph.metadata, str(model.path))
    report = validate_models(
        model,
        [(s.file_name, s.data) for s in sliced],
        count=opts.samples,
        seed=opts.seed,
        input_files=opts.input_files,
        float_range=float_range,
        data_file=opts.data_file,
    )
    require_pass(report, model.path)
    return report


def validation_json(
    report: ValidationReport | None, quantization: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``validation.json``'s object (``{"skipped": true}`` with ``--no-validate``, with the
    quantisation cost when there is one)."""
    quant = {} if quantization is None else {"quantization": dict(quantization)}
    return report.to_dict() if report else {"skipped": True, **quant}


# --- writing ------------------------------------------------------------------------------


def _write(
    out_dir: Path,
    opts: CompileOptions,
    chain: Chain,
    boards: Boards,
    planned: tuple[Plan, PlanManifest, AppOptions],
    sliced: Sequence[SlicedModel],
    report: ValidationReport | None,
    clock: _Clock,
    quantized: Quantized | None = None,
) -> tuple[Path, str]:
    """Write everything into a temporary directory and swap it into place.

    Returns ``OUT`` and the firmware status line (``"generated"`` or why it was not).
    """
    plan, manifest, app = planned
    with OutputDir(out_dir, force=opts.force) as out:
        for sub in sliced:
            out.write_bytes(f"submodels/{sub.file_name}", sub.data)
        if quantized is not None:
            out.write_bytes(quantized.final.name, quantized.path.read_bytes())
        out.write_text(MANIFEST_FILE, manifest.to_json() + "\n")
        cost = quantized.cost if quantized else None
        out.write_json("validation.json", validation_json(report, cost))
        firmware = "skipped (--no-firmware)"
        if opts.firmware:
            with clock("firmware", "generating the firmware projects"):
                firmware = generate_firmware_hook(
                    out.root,
                    chain,
                    boards,
                    manifest,
                    app,
                    final=out.target,
                    watchdog_ms=opts.watchdog_ms,
                )
        text = render_report(chain, manifest, sliced, report, firmware)
        out.write_text("report.md", text)
        with clock("report", "drawing report.html"):
            _write_html(out, chain, plan, manifest, validation_json(report, cost))
    return out.target, firmware


def _write_html(
    out: OutputDir,
    chain: Chain,
    plan: Plan,
    manifest: PlanManifest,
    validation: Mapping[str, Any],
) -> None:
    """``report.json`` (what the HTML report needs beyond plan.json) and ``report.html``."""
    from splitter.report import REPORT_DATA_FILE, REPORT_FILE, report_data
    from splitter.report import render_report as render_html

    data = report_data(chain, plan)
    out.write_json(REPORT_DATA_FILE, data.to_dict())
    out.write_text(REPORT_FILE, render_html(manifest, data, validation))


def app_options(
    manifest: PlanManifest, opts: CompileOptions, boards: Boards | None = None
) -> AppOptions:
    """``--app`` / ``--result-on`` checked against the plan (``codegen.firmware.check_app``),
    with the standalone example's sample inputs read from ``--input`` (each sample's inputs
    concatenated in plan.json order, as ``splitter_submit`` takes them); refused before
    anything is sliced or written."""
    from splitter.codegen.firmware import AppOptions, check_app, check_return_link
    from splitter.device.host import to_wire

    samples: list[bytes] = []
    inputs = manifest.submodels[0].inputs
    if opts.app == "standalone" and opts.input_files:
        for sample in load_input_samples(opts.input_files, inputs):
            samples.append(b"".join(to_wire(sample[t.name]) for t in inputs))
    app = AppOptions(opts.app, opts.result_on, tuple(samples))
    check_app(manifest, app)
    if boards is not None and opts.firmware:
        check_return_link(boards, manifest, app)
    return app


def generate_firmware_hook(
    root: Path,
    chain: Chain,
    boards: Boards,
    manifest: PlanManifest,
    app: AppOptions | None = None,
    *,
    final: Path | None = None,
    watchdog_ms: int = 0,
) -> str:
    """The one firmware hook: ``codegen.firmware.generate_firmware`` writes ``root/firmware``
    (``app``: ``--app`` / ``--result-on``; ``final``: where ``root`` ends up; ``watchdog_ms``:
    ``compile --watchdog-ms``).

    The sub-models stand on their own for other deployment tools, so a model the C generator
    cannot handle (:class:`UnsupportedOpError`, e.g. int8 or NHWC TFLite) is not a compile
    failure: the reason is returned and reported instead. Every other error propagates.
    """
    from splitter.codegen.firmware import generate_firmware

    try:
        generate_firmware(
            root, chain, boards, manifest, final_dir=final, watchdog_ms=watchdog_ms, app=app
        )
    except UnsupportedOpError as exc:
        return f"not generated: {' '.join(str(exc).split())}"
    return "generated in firmware/"


def render_report(
    chain: Chain,
    manifest: PlanManifest,
    sliced: Sequence[SlicedModel],
    report: ValidationReport | None,
    firmware: str = "",
) -> str:
    """``report.md``: layer table, plan table, estimates and validation, as Markdown."""
    device_of = {
        j: sub.cut.device for sub in sliced for j in range(sub.cut.first, sub.cut.last + 1)
    }
    lines = [
        f"# splitter compile: {md_text(chain.name)}",
        "",
        f"Model: {md_code(chain.source_path)}",
        "",
    ]
    lines += [
        "## Layers",
        "",
        "| # | layer | op | output | FLASH B | RAM B | MACs | OUT B | device |",
    ]
    lines += ["|---:|---|---|---|---:|---:|---:|---:|---|"]
    for layer in chain.layers:
        c = layer.cost
        lines.append(
            f"| {layer.index} | {md_text(layer.name)} | {md_text(layer.op_label)} "
            f"| {list(layer.output.shape)} | {c.flash} | {c.ram} | {c.macs} | {c.out_bytes} "
            f"| {md_text(device_of.get(layer.index, ''))} |"
        )
    lines += ["", "## Plan", "", "| sub-model | device | layers | file | bytes | in | out |"]
    lines += ["|---:|---|---|---|---:|---|---|"]
    for sub in sliced:
        ins = ", ".join(f"{md_code(t.name)} {list(t.shape)} {t.dtype}" for t in sub.inputs)
        outs = ", ".join(f"{md_code(t.name)} {list(t.shape)} {t.dtype}" for t in sub.outputs)
        lines.append(
            f"| {sub.cut.index} | {md_text(sub.cut.device)} | {sub.cut.first}..{sub.cut.last} "
            f"| {md_code('submodels/' + sub.file_name)} | {len(sub.data)} | {ins} | {outs} |"
        )
    if manifest.layer_splits:
        lines += ["", "## Layer splits", ""]
        lines += [f"- {md_text(e.describe())}" for e in manifest.layer_splits]
    lines += ["", "## Estimates", "", *_estimate_lines(manifest)]
    lines += ["", "## Validation", "", *_validation_lines(report)]
    lines += ["", "## Firmware", "", firmware or "not requested"]
    return "\n".join(lines) + "\n"


def _estimate_lines(m: PlanManifest) -> list[str]:
    gap = "" if m.gap is None else f" (gap {m.gap:.2%})"
    pex = [
        f"- sub-model {s.index} ({md_text(s.device)}): partial execution (PEX), RAM "
        f"{s.ram_bytes} B, {s.ram_whole_bytes} B run op by op, {len(s.loops)} loop(s)"
        for s in m.submodels
        if s.loops
    ]
    return [
        f"- objective: {m.objective}, solver {m.solver}, "
        f"{'proved optimal' if m.optimal else 'not proved optimal'}{gap}, {m.nodes} nodes",
        f"- latency (SPEC.md eq. 13): {m.latency_s * 1e3:.3f} ms, host I/O "
        f"{m.host_io.seconds * 1e3:.3f} ms {'included' if m.host_io.counted else 'not included'}"
        f" (input {m.host_io.input.wire_bytes} B, output {m.host_io.output.wire_bytes} B on the "
        f"wire; links: {'bytes on the wire' if m.link_model == 'wire' else 'payload only'})",
        *([f"- link rates: {md_text(m.rates_text())}"] if m.link_bauds else []),
        f"- throughput (eq. 17): {_rate(m.throughput_per_s)} inferences/s; "
        f"reference [9]: {_rate(m.throughput_ref9_per_s)} inferences/s",
        *(f"- {line}" for line in m.headline_lines()),
        *(f"- memory {md_text(d.memory_line())}" for d in m.devices if d.name in m.device_totals()),
        f"- {m.prediction_note}",
        _energy_md(m),
        *pex,
    ]


def _energy_md(m: PlanManifest) -> str:
    """The report's energy line: total and per board (``plan.json``'s ``energy``)."""
    if m.energy is None:
        return f"- {NO_ENERGY}"
    boards = "; ".join(
        f"{md_text(d.name)} ({d.mcu}) {1e3 * d.total_j:.3f} mJ = compute {1e3 * d.compute_j:.3f}"
        f" + transfer {1e3 * d.transfer_j:.3f} + waiting {1e3 * d.wait_j:.3f}"
        for d in m.energy.devices
    )
    return f"- energy per inference: {1e3 * m.energy.total_j:.3f} mJ ({boards})"


def _rate(x: float | None) -> str:
    return "inf" if x is None else f"{x:.3f}"


def _validation_lines(report: ValidationReport | None) -> list[str]:
    if report is None:
        return ["Skipped (`--no-validate`)."]
    lines = [
        f"{'Passed' if report.passed else 'FAILED'} on {len(report.samples)} inputs with "
        f"{report.runtime} (float: max-abs <= {report.tolerance.get('float_max_abs')}, "
        "integer: bit-exact).",
        "",
        "| output | dtype | L2R | MAE | RMSE | cosine | max-abs | max-rel | pass |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in report.outputs:
        lines.append(
            f"| {md_code(s.name)} | {s.dtype} | {s.l2r:.3g} | {s.mae:.3g} | {s.rmse:.3g} "
            f"| {s.cosine:.9f} | {s.max_abs:.3g} | {s.max_rel:.3g} "
            f"| {'yes' if s.passed else 'NO'} |"
        )
    if report.quantization is not None:
        from splitter.slicing.quantize import cost_summary

        lines += ["", cost_summary(report.quantization) + "."]
    lab = report.labelled
    if lab is not None:
        lines += [
            "",
            f"Labelled data {md_code(lab['file'])} ({lab['samples']} inputs, output "
            f"{md_code(lab['output'])}): accuracy {lab['accuracy_split']:.4f} split, "
            f"{lab['accuracy_original']:.4f} original, agreement {lab['agreement']:.4f} "
            "(confusion matrix in report.html and validation.json).",
        ]
    if report.boundaries:
        lines += [
            "",
            "Each sub-model's output against the original model's tensor of the same name:",
            "",
            "| sub-model | tensor | dtype | max-abs | bit-exact |",
            "|---:|---|---|---:|---|",
        ]
        for b in report.boundaries:
            lines.append(
                f"| {b.submodel} | {md_code(b.name)} | {b.dtype} | {b.max_abs:.3g} "
                f"| {'yes' if b.exact else 'no'} |"
            )
    return lines


def _worst(report: ValidationReport) -> dict[str, Any]:
    worst = max(report.outputs, key=lambda s: s.max_abs)
    return {
        "worst_output": worst.name,
        "max_abs": worst.max_abs,
        "max_rel": worst.max_rel,
        "rmse": worst.rmse,
        "mae": worst.mae,
        "l2r": worst.l2r,
        "cosine": worst.cosine,
        "inputs": len(report.samples),
        **({} if report.labelled is None else {"labelled": dict(report.labelled)}),
    }
