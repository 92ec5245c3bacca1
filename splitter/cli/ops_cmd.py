"""``splitter ops``: the operators splitter reads, per format and dtype, with kernels per core.

Everything is derived, nothing is a second table: the source operators and kernel variants come
from :data:`splitter.ops.OPS`, whether an emitter writes that variant from
:data:`splitter.codegen.ops.EMITTERS` (a class overriding ``emit_float`` / ``emit_int8``), and the
cores
with their FPUs from :data:`splitter.hardware.families.FAMILIES`.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from splitter.importers.onnx_qdq import INT8_KINDS
from splitter.ops import F32_NCHW, F32_NHWC, I8_NHWC, OPS, OpDef

#: the kernel variant each importer's graphs use: ONNX float32 graphs are NCHW, QDQ ONNX int8 ops
#: NHWC; TFLite graphs are NHWC, float32 or full-integer int8 (splitter/importers/*_import.py)
FORMAT_VARIANTS: dict[str, dict[str, tuple[str, str]]] = {
    "onnx": {"float32": F32_NCHW, "int8": I8_NHWC},  # int8: QDQ graphs (importers/onnx_qdq.py)
    "tflite": {"float32": F32_NHWC, "int8": I8_NHWC},
}
DTYPE_ALIASES = {"float": "float32", "float32": "float32", "int8": "int8"}


@click.command("ops")
@click.option(
    "--format", "fmt", type=click.Choice(["all", *FORMAT_VARIANTS]), default="all",
    show_default=True, help="Model format.",
)  # fmt: skip
@click.option(
    "--dtype", type=click.Choice(["all", "float", "int8"]), default="all", show_default=True,
    help="Activation dtype (float = float32).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def command(fmt: str, dtype: str, as_json: bool) -> None:
    """List the supported operators per model format and dtype, with the kernels per core."""
    listing = supported_ops(fmt, dtype)
    if as_json:
        click.echo(json.dumps(listing, indent=1))
        return
    render(listing)


def supported_ops(fmt: str = "all", dtype: str = "all") -> dict[str, Any]:
    """``{"cores": [...], "formats": [{"format", "dtype", "layout", "ops": [...]}]}``."""
    cores = core_table()
    sections = []
    for name, variants in FORMAT_VARIANTS.items():
        if fmt not in ("all", name):
            continue
        for dt in ("float32", "int8"):
            if dtype != "all" and DTYPE_ALIASES[dtype] != dt:
                continue
            variant = variants.get(dt)
            ops = [] if variant is None else _ops_for(name, variant, cores)
            sections.append(
                {
                    "format": name,
                    "dtype": dt,
                    "layout": None if variant is None else variant[0],
                    "ops": ops,
                    "note": None if ops else f"{dt} {name} models are refused (no kernels)",
                }
            )
    return {"cores": cores, "formats": sections}


def core_table() -> list[dict[str, Any]]:
    """Each core of the known families: its families and FPUs (``""`` = none)."""
    from splitter.hardware.families import FAMILIES

    cores: dict[str, dict[str, Any]] = {}
    for fam in FAMILIES.values():
        entry = cores.setdefault(fam.core.name, {"core": fam.core.name, "families": [], "fpus": []})
        entry["families"].append(fam.name)
        entry["fpus"] += [f for f in fam.fpus if f not in entry["fpus"]]
    return list(cores.values())


def _ops_for(
    fmt: str, variant: tuple[str, str], cores: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The kinds with a source operator in ``fmt`` and a kernel (declared and emitted) for
    ``variant``; per core how the kernel runs there."""
    rows = []
    for kind, d in OPS.items():
        sources = d.onnx if fmt == "onnx" else d.tflite
        if fmt == "onnx" and variant == I8_NHWC:  # what onnx_qdq lowers to this kind
            sources = tuple(src for src, k in INT8_KINDS.items() if k == kind)
        if not sources or variant not in d.kernels or not _emitted(kind, variant[1]):
            continue
        rows.append(
            {
                "kind": kind,
                "operators": list(sources),
                "fused_activation": d.act_host,
                "kernels": {c["core"]: kernel_on_core(d, variant, c) for c in cores},
                "partial_execution": pex_roles(kind, variant),
            }
        )
    return rows


def pex_roles(kind: str, variant: tuple[str, str]) -> str | None:
    """Where an op of ``kind`` may sit in a PEX channel loop of ``variant`` (the rules of
    :data:`splitter.cost.pex_chain.EXECUTABLE`, C in ``splitter/codegen/pex.py``); None: never.
    Loops
    run on float32 NCHW (a channel is one plane) and int8 NHWC with per-tensor activations;
    float32 NHWC (TFLite float) has none."""
    from splitter.cost.pex_chain import LOOP_ACTIVATIONS

    if variant not in (F32_NCHW, I8_NHWC):
        return None
    if kind == "conv2d":
        rows = (
            "; any position of a row loop (one output row per pass)" if variant == I8_NHWC else ""
        )
        return (
            "start (groups 1: one output channel per pass), middle or end (depthwise: one "
            "channel), end (1x1 stride 1: accumulates one input channel)" + rows
        )
    if variant == F32_NCHW and kind in LOOP_ACTIVATIONS:
        return "start, middle or end (one channel per pass)"
    return None


def kernel_on_core(d: OpDef, variant: tuple[str, str], core: dict[str, Any]) -> str:
    """How the ``variant`` kernel of ``d`` runs on ``core``: the C kernels are portable C99, so
    every core has them; float32 uses the FPU where the core has one, software float else."""
    if variant[1] == "int8":
        return "int8 integer"
    fpus = [f for f in core["fpus"] if f]
    return f"float32 hardware ({'/'.join(fpus)})" if fpus else "float32 software (no FPU)"


def _emitted(kind: str, dtype: str) -> bool:
    """True when the kind's emitter class writes ``dtype`` code (overrides the base method)."""
    from splitter.codegen.ops import EMITTERS

    emitter = EMITTERS.get(kind)
    if emitter is None:
        return False
    return emitter.has_int8() if dtype == "int8" else emitter.has_float()


def render(listing: dict[str, Any]) -> None:
    """One table per format and dtype."""
    console = Console(width=max(Console().width, 120))
    cores = [c["core"] for c in listing["cores"]]
    for sec in listing["formats"]:
        title = f"{sec['format']} {sec['dtype']}" + (f" ({sec['layout']})" if sec["layout"] else "")
        if not sec["ops"]:
            console.print(f"{title}: {sec['note']}")
            continue
        table = Table(title=f"{title}: {len(sec['ops'])} op kinds")
        for col in ("kind", "operators", *cores, "PEX loop"):
            table.add_column(col)
        for op in sec["ops"]:
            table.add_row(
                op["kind"] + (" (+act)" if op["fused_activation"] else ""),
                ", ".join(op["operators"]),
                *(op["kernels"][c] for c in cores),
                "-" if op["partial_execution"] is None else "yes",
            )
        console.print(table)
        if any(op["partial_execution"] for op in sec["ops"]):
            console.print(
                "PEX loop: the op may run inside a partial-execution channel loop "
                "(--partial-execution; `splitter ops --json` says in which position)"
            )
