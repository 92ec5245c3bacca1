"""Regression tests of issue 30: every file splitter reads is held to its domain. Each case was
accepted silently (or crashed inside splitter) before; now it is one line naming the file and
the field, exit code 2, no traceback."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest
from ai_edge_litert import schema_py_generated as schema

from splitter.cli import _run
from splitter.compile import CompileOptions, compile_model
from splitter.importers.tflite_writer import pack_model

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
INT8 = MODELS / "mlperf_kws_ds_cnn_int8.tflite"
FLOAT_TFLITE = MODELS / "tiny_cnn_float.tflite"
BOARDS = str(MODELS / "boards" / "e2e_tiny2.toml")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run the CLI in-process: exit code and the stderr line."""
    code = _run(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def assert_one_line(code: int, err: str, *needles: str) -> None:
    """Exit code 2, one line, no traceback, naming every needle."""
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("splitter: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)


# --- TFLite ------------------------------------------------------------------------------------


def tflite_variant(tmp: Path, src: Path, edit: Callable[[Any], None]) -> Path:
    """``src`` unpacked with the TFLite schema's object API, edited, packed to ``tmp``."""
    model = schema.ModelT.InitFromPackedBuf(src.read_bytes(), 0)
    edit(model)
    out = tmp / f"bad_{src.name}"
    out.write_bytes(pack_model(model))
    return out


def _weight_tensor(model: Any) -> Any:
    """The first tensor with a non-empty buffer (a weight)."""
    sg = model.subgraphs[0]
    return next(t for t in sg.tensors if t.buffer and model.buffers[t.buffer].data is not None)


def test_tflite_buffer_index_past_the_buffers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flipped byte in a tensor's ``buffer`` reached an IndexError in the slicer's
    ``_copy_buffer``; the index is checked at import."""

    def edit(m: Any) -> None:
        _weight_tensor(m).buffer = len(m.buffers) + 3

    bad = tflite_variant(tmp_path, FLOAT_TFLITE, edit)
    code, err = cli(capsys, "compile", str(bad), "--target", BOARDS, "-o", str(tmp_path / "o"))
    assert_one_line(code, err, bad.name, ".buffer =", "buffers")


@pytest.mark.parametrize("scale", [math.nan, math.inf, 0.0, -0.5])
@pytest.mark.parametrize("which", ["input", "weight"])
def test_tflite_int8_scale_outside_its_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scale: float, which: str
) -> None:
    def edit(m: Any) -> None:
        sg = m.subgraphs[0]
        t = sg.tensors[sg.inputs[0]] if which == "input" else _weight_tensor(m)
        t.quantization.scale = [scale] * len(t.quantization.scale)

    bad = tflite_variant(tmp_path, INT8, edit)
    code, err = cli(capsys, "inspect", str(bad))
    assert_one_line(code, err, bad.name, "quantization scale")


def test_tflite_zero_point_outside_int8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(m: Any) -> None:
        sg = m.subgraphs[0]
        sg.tensors[sg.inputs[0]].quantization.zeroPoint = [100000]

    bad = tflite_variant(tmp_path, INT8, edit)
    code, err = cli(capsys, "inspect", str(bad))
    assert_one_line(code, err, bad.name, "zero_point 100000", "-128..127")


@pytest.mark.parametrize("options_type", [schema.BuiltinOptions.Pool2DOptions, 250])
def test_tflite_corrupt_builtin_options_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options_type: int
) -> None:
    def edit(m: Any) -> None:
        op = m.subgraphs[0].operators[0]  # CONV_2D
        op.builtinOptionsType = options_type

    bad = tflite_variant(tmp_path, FLOAT_TFLITE, edit)
    code, err = cli(capsys, "inspect", str(bad))
    assert_one_line(code, err, bad.name, "builtin_options_type")


def test_tflite_absurd_vector_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The length of tensor 0's ``shape`` vector set to 2**30: it would run past the end."""
    import tflite

    buf = bytearray(FLOAT_TFLITE.read_bytes())
    tensor = tflite.Model.GetRootAs(bytes(buf), 0).Subgraphs(0).Tensors(0)
    start = tensor._tab.Vector(tensor._tab.Offset(4))  # shape: vtable slot 4
    buf[start - 4 : start] = (2**30).to_bytes(4, "little")
    bad = tmp_path / "long.tflite"
    bad.write_bytes(bytes(buf))
    code, err = cli(capsys, "inspect", str(bad))
    assert_one_line(code, err, bad.name, "tensor #0.shape", "past the end")


# --- ONNX --------------------------------------------------------------------------------------


def onnx_variant(tmp: Path, op_type: str, name: str, value: int) -> Path:
    """tiny_cnn.onnx with attribute ``name`` of its first ``op_type`` node set to ``value``."""
    model = onnx.load(str(MODELS / "tiny_cnn.onnx"))
    node = next(n for n in model.graph.node if n.op_type == op_type)
    for a in node.attribute:
        if a.name == name:
            node.attribute.remove(a)
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))
    out = tmp / f"{op_type}_{name}.onnx"
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize(("op_type", "name"), [("MaxPool", "ceil_mode"), ("Gemm", "transB")])
def test_onnx_flag_attribute_outside_its_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], op_type: str, name: str
) -> None:
    bad = onnx_variant(tmp_path, op_type, name, 7)
    code, err = cli(capsys, "plan", str(bad), "--target", BOARDS)
    assert_one_line(code, err, bad.name, f"{name} = 7", "0 or 1")


def test_onnx_input_shape_contradicting_static_dims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tiny_cnn's input is 1x1x28x28 in the file; 1x1x32x32 passed import and planning and
    failed inside onnxruntime at validation."""
    model = str(MODELS / "tiny_cnn.onnx")
    code, err = cli(
        capsys, "compile", model, "--target", BOARDS, "--input-shape", "input=1x1x32x32",
        "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert_one_line(code, err, "tiny_cnn.onnx", "input=1x1x32x32", "1x1x28x28")
    assert not (tmp_path / "o").exists()


# --- compile outputs: tampered generated files ---------------------------------------------------


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled") / "out"
    compile_model(MODELS / "tiny_cnn.onnx", BOARDS, out, CompileOptions(validate=False))
    return out


@pytest.fixture
def out(compiled: Path, tmp_path: Path) -> Iterator[Path]:
    copy = tmp_path / "out"
    shutil.copytree(compiled, copy)
    yield copy


def _edit_json(path: Path, edit: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def test_edited_generated_file_is_refused_without_the_flag(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ld = out / "firmware" / "a" / "part.ld"
    ld.write_text(ld.read_text() + "/* mine */\n")
    code, err = cli(capsys, "build", str(out), "--no-emulator")
    assert_one_line(code, err, "firmware/a/part.ld", "edited", "--allow-edited")


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--emulate", "-n", "1"],
        ["calibrate"],
        ["emulate", "--duration", "0.1"],
        ["run", "--emulate", "--input", "x.npy"],
    ],
    ids=["bench", "calibrate", "emulate", "run"],
)
def test_every_command_reading_out_checks_its_hashes(
    out: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """``bench`` and ``calibrate`` read OUT's firmware and plan like ``build``, ``flash`` and
    ``run``: an edited generated file is refused before anything runs."""
    plan = out / "plan.json"
    plan.write_text(plan.read_text().replace('"schema"', ' "schema"', 1))
    code, err = cli(capsys, argv[0], str(out), *argv[1:])
    assert_one_line(code, err, "plan.json", "edited", "--allow-edited")


def test_wiring_part_changed(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wiring = out / "firmware" / "wiring.json"
    _edit_json(wiring, lambda d: d["devices"][0].update(part="STM32F446RE"))
    code, err = cli(capsys, "build", str(out), "--no-emulator")
    assert_one_line(code, err, "wiring.json", "edited")
    code, err = cli(capsys, "build", str(out), "--no-emulator", "--allow-edited")
    assert_one_line(code, err, "wiring.json", "devices[0].part", "STM32F446RE", "STM32F405RG")


def test_wiring_both_ends_of_a_link_clients(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(d: Any) -> None:
        for dev in d["devices"]:
            for ln in dev["links"]:
                if ln["peer"] != "host":
                    ln["server"] = False

    _edit_json(out / "firmware" / "wiring.json", edit)
    code, err = cli(capsys, "build", str(out), "--no-emulator", "--allow-edited")
    assert_one_line(code, err, "wiring.json", ".server", "both ends")


def test_part_ld_length_not_a_number(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ld = out / "firmware" / "b" / "part.ld"
    ld.write_text(ld.read_text().replace("LENGTH = 131072", "LENGTH = lots", 1))
    code, err = cli(capsys, "build", str(out), "--no-emulator", "--allow-edited")
    assert_one_line(code, err, "part.ld", "RAM", "LENGTH = 'lots'", "not a number")


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("plan.json", lambda b: b"\xef\xbb\xbf" + b),
        ("firmware/wiring.json", lambda b: b"\xef\xbb\xbf" + b),
        ("plan.json", lambda b: b.replace(b'"schema"', b'"sch\\u0000ema"', 1)),
        ("firmware/wiring.json", lambda b: b.replace(b"\n", b"\n\0", 1)),
    ],
)
def test_generated_json_with_bom_or_nul(
    out: Path, capsys: pytest.CaptureFixture[str], name: str, edit: Callable[[bytes], bytes]
) -> None:
    path = out / name
    path.write_bytes(edit(path.read_bytes()))
    code, err = cli(capsys, "build", str(out), "--no-emulator", "--allow-edited")
    assert_one_line(code, err, name)
    assert any(word in err for word in ("byte order mark", "NUL")), err


# --- profiles ----------------------------------------------------------------------------------

PROFILE_HEADER = "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"


@pytest.mark.parametrize("shape", ['"(49, 10, 1"', '"49, 10, 1)"', '"[49, 10, 1)"', '"((49, 10))"'])
def test_profile_unbalanced_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text(
        PROFILE_HEADER + f'input,"(49, 10, 1)",{shape},0,2,0\nfc,{shape},"(12,)",20,3,5\n'
    )
    code, err = cli(capsys, "plan", str(csv), "--target", BOARDS)
    assert_one_line(code, err, "p.csv", "unbalanced")


def test_profile_json_with_nul(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"name": "input", "input": [1, 8], "output": [1, 8], "flash_kb": 0, "ram_kb": 1, "kmac": 0},
        {"name": "fc\u0000x", "input": [1, 8], "output": [1, 4], "flash_kb": 1, "ram_kb": 1,
         "kmac": 1},
    ]  # fmt: skip
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"models": {"m": rows}}))
    code, err = cli(capsys, "plan", f"{path}#m", "--target", BOARDS)
    assert_one_line(code, err, "p.json", "NUL")


def test_splitters_own_rewrite_is_not_an_edit(out: Path) -> None:
    """``bench`` and ``report`` rewrite ``report.html``: files.sha256 follows (no --allow-edited
    needed to build afterwards), while a hand edit of it still is one."""
    from splitter.bench.results import write_atomic
    from splitter.errors import InputFileError
    from splitter.outputs import verify_output

    write_atomic(out / "report.html", "<html>new report</html>\n")
    verify_output(out)
    (out / "report.html").write_text("<html>mine</html>\n")
    with pytest.raises(InputFileError, match=r"report\.html: edited since splitter wrote it"):
        verify_output(out)
