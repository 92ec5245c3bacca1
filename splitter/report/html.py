"""``OUT/report.html``: one self-contained page (figures as base64 SVG images, no scripts).

Everything the page prints from a file (names, numbers, messages) goes through
:func:`html.escape`; figures are ``<img>`` data URIs, so an SVG cannot run anything and works
offline.
"""

from __future__ import annotations

import base64
import html
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from splitter.manifest import PlanManifest
from splitter.partition.problem import close
from splitter.report import plots
from splitter.report.data import ReportData
from splitter.report.pipeline import Stage, eq17_applies, simulate, steady_waiting

#: inferences drawn in the Gantt chart
GANTT_INFERENCES = 5

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right;overflow-wrap:anywhere}
td.l,th.l{text-align:left}figure{margin:1em 0}figure img{max-width:100%}
figcaption{font-size:.85em;color:#555}.fail{color:#b00;font-weight:bold}.ok{color:#060}
.note{background:#fff8e0;padding:.5em;border-left:3px solid #e0b000}
"""


def esc(x: object) -> str:
    """Text for HTML."""
    return html.escape(str(x), quote=True)


def num(x: Any, fmt: str = ".4g") -> str:
    """A number formatted, ``-`` for anything that is not a finite number."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return "-"
    return format(x, fmt)


def figure(plot_id: str, svg: str, caption: str) -> str:
    """An ``<img>`` data URI figure with an id (``plot-...``) and a caption."""
    data = base64.b64encode(svg.encode()).decode("ascii")
    return (
        f'<figure id="{esc(plot_id)}"><img class="plot" alt="{esc(caption)}" '
        f'src="data:image/svg+xml;base64,{data}"><figcaption>{esc(caption)}</figcaption></figure>'
    )


def table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A table of already escaped cells; the first ``left`` columns left-aligned."""

    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f"<{tag}{' class=l' if k < left else ''}>{c}</{tag}>" for k, c in enumerate(row)
        )

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><tr>{cells('th', [esc(h) for h in head])}</tr>{body}</table>"


def stages_of(m: PlanManifest) -> list[Stage]:
    """The pipeline stages of a plan: one per sub-model (device, compute, transfer)."""
    last = len(m.submodels) - 1
    return [
        Stage(s.device_index, s.compute_s, s.transfer_s if k < last else 0.0)
        for k, s in enumerate(m.submodels)
    ]


def render(
    m: PlanManifest,
    data: ReportData,
    validation: Mapping[str, Any] | None,
    bench_rows: Sequence[tuple[str, float, float]] | None,
    bench_note: str = "",
    segments: Mapping[str, Any] | None = None,
) -> str:
    """The whole page (``segments``: ``OUT/segments.json`` of a ``splitter segment -o`` output,
    whose one device runs LO-SC segments one after another instead of a pipeline)."""
    names = [d.name for d in sorted(m.devices, key=lambda d: d.index)]
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>splitter report: {esc(m.model.name)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>splitter report: {esc(m.model.name)}</h1>",
        _summary(m, segments),
        "<h2>Layer profile</h2>",
        figure(
            "plot-profile",
            plots.profile_svg(data.layers, m.assignment, names),
            "FLASH, RAM and MACs per layer, coloured by device; dashed lines are the cuts",
        ),
        _submodel_table(m),
        *_segments(segments),
        *_cuts(m),
        *_partial(m),
        "<h2>Memory per device</h2>",
        figure(
            "plot-memory",
            plots.memory_svg(
                names,
                [(d.flash_total, d.flash_budget) for d in m.devices],
                [(d.ram_total, d.ram_limit) for d in m.devices],
            ),
            "each device's whole image (FLASH: weights + code; RAM: arena + runtime) against "
            "what it may take (the board file's budget; RAM within the region the arena is "
            "linked into), the figures splitter plan and splitter build print",
        ),
        _memory_table(m),
        "<h2>Energy per inference</h2>",
        _energy(m),
        "<h2>Pipelined run</h2>",
        _pipeline(m, names) if segments is None else _NO_PIPELINE,
        "<h2>Search</h2>",
        _search(m, data, names) if segments is None else _SEGMENT_SEARCH,
        "<h2>Estimated vs measured</h2>",
        _bench(bench_rows, bench_note, str(m.model.name)),
        "<h2>Validation</h2>",
        _validation(validation),
        "<h2>Layers</h2>",
        _layers(data, m, names),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _summary(m: PlanManifest, segments: Mapping[str, Any] | None) -> str:
    proof = "proved optimal" if m.optimal else "not proved optimal"
    if m.gap is not None:
        proof += f" (gap {m.gap:.2%})"
    rows = [
        ["model", f"{esc(m.model.path)} ({esc(m.model.format)}, {m.model.layers} layers)"],
        ["boards", esc(m.boards_path)],
        ["link", f"{esc(m.rates_text())}, {m.bits_per_byte} bits per byte; {_link_model(m)}"],
        ["host I/O", _host_io(m)],
        ["granularity", _granularity(m)],
        ["objective / solver", f"{esc(m.objective)}, {esc(m.solver)}: {proof}, {m.nodes} nodes"],
    ]
    if segments is None:
        rows += _headline_rows(m)
        rows += [
            ["latency (eq. 13)", f"{num(m.latency_s * 1e3, '.3f')} ms"],
            ["throughput (eq. 17)", f"{num(m.throughput_per_s, '.4f')} /s"],
            ["throughput, reference [9]", f"{num(m.throughput_ref9_per_s, '.4f')} /s"],
            ["bottleneck device (eq. 17)", esc(m.bottleneck_device)],
        ]
    else:
        load, compute = float(segments["load_s"]), float(segments["compute_s"])
        rows.append(
            ["time per inference (LO-SC)", f"{num((load + compute) * 1e3, '.3f')} ms: loading "
             f"the weights {num(load * 1e3, '.3f')} ms, compute {num(compute * 1e3, '.3f')} ms "
             "(host I/O not included)"]
        )  # fmt: skip
    rows.append(["compute times", esc(m.prediction_note)])
    return table(["", ""], rows, left=2)


_NO_PIPELINE = (
    "<p>One device runs the LO-SC segments one after another (<code>splitter segment</code>): "
    "there is no pipeline to draw.</p>"
)


_SEGMENT_SEARCH = (
    "<p>The segments were chosen by CP-SAT (LO-SC, proof in the segments section); there is no "
    "branch-and-bound search to show.</p>"
)


def _segments(record: Mapping[str, Any] | None) -> list[str]:
    """The LO-SC segments of a ``splitter segment -o`` output (``segments.json``): per segment
    its units and layers, weights (loaded before it runs), activations, memory and carried bytes,
    its estimated loading (``W_s`` x bits per byte / baud) and compute (eq. 6) time."""
    if record is None:
        return []
    segs = record["segments"]
    rows = [
        [
            str(s["index"]),
            esc(s["units"][0] if len(s["units"]) == 1 else f"{s['units'][0]}..{s['units'][-1]}"),
            f"{esc(s['first_name'])}..{esc(s['last_name'])}",
            str(s["weights_bytes"]),
            str(s["activation_bytes"]),
            str(s["memory_bytes"]),
            str(s["carried_bytes"]),
            num(float(s["load_s"]) * 1e3, ".3f"),
            num(float(s["compute_s"]) * 1e3, ".3f"),
        ]
        for s in segs
    ]
    head = ["#", "units", "layers", "weights B", "activations B", "memory B", "carried B",
            "load ms", "compute ms"]  # fmt: skip
    proof = "proved optimal" if record["optimal"] else "not proved optimal"
    note = (
        f"<p>{len(segs)} segments run one after another on {esc(record['device'])} "
        f"({esc(record['mcu'])}) in one RAM region of {record['region_bytes']} B; the weights "
        f"({record['blob_bytes']} B in <code>firmware/{esc(record['device'])}/"
        f"{esc(record['blob'])}</code>) are loaded before each segment{_load_where(record)}. "
        "Carried bytes (LO-SC "
        f"eq. 9): {record['carried_bytes']}, {proof} (cpsat).</p>"
    )
    svg = plots.segments_svg(
        [int(s["weights_bytes"]) for s in segs],
        [int(s["activation_bytes"]) for s in segs],
        int(record["region_bytes"]),
    )
    caption = "Per segment: activations and weights against the one RAM region (dashed)"
    return ["<h2>LO-SC segments</h2>", note, figure("plot-segments", svg, caption),
            table(head, rows, left=3)]  # fmt: skip


def _load_where(record: Mapping[str, Any]) -> str:
    """``": the part reads them from its external flash QUADSPI at 0x90000000 ..."`` (empty for
    records written before ``load_via``)."""
    ext, via = record.get("extflash"), record.get("load_via")
    where = ""
    if ext:
        where = (
            f": the part reads them from its memory-mapped external flash {esc(ext['name'])} at "
            f"0x{int(ext['origin']):08X} (the emulator build streams them)"
        )
    return where + (f"; load times assume {esc(via)}" if via else "")


def _link_model(m: PlanManifest) -> str:
    if m.link_model != "wire":
        return "payload bytes only (the thesis's link model)"
    budget = f", retransmission budget {m.retransmit:g}" if m.retransmit else ""
    return f"bytes on the wire (docs/protocol.md: framing, TIMING, ACKs{budget})"


def _memory_table(m: PlanManifest) -> str:
    """Per device the flash and RAM figures of the memory plot, in bytes."""
    rows = [
        [esc(d.name), esc(d.mcu), f"{d.flash_total} / {d.flash_budget}",
         f"{d.flash_used} + {d.code_bytes}", f"{d.ram_total} / {d.ram_limit}",
         f"{d.ram_used} + {d.runtime_ram_bytes}", esc(d.ram_region)]
        for d in m.devices
    ]  # fmt: skip
    head = ["device", "MCU", "flash B / budget", "weights + code", "RAM B / limit",
            "arena + runtime", "RAM region"]  # fmt: skip
    return table(head, rows, left=2)


def _energy(m: PlanManifest) -> str:
    """Per device the energy of one inference: computing, sending, waiting and total (mJ), the
    powers and the datasheet rows they come from (``plan.json``'s ``energy``), as a stacked bar
    plot and a table with the total; a note when a part has no energy data."""
    e = m.energy
    if e is None:
        return (
            "<p>Not computed: a part of this plan has no Run / Sleep rows in "
            "<code>splitter/hardware/energy.toml</code>.</p>"
        )
    names = [d.name for d in e.devices]
    svg = plots.energy_svg(names, [(d.compute_j, d.transfer_j, d.wait_j) for d in e.devices])
    rows = [
        [esc(d.name), esc(d.mcu), num(1e3 * d.run_w, ".2f"), num(1e3 * d.wait_w, ".2f"),
         *(num(1e3 * x, ".4f") for x in (d.compute_j, d.transfer_j, d.wait_j, d.total_j)),
         f"{esc(d.run_table)}<br>{esc(d.wait_table)}"]
        for d in e.devices
    ]  # fmt: skip
    total = [sum(getattr(d, k) for d in e.devices) for k in ("compute_j", "transfer_j", "wait_j")]
    rows.append(
        ["<b>total</b>", "", "", "", *(num(1e3 * x, ".4f") for x in total),
         f"<b>{num(1e3 * e.total_j, '.4f')}</b>", ""]
    )  # fmt: skip
    head = ["device", "MCU", "run mW", "sleep mW", "compute mJ", "transfer mJ", "waiting mJ",
            "total mJ", "datasheet rows (Run, Sleep)"]  # fmt: skip
    caption = (
        f"Energy of one inference, {num(1e3 * e.total_j, '.4f')} mJ: each board computing and "
        "sending at its run power, waiting at its sleep power, for the latency"
    )
    return f"<p>{esc(e.model)}</p>" + figure("plot-energy", svg, caption) + table(head, rows, 2)


def _headline_rows(m: PlanManifest) -> list[list[str]]:
    """The product's and the PC harness's latency and throughput, labelled."""
    if m.product is None or m.harness is None:
        return []

    def rate(x: float | None) -> str:
        return "unbounded" if x is None else f"{num(x, '.4f')} /s"

    p, h = m.product, m.harness
    return [
        ["product (first board fed locally, no PC)",
         f"latency {num(p.latency_s * 1e3, '.3f')} ms, throughput {rate(p.throughput_per_s)}"],
        ["PC harness (host sends input, receives output)",
         f"latency {num(h.latency_s * 1e3, '.3f')} ms, throughput {rate(h.throughput_per_s)}"],
    ]  # fmt: skip


def _host_io(m: PlanManifest) -> str:
    io = m.host_io
    where = "in the latency" if io.counted else "not in the latency"
    return (
        f"{num(io.seconds * 1e3, '.3f')} ms, {where}: input {io.input.bytes} B "
        f"({io.input.wire_bytes} B on the wire) {num(io.input.seconds * 1e3, '.3f')} ms, "
        f"output {io.output.bytes} B ({io.output.wire_bytes} B) "
        f"{num(io.output.seconds * 1e3, '.3f')} ms"
    )


def _granularity(m: PlanManifest) -> str:
    if m.model.granularity == "op":
        return "operator: cuts between operators; a cut carries every tensor live across it"
    return "super-node: cuts between super-nodes (branches kept whole), one tensor per cut"


def _cuts(m: PlanManifest) -> list[str]:
    """Per cut the tensors crossing it (name, shape, dtype, bytes), their bytes, the bytes on the
    wire and the link time (nothing for a one-sub-model plan)."""
    rows = [
        [
            f"{a.index}&rarr;{b.index}",
            f"{esc(a.device)} &rarr; {esc(b.device)}",
            "<br>".join(
                f"{esc(t.name)} {esc('x'.join(map(str, t.shape)))} {esc(t.dtype)} ({t.nbytes} B)"
                for t in a.outputs
            ),
            str(len(a.outputs)),
            str(a.out_bytes),
            str(a.wire_bytes),
            num(a.transfer_s * 1e3, ".3f"),
        ]
        for a, b in itertools.pairwise(m.submodels)
    ]
    if not rows:
        return []
    head = ["cut", "link", "tensors crossing", "count", "bytes", "wire B", "send ms"]
    return ["<h2>Cuts</h2>", table(head, rows, left=3)]


def _submodel_table(m: PlanManifest) -> str:
    rows = [
        [
            str(s.index),
            esc(s.device),
            esc(s.mcu),
            f"{s.first}..{s.last}",
            esc(s.file or "-"),
            str(s.flash_bytes),
            str(s.ram_bytes),
            str(s.macs),
            num(s.compute_s * 1e3, ".3f"),
            num(s.transfer_s * 1e3, ".3f"),
            str(s.out_bytes),
            str(s.wire_bytes),
        ]
        for s in m.submodels
    ]
    head = [
        "#",
        "device",
        "MCU",
        "layers",
        "file",
        "FLASH B",
        "RAM B",
        "MACs",
        "compute ms",
        "send ms",
        "out B",
        "wire B",
    ]
    return table(head, rows, left=5)


def _partial(m: PlanManifest) -> list[str]:
    """PEX partial execution: per sub-model running loops, its RAM with and without them and the
    loops (nothing when no sub-model runs one)."""
    rows = [
        [
            str(s.index),
            esc(s.device),
            str(s.ram_bytes),
            str(s.ram_whole_bytes),
            str(s.ram_whole_bytes - s.ram_bytes),
            "<br>".join(esc(loop) for loop in s.loops),
        ]
        for s in m.submodels
        if s.loops
    ]
    if not rows:
        return []
    head = ["#", "device", "RAM B (partial execution)", "RAM B (op by op)", "saved B", "loops"]
    note = (
        "<p>Partial execution (PEX): these sub-models run the loops below one channel at a time, "
        "with the same MACs; their RAM estimate is the arena the firmware allocates.</p>"
    )
    return ["<h2>Partial execution</h2>", note, table(head, rows, left=2)]


def _pipeline(m: PlanManifest, names: Sequence[str]) -> str:
    stages = stages_of(m)
    bottleneck = m.device(m.bottleneck_device).index
    sim = simulate(stages, GANTT_INFERENCES, bottleneck)
    steady = steady_waiting(stages, bottleneck=bottleneck)
    rate = 1.0 / steady if steady > 0 else math.inf
    if close(steady, m.waiting_s):
        verdict = (
            f"<p class=ok>The simulated steady state equals eq. 17: waiting time "
            f"{num(steady * 1e3, '.3f')} ms, {num(rate, '.4f')} inferences/s.</p>"
        )
    else:
        why = "" if eq17_applies(stages) else (
            " Eq. 17 assumes that no device other than the bottleneck is held longer than the "
            "bottleneck and that no link between two other devices lies inside the bottleneck's "
            "range; this plan breaks that."
        )  # fmt: skip
        verdict = (
            f"<p class=note>Eq. 17 gives a waiting time of {num(m.waiting_s * 1e3, '.3f')} ms; "
            f"the simulation needs {num(steady * 1e3, '.3f')} ms ({num(rate, '.4f')} /s).{why} "
            "The simulated figure is the one to expect.</p>"
        )
    caption = (
        f"Simulated run of {GANTT_INFERENCES} inferences (the model of SPEC.md eq. 17: the "
        f"bottleneck device {names[bottleneck]} serves one inference from its first to its last "
        "sub-model, the others interleave); first result after "
        f"{num(sim.latency_s * 1e3, '.3f')} ms (eq. 13: {num(m.latency_s * 1e3, '.3f')} ms"
        + (
            f", of which the host's input and output transfers, not drawn: "
            f"{num(m.host_io.seconds * 1e3, '.3f')} ms)"
            if m.host_io.counted
            else ")"
        )
    )
    svg = plots.gantt_svg(sim, names, bottleneck, steady)
    return figure("plot-gantt", svg, caption) + verdict


def _search(m: PlanManifest, data: ReportData, names: Sequence[str]) -> str:
    if data.search is None:
        return (
            f"<p>Solver {esc(m.solver)} ran without branch and bound, so there is no search "
            "heatmap (use <code>--solver bnb</code> to see one).</p>"
        )
    svg = plots.heatmap_svg(data.search, names, m.assignment)
    total = sum(sum(r) for r in data.search)
    return figure(
        "plot-search",
        svg,
        f"Branch and bound: {total} nodes, by the layer they assigned and the device they chose; "
        "red circles are the plan",
    )


def _bench(rows: Sequence[tuple[str, float, float]] | None, note: str, model: str) -> str:
    if rows is None:
        return (
            "<p>No measurements yet: run <code>splitter bench OUT --emulate</code> (or with "
            "<code>--port</code>) and this section shows them.</p>"
        )
    body = []
    for k, (what, est, meas) in enumerate(rows):
        err = 100.0 * (est - meas) / meas if meas else math.nan
        body.append(
            [str(k), esc(what), num(est * 1e3, ".3f"), num(meas * 1e3, ".3f"), num(err, "+.1f")]
        )
    head = ["row", "what", "estimated ms", "measured ms (median)", "error %"]
    out = figure("plot-bench", plots.bench_svg(rows), f"{model}: estimated vs measured")
    return out + (f"<p>{esc(note)}</p>" if note else "") + table(head, body, left=2)


_METRICS = ("l2r", "mae", "rmse", "cosine", "max_abs", "max_rel")


def _validation(v: Mapping[str, Any] | None) -> str:
    quant = _quantization(v.get("quantization")) if v else ""
    if v is None or v.get("skipped"):
        return "<p>Validation skipped (<code>--no-validate</code>).</p>" + quant
    verdict = "<span class=ok>passed</span>" if v["passed"] else "<span class=fail>FAILED</span>"
    tol = v.get("tolerance", {})
    out = [
        f"<p>{verdict} on {len(v['samples'])} inputs with {esc(v.get('runtime', ''))} "
        f"(float: max-abs &le; {esc(tol.get('float_max_abs', '-'))}, integer: bit-exact). "
        "L2R = ||a-b||/||a||, MAE = mean |a-b|, a = original model, b = chain of sub-models.</p>"
    ]
    head = ["output", "dtype", "L2R", "MAE", "RMSE", "cosine", "max-abs", "max-rel", "pass"]
    rows = [
        [
            esc(s["name"]),
            esc(s["dtype"]),
            *(num(s.get(k), ".3g") for k in _METRICS[:3]),
            num(s.get("cosine"), ".9f"),
            *(num(s.get(k), ".3g") for k in _METRICS[4:]),
            "yes" if s["passed"] else "<span class=fail>NO</span>",
        ]
        for s in v["outputs"]
    ]
    out.append(table(head, rows, left=2))
    if v.get("boundaries"):
        rows = [
            [
                str(b.get("submodel", "-")),
                esc(b["name"]),
                esc(b["dtype"]),
                num(b.get("l2r"), ".3g"),
                num(b.get("max_abs"), ".3g"),
                "yes" if b["exact"] else "no",
            ]
            for b in v["boundaries"]
        ]
        out.append("<p>Each sub-model's output against the original's tensor of that name:</p>")
        out.append(table(["sub-model", "tensor", "dtype", "L2R", "max-abs", "bit-exact"], rows, 3))
    labelled = v.get("labelled")
    if labelled:
        out.append(_labelled(labelled))
    out.append(quant)
    return "\n".join(out)


def _quantization(q: Mapping[str, Any] | None) -> str:
    """The accuracy cost of ``--quantize`` (validation.json's ``quantization``)."""
    if not q:
        return ""
    top1 = q.get("top1_agreement")
    rows = [
        ["quantised by", esc(q["method"])],
        ["compared with", f"{esc(q['against'])}, output {esc(q['output'])}"],
        ["samples", f"{q['samples']} ({esc(q['source'])})"],
        ["top-1 agreement", "-" if top1 is None else f"{100 * top1:.1f} %"],
        ["max-abs error", num(q["max_abs"], ".3g")],
        ["mean-abs error", num(q["mean_abs"], ".3g")],
    ]
    return f"<h3>Quantisation ({esc(q['scheme'])})</h3>" + table(["", ""], rows, left=2)


def _labelled(lab: Mapping[str, Any]) -> str:
    rows = [
        ["file", esc(lab["file"])],
        ["samples", str(lab["samples"])],
        ["output", esc(lab["output"])],
        ["accuracy, original model", num(lab["accuracy_original"], ".4f")],
        ["accuracy, split model", num(lab["accuracy_split"], ".4f")],
        ["original and split agree", num(lab["agreement"], ".4f")],
    ]
    text = "<h3>Labelled data</h3>" + table(["", ""], rows, left=2)
    svg = plots.confusion_svg(lab["confusion"], "split model")
    return text + figure(
        "plot-confusion",
        svg,
        "Confusion matrix of the split model (rows: label, columns: predicted)",
    )


def _layers(data: ReportData, m: PlanManifest, names: Sequence[str]) -> str:
    rows = [
        [
            str(r.index),
            esc(r.name),
            esc(r.op),
            str(r.flash),
            str(r.ram),
            str(r.macs),
            str(r.out_bytes),
            esc(names[m.assignment[r.index]]),
        ]
        for r in data.layers
    ]
    head = ["#", "layer", "op", "FLASH B", "RAM B", "MACs", "OUT B", "device"]
    return f"<details><summary>{len(rows)} layers</summary>{table(head, rows, 3)}</details>"
