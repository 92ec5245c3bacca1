"""SIGINT (Ctrl-C) and SIGTERM end a command as an interruption, never as an error.

:func:`install` makes both signals raise :class:`KeyboardInterrupt` (SIGTERM a subclass,
:class:`Terminated`) and records which one arrived first (:func:`received`). The record is
what makes the report honest: a library that turns the exception into its own (onnxruntime
reports "initialization failed" when a Ctrl-C lands while it loads a model) would otherwise make
the CLI blame the model, the boards file or the cut. The CLI asks :func:`received` before it
prints any error and, when a signal came, prints ``splitter: interrupted`` and exits with
``128 + signal number`` (130 for SIGINT, 143 for SIGTERM; the shell's convention, POSIX
``wait`` status mapping as bash reports it).

:func:`deferred` holds both signals back during a block that must not be cut in half (the two
renames that swap an output directory into place) and raises once the block is over.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: The signals that end a command as an interruption.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (``kill PID``, a CI runner's timeout); handled as a Ctrl-C is."""


def _raise(signum: int, _frame: FrameType | None) -> None:
    """The handler: record ``signum`` and raise the matching interruption."""
    _received.append(signum)
    if signum == signal.SIGTERM:
        raise Terminated
    raise KeyboardInterrupt


def install() -> None:
    """Route SIGINT and SIGTERM to :func:`_raise` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise)


def ignore() -> None:
    """Ignore both signals from now on (the command is over and its exit code decided)."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def received() -> int | None:
    """The first stop signal that arrived since :func:`install` or :func:`reset`, else None."""
    return _received[0] if _received else None


def reset() -> None:
    """Forget the signals received (an in-process caller running several commands)."""
    _received.clear()


def exit_code(signum: int) -> int:
    """``128 + signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signum


def interruption_signal(exc: BaseException) -> int:
    """The signal an interruption ``exc`` stands for (SIGTERM for :class:`Terminated`)."""
    first = received()
    if first is not None:
        return first
    return signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold back SIGINT and SIGTERM for the duration of the block; one that arrived meanwhile
    is raised when the block ends (only in the main thread, the only one Python delivers
    signals to)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _f: caught.append(signum)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        _received.append(caught[0])
        raise Terminated if caught[0] == signal.SIGTERM else KeyboardInterrupt
