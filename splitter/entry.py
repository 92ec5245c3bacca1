"""The ``splitter`` command's entry point: a Ctrl-C or SIGTERM while the CLI's own modules are
still being imported (click, rich, numpy...) is one line and exit code 130 / 143 like any later
one, not a traceback. Nothing heavy is imported before the ``try``."""

from __future__ import annotations

import sys


def main() -> None:
    """Route SIGINT / SIGTERM (:mod:`splitter.signals`), import the CLI, run it."""
    from splitter import signals

    signals.install()
    try:
        from splitter.cli import main as cli_main
    except KeyboardInterrupt as exc:
        sys.stderr.write("splitter: interrupted\n")
        sys.exit(signals.exit_code(signals.interruption_signal(exc)))
    cli_main()
