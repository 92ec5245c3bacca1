"""Seeded generators of hostile inputs for ``tests/test_fuzz.py`` (issue 18, item 6).

Every generator is deterministic: ``numpy.random.default_rng(SEED + k)`` per category, no
hypothesis database. A CLI case is a :class:`Case`: an id, a category and ``make(sandbox)``
which writes the case's files under ``sandbox.inputs`` and returns the ``splitter`` arguments.
Payload strings (``$(shell ...)``, backquotes, ``*/`` with a newline) all try to create the
sandbox's ``PWNED`` marker, which must never appear.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SEED = 18_06
MODELS = Path(__file__).resolve().parent.parent / "models"
ONNX_MODEL = MODELS / "tiny_cnn.onnx"
TFLITE_MODELS = (MODELS / "tiny_cnn_int8.tflite", MODELS / "sine_float.tflite")
#: tiny_cnn's input (NCHW float32).
INPUT_SHAPE = (1, 1, 28, 28)


@dataclass
class Sandbox:
    """The folders of one case: ``root`` is snapshot before and after; only ``out`` may change."""

    root: Path
    inputs: Path
    work: Path
    out: Path
    pwned: Path


@dataclass
class Case:
    """One CLI case: ``make(sandbox)`` writes its files and returns the splitter arguments."""

    id: str
    category: str
    make: Callable[[Sandbox], list[str]]
    #: Run in a child process with a memory limit (the case may block in a system call or
    #: read an endless device into memory).
    isolate: bool = False


def payloads(marker: Path) -> list[str]:
    """Strings that run ``touch marker`` if pasted unescaped into a Makefile, a shell line or
    a C/linker-script comment (newline + code)."""
    m = str(marker)
    return [
        f"x\n$(shell touch {m})",
        f"x $(shell touch {m})",
        f"x\n\t@touch {m}",
        f"x`touch {m}`",
        f"x; touch {m}",
        f"x */\n#error {m}\n/*",
        f'x"\n}} int pwn = system("touch {m}"); {{ "',
        f"x\\\n$(shell touch {m})",
        "x\x1b[2J\x1b]0;pwned\x07",
        "../../../evil",
        "a" * 5000,
        "",
    ]


# -- TOML ------------------------------------------------------------------------------------
def toml_value(value: Any) -> str:
    """``value`` as a TOML literal (inline tables and arrays; floats incl. nan/inf)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string (escapes \n, quotes, controls)
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(type(value))


def toml_doc(data: dict[str, Any]) -> str:
    """A boards document: ``[link]`` table and ``[[device]]`` array of tables."""
    lines: list[str] = []
    for key, value in data.items():
        if key == "device" and isinstance(value, list) and all(isinstance(d, dict) for d in value):
            for dev in value:
                lines.append("[[device]]")
                lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in dev.items()]
        elif isinstance(value, dict):
            lines.append(f"[{json.dumps(key)}]")
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()]
        else:
            lines.insert(0, f"{json.dumps(key)} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def good_boards() -> dict[str, Any]:
    """Two F405 boards that split tiny_cnn (models/boards/e2e_tiny2.toml)."""
    return {
        "link": {"baud": 115200},
        "device": [
            {"name": "a", "mcu": "STM32F405RG", "flash": "62 KiB"},
            {"name": "b", "mcu": "STM32F405RG", "flash": "84 KiB"},
        ],
    }


def inline_part() -> dict[str, Any]:
    return {
        "name": "MYPART",
        "flash_kib": 1024,
        "ram_kib": 192,
        "clock_mhz": 168,
        "cpm": 9.0,
        "family": "F4",
    }


GOOD_BOARDS_TEXT = toml_doc(good_boards())

WRONG_VALUES: list[Any] = [
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e308,
    -1,
    0,
    2**63 - 1,
    -(2**63),
    "",
    "x",
    "nan",
    "1e999 KiB",
    "-0 KiB",
    "0%",
    "101%",
    "1e3%",
    [],
    [1, 2],
    {},
    {"a": 1},
    True,
    "9" * 400,
    "\x00",
    "5 KiB\n",
    0.5,
]
DEVICE_KEYS = ("name", "mcu", "flash", "ram", "clock_mhz", "cpm", "cpm_by_class", "port", "probe")
PART_KEYS = (
    "name",
    "flash_kib",
    "ram_kib",
    "clock_mhz",
    "cpm",
    "family",
    "fpu",
    "flash_origin",
    "ram_regions",
    "usarts",
    "source",
)


def _text_case(
    cid: str, cat: str, name: str, data: bytes | str, argv: Callable[[str], list[str]]
) -> Case:
    """A case writing ``data`` to ``inputs/name`` and running ``argv(path)``."""

    def make(sb: Sandbox) -> list[str]:
        path = sb.inputs / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return argv(str(path))

    return Case(cid, cat, make)


def _plan_with_boards(path: str) -> list[str]:
    return ["plan", str(ONNX_MODEL), "--target", path]


def boards_cases() -> Iterator[Case]:
    """Wrong types, non-finite and huge numbers, unknown keys, inline parts, structure."""
    rng = np.random.default_rng(SEED + 3)
    k = 0
    for key in DEVICE_KEYS:
        for value in rng.choice(np.array(WRONG_VALUES, dtype=object), 5, replace=False):
            data = good_boards()
            data["device"][0][key] = value
            yield _text_case(
                f"boards-dev-{key}-{k}", "boards", "b.toml", toml_doc(data), _plan_with_boards
            )
            k += 1
    for key in PART_KEYS:
        for value in rng.choice(np.array(WRONG_VALUES, dtype=object), 4, replace=False):
            data = good_boards()
            part = inline_part()
            part[key] = value
            del data["device"][0]["mcu"]
            data["device"][0]["part"] = part
            yield _text_case(
                f"boards-part-{key}-{k}", "boards", "b.toml", toml_doc(data), _plan_with_boards
            )
            k += 1
    for key in ("baud", "bits_per_byte", "parity"):
        for value in (float("nan"), 0, -9600, 1e308, "fast", 10**30):
            data = good_boards()
            data["link"][key] = value
            yield _text_case(
                f"boards-link-{key}-{k}", "boards", "b.toml", toml_doc(data), _plan_with_boards
            )
            k += 1
    structural: list[tuple[str, str | bytes]] = [
        ("empty", ""),
        ("not-toml", "[[device]\nname = "),
        ("device-table", '[device]\nname = "a"\nmcu = "STM32F405RG"\n'),
        ("device-number", "device = 5\n"),
        ("device-strings", 'device = ["a", "b"]\n'),
        ("link-array", 'link = [1]\n[[device]]\nname = "a"\nmcu = "STM32F405RG"\n'),
        ("unknown-top", GOOD_BOARDS_TEXT + "[extra]\nx = 1\n"),
        ("dup-names", toml_doc({"device": [{"name": "a", "mcu": "STM32F405RG"}] * 2})),
        ("unknown-mcu", toml_doc({"device": [{"name": "a", "mcu": "STM32X999"}]})),
        (
            "both-mcu-part",
            toml_doc({"device": [{"name": "a", "mcu": "STM32F405RG", "part": inline_part()}]}),
        ),
        ("non-utf8", b'\xff\xfe[[device]]\nname = "\xe9"\n'),
        ("nul", GOOD_BOARDS_TEXT.replace("[link]", "[link]\x00")),
        ("deep-array", "x = " + "[" * 5000 + "]" * 5000 + "\n"),
        ("deep-table", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"),
        (
            "many-devices",
            toml_doc({"device": [{"name": f"d{i}", "mcu": "STM32F405RG"} for i in range(400)]}),
        ),
        ("huge-string", 'x = "' + "a" * 2_000_000 + '"\n'),
    ]
    for name, text in structural:
        yield _text_case(f"boards-{name}", "boards", "b.toml", text, _plan_with_boards)
    bytes_good = GOOD_BOARDS_TEXT.encode()
    for i in range(12):
        data = bytearray(bytes_good)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            data[int(pos)] = int(rng.integers(0, 256))
        yield _text_case(f"boards-flip-{i}", "boards", "b.toml", bytes(data), _plan_with_boards)


def payload_boards_cases() -> Iterator[Case]:
    """Payload names in every string a generated file embeds: compiled with firmware, then the
    test runs ``make -n`` (which evaluates ``$(shell ...)``) in every firmware folder."""
    for field in ("name", "port", "probe", "part.name", "part.family", "part.source"):
        for i in range(len(payloads(Path("/m")))):

            def make(sb: Sandbox, field: str = field, i: int = i) -> list[str]:
                value = payloads(sb.pwned)[i]
                data = good_boards()
                dev = data["device"][1]
                if field.startswith("part."):
                    part = inline_part()
                    part[field[5:]] = value
                    del dev["mcu"]
                    dev["part"] = part
                else:
                    dev[field] = value
                path = sb.inputs / "b.toml"
                path.write_text(toml_doc(data))
                return [
                    "compile",
                    str(ONNX_MODEL),
                    "-t",
                    str(path),
                    "-o",
                    str(sb.out),
                    "--no-validate",
                ]

            yield Case(f"payload-{field}-{i}", "payload", make)


# -- models ----------------------------------------------------------------------------------
def _mutate(rng: np.random.Generator, data: bytes, i: int) -> bytes:
    """One of: byte flips, truncation, zeroed run, inserted garbage, duplicated tail."""
    buf = bytearray(data)
    kind = i % 5
    if kind == 0:
        for pos in rng.integers(0, len(buf), size=int(rng.integers(1, 16))):
            buf[int(pos)] ^= 1 << int(rng.integers(0, 8))
    elif kind == 1:
        buf = buf[: int(rng.integers(0, len(buf)))]
    elif kind == 2:
        start = int(rng.integers(0, len(buf)))
        length = int(rng.integers(1, 256))
        buf[start : start + length] = bytes(min(length, len(buf) - start))
    elif kind == 3:
        pos = int(rng.integers(0, len(buf)))
        buf[pos:pos] = rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    else:
        # header region: flatbuffer offsets / protobuf tags live near the start
        for pos in rng.integers(0, min(len(buf), 256), size=int(rng.integers(1, 6))):
            buf[int(pos)] = int(rng.integers(0, 256))
    return bytes(buf)


def _inspect(path: str) -> list[str]:
    return ["inspect", path]


def model_cases() -> Iterator[Case]:
    """Corrupted ONNX and TFLite files (byte flips, truncation, ...), and wrong file types."""
    rng = np.random.default_rng(SEED + 1)
    onnx_bytes = ONNX_MODEL.read_bytes()
    for i in range(90):
        yield _text_case(f"onnx-{i}", "onnx", "m.onnx", _mutate(rng, onnx_bytes, i), _inspect)
    rng = np.random.default_rng(SEED + 2)
    for m, model in enumerate(TFLITE_MODELS):
        data = model.read_bytes()
        for i in range(55):
            yield _text_case(
                f"tflite-{m}-{i}", "tflite", "m.tflite", _mutate(rng, data, i), _inspect
            )
    wrong: list[tuple[str, str, bytes]] = [
        ("tflite-as-onnx", "m.onnx", TFLITE_MODELS[0].read_bytes()),
        ("onnx-as-tflite", "m.tflite", onnx_bytes),
        ("empty-onnx", "m.onnx", b""),
        ("empty-tflite", "m.tflite", b""),
        ("text-onnx", "m.onnx", b"hello\n"),
        ("json-onnx", "m.onnx", b'{"graph": []}'),
        ("tfl3-header-only", "m.tflite", b"\x10\x00\x00\x00TFL3" + bytes(8)),
        ("no-suffix", "model", onnx_bytes),
        ("npy-as-onnx", "m.onnx", b"\x93NUMPY\x01\x00v\x00" + b" " * 118),
        ("huge-varint", "m.onnx", b"\x3a" + b"\xff" * 9 + b"\x01"),
    ]
    for name, fname, data in wrong:
        yield _text_case(f"model-{name}", "onnx", fname, data, _inspect)
    for i, spec in enumerate(
        (
            "X=0x1x28x28",
            "x=1x1x28x28x",
            "=1",
            "input=-1x1",
            "input=1x" + "9" * 30,
            "input=1x1x1e9x1e9",
            "input",
            "a=b",
            "input=nan",
            "input=1x1x28x28,",
        )
    ):
        yield Case(
            f"input-shape-{i}",
            "onnx",
            lambda sb, s=spec: ["inspect", str(ONNX_MODEL), "--input-shape", s],
        )


# -- profiles --------------------------------------------------------------------------------
PROFILE_HEADER = "name,input_shape,output_shape,flash_kb,ram_kb,kmacc"
PROFILE_ROWS = [
    "Input,1x28x28,1x28x28,0,0,0",
    "conv,1x28x28,8x28x28,1.5,25,56",
    "dense,8x28x28,10,60,1,62",
]


def _plan_profile(path: str) -> list[str]:
    return ["plan", path, "--target", str(MODELS / "boards" / "e2e_tiny2.toml")]


def profile_cases() -> Iterator[Case]:
    """CSV cells replaced by hostile values, JSON of wrong shapes and depths."""
    rng = np.random.default_rng(SEED + 4)
    cells = [
        "nan",
        "inf",
        "-inf",
        "1e308",
        "-5",
        "",
        "x",
        "0x0",
        "1x-1",
        "9" * 400,
        "1e-320",
        '"',
        "\x00",
        "1x1x1x1x1x1x1x1x1x1",
        "(1, 2",
        "1,,2",
    ]
    for i in range(40):
        rows = [r.split(",") for r in PROFILE_ROWS]
        r = int(rng.integers(0, len(rows)))
        c = int(rng.integers(0, 6))
        rows[r][c] = cells[i % len(cells)]
        text = PROFILE_HEADER + "\n" + "\n".join(",".join(x) for x in rows) + "\n"
        yield _text_case(f"profile-csv-{i}", "profile", "p.csv", text, _plan_profile)
    objs = [dict(zip(PROFILE_HEADER.split(","), r.split(","), strict=True)) for r in PROFILE_ROWS]
    json_docs: list[Any] = [
        5,
        "x",
        None,
        [],
        {},
        [1, 2],
        [None],
        {"models": 5},
        {"models": {"a": 5}},
        {"models": {}},
        [{"name": "x"}],
        [dict(objs[1], flash_kb=float("nan"))],
        [dict(objs[1], kmacc=-1)],
        [dict(objs[1], ram_kb=[1])],
        [dict(objs[1], name=7)],
        [dict(objs[1], output_shape={"a": 1})],
        [dict(objs[1], input_shape=1e308)],
        [dict(objs[1], flash_kb=1e308)],
        [dict(objs[1], extra=1)],
        objs * 2000,
    ]
    for i, doc in enumerate(json_docs):
        text = json.dumps(doc, allow_nan=True)
        yield _text_case(f"profile-json-{i}", "profile", "p.json", text, _plan_profile)
    extra: list[tuple[str, str, bytes]] = [
        ("deep", "p.json", b"[" * 100_000 + b"]" * 100_000),
        ("non-utf8", "p.csv", b"\xff\xfe" + PROFILE_HEADER.encode()),
        ("header-only", "p.csv", PROFILE_HEADER.encode()),
        ("bad-header", "p.csv", b"a,b,c\n1,2,3\n"),
        ("bom", "p.csv", ("\ufeff" + PROFILE_HEADER + "\n" + PROFILE_ROWS[0]).encode()),
        ("quoted-newline", "p.csv", (PROFILE_HEADER + '\n"a\nb",1,1,1,1,1\n').encode()),
        ("json-nan", "p.json", b"[NaN]"),
        ("json-trunc", "p.json", json.dumps(objs).encode()[:-7]),
        ("json-selector", "p.json#../../x", json.dumps(objs).encode()),
        ("json-bigint", "p.json", b'[{"flash_kb": 1' + b"0" * 5000 + b"}]"),
    ]
    for name, fname, data in extra:
        yield _text_case(
            f"profile-{name}",
            "profile",
            fname.split("#")[0],
            data,
            lambda p, f=fname: _plan_profile(p + ("#" + f.split("#")[1] if "#" in f else "")),
        )


# -- .npy inputs ----------------------------------------------------------------------------
def _compile_with_input(sb: Sandbox, path: Path) -> list[str]:
    return [
        "compile",
        str(ONNX_MODEL),
        "-t",
        str(MODELS / "boards" / "e2e_tiny2.toml"),
        "-o",
        str(sb.out),
        "--no-firmware",
        "--input",
        str(path),
    ]


def npy_cases() -> Iterator[Case]:
    """Wrong dtype, shape, non-finite values, npz, pickles, garbage named ``.npy``."""
    rng = np.random.default_rng(SEED + 5)
    arrays: list[Any] = [
        np.zeros(INPUT_SHAPE, np.float64),
        np.zeros(INPUT_SHAPE, np.int8),
        np.zeros(INPUT_SHAPE, np.complex64),
        np.zeros(INPUT_SHAPE, bool),
        np.zeros((1, 28, 28, 1), np.float32),
        np.zeros((28, 28), np.float32),
        np.zeros((0,), np.float32),
        np.zeros((), np.float32),
        np.zeros((2, 1, 28, 28), np.float32),
        np.full(INPUT_SHAPE, np.nan, np.float32),
        np.full(INPUT_SHAPE, np.inf, np.float32),
        np.full(INPUT_SHAPE, 3e38, np.float32),
        np.array(["a"] * 784).reshape(INPUT_SHAPE),
        np.zeros(INPUT_SHAPE, [("a", "f4")]),
        np.zeros(INPUT_SHAPE, ">f4"),
        np.zeros((1, 1, 28, 28, 1), np.float32),
        np.zeros(INPUT_SHAPE, np.float16),
    ]
    for i, arr in enumerate(arrays):

        def make(sb: Sandbox, arr: Any = arr) -> list[str]:
            path = sb.inputs / "x.npy"
            with path.open("wb") as f:
                np.save(f, arr)
            return _compile_with_input(sb, path)

        yield Case(f"npy-array-{i}", "npy", make)

    def pickled(sb: Sandbox) -> list[str]:
        path = sb.inputs / "x.npy"
        with path.open("wb") as f:
            np.save(f, np.array([_Pwn(str(sb.pwned))], dtype=object), allow_pickle=True)
        return _compile_with_input(sb, path)

    yield Case("npy-pickle-payload", "npy", pickled)

    def npz(sb: Sandbox) -> list[str]:
        path = sb.inputs / "x.npy"
        with path.open("wb") as f:
            np.savez(f, x=np.zeros(INPUT_SHAPE, np.float32))
        return _compile_with_input(sb, path)

    yield Case("npy-npz", "npy", npz)
    good = _npy_bytes(np.zeros(INPUT_SHAPE, np.float32))
    for i in range(24):
        data = _mutate(rng, good, i) if i % 3 else good[: int(rng.integers(0, 200))]
        yield Case(f"npy-bytes-{i}", "npy", lambda sb, d=data: _write_then(sb, "x.npy", d))
    headers = [
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 28, 999999999999), }",
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 1, 28, 28), }",
        b"{'descr': 'O', 'fortran_order': False, 'shape': (1,), }",
        b"__import__('os').system('touch PWNED')",
        b"{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1, 28, 28), }",
    ]
    for i, header in enumerate(headers):
        hdr = header + b" " * (118 - len(header) % 64) + b"\n"
        data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + bytes(3136)
        yield Case(f"npy-header-{i}", "npy", lambda sb, d=data: _write_then(sb, "x.npy", d))


class _Pwn:
    """Unpickling this touches the marker: ``--input`` must never unpickle."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _write_then(sb: Sandbox, name: str, data: bytes) -> list[str]:
    path = sb.inputs / name
    path.write_bytes(data)
    return _compile_with_input(sb, path)


# -- output folders ---------------------------------------------------------------------------
def _compile_to(out: str, *extra: str) -> list[str]:
    return [
        "compile",
        str(ONNX_MODEL),
        "-t",
        str(MODELS / "boards" / "e2e_tiny2.toml"),
        "-o",
        out,
        "--no-firmware",
        "--no-validate",
        *extra,
    ]


def out_cases() -> Iterator[Case]:
    """OUT a file, a symlink, under a file, too long, odd characters, a non-splitter folder."""

    def out_file(sb: Sandbox) -> list[str]:
        sb.out.write_text("keep me")
        return _compile_to(str(sb.out))

    def out_file_force(sb: Sandbox) -> list[str]:
        sb.out.write_text("keep me")
        return _compile_to(str(sb.out), "--force")

    def under_file(sb: Sandbox) -> list[str]:
        sb.out.write_text("keep me")
        return _compile_to(str(sb.out / "sub"))

    def foreign_dir(sb: Sandbox) -> list[str]:
        sb.out.mkdir()
        (sb.out / "mine.txt").write_text("keep me")
        return _compile_to(str(sb.out))

    def symlink_out(sb: Sandbox) -> list[str]:
        target = sb.root / "elsewhere"
        target.mkdir()
        sb.out.symlink_to(target)
        return _compile_to(str(sb.out))

    def symlink_out_force(sb: Sandbox) -> list[str]:
        target = sb.root / "elsewhere"
        target.mkdir()
        (target / "keep.txt").write_text("keep me")
        sb.out.symlink_to(target)
        return _compile_to(str(sb.out), "--force")

    def dev_null(sb: Sandbox) -> list[str]:
        return _compile_to("/dev/null")

    def root(sb: Sandbox) -> list[str]:
        return _compile_to("/")

    fixed = [
        out_file,
        out_file_force,
        under_file,
        foreign_dir,
        symlink_out,
        symlink_out_force,
        dev_null,
        root,
    ]
    for fn in fixed:
        yield Case(f"out-{fn.__name__}", "out", fn)
    names = [
        "a" * 256,
        "a" * 300,
        "/".join(["b" * 200] * 30),
        "x\ny",
        "x\x1b[2J",
        "-",
        ".",
        "..",
        "x" + "\u202e" + "y",
        " ",
        "$(shell touch PWNED)",
        "a" * 255,
        "é" * 200,
    ]
    for i, name in enumerate(names):

        def make(sb: Sandbox, name: str = name) -> list[str]:
            if name in (".", ".."):  # relative to the work folder: outside OUT by design
                return _compile_to(
                    str(sb.out / name / sb.out.name) if name == ".." else str(sb.out / name)
                )
            return _compile_to(str(sb.out / name))

        yield Case(f"out-name-{i}", "out", make)


# -- tampered compile outputs ---------------------------------------------------------------
#: JSON replacements for a whole manifest.
WHOLE_DOCS: list[bytes] = [
    b"[]",
    b"5",
    b"null",
    b'"x"',
    b"",
    b"\xff\xfe\x00",
    b"{",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"devices": 5}',
    b'{"devices": [5]}',
    b"{}",
    b"NaN",
]
DEVICE_NAMES = [
    "../../evil",
    "../x",
    "/tmp/evil",
    "a/../../b",
    ".",
    "..",
    "",
    "a\nb",
    "a b",
    "$(shell touch PWNED)",
    "A" * 300,
    "b",
    5,
    None,
    ["a"],
]


def _set_path(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _leaves(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a scalar or container in ``doc``."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaves(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _leaves(v, (*prefix, i))
    return out


Tamper = Callable[[Path, Sandbox], None]


def tamper_cases(base: Callable[[], Path]) -> Iterator[Case]:
    """Mutations of ``firmware/wiring.json``, ``plan.json`` and the firmware folders of a good
    compile output (``base()``, copied per case), then ``splitter build OUT``."""
    import shutil

    def case(cid: str, tamper: Tamper) -> Case:
        def make(sb: Sandbox) -> list[str]:
            shutil.copytree(base(), sb.out, symlinks=True)
            tamper(sb.out, sb)
            # --allow-edited: past files.sha256, so the checks behind it meet the tampering
            return ["build", str(sb.out), "--no-emulator", "--allow-edited"]

        return Case(cid, "tamper", make, isolate=cid.endswith(("as_fifo", "as_link")))

    for doc_name in ("firmware/wiring.json", "plan.json"):
        for i, data in enumerate(WHOLE_DOCS):
            yield case(
                f"tamper-{doc_name}-whole-{i}",
                lambda out, sb, d=data, n=doc_name: (out / n).write_bytes(d),
            )

        def as_dir(out: Path, sb: Sandbox, n: str = doc_name) -> None:
            (out / n).unlink()
            (out / n).mkdir()

        def as_fifo(out: Path, sb: Sandbox, n: str = doc_name) -> None:
            (out / n).unlink()
            os.mkfifo(out / n)

        def as_link(out: Path, sb: Sandbox, n: str = doc_name) -> None:
            (out / n).unlink()
            (out / n).symlink_to("/dev/zero")

        def missing(out: Path, sb: Sandbox, n: str = doc_name) -> None:
            (out / n).unlink()

        for fn in (as_dir, as_fifo, as_link, missing):
            yield case(f"tamper-{doc_name}-{fn.__name__}", fn)
    for i, name in enumerate(DEVICE_NAMES):

        def rename(out: Path, sb: Sandbox, name: Any = name) -> None:
            path = out / "firmware" / "wiring.json"
            doc = json.loads(path.read_text())
            doc["devices"][0]["name"] = str(sb.pwned) if name == "$PWNED" else name
            path.write_text(json.dumps(doc))

        yield case(f"tamper-wiring-device-name-{i}", rename)

        def rename_plan(out: Path, sb: Sandbox, name: Any = name) -> None:
            path = out / "plan.json"
            doc = json.loads(path.read_text())
            doc["devices"][0]["name"] = name
            path.write_text(json.dumps(doc))

        yield case(f"tamper-plan-device-name-{i}", rename_plan)
    rng = np.random.default_rng(SEED + 6)
    values: list[Any] = [None, -1, 0, 2**64, 1e308, "x", [], {}, True, "../../evil", float("nan")]
    for doc_name, count in (("firmware/wiring.json", 40), ("plan.json", 30)):
        for i in range(count):
            seed = int(rng.integers(0, 2**31))

            def mutate(out: Path, sb: Sandbox, n: str = doc_name, seed: int = seed) -> None:
                r = np.random.default_rng(seed)
                path = out / n
                doc = json.loads(path.read_text())
                paths = _leaves(doc)
                where = paths[int(r.integers(0, len(paths)))]
                if r.random() < 0.2:
                    parent: Any = doc
                    for key in where[:-1]:
                        parent = parent[key]
                    del parent[where[-1]]
                else:
                    _set_path(doc, where, values[int(r.integers(0, len(values)))])
                path.write_text(json.dumps(doc))

            yield case(f"tamper-{doc_name}-mutate-{i}", mutate)

    def swap_dir_symlink(out: Path, sb: Sandbox) -> None:
        dev = out / "firmware" / "a"
        shutil.rmtree(dev)
        outside = sb.root / "outside_fw"
        outside.mkdir()
        dev.symlink_to(outside)

    def part_ld(out: Path, sb: Sandbox) -> None:
        (out / "firmware" / "a" / "part.ld").write_text("/* edited by hand */\nMEMORY { }\n")

    def part_ld_garbage(out: Path, sb: Sandbox) -> None:
        (out / "firmware" / "a" / "part.ld").write_bytes(b"\xff\x00" * 100)

    def no_makefile(out: Path, sb: Sandbox) -> None:
        (out / "firmware" / "a" / "Makefile").unlink()

    def no_device_dir(out: Path, sb: Sandbox) -> None:
        shutil.rmtree(out / "firmware" / "b")

    def no_marker(out: Path, sb: Sandbox) -> None:
        for marker in out.glob(".splitter*"):
            marker.unlink()

    for fn in (swap_dir_symlink, part_ld, part_ld_garbage, no_makefile, no_device_dir, no_marker):
        yield case(f"tamper-{fn.__name__}", fn)


# -- special files --------------------------------------------------------------------------
def special_cases() -> Iterator[Case]:
    """A FIFO or ``/dev/zero`` given as model, boards file, profile, input; a directory."""
    boards = str(MODELS / "boards" / "e2e_tiny2.toml")
    roles: dict[str, Callable[[str, Sandbox], list[str]]] = {
        "model-onnx": lambda p, sb: ["inspect", p],
        "boards": lambda p, sb: ["plan", str(ONNX_MODEL), "--target", p],
        "profile": lambda p, sb: ["plan", p, "--target", boards],
        "npy": lambda p, sb: _compile_with_input(sb, Path(p)),
    }
    suffix = {"model-onnx": ".onnx", "boards": ".toml", "profile": ".csv", "npy": ".npy"}
    for role, argv in roles.items():
        for kind in ("fifo", "dev-zero", "dir", "symlink-fifo", "dev-urandom-link"):

            def make(
                sb: Sandbox,
                role: str = role,
                kind: str = kind,
                argv: Callable[[str, Sandbox], list[str]] = argv,
            ) -> list[str]:
                path = sb.inputs / f"f{suffix[role]}"
                if kind == "fifo":
                    os.mkfifo(path)
                elif kind == "dev-zero":
                    return argv("/dev/zero", sb)
                elif kind == "dir":
                    path.mkdir()
                elif kind == "symlink-fifo":
                    os.mkfifo(sb.inputs / "fifo")
                    path.symlink_to(sb.inputs / "fifo")
                else:
                    path.symlink_to("/dev/urandom")
                return argv(str(path), sb)

            yield Case(f"special-{role}-{kind}", "special", make, isolate=True)


def all_cli_cases(base: Callable[[], Path]) -> list[Case]:
    """Every CLI case, in a fixed order."""
    return [
        *model_cases(),
        *boards_cases(),
        *payload_boards_cases(),
        *profile_cases(),
        *npy_cases(),
        *out_cases(),
        *tamper_cases(base),
        *special_cases(),
    ]
