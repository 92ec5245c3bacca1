"""The safe patterns every user-given name must fully match (names are data, never code).

A name read from a boards file, the MCU catalog or a compile output's manifests ends up in
generated C, linker scripts, Makefiles, Markdown and directory names (``OUT/firmware/<device>/``).
Each kind of name is checked with :func:`re.fullmatch` against one pattern here when it is parsed,
so a newline, a quote, ``$``, ``*/``, ``/`` or ``..`` never gets that far; the generators escape
what they embed as well (``splitter/codegen/escape.py``). A pattern starts with a letter or digit
where the
value is passed on a tool's command line (probe serials), so it cannot read as an option.
"""

from __future__ import annotations

import re

#: Device names: directory names under ``OUT/firmware`` and C string contents.
DEVICE_NAME = re.compile(r"[a-z0-9_-]{1,64}")
#: MCU part names (catalog keys and inline ``part = { name = ... }``), e.g. ``STM32H743ZI``.
PART_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
#: Serial ports: device paths and pyserial URLs, e.g. ``/dev/ttyACM0``, ``socket://host:5000``.
PORT = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./:@+=,-]{0,254}")
#: Debug-probe serial numbers (``st-flash --serial``), e.g. ``066DFF555``.
PROBE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
#: Free-text citations (a part's ``source``): one line of printable ASCII.
TEXT = re.compile(r"[ -~]{0,200}")
#: A sub-model file recorded in ``plan.json``: ``submodels/<safe file name>``, nothing else.
SUBMODEL_FILE = re.compile(r"submodels/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

#: What each pattern allows, as an error message states it.
ALLOWED = {
    DEVICE_NAME: "1-64 of lowercase letters, digits, '_' or '-'",
    PART_NAME: "1-64 of letters, digits, '_', '.', '+' or '-', starting with a letter or digit",
    PORT: "1-255 of letters, digits and '_./:@+=,-', not starting with '-'",
    PROBE: "1-128 of letters, digits and '_.:-', starting with a letter or digit",
    TEXT: "at most 200 printable ASCII characters on one line",
    SUBMODEL_FILE: "'submodels/<file>' with letters, digits and '_.-'",
}


def matches(pattern: re.Pattern[str], value: object) -> bool:
    """Whether ``value`` is a string that fully matches ``pattern`` (no partial or ``$``-before-
    newline match, as ``re.match(r"^...$")`` would allow)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def problem(pattern: re.Pattern[str], value: object, field: str) -> str | None:
    """``None`` when ``value`` fully matches ``pattern``, else a one-line message naming the
    field, the value (escaped, see :func:`splitter.errors.quoted`) and the allowed pattern."""
    if matches(pattern, value):
        return None
    shown = repr(value) if not isinstance(value, str) else ascii(value[:80])
    return f"{field} = {shown} is not allowed; use {ALLOWED[pattern]} (pattern {pattern.pattern})"
