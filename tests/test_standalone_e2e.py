"""Standalone firmware (``compile --app standalone``) on emulated F405s: no byte from the PC.

Each chain is compiled by the real pipeline with the sample inputs of ``--input`` compiled into
the head board, built with arm-none-eabi-gcc (``make EMULATOR=1``) and booted in QEMU
(netduinoplus2, ``-icount``). The test only *reads* the consoles (the emulator's host endpoints):
the head board feeds its samples round and round by itself, the board that ends the chain
prints every result, which must equal onnxruntime (float, 1e-4) or LiteRT (int8, bit-exact) on
the sample the inference number selects. A second part checks the field behaviour: a middle
board that runs another plan is refused at the boot handshake and reported through the API
(the head's status line), not a hang.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_e2e_support import MODELS, TOL, qemu_pids
from test_tflite_support import interpreter

from splitter.compile import CompileOptions, compile_model
from splitter.device.console import Console, ConsoleResult
from splitter.toolchain import emulator as E
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.toolchain, pytest.mark.qemu]

BOARDS = "[link]\nbaud = 115200\n" + "".join(
    f'\n[[device]]\nname = "{n}"\nmcu = "STM32F405RG"\n' for n in ("a", "b", "c")
)
#: results read per chain (the issue asks for at least 20)
RUNS = 20


def standalone(
    tmp: Path, model: str, assignment: tuple[int, ...], x: np.ndarray, result_on: str = "tail"
) -> Path:
    """Compile ``model`` with ``--app standalone`` (and ``--result-on``) and the samples ``x``;
    build every board."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "boards.toml").write_text(BOARDS)
    np.save(tmp / "x.npy", x)
    opts = CompileOptions(
        assignment=assignment, validate=False, force=True, app="standalone",
        input_files=(str(tmp / "x.npy"),), result_on=result_on,
    )  # fmt: skip
    res = compile_model(MODELS / model, tmp / "boards.toml", tmp / "out", opts)
    assert res.firmware.startswith("generated"), res.firmware
    for d in sorted((res.out_dir / "firmware").iterdir()):
        if d.is_dir():
            run_make(d, emulator=True)
    return res.out_dir


def run_chain(out: Path, tail: str, count: int) -> tuple[list[ConsoleResult], dict[str, str]]:
    """Boot the chain, read ``count`` results from ``tail``'s console; no byte is written."""
    with E.Emulation(out, icount=True) as emu, Console(emu.endpoints) as con:
        results = con.wait_results(tail, count, timeout=120)
        text = dict(con.text)
    assert qemu_pids(str(out)) == []
    return results[:count], text


def check(results: list[ConsoleResult], refs: list[np.ndarray], exact: bool) -> None:
    """Result k is sample k mod len(refs)'s reference, class and outputs."""
    assert [r.inference for r in results] == list(range(len(results)))
    for r in results:
        ref = refs[r.inference % len(refs)]
        got = np.frombuffer(r.outputs[0], ref.dtype.newbyteorder("<")).reshape(ref.shape)
        if exact:
            assert np.array_equal(got, ref), (r.inference, got, ref)
        else:
            assert float(np.max(np.abs(got - ref))) <= TOL, r.inference
        assert r.cls == int(np.argmax(ref))


def test_two_boards_float_onnx_feed_themselves(tmp_path: Path) -> None:
    """tiny_cnn.onnx on a (layers 0-1) and b (the rest): 20 results equal onnxruntime."""
    x = np.random.default_rng(5).standard_normal((3, 1, 1, 28, 28)).astype(np.float32)
    out = standalone(tmp_path, "tiny_cnn.onnx", (0, 0, 1, 1, 1), x)
    results, text = run_chain(out, "b", RUNS)
    sess = ort.InferenceSession(str(MODELS / "tiny_cnn.onnx"))
    refs = [np.asarray(sess.run(None, {"input": xi})[0]) for xi in x]
    check(results, refs, exact=False)
    assert "head" in text["a"] and "status" not in text["a"] + text["b"]


def test_two_boards_result_on_head_come_back_to_the_head(tmp_path: Path) -> None:
    """``--result-on head``: tiny_cnn.onnx on a (layers 0-1) and b (the rest); b sends each
    result back to a over a return link of its own (a third USART on a, a second on b, no host
    link on b), and a's application prints it: 20 results read from a's console, each equal to
    onnxruntime within 1e-4, none lost."""
    x = np.random.default_rng(7).standard_normal((3, 1, 1, 28, 28)).astype(np.float32)
    out = standalone(tmp_path, "tiny_cnn.onnx", (0, 0, 1, 1, 1), x, result_on="head")
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    peers = {d["name"]: [ln["peer"] for ln in d["links"]] for d in wiring["devices"]}
    assert peers == {"a": ["host", "b", "b"], "b": ["a", "a"]}
    results, text = run_chain(out, "a", RUNS)
    sess = ort.InferenceSession(str(MODELS / "tiny_cnn.onnx"))
    refs = [np.asarray(sess.run(None, {"input": xi})[0]) for xi in x]
    check(results, refs, exact=False)
    assert "head" in text["a"] and "status" not in text["a"] and "b" not in text


def test_three_boards_int8_tflite_feed_themselves(tmp_path: Path) -> None:
    """tiny_cnn_int8.tflite over a, b, c (three layers each): 20 results bit-exact to LiteRT."""
    rng = np.random.default_rng(6)
    x = rng.integers(-128, 127, size=(4, 1, 49, 10, 1), endpoint=True).astype(np.int8)
    out = standalone(tmp_path, "tiny_cnn_int8.tflite", (0, 0, 0, 1, 1, 1, 2, 2, 2), x)
    results, _ = run_chain(out, "c", RUNS)
    it = interpreter(MODELS / "tiny_cnn_int8.tflite")
    refs = []
    for xi in x:
        it.set_tensor(it.get_input_details()[0]["index"], xi)
        it.invoke()
        refs.append(np.asarray(it.get_tensor(it.get_output_details()[0]["index"])).copy())
    assert len({r.tobytes() for r in refs}) > 1  # the samples give different outputs
    check(results, refs, exact=True)


def test_mismatched_middle_board_is_reported_not_hung(tmp_path: Path) -> None:
    """b runs a firmware of another plan: the boot handshake of its neighbours reports it on
    their status (code 5, device, link to b): a (the head) and c print it, and the head submits
    nothing, so c never prints a result."""
    x = np.random.default_rng(5).standard_normal((1, 1, 1, 28, 28)).astype(np.float32)
    out = standalone(tmp_path / "one", "tiny_cnn.onnx", (0, 1, 1, 2, 2), x)
    other = standalone(tmp_path / "two", "tiny_cnn.onnx", (0, 1, 2, 2, 2), x)
    shutil.rmtree(out / "firmware" / "b")
    shutil.copytree(other / "firmware" / "b", out / "firmware" / "b")
    with E.Emulation(out, icount=True) as emu, Console(emu.endpoints) as con:
        con.wait_for("a", "a: b on link 1 runs another plan", timeout=60)
        con.wait_for("c", "c: b on link 0 runs another plan", timeout=60)
        assert con.results["c"] == []
    own = [s for s in con.statuses if s.board == "a" and (s.device, s.link) == (0, 1)]
    assert own and own[0].code == 5, con.statuses
    assert own[0].text.startswith("a: b on link 1 runs another plan")
