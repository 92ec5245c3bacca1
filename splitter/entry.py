"""The ``splitter`` command's entry point: a Ctrl-C while the CLI's own modules are still being
imported (click, rich, numpy...) is one line and exit code 130 like any later one, not a
traceback. Nothing heavy is imported before the ``try``."""

from __future__ import annotations

import sys


def main() -> None:
    """Import the CLI, then run it (:func:`splitter.cli.main`)."""
    try:
        from splitter.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("splitter: interrupted\n")
        sys.exit(130)
    cli_main()
