"""The HTML report of a compile output: ``OUT/report.html`` (``splitter report OUT``).

``compile`` writes it (with ``OUT/report.json``, :mod:`splitter.report.data`), ``bench`` and
``calibrate`` refresh it, :func:`write_report` regenerates it from the files in ``OUT``:
``plan.json`` (checked manifest), ``report.json``, ``validation.json`` and, once benched,
``bench.json``. The figures are matplotlib SVGs embedded as data URIs
(:mod:`splitter.report.plots`); the pipeline Gantt chart comes from
:mod:`splitter.report.pipeline`, whose steady state equals SPEC.md eq. 17 where eq. 17's model
applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from splitter.errors import InputFileError
from splitter.inputs import parse_json, read_input_text
from splitter.manifest import PlanManifest, read_manifest
from splitter.report.data import REPORT_DATA_FILE, ReportData, read_report_data, report_data

REPORT_FILE = "report.html"

__all__ = [
    "REPORT_DATA_FILE",
    "REPORT_FILE",
    "ReportData",
    "refresh_report",
    "render_report",
    "report_data",
    "write_report",
]


def render_report(
    manifest: PlanManifest,
    data: ReportData,
    validation: Mapping[str, Any] | None,
    bench: Mapping[str, Any] | None = None,
    where: str = "bench.json",
    segments: Mapping[str, Any] | None = None,
) -> str:
    """The HTML text of the report (``bench``: the ``bench.json`` object, if any;
    ``segments``: ``segments.json`` of a segmented ``OUT``)."""
    from splitter.report.html import render

    rows, note = _bench_rows(bench, where)
    return render(manifest, data, validation, rows, note, segments)


def _bench_rows(
    bench: Mapping[str, Any] | None, where: str
) -> tuple[Sequence[tuple[str, float, float]] | None, str]:
    if bench is None:
        return None, ""
    from splitter.bench.results import comparison_values

    try:
        rows = comparison_values(bench)
        note = str(bench.get("note") or "")
        est = bench["estimate"]
        what = "an emulated run" if est.get("prediction") == "emulator" else "a run on the parts"
        note += f"{'; ' if note else ''}the estimate predicts {what}, calibration: "
        note += str(est.get("calibration", "none"))
        float(rows[-1][1]) + float(rows[-1][2])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise InputFileError(
            f"{where}: malformed bench results ({type(exc).__name__}: {exc}); re-run `splitter "
            "bench`"
        ) from None
    return rows, note


def _optional_json(path: Path, what: str) -> Any:
    if not path.exists():
        return None
    return parse_json(read_input_text(path, what), str(path))


def write_report(out_dir: str | Path) -> Path:
    """Regenerate ``OUT/report.html`` from the files in ``OUT``; returns its path."""
    from splitter.bench.results import write_atomic

    out = Path(out_dir)
    manifest = read_manifest(out)
    data = read_report_data(out, manifest)
    validation = _optional_json(out / "validation.json", "validation results")
    if validation is not None and not isinstance(validation, Mapping):
        raise InputFileError(f"{out / 'validation.json'}: not a JSON object; re-run compile")
    bench = _optional_json(out / "bench.json", "bench results")
    from splitter.segments.firmware import read_segments

    segments = read_segments(out)
    try:
        text = render_report(
            manifest, data, validation, bench, str(out / "bench.json"), segments=segments
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        if isinstance(exc, InputFileError):
            raise
        raise InputFileError(
            f"{out / 'validation.json'}: malformed ({type(exc).__name__}: {exc}); re-run "
            "`splitter compile`"
        ) from None
    return write_atomic(out / REPORT_FILE, text)


def refresh_report(out_dir: str | Path) -> Path | None:
    """:func:`write_report` when ``OUT`` has the report's data (compiled by a splitter that
    writes it); ``None`` otherwise (``bench`` and ``calibrate`` call this after their work)."""
    if not (Path(out_dir) / REPORT_DATA_FILE).exists():
        return None
    return write_report(out_dir)
