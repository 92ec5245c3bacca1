"""Write the held-out models of ``benchmarks/heldout.py`` (models the kernel cost table never saw).

Runs only in a throwaway environment with TensorFlow and tf2onnx (neither is a splitter
dependency; ``models/TFLITE.md`` and ``models/EXPORTED.md`` give the commands)::

    /tmp/tfenv/bin/pip install tensorflow-cpu==2.21.0 tf2onnx
    /tmp/tfenv/bin/python benchmarks/heldout_models.py

The files go to ``benchmarks/heldout/``, which the cost table's measurement
(``splitter.measure.kernel_table``, every model of ``models/`` and its shape grid) never reads: an
estimate on these models is an estimate on shapes nobody measured. Weights and batch-norm
statistics are seeded random (splitting must not change outputs whatever the weights are; the
cost of an int8 kernel does not depend on the weights). Two of the architectures appear nowhere
in ``models/`` (left out whole): a SqueezeNet (fire modules: 1x1 squeeze, 1x1 and 3x3 expand,
concatenation) and a VGG-style plain CNN (3x3 and 5x5 convolutions, max pools); the MobileNetV2
of the issue is a width and resolution ``models/`` does not have.

* ``mnv2_035_96_int8.tflite``: ``keras.applications.MobileNetV2(alpha=0.35)`` at 96x96x3, 10
  classes, full-integer (int8 input and output, per-channel weights): the model of the finding
  (PEX channel and row loops on two F405s with ``ram = "-16 KiB"``);
* ``squeezenet_64_int8.tflite`` / ``squeezenet_64_float.tflite``: SqueezeNet 1.1 layout, half
  width, at 64x64x3, int8 and float32;
* ``vgg_48_int8.tflite``: conv 5x5 (16), pool, 2 x conv 3x3 (32), pool, 2 x conv 3x3 (64),
  global pool, dense 10 at 48x48x3;
* ``mnv2_035_64_float.onnx`` / ``squeezenet_64_float.onnx`` / ``vgg_48_float.onnx``: the float
  Keras models through tf2onnx (opset 17): float32 NCHW graphs, PEX channel loops in float.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf

SEED = 4321
OUT = Path(__file__).resolve().parent / "heldout"
layers = tf.keras.layers


def _randomise_bn(model: tf.keras.Model) -> tf.keras.Model:
    """Seeded batch-norm statistics so the converter folds non-trivial scales."""
    rng = np.random.default_rng(SEED)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n), rng.uniform(-0.2, 0.2, n),
                               rng.uniform(-0.2, 0.2, n), rng.uniform(0.5, 2.0, n)])  # fmt: skip
    return model


def mnv2(size: int) -> tf.keras.Model:
    """Keras MobileNetV2 alpha 0.35 at ``size`` x ``size`` x 3, 10 classes, batch 1."""
    x_in = layers.Input(shape=(size, size, 3), batch_size=1, name="image")
    return tf.keras.applications.MobileNetV2(
        alpha=0.35, input_shape=(size, size, 3), input_tensor=x_in, weights=None, classes=10
    )


def _fire(x: tf.Tensor, squeeze: int, expand: int, name: str) -> tf.Tensor:
    s = layers.Conv2D(squeeze, 1, activation="relu", name=f"{name}_sq")(x)
    a = layers.Conv2D(expand, 1, activation="relu", name=f"{name}_e1")(s)
    b = layers.Conv2D(expand, 3, padding="same", activation="relu", name=f"{name}_e3")(s)
    return layers.Concatenate(name=f"{name}_cat")([a, b])


def squeezenet() -> tf.keras.Model:
    """SqueezeNet 1.1 (Iandola et al. 2016) at half width on 64x64x3, 10 classes."""
    x_in = layers.Input(shape=(64, 64, 3), batch_size=1, name="image")
    x = layers.Conv2D(32, 3, strides=2, activation="relu", name="conv1")(x_in)
    x = layers.MaxPooling2D(3, 2, name="pool1")(x)
    x = _fire(x, 8, 32, "fire2")
    x = _fire(x, 8, 32, "fire3")
    x = layers.MaxPooling2D(3, 2, name="pool3")(x)
    x = _fire(x, 16, 64, "fire4")
    x = _fire(x, 16, 64, "fire5")
    x = layers.MaxPooling2D(3, 2, name="pool5")(x)
    x = _fire(x, 24, 96, "fire6")
    x = _fire(x, 32, 128, "fire7")
    x = layers.Conv2D(10, 1, activation="relu", name="conv10")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    return tf.keras.Model(x_in, layers.Softmax(name="prob")(x), name="squeezenet")


def vgg() -> tf.keras.Model:
    """A VGG-style plain CNN on 48x48x3 (module docstring)."""
    x_in = layers.Input(shape=(48, 48, 3), batch_size=1, name="image")
    x = layers.Conv2D(16, 5, padding="same", name="c1")(x_in)
    x = layers.ReLU(name="c1_relu")(layers.BatchNormalization(name="c1_bn")(x))
    x = layers.MaxPooling2D(2, name="p1")(x)
    for k in (2, 3):
        x = layers.Conv2D(32, 3, padding="same", activation="relu", name=f"c{k}")(x)
    x = layers.MaxPooling2D(2, name="p2")(x)
    for k in (4, 5):
        x = layers.Conv2D(64, 3, padding="same", activation="relu", name=f"c{k}")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    return tf.keras.Model(x_in, layers.Dense(10, name="fc")(x), name="vgg")


def to_tflite(model: tf.keras.Model, int8: bool) -> bytes:
    """TFLite converter: float32, or full-integer with int8 input and output (32 seeded
    standard-normal calibration inputs)."""
    shape = tuple(model.inputs[0].shape)

    def data() -> Iterator[list[np.ndarray]]:
        rng = np.random.default_rng(SEED)
        for _ in range(32):
            yield [rng.standard_normal(shape).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = data
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def to_onnx(model: tf.keras.Model, path: Path) -> None:
    """tf2onnx (opset 17), batch 1."""
    import tf2onnx

    spec = (tf.TensorSpec(tuple(model.inputs[0].shape), tf.float32, name="input"),)
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=17, output_path=str(path))


def build(make: Callable[[], tf.keras.Model]) -> tf.keras.Model:
    tf.keras.utils.set_random_seed(SEED)
    return _randomise_bn(make())


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tflite = {
        "mnv2_035_96_int8.tflite": (lambda: mnv2(96), True),
        "squeezenet_64_int8.tflite": (squeezenet, True),
        "squeezenet_64_float.tflite": (squeezenet, False),
        "vgg_48_int8.tflite": (vgg, True),
    }
    for name, (make, int8) in tflite.items():
        (OUT / name).write_bytes(to_tflite(build(make), int8))
        print(f"wrote {name} (tensorflow {tf.__version__})")
    onnx = {"mnv2_035_64_float.onnx": lambda: mnv2(64), "squeezenet_64_float.onnx": squeezenet,
            "vgg_48_float.onnx": vgg}  # fmt: skip
    for name, make in onnx.items():
        try:
            to_onnx(build(make), OUT / name)
            print(f"wrote {name}")
        except Exception as exc:  # tf2onnx lags TensorFlow releases: say so, keep the rest
            print(f"skipped {name}: tf2onnx failed ({exc})")


if __name__ == "__main__":
    main()
