"""Host equivalence: generated C (gcc, ASan+UBSan, -Wall -Werror) vs onnxruntime per sub-model.

Every sub-model is cut from the original ONNX file with ``onnx.utils.extract_model`` at the
chain's boundary tensor names and run by onnxruntime on the same input as the generated C;
outputs must agree to ``max|c - ref| <= 1e-4 * max(1, max|ref|)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from test_codegen_support import Net, build_host, planner, run_host
from test_slice_helpers import ensure_model

from splitter.codegen.model_c import generate_device_c
from splitter.ir import Chain

TOL = 1e-4


def net_convs() -> Net:
    """Convolutions of every flavour, pools, batchnorm, pad, dense, softmax."""
    n = Net("convs", (1, 3, 11, 11))
    x = n.conv("x", 3, 8, 3, pad=1, act="relu")  # blocked 3x3, 4 oc x 2 px
    x = n.conv(x, 8, 8, 3, stride=2, pad=1, groups=8, act="relu")  # depthwise stride 2 pairs
    x = n.conv(x, 8, 6, 3, pad=1, groups=2)  # generic grouped, 4-pixel interior path
    x = n.conv(x, 6, 7, 2, pad=0, dil=2)  # blocked, kw != 3 with dilation, 3 leftover rows
    x = n.conv(x, 7, 8, 1, act="relu")
    x = n.conv(x, 8, 6, 3, stride=2, pad=1, dil=1, act="relu6")  # remainder rows
    x = n.conv(x, 6, 6, 3, pad=2, dil=2, groups=6, act="clip", act_min=-0.5, act_max=0.7)
    x = n.conv(x, 6, 10, 1, act="leaky_relu", alpha=0.1)  # pointwise, 10 = 2 blocks + 2 rows
    x = n.conv(x, 10, 10, 3, pad=1, groups=10, act="hardswish", bias=False)  # depthwise 3x3
    x = n.conv(x, 10, 8, 5, pad=2, groups=2, act="sigmoid")  # grouped generic
    x = n.conv(x, 8, 8, 3, stride=1, pad=1, groups=8, dil=1, act="tanh")
    x = n.conv(x, 8, 8, 2, stride=2, pad=0, groups=4)  # generic grouped, even kernel
    x = n.batchnorm(x, 8)
    x = n.pad(x, (0, 0, 1, 2, 0, 0, 2, 1), 0.25)
    x = n.pool("maxpool", x, 3, 2, pad=1)
    x = n.pool("avgpool", x, 2, 1, pad=1, cip=1)
    x = n.pool("avgpool", x, 3, 1, pad=1, cip=0)
    x = n.global_avgpool(x)
    x = n.reshape(x, (1, 8))
    x = n.dense(x, 8, 7, act="relu")
    x = n.dense(x, 7, 5)
    n.softmax(x, axis=-1)
    return n


def net_elementwise() -> Net:
    """Super-nodes (residual add, concat, matmul with transpose), broadcasts and activations."""
    n = Net("elementwise", (1, 4, 6, 6), seed=1)
    x = n.conv("x", 4, 8, 3, pad=1, act="relu")
    with n.super():  # residual
        a = n.conv(x, 8, 8, 3, pad=1, act="relu")
        b = n.conv(a, 8, 8, 1)
        n.binary("add", b, x, act="relu")
    with n.super():  # two branches concatenated on channels
        x = n.last
        a = n.conv(x, 8, 4, 1, act="relu")
        b = n.conv(x, 8, 4, 3, pad=1)
        n.concat([a, b], axis=1)
    x = n.binary("mul", n.last, n.rand(8, 1, 1) + 1.0)
    x = n.binary("sub", x, n.rand(1, 6, 1))
    x = n.binary("div", x, np.abs(n.rand(6)) + 0.5, act="tanh")
    x = n.binary("add", x, n.rand(1, 8, 6, 6))
    acts: list[tuple[str, dict[str, float]]] = [
        ("sigmoid", {}),
        ("hardswish", {}),
        ("leaky_relu", {"alpha": 0.2}),
        ("hardsigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("tanh", {}),
        ("clip", {"act_min": 0.1, "act_max": 0.6}),
        ("relu6", {}),
        ("relu", {}),
    ]
    for kind, p in acts:
        x = n.unary(kind, x, **p)
    with n.super():  # matmul of a feature view with its transpose
        a = n.reshape(x, (8, 36))
        b = n.transpose(a, (1, 0))
        n.matmul(a, b)
    x = n.reshape(n.last, (1, 1, 8, 8))
    x = n.mean(x, (2, 3), 1)
    x = n.reshape(x, (1, 1))
    n.softmax(x, axis=1)
    return n


def sub_model_ref(
    path: Path, chain: Chain, first: int, last: int, work: Path
) -> ort.InferenceSession:
    """onnxruntime session of layers first..last cut from the original file."""
    cut = work / f"sub_{first}_{last}.onnx"
    src = chain.layers[first]
    in_name = src.output.name if src.input is None else src.input.name
    onnx.utils.extract_model(str(path), str(cut), [in_name], [chain.layers[last].output.name])
    return ort.InferenceSession(str(cut), providers=["CPUExecutionProvider"])


def split3(n_layers: int) -> list[tuple[int, int]]:
    """Three contiguous sub-models covering layers 0..n-1."""
    a, b = n_layers // 3, 2 * n_layers // 3
    return [(0, a), (a + 1, b), (b + 1, n_layers - 1)]


def check_model(net: Net, tmp_path: Path, source: str) -> None:
    """Device 0 hosts sub-models 0 and 2 (shared arena), device 1 hosts sub-model 1.

    ``source`` ``"hand"`` uses the canonical chain built next to the ONNX graph, ``"importer"``
    imports the saved ONNX file with ``load_chain`` (folding and fusion included).
    """
    from splitter.importers import load_chain

    model = net.onnx_model()
    path = tmp_path / f"{net.name}.onnx"
    onnx.save(model, str(path))
    chain = net.chain(model) if source == "hand" else load_chain(path)
    ranges = split3(len(chain))
    devices = {"dev0": [(0, *ranges[0]), (2, *ranges[2])], "dev1": [(1, *ranges[1])]}
    exes, rows = {}, {}
    for dev, rs in devices.items():
        gen = generate_device_c(chain, rs, dev, planner=planner())
        exes[dev] = build_host(gen, tmp_path / dev)
        rows.update({sm: (dev, k) for k, (sm, _, _) in enumerate(rs)})
    x = np.random.default_rng(7).standard_normal(net.input_shape).astype(np.float32)
    for sm, (first, last) in enumerate(ranges):
        sess = sub_model_ref(path, chain, first, last, tmp_path)
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        dev, row = rows[sm]
        got = run_host(exes[dev], row, x, tmp_path / dev)
        err = float(np.max(np.abs(got - ref.ravel())))
        assert err <= TOL * max(1.0, float(np.max(np.abs(ref)))), (sm, first, last, err)
        x = ref


@pytest.mark.parametrize("source", ["hand", "importer"])
@pytest.mark.parametrize("make", [net_convs, net_elementwise], ids=["convs", "elementwise"])
def test_codegen_host_matches_onnxruntime(make, source: str, tmp_path: Path) -> None:
    check_model(make(), tmp_path, source)


def test_codegen_host_every_layer_alone(tmp_path: Path) -> None:
    """Each layer of the conv model as its own sub-model on one device (odd and even slots)."""
    net = net_convs()
    model = net.onnx_model()
    path = tmp_path / "convs.onnx"
    onnx.save(model, str(path))
    chain = net.chain(model)
    rs = [(j, j, j) for j in range(1, len(chain))]
    exe = build_host(generate_device_c(chain, rs, "solo", planner=planner()), tmp_path / "solo")
    x = np.random.default_rng(3).standard_normal(net.input_shape).astype(np.float32)
    for k, (_, j, _) in enumerate(rs):
        sess = sub_model_ref(path, chain, j, j, tmp_path)
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        got = run_host(exe, k, x, tmp_path / "solo")
        assert np.max(np.abs(got - ref.ravel())) <= TOL * max(1.0, float(np.max(np.abs(ref)))), j
        x = ref


MODELS_DIR = Path(__file__).resolve().parent.parent / "models"


def on_demand_models() -> set[str]:
    """Models ``models/build.py`` builds on demand: the ``/<name>.onnx`` lines of
    ``models/.gitignore`` (too large to commit, e.g. ``mobilenet_v2_224``)."""
    ignore = MODELS_DIR / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    return {ln.strip().lstrip("/")[: -len(".onnx")] for ln in lines if ln.strip().endswith(".onnx")}


#: Every ONNX model of the project: the committed ``models/*.onnx`` plus the on-demand ones, so a
#: model added to ``models/`` is covered with no edit here. Heaviest first (MobileNetV2-224: 14 M
#: weights, ~20 s of gcc parsing the literals) so pytest-xdist does not leave it for last.
#: QDQ int8 models are left to tests/test_qdq.py (int8 boundaries, compared in quantisation steps),
#: models with several graph inputs to tests/test_two_inputs.py (this sweep feeds one array).
SEVERAL_INPUTS = {"two_inputs"}
REAL_MODELS = sorted(
    {p.stem for p in MODELS_DIR.glob("*.onnx") if not p.stem.endswith("_qdq")} - SEVERAL_INPUTS
    | on_demand_models(),
    key=lambda n: (n not in on_demand_models(), n),
)


def test_codegen_host_real_models_cover_the_models_folder() -> None:
    """The list is not silently empty or stale: it holds the models the thesis tables use."""
    must = {"tiny_cnn", "kws_cnn", "kws_ds_cnn", "mobilenet_v1_025", "mobilenet_v1_030"}
    must |= {"mobilenet_v1_035", "mobilenet_v2_224", "resnet8", "voxceleb", "yamnet_256"}
    assert must <= set(REAL_MODELS), must - set(REAL_MODELS)


#: models whose host build is the slowest and repeats what the others check (``make test-all``)
EXTENDED = {"mobilenet_v2_224"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.extended) if n in EXTENDED else n for n in REAL_MODELS],
)
def test_codegen_host_real_models(name: str, tmp_path: Path) -> None:
    """models/<name>.onnx through the real importer, split in three sub-models on two devices;
    the generator's weights/arena bytes equal the chain's FLASH_j sum / max RAM_j."""
    from splitter.importers import load_chain

    path = ensure_model(name)  # builds the on-demand ones (models/build.py) when missing
    chain = load_chain(path)
    ranges = split3(len(chain))
    devices = {"dev0": [(0, *ranges[0]), (2, *ranges[2])], "dev1": [(1, *ranges[1])]}
    exes, rows = {}, {}
    for dev, rs in devices.items():
        gen = generate_device_c(chain, rs, dev)
        layers = [chain.layers[j] for _, a, b in rs for j in range(a, b + 1)]
        assert gen.weights_bytes == sum(layer.cost.flash for layer in layers)
        assert gen.arena_bytes == max(layer.cost.ram for layer in layers)
        exes[dev] = build_host(gen, tmp_path / dev)
        rows.update({sm: (dev, k) for k, (sm, _, _) in enumerate(rs)})
    shape = chain.layers[0].output.shape
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    for sm, (first, last) in enumerate(ranges):
        sess = sub_model_ref(path, chain, first, last, tmp_path)
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        dev, row = rows[sm]
        got = run_host(exes[dev], row, x, tmp_path / dev)
        err = float(np.max(np.abs(got - ref.ravel())))
        assert err <= TOL * max(1.0, float(np.max(np.abs(ref)))), (name, sm, first, last, err)
        x = ref
