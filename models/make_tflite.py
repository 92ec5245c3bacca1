"""Build the TFLite reference models with the real TensorFlow converter.

Runs only in a throwaway environment that has TensorFlow (it is NOT a splitter dependency); see
``models/TFLITE.md`` for the exact commands and versions. Writes, next to this script:

* ``tiny_cnn_float.tflite``      float32 model (no quantisation);
* ``tiny_cnn_int8.tflite``       full-integer model, int8 input and output (per-channel conv
  weights, per-tensor activations);
* ``tiny_cnn_int8_fio.tflite``   full-integer model with float input/output (the converter adds
  a QUANTIZE op at the input and a DEQUANTIZE op at the output) and per-tensor weight scales.

The network is a small KWS-CNN-like CNN on a 49x10x1 MFCC input (batch fixed to 1 so the files
have static shapes) exercising PAD, CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D,
ADD, MUL, LOGISTIC, TANH, CONCATENATION, MEAN, RELU, FULLY_CONNECTED, RESHAPE and SOFTMAX, with
fused ReLU / ReLU6 (the converter folds the first ZeroPadding2D into the conv's padding; the
second one, before an average pool, stays a PAD op). In the int8 models the converter also adds
a requantising QUANTIZE op before CONCATENATION (TANH's output has a fixed scale).
Weights and the representative data set are seeded, so reruns give the same graph (the converter
may still change bytes between TF versions).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

SEED = 1234
INPUT_SHAPE = (49, 10, 1)
HERE = Path(__file__).resolve().parent


def build_model() -> tf.keras.Model:
    """The Keras model: conv stem, depthwise-separable block, two pooled branches, dense head."""
    tf.keras.utils.set_random_seed(SEED)
    layers = tf.keras.layers
    x_in = layers.Input(shape=INPUT_SHAPE, batch_size=1, name="mfcc")
    x = layers.ZeroPadding2D(((1, 1), (1, 1)), name="pad")(x_in)
    x = layers.Conv2D(8, (3, 3), strides=(2, 1), padding="valid", activation="relu", name="conv1")(
        x
    )
    x = layers.DepthwiseConv2D((3, 3), padding="same", name="dw1")(x)
    x = layers.ReLU(max_value=6.0, name="dw1_relu6")(x)
    x = layers.Conv2D(16, (1, 1), padding="same", activation="relu", name="pw1")(x)
    skip = x
    x = layers.Conv2D(16, (3, 3), padding="same", name="conv2")(x)
    x = layers.Add(name="res_add")([x, skip])
    x = layers.ReLU(name="res_relu")(x)
    a = layers.MaxPooling2D((2, 2), name="maxpool")(x)
    a = layers.Activation("tanh", name="tanh")(a)
    b = layers.ZeroPadding2D(((1, 0), (0, 0)), name="pool_pad")(x)
    b = layers.AveragePooling2D((3, 2), strides=(2, 2), name="avgpool")(b)
    b = layers.Multiply(name="swish")([b, layers.Activation("sigmoid", name="gate")(b)])
    x = layers.Concatenate(axis=-1, name="concat")([a, b])
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.ReLU(name="gap_relu")(x)
    x = layers.Dense(12, name="fc")(x)
    x = layers.Reshape((2, 6), name="groups")(x)
    x = layers.Softmax(name="softmax")(x)
    out = layers.Flatten(name="flatten")(x)
    return tf.keras.Model(x_in, out, name="tiny_cnn")


def representative_data():  # type: ignore[no-untyped-def]
    """Seeded random calibration inputs (what the converter uses to pick activation ranges)."""
    rng = np.random.default_rng(SEED)
    for _ in range(64):
        yield [rng.standard_normal((1, *INPUT_SHAPE)).astype(np.float32)]


def convert(model: tf.keras.Model, *, int8: bool, int8_io: bool, per_channel: bool = True) -> bytes:
    """Convert with the TFLite converter; ``int8`` = full-integer quantisation, per-channel
    weight scales unless ``per_channel`` is false (then one scale per weight tensor)."""
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        conv._experimental_disable_per_channel = not per_channel
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative_data
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if int8_io:
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def main() -> None:
    """Write the three models next to this script."""
    model = build_model()
    outputs = {
        "tiny_cnn_float.tflite": convert(model, int8=False, int8_io=False),
        "tiny_cnn_int8.tflite": convert(model, int8=True, int8_io=True),
        "tiny_cnn_int8_fio.tflite": convert(model, int8=True, int8_io=False, per_channel=False),
    }
    for name, data in outputs.items():
        (HERE / name).write_bytes(data)
        print(f"wrote {name}: {len(data)} bytes (tensorflow {tf.__version__})")


if __name__ == "__main__":
    main()
