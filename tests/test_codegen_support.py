"""Helpers for the codegen tests (no tests here).

* :func:`planner`: the cost model's ``plan_layer_memory`` (the ARENA RULE).
* :class:`Net`: builds one small model twice, as an ONNX graph (for onnxruntime) and as the
  canonical :class:`~splitter.ir.Graph`/:class:`~splitter.ir.Chain` the importer would produce.
* :func:`build_host` / :func:`run_host`: compile generated C for the host with
  ``gcc -std=c99 -O1 -Wall -Werror -fsanitize=address,undefined`` and run one sub-model.
* :func:`compile_host`: the compile step, with the kernel library compiled once per process
  (:func:`kernel_objects`: ~7 s of gcc saved on every later build).
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from splitter.codegen.model_c import GeneratedC, kernel_sources
from splitter.ir import Chain, Graph, Layer, LayerCost, Op, TensorSpec

OPSET = 17


def planner() -> Callable[..., Any]:
    """The ARENA RULE implementation shared with the cost model (``plan_layer_memory``)."""
    from splitter.cost.memory import plan_layer_memory

    return plan_layer_memory


# ------------------------------------------------------------------------- Net ----

ONNX_ACT = {
    "relu": ("Relu", {}),
    "sigmoid": ("Sigmoid", {}),
    "tanh": ("Tanh", {}),
    "hardswish": ("HardSwish", {}),
}


class Net:
    """A model built twice: ONNX nodes and canonical ops with the same tensor names."""

    def __init__(self, name: str, shape: tuple[int, ...], seed: int = 0) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.groups: list[list[Op]] = []
        self._group: list[Op] | None = None
        self._n = 0
        self.input = "x"
        self.input_shape = shape
        self.last = "x"

    def fresh(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, arr: np.ndarray, dtype: Any = np.float32) -> str:
        name = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr, dtype=dtype), name))
        return name

    def rand(self, *shape: int, scale: float = 0.5) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def node(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def add_op(self, op: Op) -> str:
        if self._group is not None:
            self._group.append(op)
        else:
            self.groups.append([op])
        self.last = op.outputs[0]
        return op.outputs[0]

    @contextmanager
    def super(self) -> Iterator[None]:
        self._group = []
        yield
        self.groups.append(self._group)
        self._group = None

    def act_node(self, y: str, act: str | None, **p: float) -> str:
        """ONNX nodes of a fused activation after ``y``."""
        if act is None:
            return y
        if act in ONNX_ACT:
            return self.node(ONNX_ACT[act][0], [y])
        if act == "leaky_relu":
            return self.node("LeakyRelu", [y], alpha=p["alpha"])
        lo, hi = (0.0, 6.0) if act == "relu6" else (p["act_min"], p["act_max"])
        return self.node("Clip", [y, self.const(np.float32(lo)), self.const(np.float32(hi))])

    # ---- ops: each returns the canonical output tensor name ----

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0,
             dil: int = 1, groups: int = 1, act: str | None = None, bias: bool = True,
             **p: float) -> str:  # fmt: skip
        w = self.rand(cout, cin // groups, k, k, scale=1.0 / np.sqrt(cin // groups * k * k))
        b = self.rand(cout, scale=0.1)
        ins = [x, self.const(w)] + ([self.const(b)] if bias else [])
        y = self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                      pads=[pad] * 4, dilations=[dil, dil], group=groups)  # fmt: skip
        y = self.act_node(y, act, **p)
        weights = {"W": w, "B": b} if bias else {"W": w}
        attrs = dict(kernel=(k, k), strides=(stride, stride), pads=(pad,) * 4,
                     dilations=(dil, dil), groups=groups, act=act, **p)  # fmt: skip
        return self.add_op(Op(y, "conv2d", (x,), (y,), attrs, weights))

    def dense(self, x: str, cin: int, cout: int, act: str | None = None) -> str:
        w, b = self.rand(cout, cin, scale=1.0 / np.sqrt(cin)), self.rand(cout, scale=0.1)
        y = self.act_node(self.node("Gemm", [x, self.const(w), self.const(b)], transB=1), act)
        return self.add_op(Op(y, "dense", (x,), (y,), {"act": act}, {"W": w, "B": b}))

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        y = self.node("Reshape", [x, self.const(np.array(shape), np.int64)])
        return self.add_op(Op(y, "reshape", (x,), (y,), {"shape": shape}))

    def transpose(self, x: str, perm: tuple[int, ...]) -> str:
        y = self.node("Transpose", [x], perm=list(perm))
        return self.add_op(Op(y, "transpose", (x,), (y,), {"perm": perm}))

    def matmul(self, a: str, b: str) -> str:
        y = self.node("MatMul", [a, b])
        return self.add_op(Op(y, "matmul", (a, b), (y,), {"act": None}))

    def pool(self, kind: str, x: str, k: int, stride: int, pad: int = 0, cip: int = 0) -> str:
        attrs: dict[str, Any] = dict(kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
        if kind == "avgpool":
            attrs["count_include_pad"] = cip
        y = self.node("MaxPool" if kind == "maxpool" else "AveragePool", [x], **attrs)
        canon = dict(kernel=(k, k), strides=(stride,) * 2, pads=(pad,) * 4, act=None)
        if kind == "avgpool":
            canon["count_include_pad"] = cip
        return self.add_op(Op(y, kind, (x,), (y,), canon))

    def global_avgpool(self, x: str) -> str:
        y = self.node("GlobalAveragePool", [x])
        return self.add_op(Op(y, "global_avgpool", (x,), (y,), {"act": None}))

    def mean(self, x: str, axes: tuple[int, ...], keepdims: int) -> str:
        y = self.node("ReduceMean", [x], axes=list(axes), keepdims=keepdims)
        return self.add_op(Op(y, "mean", (x,), (y,), dict(axes=axes, keepdims=keepdims, act=None)))

    def binary(self, kind: str, a: str, b: str | np.ndarray, act: str | None = None) -> str:
        onnx_type = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}[kind]
        if isinstance(b, np.ndarray):
            y = self.act_node(self.node(onnx_type, [a, self.const(b)]), act)
            return self.add_op(Op(y, kind, (a,), (y,), {"act": act}, {"C": b}))
        y = self.act_node(self.node(onnx_type, [a, b]), act)
        return self.add_op(Op(y, kind, (a, b), (y,), {"act": act}))

    def concat(self, xs: list[str], axis: int = 1) -> str:
        y = self.node("Concat", xs, axis=axis)
        return self.add_op(Op(y, "concat", tuple(xs), (y,), {"axis": axis}))

    def unary(self, kind: str, x: str, **p: float) -> str:
        if kind == "hardsigmoid":
            y = self.node("HardSigmoid", [x], alpha=p["alpha"], beta=p["beta"])
        else:
            y = self.act_node(x, kind, **p)
        return self.add_op(Op(y, kind, (x,), (y,), dict(p)))

    def softmax(self, x: str, axis: int = -1) -> str:
        y = self.node("Softmax", [x], axis=axis)
        return self.add_op(Op(y, "softmax", (x,), (y,), {"axis": axis}))

    def batchnorm(self, x: str, c: int) -> str:
        g, b, m = self.rand(c) + 1.0, self.rand(c), self.rand(c)
        v = np.abs(self.rand(c)) + 0.5
        y = self.node("BatchNormalization", [x, *(self.const(a) for a in (g, b, m, v))])
        scale = (g / np.sqrt(v + 1e-5)).astype(np.float32)
        shift = (b - m * scale).astype(np.float32)
        return self.add_op(Op(y, "batchnorm", (x,), (y,), {}, {"scale": scale, "shift": shift}))

    def pad(self, x: str, pads: tuple[int, ...], value: float) -> str:
        y = self.node(
            "Pad", [x, self.const(np.array(pads), np.int64), self.const(np.float32(value))]
        )
        return self.add_op(Op(y, "pad", (x,), (y,), {"pads": pads, "value": value}))

    # ---- outputs ----

    def onnx_model(self) -> onnx.ModelProto:
        inp = helper.make_tensor_value_info(self.input, TensorProto.FLOAT, self.input_shape)
        out = helper.make_tensor_value_info(self.last, TensorProto.FLOAT, None)
        graph = helper.make_graph(self.nodes, self.name, [inp], [out], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model)
        return model

    def chain(self, model: onnx.ModelProto) -> Chain:
        shapes = _shapes(model)
        ops = tuple(op for group in self.groups for op in group)
        names = {self.input} | {t for op in ops for t in (*op.inputs, *op.outputs)}
        tensors = {n: TensorSpec(n, shapes[n]) for n in names}
        graph = Graph(self.name, ops, tensors, (self.input,), (self.last,), "NCHW", "onnx")
        mem = planner()
        spec0 = tensors[self.input]
        cost0 = LayerCost(0, spec0.nbytes, 0, spec0.nbytes)
        layers = [Layer(0, "input", "input", (), None, spec0, cost0)]
        prev = self.input
        for j, group in enumerate(self.groups, start=1):
            out = group[-1].outputs[0]
            ram = mem(group, tensors, prev, out, lambda s: 4).size
            flash = sum(int(w.nbytes) for op in group for w in op.weights.values())
            kind = group[0].kind if len(group) == 1 else "super"
            cost = LayerCost(flash, ram, 0, tensors[out].nbytes)
            layers.append(
                Layer(j, group[-1].name, kind, tuple(group), tensors[prev], tensors[out], cost)
            )
            prev = out
        return Chain(self.name, tuple(layers), graph)


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    out = {}
    for vi in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        out[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    return out


# ----------------------------------------------------------------------- host build ----

TEST_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
/* usage: prog K in.bin out.bin -- runs sub-model K (row of model_submodels) */
int main(int argc, char **argv)
{
    const model_submodel_t *s;
    FILE *f;
    if (argc != 4) return 2;
    s = &model_submodels[atoi(argv[1])];
    memset(model_arena, 0xff, MODEL_ARENA_BYTES); /* NaN poison: stale reads show up */
    f = fopen(argv[2], "rb");
    if (!f || fread((char *)model_arena + s->in_offset, 1, s->in_bytes, f) != s->in_bytes) return 3;
    fclose(f);
    if (s->run(model_arena) != 0) return 4;
    f = fopen(argv[3], "wb");
    if (!f || fwrite((char *)model_arena + s->out_offset, 1, s->out_bytes, f) != s->out_bytes)
        return 5;
    fclose(f);
    return 0;
}
"""

HOST_CFLAGS = ["-std=c99", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined",
               "-fno-sanitize-recover=all"]  # fmt: skip


#: kernel library objects by a hash of the sources (one entry per process in practice)
_KERNEL_OBJECTS: dict[str, list[Path]] = {}


def kernel_objects() -> list[Path]:
    """``kernels*.c`` compiled with :data:`HOST_CFLAGS` once per process (the library's
    sources are the same for every model: only ``model.c`` and the test's main differ)."""
    srcs = {k: v for k, v in kernel_sources().items() if k != "k_libc.c"}
    key = hashlib.sha256(repr(sorted(srcs.items())).encode()).hexdigest()
    if key not in _KERNEL_OBJECTS:
        work = Path(tempfile.mkdtemp(prefix="splitter-host-kernels-"))
        atexit.register(shutil.rmtree, work, True)
        for name, text in srcs.items():
            (work / name).write_text(text)
        objs = []
        for name in sorted(n for n in srcs if n.endswith(".c")):
            obj = work / (name[:-2] + ".o")
            # relative paths in the work directory: ccache (tests/conftest.py) hands the other
            # worker the same object, the directory left out of its hash
            res = subprocess.run(["gcc", *HOST_CFLAGS, "-c", "-o", obj.name, name], cwd=work,
                                 capture_output=True, text=True)  # fmt: skip
            assert res.returncode == 0, res.stderr[-3000:]
            objs.append(obj)
        _KERNEL_OBJECTS[key] = objs
    return _KERNEL_OBJECTS[key]


def compile_host(files: dict[str, str], work: Path, exe: Path) -> subprocess.CompletedProcess[str]:
    """Write ``files`` and the kernel headers to ``work``, then link ``exe`` from the ``.c``
    files among ``files`` and :func:`kernel_objects` (``gcc HOST_CFLAGS ... -lm``)."""
    work.mkdir(parents=True, exist_ok=True)
    headers = {k: v for k, v in kernel_sources().items() if k.endswith(".h")}
    for name, text in {**files, **headers}.items():
        (work / name).write_text(text)
    srcs = [str(work / n) for n in files if n.endswith(".c")]
    objs = [str(o) for o in kernel_objects()]
    return subprocess.run(["gcc", *HOST_CFLAGS, "-o", str(exe), *srcs, *objs, "-lm"],
                          capture_output=True, text=True)  # fmt: skip


def build_host(gen: GeneratedC, work: Path) -> Path:
    """Write the sources and compile them for the host; returns the executable."""
    exe = work / "model_test"
    res = compile_host({**gen.files, "test_main.c": TEST_MAIN}, work, exe)
    assert res.returncode == 0, res.stderr[-3000:]
    return exe


def run_host(exe: Path, row: int, x: np.ndarray, work: Path) -> np.ndarray:
    """Run the ``row``-th sub-model of the executable on ``x``; returns the output floats."""
    (work / "in.bin").write_bytes(np.ascontiguousarray(x, dtype="<f4").tobytes())
    res = subprocess.run([str(exe), str(row), str(work / "in.bin"), str(work / "out.bin")],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return np.frombuffer((work / "out.bin").read_bytes(), dtype="<f4")
