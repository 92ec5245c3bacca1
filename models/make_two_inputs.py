"""Build ``two_inputs.onnx``: two image branches of different shapes added (issue 29).

``python models/make_two_inputs.py [--out DIR]`` writes the file with ``onnx.helper`` from seeded
numpy weights (seed 29), so the bytes are the same on every run (``tests/test_two_inputs.py``
rebuilds it and compares). Opset 13, NCHW, batch 1, float32:

    rgb   1x3x16x16 -> rgb_conv   Conv 3->8, 3x3, pad 1, Relu  -> a (1x8x16x16)
    depth 1x1x16x16 -> depth_conv Conv 1->8, 3x3, pad 1, Relu  -> b (1x8x16x16)
    join      Add(a, b)
    conv2     Conv 8->16, 3x3, stride 2, pad 1, Relu            -> 1x16x8x8
    conv3     Conv 16->16, 3x3, pad 1, Relu                     -> 1x16x8x8
    head      GlobalAveragePool, Flatten, Gemm 16->10           -> logits 1x10

The two inputs differ in channels, so a per-input shape check cannot pass by accident. Weights
are He-normal (variance ``2 / fan_in``), biases small.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
NAME = "two_inputs"
SEED = 29
OPSET = 13
IR_VERSION = 8
#: graph inputs in the graph's order: name -> NCHW shape
INPUTS = {"rgb": (1, 3, 16, 16), "depth": (1, 1, 16, 16)}


def build() -> onnx.ModelProto:
    """The model (module docstring)."""
    rng = np.random.default_rng(SEED)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def conv(name: str, x: str, cin: int, cout: int, stride: int = 1) -> str:
        w = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        b = rng.uniform(-0.05, 0.05, cout)
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"{name}.W"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"{name}.B"))
        nodes.append(
            helper.make_node(
                "Conv", [x, f"{name}.W", f"{name}.B"], [f"{name}/out"], name=name,
                kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride],
            )
        )  # fmt: skip
        nodes.append(
            helper.make_node("Relu", [f"{name}/out"], [f"{name}/relu"], name=f"{name}_relu")
        )
        return f"{name}/relu"

    a = conv("rgb_conv", "rgb", 3, 8)
    b = conv("depth_conv", "depth", 1, 8)
    nodes.append(helper.make_node("Add", [a, b], ["join/out"], name="join"))
    x = conv("conv3", conv("conv2", "join/out", 8, 16, stride=2), 16, 16)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap/out"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap/out"], ["flat/out"], name="flat"))
    w = rng.standard_normal((10, 16)) * np.sqrt(1.0 / 16)
    inits.append(numpy_helper.from_array(w.astype(np.float32), "head.W"))
    inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "head.B"))
    nodes.append(
        helper.make_node(
            "Gemm", ["flat/out", "head.W", "head.B"], ["logits"], name="head", transB=1
        )
    )
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in INPUTS.items()]
    graph = helper.make_graph(
        nodes,
        NAME,
        inputs,
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
            "source": "splitter models/make_two_inputs.py (issue 29)",
            "architecture": "rgb and depth conv branches added, two convs, global pool, dense",
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str] | None = None) -> int:
    """Write ``two_inputs.onnx`` into ``--out`` (default: next to this script)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    path = args.out / f"{NAME}.onnx"
    path.write_bytes(build().SerializeToString())
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
