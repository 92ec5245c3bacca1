"""The per-layer report ``splitter inspect`` prints: rows, totals, JSON and CSV text.

JSON shape (issue 2): ``{"layers": [{"index", "name", "op", "input_shape", "output_shape",
"flash_bytes", "ram_bytes", "macs", "out_bytes"}], "totals": {"flash_bytes", "max_ram_bytes",
"macs", "layers"}}``; shapes are lists of ints. Totals: FLASH and MACs add up over layers, RAM is
the maximum (SPEC.md constraint (5): RAM is reused layer after layer). An operator-granularity
chain (``--granularity op``) adds ``"granularity": "op"`` and, per layer, ``"crossing"``: the
tensors live across the cut after it (``[{"name", "shape", "dtype", "bytes"}]``; ``out_bytes`` is
their total).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from splitter.cost.layer import itemsize_function
from splitter.cost.pex import partial_schedule
from splitter.ir import Chain, Graph, Layer, Op

#: Column order of the rows, the CSV header and the JSON layer objects.
COLUMNS = (
    "index",
    "name",
    "op",
    "input_shape",
    "output_shape",
    "flash_bytes",
    "ram_bytes",
    "macs",
    "out_bytes",
)


def layer_row(layer: Layer) -> dict[str, Any]:
    """One layer as a JSON-ready dict (keys :data:`COLUMNS`)."""
    source = layer.input if layer.input is not None else layer.output
    return {
        "index": layer.index,
        "name": layer.name,
        "op": layer.op_label,
        "input_shape": list(source.shape),
        "output_shape": list(layer.output.shape),
        "flash_bytes": layer.cost.flash,
        "ram_bytes": layer.cost.ram,
        "macs": layer.cost.macs,
        "out_bytes": layer.cost.out_bytes,
    }


def chain_totals(chain: Chain) -> dict[str, int]:
    """``flash_bytes`` (sum), ``max_ram_bytes`` (max), ``macs`` (sum), ``layers`` (count)."""
    costs = chain.costs
    return {
        "flash_bytes": sum(c.flash for c in costs),
        "max_ram_bytes": max((c.ram for c in costs), default=0),
        "macs": sum(c.macs for c in costs),
        "layers": len(costs),
    }


def chain_report(chain: Chain) -> dict[str, Any]:
    """The whole report as a JSON-ready dict."""
    rows = [layer_row(layer) for layer in chain.layers]
    if chain.granularity == "supernode":
        return {"layers": rows, "totals": chain_totals(chain)}
    for row, layer in zip(rows, chain.layers, strict=True):
        row["crossing"] = [
            {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "bytes": t.nbytes}
            for t in layer.boundary
        ]
    return {"granularity": chain.granularity, "layers": rows, "totals": chain_totals(chain)}


def report_json(chain: Chain) -> str:
    """:func:`chain_report` as indented JSON text."""
    return json.dumps(chain_report(chain), indent=2)


def shape_text(shape: list[int] | tuple[int, ...]) -> str:
    """``1x49x10x1`` (``scalar`` for a rank-0 shape)."""
    return "x".join(str(d) for d in shape) or "scalar"


def report_csv(chain: Chain) -> str:
    """One CSV row per layer (header :data:`COLUMNS`, shapes written ``1x49x10x1``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for layer in chain.layers:
        row = layer_row(layer)
        row["input_shape"] = shape_text(row["input_shape"])
        row["output_shape"] = shape_text(row["output_shape"])
        writer.writerow([row[c] for c in COLUMNS])
    return buffer.getvalue()


def partial_report(chain: Chain, activation_bytes: int | None = None) -> dict[str, Any] | None:
    """Peak activation memory with and without PEX partial execution (:mod:`splitter.cost.pex`).

    Accumulating loops of integer models count 32-bit accumulators; float outputs accumulate in
    place; with ``activation_bytes`` given, every buffer has that width (the PEX paper's
    counting). Integer models also get row loops (:mod:`splitter.cost.rows`: int8 convolutions
    streaming rows, exact, no accumulators). None for layer profiles (no graph).
    """
    if chain.graph is None:
        return None
    graph = chain.graph
    integer = activation_bytes is None and any(
        spec.dtype in ("int8", "uint8") for spec in graph.tensors.values()
    )
    options: dict[str, Any] = {
        "accumulator_bytes": 4 if integer else None,
        "row_rule": (lambda _op, _graph: True) if integer else None,
    }
    answer = partial_schedule(graph, itemsize_function(activation_bytes), **options)
    body = _after_input_quantize(graph)
    extra = {}
    if integer and body:  # float input: the figure a full-integer model (int8 input) has
        inner = partial_schedule(graph, itemsize_function(activation_bytes), ops=body, **options)
        extra = {"int8_ordinary_peak_bytes": inner.ordinary_peak, "int8_peak_bytes": inner.peak}
    return {
        **extra,
        "ordinary_peak_bytes": answer.ordinary_peak,
        "peak_bytes": answer.peak,
        "loops": [
            {
                "ops": list(answer.op_names[lp.first : lp.last + 1]),
                "by": lp.by,
                lp.by + "s": lp.channels,
                "bytes": lp.memory,
            }
            for lp in answer.loops
        ],
    }


def _after_input_quantize(graph: Graph) -> list[Op]:
    """The ops after the ``quantize`` ops of the graph inputs (a QDQ model with a float input),
    or ``[]`` when the graph starts with no such op."""
    ops = list(graph.ops)
    k = 0
    while k < len(ops) and ops[k].kind == "quantize" and ops[k].inputs[0] in graph.inputs:
        k += 1
    return ops[k:] if 0 < k < len(ops) else []
