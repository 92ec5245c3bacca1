"""Helpers shared by the TFLite tests (no tests here): LiteRT access, a NumPy reference of the
canonical ops, and in-place flatbuffer edits used to build bad inputs from real converter models."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import tflite

from splitter.ir import Op

MODELS = Path(__file__).resolve().parent.parent / "models"
TFLITE_MODELS = sorted(MODELS.glob("*.tflite"))


def interpreter(
    source: Path | bytes, *, resize: dict[int, list[int]] | None = None, allocate: bool = True
) -> Any:
    """A LiteRT interpreter keeping every intermediate tensor, tensors allocated unless
    ``allocate`` is false (LiteRT's FULLY_CONNECTED prepare expands a per-tensor weight scale to
    one scale per output channel in place, so the file's parameters are read before that)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kwargs: dict[str, Any] = {
        "experimental_preserve_all_tensors": True,
        # TFLite's builtin kernels, no XNNPACK: they check every option (XNNPACK skips some)
        "experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(source, Path):
            it = Interpreter(model_path=str(source), **kwargs)
        else:
            it = Interpreter(model_content=source, **kwargs)
    for index, shape in (resize or {}).items():
        it.resize_tensor_input(index, shape)
    if allocate:
        it.allocate_tensors()
    return it


def run_seeded(it: Any, seed: int = 0) -> None:
    """Fill every input with seeded random data (int types over their full range) and invoke."""
    rng = np.random.default_rng(seed)
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            x = rng.standard_normal(d["shape"]).astype(dt)
        else:
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max, size=d["shape"], endpoint=True).astype(dt)
        it.set_tensor(d["index"], x)
    it.invoke()


# --- NumPy reference of canonical NHWC ops (float) ----------------------------------------------


def apply_act(y: np.ndarray, op: Op) -> np.ndarray:
    """The fused activation ``op.attrs["act"]``."""
    act = op.attr("act")
    if act == "relu":
        return np.maximum(y, 0)
    if act == "relu6":
        return np.clip(y, 0, 6)
    if act == "clip":
        return np.clip(y, op.attr("act_min"), op.attr("act_max"))
    if act == "tanh":
        return np.tanh(y)
    assert act is None, act
    return y


def _pad_hw(x: np.ndarray, pads: tuple[int, int, int, int], value: float) -> np.ndarray:
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=value)


def _windows(x: np.ndarray, op: Op) -> list[tuple[int, int, np.ndarray]]:
    """``(i, j, x[:, i*d : ..., j*d : ..., :])`` strided slices, one per kernel tap."""
    (kh, kw), (sh, sw) = op.attr("kernel"), op.attr("strides")
    dh, dw = op.attr("dilations", (1, 1))
    oh = (x.shape[1] - ((kh - 1) * dh + 1)) // sh + 1
    ow = (x.shape[2] - ((kw - 1) * dw + 1)) // sw + 1
    rows = [slice(i * dh, i * dh + sh * (oh - 1) + 1, sh) for i in range(kh)]
    cols = [slice(j * dw, j * dw + sw * (ow - 1) + 1, sw) for j in range(kw)]
    return [(i, j, x[:, rows[i], cols[j]]) for i in range(kh) for j in range(kw)]


def conv2d(x: np.ndarray, op: Op, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """NHWC conv with canonical ``W (O, I/groups, kh, kw)``, explicit pads and groups."""
    g = op.attr("groups")
    o_per, i_per = w.shape[0] // g, w.shape[1]
    taps = _windows(_pad_hw(x, op.attr("pads"), 0.0), op)
    y = np.zeros((*taps[0][2].shape[:3], w.shape[0]))
    for gi in range(g):
        cin, cout = slice(gi * i_per, (gi + 1) * i_per), slice(gi * o_per, (gi + 1) * o_per)
        for i, j, xs in taps:
            y[..., cout] += xs[..., cin] @ w[cout, :, i, j].T
    return y + (b if b is not None else 0)


def pool(x: np.ndarray, op: Op) -> np.ndarray:
    """Max pool, or average over the in-bounds taps only (TFLite's AVERAGE_POOL_2D)."""
    taps = np.stack([xs for _, _, xs in _windows(_pad_hw(x, op.attr("pads"), np.nan), op)])
    return np.nanmax(taps, axis=0) if op.kind == "maxpool" else np.nanmean(taps, axis=0)


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
}


def reference(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    """Output of canonical float ``op`` on inputs ``xs`` (NumPy, float64)."""
    x = xs[0].astype(np.float64)
    w = {k: v.astype(np.float64) for k, v in op.weights.items()}
    k = op.kind
    if k == "conv2d":
        y = conv2d(x, op, w["W"], w.get("B"))
    elif k == "dense":
        y = x.reshape(-1, w["W"].shape[1]) @ w["W"].T + w.get("B", 0)
    elif k in ("maxpool", "avgpool"):
        y = pool(x, op)
    elif k == "mean":
        y = x.mean(axis=op.attr("axes"), keepdims=op.attr("keepdims"))
    elif k in BINARY:
        a, b = (
            (x, xs[1]) if len(xs) > 1 else ((w["C"], x) if op.attr("const_first") else (x, w["C"]))
        )
        y = BINARY[k](a, b)
    elif k == "transpose":
        y = x.transpose(op.attr("perm"))
    elif k == "concat":
        y = np.concatenate(xs, axis=op.attr("axis"))
    elif k == "pad":
        p = op.attr("pads")
        n = len(p) // 2
        y = np.pad(x, list(zip(p[:n], p[n:], strict=True)), constant_values=op.attr("value"))
    else:
        y = _elementwise(op, x)
    return apply_act(y, op)


def _elementwise(op: Op, x: np.ndarray) -> np.ndarray:
    k = op.kind
    if k == "reshape":
        return x.reshape(op.attr("shape"))
    if k == "softmax":
        e = np.exp(op.attr("beta") * (x - x.max(axis=op.attr("axis"), keepdims=True)))
        return e / e.sum(axis=op.attr("axis"), keepdims=True)
    funcs: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "relu": lambda v: np.maximum(v, 0),
        "relu6": lambda v: np.clip(v, 0, 6),
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "tanh": np.tanh,
        "hardswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
        "leaky_relu": lambda v: np.where(v > 0, v, op.attr("alpha") * v),
        "clip": lambda v: np.clip(v, op.attr("act_min"), op.attr("act_max")),
    }
    return funcs[k](x)


# --- flatbuffer edits -----------------------------------------------------------------------------


def set_opcode(buf: bytearray, opcode_index: int, code: int) -> None:
    """Rewrite operator code ``opcode_index`` to builtin ``code`` in place (both the deprecated
    int8 field, vtable slot 4, and the int32 field, slot 10, of ``OperatorCode``)."""
    model = tflite.Model.GetRootAs(bytes(buf), 0)
    tab = model.OperatorCodes(opcode_index)._tab
    for slot, fmt in ((4, "<b"), (10, "<i")):
        o = tab.Offset(slot)
        assert o, f"field at vtable slot {slot} absent; cannot edit in place"
        struct.pack_into(fmt, buf, tab.Pos + o, min(code, 127) if fmt == "<b" else code)


def opcode_index_of(buf: bytes, builtin: str) -> int:
    """Index in ``operator_codes`` of the builtin operator ``builtin``."""
    from tflite.utils import BUILTIN_OPCODE2NAME

    model = tflite.Model.GetRootAs(buf, 0)
    for i in range(model.OperatorCodesLength()):
        c = model.OperatorCodes(i)
        if BUILTIN_OPCODE2NAME[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())] == builtin:
            return i
    raise LookupError(builtin)


def set_shape_signature(buf: bytearray, tensor_index: int, dim: int, value: int) -> None:
    """Overwrite element ``dim`` of tensor ``tensor_index``'s ``shape_signature`` in place."""
    t = tflite.Model.GetRootAs(bytes(buf), 0).Subgraphs(0).Tensors(tensor_index)
    o = t._tab.Offset(18)  # Tensor.shape_signature
    assert o and t.ShapeSignatureLength() > dim
    struct.pack_into("<i", buf, t._tab.Vector(o) + 4 * dim, value)


# --- building small models with the tflite flatbuffer builders -----------------------------------


@dataclass(frozen=True)
class TensorDef:
    """A tensor of a hand-built model; ``data`` makes it a constant."""

    name: str
    shape: tuple[int, ...]
    data: np.ndarray | None = None
    signature: tuple[int, ...] | None = None


@dataclass(frozen=True)
class OpDef:
    """An operator of a hand-built model: builtin code, tensor indices, options."""

    code: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options_type: int = 0
    options: Callable[[flatbuffers.Builder], int] | None = None


_TYPES = {"float32": 0, "float16": 1, "int32": 2, "int64": 4, "complex64": 8, "int8": 9}


def _int_vector(b: flatbuffers.Builder, values: tuple[int, ...]) -> int:
    return int(b.CreateNumpyVector(np.asarray(values, dtype=np.int32)))


def _offsets_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return int(b.EndVector())


def _tensor(b: flatbuffers.Builder, t: TensorDef, buffer: int) -> int:
    name = b.CreateString(t.name)
    shape = _int_vector(b, t.shape)
    sig = _int_vector(b, t.signature) if t.signature else None
    dtype = _TYPES[str(t.data.dtype)] if t.data is not None else 0
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, dtype)
    tflite.TensorAddBuffer(b, buffer)
    tflite.TensorAddName(b, name)
    if sig is not None:
        tflite.TensorAddShapeSignature(b, sig)
    return int(tflite.TensorEnd(b))


def _buffer(b: flatbuffers.Builder, data: np.ndarray | None) -> int:
    vec = None
    if data is not None:
        vec = b.CreateNumpyVector(np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8))
    tflite.BufferStart(b)
    if vec is not None:
        tflite.BufferAddData(b, vec)
    return int(tflite.BufferEnd(b))


def _operator(b: flatbuffers.Builder, op: OpDef, opcode_index: int) -> int:
    ins, outs = _int_vector(b, op.inputs), _int_vector(b, op.outputs)
    opts = op.options(b) if op.options else None
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, opcode_index)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    if opts is not None:
        tflite.OperatorAddBuiltinOptionsType(b, op.options_type)
        tflite.OperatorAddBuiltinOptions(b, opts)
    return int(tflite.OperatorEnd(b))


def _opcode(b: flatbuffers.Builder, code: int) -> int:
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    return int(tflite.OperatorCodeEnd(b))


def build_model(
    tensors: list[TensorDef], ops: list[OpDef], inputs: tuple[int, ...], outputs: tuple[int, ...]
) -> bytes:
    """A schema-v3 TFLite flatbuffer (one subgraph, float32) built with the ``tflite`` builders;
    buffer 0 is the empty sentinel, each constant gets its own buffer."""
    b = flatbuffers.Builder(1024)
    consts = [t.data for t in tensors if t.data is not None]
    buffers = [_buffer(b, None)] + [_buffer(b, d) for d in consts]
    t_offs, k = [], 0
    for t in tensors:
        k += t.data is not None
        t_offs.append(_tensor(b, t, k if t.data is not None else 0))
    codes = sorted({op.code for op in ops})
    op_offs = [_operator(b, op, codes.index(op.code)) for op in ops]
    t_vec, op_vec = _offsets_vector(b, t_offs), _offsets_vector(b, op_offs)
    in_vec, out_vec, name = _int_vector(b, inputs), _int_vector(b, outputs), b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, t_vec)
    tflite.SubGraphAddInputs(b, in_vec)
    tflite.SubGraphAddOutputs(b, out_vec)
    tflite.SubGraphAddOperators(b, op_vec)
    tflite.SubGraphAddName(b, name)
    sg = tflite.SubGraphEnd(b)
    code_vec = _offsets_vector(b, [_opcode(b, c) for c in codes])
    sg_vec, buf_vec = _offsets_vector(b, [sg]), _offsets_vector(b, buffers)
    desc = b.CreateString("built by tests/test_tflite_support.py")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, code_vec)
    tflite.ModelAddSubgraphs(b, sg_vec)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, buf_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())
