"""The report's figures, drawn with matplotlib (object API, no pyplot state) as SVG text.

Every function returns one self-contained SVG document. Text is drawn from numbers, device
names (checked against ``splitter.names``) and fixed labels only; layer and tensor names stay in
the HTML tables, where they are escaped.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from splitter.report.data import LayerRow
from splitter.report.pipeline import Simulation

#: one colour per device (matplotlib's tab10), cycled
COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
#: text as SVG text, stable ids, and no mathtext (a "$" in a name stays a "$")
_RC: Any = {
    "svg.fonttype": "none",
    "svg.hashsalt": "splitter",
    "font.size": 9,
    "text.parse_math": False,
}


def colour(device: int) -> str:
    """The colour of device ``device`` in every figure."""
    return COLOURS[device % len(COLOURS)]


def _render(draw: object, width: float, height: float, label_chars: int = 6) -> str:
    """Create a figure under the report's rc settings, let ``draw(fig)`` fill it, return SVG.

    Margins are set in inches (room for ``label_chars`` characters of y tick labels) instead
    of a layout engine, which would draw every figure twice (4x slower on a compile).
    """
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height), layout=None)
        left = 0.45 + 0.07 * label_chars
        fig.subplots_adjust(
            left=left / width,
            right=1 - 0.25 / width,
            bottom=0.55 / height,
            top=1 - 0.35 / height,
            hspace=0.15,
            wspace=0.25 + left / width,
        )
        draw(fig)  # type: ignore[operator]
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def profile_svg(layers: Sequence[LayerRow], assignment: Sequence[int], names: Sequence[str]) -> str:
    """Per-layer FLASH, RAM and MACs (thesis Figure 4), bars coloured by device, cuts dashed."""
    x = np.arange(len(layers))
    cuts = [j - 0.5 for j in range(1, len(assignment)) if assignment[j] != assignment[j - 1]]
    series = (
        ("FLASH (KiB)", [r.flash / 1024 for r in layers]),
        ("RAM (KiB)", [r.ram / 1024 for r in layers]),
        ("MACs (M)", [r.macs / 1e6 for r in layers]),
    )

    def draw(fig: object) -> None:
        axes = fig.subplots(3, 1, sharex=True)  # type: ignore[attr-defined]
        cols = [colour(i) for i in assignment]
        for ax, (label, values) in zip(axes, series, strict=True):
            ax.bar(x, values, color=cols, width=0.8)
            ax.set_ylabel(label)
            for c in cuts:
                ax.axvline(c, color="black", linestyle="--", linewidth=1)
        axes[-1].set_xlabel("layer (cuts dashed)")
        from matplotlib.patches import Patch

        used = sorted(set(assignment))
        handles = [Patch(color=colour(i), label=names[i]) for i in used]
        axes[0].legend(handles=handles, loc="upper right", fontsize=8)

    return _render(draw, 9, 5.5)


def memory_svg(
    names: Sequence[str],
    flash: Sequence[tuple[int, int]],
    ram: Sequence[tuple[int, int]],
) -> str:
    """Per device FLASH and RAM used against capacity (``(used, budget)`` pairs, bytes)."""
    y = np.arange(len(names))

    def draw(fig: object) -> None:
        axes = fig.subplots(1, 2)  # type: ignore[attr-defined]
        for ax, (title, pairs) in zip(axes, (("FLASH", flash), ("RAM", ram)), strict=True):
            used = [u / 1024 for u, _ in pairs]
            cap = [b / 1024 for _, b in pairs]
            ax.barh(y, cap, color="#dddddd", edgecolor="black", label="capacity")
            ax.barh(y, used, color=[colour(i) for i in range(len(names))], label="used")
            for k, (u, b) in enumerate(pairs):
                pct = 100 * u / b if b else 0.0
                ax.text(cap[k], k, f" {pct:.0f}%", va="center", fontsize=8)
            ax.set_xlim(0, 1.18 * max([*cap, *used, 1e-3]))
            ax.set_yticks(y, list(names))
            ax.set_xlabel(f"{title} (KiB)")
            ax.set_title(f"{title} used / capacity")
            ax.invert_yaxis()

    return _render(draw, 9, 0.6 * len(names) + 1.6, max(map(len, names)))


def energy_svg(names: Sequence[str], parts: Sequence[tuple[float, float, float]]) -> str:
    """Per device the energy of one inference (mJ), stacked: computing (solid), sending
    (hatched) and waiting in sleep (light); ``parts`` are ``(compute, transfer, wait)`` in J."""
    y = np.arange(len(names))

    def draw(fig: object) -> None:
        ax = fig.subplots()  # type: ignore[attr-defined]
        left = np.zeros(len(names))
        cols = [colour(i) for i in range(len(names))]
        styles: tuple[dict[str, Any], ...] = (  # computing, sending, waiting
            {"color": cols},
            {"color": cols, "hatch": "//", "alpha": 0.6},
            {"color": "#dddddd", "edgecolor": "black"},
        )
        for k, style in enumerate(styles):
            values = np.array([1e3 * p[k] for p in parts])
            ax.barh(y, values, left=left, **style)
            left += values
        for k, total in enumerate(left):
            ax.text(total, k, f" {total:.3g}", va="center", fontsize=8)
        ax.set_xlim(0, 1.15 * max([*left, 1e-9]))
        ax.set_yticks(y, list(names))
        ax.set_xlabel("energy of one inference (mJ)")
        ax.invert_yaxis()
        from matplotlib.patches import Patch

        keys = [  # neutral swatches: the bars take each device's colour
            Patch(color="#888888", label="computing (run power)"),
            Patch(facecolor="#888888", alpha=0.6, hatch="//", label="sending (run power)"),
            Patch(facecolor="#dddddd", edgecolor="black", label="waiting (sleep power)"),
        ]
        ax.legend(handles=keys, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8,
                  frameon=False)  # fmt: skip

    return _render(draw, 9, 0.6 * len(names) + 1.6, max(map(len, names)))


def gantt_svg(sim: Simulation, names: Sequence[str], bottleneck: int, waiting_s: float) -> str:
    """Compute (solid) and link sends (hatched) per device over time, per inference shaded;
    the bottleneck device's row is marked."""
    rows = sorted({t.device for t in sim.tasks})
    pos = {dev: k for k, dev in enumerate(rows)}

    def draw(fig: object) -> None:
        ax = fig.subplots()  # type: ignore[attr-defined]
        for t in sim.tasks:
            if t.end <= t.start:
                continue
            shade = 0.35 + 0.65 * ((t.inference % 3) / 2)
            kw = {"color": colour(t.device), "alpha": shade, "edgecolor": "black", "linewidth": 0.4}
            if t.kind == "send":
                kw.update(color="white", hatch="///", alpha=1.0, edgecolor=colour(t.device))
            ax.barh(pos[t.device], t.end - t.start, left=t.start, height=0.6, **kw)
            if t.kind == "compute" and (t.end - t.start) > 0.04 * sim.completions[-1]:
                ax.text((t.start + t.end) / 2, pos[t.device], f"{t.inference}:{t.stage}",
                        ha="center", va="center", fontsize=7)  # fmt: skip
        labels = [names[d] + ("  (bottleneck)" if d == bottleneck else "") for d in rows]
        ax.set_yticks(range(len(rows)), labels)
        ticks = ax.get_yticklabels()
        if bottleneck in pos:
            ticks[pos[bottleneck]].set_color("#d62728")
            ticks[pos[bottleneck]].set_fontweight("bold")
        for c in sim.completions:
            ax.axvline(c, color="#999999", linewidth=0.6, linestyle=":")
        ax.invert_yaxis()
        ax.set_xlabel(
            f"time (s); labels inference:sub-model, hatched = link send; steady-state waiting "
            f"time {waiting_s * 1e3:.3f} ms"
        )

    return _render(draw, 9, 0.7 * len(rows) + 1.6, max(len(names[d]) for d in rows) + 14)


def bench_svg(rows: Sequence[tuple[str, float, float]]) -> str:
    """Estimated vs measured (median) seconds per sub-model, link and end to end."""
    y = np.arange(len(rows))

    def draw(fig: object) -> None:
        ax = fig.subplots()  # type: ignore[attr-defined]
        ax.barh(y - 0.2, [r[1] * 1e3 for r in rows], height=0.4, label="estimated", color="#1f77b4")
        ax.barh(y + 0.2, [r[2] * 1e3 for r in rows], height=0.4, label="measured", color="#ff7f0e")
        ax.set_yticks(y, [str(k) for k in range(len(rows))])
        ax.set_ylabel("row of the table below")
        ax.set_xlabel("ms")
        ax.invert_yaxis()
        ax.legend(loc="lower right")

    return _render(draw, 9, 0.45 * len(rows) + 1.4)


def heatmap_svg(
    search: Sequence[Sequence[int]], names: Sequence[str], assignment: Sequence[int]
) -> str:
    """Branch-and-bound nodes per (device, layer), log colour scale; the plan's cells circled."""
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import FuncFormatter, LogFormatter, MaxNLocator

    counts = np.asarray(search, dtype=float).T  # devices x layers

    def draw(fig: object) -> None:
        ax = fig.subplots()  # type: ignore[attr-defined]
        shown = np.where(counts > 0, counts, np.nan)
        top = max(float(np.nanmax(shown)) if np.isfinite(shown).any() else 1.0, 1.0)
        im = ax.imshow(shown, aspect="auto", cmap="viridis", norm=LogNorm(1, max(top, 2.0)))
        ax.scatter(range(len(assignment)), assignment, marker="o", facecolors="none",
                   edgecolors="red", s=40, label="plan")  # fmt: skip
        ax.set_yticks(range(len(names)), list(names))
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
        ax.set_title("branch and bound: nodes per (device, layer)")
        ax.legend(loc="upper right", fontsize=8)
        plain = FuncFormatter(lambda v, _pos: f"{v:g}")  # no mathtext: plain numbers
        bar = fig.colorbar(im, ax=ax, label="nodes", format=plain)  # type: ignore[attr-defined]
        # the log scale's minor ticks (2, 3, ... 20, 30) have their own formatter, a mathtext
        # one ("$\\mathdefault{2\\times10^{0}}$") that parse_math=False would print raw;
        # LogFormatter thins them the same way and writes plain numbers
        bar.ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))

    return _render(draw, 9, 0.5 * len(names) + 2.0, max(map(len, names)))


def confusion_svg(matrix: Sequence[Sequence[int]], title: str) -> str:
    """A confusion matrix (rows: label, columns: prediction) with the counts written in."""
    m = np.asarray(matrix, dtype=float)

    def draw(fig: object) -> None:
        ax = fig.subplots()  # type: ignore[attr-defined]
        im = ax.imshow(m, cmap="Blues")
        if m.shape[0] <= 20:
            for (r, c), v in np.ndenumerate(m):
                if v:
                    ax.text(c, r, f"{int(v)}", ha="center", va="center", fontsize=7)
        ax.set_xlabel("predicted class")
        ax.set_ylabel("label")
        ax.set_title(title)
        fig.colorbar(im, ax=ax)  # type: ignore[attr-defined]

    side = min(7.0, 2.5 + 0.3 * m.shape[0])
    return _render(draw, side + 1, side)


def segments_svg(weights: Sequence[int], activations: Sequence[int], region: int) -> str:
    """LO-SC segments run one after another on one device: per segment its weights and largest
    activation buffer (bytes) stacked against the one RAM region the firmware allocates."""
    x = np.arange(len(weights))
    w = [b / 1024 for b in weights]
    a = [b / 1024 for b in activations]

    def draw(fig: object) -> None:
        ax = fig.add_subplot(1, 1, 1)  # type: ignore[attr-defined]
        ax.bar(x, a, color=colour(0), label="activations")
        ax.bar(x, w, bottom=a, color=colour(1), label="weights (loaded before the segment)")
        ax.axhline(region / 1024, color="black", linestyle="--", linewidth=1, label="RAM region")
        ax.set_xticks(x)
        ax.set_xlabel("segment")
        ax.set_ylabel("KiB")
        ax.set_ylim(0, 1.25 * max([region / 1024, *(p + q for p, q in zip(w, a, strict=True))]))
        ax.legend(loc="upper right", fontsize=8)

    return _render(draw, 9, 3.2)
