"""Build the reference float32 ONNX models of ``models/`` (run by ``make models``).

Every model is written with ``onnx.helper`` from seeded numpy random weights, so the bytes of a
file are the same on every run (seed = CRC-32 of the model name). Opset 13, NCHW, batch 1.

* The thesis's eight models (Neural Network Splitter thesis, Appendix A Tables 7-14, data in
  ``models/profiles/thesis_profiles.json``): the architectures reproduce the tables' per-layer
  shapes, and every conv/dense layer's parameter count (weights + bias, float32) equals the
  table's FLASH column. See ``models/README.md`` for how each table was matched.
* MobileNetV2-1.0 at 224x224 (Sandler et al. 2018, Table 2), not committed (about 14 MB).
* CIFAR ResNet-8 (He et al. 2016, section 4.2, n = 1).
* MobileNet v1 0.25 at 64x64 with the paper's FC classifier, small enough for the emulated
  STM32F405 end-to-end test (``tests/test_e2e_mobilenet.py``).

Usage: ``python models/build.py [--only NAME] [--out DIR] [--force]``. A file already present with
identical bytes is left alone; a different one is rewritten only with ``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODELS_DIR = Path(__file__).resolve().parent
OPSET = 13
IR_VERSION = 8  # onnx 1.10+ readers; onnxruntime >= 1.10
THESIS = "Neural Network Splitter thesis (PoliMi / STMicroelectronics, 2022)"


@dataclass
class Net:
    """A sequential ONNX graph under construction; ``cur`` is the current tensor (NCHW)."""

    name: str
    input_shape: tuple[int, int, int, int]
    rng: np.random.Generator = field(init=False)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    cur: str = "input"
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        self.shape = self.input_shape

    # --- helpers -----------------------------------------------------------------------------

    def _init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def _node(
        self, op: str, name: str, inputs: list[str], shape: tuple[int, ...], **attrs: Any
    ) -> str:
        """Append node ``name`` reading ``inputs``; its output ``name/out`` becomes current."""
        out = f"{name}/out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        self.cur, self.shape = out, shape
        return out

    # --- layers ------------------------------------------------------------------------------

    def conv(
        self,
        name: str,
        out_ch: int,
        kernel: tuple[int, int],
        stride: tuple[int, int] = (1, 1),
        pads: tuple[int, int, int, int] = (0, 0, 0, 0),
        group: int = 1,
        bias: bool = True,
    ) -> str:
        """Conv; ``pads`` = (top, left, bottom, right); out = floor((in + pads - k) / s) + 1."""
        _, c, h, w = self.shape
        kh, kw = kernel
        fan_in = (c // group) * kh * kw
        weight = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (out_ch, c // group, kh, kw))
        inputs = [self.cur, self._init(f"{name}.weight", weight)]
        if bias:
            inputs.append(self._init(f"{name}.bias", self.rng.normal(0.0, 0.05, out_ch)))
        oh = (h + pads[0] + pads[2] - kh) // stride[0] + 1
        ow = (w + pads[1] + pads[3] - kw) // stride[1] + 1
        return self._node(
            "Conv",
            name,
            inputs,
            (1, out_ch, oh, ow),
            kernel_shape=list(kernel),
            strides=list(stride),
            pads=[pads[0], pads[1], pads[2], pads[3]],
            group=group,
        )

    def dwconv(
        self, name: str, stride: int = 1, pads: tuple[int, int, int, int] = (1, 1, 1, 1)
    ) -> str:
        """Depthwise 3x3 conv (group = channels), with bias."""
        return self.conv(name, self.shape[1], (3, 3), (stride, stride), pads, group=self.shape[1])

    def bn(self, name: str) -> str:
        """BatchNormalization with realistic random statistics (gamma ~ U(0.5, 1.5), ...)."""
        c = self.shape[1]
        params = [
            self._init(f"{name}.scale", self.rng.uniform(0.5, 1.5, c)),
            self._init(f"{name}.bias", self.rng.normal(0.0, 0.1, c)),
            self._init(f"{name}.mean", self.rng.normal(0.0, 0.1, c)),
            self._init(f"{name}.var", self.rng.uniform(0.5, 1.5, c)),
        ]
        return self._node("BatchNormalization", name, [self.cur, *params], self.shape, epsilon=1e-3)

    def relu(self, name: str) -> str:
        return self._node("Relu", name, [self.cur], self.shape)

    def relu6(self, name: str) -> str:
        """ReLU6 as ONNX ``Clip(x, 0, 6)`` (opset 13 takes min/max as inputs)."""
        lo = self._init(f"{name}.min", np.array(0.0))
        hi = self._init(f"{name}.max", np.array(6.0))
        return self._node("Clip", name, [self.cur, lo, hi], self.shape)

    def maxpool(self, name: str, size: int = 2) -> str:
        """Max pool size x size, stride size, no padding: out = floor(in / size)."""
        n, c, h, w = self.shape
        return self._node(
            "MaxPool",
            name,
            [self.cur],
            (n, c, h // size, w // size),
            kernel_shape=[size, size],
            strides=[size, size],
        )

    def avgpool(self, name: str, kernel: tuple[int, int]) -> str:
        """Average pool, stride = kernel, no padding: out = floor(in / k)."""
        n, c, h, w = self.shape
        return self._node(
            "AveragePool",
            name,
            [self.cur],
            (n, c, h // kernel[0], w // kernel[1]),
            kernel_shape=list(kernel),
            strides=list(kernel),
        )

    def gap(self, name: str) -> str:
        n, c = self.shape[:2]
        return self._node("GlobalAveragePool", name, [self.cur], (n, c, 1, 1))

    def flatten(self, name: str) -> str:
        return self._node("Flatten", name, [self.cur], (1, int(np.prod(self.shape[1:]))), axis=1)

    def dense(self, name: str, out: int) -> str:
        """Gemm y = x W^T + b with W (out, in) (``transB = 1``), as Keras/PyTorch exports do."""
        fan_in = self.shape[1]
        weight = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (out, fan_in))
        inputs = [
            self.cur,
            self._init(f"{name}.weight", weight),
            self._init(f"{name}.bias", self.rng.normal(0.0, 0.05, out)),
        ]
        return self._node("Gemm", name, inputs, (1, out), transB=1)

    def softmax(self, name: str) -> str:
        return self._node("Softmax", name, [self.cur], self.shape, axis=-1)

    def add(self, name: str, other: str) -> str:
        return self._node("Add", name, [self.cur, other], self.shape)

    # --- output ------------------------------------------------------------------------------

    def model(self, source: str, description: str) -> onnx.ModelProto:
        """The finished ModelProto with fixed producer fields and ``metadata_props``."""
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(self.input_shape))],
            [helper.make_tensor_value_info(self.cur, TensorProto.FLOAT, list(self.shape))],
            initializer=self.inits,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="splitter models/build.py",
            producer_version="1",
            doc_string=description,
        )
        model.ir_version = IR_VERSION
        helper.set_model_props(
            model, {"source": source, "architecture": description, "seed": "crc32(name)"}
        )
        return model


def same_pads(
    size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int]
) -> tuple[int, int, int, int]:
    """TensorFlow 'SAME' pads (top, left, bottom, right): out = ceil(in / s),
    total = max((out - 1) * s + k - in, 0), begin = total // 2, end = total - begin."""
    begins: list[int] = []
    ends: list[int] = []
    for n, k, s in zip(size, kernel, stride, strict=True):
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return (begins[0], begins[1], ends[0], ends[1])


def _hw(net: Net) -> tuple[int, int]:
    return net.shape[2], net.shape[3]


# --- the thesis's eight models --------------------------------------------------------------


def kws_ds_cnn() -> onnx.ModelProto:
    """Table 7 (DS-CNN of Zhang et al., "Hello Edge", 2017, float32): Conv 10x4 s2 64 + BN,
    4 x [SepConv2D (dw 3x3 + pw 1x1, ReLU), Conv 1x1 64 + BN + ReLU], AvgPool 25x5,
    Dense 12 + Softmax."""
    net = Net("kws_ds_cnn", (1, 1, 49, 10))
    net.conv("conv1", 64, (10, 4), (2, 2), same_pads(_hw(net), (10, 4), (2, 2)))
    net.bn("conv1_bn")
    net.relu("conv1_relu")
    for i in range(1, 5):
        net.dwconv(f"sep{i}_dw")
        net.conv(f"sep{i}_pw", 64, (1, 1))
        net.relu(f"sep{i}_relu")
        net.conv(f"conv{i + 1}", 64, (1, 1))
        net.bn(f"conv{i + 1}_bn")
        net.relu(f"conv{i + 1}_relu")
    net.avgpool("avgpool", _hw(net))  # Hello Edge: average_pool2d over the whole 25x5 map
    net.flatten("flatten")
    net.dense("dense", 12)
    net.softmax("softmax")
    return net.model(
        f"{THESIS}, Table 7; Zhang et al., Hello Edge: Keyword Spotting on Microcontrollers "
        "(arXiv:1711.07128), DS-CNN",
        "KWS DS-CNN, 49x10 MFCC input, 12 classes",
    )


def _mobilenet_v1_body(net: Net, alpha: float) -> None:
    """MobileNet v1 (Howard et al. 2017, Table 1) up to the last pointwise block: conv 3x3 s2,
    13 depthwise-separable blocks, each conv + BN + ReLU6; Keras channel rule int(c * alpha)."""
    ch = [int(c * alpha) for c in (32, 64, 128, 256, 512, 1024)]
    blocks = [(ch[1], 1), (ch[2], 2), (ch[2], 1), (ch[3], 2), (ch[3], 1), (ch[4], 2)]
    blocks += [(ch[4], 1)] * 5 + [(ch[5], 2), (ch[5], 1)]
    net.conv("conv1", ch[0], (3, 3), (2, 2), same_pads(_hw(net), (3, 3), (2, 2)))
    net.bn("conv1_bn")
    net.relu6("conv1_relu")
    for i, (out, stride) in enumerate(blocks, start=1):
        pads = same_pads(_hw(net), (3, 3), (stride, stride))
        net.conv(f"conv_dw_{i}", net.shape[1], (3, 3), (stride, stride), pads, net.shape[1])
        net.bn(f"conv_dw_{i}_bn")
        net.relu6(f"conv_dw_{i}_relu")
        net.conv(f"conv_pw_{i}", out, (1, 1))
        net.bn(f"conv_pw_{i}_bn")
        net.relu6(f"conv_pw_{i}_relu")


def mobilenet_v1(alpha: float) -> Callable[[], onnx.ModelProto]:
    """MobileNet v1 (Howard et al. 2017) at 128x128, Keras layout (1x1 conv classifier)."""

    def build() -> onnx.ModelProto:
        tag = f"{round(alpha * 100):03d}"
        net = Net(f"mobilenet_v1_{tag}", (1, 3, 128, 128))
        _mobilenet_v1_body(net, alpha)
        net.gap("global_average_pooling2d")
        net.conv("conv_preds", 1000, (1, 1))
        net.flatten("reshape_2")
        net.softmax("predictions")
        return net.model(
            f"{THESIS}, Tables 8-10; Howard et al., MobileNets (arXiv:1704.04861); "
            "keras.applications.MobileNet layer names",
            f"MobileNet v1 alpha={alpha} 128x128 RGB, 1000 classes",
        )

    return build


def mobilenet_v1_025_64() -> onnx.ModelProto:
    """MobileNet v1 0.25 at 64x64 for the emulated end-to-end test (QEMU's F405: 1 MiB flash,
    128 KiB SRAM). The body is mobilenet_v1_025's (same weight shapes; the global average pool
    absorbs the resolution), so 64x64 is the largest input whose activations fit: conv_pw_1
    needs 32 + 64 KiB. The classifier is the paper's FC 256x1000 (Howard et al. Table 1, a Gemm)
    instead of Keras's 1x1 conv: same 257,000 parameters, but a device holding them (1,028,000
    B of 1 MiB of flash) keeps room only for firmware that links the dense kernel alone."""
    net = Net("mobilenet_v1_025_64", (1, 3, 64, 64))
    _mobilenet_v1_body(net, 0.25)
    net.gap("global_average_pooling2d")
    net.flatten("flatten")
    net.dense("fc", 1000)
    net.softmax("predictions")
    return net.model(
        "Howard et al., MobileNets (arXiv:1704.04861), Table 1 (FC classifier); "
        "keras.applications.MobileNet layer names for the body",
        "MobileNet v1 alpha=0.25 64x64 RGB, 1000 classes",
    )


def kws_cnn() -> onnx.ModelProto:
    """Table 11 (CNN of "Hello Edge", float32): Conv 10x4 28 + BN + ReLU, Conv 10x4 s(2,1) 30
    + BN + ReLU, flatten, Dense 16 (linear), Dense 128 + ReLU, Dense 12 + Softmax."""
    net = Net("kws_cnn", (1, 1, 49, 10))
    net.conv("conv1", 28, (10, 4))
    net.bn("conv1_bn")
    net.relu("conv1_relu")
    net.conv("conv2", 30, (10, 4), (2, 1))
    net.bn("conv2_bn")
    net.relu("conv2_relu")
    net.flatten("flatten")
    net.dense("linear", 16)
    net.dense("fc1", 128)
    net.relu("fc1_relu")
    net.dense("fc2", 12)
    net.softmax("softmax")
    return net.model(
        f"{THESIS}, Table 11; Zhang et al., Hello Edge (arXiv:1711.07128), CNN",
        "KWS CNN, 49x10 MFCC input, 12 classes",
    )


def yamnet_256() -> onnx.ModelProto:
    """Table 12: the first blocks of YAMNet (MobileNet v1 body, 96x64 log-mel patch):
    Conv 3x3 s2 32, 5 x [dw 3x3 + pw 1x1] (64, 128 s2, 128, 256 s2, 256), then the next
    block's dw 3x3 s2 and a global average pool; BN + ReLU after every conv."""
    net = Net("yamnet_256", (1, 1, 96, 64))
    net.conv("layer1_conv", 32, (3, 3), (2, 2), same_pads(_hw(net), (3, 3), (2, 2)))
    net.bn("layer1_conv_bn")
    net.relu("layer1_conv_relu")
    for i, (out, stride) in enumerate([(64, 1), (128, 2), (128, 1), (256, 2), (256, 1)], 2):
        pads = same_pads(_hw(net), (3, 3), (stride, stride))
        net.dwconv(f"layer{i}_depthwise_conv", stride, pads)
        net.bn(f"layer{i}_depthwise_conv_bn")
        net.relu(f"layer{i}_depthwise_conv_relu")
        net.conv(f"layer{i}_pointwise_conv", out, (1, 1))
        net.bn(f"layer{i}_pointwise_conv_bn")
        net.relu(f"layer{i}_pointwise_conv_relu")
    net.dwconv("layer7_depthwise_conv", 2, same_pads(_hw(net), (3, 3), (2, 2)))
    net.bn("layer7_depthwise_conv_bn")
    net.relu("layer7_depthwise_conv_relu")
    net.gap("global_average_pooling")
    net.flatten("flatten")
    return net.model(
        f"{THESIS}, Table 12; YAMNet (tensorflow/models research/audioset/yamnet), first blocks",
        "YAMNet 256: first YAMNet blocks, 96x64 log-mel input, 256 features",
    )


def tiny_cnn() -> onnx.ModelProto:
    """Table 13: 3 x [Conv 3x3 valid + ReLU + MaxPool 2] (16, 32, 48), Dense 10 + Softmax."""
    net = Net("tiny_cnn", (1, 1, 28, 28))
    for i, out in enumerate((16, 32, 48), start=1):
        net.conv(f"conv{i}", out, (3, 3))
        net.relu(f"conv{i}_relu")
        net.maxpool(f"pool{i}")
    net.flatten("flatten")
    net.dense("dense", 10)
    net.softmax("softmax")
    return net.model(f"{THESIS}, Table 13 (Tiny-CNN, MNIST)", "Tiny-CNN 28x28 MNIST, 10 classes")


def voxceleb() -> onnx.ModelProto:
    """Table 14: 3 x [Conv 3x3 same + ReLU + MaxPool 2] (32, 64, 128), SepConv (dw 3x3 + pw 256)
    + ReLU + global avg pool, Dense 128 + ReLU, Dense 600 + Softmax."""
    net = Net("voxceleb", (1, 1, 100, 13))
    for i, out in enumerate((32, 64, 128), start=1):
        net.conv(f"conv{i}", out, (3, 3), pads=(1, 1, 1, 1))
        net.relu(f"conv{i}_relu")
        net.maxpool(f"pool{i}")
    net.dwconv("sepconv_dw")
    net.conv("sepconv_pw", 256, (1, 1))
    net.relu("sepconv_relu")
    net.gap("global_avgpool")
    net.flatten("flatten")
    net.dense("fc1", 128)
    net.relu("fc1_relu")
    net.dense("fc2", 600)
    net.softmax("softmax")
    return net.model(
        f"{THESIS}, Table 14 (VoxCeleb speaker model; Nagrani et al., VoxCeleb, 2017)",
        "VoxCeleb speaker CNN, 100x13 MFCC input, 600 speakers",
    )


# --- the two extra reference models ---------------------------------------------------------


def mobilenet_v2_224() -> onnx.ModelProto:
    """MobileNetV2-1.0 (Sandler et al. 2018, Table 2): Conv 3x3 s2 32, 17 inverted residual
    blocks (t, c, n, s), Conv 1x1 1280, global avg pool, Dense 1000; BN + ReLU6 after convs
    except the linear projection; residual Add where stride 1 and in == out channels."""
    net = Net("mobilenet_v2_224", (1, 3, 224, 224))
    net.conv("features_0_conv", 32, (3, 3), (2, 2), (1, 1, 1, 1), bias=False)
    net.bn("features_0_bn")
    net.relu6("features_0_relu6")
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2)]
    settings += [(6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    idx = 1
    for t, c, n, s in settings:
        for j in range(n):
            _inverted_residual(net, f"features_{idx}", t, c, s if j == 0 else 1)
            idx += 1
    net.conv(f"features_{idx}_conv", 1280, (1, 1), bias=False)
    net.bn(f"features_{idx}_bn")
    net.relu6(f"features_{idx}_relu6")
    net.gap("global_avgpool")
    net.flatten("flatten")
    net.dense("classifier", 1000)
    return net.model(
        "Sandler et al., MobileNetV2 (arXiv:1801.04381), Table 2; torchvision layout",
        "MobileNetV2-1.0 224x224 RGB, 1000 classes",
    )


def _inverted_residual(net: Net, name: str, t: int, out: int, stride: int) -> None:
    """Expand 1x1 (t * in) + BN + ReLU6, dw 3x3 + BN + ReLU6, project 1x1 + BN (linear),
    Add the block input when stride == 1 and in == out."""
    block_in, in_ch = net.cur, net.shape[1]
    if t != 1:
        net.conv(f"{name}_expand", in_ch * t, (1, 1), bias=False)
        net.bn(f"{name}_expand_bn")
        net.relu6(f"{name}_expand_relu6")
    ch = net.shape[1]
    net.conv(f"{name}_dw", ch, (3, 3), (stride, stride), (1, 1, 1, 1), group=ch, bias=False)
    net.bn(f"{name}_dw_bn")
    net.relu6(f"{name}_dw_relu6")
    net.conv(f"{name}_project", out, (1, 1), bias=False)
    net.bn(f"{name}_project_bn")
    if stride == 1 and in_ch == out:
        net.add(f"{name}_add", block_in)


def pex_irb_48() -> onnx.ModelProto:
    """A small inverted-residual net that needs PEX partial execution on QEMU's F405 (128 KiB
    arena region): Conv 3x3 s2 16 + BN + ReLU6 on 48x48 RGB, two MobileNetV2 blocks (t = 6:
    16 -> 16 with the residual Add, 16 -> 24 stride 2) at 24x24, Conv 1x1 64, global average
    pool, Dense 10. Each expanded tensor is 96 x 24 x 24 float32 = 221,184 B, more than the
    whole region; run channel by channel a block needs at most 110,592 B
    (``tests/test_e2e_pex.py``)."""
    net = Net("pex_irb_48", (1, 3, 48, 48))
    net.conv("stem_conv", 16, (3, 3), (2, 2), (1, 1, 1, 1), bias=False)
    net.bn("stem_bn")
    net.relu6("stem_relu6")
    _inverted_residual(net, "block_1", 6, 16, 1)
    _inverted_residual(net, "block_2", 6, 24, 2)
    net.conv("head_conv", 64, (1, 1), bias=False)
    net.bn("head_bn")
    net.relu6("head_relu6")
    net.gap("global_avgpool")
    net.flatten("flatten")
    net.dense("classifier", 10)
    return net.model(
        "Sandler et al., MobileNetV2 (arXiv:1801.04381) inverted residual blocks, scaled down",
        "Two inverted-residual blocks at 24x24 (48x48 RGB input), 10 classes",
    )


def resnet8() -> onnx.ModelProto:
    """CIFAR ResNet-8 (He et al. 2016, section 4.2 with n = 1): Conv 3x3 16 + BN + ReLU, three
    basic blocks (16, 32 s2, 64 s2) with 1x1 projection shortcuts where the shape changes,
    global avg pool, Dense 10."""
    net = Net("resnet8", (1, 3, 32, 32))
    net.conv("conv1", 16, (3, 3), pads=(1, 1, 1, 1), bias=False)
    net.bn("conv1_bn")
    net.relu("conv1_relu")
    for i, (out, stride) in enumerate([(16, 1), (32, 2), (64, 2)], start=1):
        _basic_block(net, f"stage{i}", out, stride)
    net.gap("global_avgpool")
    net.flatten("flatten")
    net.dense("fc", 10)
    return net.model(
        "He et al., Deep Residual Learning (arXiv:1512.03385), section 4.2, n = 1",
        "CIFAR ResNet-8 32x32 RGB, 10 classes",
    )


def _basic_block(net: Net, name: str, out: int, stride: int) -> None:
    """Conv 3x3 (s) + BN + ReLU, Conv 3x3 + BN, Add shortcut (identity, or 1x1 s conv + BN
    when the shape changes), ReLU."""
    block_in, block_shape = net.cur, net.shape
    net.conv(f"{name}_conv1", out, (3, 3), (stride, stride), (1, 1, 1, 1), bias=False)
    net.bn(f"{name}_bn1")
    net.relu(f"{name}_relu1")
    net.conv(f"{name}_conv2", out, (3, 3), pads=(1, 1, 1, 1), bias=False)
    net.bn(f"{name}_bn2")
    main, main_shape = net.cur, net.shape
    shortcut = block_in
    if stride != 1 or block_shape[1] != out:
        net.cur, net.shape = block_in, block_shape
        net.conv(f"{name}_shortcut", out, (1, 1), (stride, stride), bias=False)
        net.bn(f"{name}_shortcut_bn")
        shortcut = net.cur
    net.cur, net.shape = main, main_shape
    net.add(f"{name}_add", shortcut)
    net.relu(f"{name}_relu2")


BUILDERS: dict[str, Callable[[], onnx.ModelProto]] = {
    "kws_ds_cnn": kws_ds_cnn,
    "mobilenet_v1_025": mobilenet_v1(0.25),
    "mobilenet_v1_030": mobilenet_v1(0.30),
    "mobilenet_v1_035": mobilenet_v1(0.35),
    "kws_cnn": kws_cnn,
    "yamnet_256": yamnet_256,
    "tiny_cnn": tiny_cnn,
    "voxceleb": voxceleb,
    "mobilenet_v2_224": mobilenet_v2_224,
    "resnet8": resnet8,
    "mobilenet_v1_025_64": mobilenet_v1_025_64,
    "pex_irb_48": pex_irb_48,
}

THESIS_MODELS = tuple(list(BUILDERS)[:8])


def model_bytes(name: str) -> bytes:
    """The serialized model ``name`` (deterministic: same bytes on every call)."""
    if name not in BUILDERS:
        raise KeyError(f"unknown model '{name}'; known: {', '.join(BUILDERS)}")
    data: bytes = BUILDERS[name]().SerializeToString(deterministic=True)
    return data


def write_model(name: str, out_dir: Path, force: bool = False) -> tuple[Path, str]:
    """Write ``out_dir/name.onnx``; returns (path, 'written' | 'unchanged' | 'differs')."""
    path = out_dir / f"{name}.onnx"
    data = model_bytes(name)
    if path.exists():
        if path.read_bytes() == data:
            return path, "unchanged"
        if not force:
            return path, "differs"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path, "written"


def ensure_model(name: str) -> Path:
    """Path of ``models/<name>.onnx``, building it first if it is missing."""
    path = MODELS_DIR / f"{name}.onnx"
    if not path.exists():
        write_model(name, MODELS_DIR)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(BUILDERS), action="append", help="model to build")
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help="output folder")
    parser.add_argument("--force", action="store_true", help="overwrite files that differ")
    args = parser.parse_args(argv)
    status = 0
    for name in args.only or list(BUILDERS):
        path, what = write_model(name, args.out, args.force)
        if what == "differs":
            print(f"{path}: differs from the built model; rerun with --force to overwrite")
            status = 1
        else:
            print(f"{path}: {what}")
    return status


if __name__ == "__main__":
    sys.exit(main())
