"""The PEX channel-loop kernels tuned for the DSP extension (kernels_q8_pex.c) against the
generic ones they replace (kernels_q8.c), on seeded random shapes that hit every edge.

``k_q_pex_pointwise_dsp`` / ``k_q_pex_accumulate_dsp`` / ``k_q_pex_requant_dsp`` /
``k_q_dw_plane_dsp`` must give the bytes of ``k_q_pex_pointwise`` / ``k_q_pex_accumulate`` /
``k_q_pex_requant`` / ``k_q_dw_plane`` (which give those of the ops run whole:
tests/test_pex_plan.py): channel counts and pixel counts off the blocking (4 pixels, 4 outputs,
4-byte groups), accumulators at every byte alignment (the LDM / STM path needs a word, the
others fall back), the requantisation in place both ways (result below and above its
accumulators), 3x3 depthwise planes with stride 1 and 2, any padding, small planes (the
zero-point-padded copy) and large ones (border pixels one by one), strided channels
(``xs``, ``ys``) and a 5x5 plane (the generic fallback), per-tensor multipliers with left and
right shifts, both rounding modes, random zero points and clamps; ``k_q_pex_accumulate_g`` and
its ``_dsp`` variant (several input channels of a slab per pass) against one-channel calls.

* On the host (gcc, ASan + UBSan, the portable emulation of k_dsp_emu.h).
* Under QEMU (Cortex-M4F): the real SMLAD / SXTB16 and the LDM / STM assembly.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_codegen_support import HOST_CFLAGS
from test_kernels_q8_opt import LINKER, TARGET, _parse, _run_qemu

from splitter.codegen.model_c import KERNELS_DIR

#: random cases per kernel
CASES = 150

MAIN = r"""
#include <string.h>
#include "kernels_q8.h"

void say(const char *label, int v);

static uint32_t seed = 20261127u;
static int rnd(int lo, int hi)
{
    seed = seed * 1664525u + 1013904223u;
    return lo + (int)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

static int8_t X[4096], W[2048], WT[2048], Y0[4096], Y1[4096];
static unsigned char A0[4 * 1024 + 8], A1[4 * 1024 + 8];
static int32_t B[1], M[1], S[1];

static void quant(k_q_params *q)
{
    int lo = rnd(-128, 127), hi = rnd(-128, 127);
    if (lo > hi) { int t = lo; lo = hi; hi = t; }
    if (rnd(0, 2) == 0) { lo = -128; hi = 127; }
    M[0] = (int32_t)(0x40000000u | ((uint32_t)rnd(0, 0x3FFFFF) << 8) | (uint32_t)rnd(0, 255));
    S[0] = rnd(-14, 2);
    B[0] = rnd(-40000, 40000);
    q->in_zp = rnd(-128, 127);
    q->out_zp = rnd(-128, 127);
    q->act_min = lo;
    q->act_max = hi;
    q->nq = 1;
    q->round_up = rnd(0, 1);
    q->mult = M;
    q->shift = S;
}

static int same(const void *a, const void *b, int n)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    int i;
    for (i = 0; i < n; i++)
        if (x[i] != y[i]) return 0;
    return 1;
}

static void bytes(int8_t *p, int n)
{
    int i;
    for (i = 0; i < n; i++) p[i] = (int8_t)rnd(-128, 127);
}

static int pointwise(void)
{
    k_q_params q;
    const int C = rnd(1, 40), HW = rnd(1, 37);
    quant(&q);
    bytes(X, C * HW);
    bytes(W, C);
    const int32_t *b = rnd(0, 3) ? B : 0;
    k_q_pex_pointwise(&q, X, C, HW, W, b, Y0);
    k_q_pex_pointwise_dsp(&q, X, C, HW, W, b, Y1);
    return same(Y0, Y1, HW);
}

static int accumulate(void)
{
    const int O = rnd(1, 23), HW = rnd(1, 30), C = rnd(1, 9), c = rnd(0, C - 1);
    const int off = rnd(0, 3), zp = rnd(-128, 127);
    int o, k, i;
    bytes(X, HW);
    bytes(W, O * C);
    for (o = 0; o < O; o++)
        for (k = 0; k < C; k++) WT[k * O + o] = W[o * C + k];
    for (i = 0; i < 4 * O * HW; i++) A0[off + i] = A1[off + i] = (unsigned char)rnd(0, 255);
    for (i = 0; i < O * HW; i++)
        A0[off + 4 * i + 3] = A1[off + 4 * i + 3] = (unsigned char)rnd(0, 1) * 255u;
    k_q_pex_accumulate(X, W + c, C, zp, O, HW, A0 + off);
    k_q_pex_accumulate_dsp(X, WT + c * O, zp, O, HW, A1 + off);
    return same(A0 + off, A1 + off, 4 * O * HW);
}

/* G input channels of an HW x G slab at once (raw codes): the generic and DSP kernels against
 * G one-channel k_q_pex_accumulate calls with a zero input zero point. */
static int accumulate_g(void)
{
    const int O = rnd(1, 23), HW = rnd(1, 30), C = rnd(1, 12), G = rnd(1, C), c = rnd(0, C - G);
    const int off = rnd(0, 1) ? 0 : rnd(1, 3);
    static unsigned char A2[4 * 1024 + 8];
    int i, g;
    bytes(X, HW * G);
    bytes(W, O * C);
    for (i = 0; i < 4 * O * HW; i++) A0[off + i] = (unsigned char)rnd(0, 255);
    for (i = 0; i < O * HW; i++) A0[off + 4 * i + 3] = (unsigned char)rnd(0, 1) * 255u;
    memcpy(A1, A0, sizeof A1);
    memcpy(A2, A0, sizeof A2);
    for (g = 0; g < G; g++) {
        for (i = 0; i < HW; i++) Y0[i] = X[i * G + g];
        k_q_pex_accumulate(Y0, W + c + g, C, 0, O, HW, A0 + off);
    }
    k_q_pex_accumulate_g(X, G, W + c, C, O, HW, A1 + off);
    k_q_pex_accumulate_g_dsp(X, G, W + c, C, O, HW, A2 + off);
    return same(A0 + off, A1 + off, 4 * O * HW) && same(A0 + off, A2 + off, 4 * O * HW);
}

static int requant(void)
{
    k_q_params q;
    const int O = rnd(1, 13), HW = rnd(1, 20), n = O * HW, above = rnd(0, 1);
    int i;
    quant(&q);
    for (i = 0; i < 4 * n; i++) A0[i] = A1[i] = (unsigned char)rnd(0, 255);
    for (i = 0; i < n; i++) A0[4 * i + 3] = A1[4 * i + 3] = (unsigned char)rnd(0, 1) * 255u;
    k_q_pex_requant(&q, A0, O, HW, (int8_t *)(A0 + (above ? 3 * n : 0)));
    k_q_pex_requant_dsp(&q, A1, O, HW, (int8_t *)(A1 + (above ? 3 * n : 0)));
    return same(A0 + (above ? 3 * n : 0), A1 + (above ? 3 * n : 0), n);
}

static int plane(void)
{
    k_window_params p;
    k_q_params q;
    const int xs = rnd(0, 1) ? 1 : rnd(2, 3), ys = rnd(0, 1) ? 1 : 2;
    const int k = rnd(0, 5) ? 3 : 5;
    int n, big;
    memset(&p, 0, sizeof p);
    p.C = p.O = p.groups = 1;
    p.kh = p.kw = k;
    p.sh = rnd(1, 2);
    p.sw = rnd(0, 2) ? p.sh : 3 - p.sh;
    p.pt = rnd(0, k / 2); p.pb = rnd(0, k / 2); p.pl = rnd(0, k / 2); p.pr = rnd(0, k / 2);
    p.dh = p.dw = 1;
    big = rnd(0, 2) == 0; /* over K_PEX_PAD_MAX: the border pixels one by one */
    p.H = big ? rnd(19, 30) : rnd(k - p.pt - p.pb > 1 ? k - p.pt - p.pb : 1, 13);
    p.W = big ? rnd(19, 30) : rnd(k - p.pl - p.pr > 1 ? k - p.pl - p.pr : 1, 14);
    p.OH = (p.H + p.pt + p.pb - k) / p.sh + 1;
    p.OW = (p.W + p.pl + p.pr - k) / p.sw + 1;
    quant(&q);
    bytes(X, p.H * p.W * xs);
    bytes(W, k * k);
    n = p.OH * p.OW * ys;
    memset(Y0, 0x55, (size_t)n);
    memset(Y1, 0x55, (size_t)n);
    {
        const int32_t *b = rnd(0, 3) ? B : 0;
        k_q_dw_plane(&p, &q, X, xs, W, b, Y0, ys);
        k_q_dw_plane_dsp(&p, &q, X, xs, W, b, Y1, ys);
    }
    return same(Y0, Y1, n);
}

int run_all(void)
{
    int i, bad[5] = {0, 0, 0, 0, 0};
    for (i = 0; i < CASES; i++) {
        bad[0] += !pointwise();
        bad[1] += !accumulate();
        bad[2] += !requant();
        bad[3] += !plane();
        bad[4] += !accumulate_g();
    }
    say("pointwise", bad[0]);
    say("accumulate", bad[1]);
    say("requant", bad[2]);
    say("plane", bad[3]);
    say("accumulate_g", bad[4]);
    return 0;
}

#ifdef HOST
#include <stdio.h>
void say(const char *label, int v) { printf("%s %d\n", label, v); }
int main(void) { return run_all(); }
#endif
"""

KERNELS = ("kernels_q8.c", "kernels_q8_opt.c", "kernels_q8_pex.c", "kernels.c")


def _source(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    main = work / "main.c"
    main.write_text(MAIN.replace("CASES", str(CASES)))
    return main


def _check(text: str) -> None:
    """No case of any kernel differs from the generic one."""
    got = dict(_parse(text))
    kernels = ("pointwise", "accumulate", "requant", "plane", "accumulate_g")
    assert set(got) >= set(kernels), text[-2000:]
    assert {k: got[k] for k in kernels} == dict.fromkeys(kernels, 0)


def test_pex_dsp_kernels_equal_the_generic_ones_on_the_host(tmp_path: Path) -> None:
    """ASan + UBSan; the DSP steps through k_dsp_emu.h."""
    srcs = [_source(tmp_path), *(KERNELS_DIR / k for k in KERNELS)]
    exe = tmp_path / "t"
    cmd = ["gcc", *HOST_CFLAGS, "-DHOST", f"-I{KERNELS_DIR}", "-o", str(exe)]
    res = subprocess.run([*cmd, *map(str, srcs), "-lm"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    _check(run.stdout)


@pytest.mark.qemu
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing")
def test_pex_dsp_kernels_equal_the_generic_ones_on_a_cortex_m4(tmp_path: Path) -> None:
    """The same cases with the real DSP instructions and the LDM / STM assembly (QEMU
    netduinoplus2, Cortex-M4F)."""
    main = _source(tmp_path)
    (tmp_path / "target.c").write_text(TARGET)
    (tmp_path / "link.ld").write_text(LINKER)
    srcs = [main, tmp_path / "target.c", *(KERNELS_DIR / k for k in KERNELS)]
    srcs.append(KERNELS_DIR / "k_libc.c")
    elf = tmp_path / "t.elf"
    flags = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-O2"]
    flags += ["-std=c99", "-Wall", "-Werror", "-ffreestanding", "-nostdlib"]
    cmd = ["arm-none-eabi-gcc", *flags, f"-I{KERNELS_DIR}", "-T", str(tmp_path / "link.ld")]
    res = subprocess.run(
        [*cmd, "-o", str(elf), *map(str, srcs), "-lgcc"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    _check(_run_qemu(elf))
