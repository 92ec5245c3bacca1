"""LO-SC segment firmware: one device runs a model segment by segment, loading each one's weights.

The LO-SC problem (:mod:`splitter.segments.problem`) is solved over *units*: a layer, or, when a
layer's weights plus its activations exceed a segment's memory, a slice of it. A slice of a
float32 conv (``groups == 1``, NCHW) or dense op computes output channels ``r0..r1-1`` only,
with the weight rows ``W[r0:r1]`` and ``B[r0:r1]``; in NCHW (and for a dense ``(1, N)`` output)
those channels are one contiguous run of the output, at byte ``r0 * inner * 4`` (``inner`` =
``OH * OW``, 1 for dense). Ops of the layer before the sliced op run with slice 0, ops after it
with the last slice. The slices' weights sum to the op's weights (no byte is duplicated).

Per unit (generated here, so the numbers are what the C uses):

* ``MEM`` = bytes of the weight arrays it loads, each array padded to 4 bytes (floats and int32
  must be aligned in RAM);
* ``PEAK`` = ``RAM_j`` of its layer (the ARENA RULE plan,
  ``splitter.codegen.model_c.layer_memory``);
* ``OUT`` = the layer's output bytes after the last slice of a layer; after a slice that is
  not the last, the layer's whole arena ``RAM_j`` (input and partial output stay live).

Memory layout of the one RAM region (``model_arena``, ``M = max_s (W_s + A_s)`` bytes, where
``W_s`` is segment ``s``'s weights and ``A_s = max PEAK`` over its units, i.e. exactly
``segment_memory`` of the LO-SC model): activations at the bottom ``[0, A_s)``, weights at the
top ``[M - W_s, M)``. Every layer runs with its input at offset 0 and its planned arena of
``RAM_j`` bytes (``placed_offsets(..., at_top=False)``); its output is then moved down to
offset 0, so whatever is live between units lies in ``[0, PEAK)`` of the next unit, below that
unit's segment's weights (``PEAK + W_s <= A_s + W_s <= M``): loading never overwrites it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import ceil, prod
from pathlib import Path

import numpy as np

from splitter.codegen.escape import c_comment
from splitter.codegen.model_c import (
    check_supported,
    default_planner,
    emit_op,
    float_itemsize,
    layer_memory,
    placed_offsets,
)
from splitter.codegen.ops.base import EmitContext
from splitter.codegen.ops.literals import C_TYPES, WeightTable
from splitter.codegen.ops.q8_variants import isa_of
from splitter.errors import InfeasibleError, InputFileError, UnsupportedOpError
from splitter.ir import Chain, Layer, Op, TensorSpec

TEMPLATES = Path(__file__).resolve().parent.parent / "firmware_templates"
#: The static C file of the segment loader (copied into segmented firmware projects only).
LOADER_C = TEMPLATES / "segments.c"
#: What a segmented project's copy of runtime.c changes: a sub-model's TIMING cycles leave out
#: the cycles its segments spent loading weights (``runtime_load_cycles``, segments.c).
RUNTIME_ANCHOR = "uint64_t cycles = cycles_stop();"
RUNTIME_PATCH = "uint64_t cycles = cycles_stop() - runtime_load_cycles(); /* segments.c */"
#: RAM the loader adds to the runtime: its receive frame (type, seq, len, 1024 B payload) and
#: its cycle counter (``segments.c``), rounded up to 8.
LOADER_RAM_BYTES = 1040
#: Weights file of a segmented device project: segment after segment, each array 4-aligned.
BLOB_FILE = "weights.bin"
#: The segmentation record of a segmented ``OUT`` (read by ``run`` to serve the weights).
SEGMENTS_FILE = "segments.json"
SCHEMA = "splitter.segment-firmware/1"


@dataclass(frozen=True)
class Unit:
    """One item of the LO-SC chain: layer ``layer`` whole (``parts == 1``) or its slice ``part``.

    ``op`` is the index of the sliced op in ``layer.ops`` (-1: not sliced), ``rows`` its output
    channels ``[r0, r1)``.
    """

    layer: int
    part: int
    parts: int
    op: int
    rows: tuple[int, int]
    weights: int  # MEM: bytes of 4-aligned weight arrays
    peak: int  # PEAK: RAM_j
    out: int  # OUT: bytes live after this unit
    macs: int  # MACs of this unit (the layer's, split by rows for slices)

    @property
    def label(self) -> str:
        """``12`` or ``28/3of11``."""
        return str(self.layer) if self.parts == 1 else f"{self.layer}/{self.part + 1}of{self.parts}"


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of 4."""
    return (nbytes + 3) // 4 * 4


def table_bytes(weights: WeightTable) -> int:
    """Bytes of ``weights`` laid out one array after another, each padded to 4."""
    return sum(aligned(int(a.nbytes)) for _, a in weights.arrays)


# ------------------------------------------------------------------------- slicing ----


def slice_rows(op: Op, tensors: Mapping[str, TensorSpec], layout: str) -> int:
    """Output channels of ``op`` when it can run in slices of output channels, else 0.

    float32 dense (``W (out, in)``), or float32 conv2d with ``groups == 1`` in NCHW (output
    channels contiguous); int8 ops and NHWC convs are not sliced.
    """
    w = op.weights.get("W")
    if w is None or np.asarray(w).dtype != np.float32:
        return 0
    if any(tensors[n].dtype != "float32" for n in (*op.inputs, *op.outputs)):
        return 0
    if op.kind == "dense" and np.asarray(w).ndim == 2:
        return int(np.asarray(w).shape[0])
    conv = op.kind == "conv2d" and int(op.attr("groups", 1)) == 1 and layout in ("NCHW", "")
    return int(np.asarray(w).shape[0]) if conv and np.asarray(w).ndim == 4 else 0


def sliced_op(op: Op, spec: TensorSpec, rows: tuple[int, int]) -> tuple[Op, TensorSpec, int]:
    """``op`` computing output channels ``rows`` only: the op, its output spec and the byte
    shift of that output inside the whole output ``spec`` (channel axis 1, NCHW or ``(1, N)``).
    """
    r0, r1 = rows
    weights = {k: np.asarray(v)[r0:r1] for k, v in op.weights.items()}
    shape = (spec.shape[0], r1 - r0, *spec.shape[2:])
    out = TensorSpec(f"{spec.name}:rows{r0}_{r1}", shape, spec.dtype, spec.quant)
    inner = prod(spec.shape[2:]) if len(spec.shape) > 2 else 1
    new = Op(
        op.name + f"_r{r0}", op.kind, op.inputs, (out.name,), op.attrs, weights, op.source_nodes
    )
    return new, out, r0 * inner * float_itemsize(spec)


def _sliceable_op(layer: Layer, chain: Chain) -> int:
    """Index of the op of ``layer`` with the most weights, when it can be sliced; else -1."""
    assert chain.graph is not None
    best, best_bytes = -1, 0
    for k, op in enumerate(layer.ops):
        nbytes = sum(int(np.asarray(w).nbytes) for w in op.weights.values())
        if nbytes > best_bytes:
            best, best_bytes = k, nbytes
    if best < 0:
        return -1
    ok = slice_rows(layer.ops[best], chain.graph.tensors, chain.graph.layout)
    return best if ok else -1


def _row_ranges(rows: int, per_slice: int) -> list[tuple[int, int]]:
    """``rows`` split into ``ceil(rows / per_slice)`` runs of near-equal length (multiples of 4
    where ``per_slice`` allows, the kernels' block size)."""
    parts = ceil(rows / per_slice)
    size = ceil(rows / parts)
    if size % 4 and per_slice >= ceil(size / 4) * 4:
        size = ceil(size / 4) * 4
    return [(r, min(rows, r + size)) for r in range(0, rows, size)]


# -------------------------------------------------------------------------- units ----


def chain_units(chain: Chain, memory_cap: int, *, core: str | None = None) -> list[Unit]:
    """The units of ``chain``: every layer whole, or sliced when ``MEM + PEAK`` exceeds
    ``memory_cap`` (fewest slices that each fit). :class:`InfeasibleError` names a layer that
    fits in no slicing. Segments carry one tensor from unit to unit (each layer's output moved
    to offset 0), so an operator-granularity chain (a model with several graph inputs is one)
    is refused in one line naming what does run it."""
    if chain.granularity != "supernode":
        several = chain.graph is not None and len(chain.graph.inputs) > 1
        why = "has several graph inputs" if several else "is chained at operator granularity"
        raise UnsupportedOpError(
            f"{chain.source_path or chain.name}: the model {why}, and segments carry one tensor "
            "between units; split it over several boards with `splitter compile` instead"
        )
    check_supported(chain, [(0, len(chain.layers) - 1)])
    isa = isa_of(core)
    units: list[Unit] = []
    for layer in chain.layers:
        units += _layer_units(chain, layer, memory_cap, isa)
    return units


def _layer_units(chain: Chain, layer: Layer, cap: int, isa: str) -> list[Unit]:
    """One unit, or the slices of :func:`_layer_slices`."""
    peak = layer_memory(layer, chain, default_planner()).size
    whole = unit_weights(chain, layer, -1, (0, 0), 0, 1, isa)
    out = layer.output.size * _item(layer)
    unit = Unit(layer.index, 0, 1, -1, (0, 0), whole, peak, out, layer.cost.macs)
    if whole + peak <= cap:
        return [unit]
    k = _sliceable_op(layer, chain)
    if k < 0:
        raise InfeasibleError(
            f"layer {layer.index} '{layer.name}' alone needs {whole + peak} B (weights {whole} "
            f"+ activations {peak}), more than a segment's {cap} B, and none of its ops can run "
            "in slices; use a board with more RAM"
        )
    return _layer_slices(chain, layer, k, cap, peak, isa)


def _item(layer: Layer) -> int:
    return float_itemsize(layer.output)


def _layer_slices(chain: Chain, layer: Layer, k: int, cap: int, peak: int, isa: str) -> list[Unit]:
    """Slices of op ``k``'s output channels, each within ``cap`` with the other ops' weights."""
    op = layer.ops[k]
    w = np.asarray(op.weights["W"])
    rows = int(w.shape[0])
    row_bytes = sum(int(np.asarray(v).nbytes) // rows for v in op.weights.values())
    others = unit_weights(chain, layer, k, (0, 0), 0, 1, isa, skip_sliced=True)
    per_slice = (cap - peak - others - 8) // row_bytes  # 8: padding of two arrays
    if per_slice < 1:
        raise InfeasibleError(
            f"layer {layer.index} '{layer.name}' alone needs at least "
            f"{peak + others + row_bytes} B (activations {peak} + other weights {others} + "
            f"one weight row {row_bytes}), more than a segment's {cap} B; use a board with more "
            "RAM"
        )
    ranges = _row_ranges(rows, per_slice)
    out: list[Unit] = []
    for p, rr in enumerate(ranges):
        last = p == len(ranges) - 1
        mem = unit_weights(chain, layer, k, rr, p, len(ranges), isa)
        live = layer.output.size * _item(layer) if last else peak
        macs = layer.cost.macs * (rr[1] - rr[0]) // rows
        if last:
            macs = layer.cost.macs - sum(u.macs for u in out)
        out.append(Unit(layer.index, p, len(ranges), k, rr, mem, peak, live, macs))
    return out


def unit_weights(
    chain: Chain,
    layer: Layer,
    k: int,
    rows: tuple[int, int],
    part: int,
    parts: int,
    isa: str,
    *,
    skip_sliced: bool = False,
) -> int:
    """Bytes of the weight arrays one unit loads, by emitting it (4-aligned arrays)."""
    if not layer.ops:
        return 0
    table = WeightTable()
    _emit_unit(chain, layer, k, rows, part, parts, table, isa, skip_sliced=skip_sliced)
    return table_bytes(table)


def _emit_unit(
    chain: Chain,
    layer: Layer,
    k: int,
    rows: tuple[int, int],
    part: int,
    parts: int,
    table: WeightTable,
    isa: str,
    *,
    skip_sliced: bool = False,
) -> list[str]:
    """C statements of one unit with the weights it uses added to ``table``."""
    assert chain.graph is not None
    mem = layer_memory(layer, chain, default_planner())
    offs = placed_offsets(mem, layer, mem.size, False)
    tensors = dict(chain.graph.tensors)
    layout = chain.graph.layout or "NCHW"
    lines: list[str] = []
    for i, op in enumerate(layer.ops):
        if k >= 0 and ((i < k and part != 0) or (i > k and part != parts - 1)):
            continue
        if i == k and skip_sliced:
            continue
        run_offs = offs
        if i == k:
            spec = tensors[op.outputs[0]]
            op, out_spec, shift = sliced_op(op, spec, rows)
            tensors[out_spec.name] = out_spec
            run_offs = {**offs, out_spec.name: offs[spec.name] + shift}
        lines += emit_op(op, EmitContext(run_offs, tensors, table, layout, isa))
    return lines


# ----------------------------------------------------------------------- generation ----


@dataclass(frozen=True)
class SegmentedC:
    """Model C of a segmented device, its weights file and the figures the plan records."""

    files: dict[str, str]
    blob: bytes
    region_bytes: int  # M: the one RAM region (activations + one segment's weights)
    #: per segment: (first unit, last unit, blob offset, weight bytes, activation bytes)
    segments: tuple[tuple[int, int, int, int, int], ...]
    output_bytes: int
    input_bytes: int


def generate_segmented_c(
    chain: Chain,
    units: Sequence[Unit],
    segments: Sequence[tuple[int, int]],
    device_name: str,
    *,
    core: str | None = None,
    extflash: bool = False,
) -> SegmentedC:
    """``model.h`` / ``model.c`` / ``segments.c`` running ``segments`` (inclusive unit ranges)
    one after another in ``sm_00``, and the weights blob (module docstring). ``extflash``: the
    part build reads the blob from memory-mapped external flash (``SEG_EXTFLASH``)."""
    isa = isa_of(core)
    bodies: list[str] = []
    rows: list[tuple[int, int, int, int, int]] = []
    blob = bytearray()
    for s, (a, b) in enumerate(segments):
        table = WeightTable()
        stmts: list[str] = []
        for u in units[a : b + 1]:
            stmts += _unit_code(chain, u, table, isa)
        wbytes = table_bytes(table)
        acts = max(u.peak for u in units[a : b + 1])
        rows.append((a, b, len(blob), wbytes, acts))
        blob += _table_blob(table)
        bodies.append(_segment_function(s, units[a : b + 1], table, stmts))
    region = max(w + acts for _, _, _, w, acts in rows)
    in_spec = chain.layers[0].input or chain.layers[0].output
    out_spec = chain.layers[-1].output
    in_bytes = in_spec.size * float_itemsize(in_spec)
    out_bytes = out_spec.size * float_itemsize(out_spec)
    files = {
        "model.h": _header(device_name, region, len(segments), extflash),
        "model.c": _source(device_name, chain, region, rows, bodies, in_bytes, out_bytes),
        "segments.c": LOADER_C.read_text(),
        "runtime.c": segmented_runtime(),
    }
    return SegmentedC(files, bytes(blob), region, tuple(rows), out_bytes, in_bytes)


def segmented_runtime() -> str:
    """``firmware_templates/runtime.c`` with :data:`RUNTIME_PATCH` (compute cycles only)."""
    text = (TEMPLATES / "runtime.c").read_text()
    if text.count(RUNTIME_ANCHOR) != 1:
        raise UnsupportedOpError(
            f"firmware_templates/runtime.c: no single '{RUNTIME_ANCHOR}' to take the segment "
            "loading cycles off; update splitter/segments/firmware.py RUNTIME_ANCHOR"
        )
    head = '#include "runtime.h"\n'
    decl = head + "uint64_t runtime_load_cycles(void); /* segments.c: cycles spent loading */\n"
    return text.replace(RUNTIME_ANCHOR, RUNTIME_PATCH).replace(head, decl, 1)


def _unit_code(chain: Chain, u: Unit, table: WeightTable, isa: str) -> list[str]:
    """The statements of unit ``u``: its ops, then (after a layer's last slice) the move of
    the layer's output down to offset 0."""
    layer = chain.layers[u.layer]
    if not layer.ops:
        return [f"/* layer {u.layer}: {c_comment(layer.name)} (input, at offset 0) */"]
    mem = layer_memory(layer, chain, default_planner())
    offs = placed_offsets(mem, layer, mem.size, False)
    assert layer.input is not None
    if offs.get(layer.input.name, 0) != 0:
        raise UnsupportedOpError(
            f"layer {u.layer} '{layer.name}': its planned input is not at offset 0; "
            "segment firmware needs the ARENA RULE's input-first plan"
        )
    what = "" if u.parts == 1 else f", output channels {u.rows[0]}..{u.rows[1] - 1}"
    head = f"/* layer {u.layer}: {c_comment(layer.name)}{what}, RAM {mem.size} B */"
    body = _emit_unit(chain, layer, u.op, u.rows, u.part, u.parts, table, isa)
    lines = [head, *runtime_records(body, {name for name, _ in table.arrays})]
    out = offs[layer.output.name]
    if u.part == u.parts - 1 and out != 0:
        lines.append(f"seg_move(A8, {out}u, {layer.output.size * float_itemsize(layer.output)}u);")
    return lines


def runtime_records(lines: Sequence[str], names: set[str]) -> list[str]:
    """``lines`` with every ``static const`` parameter record that points at a weight array of
    ``names`` made an automatic ``const``: the arrays live in RAM now (``W8 + offset``, not a
    constant expression), e.g. the int8 kernels' per-channel multipliers in ``k_q_params``."""
    out = list(lines)
    for i, line in enumerate(lines):
        if not (line.lstrip().startswith("static const ") and line.rstrip().endswith("= {")):
            continue
        j = i
        while j < len(lines) - 1 and not lines[j].strip().startswith("};"):
            j += 1
        words = set(re.findall(r"\w+", " ".join(lines[i : j + 1])))
        if words & names:
            out[i] = line.replace("static const ", "const ", 1)
    return out


def _table_blob(table: WeightTable) -> bytes:
    """The arrays of ``table`` little-endian, one after another, each padded to 4 bytes."""
    out = bytearray()
    for _, a in table.arrays:
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        out += raw + bytes(aligned(len(raw)) - len(raw))
    return bytes(out)


def _segment_function(s: int, units: Sequence[Unit], table: WeightTable, stmts: list[str]) -> str:
    """``static int seg_SS(float *arena, const unsigned char *W8)``: the weight arrays are
    macros into ``W8`` (where the segment's weights were loaded)."""
    defs, undefs, off = [], [], 0
    for name, a in table.arrays:
        defs.append(f"#define {name} ((const {C_TYPES[a.dtype.name]} *)(W8 + {off}))")
        undefs.append(f"#undef {name}")
        off += aligned(int(a.nbytes))
    labels = ", ".join(u.label for u in units)
    body = "\n".join("    " + s for s in stmts)
    return (
        f"/* segment {s}: units {c_comment(labels)}, weights {off} B */\n"
        + "\n".join(defs)
        + f"\nstatic int seg_{s:02d}(float *arena, const unsigned char *W8)\n{{\n"
        + "    float *A = arena;\n    unsigned char *A8 = (unsigned char *)arena;\n"
        + body
        + "\n    (void)A;\n    (void)A8;\n    (void)W8;\n    return 0;\n}\n"
        + "\n".join(undefs)
        + "\n"
    )


def _header(device: str, region: int, n_segments: int, extflash: bool) -> str:
    """``model.h`` of a segmented device."""
    who = c_comment(device)
    return f"""/* Generated by splitter (segments/firmware.py) for device {who}. Do not edit. */
#ifndef MODEL_SEGMENTS_H
#define MODEL_SEGMENTS_H
#include <stdint.h>

#define MODEL_ARENA_BYTES {region}u
#define MODEL_WEIGHTS_BYTES 0u /* weights are loaded segment by segment (segments.c) */
#define MODEL_NUM_SUBMODELS 1
#define MODEL_NUM_SEGMENTS {n_segments}u
/* 1: the part reads weights.bin from memory-mapped external flash (section .extflash);
 * 0 (and always in the emulator): the host streams each segment (LOAD / WEIGHTS). */
#define SEG_EXTFLASH {int(extflash)}

extern float model_arena[];
int sm_00(float *arena); /* every segment, loading each one's weights first */

/* Load segment k's `n` weight bytes (at byte `blob_offset` of the weights file) to `dst`. */
int seg_load(uint32_t k, uint8_t *dst, uint32_t blob_offset, uint32_t n);
/* Move `n` bytes at byte `src` of the arena down to offset 0 (src > 0: a forward copy). */
void seg_move(unsigned char *a8, uint32_t src, uint32_t n);

#endif /* MODEL_SEGMENTS_H */
"""


def _source(
    device: str,
    chain: Chain,
    region: int,
    rows: Sequence[tuple[int, int, int, int, int]],
    bodies: Sequence[str],
    in_bytes: int,
    out_bytes: int,
) -> str:
    """``model.c``: the region, the segment functions, their table and ``sm_00``."""
    floats = max(1, (region + 3) // 4)
    table = ",\n".join(
        f"    {{seg_{s:02d}, {off}u, {w}u}} /* units {a}..{b}, activations {acts} B */"
        for s, (a, b, off, w, acts) in enumerate(rows)
    )
    return (
        f"/* Generated by splitter (segments/firmware.py) for device {c_comment(device)}, "
        f"model {c_comment(chain.name)}: {len(rows)} LO-SC segments run one after another;\n"
        f" * input {in_bytes} B at offset 0, output {out_bytes} B at offset 0. Do not edit. */\n"
        '#include "model.h"\n#include "kernels.h"\n#include "kernels_nhwc.h"\n'
        '#include "kernels_q8.h"\n\n'
        f"float model_arena[{floats}] __attribute__((aligned(8)));\n\n"
        + "\n".join(bodies)
        + "\ntypedef struct {\n    int (*run)(float *arena, const unsigned char *W8);\n"
        + "    uint32_t blob_offset, weights_bytes;\n} segment_t;\n\n"
        + f"static const segment_t segments[MODEL_NUM_SEGMENTS] = {{\n{table}\n}};\n\n"
        + "int sm_00(float *arena)\n{\n"
        + "    unsigned char *A8 = (unsigned char *)arena;\n"
        + "    for (uint32_t k = 0; k < MODEL_NUM_SEGMENTS; k++) {\n"
        + "        const segment_t *s = &segments[k];\n"
        + "        unsigned char *w = A8 + MODEL_ARENA_BYTES - s->weights_bytes;\n"
        + "        if (seg_load(k, w, s->blob_offset, s->weights_bytes) != 0) return 1;\n"
        + "        if (s->run(arena, w) != 0) return 1;\n"
        + "    }\n    return 0;\n}\n"
    )


# ----------------------------------------------------------------- external flash ----


@dataclass(frozen=True)
class ExtFlash:
    """A memory-mapped external flash region (QSPI / OCTOSPI) the part reads weights from."""

    origin: int
    size: int
    name: str = "EXTFLASH"


def extflash_ldscript(text: str, ext: ExtFlash) -> str:
    """The part's linker script with region ``EXTFLASH`` and section ``.extflash`` (the
    weights file, ``segments.c``) in it; ``.extflash`` stays out of ``firmware.bin``."""
    region = (
        f"    EXTFLASH (r) : ORIGIN = 0x{ext.origin:08X}, LENGTH = {ext.size}"
        f" /* {c_comment(ext.name)}, memory-mapped */\n"
    )
    text = text.replace("MEMORY\n{\n", "MEMORY\n{\n" + region, 1)
    section = (
        "    /* LO-SC segment weights (weights.bin), read in place by segments.c. */\n"
        "    .extflash : ALIGN(4) { KEEP(*(.extflash)) } > EXTFLASH\n"
    )
    return text.replace("SECTIONS\n{\n", "SECTIONS\n{\n" + section, 1)


def extflash_makefile(text: str) -> str:
    """The Makefile with ``.extflash`` left out of ``firmware.bin`` (it is programmed into the
    external flash from ``weights.bin``; a binary spanning both address ranges would be GBs)."""
    return text.replace("$(OBJCOPY) -O binary $< $@", "$(OBJCOPY) -O binary -R .extflash $< $@")


def extflash_cmake(text: str) -> str:
    """``CMakeLists.txt`` with ``.extflash`` left out of ``firmware.bin``, as
    :func:`extflash_makefile` does for the Makefile."""
    return text.replace(
        "${CMAKE_OBJCOPY} -O binary $<TARGET_FILE:firmware>",
        "${CMAKE_OBJCOPY} -O binary -R .extflash $<TARGET_FILE:firmware>",
    )


# --------------------------------------------------------------------------- record ----


def segments_record(
    chain: Chain,
    units: Sequence[Unit],
    segments: Sequence[tuple[int, int]],
    gen: SegmentedC,
    extra: Mapping[str, object],
) -> dict[str, object]:
    """``OUT/segments.json``: the segmentation, per segment its units, weights (offset and
    bytes in ``weights.bin``), activations, carried bytes; the blob's size."""
    rows = []
    for s, ((a, b), (_, _, off, w, acts)) in enumerate(zip(segments, gen.segments, strict=True)):
        first, last = units[a], units[b]
        rows.append(
            {
                "index": s,
                "units": [u.label for u in units[a : b + 1]],
                "first_layer": first.layer,
                "last_layer": last.layer,
                "first_name": chain.layers[first.layer].name,
                "last_name": chain.layers[last.layer].name,
                "blob_offset": off,
                "weights_bytes": w,
                "activation_bytes": acts,
                "memory_bytes": w + acts,
                "carried_bytes": last.out,
            }
        )
    return {
        "schema": SCHEMA,
        **extra,
        "region_bytes": gen.region_bytes,
        "blob": BLOB_FILE,
        "blob_bytes": len(gen.blob),
        "segments": rows,
    }


def read_segments(out_dir: str | Path) -> dict[str, object] | None:
    """``OUT/segments.json`` when ``OUT`` is segmented, else None."""
    path = Path(out_dir) / SEGMENTS_FILE
    if not path.is_file():
        return None
    data: dict[str, object] = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise InputFileError(
            f"{path}: unknown schema {data.get('schema')!r} (this splitter reads {SCHEMA!r}); "
            "re-run `splitter segment ... -o OUT`"
        )
    return data
