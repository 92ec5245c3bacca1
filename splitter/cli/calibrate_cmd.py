"""``splitter calibrate OUT [-o calibrated.toml]``: correction factors per part from a bench."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from splitter.bench.calibrate import MAX_ERROR_PCT, USED_FOR, CalibrationResult, calibrate
from splitter.cli.options import allow_edited_option, out_argument
from splitter.outputs import verify_output
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
@click.option(
    "--max-error",
    default=MAX_ERROR_PCT,
    show_default=True,
    type=click.FloatRange(min=0.0, min_open=True),
    metavar="PCT",
    help="Refuse factors that miss a benched sub-model by more than PCT %.",
)
@click.option(
    "--kind",
    type=click.Choice(["emulated", "real"]),
    default=None,
    help="Calibration to write [emulated after bench --emulate, real after bench --port]; "
    "real is refused for emulated data.",
)
@click.option(
    "--also",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="OUT2",
    help="Pool the bench of another compiled and benched OUT (repeatable): more distinct "
    "sub-models per part, so the per-class fit can engage.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the fits and the re-check as JSON.")
@allow_edited_option
def command(
    out: Path,
    output: Path | None,
    target: str | None,
    max_error: float,
    kind: str | None,
    also: tuple[Path, ...],
    as_json: bool,
    allow_edited: bool,
) -> None:
    """Fit measured/estimated factors per part (and op class); write them to a board file."""
    verify_output(out, allow_edited=allow_edited)
    result = calibrate(out, output or out / "calibrated.toml", target, max_error, kind, also)
    refresh_report(out)  # refresh report.html
    if as_json:
        click.echo(json.dumps(_as_dict(result)))
        return
    render(result)


def _as_dict(result: CalibrationResult) -> dict[str, object]:
    return {
        "output": str(result.path),
        "source": str(result.source),
        "kind": result.kind,
        "parts": [
            {
                "part": f.part,
                "kind": f.kind,
                "factor": f.factor,
                "by_class": f.by_class,
                "method": f.method,
                "error_pct": f.error_pct,
                "devices": f.devices,
                "submodels": [
                    {
                        "index": s.index,
                        "device": s.device,
                        "measured_cycles": s.cycles,
                        "predicted_cycles": f.predicted(s),
                        "error_pct": f.residual_pct(s),
                    }
                    for s in f.subs
                ],
            }
            for f in result.fits
        ],
        "check": result.check,
    }


def render(result: CalibrationResult) -> None:
    """Factors per part and the re-check of the planner's compute estimate per device."""
    console = Console()
    table = Table(title=f"{result.kind} calibration: measured / estimated (from {result.source})")
    for col in ("part", "factor", "by class", "devices", "fit"):
        table.add_column(col)
    for f in result.fits:
        table.add_row(
            f.part,
            f"{f.factor:.4g}",
            ", ".join(f"{k} {v:.4g}" for k, v in f.by_class.items()) or "-",
            ", ".join(f.devices),
            f.fit_text,
        )
    console.print(table)
    check = Table(title=f"planner with the {result.kind} calibration vs measured compute")
    for col in ("device", "part", "est. ms", "measured ms", "err %"):
        check.add_column(col)
    for c in result.check:
        err = c.get("error_pct")
        check.add_row(
            c["device"],
            c["part"],
            f"{c['estimated_s'] * 1e3:.3f}",
            f"{c['measured_s'] * 1e3:.3f}",
            "-" if err is None else f"{err:+.2f}",
        )
    console.print(check)
    console.print(f"wrote {result.path}: {USED_FOR[result.kind]}", soft_wrap=True)
