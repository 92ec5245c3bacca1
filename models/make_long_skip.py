"""Build ``long_skip.onnx``: one skip connection over thirteen convolutions (issue 15).

``python models/make_long_skip.py [--out DIR]`` writes the file with ``onnx.helper`` from seeded
numpy weights (seed 15), so the bytes are the same on every run (``tests/test_long_skip.py``
rebuilds it and compares). Opset 13, NCHW, batch 1, float32:

    input 1x3x16x16
    stem      Conv 3->48, 3x3, stride 2, pad 1, Relu         -> s (1x48x8x8)
    body_1..13  Conv 48->48, 3x3, pad 1 (+ Relu but the last) -> b
    join      Add(b, s), Relu                                 (the skip over 13 convolutions)
    head      GlobalAveragePool, Flatten, Gemm 48->10          -> logits 1x10

Each body convolution holds ``9 * 48 * 48 + 48 = 20,784`` float32 parameters (83,136 B), so the
region from ``body_1`` to the ``Add`` is one super-node of ``13 * 83,136 = 1,080,768 B``: no
STM32F405 with 400 KiB of flash holds it, while cuts carrying two tensors (the skip ``s`` and
the main path, 12,288 B each) split it over four (``models/boards/long_skip4.toml``). Thirteen,
not the issue's twelve: a board holds at most four body convolutions (five are 415,680 B), so
twelve would fit on three of the four boards and thirteen need all four.
Weights are He-normal (variance ``2 / fan_in``), biases small, so activations neither vanish
nor explode through the twelve layers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
NAME = "long_skip"
SEED = 15
OPSET = 13
IR_VERSION = 8
WIDTH = 48
BODY = 13


def build() -> onnx.ModelProto:
    """The model (module docstring)."""
    rng = np.random.default_rng(SEED)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(name: str, x: str, cin: int, stride: int, relu: bool) -> str:
        w = rng.standard_normal((WIDTH, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        b = rng.uniform(-0.05, 0.05, WIDTH)
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"{name}.W"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"{name}.B"))
        out = f"{name}/out"
        nodes.append(
            helper.make_node(
                "Conv",
                [x, f"{name}.W", f"{name}.B"],
                [out],
                name=name,
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[stride, stride],
            )
        )
        if not relu:
            return out
        nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"], name=f"{name}_relu"))
        return f"{name}/relu"

    skip = conv("stem", "input", 3, 2, True)
    x = skip
    for k in range(1, BODY + 1):
        x = conv(f"body_{k}", x, WIDTH, 1, k < BODY)
    nodes.append(helper.make_node("Add", [x, skip], ["join/out"], name="join"))
    nodes.append(helper.make_node("Relu", ["join/out"], ["join/relu"], name="join_relu"))
    nodes.append(helper.make_node("GlobalAveragePool", ["join/relu"], ["gap/out"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap/out"], ["flat/out"], name="flat"))
    w = rng.standard_normal((10, WIDTH)) * np.sqrt(1.0 / WIDTH)
    inits.append(numpy_helper.from_array(w.astype(np.float32), "head.W"))
    inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "head.B"))
    nodes.append(
        helper.make_node("Gemm", ["flat/out", "head.W", "head.B"], ["logits"], name="head", transB=1)
    )
    graph = helper.make_graph(
        nodes,
        NAME,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="splitter-models"
    )
    model.ir_version = IR_VERSION
    helper.set_model_props(
        model,
        {
            "source": "splitter models/make_long_skip.py (issue 15)",
            "architecture": f"stem conv, skip over {BODY} 3x3 convolutions of width {WIDTH}, "
            "global pool, dense",
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str] | None = None) -> int:
    """Write ``long_skip.onnx`` into ``--out`` (default: next to this script)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    path = args.out / f"{NAME}.onnx"
    path.write_bytes(build().SerializeToString())
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
