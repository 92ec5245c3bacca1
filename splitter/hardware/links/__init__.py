"""Link kinds: one module per kind of board-to-board link (:class:`LinkKind`), UART today.

Adding a link kind: one module here with its :class:`LinkKind` subclass (it registers itself
under its ``name``, the board file's ``[link] kind``), a C file implementing
``splitter/firmware_templates/link.h`` and a host ``Transport`` (CONTRIBUTING.md, "Adding a link
kind").
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from splitter.errors import BoardFileError
from splitter.hardware.links.base import REGISTERED, LinkKind


def _load() -> dict[str, LinkKind]:
    """Import every module of this package; one instance per registered kind, by name."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")
    return {cls.name: cls() for cls in REGISTERED}


#: ``[link] kind`` -> its link kind, ``"uart"`` first (the default).
LINK_KINDS: Mapping[str, LinkKind] = MappingProxyType(_load())

#: The link kind of a board file without ``[link] kind``.
DEFAULT_KIND = "uart"


def link_kind(name: str = DEFAULT_KIND) -> LinkKind:
    """The link kind called ``name`` (BoardFileError naming the known ones otherwise)."""
    try:
        return LINK_KINDS[name]
    except KeyError:
        raise BoardFileError(
            f"[link] kind = '{name}' is unknown; use one of {', '.join(LINK_KINDS)}"
        ) from None


__all__ = ["DEFAULT_KIND", "LINK_KINDS", "LinkKind", "link_kind"]
