"""``splitter run OUT --input x.npy [--port P | --emulate]``: one inference on the boards.

Several model inputs: ``--input NAME=X.npy`` per input or one ``--input X.npz`` keyed by input
name; several outputs: each is checked and printed by name, ``--output Y.npz`` saves them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from splitter.cli.options import (
    allow_edited_option,
    out_argument,
    port_option,
    stop_on_sigterm,
    verbose_option,
)
from splitter.cli.progress import Progress
from splitter.device import run as R
from splitter.errors import OutputError, ValidationError, escaped
from splitter.manifest import read_manifest
from splitter.outputs import verify_output


@click.command("run")
@out_argument
@click.option(
    "--input",
    "inputs",
    required=True,
    multiple=True,
    metavar="[NAME=]X.npy|X.npz",
    help="Input array (the model input's shape and dtype); for several model inputs "
    "NAME=X.npy once per input, or one .npz holding an array per input name.",
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
    metavar="Y.npy|Y.npz",
    help="Write the output array here (.npz: every output by name; needed for several).",
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
@allow_edited_option
def command(
    out: Path,
    inputs: tuple[str, ...],
    ports: dict[str, str],
    emulate: bool,
    icount: bool,
    output_path: Path | None,
    no_check: bool,
    model: Path | None,
    timeout: float,
    verbose: bool,
    as_json: bool,
    allow_edited: bool,
) -> None:
    """Send X.npy to the first board, receive the result of the last one, check it."""
    verify_output(out, allow_edited=allow_edited)
    if not ports and not emulate:
        raise click.UsageError("give --port PORT (a board) or --emulate")
    stop_on_sigterm()
    manifest = read_manifest(out)
    xs = R.load_inputs(inputs, R.input_specs(manifest))
    x = next(iter(xs.values())) if len(xs) == 1 else xs
    if output_path is not None:
        check_output_path(output_path, [t.name for t in R.output_specs(manifest)])
    log = (lambda text: click.echo(text, err=True)) if verbose else None
    with Progress() as progress:
        res = R.run(
            out, x, ports=ports, emulate=emulate, icount=icount, timeout=timeout, log=log,
            on_step=progress.step, on_bytes=progress.transfers(),
        )  # fmt: skip
        if output_path is not None:
            save_outputs(output_path, res.outputs)
        check = None
        if not no_check:
            progress.step("computing the reference output")
            check = check_outputs(manifest, out, x, res, model)
    if as_json:
        click.echo(json.dumps(run_json(res, output_path, check)))
        return
    render(res, output_path, check)


def check_output_path(path: Path, names: list[str]) -> None:
    """``--output`` must be ``.npz`` for several outputs (one array per output name)."""
    if len(names) > 1 and path.suffix.lower() != ".npz":
        raise OutputError(
            f"{path}: the model has outputs {', '.join(names)}; give --output Y.npz to save "
            "them by name"
        )


def save_outputs(path: Path, outputs: dict[str, np.ndarray]) -> None:
    """``.npz``: every output by name; else the one output as ``.npy``."""
    try:
        if path.suffix.lower() == ".npz":
            np.savez(path, **outputs)  # type: ignore[arg-type]
        else:
            np.save(path, next(iter(outputs.values())))
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the output ({exc})") from None


def check_outputs(
    manifest: Any, out: Path, x: Any, res: R.RunResult, model: Path | None
) -> dict[str, Any]:
    """Every output against the reference runtime; the check object of ``--json`` (the
    largest difference, and per output name its difference and tolerance)."""
    runtime = R.reference_runtime(manifest, model)
    refs = R.reference_outputs(manifest, out, x, model)
    several = len(res.outputs) > 1
    per: dict[str, dict[str, float]] = {}
    for k, (name, y) in enumerate(res.outputs.items()):
        tol = R.output_tolerance(model or Path(manifest.model.path), k)
        if name not in refs:
            raise ValidationError(f"output {name}: {runtime} gives no output number {k}")
        err = R.check_output(y, refs[name], tol, runtime, name if several else "")
        per[name] = {"max_abs": err, "tolerance": tol}
    worst = max(per.values(), key=lambda d: d["max_abs"] / d["tolerance"])
    return {"reference": runtime, **worst, "outputs": per}


def run_json(
    res: R.RunResult, output_path: Path | None, check: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``--json`` object (docs/cli-json.md)."""
    return {
        "note": res.note or None,
        "output_shape": list(res.output.shape),
        "output_dtype": str(res.output.dtype),
        "outputs": [
            {"name": n, "shape": list(y.shape), "dtype": str(y.dtype)}
            for n, y in res.outputs.items()
        ],
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
    if len(res.outputs) > 1:
        for name, y in res.outputs.items():
            click.echo(f"output {escaped(name)}: shape {list(y.shape)} {y.dtype}")
    if output_path is not None:
        click.echo(f"output written to {output_path}")
    if check is None:
        return
    per = check["outputs"] if len(check["outputs"]) > 1 else {"": check}
    for name, c in per.items():
        what = f" of {escaped(name)}" if name else ""
        click.echo(
            f"check{what}: max-abs difference to {check['reference']} {c['max_abs']:.3g} "
            f"<= {c['tolerance']:g}"
        )
