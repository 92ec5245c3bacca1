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

``--mlperf`` writes the four MLPerf Tiny v1 reference networks instead, as full-integer models
with int8 input and output (what the MLPerf Tiny int8 reference models are), random seeded
weights and batch-norm statistics (untrained: splitting must not change outputs whatever the
weights are):

* ``mlperf_kws_ds_cnn_int8.tflite``  keyword spotting, DS-CNN on 49x10x1 MFCCs;
* ``mlperf_vww_mobilenet_v1_025_int8.tflite``  visual wake words, MobileNetV1 0.25 at 96x96x3;
* ``mlperf_ic_resnet8_int8.tflite``  image classification, ResNet-8 (CIFAR-10, 32x32x3);
* ``mlperf_ad_autoencoder_int8.tflite``  anomaly detection, dense autoencoder on 640 features.

The architectures follow the MLPerf Tiny v1 training scripts (github.com/mlcommons/tiny,
``benchmark/training/<task>/keras_model.py`` and ``vww_model.py``): layer for layer, kernel sizes,
strides, paddings and widths; dropout and weight regularisers (training only) are left out.

``--mnv2`` writes ``mobilenet_v2_224_int8.tflite``: Keras's own MobileNetV2-1.0 at 224x224x3
(``keras.applications.MobileNetV2``, Sandler et al. 2018; ``weights=None``, batch fixed to 1),
seeded weights and batch-norm statistics, full-integer with int8 input and output, per-channel
weights, calibrated on 32 seeded standard-normal inputs: the int8 MobileNetV2 a user deploys
(the PEX paper's example model, 1505 kB of activations run op by op).

``--two-inputs`` writes ``two_inputs_int8.tflite``: the network of ``models/make_two_inputs.py``
(an ``rgb`` 16x16x3 and a ``depth`` 16x16x1 branch added) in Keras, full-integer with int8
inputs and output, per-channel weights (a model with several graph inputs, issue 29).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
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


def _bn_relu(x: tf.Tensor, name: str, relu: bool = True) -> tf.Tensor:
    """BatchNormalization (seeded random statistics, set in :func:`_randomise_bn`) and ReLU."""
    x = tf.keras.layers.BatchNormalization(name=f"{name}_bn")(x)
    return tf.keras.layers.ReLU(name=f"{name}_relu")(x) if relu else x


def _randomise_bn(model: tf.keras.Model, rng: np.random.Generator) -> tf.keras.Model:
    """Seeded gamma, beta, moving mean and variance for every BatchNormalization layer, so the
    converter folds non-trivial scales and shifts into the conv / dense weights."""
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, n).astype(np.float32),
                    rng.uniform(-0.2, 0.2, n).astype(np.float32),
                    rng.uniform(-0.2, 0.2, n).astype(np.float32),
                    rng.uniform(0.5, 2.0, n).astype(np.float32),
                ]
            )
    return model


def kws_ds_cnn() -> tf.keras.Model:
    """MLPerf Tiny KWS: DS-CNN (Zhang et al., "Hello Edge", 2017), 64 filters: conv 10x4 stride
    2 SAME, 4 x (depthwise 3x3 SAME + pointwise 64), each with batch norm and ReLU, average pool
    25x5, dense 12, softmax."""
    layers = tf.keras.layers
    x_in = layers.Input(shape=(49, 10, 1), batch_size=1, name="mfcc")
    x = layers.Conv2D(64, (10, 4), strides=(2, 2), padding="same", name="conv1")(x_in)
    x = _bn_relu(x, "conv1")
    for i in range(1, 5):
        x = layers.DepthwiseConv2D((3, 3), padding="same", name=f"dw{i}")(x)
        x = _bn_relu(x, f"dw{i}")
        x = layers.Conv2D(64, (1, 1), padding="same", name=f"pw{i}")(x)
        x = _bn_relu(x, f"pw{i}")
    x = layers.AveragePooling2D(pool_size=(25, 5), name="avgpool")(x)
    x = layers.Flatten(name="flatten")(x)
    out = layers.Dense(12, activation="softmax", name="fc")(x)
    return tf.keras.Model(x_in, out, name="kws_ds_cnn")


def vww_mobilenet_v1_025() -> tf.keras.Model:
    """MLPerf Tiny VWW: MobileNetV1 width 0.25 on 96x96x3 (Howard et al. 2017): conv 3x3 stride 2
    (8 filters), 13 depthwise-separable blocks (16, 32 s2, 32, 64 s2, 64, 128 s2, 5 x 128,
    256 s2, 256), average pool 3x3, dense 2, softmax."""
    layers = tf.keras.layers
    x_in = layers.Input(shape=(96, 96, 3), batch_size=1, name="image")
    x = layers.Conv2D(8, 3, strides=2, padding="same", name="conv1")(x_in)
    x = _bn_relu(x, "conv1")
    blocks = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2)] + [(128, 1)] * 5
    for i, (filters, stride) in enumerate([*blocks, (256, 2), (256, 1)], start=1):
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", name=f"dw{i}")(x)
        x = _bn_relu(x, f"dw{i}")
        x = layers.Conv2D(filters, 1, padding="same", name=f"pw{i}")(x)
        x = _bn_relu(x, f"pw{i}")
    x = layers.AveragePooling2D(pool_size=(3, 3), name="avgpool")(x)
    x = layers.Flatten(name="flatten")(x)
    out = layers.Dense(2, activation="softmax", name="fc")(x)
    return tf.keras.Model(x_in, out, name="vww_mobilenet_v1_025")


def ic_resnet8() -> tf.keras.Model:
    """MLPerf Tiny IC: ResNet-8 on 32x32x3 (He et al. 2016, EEMBC's resnet_v1_eembc): conv 3x3
    16, three residual stacks (16; 32 stride 2; 64 stride 2) of two 3x3 convs with a 1x1 stride-2
    projection shortcut where the width changes, average pool 8x8, dense 10, softmax."""
    layers = tf.keras.layers
    x_in = layers.Input(shape=(32, 32, 3), batch_size=1, name="image")
    x = layers.Conv2D(16, 3, padding="same", name="conv1")(x_in)
    x = _bn_relu(x, "conv1")
    for i, (filters, stride) in enumerate([(16, 1), (32, 2), (64, 2)], start=1):
        y = layers.Conv2D(filters, 3, strides=stride, padding="same", name=f"s{i}_conv1")(x)
        y = _bn_relu(y, f"s{i}_conv1")
        y = layers.Conv2D(filters, 3, padding="same", name=f"s{i}_conv2")(y)
        y = _bn_relu(y, f"s{i}_conv2", relu=False)
        if stride != 1:
            x = layers.Conv2D(filters, 1, strides=stride, padding="same", name=f"s{i}_proj")(x)
        x = layers.Add(name=f"s{i}_add")([x, y])
        x = layers.ReLU(name=f"s{i}_relu")(x)
    x = layers.AveragePooling2D(pool_size=8, name="avgpool")(x)
    x = layers.Flatten(name="flatten")(x)
    out = layers.Dense(10, activation="softmax", name="fc")(x)
    return tf.keras.Model(x_in, out, name="ic_resnet8")


def ad_autoencoder() -> tf.keras.Model:
    """MLPerf Tiny AD: the dense autoencoder on 640 log-mel features (5 frames x 128 bins):
    4 x dense 128, dense 8, 4 x dense 128 (each with batch norm and ReLU), dense 640."""
    layers = tf.keras.layers
    x_in = layers.Input(shape=(640,), batch_size=1, name="features")
    x = x_in
    for i, units in enumerate([128] * 4 + [8] + [128] * 4, start=1):
        x = layers.Dense(units, name=f"fc{i}")(x)
        x = _bn_relu(x, f"fc{i}")
    out = layers.Dense(640, name="fc10")(x)
    return tf.keras.Model(x_in, out, name="ad_autoencoder")


MLPERF: dict[str, Callable[[], tf.keras.Model]] = {
    "mlperf_kws_ds_cnn_int8.tflite": kws_ds_cnn,
    "mlperf_vww_mobilenet_v1_025_int8.tflite": vww_mobilenet_v1_025,
    "mlperf_ic_resnet8_int8.tflite": ic_resnet8,
    "mlperf_ad_autoencoder_int8.tflite": ad_autoencoder,
}


def convert_int8(model: tf.keras.Model) -> bytes:
    """Full-integer conversion, int8 input and output, per-channel weights; 32 seeded
    standard-normal calibration samples of the model's input shapes (several inputs: a dict by
    input name, as the converter's signature orders its inputs by name, not as the model)."""
    shapes = [tuple(t.shape) for t in model.inputs]
    names = [t.name.split(":")[0] for t in model.inputs]

    def data() -> Iterator[list[np.ndarray] | dict[str, np.ndarray]]:
        rng = np.random.default_rng(SEED)
        for _ in range(32):
            arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
            yield arrays if len(arrays) == 1 else dict(zip(names, arrays, strict=True))

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = data
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return bytes(conv.convert())


def main_mlperf() -> None:
    """Write the four MLPerf Tiny models next to this script."""
    for name, build in MLPERF.items():
        tf.keras.utils.set_random_seed(SEED)
        model = _randomise_bn(build(), np.random.default_rng(SEED))
        data = convert_int8(model)
        (HERE / name).write_bytes(data)
        print(f"wrote {name}: {len(data)} bytes (tensorflow {tf.__version__})")


def mobilenet_v2_224() -> tf.keras.Model:
    """MobileNetV2-1.0 at 224x224x3 as ``keras.applications`` builds it (conv 3x3 stride 2, 17
    inverted-residual blocks with ZeroPadding2D before each stride-2 depthwise, conv 1x1 1280,
    global average pool, dense 1000 + softmax), random weights, batch 1."""
    x_in = tf.keras.layers.Input(shape=(224, 224, 3), batch_size=1, name="image")
    return tf.keras.applications.MobileNetV2(
        alpha=1.0, input_shape=(224, 224, 3), input_tensor=x_in, weights=None
    )


def main_mnv2() -> None:
    """Write ``mobilenet_v2_224_int8.tflite`` next to this script."""
    tf.keras.utils.set_random_seed(SEED)
    model = _randomise_bn(mobilenet_v2_224(), np.random.default_rng(SEED))
    data = convert_int8(model)
    name = "mobilenet_v2_224_int8.tflite"
    (HERE / name).write_bytes(data)
    print(f"wrote {name}: {len(data)} bytes (tensorflow {tf.__version__})")


def two_inputs() -> tf.keras.Model:
    """``models/make_two_inputs.py``'s network in Keras (NHWC): an ``rgb`` 16x16x3 and a
    ``depth`` 16x16x1 branch (conv 3x3 to 8 channels, ReLU each) added, conv 3x3 stride 2 to
    16, conv 3x3 16, global average pool, dense 10; seeded Keras initialisers (issue 29)."""
    layers = tf.keras.layers
    rgb = layers.Input(shape=(16, 16, 3), batch_size=1, name="rgb")
    depth = layers.Input(shape=(16, 16, 1), batch_size=1, name="depth")
    a = layers.Conv2D(8, 3, padding="same", activation="relu", name="rgb_conv")(rgb)
    b = layers.Conv2D(8, 3, padding="same", activation="relu", name="depth_conv")(depth)
    x = layers.Add(name="join")([a, b])
    x = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="conv2")(x)
    x = layers.Conv2D(16, 3, padding="same", activation="relu", name="conv3")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    y = layers.Dense(10, name="head")(x)
    return tf.keras.Model([rgb, depth], y, name="two_inputs")


def main_two_inputs() -> None:
    """Write ``two_inputs_int8.tflite`` next to this script."""
    tf.keras.utils.set_random_seed(SEED)
    data = convert_int8(two_inputs())
    name = "two_inputs_int8.tflite"
    (HERE / name).write_bytes(data)
    print(f"wrote {name}: {len(data)} bytes (tensorflow {tf.__version__})")


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
    if "--mlperf" in sys.argv[1:]:
        main_mlperf()
    elif "--mnv2" in sys.argv[1:]:
        main_mnv2()
    elif "--two-inputs" in sys.argv[1:]:
        main_two_inputs()
    else:
        main()
