"""``splitter report OUT``: regenerate ``OUT/report.html`` from the files in OUT."""

from __future__ import annotations

from pathlib import Path

import click

from splitter.cli.options import out_argument
from splitter.report import write_report


@click.command("report")
@out_argument
def command(out: Path) -> None:
    """Write OUT/report.html: plan, memory, pipeline, search, bench and validation plots."""
    path = write_report(out)
    click.echo(f"wrote {path}")
