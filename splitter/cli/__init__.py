"""The thin click layer: parse arguments, call the library, render; no logic of its own.

Commands live in one module each (``splitter/cli/<name>_cmd.py`` exposing ``command``) and are
registered explicitly in :data:`COMMANDS`. :func:`main` turns every :class:`SplitterError` into one
line on stderr and exit code 2; no traceback reaches a user (``SPLITTER_DEBUG=1`` shows it). With
``--json`` (or ``inspect --format json``) the error is also printed on stdout as the object of
:func:`error_object` (``docs/cli-json.md``), so a script reading stdout always gets JSON.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import re
import sys
import threading
import traceback

import click

from splitter import signals
from splitter.errors import SplitterError, escaped
from splitter.version import __version__

#: command name -> module under splitter.cli that defines ``command`` (a click.Command).
COMMANDS: dict[str, str] = {
    "inspect": "inspect_cmd",
    "plan": "plan_cmd",
    "compile": "compile_cmd",
    "build": "build_cmd",
    "emulate": "emulate_cmd",
    "run": "run_cmd",
    "bench": "bench_cmd",
    "calibrate": "calibrate_cmd",
    "flash": "flash_cmd",
    "segment": "segment_cmd",
    "report": "report_cmd",
    "ops": "ops_cmd",
    "choose": "choose_cmd",
    "boards": "boards_cmd",
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (keeps start-up fast)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if _module_exists(COMMANDS[name])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMANDS.get(cmd_name)
        if module_name is None or not _module_exists(module_name):
            return None
        module = importlib.import_module(f"splitter.cli.{module_name}")
        command: click.Command = module.command
        return command


def _module_exists(module_name: str) -> bool:
    return importlib.util.find_spec(f"splitter.cli.{module_name}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="splitter")
def cli() -> None:
    """Split a neural network over STM32 boards.

    \b
    Model and plan:  inspect, ops, boards, plan, segment, compile, report
    Which boards:    choose
    Firmware:        build, flash, emulate
    On the boards:   run, bench, calibrate
    Every command takes -h, and --json for machine-readable output (errors included).
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, map errors to one line and exit code 2.

    SIGINT (Ctrl-C) and SIGTERM are exit code 130 / 143 with one line, ``splitter: interrupted``,
    whatever error the interruption caused on its way out (:mod:`splitter.signals`). Run as the
    ``splitter`` command (``argv`` None), both signals are routed to the CLI and, once the command
    is over, ignored, so they cannot turn a finished run into a death by signal; a caller passing
    ``argv`` (tests) keeps its own handlers.
    """
    if argv is None:
        signals.install()
    code = _run(argv)
    if argv is None and threading.current_thread() is threading.main_thread():
        signals.ignore()
        if code in (130, 143):  # interrupted: outputs are cleaned up; exit now, whatever runs
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """Run the CLI; the exit code, every error reported in one line on stderr (and as JSON on
    stdout when the command line asks for JSON). An error raised after a stop signal arrived is
    the interruption's doing and reported as one (:func:`_interruption`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(args)
    signals.reset()  # a new command: an earlier one's signal is not this one's
    try:
        return _run_reporting(args, as_json)
    except BaseException as exc:  # a second signal while the first error was being reported
        if isinstance(exc, KeyboardInterrupt) or signals.received() is not None:
            return _interruption(exc, as_json)
        raise


def _interruption(exc: BaseException, as_json: bool) -> int:
    """Report an interruption: one line, exit code ``128 + signal`` (130 / 143)."""
    with contextlib.suppress(Exception):
        click.echo("splitter: interrupted", err=True)
        if as_json:
            click.echo(json.dumps(error_object("interrupted")))
    return signals.exit_code(signals.interruption_signal(exc))


def _run_reporting(args: list[str], as_json: bool) -> int:
    """:func:`_run`'s body: invoke, and map each kind of failure to its line and exit code."""
    try:
        _invoke(args)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("splitter: aborted", err=True)
        return 130
    except KeyboardInterrupt as exc:
        return _interruption(exc, as_json)
    except Exception as exc:
        if signals.received() is not None or _interrupted(exc):
            return _interruption(exc, as_json)  # never blame the model for a Ctrl-C
        return _report_error(exc, as_json)
    return 0


def _report_error(exc: Exception, as_json: bool) -> int:
    """One line for ``exc`` (exit code 2 for a user's error, 1 for a bug)."""
    if isinstance(exc, click.UsageError):  # one line, like every other error
        hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
        message = _one_line(exc.format_message()).rstrip(".")
        click.echo(f"splitter: error: {message}{hint}", err=True)
        if as_json:
            click.echo(json.dumps(error_object(message + hint)))
        return 2
    if isinstance(exc, click.ClickException):
        exc.show()
        if as_json:
            click.echo(json.dumps(error_object(_one_line(exc.format_message()))))
        return 2
    if os.environ.get("SPLITTER_DEBUG"):
        traceback.print_exc()
    if isinstance(exc, SplitterError):
        click.echo(f"splitter: error: {_one_line(str(exc))}", err=True)
        if as_json:
            details = getattr(exc, "details", None)
            click.echo(json.dumps(error_object(_one_line(str(exc)), details)))
        return 2
    line = (  # a bug: still one line, but say so
        f"internal error: {type(exc).__name__}: {_one_line(str(exc))} "
        "(please report it; SPLITTER_DEBUG=1 shows the traceback)"
    )
    click.echo(f"splitter: {line}", err=True)
    if as_json:
        click.echo(json.dumps(error_object(line)))
    return 1


def _interrupted(exc: BaseException) -> bool:
    """True when a KeyboardInterrupt is in ``exc``'s cause or context chain."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _invoke(args: list[str]) -> None:
    """``cli.main`` without its handling of Ctrl-C (which prints an empty line first): the
    context is made and invoked directly, so KeyboardInterrupt reaches :func:`_run`."""
    with cli.make_context("splitter", args) as ctx:
        cli.invoke(ctx)


def _one_line(text: str) -> str:
    """``text`` on one line, whitespace runs collapsed, and every other non-printable character
    (ANSI escapes from a board's ERROR text or a QEMU log, ...) escaped as ``\\x1b``, so an
    error line cannot drive the terminal."""
    line = " ".join(text.split())
    return "".join(ch if ch.isprintable() else escaped(ch) for ch in line)


def wants_json(args: list[str]) -> bool:
    """True when the command line asks for JSON output: ``--json`` or ``--format json`` (before
    a ``--`` that ends the options)."""
    opts = args[: args.index("--")] if "--" in args else args
    pairs = zip(opts, [*opts[1:], ""], strict=True)
    return "--json" in opts or "--format=json" in opts or ("--format", "json") in pairs


#: ``PATH: rest``: a message that starts with a file name (no spaces, a path or a suffix)
_FILE_RE = re.compile(r"^(?P<file>[^\s:]*[/.#][^\s:]*|[^\s:]+\.[A-Za-z0-9]+):\s")


def error_object(message: str, details: object = None) -> dict[str, object]:
    """The ``--json`` error: ``{"error": message, "file": ..., "hint": ...}``, plus
    ``"details"`` when the error carries what was done before it (compile's summary when only
    the firmware failed).

    Error messages are one line, ``FILE: what is wrong; what to do`` (STYLE.md): ``file`` is the
    leading file name when the message starts with one (else null), ``hint`` the text after the
    last ``"; "`` (else null). ``error`` is the whole line.
    """
    m = _FILE_RE.match(message)
    file = m["file"] if m else None
    hint = message.rsplit("; ", 1)[1].strip() if "; " in message else None
    obj: dict[str, object] = {"error": message, "file": file, "hint": hint}
    if details is not None:
        obj["details"] = details
    return obj
