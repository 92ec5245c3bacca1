"""The tuned int8 kernels (kernels_q8_opt.c) against the reference ones, on odd shapes.

``k_q_conv_*`` / ``k_q_pointwise_*`` / ``k_q_depthwise_*`` / ``k_q_dense_*`` (both ISA variants)
must give the same bytes as ``k_q_conv2d`` / ``k_q_dense`` (TFLite's integer arithmetic, checked
bit for bit against LiteRT by test_codegen_tflite.py) on shapes that hit every edge: channel and
row counts that are not multiples of the blocking (2 channels x 2 pixels, 4 depthwise channels,
4 dense rows, 4-byte groups), a 1x1 spatial input, stride 2, a different padding on every side,
dilation, per-tensor and per-channel multipliers with left and right shifts, both rounding
modes, extreme inputs, no bias.

* On the host (gcc, ``-fsanitize=address,undefined``): every buffer is malloc'ed at its exact
  size (the scratch at :meth:`Conv2DHandler.scratch_bytes`, which must equal
  ``k_q_conv_scratch``), so an overrun fails; the ``_dsp`` variant runs the portable emulation
  of k_dsp_emu.h there.
* Under QEMU (Cortex-M4F, real DSP instructions): the same cases, and k_dsp_emu.h's functions
  against the instructions themselves (SXTB16, SXTAB16, SMLAD, SMLABB, SMLATT, SMLATB, SMMULR,
  SMMLAR, SSAT, SSUB8 + SEL, BFI) on seeded random operands.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from test_codegen_support import HOST_CFLAGS

from splitter.codegen.model_c import KERNELS_DIR
from splitter.codegen.ops.conv import ohwi
from splitter.codegen.ops.q8_variants import conv_weights, dense_weights, depthwise_weights, isa_of
from splitter.cost.handlers import handler, q8_conv_kind
from splitter.hardware.qemu import EMULATOR, bare_metal_linker, bare_metal_startup
from splitter.ir import Op, TensorSpec


@dataclass(frozen=True)
class ConvCase:
    """An int8 conv: input ``h x w x c``, ``o`` outputs, kernel, strides, pads (t, l, b, r),
    dilations, groups (1 or depthwise ``c``)."""

    c: int
    h: int
    w: int
    o: int
    k: tuple[int, int]
    s: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    d: tuple[int, int] = (1, 1)
    depthwise: bool = False


CONVS = [
    ConvCase(3, 7, 5, 5, (3, 3), pads=(1, 1, 1, 1)),  # C, O, pixel count odd
    ConvCase(8, 6, 7, 6, (3, 3), s=(2, 2), pads=(1, 0, 2, 1)),  # stride 2, four different pads
    ConvCase(5, 1, 1, 7, (1, 1)),  # 1x1 spatial pointwise, K odd
    ConvCase(6, 3, 5, 3, (1, 1)),  # pointwise, K % 4 == 2, 15 pixels
    ConvCase(64, 2, 3, 9, (1, 1)),  # pointwise, odd O
    ConvCase(4, 9, 8, 4, (2, 3), s=(2, 1), pads=(2, 1, 0, 3), d=(2, 2)),  # dilation
    ConvCase(12, 5, 5, 9, (1, 1), s=(2, 2)),  # 1x1 stride 2: the im2col conv
    ConvCase(1, 6, 6, 2, (5, 5), pads=(2, 2, 2, 2)),  # one input channel, K = 25
    ConvCase(16, 1, 1, 4, (3, 3), pads=(1, 1, 1, 1)),  # 1x1 spatial, only the centre tap
    ConvCase(7, 5, 4, 7, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # 4 + 3 channels
    ConvCase(8, 6, 6, 8, (3, 3), s=(2, 2), pads=(1, 0, 1, 2), depthwise=True),
    ConvCase(12, 1, 1, 12, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # 1x1 spatial
    ConvCase(5, 7, 6, 5, (5, 5), pads=(4, 3, 2, 1), d=(2, 2), depthwise=True),
    ConvCase(32, 4, 4, 32, (3, 3), pads=(0, 1, 1, 0), depthwise=True),
    ConvCase(16, 5, 6, 16, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # FAST_RQ
    ConvCase(6, 4, 5, 6, (7, 7), pads=(3, 3, 3, 3), depthwise=True),  # over K_DW_MAXT taps
    ConvCase(3, 5, 5, 3, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # < 4 channels: no block
    ConvCase(64, 3, 3, 10, (1, 1)),  # UP_RQ: pointwise K % 8 == 0 (the assembly 2 x 2 loop)
    ConvCase(16, 4, 5, 7, (3, 3), pads=(1, 1, 1, 1)),  # UP_RQ, exact ties, per channel
    ConvCase(24, 3, 4, 6, (1, 1)),  # UP_RQ, exact ties, K = 24
    ConvCase(12, 4, 4, 9, (1, 1)),  # UP_RQ, K = 12: one assembly step, then four in C
    ConvCase(8, 7, 9, 8, (3, 3), s=(2, 2), pads=(1, 1, 1, 1), depthwise=True),  # ring, odd pl
    ConvCase(4, 5, 7, 4, (3, 3), depthwise=True),  # ring, stride 1, no padding, odd W and OW
    ConvCase(5, 4, 5, 5, (3, 3), pads=(2, 3, 0, 2), depthwise=True),  # ring, wide pads
    ConvCase(8, 11, 5, 8, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # ring along columns
    ConvCase(4, 9, 4, 4, (3, 3), pads=(0, 1, 2, 1), depthwise=True),  # columns, odd pt + pb
    ConvCase(3, 9, 10, 8, (3, 3), s=(2, 2), pads=(0, 0, 1, 1)),  # UP_RQ, K = 27: re-laid to 32
    ConvCase(3, 8, 8, 4, (3, 3), pads=(1, 1, 1, 1)),  # K = 27 per tensor: int8 re-laid weights
    ConvCase(3, 5, 9, 6, (3, 3), s=(2, 2), pads=(1, 1, 1, 1)),  # UP_RQ, K = 27, 15 pixels
    ConvCase(16, 6, 6, 16, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # ring, 4 blocks
    ConvCase(5, 4, 6, 4, (1, 3), pads=(0, 1, 0, 1)),  # UP_RQ, K = 15: int16 weights at K' 16
    ConvCase(8, 6, 16, 8, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # ring, ReLU: low clamp
    ConvCase(12, 7, 9, 12, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # ReLU, OW 9: tail
    ConvCase(4, 6, 10, 4, (3, 3), pads=(1, 1, 1, 1), depthwise=True),  # both clamp bounds
    ConvCase(8, 13, 6, 8, (3, 3), pads=(1, 2, 1, 0), depthwise=True),  # columns, ReLU, tail
]

#: cases whose biases are near 2^30 (past kernels_q8_opt.c's rq_fast bound)
BIG_BIAS = (12, 13)
#: cases whose every channel has a right shift (ties away: the depthwise's rq_fast)
FAST_RQ = (14, 21, 22, 24, 25, 32, 33, 34, 35)
#: FAST_RQ depthwise cases with a fused activation: ReLU (act_min out_zp, act_max 127: the 3 x 3
#: ring's low-only clamp) or both bounds inside int8 (out_zp +- 2, so that both clamp)
RELU, BOTH_BOUNDS = (32, 33, 35), (34,)
#: GEMM-rounded cases whose every channel has a right shift in [2, 22] (kernels_q8_opt.c's
#: one-SMLAL requantisation, rqup_value)
UP_RQ = (17, 18, 19, 20, 26, 28, 30)

#: dense (in, out): out % 4 in every residue, in % 4 in every residue
DENSES = [(37, 7), (64, 8), (3, 1), (1024, 5), (10, 6), (5, 4)]


def _out_hw(c: ConvCase) -> tuple[int, int]:
    """ONNX output size of each spatial axis."""
    oh = (c.h + c.pads[0] + c.pads[2] - c.d[0] * (c.k[0] - 1) - 1) // c.s[0] + 1
    ow = (c.w + c.pads[1] + c.pads[3] - c.d[1] * (c.k[1] - 1) - 1) // c.s[1] + 1
    return oh, ow


def _op(c: ConvCase, w: np.ndarray) -> tuple[Op, list[TensorSpec]]:
    """The IR op (canonical OIHW weights) and its int8 input spec."""
    groups = c.c if c.depthwise else 1
    attrs = {"strides": c.s, "pads": c.pads, "dilations": c.d, "groups": groups}
    op = Op("conv", "conv2d", ("x",), ("y",), attrs, {"W": w})
    return op, [TensorSpec("x", (1, c.h, c.w, c.c), "int8")]


def _arr(name: str, ctype: str, values: np.ndarray, align: str = "") -> str:
    """A C array definition (``align``: an attribute, e.g. the generator's 4-byte alignment of
    weight arrays, which the kernels' LDRD paths need)."""
    body = ", ".join(str(int(v)) for v in np.asarray(values).ravel()) or "0"
    return f"static const {ctype} {name}[] {align}= {{{body}}};"


#: weight arrays are 4-aligned as the generator's (``WEIGHTS``, model_c.py)
ALIGN4 = "__attribute__((aligned(4))) "


def _quant(rng: np.random.Generator, n: int, i: int) -> tuple[list[str], dict[str, int]]:
    """Seeded multipliers / shifts (per channel for even ``i``), zero points, clamp, rounding."""
    nq = n if i % 2 == 0 else 1
    mult = rng.integers(1 << 30, (1 << 31) - 1, nq)
    shift = rng.integers(-14, 3, nq) if i % 4 < 2 else rng.integers(-3, 2, nq)  # exact ties
    shift[0] = 0
    if i in FAST_RQ:
        shift = rng.integers(-4, 0, nq)
    if i in UP_RQ:
        shift = rng.integers(-4 if i % 4 >= 2 else -22, -1, nq)
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    if i % 3 == 0:
        lo, hi = -128, 127
    q = {
        "in_zp": int(rng.integers(-128, 128)),
        "out_zp": int(rng.integers(-20, 21)),
        "lo": lo,
        "hi": max(hi, lo + 1),
        "nq": nq,
        "up": 1 if i in UP_RQ else i % 2,
    }
    if i in RELU + BOTH_BOUNDS:  # ties away from zero (TFLite's depthwise): the ring's rq mode 2
        zp = q["out_zp"]
        q["lo"], q["hi"], q["up"] = (zp, 127, 0) if i in RELU else (zp - 2, zp + 2, 0)
    return [_arr(f"m{i}", "int32_t", mult), _arr(f"s{i}", "int32_t", shift)], q


def _inputs(rng: np.random.Generator, i: int, nx: int, wshape: tuple[int, ...], nb: int, zp: int):
    """Seeded x, W, B; case 0 has extreme x and W (-128 everywhere, the largest products); the
    cases with small shifts (``i % 4 >= 2``) small sums, so that outputs are not clamped and
    the rounding's exact ties occur."""
    x = rng.integers(-128, 128, nx, dtype=np.int8)
    w = rng.integers(-128, 128, wshape, dtype=np.int8)
    if i % 4 >= 2:
        x = np.clip(zp + rng.integers(-5, 6, nx), -128, 127).astype(np.int8)
        w = rng.integers(-3, 4, wshape, dtype=np.int8)
    if i == 0:
        x[:] = -128
        w[...] = -128
    b = rng.integers(-(1 << 20), 1 << 20, nb).astype(np.int32)
    if i % 4 >= 2:
        b = rng.integers(-60, 61, nb).astype(np.int32)
    if i in BIG_BIAS:  # sums near 2^30: the depthwise's exact slow requantisation path
        b[:] = rng.integers(1 << 29, 1 << 30, nb) * rng.choice([-1, 1], nb)
    return x, w, b


def cases_source() -> tuple[str, list[int]]:
    """``cases.h``: every case's data and a table; and the scratch bytes the cost handler gives
    each conv case (-1 for the others)."""
    rng = np.random.default_rng(13)
    lines, rows, scratch = [], [], []
    for i, c in enumerate(CONVS):
        oh, ow = _out_hw(c)
        cg = 1 if c.depthwise else c.c
        qarr, q = _quant(rng, c.o, i)
        x, w, b = _inputs(rng, i, c.h * c.w * c.c, (c.o, cg, *c.k), c.o, q["in_zp"])
        op, ins = _op(c, w)
        kind = q8_conv_kind(op, ins)
        opt = depthwise_weights(ohwi(w)) if kind == "depthwise" else conv_weights(ohwi(w))
        out = TensorSpec("y", (1, oh, ow, c.o), "int8")
        scratch.append(handler(op).scratch_bytes(op, ins, out, 1))
        lines += [*qarr, _arr(f"x{i}", "int8_t", x), _arr(f"b{i}", "int32_t", b)]
        lines += [_arr(f"wr{i}", "int8_t", ohwi(w)), _arr(f"wo{i}", "int8_t", opt, ALIGN4)]
        groups = c.c if c.depthwise else 1
        lines.append(
            f"static const k_window_params p{i} = {{{c.c}, {c.h}, {c.w}, {c.o}, {oh}, {ow}, "
            f"{c.k[0]}, {c.k[1]}, {c.s[0]}, {c.s[1]}, {', '.join(map(str, c.pads))}, "
            f"{c.d[0]}, {c.d[1]}, {groups}, 0, {{K_ACT_NONE, 0.0f, 0.0f}}}};"
        )
        bias = f"b{i}" if i % 4 != 1 else "0"
        rows.append(_row(i, kind, q, bias, c.h * c.w * c.c, oh * ow * c.o))
    for j, (n_in, n_out) in enumerate(DENSES):
        i = len(CONVS) + j
        qarr, q = _quant(rng, n_out, i)
        x, w, b = _inputs(rng, i, n_in, (n_out, n_in), n_out, q["in_zp"])
        lines += [*qarr, _arr(f"x{i}", "int8_t", x), _arr(f"b{i}", "int32_t", b)]
        lines += [_arr(f"wr{i}", "int8_t", w), _arr(f"wo{i}", "int8_t", dense_weights(w), ALIGN4)]
        lines.append(
            f"static const k_dense_params d{i} = {{{n_in}, {n_out}, {{K_ACT_NONE, 0.0f, 0.0f}}}};"
        )
        bias = f"b{i}" if i % 4 != 1 else "0"
        rows.append(_row(i, "dense", q, bias, n_in, n_out))
    src = "\n".join(lines) + "\nstatic const tcase CASES[] = {\n" + ",\n".join(rows) + "\n};\n"
    return src, scratch


def _row(i: int, kind: str, q: dict[str, int], bias: str, nx: int, ny: int) -> str:
    """One ``tcase`` initialiser."""
    codes = {"conv": 0, "pointwise": 1, "depthwise": 2, "dense": 3}
    p, d = (f"&p{i}", "0") if kind != "dense" else ("0", f"&d{i}")
    qrec = (
        f"{{{q['in_zp']}, {q['out_zp']}, {q['lo']}, {q['hi']}, {q['nq']}, {q['up']}, m{i}, s{i}}}"
    )
    return f"    {{{codes[kind]}, {p}, {d}, {qrec}, x{i}, wr{i}, wo{i}, {bias}, {nx}, {ny}}}"


MAIN = r"""
#include "kernels_q8.h"
#include "kernels_q8_opt.h"
#include "k_dsp_emu.h"
#include "k_dsp.h"

typedef struct {
    int kind; /* 0 conv, 1 pointwise, 2 depthwise, 3 dense */
    const k_window_params *p;
    const k_dense_params *d;
    k_q_params q;
    const int8_t *x, *wr, *wo;
    const int32_t *b;
    int nx, ny;
} tcase;

#include "cases.h"

#ifdef HOST
#include <stdio.h>
#include <stdlib.h>
#define say(label, v) printf("%s %d\n", label, (int)(v))
static void *get(int n) { return malloc((size_t)n); }
static void put(void *p) { free(p); }
#else
void say(const char *label, int v);
static unsigned char pool[16384] __attribute__((aligned(8)));
static int used;
static void *get(int n) { void *p = pool + used; used += (n + 7) & ~7; return p; }
static void put(void *p) { (void)p; used = 0; }
#endif

/* 1 when variant isa (0 dsp, 1 plain) of case c gives the reference's bytes. */
static int check(const tcase *c, int isa)
{
    int8_t *ref = get(c->ny), *out, *s = 0;
    int i, same = 1;
    if (c->kind == 3) k_q_dense(c->d, &c->q, c->x, c->wr, c->b, ref);
    else k_q_conv2d(c->p, &c->q, c->x, c->wr, c->b, ref);
    out = get(c->ny);
    if (c->kind < 2) s = get(k_q_conv_scratch(c->p));
    if (c->kind == 2 && k_q_depthwise_scratch(c->p)) s = get(k_q_depthwise_scratch(c->p));
    if (c->kind == 0) (isa ? k_q_conv_plain : k_q_conv_dsp)(c->p, &c->q, c->x, c->wo, c->b, s, out);
    if (c->kind == 1)
        (isa ? k_q_pointwise_plain : k_q_pointwise_dsp)(c->p, &c->q, c->x, c->wo, c->b, s, out);
    if (c->kind == 2)
        (isa ? k_q_depthwise_plain : k_q_depthwise_dsp)(c->p, &c->q, c->x, c->wo, c->b, s, out);
    if (c->kind == 3) (isa ? k_q_dense_plain : k_q_dense_dsp)(c->d, &c->q, c->x, c->wo, c->b, out);
    for (i = 0; i < c->ny; i++) same &= ref[i] == out[i];
    if (s) put(s);
    put(out);
    put(ref);
    return same;
}

/* Emulated == native DSP instructions on n xorshift operands (target only). */
static int emu_matches(int n)
{
#if K_DSP_NATIVE
    uint32_t r = 2463534242u, a, b, c;
    int i, ok = 1;
    for (i = 0; i < n; i++) {
        r ^= r << 13; r ^= r >> 17; r ^= r << 5; a = r;
        r ^= r << 13; r ^= r >> 17; r ^= r << 5; b = r;
        r ^= r << 13; r ^= r >> 17; r ^= r << 5; c = i < 8 ? 0x80008000u >> (i & 1) : r;
        if (i == 3) a = b = 0x80008000u;
        ok &= K_SXTB16(a) == k_emu_sxtb16(a);
        ok &= K_SXTB16_ROR8(a) == k_emu_sxtb16(K_ROR8(a));
        ok &= K_SXTAB16(b, a) == k_emu_sxtab16(b, a);
        ok &= K_SXTAB16_ROR8(b, a) == k_emu_sxtab16(b, K_ROR8(a));
        ok &= K_SMLAD(a, b, (int32_t)c) == k_emu_smlad(a, b, (int32_t)c);
        ok &= K_SMLABB(a, b, (int32_t)c) == k_emu_smlabb(a, b, (int32_t)c);
        ok &= K_SMLATT(a, b, (int32_t)c) == k_emu_smlatt(a, b, (int32_t)c);
        ok &= K_SMLATB(a, b, (int32_t)c) == k_emu_smlatb(a, b, (int32_t)c);
        ok &= K_SMMULR((int32_t)a, (int32_t)b) == k_emu_smmulr((int32_t)a, (int32_t)b);
        ok &= K_SMMLAR((int32_t)a, (int32_t)b, (int32_t)c) ==
              k_emu_smmlar((int32_t)a, (int32_t)b, (int32_t)c);
        ok &= K_PKHBT16(a, b) == (((a) & 0xFFFFu) | ((b) << 16));
        ok &= K_PKHTB16(a, b) == (((a) & 0xFFFF0000u) | ((b) >> 16));
        ok &= K_SSAT8((int32_t)a >> (i & 31)) == k_emu_ssat8((int32_t)a >> (i & 31));
        ok &= K_MAX8(a, b) == k_emu_max8(a, b) && K_MIN8(a, b) == k_emu_min8(a, b);
        ok &= K_BFI8(a, b, 16) == (((a) & ~(0xFFu << 16)) | ((b & 0xFFu) << 16));
    }
    return ok;
#else
    (void)n;
    return -1;
#endif
}

int run_all(void)
{
    int i, isa;
    for (i = 0; i < (int)(sizeof CASES / sizeof CASES[0]); i++) {
        if (CASES[i].kind < 2) say("scratch", k_q_conv_scratch(CASES[i].p));
        else if (CASES[i].kind == 2) say("scratch", k_q_depthwise_scratch(CASES[i].p));
        else say("scratch", 0);
        for (isa = 0; isa < 2; isa++) say(isa ? "plain" : "dsp", check(&CASES[i], isa));
    }
    say("emu", emu_matches(100000));
    return 0;
}

#ifdef HOST
int main(void) { return run_all(); }
#endif
"""

TARGET = r"""
#define USART1_SR (*(volatile unsigned *)0x40011000u)
#define USART1_DR (*(volatile unsigned *)0x40011004u)
int run_all(void);
static void putc_(char c) { while (!(USART1_SR & 0x80u)) {} USART1_DR = (unsigned)c; }
void say(const char *label, int v)
{
    char b[12]; int n = 0; unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    while (*label) putc_(*label++);
    putc_(' ');
    if (v < 0) putc_('-');
    do { b[n++] = (char)('0' + u % 10u); u /= 10u; } while (u);
    while (n) putc_(b[--n]);
    putc_('\n');
}
void harness_main(void)
{
    run_all();
    say("@done", 0);
}
""" + bare_metal_startup("harness_main")

LINKER = bare_metal_linker()

N_CASES = len(CONVS) + len(DENSES)


def _write(work: Path) -> list[int]:
    """main.c and cases.h in ``work``; the handler's scratch bytes per case."""
    work.mkdir(parents=True, exist_ok=True)
    src, scratch = cases_source()
    (work / "cases.h").write_text(src)
    (work / "main.c").write_text(MAIN)
    return scratch + [0] * len(DENSES)


def _parse(text: str) -> list[tuple[str, int]]:
    """``label value`` lines."""
    out = []
    for line in text.splitlines():
        label, _, value = line.strip().partition(" ")
        if value.lstrip("-").isdigit():
            out.append((label, int(value)))
    return out


def _check(lines: list[tuple[str, int]], scratch: list[int], native: bool) -> None:
    """Every case equal in both variants; the scratch figures equal; emu as expected."""
    got = [v for k, v in lines if k == "scratch"]
    assert got == scratch
    for isa in ("dsp", "plain"):
        res = [v for k, v in lines if k == isa]
        assert len(res) == N_CASES
        bad = [i for i, ok in enumerate(res) if ok != 1]
        assert not bad, f"{isa} differs from the reference in cases {bad}"
    assert dict(lines)["emu"] == (1 if native else -1)


def test_tuned_int8_kernels_equal_the_reference_on_the_host(tmp_path: Path) -> None:
    """ASan + UBSan, exact-size buffers; the DSP variant through k_dsp_emu.h."""
    scratch = _write(tmp_path)
    srcs = [tmp_path / "main.c", KERNELS_DIR / "kernels_q8.c", KERNELS_DIR / "kernels_q8_opt.c"]
    srcs.append(KERNELS_DIR / "kernels.c")
    exe = tmp_path / "t"
    cmd = ["gcc", *HOST_CFLAGS, "-DHOST", f"-I{KERNELS_DIR}", f"-I{tmp_path}", "-o", str(exe)]
    res = subprocess.run([*cmd, *map(str, srcs), "-lm"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    _check(_parse(run.stdout), scratch, native=False)


@pytest.mark.qemu
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing")
def test_tuned_int8_kernels_equal_the_reference_on_a_cortex_m4(tmp_path: Path) -> None:
    """The same cases with the real SMLAD / SXTB16 (QEMU netduinoplus2, Cortex-M4F), and the
    emulation of k_dsp_emu.h equal to the instructions on 100 000 random operand triples."""
    scratch = _write(tmp_path)
    (tmp_path / "target.c").write_text(TARGET)
    (tmp_path / "link.ld").write_text(LINKER)
    srcs = [tmp_path / "main.c", tmp_path / "target.c", KERNELS_DIR / "kernels_q8.c"]
    srcs += [KERNELS_DIR / "kernels_q8_opt.c", KERNELS_DIR / "kernels.c", KERNELS_DIR / "k_libc.c"]
    elf = tmp_path / "t.elf"
    flags = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-O2"]
    flags += ["-std=c99", "-Wall", "-Werror", "-ffreestanding", "-nostdlib"]
    cmd = ["arm-none-eabi-gcc", *flags, f"-I{KERNELS_DIR}", f"-I{tmp_path}", "-T"]
    res = subprocess.run(
        [*cmd, str(tmp_path / "link.ld"), "-o", str(elf), *map(str, srcs), "-lgcc"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    _check(_parse(_run_qemu(elf)), scratch, native=True)


def _run_qemu(elf: Path, timeout_s: float = 60.0) -> str:
    """Serial output of the ELF on the emulated board up to ``@done``."""
    cmd = ["qemu-system-arm", "-M", EMULATOR.machine, "-display", "none", "-monitor", "none"]
    cmd += ["-serial", "stdio", "-kernel", str(elf)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines = []
    deadline = time.monotonic() + timeout_s
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("@done") or time.monotonic() > deadline:
                break
            lines.append(line)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return "".join(lines)


def test_variant_per_core_and_the_im2col_scratch_in_the_arena(tmp_path: Path) -> None:
    """tiny_cnn_int8 (conv, depthwise, pointwise, dense): a Cortex-M0+ gets the ``_plain``
    kernels, a Cortex-M4 the ``_dsp`` ones, with the same weights bytes and arena; each conv
    layer's planned RAM holds its im2col block (the 3x3 depthwise its padded input ring;
    ``<op>:scratch``, the handler's bytes) and the
    arena is the planner's figure; the plain build equals LiteRT on the whole model."""
    from test_codegen_tflite import MODELS_DIR, build, model_input, run

    from splitter.codegen.model_c import generate_device_c
    from splitter.cost.memory import plan_layer_memory
    from splitter.importers import load_chain
    from splitter.slicing.validate import TfliteRunner

    path = MODELS_DIR / "tiny_cnn_int8.tflite"
    chain = load_chain(path)
    last = len(chain) - 1
    gens = {core: generate_device_c(chain, [(0, 0, last)], "d", core=core) for core in CORES_ISA}
    for core, isa in CORES_ISA.items():
        src = gens[core].files["model.c"]
        calls = {ln.split("(")[0].strip() for ln in src.splitlines() if "(&p, &q" in ln}
        assert {"k_q_conv_" + isa, "k_q_pointwise_" + isa, "k_q_depthwise_" + isa} <= calls
        assert "k_q_dense_" + isa in calls and not any(c.endswith(OTHER[isa]) for c in calls)
    others = [isa_of(c) for c in ("cortex-m7", "cortex-m0plus", None)]
    assert others == ["dsp", "plain", "dsp"]
    assert gens["cortex-m0plus"].arena_bytes == gens["cortex-m4"].arena_bytes
    assert gens["cortex-m0plus"].weights_bytes == gens["cortex-m4"].weights_bytes
    assert gens["cortex-m4"].arena_bytes == max(layer.cost.ram for layer in chain.layers)
    assert chain.graph is not None
    seen = set()
    for layer in chain.layers[1:]:
        assert layer.input is not None
        mem = plan_layer_memory(
            list(layer.ops), chain.graph.tensors, layer.input.name, layer.output.name,
            lambda s: s.itemsize,
        )  # fmt: skip
        assert mem.size == layer.cost.ram
        for op in layer.ops:
            ins = [chain.graph.tensors[op.inputs[0]]]
            kind = q8_conv_kind(op, ins) if op.kind == "conv2d" else ""
            if kind in ("conv", "pointwise"):
                k = int(np.prod(op.weights["W"].shape[1:]))
                o, kp = int(op.weights["W"].shape[0]), (k + 7) // 8 * 8
                relaid = k % 4 != 0 and o * kp <= 2048  # conv_padded_k (dilation 1 here)
                want = 4 + 4 * kp + 2 * o * kp if relaid else 4 + 4 * (k + k % 2)
                assert mem.sizes[f"{op.name}:scratch"] == want
                seen.add(kind)
            elif kind == "depthwise":  # 3x3 stride 1: the padded ring, 3 lines x 4 int16 planes
                h_in, w_in = ins[0].shape[1:3]
                pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
                lead, length, trail = (pt, h_in, pb) if h_in > w_in else (pl, w_in, pr)
                n = lead + lead % 2 + length + trail + 3
                assert mem.sizes[f"{op.name}:scratch"] == 4 + 2 * 3 * 4 * (n + n % 2)
                seen.add(kind)
            else:
                assert f"{op.name}:scratch" not in mem.sizes
    assert seen == {"conv", "pointwise", "depthwise"}
    exe = build(gens["cortex-m0plus"], tmp_path / "m0")
    x = model_input(chain.layers[0].output, seed=3)
    runner = TfliteRunner(path.read_bytes())
    ref = runner.run({runner.inputs[0].name: x})[runner.outputs[0].name]
    got = run(exe, 0, x, chain.layers[last].output, tmp_path / "m0")
    assert np.array_equal(got, ref.reshape(got.shape))


#: core -> the int8 ISA variant the generator must pick; the other variant's suffix
CORES_ISA = {"cortex-m0plus": "plain", "cortex-m4": "dsp"}
OTHER = {"plain": "_dsp", "dsp": "_plain"}
