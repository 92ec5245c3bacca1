"""What ``splitter choose -o OUT`` writes: ``boards.toml`` (the chosen set, ready for
``splitter compile``), ``choose.json`` (:func:`result_dict`, also ``--json``'s output) and
``choose.html`` (the answer, the Pareto front as a table and a plot of price against the
target's figure, coloured by energy).

``OUT`` must be new, empty or an earlier ``choose`` output (it holds ``choose.json``): nothing
else is overwritten.
"""

from __future__ import annotations

import html
import io
import json
import math
from pathlib import Path
from typing import Any

from splitter.choose import ChooseResult, energy_of
from splitter.choose.search import SetResult
from splitter.errors import OutputError

FILES = ("boards.toml", "choose.json", "choose.html")


def _num(x: float | None) -> float | None:
    """JSON-safe: None for None / inf / nan."""
    return None if x is None or not math.isfinite(x) else float(x)


def set_dict(result: ChooseResult, r: SetResult) -> dict[str, Any]:
    """One set as JSON."""
    return {
        "parts": result.names(r),
        "boards": [result.candidates[i].board_label for i in r.idx],
        "price_usd": r.price,
        "meets": r.meets,
        "proved": r.proved,
        "latency_s": _num(r.latency_s),
        "throughput_per_s": _num(r.throughput_per_s),
        "energy_j": _num(r.energy_j),
        "least_energy_j": _num(r.least_energy_j),
        "granularity": r.granularity,
        "pex": r.pex,
    }


def result_dict(result: ChooseResult) -> dict[str, Any]:
    """The whole result as JSON (``choose.json`` and ``--json``)."""
    s = result.stats
    return {
        "schema": "splitter.choose/1",
        "model": result.model,
        "target": {"kind": result.target.kind, "value": result.target.value},
        "minimise": result.minimise,
        "max_boards": result.max_boards,
        "answer": None if result.answer is None else set_dict(result, result.answer),
        "proved_optimal": result.proved,
        "proof_note": result.proof_note,
        "search": {
            "sets": s.sets,
            "pruned": dict(s.pruned),
            "solved_to_answer": s.solved_to_answer,
            "seconds_to_answer": s.seconds_to_answer,
            "pruned_fraction": s.pruned_fraction,
            "solved": s.solved,
            "seconds": s.seconds,
        },
        "front": [set_dict(result, r) for r in result.front],
        "candidates": [
            {
                "part": c.name,
                "board": c.board_label,
                "price_usd": c.price_usd,
                "price_source": c.price_source,
                "price_date": c.price_date,
                "energy_data": c.energy is not None,
            }
            for c in result.candidates
        ],
        "skipped": result.skipped,
    }


def _toml_value(value: object) -> str:
    """A TOML scalar (strings as JSON strings, which TOML basic strings accept)."""
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def boards_toml(result: ChooseResult) -> str:
    """The chosen set as a boards.toml text."""
    obj = result.boards_object()
    assert obj is not None and result.answer is not None
    lines = [
        f"# Written by `splitter choose` for {Path(result.model).name}: "
        f"{result.label(result.answer)}, ${result.answer.price:.2f}, {result.target.describe()}.",
        "[link]",
    ]
    lines += [f"{k} = {_toml_value(v)}" for k, v in obj["link"].items()]  # type: ignore[attr-defined]
    for dev in obj["device"]:  # type: ignore[attr-defined]
        lines += ["", "[[device]]", *(f"{k} = {_toml_value(v)}" for k, v in dev.items())]
    return "\n".join(lines) + "\n"


def _check_out(out: Path) -> None:
    """Refuse an ``OUT`` that holds anything ``choose`` did not write."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a directory; give a new directory with -o")
    if out.is_dir():
        others = [p.name for p in out.iterdir() if p.name not in FILES]
        if others or (any(out.iterdir()) and not (out / "choose.json").exists()):
            raise OutputError(
                f"{out}: holds files splitter choose did not write ({', '.join(others[:3])}); "
                "give a new directory with -o"
            )


def write(result: ChooseResult, out: str | Path) -> list[Path]:
    """Write ``boards.toml``, ``choose.json`` and ``choose.html`` into ``out``."""
    root = Path(out)
    _check_out(root)
    root.mkdir(parents=True, exist_ok=True)
    texts = {
        "boards.toml": boards_toml(result),
        "choose.json": json.dumps(result_dict(result), indent=2),
        "choose.html": page(result),
    }
    for name, text in texts.items():
        (root / name).write_text(text, "utf-8")
    return [root / name for name in texts]


def _figure_label(result: ChooseResult) -> str:
    return "latency (ms)" if result.target.kind == "latency" else "throughput (/s)"


def _figure(result: ChooseResult, r: SetResult) -> float:
    if result.target.kind == "latency":
        return (r.latency_s or math.nan) * 1e3
    return r.throughput_per_s or math.nan


def plot_svg(result: ChooseResult) -> str:
    """Price against the target's figure for every solved set meeting the target (grey: off
    the front), the front coloured by energy per inference, the answer circled."""
    import matplotlib
    from matplotlib.figure import Figure

    solved = [r for r in result.results if r.meets]
    front = result.front
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "splitter", "font.size": 9}
    ):
        fig = Figure(figsize=(7.0, 4.2))
        ax = fig.add_subplot()
        ax.scatter([r.price for r in solved], [_figure(result, r) for r in solved], s=12,
                   color="#bbbbbb", label="meets the target")  # fmt: skip
        energy = [energy_of(r) * 1e3 for r in front]
        points = ax.scatter([r.price for r in front], [_figure(result, r) for r in front], s=36,
                            c=energy, cmap="viridis", label="Pareto front")  # fmt: skip
        if result.answer is not None:
            a = result.answer
            ax.scatter([a.price], [_figure(result, a)], s=160, facecolors="none",
                       edgecolors="#d62728", linewidths=1.5, label="answer")  # fmt: skip
        if front and all(math.isfinite(e) for e in energy):
            fig.colorbar(points, ax=ax, label="energy per inference (mJ)")
        ax.set_xlabel("price (USD)")
        ax.set_ylabel(_figure_label(result))
        ax.legend(loc="best")
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def _row(result: ChooseResult, r: SetResult) -> str:
    cells = [
        result.label(r), f"${r.price:.2f}", f"{_figure(result, r):.4g}",
        f"{energy_of(r) * 1e3:.3f}" if math.isfinite(energy_of(r)) else "n/a",
        ("op" if r.granularity == "op" else "") + (" PEX" if r.pex else ""),
    ]  # fmt: skip
    mark = ' class="answer"' if r is result.answer else ""
    return f"<tr{mark}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def page(result: ChooseResult) -> str:
    """``choose.html``."""
    s, a = result.stats, result.answer
    proof = "proved optimal" if result.proved else f"not proved optimal: {result.proof_note}"
    head = (
        "<tr><th>set</th><th>price</th><th>" + html.escape(_figure_label(result))
        + "</th><th>least energy (mJ)</th><th>plan</th></tr>"
    )  # fmt: skip
    rows = "".join(_row(result, r) for r in result.front)
    answer = "none" if a is None else f"{html.escape(result.label(a))}, ${a.price:.2f}"
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>splitter choose: {html.escape(Path(result.model).name)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:2px 8px}}
tr.answer{{font-weight:bold;background:#fde}}</style></head><body>
<h1>Which boards: {html.escape(Path(result.model).name)},
{html.escape(result.target.describe())}</h1>
<p>Minimise {html.escape(result.minimise)}, up to {result.max_boards} boards. Answer: {answer}
({html.escape(proof)}).</p>
<p>{s.sets} candidate sets: {s.pruned["memory"]} settled by memory, {s.pruned["target"]} by the
target's bound, {s.pruned["order"]} after the answer in the search order; the proved answer took
{s.solved_to_answer} solves ({100 * s.pruned_fraction:.1f} % of the sets needed none) and
{s.seconds_to_answer:.2f} s; the front {s.solved} solves in all, {s.seconds:.2f} s.</p>
<h2>Pareto front (price, {html.escape(_figure_label(result))}, energy)</h2>
<table>{head}{rows}</table>
{plot_svg(result)}
</body></html>
"""
