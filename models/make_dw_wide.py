"""Build ``dw_wide.onnx`` and ``dw_wide_qdq.onnx``: one wide depthwise convolution (issue 27).

``python models/make_dw_wide.py [--out DIR]`` writes both files with ``onnx.helper`` from seeded
numpy weights (seed 27); the float file's bytes are the same on every run. Opset 13, NCHW,
batch 1:

    input 1x16x4x4
    expand  Conv 16->512, 1x1, Relu                                -> 1x512x4x4
    dw      Conv 512->512, 7x7, group 512, pad 3, Relu (depthwise)  -> 1x512x4x4
    head    GlobalAveragePool, Flatten, Gemm 512->10               -> logits 1x10

The depthwise convolution is the largest layer: ``512 * 49 + 512`` parameters (102,400 B
float; 25,088 B int8 weights + 2,048 B int32 bias), against 34,816 B (float) for ``expand`` and
20,520 B for ``head``, so on boards whose flash holds every layer but it
(``models/boards/split_dw3.toml``, ``split_dw_qdq4.toml``) only a split of the depthwise layer
by channels places it (``docs/split-layer.md``). The 7x7 kernel is a ConvNeXt-style large
depthwise window.

``dw_wide_qdq.onnx`` is ``dw_wide.onnx`` through splitter's ``--quantize int8``
(:func:`splitter.slicing.quantize.quantize_int8`: onnxruntime ``quantize_static``, QDQ, int8,
per-channel weights) calibrated on 16 seeded N(0, 1) inputs (seed 27).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
NAME = "dw_wide"
SEED = 27
OPSET = 13
IR_VERSION = 8
IN_CH, WIDTH, SIDE, KERNEL, CLASSES = 16, 512, 4, 7, 10


def build() -> onnx.ModelProto:
    """The float model (module docstring)."""
    rng = np.random.default_rng(SEED)
    inits: list[onnx.TensorProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    w1 = rng.standard_normal((WIDTH, IN_CH, 1, 1)) * np.sqrt(2.0 / IN_CH)
    wd = rng.standard_normal((WIDTH, 1, KERNEL, KERNEL)) * np.sqrt(2.0 / KERNEL**2)
    wh = rng.standard_normal((CLASSES, WIDTH)) * np.sqrt(1.0 / WIDTH)
    nodes = [
        helper.make_node(
            "Conv",
            ["input", const("expand.W", w1), const("expand.B", rng.uniform(-0.1, 0.1, WIDTH))],
            ["expand/out"],
            name="expand",
            kernel_shape=[1, 1],
        ),
        helper.make_node("Relu", ["expand/out"], ["expand/relu"], name="expand_relu"),
        helper.make_node(
            "Conv",
            ["expand/relu", const("dw.W", wd), const("dw.B", rng.uniform(-0.1, 0.1, WIDTH))],
            ["dw/out"],
            name="dw",
            kernel_shape=[KERNEL, KERNEL],
            pads=[KERNEL // 2] * 4,
            group=WIDTH,
        ),
        helper.make_node("Relu", ["dw/out"], ["dw/relu"], name="dw_relu"),
        helper.make_node("GlobalAveragePool", ["dw/relu"], ["gap/out"], name="gap"),
        helper.make_node("Flatten", ["gap/out"], ["flat/out"], name="flat"),
        helper.make_node(
            "Gemm",
            ["flat/out", const("head.W", wh), const("head.B", np.zeros(CLASSES))],
            ["logits"],
            name="head",
            transB=1,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        NAME,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, IN_CH, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="splitter-models"
    )
    model.ir_version = IR_VERSION
    helper.set_model_props(
        model,
        {
            "source": "splitter models/make_dw_wide.py (issue 27)",
            "architecture": f"1x1 expand to {WIDTH}, {KERNEL}x{KERNEL} depthwise, global pool, "
            "dense",
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str] | None = None) -> int:
    """Write ``dw_wide.onnx`` and ``dw_wide_qdq.onnx`` into ``--out`` (default: here)."""
    from splitter.slicing.quantize import quantize_int8

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    path = args.out / f"{NAME}.onnx"
    path.write_bytes(build().SerializeToString())
    x = np.random.default_rng(SEED).standard_normal((16, 1, IN_CH, SIDE, SIDE))
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.npy"
        np.save(cal, x.astype(np.float32))
        quantize_int8(path, cal, args.out / f"{NAME}_qdq.onnx")
    print(path, args.out / f"{NAME}_qdq.onnx")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
