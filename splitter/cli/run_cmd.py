"""``splitter run OUT --input x.npy [--port P | --emulate]``: one inference on the boards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from splitter.cli.options import out_argument, port_option, stop_on_sigterm, verbose_option
from splitter.cli.progress import Progress
from splitter.errors import OutputError
from splitter.link import run as R
from splitter.manifest import read_manifest


@click.command("run")
@out_argument
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(path_type=Path),
    metavar="X.npy",
    help="Input array (the model input's shape and dtype).",
)
@port_option
@click.option("--emulate", is_flag=True, help="Boot the boards in QEMU for this run.")
@click.option(
    "--icount/--no-icount",
    default=True,
    show_default=True,
    help="With --emulate: instruction-counted deterministic time.",
)
@click.option(
    "--output",
    "output_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="Y.npy",
    help="Write the output array here.",
)
@click.option(
    "--no-check", is_flag=True, help="Do not compare with onnxruntime (LiteRT for TFLite)."
)
@click.option(
    "--model",
    type=click.Path(path_type=Path),
    default=None,
    help="Original model for the check (default: the one plan.json names).",
)
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for the result before naming the silent board (for LO-SC segments, "
    "plus the estimated time to load their weights).",
)
@verbose_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def command(
    out: Path,
    input_path: Path,
    ports: dict[str, str],
    emulate: bool,
    icount: bool,
    output_path: Path | None,
    no_check: bool,
    model: Path | None,
    timeout: float,
    verbose: bool,
    as_json: bool,
) -> None:
    """Send X.npy to the first board, receive the result of the last one, check it."""
    if not ports and not emulate:
        raise click.UsageError("give --port PORT (a board) or --emulate")
    stop_on_sigterm()
    manifest = read_manifest(out)
    x = R.load_input(input_path, manifest.input)
    log = (lambda text: click.echo(text, err=True)) if verbose else None
    with Progress() as progress:
        res = R.run(
            out, x, ports=ports, emulate=emulate, icount=icount, timeout=timeout, log=log,
            on_step=progress.step, on_bytes=progress.transfers(),
        )  # fmt: skip
        if output_path is not None:
            try:
                np.save(output_path, res.output)
            except OSError as exc:
                raise OutputError(f"{output_path}: cannot write the output ({exc})") from None
        check = None
        if not no_check:
            progress.step("computing the reference output")
            runtime = R.reference_runtime(manifest, model)
            ref = R.reference_output(manifest, out, x, model)
            tol = R.output_tolerance(model or Path(manifest.model.path))
            err = R.check_output(res.output, ref, tol, runtime=runtime)
            check = {"reference": runtime, "max_abs": err, "tolerance": tol}
    if as_json:
        click.echo(json.dumps(run_json(res, output_path, check)))
        return
    render(res, output_path, check)


def run_json(
    res: R.RunResult, output_path: Path | None, check: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``--json`` object (docs/cli-json.md)."""
    return {
        "note": res.note or None,
        "output_shape": list(res.output.shape),
        "output_dtype": str(res.output.dtype),
        "output_file": None if output_path is None else str(output_path),
        "timings": [
            {"submodel": t.submodel, "device": t.device, "cycles": t.cycles} for t in res.timings
        ],
        "round_trip_s": res.seconds,
        "compute_s": res.compute_s,
        "load_s": res.load_s,
        "loads": [
            {"segment": x.segment, "bytes": x.bytes, "seconds": x.seconds} for x in res.loads
        ],
        "check": check,
    }


def render(res: R.RunResult, output_path: Path | None, check: dict[str, Any] | None) -> None:
    """The human lines."""
    if res.note:
        click.echo(res.note)
    for t in res.timings:
        click.echo(f"sub-model {t.submodel} on device {t.device}: {t.cycles} cycles")
    if res.loads:
        loaded = sum(x.bytes for x in res.loads)
        click.echo(
            f"loading {len(res.loads)} segments' weights ({loaded} B, streamed by the host): "
            f"{res.load_s:.3f} s"
        )
    click.echo(
        f"round trip {res.seconds:.3f} s: compute {res.compute_s:.4f} s (cycles / core clock), "
        f"links and host {res.seconds - res.compute_s:.3f} s"
    )
    if output_path is not None:
        click.echo(f"output written to {output_path}")
    if check is not None:
        click.echo(
            f"check: max-abs difference to {check['reference']} {check['max_abs']:.3g} "
            f"<= {check['tolerance']:g}"
        )
