"""splitter: split a neural network over several STM32 microcontrollers.

Pipeline (one package per stage, imports flow one way):
``importers -> graph -> cost -> partition -> slicing -> codegen -> toolchain / device``
(the layers are declared in ``pyproject.toml`` and checked by ``lint-imports``).

The public API is the few names below, re-exported from where they live (documented in
``docs/reference/api.md``); they load on first use, so ``import splitter`` stays cheap:

* :func:`compile_model` (``splitter.compile``): plan, slice, validate, write ``OUT`` with the
  firmware projects, what ``splitter compile`` does; :class:`CompileOptions` its options,
  :class:`CompileResult` what it returns;
* :func:`plan` (``splitter.planning``): the optimal placement without writing anything, what
  ``splitter plan`` does; :class:`PlanResult` what it returns;
* :func:`load_model`, :func:`load_chain` (``splitter.importers``): a model read once, and the
  costed chain of layers the planner sees (what ``splitter inspect`` prints);
* :func:`load_boards` (``splitter.hardware.boards``): a parsed ``boards.toml``;
* :func:`read_manifest` (``splitter.manifest``): ``OUT/plan.json`` as the later stages read it;
* :class:`SplitterError` (``splitter.errors``): the root of every error a user can cause.

Example::

    import splitter

    result = splitter.plan("models/tiny_cnn.onnx", "models/boards/e2e_tiny2.toml")
    print(result.manifest.latency_s, [s.device for s in result.manifest.submodels])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from splitter.version import __version__

#: public name -> the module it lives in
_EXPORTS = {
    "compile_model": "splitter.compile",
    "CompileOptions": "splitter.compile",
    "CompileResult": "splitter.compile",
    "plan": "splitter.planning",
    "PlanResult": "splitter.planning",
    "load_model": "splitter.importers",
    "load_chain": "splitter.importers",
    "load_boards": "splitter.hardware.boards",
    "read_manifest": "splitter.manifest",
    "SplitterError": "splitter.errors",
}

__all__ = [
    "CompileOptions",
    "CompileResult",
    "PlanResult",
    "SplitterError",
    "__version__",
    "compile_model",
    "load_boards",
    "load_chain",
    "load_model",
    "plan",
    "read_manifest",
]

if TYPE_CHECKING:
    from splitter.compile import CompileOptions, CompileResult, compile_model
    from splitter.errors import SplitterError
    from splitter.hardware.boards import load_boards
    from splitter.importers import load_chain, load_model
    from splitter.manifest import read_manifest
    from splitter.planning import PlanResult, plan


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'splitter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
