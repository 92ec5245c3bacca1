"""LRN (ONNX ``LRN``, TFLite ``LOCAL_RESPONSE_NORMALIZATION``): import, cost and generated C.

* float NCHW: an ONNX model with two LRNs imported, split over two devices,
  built for the host and compared sub-model by sub-model with onnxruntime;
* float NHWC: a one-operator TFLite model imported and compared with LiteRT;
* int8 NHWC: TFLite's LOCAL_RESPONSE_NORMALIZATION kernel is float32 only (LiteRT rejects any
  other type), so there is no int8 reference runtime: the generated ``k_q_lrn`` is compared with
  the float formula on the dequantised input, quantised to the output scale, within one
  quantisation step.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import tflite
from test_codegen_host import check_model
from test_codegen_support import Net, build_host, run_host
from test_tflite_support import OpDef, TensorDef, build_model, interpreter

from splitter.codegen.model_c import generate_device_c
from splitter.cost.handlers import handler
from splitter.graph.chain import build_chain
from splitter.importers import load_chain
from splitter.importers.onnx_import import load_onnx
from splitter.importers.tflite_import import load_tflite
from splitter.ir import Graph, Op, QuantParams, TensorSpec

TOL = 1e-4


def lrn_ref(
    x: np.ndarray, axis: int, size: int, alpha: float, beta: float, bias: float
) -> np.ndarray:
    """ONNX LRN in float64: window ``[c - (size-1)//2, c + size-1-(size-1)//2]`` along ``axis``."""
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    lo = (size - 1) // 2
    hi = size - 1 - lo
    sq = np.zeros_like(x)
    n = x.shape[-1]
    for c in range(n):
        sq[..., c] = (x[..., max(0, c - lo) : min(n, c + hi + 1)] ** 2).sum(axis=-1)
    return np.moveaxis(x / (bias + alpha / size * sq) ** beta, -1, axis)


def lrn_net() -> Net:
    """conv -> LRN(size 5) -> relu -> conv -> LRN(size 3); onnxruntime refuses even sizes (the
    int8 test covers the ONNX spec's asymmetric even window against :func:`lrn_ref`)."""
    net = Net("lrn", (1, 3, 9, 8), seed=5)
    y = net.node("Conv", ["x", net.const(net.rand(8, 3, 3, 3))], pads=[1, 1, 1, 1])
    y = net.node("LRN", [y], size=5, alpha=0.3, beta=0.75, bias=1.5)
    y = net.node("Relu", [y])
    y = net.node("Conv", [y, net.const(net.rand(6, 8, 1, 1))])
    net.last = net.node("LRN", [y], size=3, alpha=0.2, beta=0.6, bias=2.0)
    return net


def test_onnx_import_and_cost(tmp_path: Path) -> None:
    import onnx

    path = tmp_path / "lrn.onnx"
    onnx.save(lrn_net().onnx_model(), str(path))
    graph = load_onnx(path)
    lrns = [op for op in graph.ops if op.kind == "lrn"]
    assert [op.attrs["size"] for op in lrns] == [5, 3]
    assert lrns[0].attrs == pytest.approx(
        {"size": 5, "alpha": 0.3, "beta": 0.75, "bias": 1.5, "axis": 1}
    )
    out = graph.tensor(lrns[0].outputs[0])
    assert out.shape == (1, 8, 9, 8)
    ins = [graph.tensor(lrns[0].inputs[0])]
    assert handler(lrns[0]).macs(lrns[0], ins, out) == 8 * 9 * 8 * (5 + 1)  # size + 1 each
    assert handler(lrns[0]).infer_shape(lrns[0], [ins[0].shape], "NCHW") == out.shape


def test_nchw_host_matches_onnxruntime(tmp_path: Path) -> None:
    """Three sub-models over two devices, each against onnxruntime on the same input."""
    check_model(lrn_net(), tmp_path, "importer")


def lrn_tflite(radius: int, bias: float, alpha: float, beta: float) -> bytes:
    """One LOCAL_RESPONSE_NORMALIZATION on a (1, 5, 4, 11) NHWC float input."""
    opts_type = tflite.BuiltinOptions.LocalResponseNormalizationOptions

    def opts(b: object) -> int:
        tflite.LocalResponseNormalizationOptionsStart(b)
        tflite.LocalResponseNormalizationOptionsAddRadius(b, radius)
        tflite.LocalResponseNormalizationOptionsAddBias(b, bias)
        tflite.LocalResponseNormalizationOptionsAddAlpha(b, alpha)
        tflite.LocalResponseNormalizationOptionsAddBeta(b, beta)
        return int(tflite.LocalResponseNormalizationOptionsEnd(b))

    tensors = [TensorDef("x", (1, 5, 4, 11)), TensorDef("y", (1, 5, 4, 11))]
    code = tflite.BuiltinOperator.LOCAL_RESPONSE_NORMALIZATION
    return build_model(tensors, [OpDef(code, (0,), (1,), opts_type, opts)], (0,), (1,))


def test_nhwc_host_matches_litert(tmp_path: Path) -> None:
    path = tmp_path / "lrn.tflite"
    path.write_bytes(lrn_tflite(radius=2, bias=1.25, alpha=0.08, beta=0.75))
    (op,) = load_tflite(path).ops
    assert op.kind == "lrn" and op.attrs["size"] == 5 and op.attrs["axis"] == 3
    assert op.attrs["alpha"] == pytest.approx(0.08 * 5)
    chain = load_chain(path)
    exe = build_host(generate_device_c(chain, [(0, 0, len(chain) - 1)], "d"), tmp_path / "d")
    x = np.random.default_rng(2).standard_normal((1, 5, 4, 11)).astype(np.float32) * 2
    it = interpreter(path)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = it.get_tensor(it.get_output_details()[0]["index"])
    got = run_host(exe, 0, x, tmp_path / "d").reshape(ref.shape)
    assert np.max(np.abs(got - ref)) <= TOL * max(1.0, float(np.max(np.abs(ref))))
    assert np.allclose(ref, lrn_ref(x, 3, 5, 0.08 * 5, 0.75, 1.25), atol=1e-5)


def int8_graph(size: int) -> tuple[Graph, QuantParams, QuantParams]:
    """One int8 lrn on (1, 4, 3, 10) NHWC, as a full-integer TFLite model would import."""
    qx, qy = QuantParams((0.04,), (3,)), QuantParams((0.02,), (-4,))
    x = TensorSpec("x", (1, 4, 3, 10), "int8", qx)
    y = TensorSpec("y", (1, 4, 3, 10), "int8", qy)
    attrs = {"size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.0, "axis": 3}
    op = Op("lrn_0", "lrn", ("x",), ("y",), attrs, {}, ("op0",))
    return Graph("lrn_q8", (op,), {"x": x, "y": y}, ("x",), ("y",), "NHWC", "tflite"), qx, qy


@pytest.mark.parametrize("size", [5, 2])
def test_int8_within_one_step_of_the_float_formula(size: int, tmp_path: Path) -> None:
    graph, qx, qy = int8_graph(size)
    chain = build_chain(graph)
    gen = generate_device_c(chain, [(0, 0, len(chain) - 1)], "d")
    assert "k_q_lrn(&p" in gen.files["model.c"]
    exe = build_host(gen, tmp_path / "d")
    q = np.random.default_rng(4).integers(-128, 128, size=(1, 4, 3, 10)).astype(np.int8)
    work = tmp_path / "d"
    (work / "in.bin").write_bytes(q.tobytes())
    res = subprocess.run(
        [str(exe), "0", str(work / "in.bin"), str(work / "out.bin")], capture_output=True
    )
    assert res.returncode == 0, res.stderr
    got = np.frombuffer((work / "out.bin").read_bytes(), np.int8).reshape(q.shape)
    real = qx.scale[0] * (q.astype(np.float64) - qx.zero_point[0])
    ref = lrn_ref(real, 3, size, 0.5, 0.75, 1.0)
    ref_q = np.clip(np.round(ref / qy.scale[0]) + qy.zero_point[0], -128, 127)
    assert int(np.max(np.abs(got.astype(np.int64) - ref_q))) <= 1
