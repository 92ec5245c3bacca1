"""The nine classic model-zoo graphs shipped in the onnx wheel (opset 9, upgraded on load).

``onnx/backend/test/data/light/`` holds AlexNet, DenseNet-121, Inception v1/v2, ResNet-50,
ShuffleNet, SqueezeNet, VGG-19 and ZFNet-512 with every weight a ``ConstantOfShape`` of 0.02:
every one is inspected and planned over ``models/boards/zoo_large.toml`` (large inline parts).
With constant weights every class gets the same score, so the compile tests first give the
same graph seeded random weights (:func:`random_weights`, still opset 9), then compile it with
validation (no firmware: hundreds of MiB of C) and check the outputs depend on the input.
Measured on the 2-core development machine (2026-11-23): compile 1.0 s (SqueezeNet), 1.1 s
(ShuffleNet), 2.6 s (Inception v1), 10 s (AlexNet, 244 MB of weights).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from test_plan_cli import run_cli

from splitter.compile import CompileOptions, compile_model

ROOT = Path(__file__).resolve().parents[1]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
BOARDS = ROOT / "models" / "boards" / "zoo_large.toml"
ZOO = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)
COMPILED = ("squeezenet", "shufflenet", "inception_v1", "bvlc_alexnet")


def zoo_path(name: str) -> Path:
    path = LIGHT / f"light_{name}.onnx"
    assert path.is_file(), f"{path} missing: the onnx wheel ships it (pip install onnx)"
    return path


@pytest.mark.parametrize("name", ZOO)
def test_zoo_inspect_and_plan(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = zoo_path(name)
    code, out, err = run_cli(capsys, "inspect", str(path), "--format", "json")
    assert code == 0, err
    assert "opset 9 upgraded on load to opset 17" in err
    report = json.loads(out)
    layers = report["layers"]
    assert layers[0]["op"] == "input" and layers[0]["output_shape"][1:] == [3, 224, 224]
    assert layers[-1]["output_shape"] in ([1, 1000], [1, 1000, 1, 1])
    assert report["totals"]["macs"] > 10**8  # every one is an ImageNet CNN
    code, out, err = run_cli(capsys, "plan", str(path), "--target", str(BOARDS), "--json")
    assert code == 0, err
    plan = json.loads(out)
    # proved optimal unless the firmware code made the relaxed plan overflow a device (the
    # planner then repairs it, splitter/partition/planner.py plan_chain): every plan still fits
    code = [d["code_bytes"] for d in plan["devices"]]
    assert plan["optimal"] is True or any(code)
    assert plan["model"]["layers"] == len(layers)
    for d in plan["devices"]:
        assert d["flash_used"] + d["code_bytes"] <= d["flash_budget"]
    subs = plan["submodels"]
    assert len(subs) >= 2 and subs[0]["first"] == 0 and subs[-1]["last"] == len(layers) - 1
    for k in range(1, len(subs)):
        assert subs[k]["first"] == subs[k - 1]["last"] + 1


def random_weights(src: Path, dst: Path, seed: int = 0) -> None:
    """``src`` with every ``ConstantOfShape`` weight replaced by a seeded random initializer.

    Normal with variance ``1 / fan_in`` for tensors of rank >= 2 (fan_in = product of the dims
    after the first), uniform in [0.5, 1.5] for BatchNorm scales and variances, uniform in
    [-0.1, 0.1] for the other rank-1 tensors (biases, shifts, means), so activations neither
    vanish nor saturate the final softmax; the graph and its opset are unchanged.
    """
    model = onnx.load(str(src))
    rng = np.random.default_rng(seed)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    positive = {
        n.input[k] for n in model.graph.node if n.op_type == "BatchNormalization" for k in (1, 4)
    }
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep.append(node)
            continue
        name = node.output[0]
        shape = tuple(int(d) for d in inits[node.input[0]])
        if len(shape) >= 2:
            scale = np.float32(np.sqrt(1 / np.prod(shape[1:])))
            value = rng.standard_normal(shape, dtype=np.float32) * scale
        else:
            low, high = (0.5, 1.5) if name in positive else (-0.1, 0.1)
            value = rng.uniform(low, high, shape).astype(np.float32)
        model.graph.initializer.append(numpy_helper.from_array(value, name))
        # IR version 3 (these files) lists every initializer among the graph inputs
        model.graph.input.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)
        )
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = {i for n in keep for i in n.input}
    for field in (model.graph.initializer, model.graph.input):
        unused = [v for v in field if v.name not in used and v.name.endswith("__SHAPE")]
        for value in unused:
            field.remove(value)
    onnx.save(model, str(dst))


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.parametrize("name", COMPILED)
def test_zoo_compile_validated(name: str, tmp_path: Path) -> None:
    model = tmp_path / f"{name}.onnx"
    random_weights(zoo_path(name), model)
    result = compile_model(model, BOARDS, tmp_path / "out", CompileOptions(firmware=False))
    assert result.chain.graph is not None
    assert result.chain.graph.metadata["upgraded_from_opset"] == "9"
    assert len(result.submodels) >= 2
    report = result.validation
    assert report is not None and report.passed
    assert report.normalisation  # the upgraded model was run against the opset-9 file
    for stats in (*report.outputs, *report.boundaries, *report.normalisation):
        assert stats.max_rel <= 1e-4, stats
    # the check has teeth: the logits (softmax input) depend on the input, weights are random
    assert not np.allclose(*_logits(model, (1, 2)), rtol=1e-3, atol=1e-6)
    assert result.chain.graph.metadata["opset"] == "17"  # compile loaded it with load_model


def _logits(path: Path, seeds: tuple[int, ...]) -> list[np.ndarray]:
    """The input of the model's final Softmax (onnxruntime) on one seeded normal image per seed
    (one session for all of them)."""
    model = onnx.load(str(path))
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(softmax.input[0]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return [np.asarray(session.run([softmax.input[0]], {name: _image(seed)})[0]) for seed in seeds]


def _image(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 224, 224), np.float32)
