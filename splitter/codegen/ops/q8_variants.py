"""Which int8 kernel variant runs a conv / dense op on which core, and its weight layout.

The tuned int8 kernels (``splitter/firmware_templates/kernels/kernels_q8_opt.c``) come per kernel
family
(:func:`splitter.cost.handlers.q8_conv_kind`: conv, pointwise, depthwise; dense) in two ISA
variants that compute the same bits:

* ``dsp``: the Armv7E-M DSP extension (SMLAD, SXTB16, ...), for the cores that have it
  (``Core.dsp``, ``splitter/hardware/cores.py``);
* ``plain``: plain C, for the others (Cortex-M0+, ARMv6-M: no DSP extension).

A variant's name is ``q_<family>_<isa>`` (``q_conv_dsp``, ``q_dense_plain``, ...; the C function
is ``k_`` + the name), one row each in a per-variant cost table; grouped convs with more than one
input channel per group keep the generic ``k_q_conv2d`` (variant ``q_conv2d``). The weights are
TFLite's bytes reordered for the kernel (same count, so FLASH_j is unchanged): see
:func:`conv_weights` and :func:`depthwise_weights`.
"""

from __future__ import annotations

import numpy as np

#: ISA when the core is not known (host builds of the generated C, the benchmarks): ``dsp``,
#: whose intrinsics fall back to the portable emulation of ``k_dsp_emu.h`` off target.
DEFAULT_ISA = "dsp"


def isa_of(core: str | None) -> str:
    """The ISA variant of gcc core ``core`` (``Core.isa``: ``"dsp"`` with the DSP extension, else
    ``"plain"``), :data:`DEFAULT_ISA` for ``None``; BoardFileError for a core splitter does not
    know (no silent fallback)."""
    if core is None:
        return DEFAULT_ISA
    from splitter.hardware.cores import core_for

    return core_for(core).isa


def variant_name(family: str, isa: str) -> str:
    """``q_<family>_<isa>`` for the tuned families, ``q_conv2d`` for a generic grouped conv."""
    return "q_conv2d" if family == "grouped" else f"q_{family}_{isa}"


def permute_groups4(rows: np.ndarray) -> np.ndarray:
    """Each row's groups of four bytes as ``(0, 2, 1, 3)``, the ``K % 4`` last bytes in order.

    SXTB16 of a permuted group word gives the halfword pairs ``(w0, w1)`` and (of its rotation
    by 8) ``(w2, w3)``, which SMLAD multiplies with the im2col column's int16 pairs ``(x0, x1)``,
    ``(x2, x3)`` (kernels_q8_opt.c, ``gemm_block``).
    """
    rows = np.ascontiguousarray(rows)
    k4 = rows.shape[1] // 4 * 4
    head = rows[:, :k4].reshape(rows.shape[0], -1, 4)[:, :, [0, 2, 1, 3]].reshape(rows.shape[0], -1)
    return np.concatenate([head, rows[:, k4:]], axis=1)


def interleave_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """Rows in blocks of ``n``: per block, each group of four columns row after row (``4 n``
    bytes), then the rows' ``K % 4`` last columns row after row; the ``len % n`` last rows as
    they are. Same elements, so one pointer walks a block's ``n`` rows (kernels_q8_opt.c)."""
    rows = np.ascontiguousarray(rows)
    o, k = rows.shape
    k4, nb = k // 4 * 4, o // n * n
    blocks = rows[:nb].reshape(o // n, n, k)
    head = blocks[:, :, :k4].reshape(o // n, n, k4 // 4, 4).transpose(0, 2, 1, 3)
    parts = np.concatenate(
        [head.reshape(o // n, n * k4), blocks[:, :, k4:].reshape(o // n, n * (k - k4))], 1
    )
    return np.concatenate([parts.ravel(), rows[nb:].ravel()])


def conv_weights(w_ohwi: np.ndarray) -> np.ndarray:
    """conv / pointwise weights: OHWI rows of ``K = kh * kw * C``, :func:`permute_groups4`,
    then :func:`interleave_rows` in channel pairs (``gemm_block``)."""
    w = np.asarray(w_ohwi)
    return interleave_rows(permute_groups4(w.reshape(w.shape[0], -1)), 2)


def dense_weights(w: np.ndarray) -> np.ndarray:
    """dense weights ``(out, in)``: :func:`interleave_rows` in blocks of four rows
    (``dense_block``), each group in order (SXTB16 pairs ``(w0, w2)``, ``(w1, w3)`` meet the
    input's SXTAB16 pairs ``(x0, x2)``, ``(x1, x3)``)."""
    return interleave_rows(np.asarray(w), 4)


def depthwise_weights(w_ohwi: np.ndarray) -> np.ndarray:
    """depthwise weights ``(C, kh, kw, 1)`` as channel blocks of 4, each ``(kh * kw, 4)``, then
    the ``C % 4`` last channels ``(channel, kh * kw)``."""
    w = np.asarray(w_ohwi)
    c = w.shape[0]
    taps = w.reshape(c, -1)
    c4 = c // 4 * 4
    blocks = taps[:c4].reshape(c4 // 4, 4, taps.shape[1]).transpose(0, 2, 1).ravel()
    return np.concatenate([blocks, taps[c4:].ravel()])
