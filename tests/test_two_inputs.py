"""Models with several graph inputs (issue 29): import, plan, compile + validate, the inputs.

``models/two_inputs.onnx`` (``models/make_two_inputs.py``: an ``rgb`` 1x3x16x16 and a ``depth``
1x1x16x16 branch added, then two convolutions and a dense head) is chained at operator
granularity: the cut after the input layer carries both inputs to the head board, as any op
chain's cut carries its live tensors. ``tests/test_e2e_two_inputs.py`` runs it on emulated
F405s.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_plan_cli import run_cli

import splitter
from splitter.compile import CompileOptions, compile_model
from splitter.importers import load_chain

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "two_inputs.onnx"
BOARDS = ROOT / "models" / "boards" / "two_inputs2.toml"
SHAPES = {"rgb": (1, 3, 16, 16), "depth": (1, 1, 16, 16)}


def _make_script() -> ModuleType:
    path = ROOT / "models" / "make_two_inputs.py"
    spec = importlib.util.spec_from_file_location("make_two_inputs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_two_inputs"] = module
    spec.loader.exec_module(module)
    return module


def samples(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """``n`` stacked samples of each input, by name."""
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal((n, *s)).astype(np.float32) for k, s in SHAPES.items()}


def test_two_inputs_file_is_what_the_script_builds() -> None:
    assert _make_script().build().SerializeToString() == MODEL.read_bytes()
    assert [i.name for i in onnx.load(MODEL).graph.input] == ["rgb", "depth"]


def test_chain_input_layer_hands_on_both_inputs() -> None:
    """Layer 0 carries both inputs (4096 B); each branch conv reads its own; the supernode
    default takes the op chain for a graph with several inputs."""
    chain = load_chain(MODEL)
    assert chain.granularity == "op"
    first = chain.layers[0]
    assert [t.name for t in first.boundary] == ["rgb", "depth"]
    assert first.cost.out_bytes == first.cost.ram == (3 + 1) * 16 * 16 * 4
    reads = {layer.name: [t.name for t in layer.reads] for layer in chain.layers}
    assert reads["rgb_conv"] == ["rgb"] and reads["depth_conv"] == ["depth"]
    join = next(layer for layer in chain.layers if layer.name == "join")
    assert len(chain.layers[join.index - 1].boundary) == 2  # both branches cross into the add
    assert [t.name for t in join.boundary] == ["join/out"]


def test_plan_splits_and_the_head_receives_both_inputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "plan", str(MODEL), "--target", str(BOARDS), "--json")
    assert code == 0, err
    plan = json.loads(out)
    subs = plan["submodels"]
    assert [s["device"] for s in subs] == ["a", "b"]
    assert [(t["name"], t["shape"]) for t in subs[0]["inputs"]] == [
        ("rgb", [1, 3, 16, 16]),
        ("depth", [1, 1, 16, 16]),
    ]
    assert plan["host_io"]["input"]["bytes"] == 4096  # both inputs sent by the host


def test_python_api_plans_and_compiles_two_inputs(tmp_path: Path) -> None:
    """The public API (``splitter.plan``, ``splitter.compile_model``) with inputs by name."""
    result = splitter.plan(MODEL, BOARDS)
    assert [t.name for t in result.manifest.submodels[0].inputs] == ["rgb", "depth"]
    assert "of 2 inputs" in result.manifest.headline_lines()[1]
    np.savez(tmp_path / "x.npz", **samples(2))
    opts = splitter.CompileOptions(input_files=(str(tmp_path / "x.npz"),), firmware=False)
    res = splitter.compile_model(MODEL, BOARDS, tmp_path / "out", opts)
    assert res.validation is not None and res.validation.passed
    npz = tmp_path / "x.npz"
    assert res.validation.samples[-2:] == (f"file:{npz}[0]", f"file:{npz}[1]")


def test_compile_validates_with_inputs_by_name_and_npz(tmp_path: Path) -> None:
    """compile --input NAME=X.npy per input and an .npz by name: each sample validated, the
    first sub-model's ONNX file takes both inputs and gives onnxruntime's answer."""
    xs = samples(3)
    for name, x in xs.items():
        np.save(tmp_path / f"{name}.npy", x)
    np.savez(tmp_path / "more.npz", **samples(2, seed=2))
    files = (f"rgb={tmp_path / 'rgb.npy'}", f"depth={tmp_path / 'depth.npy'}")
    opts = CompileOptions(force=True, input_files=(*files, str(tmp_path / "more.npz")))
    res = compile_model(MODEL, BOARDS, tmp_path / "out", opts)
    assert res.validation is not None and res.validation.passed
    assert len(res.validation.samples) == 8 + 3 + 2
    first = onnx.load(tmp_path / "out" / "submodels" / "00_a.onnx")
    assert [i.name for i in first.graph.input] == ["rgb", "depth"]
    whole = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    feeds = {k: v[0] for k, v in xs.items()}
    ref = whole.run(None, feeds)[0]
    env = dict(feeds)
    for path in sorted((tmp_path / "out" / "submodels").glob("*.onnx")):
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = {i.name: env[i.name] for i in sess.get_inputs()}
        env.update(zip([o.name for o in sess.get_outputs()], sess.run(None, want), strict=True))
    assert np.array_equal(env["logits"], ref)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (["rgb"], ["no input 'depth'", "--input depth=X.npy"]),
        (["x"], ["inputs rgb, depth", "--input rgb=X.npy", ".npz"]),
        (["rgb", "depth_bad"], ["depth.npy", "input 'depth' needs shape [1, 1, 16, 16]"]),
        (["npz_missing"], ["in.npz", "input 'depth' is missing", "numpy.savez"]),
        (["rgb", "depth_short"], ["different numbers of samples", "rgb 1, depth 2"]),
    ],
)
def test_a_wrong_or_missing_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str], words: list[str]
) -> None:
    """One line naming the file, the input and the fix; exit 2; OUT not written."""
    one = samples(1)
    np.save(tmp_path / "rgb.npy", one["rgb"])
    np.save(tmp_path / "x.npy", one["rgb"])
    np.save(tmp_path / "depth.npy", np.zeros((1, 3, 16, 16), np.float32))
    np.save(tmp_path / "short.npy", samples(2)["depth"])
    np.savez(tmp_path / "in.npz", rgb=one["rgb"])
    args = {
        "rgb": f"rgb={tmp_path / 'rgb.npy'}",
        "x": str(tmp_path / "x.npy"),
        "depth_bad": f"depth={tmp_path / 'depth.npy'}",
        "depth_short": f"depth={tmp_path / 'short.npy'}",
        "npz_missing": str(tmp_path / "in.npz"),
    }
    out = tmp_path / "out"
    cmd = ["compile", str(MODEL), "--target", str(BOARDS), "-o", str(out)]
    for g in given:
        cmd += ["--input", args[g]]
    code, _, err = run_cli(capsys, *cmd)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def _dynamic(path: Path) -> Path:
    """two_inputs.onnx with every input dim but the channels dynamic."""
    model = onnx.load(MODEL)
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        for k in (0, 2, 3):
            dims[k].dim_param = f"{value.name}_{k}"
    onnx.save(model, path)
    return path


def test_input_shape_per_input_and_static_dims_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _dynamic(tmp_path / "dyn.onnx")
    code, _, err = run_cli(capsys, "inspect", str(path), "--input-shape", "rgb=1x3x16x16")
    assert code == 2 and "input 'depth'" in err and "--input-shape depth=" in err
    code, out, err = run_cli(
        capsys, "plan", str(path), "--target", str(BOARDS), "--json",
        "--input-shape", "rgb=1x3x16x16", "--input-shape", "depth=1x1x16x16",
    )  # fmt: skip
    assert code == 0, err
    ins = json.loads(out)["submodels"][0]["inputs"]
    assert [t["shape"] for t in ins] == [[1, 3, 16, 16], [1, 1, 16, 16]]
    code, _, err = run_cli(
        capsys, "inspect", str(path),
        "--input-shape", "rgb=1x3x16x16", "--input-shape", "depth=1x3x16x16",
    )  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--input-shape depth=1x3x16x16" in lines[0]
    assert "depth_0x1xdepth_2xdepth_3" in lines[0]  # the file's static channel dim 1


def test_supernode_regions_still_need_one_input() -> None:
    """The super-node cut itself reads one tensor; build_chain never asks it for several."""
    from splitter.errors import InputFileError
    from splitter.graph.supernodes import find_regions
    from splitter.importers import load_graph

    with pytest.raises(InputFileError, match="--granularity op"):
        find_regions(load_graph(MODEL))


def test_library_mode_takes_both_inputs_through_submit(tmp_path: Path) -> None:
    """--app library: sub-model 0 has both input slots, which splitter_submit fills from one
    buffer in plan.json order (splitter_input_bytes() sums them, runtime.c); standalone
    compiles each --input sample the same way."""
    boards = tmp_path / "boards.toml"
    text = BOARDS.read_text()
    boards.write_text(text.replace('flash = "30 KiB"', "").replace('flash = "34 KiB"', ""))
    split = (0, 0, 0, 0, 0, 1, 1)
    opts = CompileOptions(force=True, validate=False, app="library", assignment=split)
    res = compile_model(MODEL, boards, tmp_path / "lib", opts)
    plan_c = (res.out_dir / "firmware" / "a" / "plan.c").read_text()
    assert "sm_00_in[2] = {{ 0u, 3072u }, { 3072u, 1024u }}" in plan_c
    xs = samples(2)
    for name, x in xs.items():
        np.save(tmp_path / f"{name}.npy", x)
    opts = CompileOptions(
        force=True, validate=False, app="standalone", assignment=split,
        input_files=(f"depth={tmp_path / 'depth.npy'}", f"rgb={tmp_path / 'rgb.npy'}"),
    )  # fmt: skip
    res = compile_model(MODEL, boards, tmp_path / "alone", opts)
    text = (res.out_dir / "firmware" / "a" / "app_samples.c").read_text()
    assert "app_n_samples = 2u" in text
    body = text.split("{", 1)[1].split("}", 1)[0]
    data = bytes(int(b, 16) for b in body.replace(",", " ").split())
    want = b"".join(xs[n][k].astype("<f4").tobytes() for k in range(2) for n in ("rgb", "depth"))
    assert data == want


def test_two_graph_inputs_used_to_be_refused_now_import(tmp_path: Path) -> None:
    """The issue's defect: a model with two graph inputs was refused; a tiny one now chains."""
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "add2",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "add2.onnx")
    chain = load_chain(tmp_path / "add2.onnx")
    assert [t.name for t in chain.layers[0].boundary] == ["a", "b"]
    assert [t.name for t in chain.layers[1].reads] == ["a", "b"]


@pytest.mark.parametrize("name", ["two_inputs.onnx", "two_inputs_int8.tflite"])
def test_generated_c_matches_the_runtime_cut_by_cut(name: str, tmp_path: Path) -> None:
    """Every layer alone as a sub-model (the input layer too: it passes both inputs on), built
    for the host with gcc (ASan + UBSan); each sub-model reads its inputs packed in plan.json
    order and must give the runtime's outputs (onnxruntime to 1e-4, LiteRT int8 bit for bit)."""
    import subprocess

    from test_codegen_support import build_host

    from splitter.codegen.model_c import generate_device_c
    from splitter.importers import load_model
    from splitter.slicing.boundaries import cuts_from_ranges
    from splitter.slicing.onnx_slice import slice_onnx
    from splitter.slicing.tflite_slice import slice_tflite
    from splitter.slicing.validate import make_runner

    path = ROOT / "models" / name
    chain = load_chain(path)
    assert chain.graph is not None and len(chain.graph.inputs) == 2
    ranges = [(j, j) for j in range(len(chain))]
    gen = generate_device_c(chain, [(k, a, b) for k, (a, b) in enumerate(ranges)], "solo")
    exe = build_host(gen, tmp_path)
    cuts = cuts_from_ranges(chain, [(0, a, b) for a, b in ranges], ["solo"])
    slicer = slice_onnx if path.suffix == ".onnx" else slice_tflite
    subs = slicer(load_model(path), cuts)
    rng = np.random.default_rng(4)
    env: dict[str, np.ndarray] = {}
    for t in (chain.graph.tensors[n] for n in chain.graph.inputs):
        if t.dtype == "int8":
            env[t.name] = rng.integers(-128, 128, t.shape).astype(np.int8)
        else:
            env[t.name] = rng.standard_normal(t.shape).astype(np.float32)
    for k, (sub, cut) in enumerate(zip(subs, cuts, strict=True)):
        runner = make_runner(sub.data, path.suffix)
        ref = runner.run({n: env[n] for n in cut.input_names})
        (tmp_path / "in.bin").write_bytes(b"".join(env[n].tobytes() for n in cut.input_names))
        res = subprocess.run(
            [str(exe), str(k), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        got = (tmp_path / "out.bin").read_bytes()
        want = [np.ascontiguousarray(ref[n]) for n in cut.output_names]
        offset = 0
        for n, w in zip(cut.output_names, want, strict=True):
            mine = np.frombuffer(got[offset : offset + w.nbytes], w.dtype).reshape(w.shape)
            offset += w.nbytes
            if w.dtype == np.int8:
                assert np.array_equal(mine, w), (name, k, n)
            else:
                assert float(np.max(np.abs(mine - w))) <= 1e-4, (name, k, n)
        env.update(ref)
    assert len(subs) == len(chain)


def test_int8_tflite_two_inputs_split_and_validate_bit_exact(tmp_path: Path) -> None:
    """The int8 TFLite twin (converter order: depth first): both inputs reach sub-model 0, the
    split validates bit for bit against LiteRT on seeded inputs and on an .npz by name."""
    path = ROOT / "models" / "two_inputs_int8.tflite"
    chain = load_chain(path)
    assert chain.graph is not None
    assert [n.split("_")[-1] for n in chain.graph.inputs] == ["depth:0", "rgb:0"]
    rng = np.random.default_rng(8)
    arrays = {
        n: rng.integers(-128, 128, (2, *chain.graph.tensors[n].shape)).astype(np.int8)
        for n in chain.graph.inputs
    }
    np.savez(tmp_path / "x.npz", **arrays)
    opts = CompileOptions(
        force=True, firmware=False, input_files=(str(tmp_path / "x.npz"),),
        assignment=(0, 0, 0, 0, 1, 1, 1, 1),
    )  # fmt: skip
    res = compile_model(path, BOARDS, tmp_path / "out", opts)
    assert [t.name for t in res.manifest.submodels[0].inputs] == list(chain.graph.inputs)
    stats = res.validation.outputs[0] if res.validation else None
    assert stats is not None and stats.exact and stats.max_abs == 0.0
    assert res.validation is not None and len(res.validation.samples) == 8 + 2


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--quantize", ["--quantize int8 calibrates a model with one graph input", "has 2"]),
        ("--data", ["--data (a labelled set) takes a model with one input", "--input NAME=X.npy"]),
    ],
)
def test_what_needs_one_input_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, words: list[str]
) -> None:
    """--quantize int8 (calibration) and --data (labelled accuracy) take one input: one line,
    exit 2, OUT not written."""
    np.save(tmp_path / "cal.npy", samples(2)["rgb"])
    np.savez(tmp_path / "d.npz", **samples(2))
    extra = {
        "--quantize": ["--quantize", "int8", "--calibration-data", str(tmp_path / "cal.npy")],
        "--data": ["--data", str(tmp_path / "d.npz")],
    }[flag]
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys, "compile", str(MODEL), "--target", str(BOARDS), "-o", str(out), *extra
    )
    lines = err.strip().splitlines()
    assert code == 2 and all(w in lines[-1] for w in words), err
    assert lines[-1].startswith("splitter: error:") and not out.exists()


def test_segments_refuse_several_inputs_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LO-SC segments on one board carry one tensor between units: refused, naming compile."""
    one = tmp_path / "one.toml"
    one.write_text('[link]\nbaud = 115200\n[[device]]\nname = "a"\nmcu = "STM32F405RG"\n')
    out = tmp_path / "seg"
    code, _, err = run_cli(capsys, "segment", str(MODEL), "--target", str(one), "-o", str(out))
    lines = err.strip().splitlines()
    assert code == 2 and "several graph inputs" in lines[-1] and "splitter compile" in lines[-1]
    assert not out.exists()
