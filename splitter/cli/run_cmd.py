"""``splitter run OUT --input x.npy [--port P | --emulate]``: one inference on the boards."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from splitter.cli.options import out_argument, port_option, stop_on_sigterm, verbose_option
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
@click.option("--no-check", is_flag=True, help="Do not compare with onnxruntime.")
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
    help="Seconds to wait for the result before naming the silent board.",
)
@verbose_option
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
) -> None:
    """Send X.npy to the first board, receive the result of the last one, check it."""
    if not ports and not emulate:
        raise click.UsageError("give --port PORT (a board) or --emulate")
    stop_on_sigterm()
    manifest = read_manifest(out)
    x = R.load_input(input_path, manifest.input)
    log = (lambda text: click.echo(text, err=True)) if verbose else None
    res = R.run(out, x, ports=ports, emulate=emulate, icount=icount, timeout=timeout, log=log)
    if res.note:
        click.echo(res.note)
    for t in res.timings:
        click.echo(f"sub-model {t.submodel} on device {t.device}: {t.cycles} cycles")
    click.echo(
        f"round trip {res.seconds:.3f} s: compute {res.compute_s:.4f} s (cycles / core clock), "
        f"links and host {res.seconds - res.compute_s:.3f} s"
    )
    if output_path is not None:
        try:
            np.save(output_path, res.output)
        except OSError as exc:
            raise OutputError(f"{output_path}: cannot write the output ({exc})") from None
        click.echo(f"output written to {output_path}")
    if not no_check:
        ref = R.reference_output(manifest, out, x, model)
        tol = R.output_tolerance(model or Path(manifest.model.path))
        err = R.check_output(res.output, ref, tol)
        click.echo(f"check: max-abs difference to onnxruntime {err:.3g} <= {tol:g}")
