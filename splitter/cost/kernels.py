"""Instructions of the project's own kernels per op, from the measured table ``kernel_costs.json``.

The table is measured by ``make costs`` (:mod:`splitter.measure.kernel_table` says how): every
layer of every model in ``models/`` the C generator handles is compiled as it is for a device
(same generator, same flags) and run under QEMU with ``-icount shift=0``, which executes one
instruction per virtual nanosecond, so the SysTick ticks around a layer give its instruction
count exactly. Per *build* (the core the code is compiled for and the int8 ISA variant codegen
picks, :func:`build_key`) and per *kernel variant* (:func:`op_terms`: op kind, the kernel
path inside it, layout and dtype) a least-squares fit gives the instructions of one call as

``I(op) = c_call + c_rows * rows + c_pix * pixels + c_out * outputs + c_mac * MACs
+ c_edge * edge MACs + c_in * inputs``

(features of :func:`op_features`; a kernel family uses the subset it has; an op class whose
kernel's loops differ from the element-wise ones declares its own,
``OpKind.cost_feature_names`` / ``OpKind.cost_features``). A fused float
activation is its own term ``act.<kind>`` (``c_out * outputs``: the ``k_act`` pass the float
kernels end with). An op whose exact shape was measured (:func:`op_signature`: every layer of
``models/`` that fits the emulator, and the grid) takes the measured count instead of the fit;
the fit serves every other shape. A sub-model's instructions are
``c_submodel + sum of its ops' I``, plus for each layer of an operator-granularity chain its
compaction ``memmove`` s (:data:`MOVE`, :func:`moves_instructions`). A PEX loop (channel or
row, :attr:`splitter.ir.Layer.loops`) is costed as the kernels it calls (:func:`loop_terms`:
one-channel or one-row calls, ``pex.*`` variants fitted apart from the whole-op kernels), or by
its measured count (:func:`loop_signature`).

Instructions are what the emulator counts, not a real core's cycles: ``splitter.cost.cpi``
turns them into time on a real core. ``tests/test_kernel_table.py`` fails when the kernels, the
generator or the compiler changed since the table was measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from math import prod
from pathlib import Path
from typing import Any

from splitter.codegen.ops import KINDS
from splitter.cost.handlers import block_slice, q8_conv_kind
from splitter.cost.rows import (
    RowGeom,
    band_schedule,
    call_rows,
    loop_windows,
    row_bytes,
    window_moves,
)
from splitter.errors import InputFileError
from splitter.ir import Layer, Op, Part, TensorSpec
from splitter.ops import ZERO_COST_KINDS

KERNEL_TABLE = Path(__file__).with_name("kernel_costs.json")

#: Features a fit may use, in the table's order.
FEATURES = ("call", "rows", "pix", "out", "mac", "edge", "in", "pair", "inner", "gen")

#: Features per kernel family (fewer terms where the kernel has no such loop).
WINDOW_FEATURES = ("call", "rows", "pix", "out", "mac", "edge")
DENSE_FEATURES = ("call", "out", "mac")
ELEMENT_FEATURES = ("call", "out", "in")


def build_key(cpu: str, *, emulated: bool = False) -> str:
    """The table's build for code generated for gcc core ``cpu``: ``"<core key>.<isa>"``
    (:attr:`splitter.hardware.cores.Core.build`).

    On the emulator every device runs as the emulated F405 (compiled for its Cortex-M4F) with
    the int8 variant of its own part's core: ``"M4F.plain"`` for an emulated Cortex-M0+ part.
    """
    from splitter.hardware.cores import core_for
    from splitter.hardware.qemu import EMULATOR

    core = core_for(cpu)
    return f"{EMULATOR.family.core.key}.{core.isa}" if emulated else core.build


def part_build_key(part: Part, *, emulated: bool = False) -> str:
    """:func:`build_key` of a catalog part (its family's core)."""
    from splitter.hardware.families import family_for

    return build_key(family_for(part.family).core.name, emulated=emulated)


@dataclass(frozen=True)
class Term:
    """One kernel call an op makes: its variant key and feature values."""

    variant: str
    features: Mapping[str, float]


def _dtype(op: Op, tensors: Mapping[str, TensorSpec]) -> str:
    """``"int8"`` when any activation of ``op`` is int8 (the int8 kernels run it); a conversion
    between float and int8 (quantize, dequantize) is ``"<in>><out>"``: other kernels."""
    names = (*op.inputs, *op.outputs)
    dtypes = {tensors[n].dtype for n in names if n in tensors}
    if len(dtypes) > 1 and op.inputs and op.inputs[0] in tensors:
        return f"{tensors[op.inputs[0]].dtype}>{tensors[op.outputs[0]].dtype}"
    return "int8" if "int8" in dtypes else "float32"


def _chw(spec: TensorSpec, layout: str) -> tuple[int, int, int]:
    """(channels, height, width) of a rank-4 image tensor in ``layout``."""
    s = spec.shape
    if len(s) != 4:
        return (int(s[-1]) if s else 1, 1, max(1, spec.size // max(1, int(s[-1]) if s else 1)))
    return (
        (int(s[3]), int(s[1]), int(s[2])) if layout == "NHWC" else (int(s[1]), int(s[2]), int(s[3]))
    )


def _edge_pixels(oh: int, ow: int, k: tuple[int, int], s: tuple[int, int], h: int, w: int,
                 pads: Sequence[int]) -> int:  # fmt: skip
    """Output pixels whose window reaches into the padding (the kernels' bounds-checked path)."""
    pt, pl = int(pads[0]), int(pads[1])

    def inner(n_out: int, kk: int, ss: int, pad: int, n_in: int) -> int:
        return sum(1 for o in range(n_out) if o * ss - pad >= 0 and o * ss - pad + kk <= n_in)

    return oh * ow - inner(oh, k[0], s[0], pt, h) * inner(ow, k[1], s[1], pl, w)


def _window(op: Op) -> tuple[int, int, int, int, int, int, int, int]:
    """A conv's window as its kernels read it: kernel ``(kh, kw)``, strides ``(sh, sw)``, top
    and left pads ``(pt, pl)``, dilations ``(dh, dw)``."""
    kh, kw = (int(v) for v in op.weights["W"].shape[2:])
    sh, sw = (int(v) for v in op.attr("strides", (1, 1)))
    pt, pl = (int(v) for v in op.attr("pads", (0, 0, 0, 0))[:2])
    dh, dw = (int(v) for v in op.attr("dilations", (1, 1)))
    return kh, kw, sh, sw, pt, pl, dh, dw


def _window_features(op: Op, x: TensorSpec, y: TensorSpec, layout: str) -> dict[str, float]:
    """call, rows ``O*OH``, pix ``OH*OW``, out, mac ``out*C/g*kh*kw``, edge (MACs of the
    edge pixels)."""
    _, h, w = _chw(x, layout)
    o, oh, ow = _chw(y, layout)
    if op.kind == "conv2d":
        k = tuple(int(v) for v in op.weights["W"].shape[2:])
        per = int(op.weights["W"].shape[1]) * k[0] * k[1]
    else:
        k = tuple(int(v) for v in op.attr("kernel"))
        per = k[0] * k[1]
    strides = tuple(int(v) for v in op.attr("strides", k if op.kind != "conv2d" else (1, 1)))
    edge = _edge_pixels(oh, ow, (k[0], k[1]), (strides[0], strides[1]), h, w,
                        op.attr("pads", (0, 0, 0, 0)))  # fmt: skip
    out = o * oh * ow
    return {"call": 1, "rows": o * oh, "pix": oh * ow, "out": out, "mac": out * per,
            "edge": o * edge * per}  # fmt: skip


def _pool_taps(op: Op, x: TensorSpec, y: TensorSpec, layout: str) -> tuple[list[int], list[int]]:
    """A pool's valid taps per output row and per output column (:func:`_valid_taps`: the
    kernels' ``ky`` and ``kx`` ranges, which never read the padding)."""
    _, h, w = _chw(x, layout)
    _, oh, ow = _chw(y, layout)
    kh, kw = (int(v) for v in op.attr("kernel"))
    sh, sw = (int(v) for v in op.attr("strides", (kh, kw)))
    pt, pl = (int(v) for v in op.attr("pads", (0, 0, 0, 0))[:2])
    return _valid_taps(oh, kh, sh, pt, h), _valid_taps(ow, kw, sw, pl, w)


def _pool_nchw(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``pool_nchw`` (kernels.c: ``k_maxpool``, ``k_avgpool``), ``for c, oy, ox, ky, kx``: per
    channel (``in``: ``C``), per output row its tap rows (``rows``: ``C OH``), per output its
    tap columns, start value and store (``out``), per valid tap row one ``kx`` loop (``inner``:
    ``C OW sum(vy)``), per valid tap a load and a max or add (``mac``: ``C sum(vy) sum(vx)``)."""
    c, oh, ow = _chw(y, "NCHW")
    vy, vx = _pool_taps(op, x, y, "NCHW")
    return {"call": 1, "in": c, "rows": c * oh, "out": c * oh * ow, "inner": c * ow * sum(vy),
            "mac": c * sum(vy) * sum(vx)}  # fmt: skip


def _pool_nhwc(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """The NHWC pools (``pool_nhwc`` of kernels_nhwc.c, ``k_q_maxpool`` and ``k_q_avgpool`` of
    kernels_q8.c) over the ``k_pixel`` walk (k_window.h): per output row its tap rows
    (``rows``: ``OH``), per pixel its tap columns (``pix``: ``OH OW``), per output its start
    value, clamp or division (``out``: ``OH OW C``), per valid tap row (``edge``: ``OW
    sum(vy)``) and per valid tap (``inner``: ``sum(vy) sum(vx)``) one pass over the ``C``
    channels, per valid tap and channel a load and a max or add (``mac``); ``k_q_avgpool``
    runs the channel loop outside the taps: per channel and valid tap row one ``kx`` loop
    (``gen``: ``C OW sum(vy)``)."""
    c, oh, ow = _chw(y, "NHWC")
    vy, vx = _pool_taps(op, x, y, "NHWC")
    return {"call": 1, "rows": oh, "pix": oh * ow, "out": c * oh * ow, "edge": ow * sum(vy),
            "inner": sum(vy) * sum(vx), "mac": c * sum(vy) * sum(vx),
            "gen": c * ow * sum(vy)}  # fmt: skip


#: the features of each pool kernel (:func:`_pool_nchw`, :func:`_pool_nhwc`)
POOL_NCHW_FEATURES = ("call", "in", "rows", "out", "inner", "mac")
POOL_NHWC_FEATURES = ("call", "rows", "pix", "out", "edge", "inner", "mac")
Q_AVGPOOL_FEATURES = ("call", "rows", "pix", "out", "gen", "mac")


def _pad_features(x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``k_pad`` (kernels.c) and ``k_q_pad`` (kernels_q8.c) on the rank-4 views ``xs``, ``ys``:
    the pad value written over the whole output (``out``: ``y``'s elements), then one copy per
    input row (``rows``: ``xs0 xs1 xs2``; ``k_q_pad`` a ``memcpy`` call each) of its ``xs3``
    elements (``in``: ``x``'s elements), which gcc unrolls by 8 (arm-none-eabi-gcc 12, -O2):
    per row ``xs3 // 8`` passes of the unrolled body (``pair``) and ``xs3 % 8`` steps entered
    through a jump (``gen``)."""
    xs = (1,) * (4 - len(x.shape)) + tuple(int(d) for d in x.shape)
    rows = xs[0] * xs[1] * xs[2]
    return {"call": 1, "out": y.size, "rows": rows, "in": x.size, "pair": rows * (xs[3] // 8),
            "gen": rows * (xs[3] % 8)}  # fmt: skip


PAD_FEATURES = ("call", "out", "rows", "in", "pair", "gen")


def _reduce_view(op: Op, x: TensorSpec) -> tuple[int, int, int]:
    """``(outer, red, inner)`` of a mean over contiguous ``axes`` (``codegen.ops.pool``'s view;
    a global average pool: over the last two axes)."""
    shape = tuple(int(d) for d in x.shape)
    if op.kind == "global_avgpool":
        return prod(shape[:2]), prod(shape[2:]), 1
    axes = sorted(int(a) % len(shape) for a in op.attr("axes", range(len(shape))))
    return prod(shape[: axes[0]]), prod(shape[axes[0] : axes[-1] + 1]), prod(shape[axes[-1] + 1 :])


def _reduce_features(view: tuple[int, int, int]) -> dict[str, float]:
    """``k_mean`` (kernels.c) and ``k_q_mean`` (kernels_q8.c) over an ``(outer, red, inner)``
    view, ``for o < outer, i < inner, r < red``: per outer index (``rows``), per output its
    set-up, scaling and store (``out``), per input element a load and an add (``mac``); gcc
    unrolls the ``red`` loop by 8 (arm-none-eabi-gcc 12, -O2), entered through a jump on
    ``red % 8``: per output ``red // 8`` passes of the unrolled body (``pair``) and the
    ``red % 8`` steps of the jump (``gen``)."""
    outer, red, inner = view
    n = outer * inner
    return {"call": 1, "rows": outer, "out": n, "mac": n * red, "pair": n * (red // 8),
            "gen": n * (red % 8)}  # fmt: skip


#: the reductions :func:`_reduce_features` prices
REDUCE_KINDS = frozenset({"mean", "global_avgpool"})
REDUCE_FEATURES = ("call", "rows", "out", "mac", "pair", "gen")


def _q8_dense(n_in: int, out: int) -> dict[str, float]:
    """``dense_engine`` (kernels_q8_opt.c, ``k_q_dense_dsp`` / ``_plain``): the outputs in blocks
    of four rows and the ``out % 4`` last ones alone, one ``dense_block`` call each (``rows``),
    a requantisation per output (``out``); the blocks' MACs over the ``in4 = in - in % 4``
    first inputs (``mac``: on the DSP build eight inputs per assembly pass while ``in4 >= 8``,
    the ``in4 % 8`` left, or all of them below 8, in C groups of four, ``inner``), the lone
    rows' MACs (``gen``) and every row's ``in % 4`` last MACs one by one (``edge``)."""
    blocks, lone = out // 4, out % 4
    in4 = n_in - n_in % 4
    groups = in4 // 4 if in4 < 8 else (in4 % 8) // 4
    return {"call": 1, "out": out, "rows": blocks + lone, "mac": 4 * blocks * in4,
            "gen": lone * in4, "edge": out * (n_in % 4), "inner": blocks * groups}  # fmt: skip


Q8_DENSE_FEATURES = ("call", "out", "rows", "mac", "gen", "edge", "inner")


def _copy_features(n: int) -> dict[str, float]:
    """A reshape the arena moved (:func:`copies`): ``k_copy`` (kernels.c) or ``k_q_copy``
    (kernels_q8.c) of its ``n`` elements (``out``), which gcc unrolls by 4 (arm-none-eabi-gcc
    12, -O2): ``n // 4`` passes of the unrolled body (``pair``), ``n % 4`` steps before them
    (``gen``). A zero-copy reshape has only ``call`` (nothing runs)."""
    return {"call": 1, "out": n, "pair": n // 4, "gen": n % 4}


COPY_FEATURES = ("call", "out", "pair", "gen")


def _valid_taps(n_out: int, k: int, s: int, pad: int, n_in: int, d: int = 1) -> list[int]:
    """Per output position, the kernel taps inside the input (the kernels' hoisted bounds)."""
    return [sum(1 for t in range(k) if 0 <= o * s - pad + t * d < n_in) for o in range(n_out)]


def _pointwise_nchw(c: int, p: int, o: int) -> dict[str, float]:
    """``conv_pointwise`` (kernels.c): blocks of 4 channels x 4 pixels (16 MACs per input
    channel, ``mac``), the ``P % 4`` tail pixels of each block (``inner``: channel steps of 4
    MACs), the ``O % 4`` last channels one MAC at a time (``gen``); ``pix`` blocks and tail
    pixels, ``rows`` channel blocks."""
    nb, p4 = o // 4, p // 4 * 4
    return {"call": 1, "rows": nb, "pix": nb * (p4 // 4 + p - p4), "mac": nb * p4 * c * 4,
            "inner": nb * (p - p4) * c, "gen": (o - 4 * nb) * p * c,
            "out": (o - 4 * nb) * p}  # fmt: skip


def _conv_rows(
    op: Op, hw: tuple[int, int], ohw: tuple[int, int]
) -> tuple[int, int, int, int, list[int]]:
    """A conv's geometry as the blocked kernels walk it: kernel width, the interior output
    columns ``lo..hi`` (every tap inside the input), the valid kernel rows summed over output
    rows (``ky``) and the valid taps per output column (``kx``)."""
    (h, w), (oh, ow) = hw, ohw
    kh, kw, sh, sw, pt, pl, dh, dw = _window(op)
    lo, span = (pl + sw - 1) // sw, w - 1 - (kw - 1) * dw + pl
    hi = min(ow, span // sw + 1 if span >= 0 else 0)
    ky = sum(_valid_taps(oh, kh, sh, pt, h, dh))
    return kw, min(lo, hi), hi, ky, list(_valid_taps(ow, kw, sw, pl, w, dw))


def _blocked_nchw(
    op: Op, c: int, hw: tuple[int, int], o: int, ohw: tuple[int, int]
) -> dict[str, float]:
    """``conv_blocked`` (kernels.c): per block of 4 channels and output row, interior pixel
    pairs (``pair``; ``mac`` their MACs, ``inner`` their channel x kernel-row steps), border
    pixels one at a time (``pix``, ``edge`` their valid-tap MACs), the ``O % 4`` last
    channels through ``conv_generic`` (``gen`` MACs)."""
    oh, ow = ohw
    kw, lo, hi, ky, kx = _conv_rows(op, hw, ohw)
    npair = (hi - lo) // 2
    border = sum(kx) - sum(kx[lo : lo + 2 * npair])
    nb = o // 4
    return {"call": 1, "rows": nb * oh, "pair": nb * oh * npair, "pix": nb * oh * (ow - 2 * npair),
            "mac": nb * 8 * npair * c * kw * ky, "inner": nb * npair * c * ky,
            "edge": nb * 4 * c * ky * border}  # fmt: skip


#: the float NCHW kernel ``conv_generic`` (kernels.c): the ``O % 4`` last channels of
#: ``conv_blocked``, every channel of a one-channel PEX conv; one variant wherever it runs
GENERIC = "conv2d.generic/NCHW/float32"


def _generic_nchw(op: Op, x: TensorSpec, y: TensorSpec, channels: int) -> dict[str, float]:
    """``conv_generic`` (kernels.c) over ``channels`` output channels: per channel and output
    row a tap range (``rows``); along the row, four adjacent interior pixels at once where
    stride and dilation are 1 (``pair`` blocks, ``inner`` their channel x kernel-row x kernel-
    column steps of 4 MACs), else one pixel (``out`` pixels, ``edge`` their channel x kernel-row
    steps, ``gen`` their MACs over the valid taps)."""
    c, h, w = _chw(x, "NCHW")
    _, oh, ow = _chw(y, "NCHW")
    kh, kw, sh, sw, pt, pl, dh, dw = _window(op)
    cg = c // int(op.attr("groups", 1) or 1)
    vy = sum(_valid_taps(oh, kh, sh, pt, h, dh))
    vx = _valid_taps(ow, kw, sw, pl, w, dw)
    quads, singles, single_taps, ox = 0, 0, 0, 0
    while ox < ow:
        ix0 = ox * sw - pl
        if sw == 1 and dw == 1 and ox + 3 < ow and ix0 >= 0 and ix0 + 2 + kw < w:
            quads, ox = quads + 1, ox + 4
        else:
            singles, single_taps, ox = singles + 1, single_taps + vx[ox], ox + 1
    n = channels
    return {"call": 1, "rows": n * oh, "pair": n * oh * quads, "inner": n * quads * vy * cg * kw,
            "out": n * oh * singles, "edge": n * vy * singles * cg,
            "gen": n * vy * single_taps * cg}  # fmt: skip


def _blocked_nhwc(
    op: Op, c: int, hw: tuple[int, int], o: int, ohw: tuple[int, int]
) -> dict[str, float]:
    """``conv_nhwc_blocked`` (kernels_nhwc.c): per output row, interior pixels 4 at a time x 4
    channels (``mac``; ``inner`` their channel-block x kernel-row runs, ``gen`` the ``O % 4``
    channels' MACs there), the other pixels one at a time (``pix``; ``edge`` their valid-tap
    MACs, ``rows`` their channel-block calls)."""
    oh, ow = ohw
    kw, lo, hi, ky, kx = _conv_rows(op, hw, ohw)
    quads = (hi - lo) // 4
    single = sum(kx) - sum(kx[lo : lo + 4 * quads])
    o4 = o // 4
    return {"call": 1, "mac": ky * quads * 16 * o4 * kw * c, "inner": ky * quads * o4,
            "gen": ky * quads * 4 * (o % 4) * kw * c, "pix": oh * (ow - 4 * quads),
            "edge": ky * single * o * c, "rows": oh * (ow - 4 * quads) * (o4 + o % 4)}  # fmt: skip


#: the int8 variants ``conv_engine`` runs (im2col columns, then a GEMM: :func:`_q8_gemm`)
Q8_GEMMS = ("conv2d.conv/", "conv2d.pointwise/", "conv2d.conv.padded/")
#: the int8 3x3 depthwise over its padded line ring (:func:`_q8_path`, :func:`_dw3_ring`)
DW_RING = "conv2d.depthwise.ring/NHWC/int8"
#: the int8 depthwise's window loops (:func:`_dw_window`)
DW_WINDOW = "conv2d.depthwise/NHWC/int8"


def _q8_gemm(op: Op, x: TensorSpec, y: TensorSpec, *, padded: bool = False) -> dict[str, float]:
    """``conv_engine`` (kernels_q8_opt.c, int8 NHWC): per output pixel an im2col column of
    ``K = kh kw C`` values (``in`` elements, ``inner`` taps), then a GEMM over channel pairs and
    pixel pairs (``mac``; ``gen`` the ``K % 4`` tail MACs, ``rows`` the MACs of an odd last
    channel; ``edge`` the MACs of an odd last pixel, which has no partner to share its weight
    loads), requantisation per output (``out``), per pixel (``pix``); ``padded``:
    :func:`_q8_padded`."""
    if padded:
        return _q8_padded(op, x, y)
    o, _, kh, kw = (int(d) for d in op.weights["W"].shape)
    k = int(op.weights["W"].shape[1]) * kh * kw
    npix = y.size // o
    return {"call": 1, "mac": o * npix * k, "out": o * npix, "pix": npix,
            "inner": npix * kh * kw, "in": npix * k, "gen": (k % 4) * o * npix,
            "rows": (o % 2) * npix * k, "edge": (npix % 2) * o * k}  # fmt: skip


def _inside(op: Op, x: TensorSpec, y: TensorSpec) -> tuple[int, int]:
    """(output pixels whose whole window lies inside the input, all output pixels)."""
    _, h, w = _chw(x, "NHWC")
    _, oh, ow = _chw(y, "NHWC")
    kh, kw, sh, sw, pt, pl, dh, dw = _window(op)
    rows = sum(1 for o in range(oh) if o * sh - pt >= 0 and o * sh - pt + (kh - 1) * dh < h)
    cols = sum(1 for o in range(ow) if o * sw - pl >= 0 and o * sw - pl + (kw - 1) * dw < w)
    return rows * cols, oh * ow


def _q8_padded(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``conv_engine`` with re-laid columns (``conv_padded_k``, kernels_q8_opt.c: the DSP
    build's path for ``K = kh kw C`` not a multiple of 4): per pixel its column at ``K'``
    (``rows``), a window inside the input by ``col333_asm`` when ``kh = 3`` and ``kw C = 9``
    (``inner``: those pixels) or ``col_fill_padded``'s row copies (``in``: their ``K``
    values), a window reaching into the padding value by value (``pix`` pixels, ``gen`` their
    ``K`` values); then the GEMM over ``ceil4(K)`` int16 weights (``mac``) and a
    requantisation per output (``out``)."""
    o, c, kh, kw = (int(d) for d in op.weights["W"].shape)
    k = c * kh * kw
    inside, npix = _inside(op, x, y)
    asm = kh == 3 and kw * c == 9
    border = npix - inside
    return {"call": 1, "rows": npix, "inner": inside if asm else 0,
            "in": 0 if asm else inside * k, "pix": border, "gen": border * k,
            "mac": o * npix * ((k + 3) // 4 * 4), "out": o * npix}  # fmt: skip


#: most taps of a depthwise whose blocks of four channels run ``dw_block`` (``K_DW_MAXT``)
DW_MAXT = 25


def _dw_window(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``dw_engine``'s window loops (kernels_q8_opt.c, an int8 depthwise without the line
    ring): per block of four channels (``C // 4`` blocks, none above :data:`DW_MAXT` taps)
    its constants (``inner``: blocks x taps), per output row (``rows``), per pixel whose
    window lies inside the input its ``T`` taps unbounded (``out``: blocks x those pixels,
    ``mac``: x ``T``), per other pixel its taps inside (``pix``: blocks x those pixels,
    ``edge``: x their taps); the other channels one by one through ``dw_one`` (``in``: their
    pixels, ``gen``: their MACs over the taps inside)."""
    c, oh, ow = _chw(y, "NHWC")
    _, h, w = _chw(x, "NHWC")
    kh, kw, sh, sw, pt, pl, dh, dw = _window(op)
    taps = kh * kw
    blocks = c // 4 if taps <= DW_MAXT else 0
    rest = c - 4 * blocks
    inside, npix = _inside(op, x, y)
    valid = sum(_valid_taps(oh, kh, sh, pt, h, dh)) * sum(_valid_taps(ow, kw, sw, pl, w, dw))
    return {"call": 1, "inner": blocks * taps, "rows": blocks * oh, "out": blocks * inside,
            "mac": blocks * inside * taps, "pix": blocks * (npix - inside),
            "edge": blocks * (valid - inside * taps), "in": rest * npix,
            "gen": rest * valid}  # fmt: skip


def _dw3_ring(x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``dw3_blocks`` (kernels_q8_opt.c) of an int8 3x3 depthwise over its line ring: per
    block of four channels its constants (``inner``: ``C // 4`` blocks) and per output line
    (``rows``, ``dw3_line``; a line is an output row, or a column when the input is taller
    than wide) the assembly's groups of four pixels per channel (``pair``: ``ceil(ol / 4)``
    on every line, the ``ol % 4`` last pixels of a line one more group at its end; ``edge``:
    those extra calls), the ring's line loads (``in``: ``ol + 2`` input lines of every
    channel of a block), the ``C % 4`` last channels through the window loops (``gen``: their
    MACs over nine taps) and ``out`` outputs."""
    _, h, w, c = (int(d) for d in x.shape)
    _, oh, ow, _ = (int(d) for d in y.shape)
    tr = h > w
    n_out, per_line, length = (ow, oh, h) if tr else (oh, ow, w)
    blocks = c // 4
    tails = n_out if tr else 1  # lines whose ol % 4 last pixels take one more call
    tails *= per_line % 4 != 0 and per_line >= 4
    return {"call": 1, "inner": blocks, "rows": blocks * n_out,
            "pair": 4 * blocks * n_out * -(-per_line // 4), "edge": blocks * tails,
            "in": 4 * blocks * (n_out + 2) * length, "gen": (c % 4) * oh * ow * 9,
            "out": c * oh * ow}  # fmt: skip


def _kernel_layout(op: Op, tensors: Mapping[str, TensorSpec], layout: str) -> str:
    """The layout the op's kernel sees: int8 activations are NHWC in every graph (a QDQ ONNX
    model's quantize transposes NCHW to NHWC), float ones the graph's layout."""
    return "NHWC" if _dtype(op, tensors) == "int8" else (layout or "NCHW")


def op_features(
    op: Op, tensors: Mapping[str, TensorSpec], layout: str, *, isa: str = "dsp", ring: bool = True,
    copy: bool = False,
) -> dict[str, float]:  # fmt: skip
    """Feature values of ``op``'s main kernel call (module docstring; ``isa``, ``ring``,
    ``copy``: :func:`op_variant`)."""
    layout = _kernel_layout(op, tensors, layout)
    ins = [tensors[n] for n in op.inputs if n in tensors]
    y = tensors[op.outputs[0]]
    variant = op_variant(op, tensors, layout, isa=isa, ring=ring, copy=copy)
    if variant.startswith(Q8_GEMMS) and variant.endswith("/int8"):
        return _q8_gemm(op, ins[0], y, padded=variant.startswith("conv2d.conv.padded/"))
    if variant == DW_RING:
        return _dw3_ring(ins[0], y)
    if variant == DW_WINDOW:
        return _dw_window(op, ins[0], y)
    if variant == "conv2d.conv/NHWC/float32":
        c, h, w = _chw(ins[0], layout)
        o, oh, ow = _chw(y, layout)
        return _blocked_nhwc(op, c, (h, w), o, (oh, ow))
    if variant in ("conv2d.pointwise/NCHW/float32", "conv2d.conv/NCHW/float32"):
        c, h, w = _chw(ins[0], layout)
        o, oh, ow = _chw(y, layout)
        if variant.startswith("conv2d.pointwise"):
            return _pointwise_nchw(c, h * w, o)
        return _blocked_nchw(op, c, (h, w), o, (oh, ow))
    if op.kind in ("maxpool", "avgpool"):
        if layout == "NHWC":
            return _pool_nhwc(op, ins[0], y)
        return _pool_nchw(op, ins[0], y)
    if op.kind == "pad":
        return _pad_features(ins[0], y)
    if op.kind in REDUCE_KINDS:
        return _reduce_features(_reduce_view(op, ins[0]))
    if op.kind in ZERO_COST_KINDS:
        return _copy_features(y.size) if copy else {"call": 1}
    if op.kind == "conv2d":
        return _window_features(op, ins[0], y, layout)
    if op.kind == "dense":
        n_in = int(op.weights["W"].shape[1])
        if _dtype(op, tensors) == "int8":
            return _q8_dense(n_in, y.size)
        return {"call": 1, "out": y.size, "mac": y.size * n_in}
    if op.kind == "matmul":
        return {"call": 1, "out": y.size, "mac": y.size * int(ins[0].shape[-1])}
    if op.kind in BINARY and _dtype(op, tensors) == "float32":
        return _binary_features(y)
    if variant.startswith("slice.part/"):  # one k_slice_part call (concat's features)
        found = block_slice(op, tensors)
        outer = found[0] if found is not None else 1
        return {"call": 1, "in": 1, "rows": outer, "out": y.size}
    declared = KINDS.get(op.kind)
    if declared is not None and declared.cost_feature_names is not None:
        return declared.cost_features(op, ins, y)
    return {"call": 1, "out": y.size, "in": sum(t.size for t in ins)}


#: float binary ops run by ``k_binary`` (kernels.c)
BINARY = frozenset({"add", "sub", "mul", "div"})


def _binary_features(y: TensorSpec) -> dict[str, float]:
    """``k_binary`` (kernels.c): three outer loops over the output's rank-4 view, the innermost
    over its last axis with both operands' strides (0 where broadcast): ``out`` elements, ``rows``
    innermost-loop entries (``out / last axis``). The operands' sizes do not matter (a constant
    or broadcast operand is read with stride 0 as often as a full one)."""
    shape = (1,) * (4 - len(y.shape)) + tuple(int(d) for d in y.shape)
    return {"call": 1, "out": y.size, "rows": y.size // max(1, shape[-1])}


def op_variant(
    op: Op, tensors: Mapping[str, TensorSpec], layout: str, *, isa: str = "dsp", ring: bool = True,
    copy: bool = False,
) -> str:  # fmt: skip
    """``kind[.path]/layout/dtype`` of the kernel code that runs ``op`` (the same choice as the
    generator, splitter/codegen/ops: the paths inside ``k_conv2d`` / ``k_conv2d_nhwc``, the int8
    kernel family of :func:`~splitter.cost.handlers.q8_conv_kind` and the path inside it,
    :func:`_q8_path`; ``slice.part`` for a one-axis slice,
    :func:`~splitter.cost.handlers.block_slice`). ``isa``: the build's int8 variant
    (:func:`build_isa`); ``ring``: whether the call gets its depthwise line ring (not in a row
    loop of one row per iteration, ``codegen.ops.conv.q8_kernel``); ``copy``: a reshape whose
    output the arena moves (:func:`copies`) runs ``k_copy`` / ``k_q_copy``, ``reshape.copy``."""
    dtype = _dtype(op, tensors)
    layout = _kernel_layout(op, tensors, layout)
    kind = op.kind
    if kind == "conv2d":
        ins = [tensors[op.inputs[0]]]
        if dtype == "int8":
            path = _q8_path(op, ins[0], isa == "dsp", ring)
        else:
            path = _float_conv_path(op, ins[0], layout)
        kind = f"conv2d.{path}"
    if kind == "slice" and block_slice(op, tensors) is not None:
        kind = "slice.part"  # k_slice_part / k_q_slice_part, not the index gather
    if kind in ZERO_COST_KINDS and copy:
        kind = f"{kind}.copy"
    return f"{kind}/{layout or 'NCHW'}/{dtype}"


def _q8_path(op: Op, x: TensorSpec, dsp: bool, ring: bool) -> str:
    """The int8 kernel family (:func:`~splitter.cost.handlers.q8_conv_kind`) and, on the DSP
    build, the path inside it that costs differently per MAC (kernels_q8_opt.c): a depthwise
    over its padded line ring (``dw3_blocks``, where ``k_q_depthwise_scratch`` is non-zero:
    ``depthwise.ring``) rather than the window loops (``dw_block``); a conv whose im2col is
    re-laid at ``K'`` with int16 weights (``conv_padded_k`` non-zero, a first layer's
    ``3 x 3 x 3``: ``conv.padded``) rather than the int8 GEMM. The ``_plain`` kernels have
    neither path."""
    from splitter.codegen.ops.conv import conv_padded_k, dw3_ring_bytes

    kind = q8_conv_kind(op, [x])
    if dsp and kind == "depthwise" and ring and dw3_ring_bytes(op, x):
        return "depthwise.ring"
    if dsp and kind == "conv" and conv_padded_k(op):
        return "conv.padded"
    return kind


def _float_conv_path(op: Op, x: TensorSpec, layout: str) -> str:
    """The branch of ``k_conv2d`` (kernels.c) or ``k_conv2d_nhwc`` (kernels_nhwc.c) taken."""
    w = op.weights["W"]
    o, _, kh, kw = (int(d) for d in w.shape)
    groups = int(op.attr("groups", 1))
    c = _chw(x, layout)[0]
    if layout == "NHWC":
        return "conv" if groups == 1 else "depthwise" if groups == c else "grouped"
    flat = not any(op.attr("pads", (0, 0, 0, 0)))
    if groups == 1:
        one = (kh, kw) == (1, 1) and tuple(op.attr("strides", (1, 1))) == (1, 1)
        return "pointwise" if one and flat else "conv"
    if groups == c == o and (kh, kw) == (3, 3):
        return "depthwise3x3"
    return "grouped"


def op_terms(
    op: Op, tensors: Mapping[str, TensorSpec], layout: str, *, isa: str = "dsp", ring: bool = True,
    copy: bool = False,
) -> list[Term]:  # fmt: skip
    """The kernel calls of ``op``: its variant, plus ``act.<kind>`` for a fused activation of a
    float op (the ``k_act`` pass; int8 kernels fold their clamp into the requantisation).
    ``isa``, ``ring``, ``copy``: :func:`op_variant`."""
    variant = op_variant(op, tensors, layout, isa=isa, ring=ring, copy=copy)
    terms = [Term(variant, op_features(op, tensors, layout, isa=isa, ring=ring, copy=copy))]
    if variant == "conv2d.conv/NCHW/float32":
        x, y = tensors[op.inputs[0]], tensors[op.outputs[0]]
        rest = _chw(y, "NCHW")[0] % 4
        if rest:
            terms.append(Term(GENERIC, _generic_nchw(op, x, y, rest)))
    act = op.attr("act")
    if act and _dtype(op, tensors) == "float32":
        out = float(tensors[op.outputs[0]].size)
        terms.append(Term(f"act.{act}/{layout or 'NCHW'}/float32", {"call": 1, "out": out}))
    return terms


def feature_names(variant: str) -> tuple[str, ...]:
    """Features the fit of ``variant`` uses (by its op kind; a PEX loop's kernel as its
    whole-op kernel, :func:`loop_terms`)."""
    if variant.startswith(PEX):
        base = variant.removeprefix(PEX)
        if base.startswith("q_dw_plane_dsp"):
            return ("call", "rows", "pair", "inner", "pix", "edge", "out")
        if base.startswith(("q_dw_plane", "q_conv2d")):
            return ("call", "rows", "pix", "out", "edge", "inner", "mac")
        if base.startswith("q_pex_pointwise_dsp"):
            return ("call", "in", "out", "mac", "pix", "gen")
        if base.startswith("q_pointwise"):
            return ("call", "in", "out", "mac")
        if base.startswith("accumulate_dsp"):
            return ("call", "in", "out", "rows")
        if base.startswith("row.slide"):
            return ("call", "in", "rows")
        if base.startswith(("acc/", "act.")):
            return ("call", "out")
        if base.startswith(("accumulate", "fill")):
            return ("call", "in", "rows", "out")
        return feature_names(base)
    if variant == "conv2d.pointwise/NCHW/float32":
        return ("call", "rows", "pix", "mac", "inner", "gen", "out")
    if variant == "conv2d.conv/NCHW/float32":
        return ("call", "rows", "pair", "pix", "mac", "inner", "edge")
    if variant == GENERIC:
        return ("call", "rows", "pair", "inner", "out", "edge", "gen")
    if variant == MOVE:
        return ("call", "out", "in")
    if variant.startswith("slice.part/"):  # as its mirror, concat
        return ("call", "in", "rows", "out")
    if variant.startswith(Q8_GEMMS) and variant.endswith("/int8"):
        return ("call", "mac", "out", "pix", "inner", "in", "gen", "rows", "edge")
    if variant == DW_RING:
        return ("call", "inner", "rows", "pair", "edge", "in", "gen", "out")
    if variant == DW_WINDOW:
        return ("call", "inner", "rows", "out", "mac", "pix", "edge", "in", "gen")
    if variant == "conv2d.conv/NHWC/float32":
        return ("call", "mac", "inner", "gen", "pix", "edge", "rows")
    kind = variant.split("/")[0].split(".")[0]
    if kind in ("maxpool", "avgpool"):
        if variant == "avgpool/NHWC/int8":
            return Q_AVGPOOL_FEATURES
        return POOL_NHWC_FEATURES if "/NHWC/" in variant else POOL_NCHW_FEATURES
    if kind == "pad":
        return PAD_FEATURES
    if kind in REDUCE_KINDS:
        return REDUCE_FEATURES
    if kind in ZERO_COST_KINDS:
        return COPY_FEATURES if variant.split("/")[0].endswith(".copy") else ("call",)
    if kind == "conv2d":
        return WINDOW_FEATURES
    if variant.startswith("dense/") and variant.endswith("/int8"):
        return Q8_DENSE_FEATURES
    if kind in ("dense", "matmul"):
        return DENSE_FEATURES
    if kind in BINARY and variant.endswith("/float32"):
        return ("call", "out", "rows")
    if kind == "act":
        return ("call", "out")
    declared = KINDS.get(kind)
    if declared is not None and declared.cost_feature_names is not None:
        return declared.cost_feature_names
    return ELEMENT_FEATURES


# ------------------------------------------------------------------------- the table ----------
@cache
def kernel_table() -> dict[str, Any]:
    """The measured table (``kernel_costs.json``); no builds while ``make costs`` measures the
    first one (layers then keep the flat cycles-per-MAC model)."""
    if not KERNEL_TABLE.exists():
        return {"builds": {}}
    try:
        data: dict[str, Any] = json.loads(KERNEL_TABLE.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFileError(
            f"{KERNEL_TABLE}: cannot read the kernel cost table ({exc}); regenerate it with "
            "`make costs`"
        ) from None
    return data


def _coefficients(build: str) -> dict[str, Any]:
    builds = kernel_table()["builds"]
    if build not in builds:
        raise InputFileError(
            f"{KERNEL_TABLE}: no build '{build}' (have {', '.join(sorted(builds))}); "
            "regenerate it with `make costs`"
        )
    entry: dict[str, Any] = builds[build]
    return entry


#: attributes the kernels read: the part of an op's attributes its instruction count depends on
SIGNATURE_ATTRS = ("kernel", "strides", "pads", "dilations", "groups", "act", "axis", "axes",
                   "perm", "mode", "size", "count_include_pad", "starts", "ends", "steps",
                   "keepdims")  # fmt: skip


def _plain(value: object) -> object:
    """``value`` as JSON data: tuples and lists as lists, numpy scalars as Python numbers."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, str) else value


def _signature(
    op: Op, tensors: Mapping[str, TensorSpec], layout: str, copy: bool = False
) -> list[object]:
    """``[variant, shapes, constants, attributes]`` of :func:`op_signature`, as JSON data."""
    shapes = [[int(d) for d in tensors[n].shape] for n in (*op.inputs, *op.outputs) if n in tensors]
    consts = sorted([k, [int(d) for d in v.shape]] for k, v in op.weights.items())
    attrs = sorted([k, _plain(v)] for k, v in op.attrs.items() if k in SIGNATURE_ATTRS)
    return [op_variant(op, tensors, layout, copy=copy), shapes, consts, attrs]


def signature_key(data: object) -> str:
    """A signature as the table's key: compact JSON (no spaces)."""
    return json.dumps(data, separators=(",", ":"))


def op_signature(op: Op, tensors: Mapping[str, TensorSpec], layout: str, copy: bool = False) -> str:
    """What decides an op's instruction count: its variant, the shapes of its activations and
    constants and the attributes the kernels read (window, stride, padding, groups,
    activation, axes...: :data:`SIGNATURE_ATTRS`), as one JSON array ``[variant, shapes,
    constants, attributes]`` (the key of the table's measured entries); ``copy``:
    :func:`op_variant`."""
    return signature_key(_signature(op, tensors, layout, copy))


def term_instructions(term: Term, build: str) -> float:
    """Instructions of one kernel call: the variant's fit, else the build's pooled fallback
    fit (a variant no model in ``models/`` uses)."""
    coef = _coef_of(term.variant, build)
    return float(sum(float(c) * float(term.features.get(f, 0.0)) for f, c in coef.items()))


def _coef_of(variant: str, build: str) -> Mapping[str, float]:
    """The fit of ``variant``; a variant no model in ``models/`` uses takes the fit of the same
    kernel kind and dtype in the other layout (``concat/NCHW/float32`` is ``concat/NHWC/
    float32``'s copy loop over other strides), then of the kind in any layout and dtype, then
    of its :data:`MIRRORS` kind, then the build's pooled upper bound."""
    variants = _coefficients(build)["variants"]
    if variant in variants and variants[variant].get("coef"):
        return dict(variants[variant]["coef"])
    kind, _, rest = variant.partition("/")
    dtype = rest.rpartition("/")[2]
    for k in (kind, *MIRRORS.get(kind, ())):
        near = sorted(v for v in variants if v.startswith(k + "/") and variants[v].get("coef"))
        same = [v for v in near if v.endswith("/" + dtype)]
        for pick in (same, near):
            if pick:
                return dict(variants[pick[0]]["coef"])
    return dict(_coefficients(build)["fallback"])


#: Kernel kinds whose loop is another's with input and output swapped, for a variant the table
#: has not measured yet: ``k_slice_part`` copies ``yn`` elements per outer index from a strided
#: input as ``k_concat_part`` copies them into a strided output (kernels.c, kernels_q8.c).
MIRRORS: Mapping[str, tuple[str, ...]] = {"slice.part": ("concat",)}


#: Variant of the compaction ``memmove`` s ending an operator-granularity layer
#: (:attr:`splitter.cost.oparena.LayerArena.moves`, emitted by ``splitter/codegen/model_c.py``
#: as ``__builtin_memmove`` with constant offsets): ``call`` = the moves that call
#: ``memmove`` / ``memcpy`` (``k_libc.c``'s byte loops), ``out`` = their bytes, ``in`` = the
#: bytes of the moves gcc copies inline (word loads and stores: at most :data:`INLINE_MOVE`
#: bytes to a region the source does not overlap, as arm-none-eabi-gcc 12 does at -O2 for the
#: Cortex-M4; on the M0+ the fit prices them as it finds them).
MOVE = "move/any/bytes"
#: the largest constant-size non-overlapping ``memmove`` gcc expands inline (measured above)
INLINE_MOVE = 64


def move_term(moves: Sequence[tuple[int, int, int]]) -> Term:
    """The compaction of a layer whose moves are ``(from, to, bytes)``: :data:`MOVE`."""
    inline = [n for src, dst, n in moves if n <= INLINE_MOVE and dst + n <= src]
    called = [n for src, dst, n in moves if not (n <= INLINE_MOVE and dst + n <= src)]
    return Term(MOVE, {"call": float(len(called)), "out": float(sum(called)),
                       "in": float(sum(inline))})  # fmt: skip


def moves_instructions(moves: Sequence[tuple[int, int, int]], build: str) -> float:
    """Instructions of a layer's compaction ``memmove`` s (``moves``: ``(from, to, bytes)``
    each), the table's :data:`MOVE` fit ``c_call * calls + c_out * their bytes + c_in * the
    inline moves' bytes``; 0 without moves or before the table has measured them."""
    if not moves or MOVE not in _coefficients(build)["variants"]:
        return 0.0
    return term_instructions(move_term(moves), build)


def op_instructions(
    op: Op, tensors: Mapping[str, TensorSpec], layout: str, build: str, *, measured: bool = True,
    copy: bool = False,
) -> float:  # fmt: skip
    """Instructions of one op: the count measured for the same :func:`op_signature` when the
    table has one (``measured``), else the fits of its :func:`op_terms` (``copy``:
    :func:`op_variant`)."""
    if measured:
        sig = op_signature(op, tensors, layout, copy)
        hit = _coefficients(build).get("measured", {}).get(sig)
        if hit is not None:
            return float(hit)
    terms = op_terms(op, tensors, layout, isa=build_isa(build), copy=copy)
    return sum(term_instructions(t, build) for t in terms)


def ops_instructions(
    ops: Iterable[Op], tensors: Mapping[str, TensorSpec], layout: str, build: str,
    *, measured: bool = True, output: str = "",
) -> float:  # fmt: skip
    """Instructions of running ``ops`` one after another (no sub-model overhead); ``output``:
    the layer's output tensor (a reshape writing it is a copy, :func:`copies`)."""
    return sum(op_instructions(op, tensors, layout, build, measured=measured,
                               copy=copies(op, output)) for op in ops)  # fmt: skip


def copies(op: Op, output: str) -> bool:
    """Whether a zero-copy op (a reshape) copies its elements (``k_copy`` / ``k_q_copy``): when
    it writes the layer's ``output``. The ping-pong arena moves a layer's output to the end
    of the device's arena (``codegen.model_c.placed_offsets``), away from the reshape's input,
    except in the one layer whose RAM sets the arena; the generated C says which
    (``splitter.measure.kernel_table`` reads it)."""
    return op.kind in ZERO_COST_KINDS and bool(output) and op.outputs[0] == output


# ------------------------------------------------------------------- PEX loops -------------
#: prefix of the variants of the kernels a PEX loop calls (fitted apart from the whole-op ones)
PEX = "pex."


def _accumulates(op: Op) -> bool:
    """A loop's last op accumulates into its full output (``splitter.cost.memory.accumulates``)."""
    return op.kind == "dense" or (op.kind == "conv2d" and int(op.attr("groups", 1) or 1) == 1)


def _one_channel(spec: TensorSpec, int8: bool) -> TensorSpec:
    """``spec`` with one channel (NHWC for int8, NCHW planes for float: ``codegen.pex._sliced``)."""
    from dataclasses import replace

    s = tuple(spec.shape)
    return replace(spec, shape=(*s[:3], 1) if int8 else (s[0], 1, *s[2:]))


def _sliced_op(op: Op, channelwise: bool) -> Op:
    """The op one loop iteration runs: output channel ``c``'s filter (``O = 1``); a depthwise
    conv on one plane runs with ``groups = 1``."""
    from dataclasses import replace

    w = op.weights["W"]
    attrs = {**op.attrs, "groups": 1} if channelwise else op.attrs
    return replace(op, weights={**op.weights, "W": w[:1]}, attrs=attrs)


def _scaled(term: Term, n: int, prefix: str = PEX) -> Term:
    """``term`` called ``n`` times, its variant prefixed (``conv_generic`` keeps its whole-op
    variant: the same C function, fitted on every call of it)."""
    head = "" if term.variant == GENERIC else prefix
    return Term(head + term.variant, {f: v * n for f, v in term.features.items()})


def _generic_q8(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """The loops of the generic window kernels ``k_q_conv2d`` and ``k_q_dw_plane``
    (kernels_q8.c: ``for oy, ox, o, ky in tap range, kx in tap range, ci < C/groups``):
    ``rows`` output rows (a row's tap range), ``pix`` output pixels (a column's tap range),
    ``out`` outputs (the requantisation), ``edge`` ``(o, ky)`` entries, ``inner`` ``(o, ky,
    kx)`` entries (the ``ci`` loop's set-up) and ``mac`` MACs, counted over the taps inside the
    input (the kernels' hoisted bounds, :func:`_valid_taps`)."""
    _, h, w = _chw(x, "NHWC")
    o, oh, ow = _chw(y, "NHWC")
    kh, kw, sh, sw, pt, pl, dh, dw = _window(op)
    groups = int(op.attr("groups", 1) or 1)
    cg = _chw(x, "NHWC")[0] // groups
    vy = sum(_valid_taps(oh, kh, sh, pt, h, dh))
    vx = sum(_valid_taps(ow, kw, sw, pl, w, dw))
    return {"call": 1, "rows": oh, "pix": oh * ow, "out": o * oh * ow, "edge": o * vy * ow,
            "inner": o * vy * vx, "mac": o * vy * vx * cg}  # fmt: skip


def row_loop_terms(
    ops: Sequence[Op], tensors: Mapping[str, TensorSpec], band: int = 1, isa: str = "dsp"
) -> list[Term]:
    """The kernel calls of one row loop in bands of ``band`` output rows
    (``codegen/pex_rows.py``, :func:`splitter.cost.rows.band_schedule`): per iteration each
    int8 conv computes the rows it misses in one call of the kernel the op run whole calls
    (``splitter.codegen.ops.conv.q8_kernel``), on the input rows that call reads (``H``, its
    top pad the rows missing above them, its bottom pad those missing below): the op's own
    terms (:func:`op_terms`, the same C function fitted on every call of it) summed over its
    calls, each on the call's shapes (:func:`_call_view`); and the window slides,
    ``k_q_slide`` calls (``call``) moving ``in`` bytes, with the schedule's per-iteration
    bookkeeping (``rows``: iterations times ops), :func:`splitter.cost.rows.window_moves`."""
    found = loop_windows(ops, tensors, band)
    if found is None:
        return []
    geoms = found[1]
    terms = []
    for op, g, calls in zip(ops, geoms, band_schedule(geoms, band), strict=True):
        summed: dict[str, dict[str, float]] = {}
        for _lo, done, need in calls:
            view_op, view = _call_view(op, tensors, g, done, need)
            for term in op_terms(view_op, view, "NHWC", isa=isa, ring=band > 1):
                acc = summed.setdefault(term.variant, {})
                for f, v in term.features.items():
                    acc[f] = acc.get(f, 0.0) + v
        terms += [Term(variant, feats) for variant, feats in summed.items()]
    moves = window_moves(geoms, band)
    moved = sum(rows * row_bytes(tensors[op.outputs[0]], 1)
                for op, (_, rows) in zip(ops, moves, strict=False))  # fmt: skip
    iterations = -(-geoms[-1].h_out // band)
    terms.append(Term(f"{PEX}row.slide/NHWC/int8",
                      {"call": sum(c for c, _ in moves), "in": moved,
                       "rows": iterations * len(ops)}))  # fmt: skip
    return terms


def _call_view(
    op: Op, tensors: Mapping[str, TensorSpec], g: RowGeom, done: int, need: int
) -> tuple[Op, dict[str, TensorSpec]]:
    """``op`` as one row-loop call sees it: input ``H`` the rows it reads, output ``need -
    done`` rows, top pad the rows missing above its first input row, bottom pad those below
    its last (:func:`splitter.cost.rows.call_rows`)."""
    from dataclasses import replace

    _a0, h, pt = call_rows(g, done, need)
    oh = need - done
    pb = max(0, (oh - 1) * g.s + g.k - pt - h)
    _t, pl, _b, pr = op.attr("pads", (0, 0, 0, 0))
    x, y = tensors[op.inputs[0]], tensors[op.outputs[0]]
    view = dict(tensors)
    view[x.name] = replace(x, shape=(x.shape[0], h, *x.shape[2:]))
    view[y.name] = replace(y, shape=(y.shape[0], oh, *y.shape[2:]))
    return replace(op, attrs={**op.attrs, "pads": (pt, pl, pb, pr)}), view


def _q8_loop_term(
    op: Op, k: int, c: int, sub: Mapping[str, TensorSpec], plane: bool, isa: str
) -> Term:
    """One int8 op inside a channel loop, ``c`` iterations: a depthwise conv on one plane
    (``k_q_dw_plane``; ``_dsp``: :func:`_dw_plane_dsp`), a 1x1 generating conv
    (``k_q_pex_pointwise``: per call a ``C``-long zero-point correction, ``in``; per pixel a
    ``C``-long dot product and a requantisation, ``out`` and ``mac``; ``_dsp``: four pixels per
    pass, the ``HW % 4`` last ones, ``pix``, with their MACs, ``gen``), another generating conv
    (``k_q_conv2d``, ``O = 1``)."""
    x, y = sub[op.inputs[0]], sub[op.outputs[0]]
    one = _sliced_op(op, plane)
    if plane and isa == "dsp" and _dw_plane_dsp(one, x, y):
        return _scaled(Term("q_dw_plane_dsp/NHWC/int8", _dw_plane_dsp(one, x, y)), c)
    if plane:
        return _scaled(Term("q_dw_plane/NHWC/int8", _generic_q8(one, x, y)), c)
    if k == 0 and q8_conv_kind(one, [x]) == "pointwise":
        cin, hw = _chw(x, "NHWC")[0], y.size
        feats = {"call": 1, "in": cin, "out": hw, "mac": hw * cin}
        if isa == "dsp":
            tail = hw % 4
            feats.update({"mac": (hw - tail) * cin, "pix": tail, "gen": tail * cin})
            return _scaled(Term("q_pex_pointwise_dsp/NHWC/int8", feats), c)
        return _scaled(Term("q_pointwise/NHWC/int8", feats), c)
    return _scaled(Term("q_conv2d/NHWC/int8", _generic_q8(one, x, y)), c)


def _interior(out: int, s: int, pad: int, n: int) -> tuple[int, int]:
    """``interior`` of kernels_q8_pex.c: the outputs ``[lo, hi)`` whose 3 taps lie in ``[0, n)``."""
    hi = min(out, (n - 3 + pad) // s + 1 if n - 3 + pad >= 0 else 0)
    return min(-(-pad // s), hi), hi


def _dw_plane_dsp(op: Op, x: TensorSpec, y: TensorSpec) -> dict[str, float]:
    """``k_q_dw_plane_dsp`` (kernels_q8_pex.c) of a 3x3 undilated plane, ``{}`` for the other
    kernels (it calls ``k_q_dw_plane``): per output row ``rows``; interior pixels two at a time
    (``pair``, stride 1; the plane is contiguous in every loop the planner makes, ``xs == 1``)
    or one at a time (``inner``); border pixels (``pix``) with their valid taps (``edge``); a
    requantisation per output (``out``)."""
    if tuple(op.weights["W"].shape[2:]) != (3, 3) or tuple(op.attr("dilations", (1, 1))) != (1, 1):
        return {}
    _, h, w = _chw(x, "NHWC")
    _, oh, ow = _chw(y, "NHWC")
    sh, sw = (int(v) for v in op.attr("strides", (1, 1)))
    pt, pl = (int(v) for v in op.attr("pads", (0, 0, 0, 0))[:2])
    ylo, yhi = _interior(oh, sh, pt, h)
    xlo, xhi = _interior(ow, sw, pl, w)
    n_in = xhi - xlo
    pairs = n_in // 2 if sw == 1 else 0
    inner = (yhi - ylo) * (n_in - 2 * pairs)
    border = oh * ow - (yhi - ylo) * n_in
    taps_y, taps_x = _valid_taps(oh, 3, sh, pt, h, 1), _valid_taps(ow, 3, sw, pl, w, 1)
    all_taps = sum(taps_y) * sum(taps_x)
    edge = all_taps - (yhi - ylo) * n_in * 9
    return {"call": 1, "rows": oh, "pair": (yhi - ylo) * pairs, "inner": inner, "pix": border,
            "edge": edge, "out": oh * ow}  # fmt: skip


def _accumulate_terms(y: TensorSpec, c: int, int8: bool, lay: str, isa: str) -> list[Term]:
    """An accumulating pointwise conv's calls: ``c`` accumulations of one input channel into
    the ``O x HW`` output (``k_q_pex_accumulate``: per pixel the input value, ``in``, per
    output the read-add-write, ``out``; ``_dsp``: four outputs per LDM / STM, the ``O % 4``
    last ones of each pixel apart, ``rows``; float ``k_pex_accumulate``: per output channel a
    weight, ``rows``, per output the add), and the passes over the output before and after the
    loop (int8: ``k_q_pex_fill`` and ``k_q_pex_requant``, one term ``acc`` per output; float:
    ``k_pex_fill``, per channel and per output)."""
    o = _chw(y, lay)[0]
    hw = y.size // max(1, o)
    if int8 and isa == "dsp":
        feats = {"call": c, "in": c * hw, "out": c * y.size, "rows": c * hw * (o % 4)}
        return [Term(f"{PEX}accumulate_dsp/{lay}/int8", feats),
                Term(f"{PEX}acc_dsp/{lay}/int8", {"call": 1, "out": y.size})]  # fmt: skip
    if int8:
        return [Term(f"{PEX}accumulate/{lay}/int8", {"call": c, "in": c * hw, "out": c * y.size}),
                Term(f"{PEX}acc/{lay}/int8", {"call": 1, "out": y.size})]  # fmt: skip
    return [Term(f"{PEX}accumulate/{lay}/float32",
                 {"call": c, "rows": c * o, "out": c * y.size}),
            Term(f"{PEX}fill/{lay}/float32", {"call": 1, "rows": o, "out": y.size})]  # fmt: skip


#: outputs per block of unpacked weights in ``k_q_pex_accumulate_g_dsp`` (``K_PEX_OBLOCK``)
PEX_OBLOCK = 32


def _accumulate_g_feats(o: int, hw: int, g: int, isa: str) -> dict[str, float]:
    """One ``k_q_pex_accumulate_g`` call adding ``g`` input channels into ``HW x O``
    accumulators. ``_dsp`` (kernels_q8_pex.c): per four input channels and block of up to
    :data:`PEX_OBLOCK` of the ``O4 = O - O % 4`` first outputs the block's weights unpacked
    (``rows``: one per output), per pixel its codes' pairs and the block's set-up (``pix``), per
    four outputs one LDM, eight SMLAD and one STM (``out``); the ``O % 4`` last outputs and
    ``g % 4`` last channels one MAC at a time (``in``: an accumulator read and written,
    ``mac``: a MAC). The generic kernel: ``out`` per accumulator, ``mac`` per MAC."""
    if isa != "dsp":
        return {"call": 1, "out": hw * o, "mac": hw * o * g}
    g4, o4 = g // 4 * 4, o // 4 * 4
    passes = g4 // 4
    blocks = -(-o4 // PEX_OBLOCK)
    rest = hw * ((o - o4) * (g4 > 0) + o * (g > g4))
    macs = hw * ((o - o4) * g4 + o * (g - g4))
    return {"call": 1, "rows": passes * o4, "pix": passes * blocks * hw,
            "out": passes * (o4 // 4) * hw, "in": rest, "mac": macs}  # fmt: skip


def step_loop_terms(ops: Sequence[Op], channels: int, step: int,
                    tensors: Mapping[str, TensorSpec], isa: str) -> list[Term]:  # fmt: skip
    """An int8 channel loop of ``step`` channels per iteration (``codegen.pex.emit_step_loop``):
    per iteration of ``g`` channels (``step``, then ``channels % step`` once) the generating
    conv and a slab-to-slab depthwise run their whole-op kernels on ``g`` channels
    (:func:`splitter.cost.memory.slab_op`: the op's own terms, the same C function fitted on
    every call; a depthwise ending the loop then ``k_q_pex_put`` of its slab), a depthwise
    reading a full tensor one plane per channel (:func:`_q8_loop_term`),
    and the accumulating conv ``k_q_pex_accumulate_g`` (:func:`_accumulate_g_feats`); the fill
    and requantisation passes as in a one-channel loop."""
    y = tensors[ops[-1].outputs[0]]
    terms: list[Term] = []
    for g, n in ((step, channels // step), (channels % step, 1)):
        if g and n:
            for k in range(len(ops)):
                terms += _step_op_terms(ops, k, g, n, tensors, isa)
    if _accumulates(ops[-1]):
        name = "acc_dsp" if isa == "dsp" else "acc"
        terms.append(Term(f"{PEX}{name}/NHWC/int8", {"call": 1, "out": y.size}))
    return terms


def _step_op_terms(ops: Sequence[Op], k: int, g: int, n: int, tensors: Mapping[str, TensorSpec],
                   isa: str) -> list[Term]:  # fmt: skip
    """Op ``k`` of a loop of ``g`` channels per iteration, ``n`` iterations
    (:func:`step_loop_terms`)."""
    from splitter.cost.memory import slab_op, slab_out_bytes

    op = ops[k]
    found = slab_op(ops, k, g, tensors)
    if k == len(ops) - 1 and _accumulates(op):
        y = tensors[op.outputs[0]]
        o = _chw(y, "NHWC")[0]
        name = "accumulate_g_dsp" if isa == "dsp" else "accumulate_g"
        return [_scaled(Term(f"{name}/NHWC/int8", _accumulate_g_feats(o, y.size // o, g, isa)), n)]
    names = (op.inputs[0], op.outputs[0])
    if found is not None:
        sub = {**tensors, op.inputs[0]: found[1][0], op.outputs[0]: found[2]}
        terms = [Term(t.variant, {f: v * n for f, v in t.features.items()})
                 for t in op_terms(found[0], sub, "NHWC", isa=isa)]  # fmt: skip
        put = slab_out_bytes(ops, k, g, tensors)
        if put:  # k_q_pex_put: per pixel a row of g bytes
            terms.append(Term(f"{PEX}put/NHWC/int8", {"call": n, "rows": n * put // g,
                                                       "out": n * put}))  # fmt: skip
        return terms
    sub = {**tensors, **{t: _one_channel(tensors[t], True) for t in names}}
    return [_q8_loop_term(op, k, g * n, sub, True, isa)]


def _g_channels(spec: TensorSpec, g: int) -> TensorSpec:
    """``spec`` (int8 NHWC) with ``g`` channels: an inner tensor's slab."""
    from dataclasses import replace

    return replace(spec, shape=(*tuple(spec.shape)[:3], g))


def loop_terms(ops: Sequence[Op], channels: int, tensors: Mapping[str, TensorSpec],
               layout: str, by: str = "channel", isa: str = "dsp",
               step: int = 1, band: int = 1) -> list[Term]:  # fmt: skip
    """The kernel calls of one PEX loop over ``channels`` (``codegen/pex.py``): per iteration
    the first op generates output channel ``c`` or runs a channel-wise op on plane ``c``, the
    middle ops run on one plane (float ``k_conv2d`` / ``k_act``, int8 ``k_q_dw_plane``), the
    last accumulates (:func:`_accumulate_terms`; float: its activation over the output after
    the loop). Features are per call x ``channels`` (int8: :func:`_q8_loop_term`; float: the
    whole-op kernel's features on the one-channel shapes); every variant is prefixed
    :data:`PEX`; ``isa`` is the int8 variant of the build (``codegen.pex.pex_kernel``). A row
    loop (``by == "row"``, ``band`` output rows per iteration): :func:`row_loop_terms`; an
    int8 loop of ``step > 1`` channels per iteration: :func:`step_loop_terms`."""
    if by == "row":
        return row_loop_terms(ops, tensors, band, isa)
    int8 = _dtype(ops[0], tensors) == "int8"
    if int8 and step > 1:
        return step_loop_terms(ops, channels, step, tensors, isa)
    lay, dt = ("NHWC", "int8") if int8 else (layout or "NCHW", "float32")
    c = channels
    inner = {op.outputs[0] for op in ops[:-1]}
    last = ops[-1]
    acc = _accumulates(last)
    terms: list[Term] = []
    for k, op in enumerate(ops):
        x0, y0 = tensors[op.inputs[0]], tensors[op.outputs[0]]
        sub = dict(tensors)
        plane = op.kind != "conv2d" or int(op.attr("groups", 1) or 1) != 1
        if plane or k > 0:
            sub[op.inputs[0]] = _one_channel(x0, int8)
        if plane or op.outputs[0] in inner:
            sub[op.outputs[0]] = _one_channel(y0, int8)
        if k == len(ops) - 1 and acc:
            terms += _accumulate_terms(tensors[last.outputs[0]], c, int8, lay, isa)
        elif op.kind != "conv2d":  # a standalone float activation on one plane
            n = sub[op.outputs[0]].size
            terms.append(Term(f"{PEX}act.{op.kind}/{lay}/{dt}", {"call": c, "out": c * n}))
        elif int8:
            terms.append(_q8_loop_term(op, k, c, sub, plane, isa))
        else:
            terms += [_scaled(t, c) for t in op_terms(_sliced_op(op, plane), sub, lay)]
    if acc and not int8 and last.attr("act"):
        y = tensors[last.outputs[0]]
        terms.append(Term(f"act.{last.attr('act')}/{lay}/{dt}", {"call": 1, "out": y.size}))
    return terms


def loop_signature(ops: Sequence[Op], channels: int, tensors: Mapping[str, TensorSpec],
                   layout: str, by: str = "channel", step: int = 1,
                   band: int = 1) -> str:  # fmt: skip
    """What decides a loop's instruction count: its kind (``"pex"`` for a channel loop,
    ``"pex<step>"`` for one of ``step > 1`` channels per iteration, ``"pex-<by>"`` else,
    ``"pex-row<band>"`` for a row loop in bands of more than one row), its channels (rows) and
    its ops' signatures, as one JSON array."""
    if by == "channel":
        head = "pex" if step <= 1 else f"pex{step}"
    else:
        head = f"pex-{by}" + (str(band) if band > 1 else "")
    return signature_key([head, channels, [_signature(o, tensors, layout) for o in ops]])


def loop_instructions(
    ops: Sequence[Op], channels: int, tensors: Mapping[str, TensorSpec], layout: str,
    build: str, *, measured: bool = True, by: str = "channel", step: int = 1, band: int = 1,
) -> float:  # fmt: skip
    """Instructions of one PEX loop: the measured count of the same :func:`loop_signature`,
    else the fits of its :func:`loop_terms`."""
    if measured:
        sig = loop_signature(ops, channels, tensors, layout, by, step, band)
        hit = _coefficients(build).get("measured", {}).get(sig)
        if hit is not None:
            return float(hit)
    terms = loop_terms(ops, channels, tensors, layout, by, build_isa(build), step, band)
    return sum(term_instructions(t, build) for t in terms)


def build_isa(build: str) -> str:
    """The int8 ISA variant of table build ``build`` (``"M4F.dsp"`` -> ``"dsp"``)."""
    return build.rpartition(".")[2]


def layer_ops_instructions(
    layer: Layer, tensors: Mapping[str, TensorSpec], layout: str, build: str,
    *, measured: bool = True,
) -> float:  # fmt: skip
    """Instructions of one layer's ops as the generated C runs them: ops outside PEX loops
    (:func:`op_instructions`) plus each loop (:func:`loop_instructions`)."""
    by_name = {op.name: op for op in layer.ops}
    inside = {name for loop in layer.loops for name in loop.ops}
    total = ops_instructions([op for op in layer.ops if op.name not in inside], tensors, layout,
                             build, measured=measured, output=layer.output.name)  # fmt: skip
    for loop in layer.loops:
        ops = [by_name[n] for n in loop.ops]
        total += loop_instructions(ops, loop.channels, tensors, layout, build,
                                   measured=measured, by=loop.by, step=loop.step,
                                   band=loop.band)  # fmt: skip
    return total


def submodel_overhead(build: str) -> float:
    """Instructions of one sub-model call besides its ops (the function's prologue, the
    arena pointers)."""
    return float(_coefficients(build)["submodel"])


def layer_instructions(
    ops: Sequence[Op], tensors: Mapping[str, TensorSpec], layout: str, cpu: str,
    *, emulated: bool = False,
) -> float:  # fmt: skip
    """Instructions of one layer's ``ops`` as the code generated for gcc core ``cpu`` runs them,
    on that core (``emulated=False``) or on the emulated F405 (``emulated=True``)."""
    return ops_instructions(ops, tensors, layout, build_key(cpu, emulated=emulated))


def builds() -> tuple[str, ...]:
    """The builds the table has, e.g. ``("M0+.plain", "M4F.dsp", "M4F.plain", "M7.dsp")``."""
    return tuple(sorted(kernel_table()["builds"]))
