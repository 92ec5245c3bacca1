"""Build the real-exporter ONNX models (torch.onnx.export, tf2onnx, onnxruntime.quantization).

Runs only in a throwaway environment with PyTorch, torchvision, TensorFlow and tf2onnx (none is
a splitter dependency); see ``models/EXPORTED.md`` for the exact commands and versions. Weights
are seeded random initialisers (nothing is downloaded); splitting must not change outputs
whatever the weights are. Writes, next to this script:

* ``mobilenet_v3_small_025.onnx``  torchvision ``mobilenet_v3_small(width_mult=0.25,
  num_classes=10)`` on a 1x3x64x64 input, torch.onnx.export (TorchScript exporter, opset 17);
* ``resnet_tv_28.onnx``  a ResNet-8-shaped network (3x3 stem, three stages of one torchvision
  ``BasicBlock`` each, widths 8 / 16 / 32, global pool, 10-way linear) on 1x3x28x28; torchvision's
  ``resnet18`` itself is 11.7 M parameters (47 MB float), no MCU holds it, so the stages are
  narrowed and shortened while the blocks stay torchvision's own;
* ``mobilenet_v2_035_keras.onnx``  Keras ``MobileNetV2(alpha=0.35, input_shape=(32, 32, 3),
  classes=10, weights=None)`` converted with tf2onnx (opset 17, NHWC input 1x32x32x3);
* ``resnet_tv_28_qdq.onnx``  ``resnet_tv_28.onnx`` through
  ``onnxruntime.quantization.quantize_static`` (QDQ format, int8 activations and per-channel int8
  weights, MinMax calibration on 16 seeded standard-normal inputs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEED = 1234
#: The files this script writes (stems), checked by tests/test_models_build.py.
OUTPUTS = ("mobilenet_v3_small_025", "resnet_tv_28", "mobilenet_v2_035_keras", "resnet_tv_28_qdq")
HERE = Path(__file__).resolve().parent
OPSET = 17


def export_torch(model: object, shape: tuple[int, ...], path: Path) -> None:
    """``torch.onnx.export`` (TorchScript exporter), batch 1, input ``input``, output ``logits``."""
    import torch

    model.eval()  # type: ignore[attr-defined]
    x = torch.randn(*shape)
    torch.onnx.export(
        model,
        (x,),
        str(path),
        input_names=["input"],
        output_names=["logits"],
        opset_version=OPSET,
        dynamo=False,
    )


def mobilenet_v3_small() -> None:
    """torchvision MobileNetV3-small, width 0.25, 10 classes, 64x64."""
    import torch
    from torchvision.models import mobilenet_v3_small as make

    torch.manual_seed(SEED)
    export_torch(make(width_mult=0.25, num_classes=10), (1, 3, 64, 64), HERE / "mobilenet_v3_small_025.onnx")


def small_resnet() -> object:
    """3x3 stem (8), torchvision BasicBlock stages 8 / 16 / 32 (stride 1, 2, 2), pool, linear."""
    from torch import nn
    from torchvision.models.resnet import BasicBlock, conv1x1

    def stage(cin: int, cout: int, stride: int) -> nn.Module:
        down = None
        if stride != 1 or cin != cout:
            down = nn.Sequential(conv1x1(cin, cout, stride), nn.BatchNorm2d(cout))
        return BasicBlock(cin, cout, stride, down)

    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        stage(8, 8, 1),
        stage(8, 16, 2),
        stage(16, 32, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def resnet() -> None:
    """The small torchvision-block ResNet, with non-trivial BatchNorm statistics."""
    import torch

    torch.manual_seed(SEED)
    model = small_resnet()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    export_torch(model, (1, 3, 28, 28), HERE / "resnet_tv_28.onnx")


def keras_mobilenet_v2() -> None:
    """Keras MobileNetV2 alpha 0.35 on 32x32x3 through tf2onnx."""
    import tensorflow as tf
    import tf2onnx

    tf.keras.utils.set_random_seed(SEED)
    model = tf.keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10
    )
    spec = (tf.TensorSpec((1, 32, 32, 3), tf.float32, name="input"),)
    tf2onnx.convert.from_keras(
        model, input_signature=spec, opset=OPSET, output_path=str(HERE / "mobilenet_v2_035_keras.onnx")
    )


def qdq_resnet() -> None:
    """``resnet_tv_28.onnx`` quantised to QDQ int8 by onnxruntime.quantization.quantize_static."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(SEED)
    samples = [rng.standard_normal((1, 3, 28, 28)).astype(np.float32) for _ in range(16)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self.it, None)
            return None if x is None else {"input": x}

    pre = HERE / "resnet_tv_28_pre.onnx"
    quant_pre_process(str(HERE / "resnet_tv_28.onnx"), str(pre))
    quantize_static(
        str(pre),
        str(HERE / "resnet_tv_28_qdq.onnx"),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    pre.unlink()


if __name__ == "__main__":
    mobilenet_v3_small()
    resnet()
    keras_mobilenet_v2()
    qdq_resnet()
