"""bench.json on disk (atomic) and the estimated-vs-measured rows every front end shows."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from splitter.bench.stats import error_pct, median
from splitter.errors import OutputError
from splitter.outputs import relist

BENCH_FILE = "bench.json"


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path`` and ``os.replace`` it into place."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
        relist(path)  # a file splitter generated stays splitter's (files.sha256)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc}); check the directory") from None
    return path


def write_bench(out_dir: str | Path, result: Mapping[str, Any]) -> Path:
    """``OUT/bench.json`` (atomic)."""
    return write_atomic(Path(out_dir) / BENCH_FILE, json.dumps(result, indent=1) + "\n")


def comparison_rows(result: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """Rows ``(what, estimated, measured median, error %)``: sub-models, links, latency."""
    return [_row(what, e, m) for what, e, m in comparison_values(result)]


def comparison_values(result: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """``(what, estimated s, measured median s)``: sub-models, links, latency.

    Compute is compared in seconds: measured ``cycles / f_meas`` (168 MHz under QEMU) against
    the estimate ``sum MAC * CpM / f``.
    """
    est = result["estimate"]
    est_sub = {s["index"]: s for s in est["submodels"]}
    rows = []
    for d in result["devices"]:
        for sub in d["submodels"]:
            measured = median(sub["cycles"]) / float(d["clock_hz"])
            e = est_sub[sub["index"]]["seconds"]
            rows.append((f"sub-model {sub['index']} on {d['device']} (compute)", e, measured))
    est_links = {(ln["from"], ln["to"], ln["submodel"]): ln for ln in est["links"]}
    for ln in result["links"]:
        e = est_links[(ln["from"], ln["to"], ln["submodel"])]["seconds"]
        secs = [s for s in ln["seconds"] if s is not None]
        what = f"link {ln['from']} -> {ln['to']} ({ln['bytes']} B, {ln['measured_by']})"
        rows.append((what, e, median(secs)))
    rows.append(("end-to-end latency", est["latency_s"], median(result["latency_s"])))
    return rows


def wire_lines(result: Mapping[str, Any]) -> list[str]:
    """Per link: the bytes on the wire the estimate predicts against those counted in the runs
    (the fault proxy between emulated boards, the host's byte counter on its links)."""
    est_links = {(ln["from"], ln["to"], ln["submodel"]): ln for ln in result["estimate"]["links"]}
    out = []
    for ln in result["links"]:
        predicted = est_links[(ln["from"], ln["to"], ln["submodel"])].get("wire_bytes")
        counted = sorted({b for b in ln.get("wire_bytes", []) if b is not None})
        if predicted is None or not counted:
            continue
        seen = "/".join(str(b) for b in counted)
        out.append(
            f"link {ln['from']} -> {ln['to']}: {ln['bytes']} B payload, {predicted:g} B on the "
            f"wire predicted, {seen} B counted ({ln['measured_by']})"
        )
    return out


def _row(what: str, estimated: float, measured: float) -> tuple[str, str, str, str]:
    err = error_pct(estimated, measured)
    return (
        what,
        f"{estimated * 1e3:.3f} ms",
        f"{measured * 1e3:.3f} ms",
        "-" if err is None else f"{err:+.1f}",
    )
