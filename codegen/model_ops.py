"""One C emitter per canonical op kind, registered in :data:`EMITTERS` (used by model_c.py).

Each handler has a ``check(op, tensors) -> reason | None`` (variants the kernels lack) and an
``emit(op, ctx) -> list[str]`` producing the kernel call(s). Layout is NCHW, batch 1, or NHWC
(TFLite; :attr:`EmitContext.layout`): conv and pools then call the ``*_nhwc`` kernels of
``kernels_nhwc.c``; every other kernel is layout-free (element-wise, or works on the row-major
view the model itself defines: pad, concat, mean, softmax, reshape).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np

from splitter.errors import UnsupportedOpError
from splitter.ir import Op, TensorSpec

ACT_CODES = {
    None: "K_ACT_NONE",
    "relu": "K_ACT_RELU",
    "relu6": "K_ACT_RELU6",
    "clip": "K_ACT_CLIP",
    "sigmoid": "K_ACT_SIGMOID",
    "tanh": "K_ACT_TANH",
    "hardswish": "K_ACT_HARDSWISH",
    "leaky_relu": "K_ACT_LEAKY",
    "hardsigmoid": "K_ACT_HARDSIGMOID",
}


FLT_MAX = 3.4028234663852886e38


#: Literals per line of a weights array, and the indent of each line.
PER_LINE = 8
INDENT = "    "
#: Per-value formats: ``%.9g`` prints a float32 with neither ``.`` nor an exponent exactly when
#: the value is integral and ``|v| < 1e9`` (Python's ``g`` rule with 9 significant digits; a
#: non-integral float32 never rounds to an integer, since 9 digits resolve ``|v| * 1e-8``, finer
#: than the float32 spacing ``|v| * 2**-24``); those get ``%.1f``, i.e. the ``N.0`` that
#: :func:`c_floats` writes.
_G, _INT = "%.9gf", "%.1ff"


def _finite_float32(values: np.ndarray) -> np.ndarray:
    """``values`` as flat float32; infinities clamp to +-FLT_MAX, NaN raises."""
    a = np.asarray(values, dtype=np.float32).ravel()
    if np.isnan(a).any():
        raise UnsupportedOpError("NaN constant in the model; fix the model")
    if not np.isfinite(a).all():
        a = np.clip(a, -FLT_MAX, FLT_MAX)
    return a


def c_float_lines(values: np.ndarray, per_line: int = PER_LINE, indent: str = INDENT) -> str:
    """The literals of :func:`c_floats`, ``", "``-separated, ``per_line`` per indented line.

    Byte-identical to ``",\\n".join(indent + ", ".join(chunk))`` over ``per_line``-chunks of
    :func:`c_floats`, but with no Python code per value: the format string (one format per
    value, picked by numpy indexing) is applied by a single C-level ``%``, which renders
    ``%.9g`` with the same correctly rounded ``PyOS_double_to_string`` as ``format(v, ".9g")``;
    so every literal is the same text and the same float32 as before.
    """
    a = _finite_float32(values)
    n = int(a.size)
    if n == 0:
        return ""
    brk = ",\n" + indent.replace("%", "%%")
    variants = np.array([_G + ", ", _INT + ", ", _G + brk, _INT + brk], dtype=object)
    code = ((a == np.trunc(a)) & (np.abs(a) < 1e9)).astype(np.intp)
    code[per_line - 1 :: per_line] += 2
    fmts: list[str] = variants[code].tolist()
    fmts[-1] = fmts[-1][: len(_G)]  # no separator after the last value
    return indent + "".join(fmts) % tuple(a.tolist())


def c_floats(values: np.ndarray) -> list[str]:
    """C float literals that round-trip float32 (``%.9g``); infinities clamp to +-FLT_MAX.

    NaN is refused (:class:`UnsupportedOpError`): a model constant should never be NaN.
    The reference formatting (one f-string per value); :func:`c_float_lines` is the fast path.
    """
    a = _finite_float32(values)
    out = []
    for v in a.tolist():
        s = f"{v:.9g}"
        out.append(s + "f" if "." in s or "e" in s else s + ".0f")
    return out


def c_float(value: float) -> str:
    """One C float literal, as :func:`c_floats`."""
    return c_floats(np.array([value]))[0]


_fmt = c_float


#: C element type of each weights dtype the kernels read.
C_TYPES = {"float32": "float", "int8": "int8_t", "int32": "int32_t"}


@dataclass
class WeightTable:
    """The ``const`` arrays of one device, in emission order; ``nbytes`` = FLASH total.

    float32 arrays (every float model) plus, for int8 models, int8 weights and int32 biases /
    requantisation multipliers and shifts.
    """

    arrays: list[tuple[str, np.ndarray]] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)

    @property
    def nbytes(self) -> int:
        """Sum of the emitted arrays' bytes (``size * itemsize``, no padding)."""
        return sum(int(a.nbytes) for _, a in self.arrays)

    def add(self, hint: str, values: np.ndarray, dtype: type = np.float32) -> str:
        """Register an array (flattened, as ``dtype``) and return its C name."""
        base = "w_" + "".join(ch if ch.isalnum() else "_" for ch in hint)
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        arr = np.asarray(values)
        if dtype is not np.float32 and not np.array_equal(arr.astype(dtype), arr):
            raise UnsupportedOpError(f"{hint}: values do not fit {np.dtype(dtype).name}")
        self.arrays.append((name, np.ascontiguousarray(arr, dtype=dtype).ravel()))
        return name

    def render(self) -> str:
        """C definitions of every array, :data:`PER_LINE` values per line."""
        out = []
        for name, a in self.arrays:
            ctype = C_TYPES[a.dtype.name]
            lines = c_float_lines(a) if a.dtype == np.float32 else c_int_lines(a)
            out.append(f"static const {ctype} {name}[{a.size}] WEIGHTS = {{\n{lines}\n}};\n")
        return "\n".join(out)


def c_int_lines(values: np.ndarray, per_line: int = 16, indent: str = INDENT) -> str:
    """Integer literals, ``per_line`` per indented line (INT32_MIN written as an expression)."""
    vals = [str(v) if v != -(2**31) else "(-2147483647 - 1)" for v in values.tolist()]
    rows = [", ".join(vals[i : i + per_line]) for i in range(0, len(vals), per_line)]
    return ",\n".join(indent + r for r in rows)


@dataclass
class EmitContext:
    """Offsets (bytes) of the layer's tensors, the graph's tensor specs and the weight table."""

    offsets: Mapping[str, int]
    tensors: Mapping[str, TensorSpec]
    weights: WeightTable
    #: the graph's layout: ``"NCHW"`` (ONNX) or ``"NHWC"`` (TFLite, the ``*_nhwc`` kernels)
    layout: str = "NCHW"

    def ptr(self, name: str) -> str:
        """``A + <float offset>`` of activation ``name``."""
        return f"A + {self.offsets[name] // 4}"

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of activation ``name``."""
        return tuple(self.tensors[name].shape)

    def const(self, op: Op, key: str, values: np.ndarray | None = None) -> str:
        """Emit ``op.weights[key]`` (or the given repacked ``values``) and return its C name."""
        arr = op.weights[key] if values is None else values
        return self.weights.add(f"{op.name}_{key}", arr)


def pack4(w2d: np.ndarray) -> np.ndarray:
    """Rows in blocks of 4 interleaved: block b holds ``w[4b + r, k]`` at ``(b*K + k)*4 + r``.

    The ``O % 4`` last rows stay row-major; same number of elements (no padding). This is the
    layout ``conv_pointwise``/``conv_blocked``/``k_dense`` in kernels.c read.
    """
    o, k = w2d.shape
    nb = o // 4
    blocks = w2d[: nb * 4].reshape(nb, 4, k).transpose(0, 2, 1).ravel()
    return np.concatenate([blocks, w2d[nb * 4 :].ravel()]).astype(np.float32)


def act_args(op: Op) -> str:
    """``act, p0, p1`` arguments of a fused activation."""
    act = op.attr("act")
    p0, p1 = 0.0, 0.0
    if act == "clip":
        p0, p1 = op.attr("act_min", float("-inf")), op.attr("act_max", float("inf"))
    elif act == "leaky_relu":
        p0 = op.attr("alpha", 0.01)
    elif act == "hardsigmoid":
        p0, p1 = op.attr("alpha", 0.2), op.attr("beta", 0.5)
    return f"{ACT_CODES[act]}, {_fmt(p0)}, {_fmt(p1)}"


def _ints(values: Sequence[int]) -> str:
    return ", ".join(str(int(v)) for v in values)


def _pad4(shape: Sequence[int]) -> list[int]:
    return [1] * (4 - len(shape)) + [int(d) for d in shape]


def _rank4_or_less(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for name in (*op.inputs, *op.outputs):
        if name in tensors and len(tensors[name].shape) > 4:
            return f"tensor {name} has rank {len(tensors[name].shape)} > 4"
    return None


def _nchw(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for name in (op.inputs[0], op.outputs[0]):
        shape = tensors[name].shape
        if len(shape) != 4 or shape[0] != 1:
            return f"tensor {name} shape {shape} is not NCHW with batch 1"
    return None


def _act_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if op.attr("act") not in ACT_CODES:
        return f"fused activation {op.attr('act')!r}"
    return None


def _float_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for key, w in op.weights.items():
        if np.asarray(w).dtype != np.float32:
            return f"weights {key} are {np.asarray(w).dtype} (float32 kernels only)"
    return None


# ------------------------------------------------------------------------ handlers ----


def _emit_conv(op: Op, ctx: EmitContext) -> list[str]:
    if ctx.layout == "NHWC":
        return _emit_conv_nhwc(op, ctx)
    x, y = op.inputs[0], op.outputs[0]
    _, c, h, w = ctx.shape(x)
    _, o, oh, ow = ctx.shape(y)
    wt = np.asarray(op.weights["W"], dtype=np.float32)
    kh, kw = wt.shape[2], wt.shape[3]
    groups = int(op.attr("groups", 1))
    packed = pack4(wt.reshape(o, -1)) if groups == 1 else wt
    wn = ctx.const(op, "W", packed)
    bn = ctx.const(op, "B") if "B" in op.weights else "0"
    sh, sw = op.attr("strides", (1, 1))
    pads = op.attr("pads", (0, 0, 0, 0))
    dh, dw = op.attr("dilations", (1, 1))
    return [
        f"k_conv2d({ctx.ptr(x)}, {c}, {h}, {w}, {wn}, {bn}, {ctx.ptr(y)}, {o}, {oh}, {ow}, "
        f"{kh}, {kw}, {sh}, {sw}, {pads[0]}, {pads[1]}, {dh}, {dw}, {groups}, {act_args(op)});"
    ]


def _conv_geometry(op: Op) -> str:
    """``kh, kw, sh, sw, pt, pl, dh, dw, groups`` arguments of a convolution."""
    kh, kw = np.asarray(op.weights["W"]).shape[2:]
    sh, sw = op.attr("strides", (1, 1))
    pads = op.attr("pads", (0, 0, 0, 0))
    dh, dw = op.attr("dilations", (1, 1))
    return _ints((kh, kw, sh, sw, pads[0], pads[1], dh, dw, int(op.attr("groups", 1))))


def ohwi(w: np.ndarray) -> np.ndarray:
    """Canonical conv weights ``(O, C/groups, kh, kw)`` as TFLite's ``(O, kh, kw, C/groups)``.

    ``ohwi(w)[o, ky, kx, c] = w[o, c, ky, kx]``: the order ``k_conv2d_nhwc`` reads, so the
    innermost loop runs over contiguous input channels; same element count (FLASH unchanged).
    """
    return np.ascontiguousarray(np.asarray(w).transpose(0, 2, 3, 1))


def _emit_conv_nhwc(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, o = ctx.shape(y)
    wn = ctx.const(op, "W", ohwi(np.asarray(op.weights["W"], dtype=np.float32)))
    bn = ctx.const(op, "B") if "B" in op.weights else "0"
    return [
        f"k_conv2d_nhwc({ctx.ptr(x)}, {h}, {w}, {c}, {wn}, {bn}, {ctx.ptr(y)}, {oh}, {ow}, {o}, "
        f"{_conv_geometry(op)}, {act_args(op)});"
    ]


def _check_conv(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 4:
        return "conv2d needs constant 4-D weights W"
    return _nchw(op, tensors)


def _emit_dense(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    wt = np.asarray(op.weights["W"], dtype=np.float32)
    out, inn = wt.shape
    wn = ctx.const(op, "W", pack4(wt))
    bn = ctx.const(op, "B") if "B" in op.weights else "0"
    return [f"k_dense({ctx.ptr(x)}, {inn}, {wn}, {bn}, {ctx.ptr(y)}, {out}, {act_args(op)});"]


def _check_dense(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 2:
        return "dense needs constant 2-D weights W (out, in)"
    if tensors[op.inputs[0]].size != np.asarray(op.weights["W"]).shape[1]:
        return "dense input size differs from W's in dimension"
    return None


def _emit_matmul(op: Op, ctx: EmitContext) -> list[str]:
    a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
    m, k = ctx.shape(a)[-2:]
    n = ctx.shape(b)[-1]
    return [f"k_matmul({ctx.ptr(a)}, {ctx.ptr(b)}, {ctx.ptr(y)}, {m}, {k}, {n}, {act_args(op)});"]


def _check_matmul(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if len(op.inputs) != 2:
        return "matmul needs two activation operands (a constant one is a dense op)"
    for name in op.inputs:
        shape = tensors[name].shape
        if len(shape) < 2 or prod(shape[:-2]) != 1:
            return f"batched matmul operand {name} {shape}"
    return None


def _pool_geometry(op: Op, ctx: EmitContext) -> tuple[str, str]:
    x, y = op.inputs[0], op.outputs[0]
    _, c, h, w = ctx.shape(x)
    _, _, oh, ow = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    return (
        f"{ctx.ptr(x)}, {c}, {h}, {w}, {ctx.ptr(y)}, {oh}, {ow}, {kh}, {kw}, {sh}, {sw}",
        _ints(op.attr("pads", (0, 0, 0, 0))),
    )


def _pool_geometry_nhwc(op: Op, ctx: EmitContext) -> str:
    """``x, H, W, C, y, OH, OW, kh, kw, sh, sw`` arguments of an NHWC pool."""
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, _ = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    return f"{ctx.ptr(x)}, {h}, {w}, {c}, {ctx.ptr(y)}, {oh}, {ow}, {_ints((kh, kw, sh, sw))}"


def _emit_maxpool(op: Op, ctx: EmitContext) -> list[str]:
    if ctx.layout == "NHWC":
        pt, pl = op.attr("pads", (0, 0, 0, 0))[:2]
        geo = _pool_geometry_nhwc(op, ctx)
        return [f"k_maxpool_nhwc({geo}, {pt}, {pl}, {act_args(op)});"]
    geo, pads = _pool_geometry(op, ctx)
    pt, pl = pads.split(", ")[:2]
    return [f"k_maxpool({geo}, {pt}, {pl}, {act_args(op)});"]


def _emit_avgpool(op: Op, ctx: EmitContext) -> list[str]:
    cip = 1 if op.attr("count_include_pad", 0) else 0
    if ctx.layout == "NHWC":
        pads = _ints(op.attr("pads", (0, 0, 0, 0)))
        geo = _pool_geometry_nhwc(op, ctx)
        return [f"k_avgpool_nhwc({geo}, {pads}, {cip}, {act_args(op)});"]
    geo, pads = _pool_geometry(op, ctx)
    pt, pl, pb, pr = pads.split(", ")
    return [f"k_avgpool({geo}, {pt}, {pl}, {pb}, {pr}, {cip}, {act_args(op)});"]


def _emit_global_avgpool(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    return [
        f"k_mean({ctx.ptr(x)}, {prod(shape[:2])}, {prod(shape[2:])}, 1, {ctx.ptr(y)}, "
        f"{act_args(op)});"
    ]


def _mean_axes(op: Op, tensors: Mapping[str, TensorSpec]) -> list[int]:
    rank = len(tensors[op.inputs[0]].shape)
    return sorted(int(a) % rank for a in op.attr("axes", range(rank)))


def _check_mean(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    axes = _mean_axes(op, tensors)
    if axes != list(range(axes[0], axes[-1] + 1)):
        return f"mean over non-contiguous axes {axes}"
    return None


def _emit_mean(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    axes = _mean_axes(op, ctx.tensors)
    outer, red = prod(shape[: axes[0]]), prod(shape[axes[0] : axes[-1] + 1])
    inner = prod(shape[axes[-1] + 1 :])
    return [f"k_mean({ctx.ptr(x)}, {outer}, {red}, {inner}, {ctx.ptr(y)}, {act_args(op)});"]


def _bcast_strides(shape: Sequence[int], out: Sequence[int]) -> list[int]:
    """Element strides of ``shape`` broadcast to rank-4 ``out`` (0 on broadcast axes)."""
    s = _pad4(shape)
    strides, acc = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        strides[d] = 0 if s[d] == 1 and out[d] != 1 else acc
        acc *= s[d]
    return strides


def _binary_operands(op: Op, ctx: EmitContext) -> list[tuple[str, tuple[int, ...]]]:
    """(C pointer, shape) of both operands in order; a constant is weights['C']."""
    acts = [(ctx.ptr(n), ctx.shape(n)) for n in op.inputs]
    if len(acts) == 2:
        return acts
    cval = np.asarray(op.weights["C"], dtype=np.float32)
    const = (ctx.const(op, "C"), tuple(int(d) for d in cval.shape))
    return [const, acts[0]] if op.attr("const_first", False) else [acts[0], const]


def _emit_binary(op: Op, ctx: EmitContext) -> list[str]:
    y = op.outputs[0]
    ys = _pad4(ctx.shape(y))
    (a, ash), (b, bsh) = _binary_operands(op, ctx)
    code = {"add": "K_ADD", "sub": "K_SUB", "mul": "K_MUL", "div": "K_DIV"}[op.kind]
    return [
        "{",
        f"    static const int as[4] = {{{_ints(_bcast_strides(ash, ys))}}};",
        f"    static const int bs[4] = {{{_ints(_bcast_strides(bsh, ys))}}};",
        f"    static const int ys[4] = {{{_ints(ys)}}};",
        f"    k_binary({code}, {a}, as, {b}, bs, {ctx.ptr(y)}, ys, {act_args(op)});",
        "}",
    ]


def _check_binary(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if len(op.inputs) == 1 and "C" not in op.weights:
        return "one activation operand and no constant weights['C']"
    if "C" in op.weights and np.asarray(op.weights["C"]).ndim > 4:
        return "constant operand of rank > 4"
    return _rank4_or_less(op, tensors)


def _emit_concat(op: Op, ctx: EmitContext) -> list[str]:
    y = op.outputs[0]
    ys = ctx.shape(y)
    axis = int(op.attr("axis", 1)) % len(ys)
    outer, ytot, lines, yoff = prod(ys[:axis]), prod(ys[axis:]), [], 0
    for name in op.inputs:
        xn = prod(ctx.shape(name)[axis:])
        lines.append(
            f"k_concat_part({ctx.ptr(name)}, {outer}, {xn}, {ctx.ptr(y)}, {ytot}, {yoff});"
        )
        yoff += xn
    return lines


def _emit_unary(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    code = ACT_CODES[op.kind]
    p0, p1 = 0.0, 0.0
    if op.kind == "clip":
        p0, p1 = op.attr("act_min", float("-inf")), op.attr("act_max", float("inf"))
    elif op.kind == "leaky_relu":
        p0 = op.attr("alpha", 0.01)
    elif op.kind == "hardsigmoid":
        p0, p1 = op.attr("alpha", 0.2), op.attr("beta", 0.5)
    n = ctx.tensors[x].size
    return [f"k_act({ctx.ptr(x)}, {ctx.ptr(y)}, {n}, {code}, {_fmt(p0)}, {_fmt(p1)});"]


def _emit_softmax(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    axis = int(op.attr("axis", -1)) % len(shape)
    outer, n, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :])
    return [f"k_softmax({ctx.ptr(x)}, {outer}, {n}, {inner}, {ctx.ptr(y)});"]


def _check_softmax(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if float(op.attr("beta", 1.0)) != 1.0:
        return f"softmax beta {op.attr('beta')} (beta 1 only)"
    return None


def _emit_batchnorm(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    c, hw = shape[1], prod(shape[2:])
    sc, sh = ctx.const(op, "scale"), ctx.const(op, "shift")
    lines = [f"k_batchnorm({ctx.ptr(x)}, {c}, {hw}, {sc}, {sh}, {ctx.ptr(y)});"]
    if op.attr("act") is not None:  # a fused activation, applied in place
        lines.append(f"k_act({ctx.ptr(y)}, {ctx.ptr(y)}, {prod(shape)}, {act_args(op)});")
    return lines


def _check_batchnorm(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if "scale" not in op.weights or "shift" not in op.weights:
        return "batchnorm needs weights scale and shift"
    if len(tensors[op.inputs[0]].shape) < 2:
        return "batchnorm input without a channel axis"
    return None


def _emit_pad(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    rank = len(ctx.shape(x))
    begins = [0] * (4 - rank) + [int(p) for p in op.attr("pads")[:rank]]
    return [
        "{",
        f"    static const int xs[4] = {{{_ints(_pad4(ctx.shape(x)))}}};",
        f"    static const int ys[4] = {{{_ints(_pad4(ctx.shape(y)))}}};",
        f"    static const int bg[4] = {{{_ints(begins)}}};",
        f"    k_pad({ctx.ptr(x)}, xs, {ctx.ptr(y)}, ys, bg, {_fmt(op.attr('value', 0.0))});",
        "}",
    ]


def _check_pad(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if any(int(p) < 0 for p in op.attr("pads", ())):
        return "negative pads (cropping)"
    if op.attr("mode", "constant") != "constant":
        return f"pad mode {op.attr('mode')!r} (constant only)"
    return _rank4_or_less(op, tensors)


def _emit_transpose(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    xs = _pad4(ctx.shape(x))
    k = 4 - len(ctx.shape(x))
    perm = list(range(k)) + [int(p) + k for p in op.attr("perm")]
    xstrides = [prod(xs[d + 1 :]) for d in range(4)]
    return [
        "{",
        f"    static const int ys[4] = {{{_ints(_pad4(ctx.shape(y)))}}};",
        f"    static const int xst[4] = {{{_ints([xstrides[p] for p in perm])}}};",
        f"    k_transpose({ctx.ptr(x)}, {ctx.ptr(y)}, ys, xst);",
        "}",
    ]


def _emit_reshape(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    if ctx.offsets[x] == ctx.offsets[y]:
        return [f"/* {op.name}: reshape, zero-copy */"]
    return [f"k_copy({ctx.ptr(x)}, {ctx.ptr(y)}, {ctx.tensors[x].size}); /* {op.name}: reshape */"]


Check = Callable[[Op, Mapping[str, TensorSpec]], "str | None"]
Emit = Callable[[Op, EmitContext], list[str]]


@dataclass(frozen=True)
class Handler:
    """How one canonical op kind is checked and emitted."""

    emit: Emit
    checks: tuple[Check, ...] = ()


_UNARY = ("relu", "relu6", "clip", "leaky_relu", "sigmoid", "tanh", "hardswish", "hardsigmoid")

#: Canonical op kind -> handler (kinds absent here, e.g. quantize, are unsupported).
EMITTERS: Mapping[str, Handler] = {
    "conv2d": Handler(_emit_conv, (_check_conv, _act_ok)),
    "dense": Handler(_emit_dense, (_check_dense, _act_ok)),
    "matmul": Handler(_emit_matmul, (_check_matmul, _act_ok)),
    "maxpool": Handler(_emit_maxpool, (_nchw, _act_ok)),
    "avgpool": Handler(_emit_avgpool, (_nchw, _act_ok)),
    "global_avgpool": Handler(_emit_global_avgpool, (_act_ok,)),
    "mean": Handler(_emit_mean, (_check_mean, _act_ok)),
    **{k: Handler(_emit_binary, (_check_binary, _act_ok)) for k in ("add", "sub", "mul", "div")},
    "concat": Handler(_emit_concat, ()),
    **{k: Handler(_emit_unary, ()) for k in _UNARY},
    "softmax": Handler(_emit_softmax, (_check_softmax,)),
    "batchnorm": Handler(_emit_batchnorm, (_check_batchnorm, _act_ok)),
    "pad": Handler(_emit_pad, (_check_pad,)),
    "reshape": Handler(_emit_reshape, ()),
    "transpose": Handler(_emit_transpose, (_rank4_or_less,)),
}


def check(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Why the kernels cannot run ``op`` (``None`` when they can)."""
    handler = EMITTERS.get(op.kind)
    if handler is None:
        return "no float32 kernel for this op kind"
    for chk in (_float_weights, *handler.checks):
        reason = chk(op, tensors)
        if reason:
            return reason
    return None


def emit(op: Op, ctx: EmitContext) -> list[str]:
    """The C statements running ``op`` with its tensors at ``ctx.offsets``."""
    return [f"/* {op.name}: {op.kind} */", *EMITTERS[op.kind].emit(op, ctx)]
