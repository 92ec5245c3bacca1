"""Error hierarchy of splitter.

Every error a user can cause is a :class:`SplitterError`. Subclasses also inherit the matching
built-in exception (as TVM's ``OpNotImplemented(OpError, NotImplementedError)``) so library users
can catch either. Only the CLI entry point turns them into a one-line message and exit code 2.

A message names the file, the thing and the fix, e.g.
``"conv_3: needs 412 KiB RAM, largest device STM32F446RE has 128 KiB; add a bigger part"``.
"""

from __future__ import annotations


class SplitterError(Exception):
    """Root of every error splitter reports to a user (exit code 2, one line)."""


class InputFileError(SplitterError, ValueError):
    """A model, profile, board file or input array is missing, corrupt or malformed."""


class UnsupportedOpError(SplitterError, NotImplementedError):
    """The model uses operators splitter cannot handle; the message lists all of them."""


class ShapeError(SplitterError, ValueError):
    """A tensor shape is dynamic, inconsistent or not what an operator expects."""


class BoardFileError(SplitterError, ValueError):
    """boards.toml (or an inline part) is malformed: unknown key, bad size string, unknown part."""


class InfeasibleError(SplitterError, ValueError):
    """No assignment of layers to devices satisfies the memory constraints (SPEC.md (1)-(5))."""


class SolverError(SplitterError, RuntimeError):
    """A solver cannot handle the instance (too large for Full Search, objective unsupported...)."""


class ValidationError(SplitterError, AssertionError):
    """The chain of sub-models does not compute what the original model computes."""


class OutputError(SplitterError, OSError):
    """The output directory cannot be written (it is a file, not writable, disk full...)."""


class ToolchainError(SplitterError, RuntimeError):
    """A required external tool (arm-none-eabi-gcc, qemu-system-arm, st-flash...) is missing or
    failed."""


class LinkError(SplitterError, RuntimeError):
    """A serial link to a board failed: no answer, CRC errors past the retry limit, wrong
    firmware."""


def quoted(name: object) -> str:
    """``name`` (a tensor, node, input or column name read from a user's file or command line) as
    an error message shows it: Python's ``repr`` of its text, so ``'conv_1'`` as before, while a
    newline, quote or control character is escaped (``'in\\nput'``) and the message stays one
    line."""
    return repr(str(name))


def escaped(text: object) -> str:
    """``text`` with newlines and control characters escaped, without quotes (for labels such as
    ``Conv (conv_1)`` that already bracket the name)."""
    return quoted(text)[1:-1]


class SplitRequestError(SplitterError, ValueError):
    """A ``--split-layer NAME:K`` request names a layer that cannot be split that way."""
