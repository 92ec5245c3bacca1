"""Coverage-guided fuzz targets: each takes the fuzzer's bytes and fails only on a bug.

A target feeds the bytes to one reader the way a user's file reaches it (written to a file
with the right suffix, then the public reader) and lets through only the reader's documented
failure, a :class:`~splitter.errors.SplitterError` (one line, exit code 2). Anything else (an
``IndexError`` deep in an importer, a ``RecursionError``, a hang the fuzzer's timeout catches)
is a crash the fuzzer reports and minimises. The frame decoder has no error to raise: it must
yield only frames whose encoding is in its input, the same frames however the input is split,
and hold back at most one frame's worth of bytes.

Driven by atheris (``benchmarks/fuzz.py``, ``make fuzz``, ``tests/test_fuzz_coverage.py``);
``SEEDS`` names the seed corpus of each target (files of ``models/``, a compile output, the
boards cases of ``tests/fuzz_cases.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from splitter.errors import SplitterError

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
_DIR = Path(tempfile.mkdtemp(prefix="splitter-fuzz-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)


def _file(name: str, data: bytes) -> Path:
    path = _DIR / name
    path.write_bytes(data)
    return path


def _quietly(call: Callable[[], object]) -> None:
    """Run ``call``; a SplitterError is the reader doing its job."""
    with contextlib.suppress(SplitterError):
        call()


def onnx_importer(data: bytes) -> None:
    """``splitter.importers.load_model`` on an ``.onnx`` file."""
    from splitter.importers import load_model

    path = _file("model.onnx", data)
    _quietly(lambda: load_model(path))


def tflite_importer(data: bytes) -> None:
    """``splitter.importers.load_model`` on a ``.tflite`` file, then the slicer's reader."""
    from splitter.importers import load_model

    path = _file("model.tflite", data)
    _quietly(lambda: load_model(path))


def boards_parser(data: bytes) -> None:
    """``splitter.hardware.boards.load_boards`` on a ``boards.toml``."""
    from splitter.hardware.boards import load_boards

    path = _file("boards.toml", data)
    _quietly(lambda: load_boards(path))


def profile_parser(data: bytes) -> None:
    """``splitter.importers.profile.load_profile``: the first byte picks CSV (even) or JSON
    (odd, the model ``#m``)."""
    from splitter.importers.profile import load_profile

    as_json = bool(data[:1]) and data[0] % 2 == 1
    path = _file("profile.json" if as_json else "profile.csv", data[1:])
    _quietly(lambda: load_profile(f"{path}#m" if as_json else str(path)))


def plan_manifest(data: bytes) -> None:
    """``splitter.manifest.read_manifest`` on ``OUT/plan.json``."""
    from splitter.manifest import read_manifest

    out = _DIR / "out"
    out.mkdir(exist_ok=True)
    (out / "plan.json").write_bytes(data)
    _quietly(lambda: read_manifest(out))


def wiring_manifest(data: bytes) -> None:
    """``splitter.manifest.read_wiring`` on ``OUT/firmware/wiring.json`` (no plan.json)."""
    from splitter.manifest import read_wiring

    out = _DIR / "wiring-out"
    (out / "firmware").mkdir(parents=True, exist_ok=True)
    (out / "firmware" / "wiring.json").write_bytes(data)
    _quietly(lambda: read_wiring(out))


def frame_decoder(data: bytes) -> None:
    """``splitter.protocol.FrameDecoder``: the first byte splits the stream in two."""
    from splitter.protocol import MAX_PAYLOAD, OVERHEAD, FrameDecoder, encode_frame

    cut = data[0] % max(len(data), 1) if data else 0
    stream = data[1:]
    whole = list(FrameDecoder().feed(stream))
    split = FrameDecoder()
    parts = [*split.feed(stream[:cut]), *split.feed(stream[cut:])]
    assert [(k, f) for k, f in parts] == [(k, f) for k, f in whole], "split changes the frames"
    for kind, frame in whole:
        if kind == "ok":
            assert encode_frame(frame.type, frame.seq, frame.payload) in stream
    assert split.pending <= OVERHEAD + MAX_PAYLOAD, "holds back more than one frame"


#: target name -> the function the fuzzer calls with its bytes
TARGETS: dict[str, Callable[[bytes], None]] = {
    "onnx": onnx_importer,
    "tflite": tflite_importer,
    "boards": boards_parser,
    "profile": profile_parser,
    "plan": plan_manifest,
    "wiring": wiring_manifest,
    "frames": frame_decoder,
}


def seeds(target: str) -> list[bytes]:
    """The seed corpus of ``target`` (small files, so each execution stays fast)."""
    if target == "onnx":
        return [(MODELS / n).read_bytes() for n in ("tiny_cnn.onnx", "long_skip.onnx")]
    if target == "tflite":
        names = ("sine_float.tflite", "tiny_cnn_float.tflite", "tiny_cnn_int8.tflite")
        return [(MODELS / n).read_bytes() for n in names]
    if target == "boards":
        return [p.read_bytes() for p in sorted((MODELS / "boards").glob("*.toml"))] + _case_boards()
    if target == "profile":
        return _profile_seeds()
    if target in ("plan", "wiring"):
        return [_compiled(target)]
    if target == "frames":
        return _frame_seeds()
    raise KeyError(target)


def _case_boards() -> list[bytes]:
    """The boards documents of ``tests/fuzz_cases.py`` (its hostile boards cases)."""
    import fuzz_cases as F

    docs = [F.toml_doc(F.good_boards())]
    return [d.encode() for d in docs]


def _profile_seeds() -> list[bytes]:
    import json

    data = json.loads((MODELS / "profiles" / "thesis_profiles.json").read_text())
    first = next(iter(data["models"].values()))
    csv = "name,input_shape,output_shape,flash_kb,ram_kb,kmacc\n"
    for row in first[:6]:
        shape_in = "x".join(map(str, row["input"]))
        shape_out = "x".join(map(str, row["output"]))
        sizes = f"{row['flash_kb']},{row['ram_kb']},{row['kmac']}"
        csv += f"{row['name']},{shape_in},{shape_out},{sizes}\n"
    return [b"\x00" + csv.encode(), b"\x01" + json.dumps({"models": {"m": first[:6]}}).encode()]


def _compiled(target: str) -> bytes:
    """plan.json or wiring.json of tiny_cnn compiled for e2e_tiny2 (no validation)."""
    from splitter.compile import CompileOptions, compile_model

    out = _DIR / "seed-out"
    if not (out / "plan.json").exists():
        compile_model(
            MODELS / "tiny_cnn.onnx",
            MODELS / "boards" / "e2e_tiny2.toml",
            out,
            CompileOptions(validate=False, force=True),
        )
    name = "plan.json" if target == "plan" else "firmware/wiring.json"
    return (out / name).read_bytes()


def _frame_seeds() -> list[bytes]:
    from splitter.protocol import FrameType, Pong, encode_frame, encode_pong

    pong = encode_pong(Pong(1, 0, 1, "00" * 8, "a", 1))
    frames = [encode_frame(t, s, b"x" * s) for s, t in enumerate(FrameType)]
    return [b"\x05" + b"".join(frames), b"\x00" + encode_frame(FrameType.PONG, 1, pong)]
