"""``splitter calibrate OUT [-o calibrated.toml]``: cycles per MAC from ``OUT/bench.json``."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from splitter.bench.calibrate import Calibration, calibrate
from splitter.cli.options import out_argument
from splitter.report import refresh_report


@click.command("calibrate")
@out_argument
@click.option(
    "-o",
    "--output",
    default=None,
    type=click.Path(path_type=Path),
    metavar="CALIBRATED.toml",
    help="Calibrated board file to write [OUT/calibrated.toml].",
)
@click.option(
    "--target",
    "-t",
    default=None,
    metavar="BOARDS.toml",
    help="Board file the plan was compiled with (default: the one bench.json names).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the fits and the re-check as JSON.")
def command(out: Path, output: Path | None, target: str | None, as_json: bool) -> None:
    """Fit cycles per MAC per device and op class; write a board file plan/compile accept."""
    result = calibrate(out, output or out / "calibrated.toml", target)
    refresh_report(out)  # refresh report.html
    if as_json:
        click.echo(json.dumps(_as_dict(result)))
        return
    render(result)


def _as_dict(result: Calibration) -> dict[str, object]:
    return {
        "output": str(result.path),
        "source": str(result.source),
        "devices": [
            {
                "device": f.device,
                "clock_mhz": f.clock_mhz,
                "cpm": f.cpm,
                "cpm_by_class": f.cpm_by_class,
                "method": f.method,
                "submodels": f.submodels,
            }
            for f in result.fits
        ],
        "check": result.check,
    }


def render(result: Calibration) -> None:
    """Fits per device and the re-check of the planner's compute estimate."""
    console = Console()
    table = Table(title=f"calibrated cycles per MAC (from {result.source})")
    for col in ("device", "clock MHz", "cpm by class", "fit", "est. ms", "measured ms", "err %"):
        table.add_column(col)
    check = {c["device"]: c for c in result.check}
    for f in result.fits:
        c = check.get(f.device, {})
        err = c.get("error_pct")
        table.add_row(
            f.device,
            f"{f.clock_mhz:g}",
            ", ".join(f"{k} {v:.4g}" for k, v in f.cpm_by_class.items()),
            f.method,
            f"{c.get('estimated_s', 0.0) * 1e3:.3f}",
            f"{c.get('measured_s', 0.0) * 1e3:.3f}",
            "-" if err is None else f"{err:+.2f}",
        )
    console.print(table)
    console.print(f"wrote {result.path}")
