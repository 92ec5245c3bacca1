"""Every models/*.tflite goes through load_chain and ``splitter inspect`` (real CLI process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_tflite_support import MODELS, TFLITE_MODELS, set_shape_signature

from splitter.importers import load_chain
from splitter.importers.tflite_import import load_tflite

IDS = [p.name for p in TFLITE_MODELS]


def _splitter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitter", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("path", TFLITE_MODELS, ids=IDS)
def test_load_chain(path: Path) -> None:
    chain = load_chain(path)
    graph = load_tflite(path)
    assert chain.layers[0].kind == "input"
    assert chain.layers[0].output.name == graph.inputs[0]
    assert chain.layers[-1].output.name == graph.outputs[0]
    assert sum(len(layer.ops) for layer in chain.layers) == len(graph.ops)
    weight_bytes = sum(w.nbytes for op in graph.ops for w in op.weights.values())
    assert sum(c.flash for c in chain.costs) >= weight_bytes


def test_int8_chain_uses_one_byte_activations() -> None:
    chain = load_chain(MODELS / "tiny_cnn_int8.tflite")
    first = chain.layers[1]
    assert first.output.dtype == "int8" and first.output.shape == (1, 25, 10, 8)
    assert first.cost.out_bytes == int(np.prod(first.output.shape))


@pytest.mark.parametrize("path", TFLITE_MODELS, ids=IDS)
def test_inspect_cli_json(path: Path) -> None:
    r = _splitter("inspect", str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["totals"]["layers"] == len(load_chain(path)) == len(report["layers"])


def test_inspect_cli_bad_tflite_exit_2(tmp_path: Path) -> None:
    data = (MODELS / "tiny_cnn_int8.tflite").read_bytes()
    p = tmp_path / "cut.tflite"
    p.write_bytes(data[: len(data) // 2])
    r = _splitter("inspect", str(p))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert str(p) in r.stderr


def test_inspect_cli_dynamic_shape_needs_input_shape(tmp_path: Path) -> None:
    buf = bytearray((MODELS / "sine_float.tflite").read_bytes())
    set_shape_signature(buf, 0, 1, -1)
    p = tmp_path / "dyn.tflite"
    p.write_bytes(bytes(buf))
    r = _splitter("inspect", str(p))
    assert r.returncode == 2 and "--input-shape" in r.stderr
    r = _splitter("inspect", str(p), "--input-shape", "serving_default_dense_input:0=2x1")
    assert r.returncode == 0, r.stderr
