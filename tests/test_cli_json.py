"""Every command's ``--json`` output parses and has the shape ``docs/cli-json.md`` documents,
errors included (``{"error", "file", "hint"}`` on stdout, exit 2).

The expected shapes are read from the document's examples, so the document and the commands
cannot drift apart: the top-level keys and the keys of the first element of every list of
objects must be exactly the documented ones. Commands run in-process through the real entry
point; the board commands on one tiny_cnn split over two emulated boards (QEMU).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_e2e_support import shared_build

from splitter.cli import main

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
DOC = ROOT / "docs" / "cli-json.md"
COMMANDS = ("inspect", "ops", "boards", "plan", "segment", "compile", "report", "build", "run",
            "emulate", "bench", "calibrate", "flash", "choose")  # fmt: skip


def documented() -> dict[str, Any]:
    """Section name (``inspect``, ..., ``errors``) -> the example object of docs/cli-json.md."""
    text = DOC.read_text()
    found = {}
    for m in re.finditer(
        r"^## (?:`splitter (\w+)`|(Errors)).*?```json\n(.*?)```", text, re.M | re.S
    ):
        found[(m[1] or m[2]).lower()] = json.loads(m[3])
    return found


DOCS = documented()


def assert_shape(got: Any, want: Any, what: str) -> None:
    """Same top-level keys, and the same keys in the first element of every list of objects."""
    assert isinstance(got, dict), f"{what}: {got!r}"
    assert set(got) == set(want), f"{what}: keys {sorted(got)} != documented {sorted(want)}"
    for key, example in want.items():
        if isinstance(example, list) and example and isinstance(example[0], dict) and got[key]:
            assert set(got[key][0]) == set(example[0]), f"{what}.{key}[0]"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def json_of(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_the_document_covers_every_command() -> None:
    from splitter.cli import COMMANDS as REGISTERED

    assert set(DOCS) == {*COMMANDS, "errors"}
    assert set(REGISTERED) == set(COMMANDS)


def test_top_level_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-h")
    summary = out.split("Options:")[0]  # the description, above click's own command list
    assert code == 0 and all(re.search(rf"\b{name}\b", summary) for name in COMMANDS), summary


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn compiled for two emulated F405 boards and built (the session's shared build of
    tests/test_e2e_support.py; ``compile`` and ``build`` themselves run in the tests)."""
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.fail("needs arm-none-eabi-gcc and qemu-system-arm: make system-deps")
    return shared_build(tmp_path_factory, "tiny_cnn.onnx", "e2e_tiny2.toml", "json")


def test_model_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model, boards = str(MODELS / "tiny_cnn.onnx"), str(MODELS / "boards/e2e_tiny2.toml")
    inspect = json_of(capsys, "inspect", model)
    assert_shape(inspect, DOCS["inspect"], "inspect")
    assert inspect["totals"]["layers"] == len(inspect["layers"])
    assert_shape(json_of(capsys, "ops"), DOCS["ops"], "ops")
    assert_shape(json_of(capsys, "boards"), DOCS["boards"], "boards")
    plan = json_of(capsys, "plan", model, "--target", boards)
    assert_shape(plan, DOCS["plan"], "plan")
    one = tmp_path / "one.toml"
    one.write_text('[link]\nbaud = 115200\n[[device]]\nname = "f4"\nmcu = "STM32F405RG"\n')
    segment = json_of(capsys, "segment", model, "--target", str(one), "--segment-memory", "80 KiB")
    assert_shape(segment, DOCS["segment"], "segment")
    summary = json_of(capsys, "compile", model, "-t", boards, "-o", str(tmp_path / "o"))
    assert_shape(summary, DOCS["compile"], "compile")
    assert summary["optimal"] is True and summary["latency_s"] == plan["latency_s"]
    report = json_of(capsys, "report", str(tmp_path / "o"))
    assert_shape(report, DOCS["report"], "report")
    assert report["report"] == str(tmp_path / "o" / "report.html")
    parts = tmp_path / "parts.toml"
    parts.write_text('[[part]]\nname = "STM32F405RG"\n[[part]]\nname = "STM32F446RE"\n')
    choose = json_of(capsys, "choose", model, "--latency-ms", "2000", "--parts", str(parts),
                     "--max-boards", "2", "--jobs", "1", "-o", str(tmp_path / "c"))  # fmt: skip
    assert_shape(choose, DOCS["choose"], "choose")


def test_newer_options_keep_the_documented_shapes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--granularity op`` (inspect: ``granularity`` and per layer ``crossing``, as the inspect
    section says; plan and compile: their documented shapes), ``--partial-execution on`` and
    ``segment -o OUT`` (``out`` and ``region_bytes`` set)."""
    model, boards = str(MODELS / "tiny_cnn.onnx"), str(MODELS / "boards/e2e_tiny2.toml")
    inspect = json_of(capsys, "inspect", model, "--granularity", "op")
    want = DOCS["inspect"]
    layer = {**want["layers"][0], "crossing": []}
    assert_shape(inspect, {**want, "granularity": "op", "layers": [layer]}, "inspect op")
    assert inspect["granularity"] == "op"
    for layer in inspect["layers"][:-1]:
        assert {tuple(t) for t in layer["crossing"]} == {("name", "shape", "dtype", "bytes")}
        assert sum(t["bytes"] for t in layer["crossing"]) == layer["out_bytes"]
    for args in (["--granularity", "op"], ["--partial-execution", "on"]):
        plan = json_of(capsys, "plan", model, "--target", boards, *args)
        assert_shape(plan, DOCS["plan"], f"plan {args}")
        assert plan["model"].get("granularity") == ("op" if args[1] == "op" else None)
        out = tmp_path / args[1]
        summary = json_of(capsys, "compile", model, "-t", boards, "-o", str(out), *args,
                          "--no-validate")  # fmt: skip
        assert_shape(summary, DOCS["compile"], f"compile {args}")
    # a sub-model running PEX loops has the documented optional key (docs: plan section)
    pex = json_of(capsys, "plan", str(MODELS / "pex_irb_48.onnx"), "--target",
                  str(MODELS / "boards/e2e_pex.toml"))  # fmt: skip
    assert set(pex) == set(DOCS["plan"])
    looped = [s for s in pex["submodels"] if "partial_execution" in s]
    assert looped
    for sub in pex["submodels"]:
        extra = {"partial_execution"} if sub in looped else set()
        assert set(sub) == {*DOCS["plan"]["submodels"][0], *extra}
    assert set(looped[0]["partial_execution"]) == {"loops", "ram_whole_bytes", "saved_bytes"}
    one = tmp_path / "one.toml"
    one.write_text('[link]\nbaud = 115200\n[[device]]\nname = "f4"\nmcu = "STM32F405RG"\n')
    out = tmp_path / "seg"
    segment = json_of(capsys, "segment", model, "--target", str(one), "--segment-memory",
                      "80 KiB", "-o", str(out))  # fmt: skip
    assert_shape(segment, DOCS["segment"], "segment -o")
    assert segment["out"] == str(out) and segment["region_bytes"] > 0


def test_emulate_shows_progress_and_keeps_stdout_json(
    built: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a terminal: emulate's boot step as a plain line on stderr, stdout the one object."""
    monkeypatch.setenv("SPLITTER_PROGRESS", "plain")
    code, out, err = run_cli(capsys, "emulate", str(built), "--duration", "0.2", "--json")
    assert code == 0, err
    assert_shape(json.loads(out), DOCS["emulate"], "emulate")
    assert err.splitlines()[0] == "splitter: booting the emulated boards"


def test_run_by_input_name_errors_are_json(
    built: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``run --input NAME=X.npy`` naming no input of the model: the error object, exit 2."""
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 28, 28), np.float32))
    code, out, err = run_cli(capsys, "run", str(built), "--input", f"image={x}", "--emulate",
                             "--json")  # fmt: skip
    assert code == 2, err
    obj = json.loads(out)
    assert_shape(obj, DOCS["errors"], "run --input NAME=")
    assert "image" in obj["error"] and obj["error"] in err.strip().splitlines()[-1]


def test_board_commands(built: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    build = json_of(capsys, "build", str(built))
    assert_shape(build, DOCS["build"], "build")
    assert [d["emulator"] for d in build["devices"]] == ["built", "built"]
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32))
    run = json_of(capsys, "run", str(built), "--input", str(x), "--emulate")
    assert_shape(run, DOCS["run"], "run")
    assert run["check"]["reference"] == "onnxruntime" and run["output_shape"] == [1, 10]
    emulate = json_of(capsys, "emulate", str(built), "--duration", "0.2")
    assert_shape(emulate, DOCS["emulate"], "emulate")
    bench = json_of(capsys, "bench", str(built), "--emulate", "-n", "2", "--no-pipeline")
    assert_shape(bench, DOCS["bench"], "bench")
    calibrate = json_of(capsys, "calibrate", str(built), "--max-error", "15")
    assert_shape(calibrate, DOCS["calibrate"], "calibrate")
    flash = json_of(capsys, "flash", str(built), "--dry-run", "--tool", "st-flash")
    assert_shape(flash, DOCS["flash"], "flash")
    assert flash["flashed"] == 0 and flash["devices"][0]["command"][0] == "st-flash"


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "missing.onnx"],
        ["ops", "--format", "caffe"],  # a usage error is an error object too
        ["plan", "missing.onnx", "--target", str(MODELS / "boards/e2e_tiny2.toml")],
        ["plan", str(MODELS / "tiny_cnn.onnx"), "--target", str(MODELS / "boards/e2e_tiny2.toml"),
         "--solver", "dp", "--var-order", "mrv"],
        ["segment", "missing.onnx", "--target", str(MODELS / "boards/e2e_tiny2.toml")],
        ["segment", str(MODELS / "tiny_cnn.onnx"), "--target",
         str(MODELS / "boards/e2e_tiny2.toml")],  # two devices, no --device
        ["plan", str(MODELS / "tiny_cnn.onnx"), "--target", str(MODELS / "boards/e2e_tiny2.toml"),
         "--granularity", "layer"],
        ["compile", str(MODELS / "tiny_cnn.onnx"), "-t", str(MODELS / "boards/e2e_tiny2.toml"),
         "--partial-execution", "always"],
        ["compile", "missing.onnx", "-t", str(MODELS / "boards/e2e_tiny2.toml")],
        ["report", "{missing}"],
        ["build", "{missing}"],
        ["run", "{missing}", "--input", "x.npy", "--emulate"],
        ["emulate", "{missing}"],
        ["bench", "{missing}", "--emulate"],
        ["calibrate", "{missing}"],
        ["flash", "{missing}", "--dry-run"],
    ],
    ids=lambda a: "-".join(a[:1] + [x for x in a[1:] if x.startswith("--")][:2]),
)  # fmt: skip
def test_errors_are_json(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.replace("{missing}", str(tmp_path / "nope")) for a in args]
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 2, err
    obj = json.loads(out)
    assert_shape(obj, DOCS["errors"], args[0])
    line = err.strip().splitlines()[-1]
    assert line.startswith("splitter: error: ") and obj["error"] in line
    assert obj["file"] is None or obj["file"] in obj["error"]
    assert obj["hint"] is None or obj["error"].endswith(obj["hint"])


def test_error_object_names_file_and_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    code, out, _ = run_cli(capsys, "inspect", str(bad), "--format", "json")
    assert code == 2
    obj = json.loads(out)
    assert obj["file"] == str(bad) and obj["error"].startswith(f"{bad}: ")


def test_compile_without_firmware_exits_2_with_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C generator refusing the model (as for an op without kernels) is not exit 0: the
    sub-models are written, the summary printed, then one error line (or the error object with
    the summary as ``details``)."""
    import splitter.codegen.firmware
    from splitter.errors import UnsupportedOpError

    def refuse(*args: object, **kwargs: object) -> None:
        raise UnsupportedOpError("layer conv1: no int8 kernel for this op kind")

    monkeypatch.setattr(splitter.codegen.firmware, "generate_firmware", refuse)
    model, boards = str(MODELS / "tiny_cnn.onnx"), str(MODELS / "boards/e2e_tiny2.toml")
    out = tmp_path / "o"
    code, stdout, err = run_cli(capsys, "compile", model, "-t", boards, "-o", str(out))
    assert code == 2
    assert "firmware: not generated: layer conv1" in stdout
    assert err.strip().splitlines() == [
        f"splitter: error: {model}: firmware not generated: layer conv1: no int8 kernel for this "
        f"op kind; the validated sub-models are in {out}; compile with --no-firmware to skip the "
        "firmware"
    ]
    assert (out / "plan.json").is_file()
    code, stdout, _ = run_cli(capsys, "compile", model, "-t", boards, "-o", str(out), "--json")
    obj = json.loads(stdout)
    assert code == 2 and obj["hint"] == "compile with --no-firmware to skip the firmware"
    assert_shape(obj["details"], DOCS["compile"], "compile details")


def test_run_names_litert_for_tflite_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output check of a TFLite plan is against LiteRT, and says so."""
    from splitter.device import run as R
    from splitter.errors import ValidationError
    from splitter.manifest import read_manifest

    out = tmp_path / "o"
    code, _, err = run_cli(capsys, "compile", str(MODELS / "tiny_cnn_float.tflite"), "-t",
                           str(MODELS / "boards/e2e_tiny2.toml"), "-o", str(out), "--no-firmware",
                           "--no-validate")  # fmt: skip
    assert code == 0, err
    manifest = read_manifest(out)
    assert R.reference_runtime(manifest) == "LiteRT"
    assert R.reference_runtime(manifest, MODELS / "tiny_cnn.onnx") == "onnxruntime"
    with pytest.raises(ValidationError, match="boards' output differs from LiteRT by 1 "):
        R.check_output(np.ones(3, np.float32), np.zeros(3, np.float32), runtime="LiteRT")
