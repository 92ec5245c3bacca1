"""``OUT/report.json``: what the HTML report needs that ``plan.json`` does not hold.

Per layer of the chain its name, op and costs (FLASH, RAM, MACs, OUT bytes: the profile plot),
and, when branch and bound ran, its nodes per (layer, device) (the search heatmap). ``compile``
writes it next to ``plan.json``; ``splitter report OUT`` reads it back, checked like every other
file of a compile output (bounded, schema, lengths against the plan, finite non-negative counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.errors import InputFileError
from splitter.inputs import parse_json, read_input_text
from splitter.ir import Chain, Plan
from splitter.manifest import PlanManifest

REPORT_DATA_FILE = "report.json"
SCHEMA = "splitter-report/1"
_MAX_COUNT = 1 << 62


@dataclass(frozen=True)
class LayerRow:
    """One chain layer as the profile plot shows it."""

    index: int
    name: str
    op: str
    flash: int
    ram: int
    macs: int
    out_bytes: int


@dataclass(frozen=True)
class ReportData:
    """The layer profile and the branch-and-bound search counts (``None``: B&B did not run)."""

    layers: tuple[LayerRow, ...]
    search: tuple[tuple[int, ...], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``OUT/report.json``."""
        return {
            "schema": SCHEMA,
            "layers": [
                {
                    "index": r.index,
                    "name": r.name,
                    "op": r.op,
                    "flash": r.flash,
                    "ram": r.ram,
                    "macs": r.macs,
                    "out_bytes": r.out_bytes,
                }
                for r in self.layers
            ],
            "search": None if self.search is None else [list(row) for row in self.search],
        }


def report_data(chain: Chain, plan: Plan) -> ReportData:
    """The report data of a compiled plan."""
    rows = tuple(
        LayerRow(
            index=layer.index,
            name=layer.name,
            op=layer.op_label,
            flash=layer.cost.flash,
            ram=layer.cost.ram,
            macs=layer.cost.macs,
            out_bytes=layer.cost.out_bytes,
        )
        for layer in chain.layers
    )
    return ReportData(rows, plan.search)


def read_report_data(out_dir: str | Path, manifest: PlanManifest) -> ReportData:
    """``OUT/report.json`` checked against the plan; one-line :class:`InputFileError` if bad."""
    path = Path(out_dir) / REPORT_DATA_FILE
    fix = f"re-run `splitter compile` to write {path.name}"
    if not path.exists():
        raise InputFileError(f"{path}: missing (written by compile since report.html); {fix}")
    data = parse_json(read_input_text(path, "report data"), str(path))
    try:
        parsed = _parse(data, manifest)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputFileError(f"{path}: malformed ({type(exc).__name__}: {exc}); {fix}") from None
    return parsed


def _count(x: Any, what: str) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < _MAX_COUNT:
        raise ValueError(f"{what} is {x!r}, not a count")
    return x


def _parse(data: Any, manifest: PlanManifest) -> ReportData:
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        raise ValueError(f"schema is not {SCHEMA!r}")
    layers = data["layers"]
    n, d = len(manifest.assignment), len(manifest.devices)
    if not isinstance(layers, list) or len(layers) != n:
        raise ValueError(f"layers must be a list of the plan's {n} layers")
    rows = []
    for k, row in enumerate(layers):
        if not isinstance(row["name"], str) or not isinstance(row["op"], str):
            raise TypeError(f"layer {k}: name and op must be strings")
        if _count(row["index"], f"layer {k} index") != k:
            raise ValueError(f"layer {k}: index {row['index']}")
        rows.append(
            LayerRow(
                k,
                row["name"],
                row["op"],
                *(_count(row[f], f"layer {k} {f}") for f in ("flash", "ram", "macs", "out_bytes")),
            )
        )
    search = data.get("search")
    if search is not None:
        if not isinstance(search, list) or len(search) != n:
            raise ValueError(f"search must be {n} rows of {d} counts")
        for row in search:
            if not isinstance(row, list) or len(row) != d:
                raise ValueError(f"search must be {n} rows of {d} counts")
        search = tuple(tuple(_count(x, "search count") for x in row) for row in search)
    return ReportData(tuple(rows), search)
