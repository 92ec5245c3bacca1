"""``splitter report OUT``: regenerate ``OUT/report.html`` from the files in OUT."""

from __future__ import annotations

import json
from pathlib import Path

import click

from splitter.cli.options import out_argument
from splitter.cli.progress import Progress
from splitter.report import write_report


@click.command("report")
@out_argument
@click.option("--json", "as_json", is_flag=True, help="Print the written file as JSON.")
def command(out: Path, as_json: bool) -> None:
    """Write OUT/report.html: plan, memory, pipeline, search, bench and validation plots."""
    with Progress() as progress:
        progress.step("rendering report.html")
        path = write_report(out)
    if as_json:
        click.echo(json.dumps({"report": str(path)}))
        return
    click.echo(f"wrote {path}")
