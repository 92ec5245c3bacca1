"""Escaping of user text embedded in generated files: names are data, never code.

Every string that comes from a user's file (device, part and layer names, model and tensor names,
ports) is validated at parse time (``splitter.hardware.boards``), and the generators still escape
it for the language of the file it lands in, so a name that slipped past validation (a library
user building the objects directly) can neither end a comment nor inject a Makefile recipe, a
linker-script command or Markdown markup. Each function is the identity on the names the
validators accept (``[A-Za-z0-9_.-]`` and spaces), so generated files of valid inputs do not
change. Registered as Jinja2 filters by :func:`register`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

#: Characters kept verbatim in Makefile comments; everything else becomes ``?``.
_MAKE_SAFE = re.compile(r"[^A-Za-z0-9 _.,:;()+=/@%<>\[\]-]")
#: Markdown characters that can start markup, a table cell, HTML or an entity (CommonMark lets
#: any ASCII punctuation be backslash-escaped); ``_``, ``-`` and ``.`` of valid names are kept.
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|#!&~])")


def _printable_ascii(text: object) -> str:
    """``text`` with non-ASCII and control characters as Python escapes (``\\n``, ``\\x1b``,
    ``\\u00e9``): one line of printable ASCII, as ``ascii()`` shows it without the quotes."""
    s = str(text)
    if s.isascii() and s.isprintable():
        return s
    return ascii(s)[1:-1]


def c_string(text: object) -> str:
    """Contents of a C string literal (without the quotes) holding exactly the UTF-8 bytes of
    ``text``: ``\\`` and ``"`` backslash-escaped, ``?`` as ``\\?`` (no trigraphs under
    ``-std=c99``), every byte outside printable ASCII as a three-digit octal escape ``\\ooo``
    (octal, unlike ``\\x``, stops after three digits, so a following digit stays a digit)."""
    out = []
    for byte in str(text).encode("utf-8"):
        ch = chr(byte)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def c_comment(text: object) -> str:
    """``text`` safe inside a C or linker-script ``/* ... */`` comment: one printable ASCII line
    (:func:`_printable_ascii`), with ``*/`` and ``/*`` broken up (``* /``, ``/ *``) so the
    comment can neither end early nor nest (``-Wcomment`` is an error under ``-Werror``), and
    ``??`` broken up (no trigraph such as ``??/``, a backslash, can join lines)."""
    s = _printable_ascii(text)
    while "*/" in s or "/*" in s or "??" in s:
        s = s.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    return s


def make_comment(text: object) -> str:
    """``text`` safe in a Makefile ``#`` comment: every character outside letters, digits, space
    and ``_.,:;()+=/@%<>[]-`` becomes ``?``, so no newline ends the comment, no backslash
    continues it onto the next line and no ``$`` is ever seen by make."""
    return _MAKE_SAFE.sub("?", str(text))


def md_text(text: object) -> str:
    """``text`` as literal Markdown inline text (also inside a table cell): one printable ASCII
    line (:func:`_printable_ascii`) with every markup character backslash-escaped (CommonMark
    allows escaping any ASCII punctuation), so ``|`` cannot split a cell, nor ``<`` open HTML,
    nor ``[`` a link."""
    return _MD_SPECIAL.sub(r"\\\1", _printable_ascii(text))


def md_code(text: object) -> str:
    """``text`` as a Markdown code span (inside a table cell): the printable-ASCII line
    (:func:`_printable_ascii`) between backtick fences one longer than its longest backtick run,
    padded with a space when it starts or ends with a backtick (CommonMark code spans); ``|`` is
    written ``\\|`` so it cannot end a GFM table cell."""
    s = _printable_ascii(text).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


FILTERS: dict[str, Callable[[object], str]] = {
    "c_string": c_string,
    "c_comment": c_comment,
    "ld_comment": c_comment,
    "make_comment": make_comment,
    "md": md_text,
    "md_code": md_code,
}


def register(env: jinja2.Environment) -> jinja2.Environment:
    """Add :data:`FILTERS` to a Jinja2 environment (``{{ device.name | c_string }}``)."""
    env.filters.update(FILTERS)
    return env
