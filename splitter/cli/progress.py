"""Progress of long steps, one module for every command.

On a terminal (stderr) a step is a rich spinner line and a measured quantity (bytes sent, runs,
devices built) a rich progress bar with its rate; otherwise each step is one plain line on stderr
(``splitter: importing mobilenet.onnx``) and a bar a line at most every :data:`PLAIN_PERIOD_S`
seconds and when it completes. Nothing is ever written to stdout, so ``--json`` stays parseable.

``SPLITTER_PROGRESS`` overrides the choice: ``rich``, ``plain`` or ``off`` (the test suite runs
with ``off`` so that error output stays one line; ``tests/test_cli_progress.py`` checks both
forms).
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text

MODES = ("rich", "plain", "off")
#: seconds between two plain lines of the same bar
PLAIN_PERIOD_S = 2.0


def progress_mode() -> str:
    """``SPLITTER_PROGRESS`` if set to one of :data:`MODES`, else rich on a terminal, plain
    otherwise."""
    mode = os.environ.get("SPLITTER_PROGRESS", "").strip().lower()
    if mode in MODES:
        return mode
    return "rich" if Console(stderr=True).is_terminal else "plain"


class Bar:
    """One measured quantity: ``update(done)`` with the amount completed so far."""

    def __init__(self, owner: Progress, text: str, total: float, unit: str) -> None:
        self.owner, self.text, self.total, self.unit = owner, text, total, unit
        self.start = time.monotonic()
        self.last_line = self.start  # the first plain line after PLAIN_PERIOD_S, or at the end
        self.task: TaskID | None = None
        if owner.rich is not None:
            columns = "bytes" if unit == "B" else "count"
            self.task = owner.rich.add_task(text, total=total, kind=columns)
        self.finished = False
        self.base: float | None = None  # ``done`` at the first update: the rate counts from it

    def update(self, done: float) -> None:
        """Report ``done`` of ``total``; the plain form prints at most every few seconds."""
        if self.base is None:
            self.base, self.start = done, time.monotonic()
        if self.owner.rich is not None and self.task is not None:
            self.owner.rich.update(self.task, completed=done)
        elif self.owner.mode == "plain" and not self.finished:
            now = time.monotonic()
            complete = done >= self.total
            if complete or now - self.last_line >= PLAIN_PERIOD_S:
                self.last_line = now
                self.owner.line(f"{self.text}: {self._amount(done)}{self._rate(done, now)}")
        self.finished = self.finished or done >= self.total

    def _amount(self, done: float) -> str:
        pct = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{done:g}/{self.total:g}{unit}{pct}"

    def _rate(self, done: float, now: float) -> str:
        elapsed, moved = now - self.start, done - (self.base or 0.0)
        if self.unit != "B" or elapsed <= 0 or moved <= 0:
            return ""
        return f", {moved / elapsed / 1024:.1f} KiB/s"


class Progress:
    """The progress reporter of one command run (a context manager).

    ``step(text)`` announces the next step; ``bar(text, total, unit)`` a measured quantity.
    """

    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode or progress_mode()
        self.console = Console(stderr=True)
        self.rich: RichProgress | None = None
        self._step: TaskID | None = None
        self._step_text = ""
        self._last_status = -PLAIN_PERIOD_S  # the first status line prints at once
        if self.mode == "rich":
            self.rich = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                _AmountColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )

    def __enter__(self) -> Progress:
        if self.rich is not None:
            self.rich.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the display (idempotent): what follows is the command's own output."""
        if self.rich is not None:
            self.rich.stop()
            self.rich = None

    def line(self, text: str) -> None:
        """One plain progress line on stderr (nothing in rich or off mode)."""
        if self.mode == "plain":
            print(f"splitter: {text}", file=sys.stderr, flush=True)

    def step(self, text: str) -> None:
        """A new step begins (the previous one is over)."""
        if self.rich is not None:
            if self._step is not None:
                self.rich.remove_task(self._step)
            self._step = self.rich.add_task(text, total=None, kind="step")
            self._step_text = text
        else:
            self.line(text)

    def status(self, text: str) -> None:
        """A progress line within the current step (a solver's best value and gap): the step's
        text on a terminal, a plain line at most every :data:`PLAIN_PERIOD_S` seconds."""
        if self.rich is not None and self._step is not None:
            self.rich.update(self._step, description=f"{self._step_text}: {text}")
        elif self.mode == "plain":
            now = time.monotonic()
            if now - self._last_status >= PLAIN_PERIOD_S:
                self._last_status = now
                self.line(text)

    def bar(self, text: str, total: float, unit: str = "") -> Bar:
        """A bar for ``total`` units (``"B"``: bytes, shown with their rate)."""
        return Bar(self, text, total, unit)

    def transfers(self) -> TransferBars:
        """A callback for :attr:`splitter.device.host.HostLink.on_bytes`: one bar per transfer."""
        return TransferBars(self)


#: Bar titles of HostLink.on_bytes directions ("receive" and any other: the result).
_TRANSFER = {"send": "sending the input", "load": "loading segment weights"}


class TransferBars:
    """``(direction, done, total)`` -> a byte bar per tensor transfer, with its rate."""

    def __init__(self, owner: Progress) -> None:
        self.owner = owner
        self.bars: dict[str, Bar] = {}

    def __call__(self, direction: str, done: int, total: int) -> None:
        bar = self.bars.get(direction)
        if bar is None or bar.finished or bar.total != total:
            what = _TRANSFER.get(direction, "receiving the result")
            bar = self.bars[direction] = self.owner.bar(what, total, "B")
        bar.update(done)


class _AmountColumn(MofNCompleteColumn):
    """``12.0/48.0 kB 25.3 kB/s`` for byte bars, ``3/10`` for counts, nothing for steps."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_col = DownloadColumn()
        self.rate_col = TransferSpeedColumn()

    def render(self, task: Task) -> Text:
        kind = task.fields.get("kind")
        if kind == "step":
            return Text("")
        if kind == "bytes":
            return Text(f"{self.bytes_col.render(task)} {self.rate_col.render(task)}")
        return super().render(task)
