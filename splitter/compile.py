"""``splitter compile`` as a library call: import -> plan -> slice -> validate -> write ``OUT``.

:func:`compile_model` is the whole pipeline; the CLI (``splitter/cli/compile_cmd.py``) only
parses arguments and renders. The output directory (:mod:`splitter.outputs`) is written
atomically, so a failure anywhere (bad cut, failed validation, disk full) leaves a previous
``OUT`` untouched:

* ``plan.json``: the plan as ``plan --json`` prints it, plus per sub-model its file and the name,
  shape, dtype and byte size of every tensor crossing its boundaries, and per device its links
  (which device it receives from / sends to, in order; ``"host"`` feeds the first sub-model and
  reads the last);
* ``submodels/NN_<device>.onnx|.tflite``;
* ``validation.json`` (``{"skipped": true}`` with ``--no-validate``);
* ``report.md``: layer table, plan table, estimates, validation;
* ``firmware/``: the C projects of :mod:`codegen.firmware` (the single firmware hook,
  :func:`generate_firmware_hook`), unless the C generator cannot handle the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitter.errors import InputFileError, SolverError, UnsupportedOpError
from splitter.ir import Boards, Chain, Plan, SubModel, TensorSpec
from splitter.outputs import OutputDir, check_target
from splitter.slicing.boundaries import Cut, SlicedModel, cuts_from_plan
from splitter.slicing.validate import (
    DEFAULT_SAMPLES,
    DEFAULT_SEED,
    ValidationReport,
    float_range_from_metadata,
    load_input_file,
    require_pass,
    validate_models,
)

#: Peer name of the host that sends the graph input and reads the graph output.
HOST = "host"

#: Step callback: called with a short description when a (possibly slow) step starts.
StepCallback = Callable[[str], None]


@dataclass(frozen=True)
class CompileOptions:
    """Everything ``splitter compile`` takes besides the model, the boards and ``OUT``."""

    objective: str = "latency"
    solver: str | None = None
    validate: bool = True
    input_files: tuple[str, ...] = ()
    force: bool = False
    input_shapes: Mapping[str, tuple[int, ...]] | None = None
    activation_bytes: int | None = None
    samples: int = DEFAULT_SAMPLES
    seed: int = DEFAULT_SEED
    #: generate the C firmware projects into ``OUT/firmware`` (codegen)
    firmware: bool = True
    #: evaluate this per-layer device assignment instead of solving (tests, what-if runs)
    assignment: tuple[int, ...] | None = None


@dataclass(frozen=True, eq=False)
class CompileResult:
    """What :func:`compile_model` produced (``out_dir`` already in place)."""

    out_dir: Path
    chain: Chain
    boards: Boards
    plan: Plan
    submodels: tuple[SlicedModel, ...]
    validation: ValidationReport | None
    plan_dict: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    firmware: str = ""  # "generated in firmware/", or why not

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary: where things are and the headline numbers."""
        val = self.validation
        return {
            "out_dir": str(self.out_dir),
            "model": self.chain.source_path,
            "objective": self.plan.objective,
            "solver": self.plan.solver,
            "latency_s": self.plan.latency_s,
            "throughput_per_s": self.plan.throughput_per_s,
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
    check_target(out_dir.absolute(), force=opts.force)  # fail before the slow work
    timings: dict[str, float] = {}
    clock = _Clock(timings, step)

    with clock("import", f"importing {Path(model).name}"):
        chain, boards = _load(model, target, opts)
        check_input_files(chain, opts.input_files)
    with clock("plan", "solving the partition"):
        plan = make_plan(chain, boards, opts)
    cuts = cuts_from_plan(plan, chain, boards)
    with clock("slice", f"slicing into {len(cuts)} sub-models"):
        sliced = slice_model(model, chain, cuts)
    report = None
    if opts.validate:
        with clock("validate", f"validating on {opts.samples}+ inputs"):
            report = validate_submodels(model, sliced, opts, chain)
    plan_dict = build_plan_dict(plan, chain, boards, sliced)
    plan_dict["model_path"] = str(Path(model).resolve())
    plan_dict["boards_path"] = str(Path(target).resolve())
    with clock("write", f"writing {out_dir}"):
        final, firmware = _write(
            out_dir, opts, chain, boards, plan, plan_dict, sliced, report, clock
        )
    return CompileResult(
        final, chain, boards, plan, tuple(sliced), report, plan_dict, timings, firmware
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


def _load(model: str | Path, target: str | Path, opts: CompileOptions) -> tuple[Chain, Boards]:
    """Import the model as a chain and parse the board file."""
    from splitter.hardware.boards import load_boards
    from splitter.importers import MODEL_SUFFIXES, load_chain

    if Path(model).suffix.lower() not in MODEL_SUFFIXES:
        raise InputFileError(
            f"{model}: compile needs an .onnx or .tflite model (a layer profile has no weights "
            "to slice); use 'splitter plan' for profiles"
        )
    chain = load_chain(
        model, input_shapes=opts.input_shapes, activation_bytes=opts.activation_bytes
    )
    return chain, load_boards(target)


def check_input_files(chain: Chain, input_files: Sequence[str | Path]) -> None:
    """Reject ``--input`` files of the wrong shape or dtype before any slow step."""
    for path in input_files:
        load_input_file(path, chain.layers[0].output)


def make_plan(chain: Chain, boards: Boards, opts: CompileOptions) -> Plan:
    """Solve the partition, or evaluate ``opts.assignment`` when one is given."""
    if opts.assignment is not None:
        return plan_from_assignment(chain, boards, opts.assignment, opts.objective)
    from splitter.partition import make_problem, solve

    problem = make_problem(chain.costs, boards, [layer.name for layer in chain.layers])
    return solve(problem, opts.objective, opts.solver or "auto")


def plan_from_assignment(
    chain: Chain, boards: Boards, assignment: Sequence[int], objective: str = "latency"
) -> Plan:
    """A :class:`Plan` for a given per-layer device assignment (SPEC.md objectives)."""
    from splitter.partition.problem import evaluate, make_problem

    problem = make_problem(chain.costs, boards, [layer.name for layer in chain.layers])
    ev = evaluate(problem, assignment)
    if not ev.feasible:
        raise SolverError(f"assignment {list(assignment)} is infeasible: {ev.violations[0]}")
    return Plan(
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


def slice_model(model: str | Path, chain: Chain, cuts: Sequence[Cut]) -> list[SlicedModel]:
    """Sub-model files' contents for ``cuts`` (format from the model's suffix)."""
    if Path(model).suffix.lower() == ".onnx":
        from splitter.slicing.onnx_slice import slice_onnx

        return slice_onnx(model, cuts)
    from splitter.slicing.tflite_slice import slice_tflite

    return slice_tflite(model, cuts)


def validate_submodels(
    model: str | Path, sliced: Sequence[SlicedModel], opts: CompileOptions, chain: Chain
) -> ValidationReport:
    """Run the original and the chain; raise :class:`ValidationError` unless it passes.

    Float inputs are standard normal unless the model's metadata gives ``input_range``.
    """
    metadata = chain.graph.metadata if chain.graph is not None else {}
    float_range = float_range_from_metadata(metadata, str(model))
    report = validate_models(
        model,
        [(s.file_name, s.data) for s in sliced],
        suffix=Path(model).suffix.lower(),
        count=opts.samples,
        seed=opts.seed,
        input_files=opts.input_files,
        float_range=float_range,
    )
    require_pass(report, model)
    return report


# --- plan.json ----------------------------------------------------------------------------


def build_plan_dict(
    plan: Plan, chain: Chain, boards: Boards, sliced: Sequence[SlicedModel]
) -> dict[str, Any]:
    """``plan --json`` output plus per sub-model files/boundary tensors and per device links."""
    data = _base_plan_dict(plan, chain, boards)
    entries = data.get("submodels")
    if not isinstance(entries, list) or len(entries) != len(sliced):
        entries = [{} for _ in sliced]
    for entry, sub in zip(entries, sliced, strict=True):
        entry.update(_submodel_entry(sub))
    data["submodels"] = entries
    data["links"] = device_links(sliced, [d.name for d in boards.devices])
    return data


def _base_plan_dict(plan: Plan, chain: Chain, boards: Boards) -> dict[str, Any]:
    """What ``plan --json`` prints (the partition engine's ``plan_to_dict`` when available)."""
    from splitter import partition

    plan_to_dict = getattr(partition, "plan_to_dict", None)
    if plan_to_dict is None:
        return _fallback_plan_dict(plan, chain, boards)
    result: dict[str, Any] = plan_to_dict(plan, chain, boards)
    return result


def _fallback_plan_dict(plan: Plan, chain: Chain, boards: Boards) -> dict[str, Any]:
    """The plan's own fields, used only while ``plan_to_dict`` is unavailable."""
    return {
        "model": chain.name,
        "objective": plan.objective,
        "solver": plan.solver,
        "optimal": plan.optimal,
        "nodes": plan.nodes,
        "solve_time_s": plan.solve_time_s,
        "latency_s": plan.latency_s,
        "throughput_per_s": plan.throughput_per_s,
        "throughput_ref9_per_s": plan.throughput_ref9_per_s,
        "assignment": [boards.devices[i].name for i in plan.assignment],
        "submodels": [
            {
                "index": s.index,
                "device": boards.devices[s.device_index].name,
                "first_layer": s.first,
                "last_layer": s.last,
            }
            for s in plan.submodels
        ],
    }


def _submodel_entry(sub: SlicedModel) -> dict[str, Any]:
    return {
        "file": f"submodels/{sub.file_name}",
        "file_bytes": len(sub.data),
        "inputs": [tensor_dict(t) for t in sub.inputs],
        "outputs": [tensor_dict(t) for t in sub.outputs],
    }


def tensor_dict(spec: TensorSpec) -> dict[str, Any]:
    """Name, shape, dtype, bytes (``prod(shape) * itemsize``) and quantisation of a tensor."""
    entry: dict[str, Any] = {
        "name": spec.name,
        "shape": list(spec.shape),
        "dtype": spec.dtype,
        "bytes": spec.nbytes if _known_dtype(spec.dtype) else None,
    }
    if spec.quant is not None:
        entry["quant"] = {
            "scale": list(spec.quant.scale),
            "zero_point": list(spec.quant.zero_point),
            "axis": spec.quant.axis,
        }
    return entry


def device_links(sliced: Sequence[SlicedModel], device_names: Sequence[str]) -> dict[str, Any]:
    """Per device, in execution order, what it receives and sends and from/to whom.

    Sub-model ``k`` receives its inputs from the device of sub-model ``k - 1`` (the host for
    ``k = 0``) and sends its outputs to the device of ``k + 1`` (the host for the last).
    """
    links: dict[str, list[dict[str, Any]]] = {name: [] for name in device_names}
    for k, sub in enumerate(sliced):
        prev = sliced[k - 1].cut.device if k > 0 else HOST
        nxt = sliced[k + 1].cut.device if k + 1 < len(sliced) else HOST
        events = links[sub.cut.device]
        for t in sub.inputs:
            events.append(_event("receive", prev, k, t))
        for t in sub.outputs:
            events.append(_event("send", nxt, k, t))
    return {
        name: {
            "receives_from": [e["peer"] for e in events if e["direction"] == "receive"],
            "sends_to": [e["peer"] for e in events if e["direction"] == "send"],
            "events": events,
        }
        for name, events in links.items()
    }


def _event(direction: str, peer: str, submodel: int, spec: TensorSpec) -> dict[str, Any]:
    return {
        "direction": direction,
        "peer": peer,
        "submodel": submodel,
        "tensor": spec.name,
        "bytes": spec.nbytes if _known_dtype(spec.dtype) else None,
    }


def _known_dtype(dtype: str) -> bool:
    return not dtype.startswith("tflite_type_")


# --- writing ------------------------------------------------------------------------------


def _write(
    out_dir: Path,
    opts: CompileOptions,
    chain: Chain,
    boards: Boards,
    plan: Plan,
    plan_dict: dict[str, Any],
    sliced: Sequence[SlicedModel],
    report: ValidationReport | None,
    clock: _Clock,
) -> tuple[Path, str]:
    """Write everything into a temporary directory and swap it into place.

    Returns ``OUT`` and the firmware status line (``"generated"`` or why it was not).
    """
    with OutputDir(out_dir, force=opts.force) as out:
        for sub in sliced:
            out.write_bytes(f"submodels/{sub.file_name}", sub.data)
        out.write_json("plan.json", plan_dict)
        out.write_json("validation.json", report.to_dict() if report else {"skipped": True})
        firmware = "skipped (--no-firmware)"
        if opts.firmware:
            with clock("firmware", "generating the firmware projects"):
                firmware = generate_firmware_hook(out.root, chain, boards, plan, plan_dict)
        text = render_report(chain, plan, plan_dict, sliced, report, firmware)
        out.write_text("report.md", text)
    return out.target, firmware


def generate_firmware_hook(
    root: Path, chain: Chain, boards: Boards, plan: Plan, plan_dict: Mapping[str, Any]
) -> str:
    """The one firmware hook: ``codegen.firmware.generate_firmware`` writes ``root/firmware``.

    The sub-models stand on their own for other deployment tools, so a model the C generator
    cannot handle (:class:`UnsupportedOpError`, e.g. int8 or NHWC TFLite) is not a compile
    failure: the reason is returned and reported instead. Every other error propagates.
    """
    from codegen.firmware import generate_firmware

    try:
        generate_firmware(root, chain, boards, plan, plan_dict)
    except UnsupportedOpError as exc:
        return f"not generated: {' '.join(str(exc).split())}"
    return "generated in firmware/"


def render_report(
    chain: Chain,
    plan: Plan,
    plan_dict: Mapping[str, Any],
    sliced: Sequence[SlicedModel],
    report: ValidationReport | None,
    firmware: str = "",
) -> str:
    """``report.md``: layer table, plan table, estimates and validation, as Markdown."""
    device_of = {
        j: sub.cut.device for sub in sliced for j in range(sub.cut.first, sub.cut.last + 1)
    }
    lines = [f"# splitter compile: {chain.name}", "", f"Model: `{chain.source_path}`", ""]
    lines += [
        "## Layers",
        "",
        "| # | layer | op | output | FLASH B | RAM B | MACs | OUT B | device |",
    ]
    lines += ["|---:|---|---|---|---:|---:|---:|---:|---|"]
    for layer in chain.layers:
        c = layer.cost
        lines.append(
            f"| {layer.index} | {_md(layer.name)} | {layer.op_label} | {list(layer.output.shape)} "
            f"| {c.flash} | {c.ram} | {c.macs} | {c.out_bytes} | {device_of.get(layer.index, '')} |"
        )
    lines += ["", "## Plan", "", "| sub-model | device | layers | file | bytes | in | out |"]
    lines += ["|---:|---|---|---|---:|---|---|"]
    for sub in sliced:
        ins = ", ".join(f"`{_md(t.name)}` {list(t.shape)} {t.dtype}" for t in sub.inputs)
        outs = ", ".join(f"`{_md(t.name)}` {list(t.shape)} {t.dtype}" for t in sub.outputs)
        lines.append(
            f"| {sub.cut.index} | {sub.cut.device} | {sub.cut.first}..{sub.cut.last} "
            f"| `submodels/{sub.file_name}` | {len(sub.data)} | {ins} | {outs} |"
        )
    lines += ["", "## Estimates", "", *_estimate_lines(plan)]
    lines += ["", "## Validation", "", *_validation_lines(report)]
    lines += ["", "## Firmware", "", firmware or "not requested"]
    return "\n".join(lines) + "\n"


def _estimate_lines(plan: Plan) -> list[str]:
    gap = "" if plan.gap is None else f" (gap {plan.gap:.2%})"
    return [
        f"- objective: {plan.objective}, solver {plan.solver}, "
        f"{'proved optimal' if plan.optimal else 'not proved optimal'}{gap}, {plan.nodes} nodes",
        f"- latency (SPEC.md eq. 13): {plan.latency_s * 1e3:.3f} ms",
        f"- throughput (eq. 17): {plan.throughput_per_s:.3f} inferences/s; "
        f"reference [9]: {plan.throughput_ref9_per_s:.3f} inferences/s",
    ]


def _validation_lines(report: ValidationReport | None) -> list[str]:
    if report is None:
        return ["Skipped (`--no-validate`)."]
    lines = [
        f"{'Passed' if report.passed else 'FAILED'} on {len(report.samples)} inputs with "
        f"{report.runtime} (float: max-abs <= {report.tolerance.get('float_max_abs')}, "
        "integer: bit-exact).",
        "",
        "| output | dtype | max-abs | max-rel | RMSE | cosine | pass |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for s in report.outputs:
        lines.append(
            f"| `{_md(s.name)}` | {s.dtype} | {s.max_abs:.3g} | {s.max_rel:.3g} | {s.rmse:.3g} "
            f"| {s.cosine:.9f} | {'yes' if s.passed else 'NO'} |"
        )
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
                f"| {b.submodel} | `{_md(b.name)}` | {b.dtype} | {b.max_abs:.3g} "
                f"| {'yes' if b.exact else 'no'} |"
            )
    return lines


def _md(text: str) -> str:
    """Escape the table separator in Markdown cells."""
    return text.replace("|", "\\|")


def _worst(report: ValidationReport) -> dict[str, Any]:
    worst = max(report.outputs, key=lambda s: s.max_abs)
    return {
        "worst_output": worst.name,
        "max_abs": worst.max_abs,
        "max_rel": worst.max_rel,
        "rmse": worst.rmse,
        "cosine": worst.cosine,
        "inputs": len(report.samples),
    }
