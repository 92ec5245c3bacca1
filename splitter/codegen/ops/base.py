"""The base of every op class: the emit context, the shared checks and the dispatch.

An op class is one small class per canonical op kind (as the ONNX reference evaluator's
``OpRun``) holding everything splitter knows about the kind: its :attr:`OpKind.definition`
(:class:`~splitter.codegen.ops.opdef.OpDef`: attributes, source operators, kernel variants),
its output shape (:meth:`OpKind.infer_shape`), MACs (:meth:`OpKind.macs`, the convention of
:mod:`splitter.codegen.ops.formulas`), kernel scratch (:meth:`OpKind.scratch_bytes`) and its C
code: it overrides :meth:`OpKind.emit_float` and / or :meth:`OpKind.emit_int8` and lists the
variant checks each needs in :attr:`OpKind.float_checks` / :attr:`OpKind.int8_checks`. The base
picks the path (int8 when any activation of the op is int8, :func:`is_quantised`), runs the
checks every op of that path needs first (float32 weights; per-tensor int8 quantisation), and
writes the ``/* name: kind */`` header. ``tests/test_ops_table.py`` checks that a class
overrides exactly the paths its ``definition`` claims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from splitter.codegen.escape import c_comment
from splitter.codegen.ops.formulas import Shape
from splitter.codegen.ops.literals import WeightTable, c_float
from splitter.codegen.ops.opdef import Kernel, OpDef
from splitter.ir import Graph, Op, TensorSpec

#: ``check(op, tensors) -> reason | None``: why a kernel cannot run ``op`` (``None``: it can).
Check = Callable[[Op, Mapping[str, TensorSpec]], "str | None"]

#: Fused-activation codes of ``kernels.h`` (``K_ACT_*``); keys are splitter.ops.ACTIVATIONS.
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
    "erf": "K_ACT_ERF",
    "gelu": "K_ACT_GELU",
    "gelu_tanh": "K_ACT_GELU_TANH",
}


@dataclass
class EmitContext:
    """Offsets (bytes) of the layer's tensors, the graph's tensor specs and the weight table."""

    offsets: Mapping[str, int]
    tensors: Mapping[str, TensorSpec]
    weights: WeightTable
    #: the graph's layout: ``"NCHW"`` (ONNX) or ``"NHWC"`` (TFLite, the ``*_nhwc`` kernels)
    layout: str = "NCHW"
    #: the int8 kernels' ISA variant for the device's core (splitter/codegen/ops/q8_variants.py):
    #: ``"dsp"`` (Armv7E-M DSP extension) or ``"plain"`` (Cortex-M0+)
    isa: str = "dsp"

    def ptr(self, name: str) -> str:
        """``A + <float offset>`` of float activation ``name``."""
        return f"A + {self.offsets[name] // 4}"

    def p8(self, name: str) -> str:
        """``(int8_t *)(A8 + <byte offset>)`` of int8 activation ``name``."""
        return f"(int8_t *)(A8 + {self.offsets[name]})"

    def pvoid(self, name: str) -> str:
        """``(void *)(A8 + <byte offset>)`` of a float activation (any alignment)."""
        return f"(void *)(A8 + {self.offsets[name]})"

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of activation ``name``."""
        return tuple(self.tensors[name].shape)

    def const(self, op: Op, key: str, values: np.ndarray | None = None) -> str:
        """Emit ``op.weights[key]`` (or the given repacked ``values``) and return its C name."""
        arr = op.weights[key] if values is None else values
        return self.weights.add(f"{op.name}_{key}", arr)


def is_quantised(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """True when any activation of ``op`` is int8 (the op runs on the int8 kernels)."""
    return any(tensors[n].dtype == "int8" for n in (*op.inputs, *op.outputs) if n in tensors)


# ------------------------------------------------------------------ shared formatting ----


def ints(values: Sequence[int]) -> str:
    """``"a, b, c"`` of integers."""
    return ", ".join(str(int(v)) for v in values)


def pad4(shape: Sequence[int]) -> list[int]:
    """``shape`` left-padded with 1 to rank 4."""
    return [1] * (4 - len(shape)) + [int(d) for d in shape]


def act_params(op: Op, act: str | None) -> tuple[float, float]:
    """``(p0, p1)`` of activation ``act``: clip bounds, leaky alpha, hardsigmoid alpha / beta."""
    if act == "clip":
        return op.attr("act_min", float("-inf")), op.attr("act_max", float("inf"))
    if act == "leaky_relu":
        return op.attr("alpha", 0.01), 0.0
    if act == "hardsigmoid":
        return op.attr("alpha", 0.2), op.attr("beta", 0.5)
    return 0.0, 0.0


def act_args(op: Op) -> str:
    """``act, p0, p1`` arguments of a fused activation."""
    act = op.attr("act")
    p0, p1 = act_params(op, act)
    return f"{ACT_CODES[act]}, {c_float(p0)}, {c_float(p1)}"


def record(ctype: str, name: str, rows: Sequence[Sequence[tuple[str, object]]]) -> list[str]:
    """A ``static const`` parameter record (in flash), one row of designated fields a line."""
    lines = [f"static const {ctype} {name} = {{"]
    lines += ["    " + ", ".join(f".{k} = {v}" for k, v in row) + "," for row in rows]
    return [*lines, "};"]


def block(records: Sequence[str], call: str) -> list[str]:
    """``{ <records> <call>; }``: a kernel call with its parameter records in one C block."""
    return ["{", *("    " + line for line in records), f"    {call};", "}"]


def act_record(op: Op) -> str:
    """The ``k_act_t`` initialiser ``{K_ACT_*, p0, p1}`` of the op's fused activation."""
    return f"{{{act_args(op)}}}"


# --------------------------------------------------------------------- shared checks ----


def rank4_or_less(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Every tensor of ``op`` has rank <= 4 (the rank-4 strided kernels)."""
    for name in (*op.inputs, *op.outputs):
        if name in tensors and len(tensors[name].shape) > 4:
            return f"tensor {name} has rank {len(tensors[name].shape)} > 4"
    return None


def image_batch1(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Input and output are rank-4 images with batch 1 (NCHW or NHWC by the graph layout)."""
    for name in (op.inputs[0], op.outputs[0]):
        shape = tensors[name].shape
        if len(shape) != 4 or shape[0] != 1:
            return f"tensor {name} shape {shape} is not NCHW with batch 1"
    return None


def act_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The fused activation has a ``K_ACT_*`` code."""
    if op.attr("act") not in ACT_CODES:
        return f"fused activation {op.attr('act')!r}"
    return None


def float_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Every constant is float32 (the float kernels read no other type)."""
    for key, w in op.weights.items():
        if np.asarray(w).dtype != np.float32:
            return f"weights {key} are {np.asarray(w).dtype} (float32 kernels only)"
    return None


def per_tensor_int8(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Tensors are float32 or int8 quantised per tensor (``kernels_q8.c``)."""
    for name in (*op.inputs, *op.outputs):
        spec = tensors[name]
        if spec.dtype not in ("int8", "float32"):
            return f"tensor {name} is {spec.dtype} (int8 and float32 only)"
        if spec.dtype == "int8" and (spec.quant is None or len(spec.quant.scale) != 1):
            return f"int8 tensor {name} is not quantised per tensor"
    return None


def all_int8(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Every activation of the op is int8."""
    for name in (*op.inputs, *op.outputs):
        if tensors[name].dtype != "int8":
            return f"tensor {name} is {tensors[name].dtype} in an int8 op"
    return None


def no_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The int8 element-wise kernels take no constant operand."""
    return f"constant operand {sorted(op.weights)} of an int8 op" if op.weights else None


def q8_act_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """int8 kernels clamp: only relu / relu6 / clip fuse."""
    if op.attr("act") not in (None, "relu", "relu6", "clip"):
        return f"fused activation {op.attr('act')!r} on an int8 op"
    return None


def same_quant(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Inputs and output share one quantisation (pools, concat)."""
    quants = {tensors[n].quant for n in (*op.inputs, *op.outputs)}
    return None if len(quants) == 1 else "inputs and output quantised differently"


def nhwc_batch1(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Input and output are rank-4 NHWC with batch 1 (the int8 spatial kernels)."""
    for name in (op.inputs[0], op.outputs[0]):
        shape = tensors[name].shape
        if len(shape) != 4 or shape[0] != 1:
            return f"tensor {name} shape {shape} is not NHWC with batch 1"
    return None


#: Checks every int8 element-wise op needs.
Q8_ELEMENTWISE: tuple[Check, ...] = (all_int8, no_weights)

#: Every op class with its own ``definition``, in the order their modules defined them
#: (:class:`OpKind` appends on subclassing; :mod:`splitter.codegen.ops` imports every module of
#: the package and orders the registry by :attr:`OpKind.order`).
REGISTERED: list[type[OpKind]] = []


# ---------------------------------------------------------------------------- base ----


class OpKind:
    """One canonical op kind: its definition, shape, MACs, scratch and float32 / int8 code.

    The defaults are an element-wise op's: same-shape output, one MAC-equivalent per output
    element, no scratch; override what differs."""

    #: what the kind is (setting it sets :attr:`kind`)
    definition: ClassVar[OpDef]
    kind: ClassVar[str] = ""
    #: which class of :data:`~splitter.codegen.ops.formulas.MAC_CLASSES` the MACs count in
    op_class: ClassVar[str] = "other"
    #: checks of the float path after :func:`float_weights`
    float_checks: ClassVar[tuple[Check, ...]] = ()
    #: checks of the int8 path after :func:`per_tensor_int8`
    int8_checks: ClassVar[tuple[Check, ...]] = ()
    #: the C kernels the class calls by a :class:`~splitter.codegen.ops.opdef.Kernel` (its symbol
    #: is its key; ``tests/test_ops_table.py`` checks each is declared in its header)
    c_kernels: ClassVar[tuple[Kernel, ...]] = ()
    #: its place in ``splitter ops`` and the op tables (ascending; ties: module, then class order)
    order: ClassVar[int] = 10_000
    #: ONNX operator -> converter ``(node, ctx) -> [Op, ...]`` for the operators of
    #: ``definition.onnx`` that no converter of :mod:`splitter.importers.onnx_ops` maps (a new op
    #: declares its importer here: :class:`~splitter.importers.onnx_nodes.OnnxNode` and
    #: :class:`~splitter.importers.onnx_nodes.ImportContext`, duck-typed so this layer imports
    #: no importer)
    onnx_converters: ClassVar[Mapping[str, Callable[[Any, Any], list[Op]]]] = {}
    #: the same per TFLite builtin of ``definition.tflite`` (``tflite_ops.Node`` -> ``Converted``)
    tflite_converters: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "definition" in cls.__dict__:
            cls.kind = cls.definition.kind
            REGISTERED.append(cls)

    # ------------------------------------------------------------------ shape and cost ----

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        """Output shape of ``op`` given its input shapes and the graph layout."""
        return tuple(in_shapes[0])

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        """One MAC-equivalent per output element (plus nothing for a fused activation)."""
        return out.size

    def mac_class(self, op: Op, ins: Sequence[TensorSpec]) -> str:
        """Which class of :data:`~splitter.codegen.ops.formulas.MAC_CLASSES` the MACs count in."""
        return self.op_class

    def scratch_bytes(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec, item: int) -> int:
        """Kernel scratch in bytes; the float kernels here need none (direct loops)."""
        return 0

    def row_scratch_bytes(
        self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec, item: int, band: int = 1
    ) -> int:
        """Kernel scratch in bytes when the op runs in a PEX row loop of ``band`` output rows
        per iteration (:mod:`splitter.codegen.pex_rows`); the whole op's by default."""
        return self.scratch_bytes(op, ins, out, item)

    # ----------------------------------------------------------- the kernel cost table ----

    #: the features of the kernel cost fit (:mod:`splitter.cost.kernels`) when the kernel's
    #: loops differ from an element-wise kernel's (``call``, ``out``, ``in``); with
    #: :meth:`cost_features` giving their values
    cost_feature_names: ClassVar[tuple[str, ...] | None] = None

    def cost_features(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> dict[str, float]:
        """Values of :attr:`cost_feature_names` for one call of the op's kernel (only called
        when the class sets :attr:`cost_feature_names`; the features' meanings are the cost
        table's, :data:`splitter.cost.kernels.FEATURES`)."""
        raise NotImplementedError(f"{self.kind}: cost_feature_names without cost_features")

    def grid_graphs(self) -> list[Graph]:
        """Graphs of this kind's ops for the kernel cost table's grid
        (:mod:`splitter.measure.kernel_grid`) when no model of ``models/`` uses the kind: a few
        shapes around the ones users run, so its fit sees each feature vary."""
        return []

    # -------------------------------------------------------------------------- code ----

    @classmethod
    def has_float(cls) -> bool:
        """True when the class overrides :meth:`emit_float`."""
        return cls.emit_float is not OpKind.emit_float

    @classmethod
    def has_int8(cls) -> bool:
        """True when the class overrides :meth:`emit_int8`."""
        return cls.emit_int8 is not OpKind.emit_int8

    def check(self, op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
        """Why no kernel runs ``op`` (``None`` when one does)."""
        if is_quantised(op, tensors):
            if not self.has_int8():
                return "no int8 kernel for this op kind"
            checks = (per_tensor_int8, *self.int8_checks)
        else:
            if not self.has_float():
                return "no float32 kernel for this op kind"
            checks = (float_weights, *self.float_checks)
        for chk in checks:
            reason = chk(op, tensors)
            if reason:
                return reason
        return None

    def emit(self, op: Op, ctx: EmitContext) -> list[str]:
        """The C statements running ``op`` with its tensors at ``ctx.offsets``."""
        label = f"{c_comment(op.name)}: {c_comment(op.kind)}"
        if is_quantised(op, ctx.tensors):  # the int8 kernels are NHWC whatever the graph's
            int8_ctx = replace(ctx, layout="NHWC")  # layout (splitter.importers.onnx_qdq)
            return [f"/* {label} (int8) */", *self.emit_int8(op, int8_ctx)]
        return [f"/* {label} */", *self.emit_float(op, ctx)]

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        """Calls of the float32 kernels (``kernels.c``, ``kernels_nhwc.c``)."""
        raise NotImplementedError(f"{op.kind}: no float32 kernel")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        """Calls of the int8 kernels (``kernels_q8.c``)."""
        raise NotImplementedError(f"{op.kind}: no int8 kernel")


#: The name op classes had when they only emitted code.
OpEmitter = OpKind
