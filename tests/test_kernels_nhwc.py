"""The blocked float32 NHWC convolution (``k_conv2d_nhwc``) on odd shapes, host-built with ASan.

``kernels_nhwc.c`` runs 4 output pixels x 4 output channels (groups 1) or 4 pixels x 4 channels
(depthwise) per inner loop and the rest one at a time; these cases hit every remainder: channel
counts that are not a multiple of 4, fewer than 4 interior pixels, 1x1 spatial maps, strides 2,
dilations, a different pad on every side, depth multipliers and grouped convolutions. Inputs,
weights (packed by the generator's own ``nhwc_weights``) and outputs live in exactly sized
``malloc`` blocks, so AddressSanitizer catches any read or write past them; the result is
compared with a float64 numpy convolution (relative 1e-5 of the sum of |terms|).
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from splitter.codegen.model_c import KERNELS_DIR
from splitter.codegen.ops.conv import nhwc_weights

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "kernels_nhwc.h"
/* usage: prog case.bin out.bin; case.bin = 19 int32 (the record's ints, act code, has_bias),
 * then x (H*W*C), w (O*kh*kw*C/groups), b (O) as float32 */
static float *load(FILE *f, size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p || fread(p, sizeof *p, n, f) != n) exit(3);
    return p;
}
int main(int argc, char **argv)
{
    int v[19];
    k_window_params p;
    size_t nx, nw, ny;
    float *x, *w, *b = 0, *y;
    FILE *f = fopen(argv[1], "rb");
    if (argc != 3 || !f || fread(v, sizeof v[0], 19, f) != 19) return 2;
    p = (k_window_params){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
                          v[11], v[12], v[13], v[14], v[15], v[16], 0, {v[17], 0.0f, 6.0f}};
    nx = (size_t)p.H * p.W * p.C;
    nw = (size_t)p.O * p.kh * p.kw * (p.C / p.groups);
    ny = (size_t)p.OH * p.OW * p.O;
    x = load(f, nx);
    w = load(f, nw);
    if (v[18]) b = load(f, (size_t)p.O);
    fclose(f);
    y = malloc(ny * sizeof *y);
    if (!y) return 4;
    k_conv2d_nhwc(&p, x, w, b, y);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(y, sizeof *y, ny, f) != ny) return 5;
    fclose(f);
    free(x); free(w); free(b); free(y);
    return 0;
}
"""
FLAGS = ["-std=c99", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all"]  # fmt: skip
ACT_NONE, ACT_RELU, ACT_CLIP = 0, 1, 3


class Case(NamedTuple):
    """A convolution: input (H, W, C), O outputs, kernel, stride, pads (t, l, b, r), groups."""

    name: str
    hwc: tuple[int, int, int]
    o: int
    k: tuple[int, int]
    s: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    d: tuple[int, int] = (1, 1)
    groups: int = 1
    act: int = ACT_NONE
    bias: bool = True


# fmt: off
CASES = [
    Case("conv3x3 16->32 pad1 (benchmark shape)", (16, 16, 16), 32, (3, 3), pads=(1, 1, 1, 1)),
    Case("conv3x3 3->5 odd channels", (9, 11, 3), 5, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    Case("conv3x3 7->7 pads on every side differ", (8, 10, 7), 7, (3, 3), pads=(2, 1, 0, 3)),
    Case("conv3x3 5->6 stride 2", (13, 12, 5), 6, (3, 3), s=(2, 2), pads=(1, 1, 1, 1)),
    Case("conv 3x2 4->9 stride (2,1) no bias", (10, 9, 4), 9, (3, 2), s=(2, 1), bias=False),
    Case("conv3x3 6->8 dilation 2", (12, 12, 6), 8, (3, 3), pads=(2, 2, 2, 2), d=(2, 2)),
    Case("conv10x4 1->7 (kws first layer, C=1)", (25, 10, 1), 7, (10, 4), s=(2, 2),
         pads=(4, 1, 5, 2), act=ACT_CLIP),
    Case("conv3x3 8->4 on a 1x1 map", (1, 1, 8), 4, (3, 3), pads=(1, 1, 1, 1)),
    Case("conv 2x2 3->6 window larger than the map", (1, 2, 3), 6, (2, 2), pads=(1, 0, 0, 0)),
    Case("pointwise 64->64 (benchmark shape)", (16, 8, 64), 64, (1, 1)),
    Case("pointwise 13->11, 7x3 pixels", (7, 3, 13), 11, (1, 1), act=ACT_RELU),
    Case("pointwise 5->3 on a 1x1 map", (1, 1, 5), 3, (1, 1)),
    Case("pointwise 6->10 stride 2", (9, 9, 6), 10, (1, 1), s=(2, 2)),
    Case("depthwise3x3 32 pad1 (benchmark shape)", (16, 16, 32), 32, (3, 3), pads=(1, 1, 1, 1),
         groups=32),
    Case("depthwise3x3 6 (not a multiple of 4)", (7, 9, 6), 6, (3, 3), pads=(1, 1, 1, 1),
         groups=6, act=ACT_RELU),
    Case("depthwise3x3 12 stride 2, pads differ", (11, 10, 12), 12, (3, 3), s=(2, 2),
         pads=(0, 1, 1, 0), groups=12),
    Case("depthwise5x3 8 dilation 2", (12, 12, 8), 8, (5, 3), pads=(4, 2, 4, 2), d=(2, 2),
         groups=8, bias=False),
    Case("depthwise3x3 4 on a 1x1 map", (1, 1, 4), 4, (3, 3), pads=(1, 1, 1, 1), groups=4),
    Case("depthwise3x3 3 x multiplier 2", (6, 7, 3), 6, (3, 3), pads=(1, 1, 1, 1), groups=3),
    Case("grouped 3x3 8->6 groups 2", (6, 6, 8), 6, (3, 3), pads=(1, 0, 1, 2), groups=2),
]
# fmt: on


def out_size(n: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    """Output length of a window of k taps at dilation d and stride s over n + p0 + p1."""
    return (n + p0 + p1 - (k - 1) * d - 1) // s + 1


def reference(case: Case, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """float64 NHWC convolution of x (H, W, C) with canonical w (O, C/g, kh, kw): the output and
    the sum of |terms| per output (the scale of the float32 rounding error)."""
    (h, wd, c), o, (kh, kw) = case.hwc, case.o, case.k
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = case.s, case.d, case.pads
    oh, ow = out_size(h, kh, sh, pt, pb, dh), out_size(wd, kw, sw, pl, pr, dw)
    xp = np.pad(x.astype(np.float64), ((pt, pb), (pl, pr), (0, 0)))
    cg, og = c // case.groups, o // case.groups
    y = np.zeros((oh, ow, o)) + (b if b is not None else 0.0)
    mag = np.zeros((oh, ow, o)) + (np.abs(b) if b is not None else 0.0)
    for ky in range(kh):
        for kx in range(kw):
            rows = slice(ky * dh, ky * dh + (oh - 1) * sh + 1, sh)
            tap = xp[rows, kx * dw : kx * dw + (ow - 1) * sw + 1 : sw]
            for g in range(case.groups):
                xs = tap[..., g * cg : (g + 1) * cg]
                wg = w[g * og : (g + 1) * og, :, ky, kx].astype(np.float64)
                y[..., g * og : (g + 1) * og] += xs @ wg.T
                mag[..., g * og : (g + 1) * og] += np.abs(xs) @ np.abs(wg.T)
    if case.act == ACT_RELU:
        y = np.maximum(y, 0.0)
    elif case.act == ACT_CLIP:
        y = np.clip(y, 0.0, 6.0)
    return np.stack([y, mag])


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("knhwc")
    (work / "main.c").write_text(MAIN)
    out = work / "knhwc"
    srcs = [work / "main.c", KERNELS_DIR / "kernels_nhwc.c", KERNELS_DIR / "kernels.c"]
    subprocess.run(["gcc", *FLAGS, f"-I{KERNELS_DIR}", "-o", str(out), *map(str, srcs), "-lm"],
                   check=True)  # fmt: skip
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conv2d_nhwc_matches_numpy(case: Case, exe: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    (h, wd, c), o, (kh, kw) = case.hwc, case.o, case.k
    x = rng.standard_normal((h, wd, c)).astype(np.float32)
    w = rng.standard_normal((o, c // case.groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if case.bias else None
    ref, mag = reference(case, x, w, b)
    oh, ow = ref.shape[:2]
    ints = [c, h, wd, o, oh, ow, kh, kw, *case.s, *case.pads, *case.d, case.groups, case.act]
    blob = np.array([*ints, int(case.bias)], dtype="<i4").tobytes() + x.astype("<f4").tobytes()
    blob += nhwc_weights(w, case.groups).astype("<f4").tobytes()
    blob += b.astype("<f4").tobytes() if b is not None else b""
    (tmp_path / "case.bin").write_bytes(blob)
    res = subprocess.run([str(exe), str(tmp_path / "case.bin"), str(tmp_path / "y.bin")],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
    y = np.frombuffer((tmp_path / "y.bin").read_bytes(), dtype="<f4").reshape(ref.shape)
    assert np.all(np.abs(y - ref) <= 1e-5 * mag + 1e-6), np.max(np.abs(y - ref))


def test_nhwc_weights_layouts() -> None:
    """Each packing holds the canonical weights' elements exactly once, where the kernel reads."""
    w = np.arange(6 * 2 * 3 * 3, dtype=np.float32).reshape(6, 2, 3, 3)
    packed = nhwc_weights(w, 1)  # O=6: one block of 4 rows, 2 rows row-major
    k = (1 * 3 + 2) * 2 + 1  # element (ky=1, kx=2, c=1)
    assert packed[k * 4 + 3] == w[3, 1, 1, 2] and packed[4 * 18 + 18 + k] == w[5, 1, 1, 2]
    dw = nhwc_weights(np.arange(5 * 9, dtype=np.float32).reshape(5, 1, 3, 3), 5).ravel()
    assert dw[(2 * 3 + 1) * 5 + 4] == 4 * 9 + 2 * 3 + 1  # (ky=2, kx=1, o=4)
    for src, g in ((w, 1), (w, 3), (w[:, :1], 6)):
        assert sorted(nhwc_weights(src, g).ravel().tolist()) == sorted(src.ravel().tolist())
