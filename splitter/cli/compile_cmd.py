"""``splitter compile MODEL --target boards.toml``: plan, slice, validate, write ``OUT``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from splitter.cli.options import model_plan_options, search_options, search_settings
from splitter.cli.plan_cmd import energy_line
from splitter.cli.progress import Progress
from splitter.compile import CompileOptions, CompileResult, compile_model, default_out_dir
from splitter.errors import UnsupportedOpError
from splitter.slicing.quantize import cost_summary


@click.command("compile")
@click.argument("model", metavar="MODEL")
@click.option(
    "--target", "-t", required=True, metavar="BOARDS.toml", help="Board file to split over."
)
@click.option("-o", "--out", default=None, metavar="OUT", help="Output directory [MODEL-split].")
@search_options
@click.option(
    "--input",
    "input_files",
    multiple=True,
    metavar="[NAME=]FILE.npy|FILE.npz",
    help="Extra validation input (repeatable): one array of the input's shape, or a stack; "
    "several model inputs: NAME=FILE.npy per input, or one .npz keyed by input name.",
)
@click.option(
    "--data",
    "data_file",
    default=None,
    metavar="X.npz",
    help="Labelled set (.npz: inputs x, integer labels y): accuracy and confusion matrix.",
)
@click.option(
    "--quantize",
    type=click.Choice(["int8"]),
    default=None,
    help="Quantise the float ONNX model first (onnxruntime's quantize_static: QDQ, int8, "
    "per-channel weights) and report the accuracy cost against the float model.",
)
@click.option(
    "--calibration-data",
    default=None,
    metavar="X.npy",
    help="Samples of the model's input for --quantize (float32, one array or a stack).",
)
@click.option("--no-validate", is_flag=True, help="Skip the numerical validation of the split.")
@click.option(
    "--no-firmware", is_flag=True, help="Skip generating the C firmware projects (OUT/firmware)."
)
@click.option(
    "--watchdog-ms",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="Start each board's independent watchdog with an N ms timeout (0: none).",
)
@click.option(
    "--app",
    type=click.Choice(["harness", "standalone", "library"]),
    default="harness",
    show_default=True,
    help="Firmware use: host-driven harness (run, bench, validate), standalone firmware per "
    "board (the head feeds the compiled-in --input samples, the tail prints results), or a "
    "static library per board for your own HAL/RTOS project (docs/product.md).",
)
@click.option(
    "--result-on",
    type=click.Choice(["head", "tail"]),
    default="tail",
    show_default=True,
    help="Board that delivers results in standalone/library mode.",
)
@click.option("--force", is_flag=True, help="Replace OUT even if splitter did not write it.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@model_plan_options
def command(
    model: str,
    target: str,
    out: str | None,
    objective: str,
    max_latency_ms: float | None,
    min_throughput: float | None,
    solver: str,
    time_limit: float | None,
    var_order: str | None,
    val_order: str | None,
    input_files: tuple[str, ...],
    data_file: str | None,
    quantize: str | None,
    calibration_data: str | None,
    no_validate: bool,
    no_firmware: bool,
    watchdog_ms: int,
    app: str,
    result_on: str,
    force: bool,
    as_json: bool,
    input_shapes: dict[str, tuple[int, ...]],
    activation_bytes: int | None,
    emulated: bool,
    granularity: str,
    no_host_io: bool,
    partial_execution: str,
    split: str,
    split_layers: dict[str, int],
) -> None:
    """Split MODEL over the boards of BOARDS.toml into validated sub-model files in OUT."""
    options = CompileOptions(
        objective=objective,
        solver=solver,
        solver_options=search_settings(
            objective, max_latency_ms, min_throughput, solver, time_limit, var_order, val_order
        ),
        validate=not no_validate,
        firmware=not no_firmware,
        input_files=input_files,
        force=force,
        input_shapes=input_shapes or None,
        activation_bytes=activation_bytes,
        granularity=granularity,
        data_file=data_file,
        emulated=emulated,
        host_io=not no_host_io,
        partial_execution=partial_execution,
        split=split,
        split_layers=split_layers,
        watchdog_ms=watchdog_ms,
        app=app,
        result_on=result_on,
        quantize=quantize,
        calibration_data=calibration_data,
    )
    earlier = _has_output(Path(out) if out is not None else default_out_dir(model))
    with Progress() as progress:
        report = {**options.solver_options, "on_progress": progress.status}
        options = replace(options, solver_options=report)
        result = compile_model(model, target, out, options, on_step=progress.step)
    if earlier:  # never silently: the user may have wanted to keep it
        click.echo(f"note: replaced the earlier output in {result.out_dir}", err=True)
    failed = options.firmware and not result.firmware.startswith("generated")
    if as_json and not failed:
        click.echo(json.dumps(result.summary(), indent=2))
    elif not as_json:
        _print_summary(result)
    if failed:
        raise FirmwareNotGenerated(
            f"{model}: firmware {result.firmware}; the validated sub-models are in "
            f"{result.out_dir}; compile with --no-firmware to skip the firmware",
            details=result.summary(),
        )


class FirmwareNotGenerated(UnsupportedOpError):
    """The split was written but no firmware could be generated: exit 2 after the summary
    (with ``--json`` the summary is the error object's ``details``)."""

    def __init__(self, message: str, details: dict[str, object]) -> None:
        super().__init__(message)
        self.details = details


def _has_output(out_dir: Path) -> bool:
    """``out_dir`` holds something (an earlier output compile will replace); an unreadable
    path is left to compile's own one-line error."""
    try:
        return out_dir.is_dir() and any(out_dir.iterdir())
    except OSError:
        return False


def _print_summary(result: CompileResult) -> None:
    """Human summary on stdout: files, estimates, validation."""
    click.echo(f"wrote {result.out_dir}")
    for sub in result.submodels:
        click.echo(
            f"  submodels/{sub.file_name}  layers {sub.cut.first}..{sub.cut.last} "
            f"on {sub.cut.device}  ({len(sub.data)} bytes)"
        )
    plan = result.plan
    proof = (
        ""
        if plan.optimal
        else ", not proved optimal" + (f" (gap {plan.gap:.2%})" if plan.gap is not None else "")
    )
    io = result.manifest.host_io
    host = f", host I/O {io.seconds * 1e3:.3f} ms {'in' if io.counted else 'not in'} it"
    click.echo(
        f"plan: latency {plan.latency_s * 1e3:.3f} ms{host if io.seconds else ''}, throughput "
        f"(eq. 17) {plan.throughput_per_s:.3f}/s ({plan.objective}, {plan.solver}{proof})"
    )
    for line in result.manifest.headline_lines():
        click.echo(line)
    click.echo(result.manifest.prediction_note)
    click.echo(energy_line(result.manifest))
    click.echo(result.validation.summary() if result.validation else "validation skipped")
    if result.quantization is not None:
        click.echo(cost_summary(result.quantization))
    status = result.firmware
    click.echo(f"firmware: {status if len(status) < 160 else status[:150] + '... (see report.md)'}")
