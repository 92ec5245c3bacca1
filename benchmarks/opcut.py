"""Super-node vs operator granularity (issue 15) on the zoo graphs and the branchy models.

For each model: layers of both chains, the largest super-node's flash, the widest cut at op
granularity (tensors), the peak and sum of the live bytes over the cuts for the chosen order and
for the model's own order, whether the exact order search finished, and the time to build the op
chain. With ``--plan`` also the op-granularity plan over ``models/boards/zoo_large.toml``
(sub-models, tensors per cut, solve time).

Usage: ``.venv/bin/python benchmarks/opcut.py [--plan]``; writes ``benchmarks/results/opcut.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import onnx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ("inception_v1", "inception_v2", "densenet121", "resnet50", "shufflenet", "squeezenet")
LOCAL = ("long_skip.onnx", "resnet8.onnx", "mlperf_ic_resnet8_int8.tflite")


def measure(path: Path, plan: bool) -> dict[str, Any]:
    """The row of one model (module docstring)."""
    from splitter.graph.chain import build_chain
    from splitter.graph.opchain import _dag, exact_order, fuse_ops, order_cost
    from splitter.importers import load_model

    graph = load_model(path).graph
    supernode = build_chain(graph)
    start = time.perf_counter()
    op = build_chain(graph, granularity="op")
    build_s = time.perf_counter() - start
    groups = fuse_ops(graph)
    dag = _dag(groups, graph, lambda t: graph.tensors[t].nbytes)
    own = order_cost(dag, range(len(groups)))
    row: dict[str, Any] = {
        "model": path.name,
        "supernode_layers": len(supernode),
        "largest_supernode_flash": max(layer.cost.flash for layer in supernode.layers),
        "op_layers": len(op),
        "widest_cut_tensors": max(len(layer.boundary) for layer in op.layers),
        "peak_live_bytes": max(layer.cost.out_bytes for layer in op.layers[:-1]),
        "sum_live_bytes": sum(layer.cost.out_bytes for layer in op.layers[:-1]),
        "own_order_peak_sum": list(own),
        "exact_order": exact_order(dag) is not None,
        "op_chain_build_s": round(build_s, 3),
    }
    if plan:
        row["plan"] = _plan(path)
    return row


def _plan(path: Path) -> dict[str, Any]:
    from splitter.hardware.boards import load_boards
    from splitter.importers import load_chain
    from splitter.manifest import submodel_boundaries
    from splitter.partition.planner import plan_chain

    chain = load_chain(path, granularity="op")
    start = time.perf_counter()
    result = plan_chain(chain, load_boards(ROOT / "models" / "boards" / "zoo_large.toml"))
    return {
        "solve_s": round(time.perf_counter() - start, 2),
        "solver": result.solver,
        "optimal": result.optimal,
        "submodels": len(result.submodels),
        "cut_tensors": [
            len(submodel_boundaries(chain, s.first, s.last)[1]) for s in result.submodels[:-1]
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="also plan over zoo_large.toml")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    paths = [LIGHT / f"light_{n}.onnx" for n in ZOO] + [ROOT / "models" / n for n in LOCAL]
    rows = []
    for path in paths:
        rows.append(measure(path, args.plan))
        print(json.dumps(rows[-1]))
    RESULTS.mkdir(exist_ok=True)
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "rows": rows,
    }
    (RESULTS / "opcut.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
