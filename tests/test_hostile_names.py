"""Names are data, never code; paths derived from OUT's files stay inside OUT (issue 18, 1-2).

Payloads: a make ``$(shell touch PWNED)`` after a newline, and ``*/`` + newline to break out of
C and linker-script comments. Parse-time validation must refuse them with one line (exit 2);
with validation bypassed (objects built directly) the generators must escape them so that the
cross build and ``make -n`` run nothing and the C and linker scripts still compile.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from splitter.cli import main
from splitter.codegen import firmware as F
from splitter.codegen.escape import c_comment, c_string, make_comment, md_text
from splitter.errors import BoardFileError, InputFileError
from splitter.hardware.boards import load_boards
from splitter.hardware.catalog import get_part
from splitter.outputs import contained

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "tiny_cnn.onnx"
MAKE_PAYLOAD = "X\n$(shell touch PWNED)\nall:\n\ttouch PWNED"
COMMENT_PAYLOAD = 'p*/ int pwned = 1; /* \n*/ #error broken\n"\\??/'
#: A device name that bypassed validation: comment and make payloads, no '/' (it is a dir name).
DEVICE_PAYLOAD = 'd0*/\n$(shell touch PWNED) ??/ "q" |x| <b> `c`'

BOARDS = """
[[device]]
name = "a"
mcu = "STM32F405RG"

[[device]]
name = "b"
mcu = "STM32F405RG"
"""


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("splitter: error: "), err
    assert "Traceback" not in err and "please report" not in err
    return lines[0]


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``splitter ARGS`` in-process: exit code and stderr."""
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code or 0), capsys.readouterr().err


def no_pwned(*roots: Path) -> None:
    for root in roots:
        assert not list(root.rglob("PWNED")), f"payload ran under {root}"


# --- 1. parse time ------------------------------------------------------------------------------
def inline_part_boards(part_name: str) -> str:
    return (
        "[[device]]\n"
        'name = "a"\n'
        f"part = {{ name = {json.dumps(part_name)}, flash_kib = 1024, ram_kib = 128, "
        'clock_mhz = 168, cpm = 6, family = "F4" }\n'
    )


def test_inline_part_name_with_make_payload_is_refused_at_parse_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    boards = tmp_path / "boards.toml"
    boards.write_text(inline_part_boards(MAKE_PAYLOAD))
    with pytest.raises(BoardFileError) as info:
        load_boards(boards)
    msg = str(info.value)
    assert "\n" not in msg and str(boards) in msg and "part name" in msg and "pattern" in msg
    monkeypatch.chdir(tmp_path)
    code, err = cli(["compile", str(MODEL), "--target", str(boards), "-o", "out"], capsys)
    line = one_line_error(code, err)
    assert "part name" in line and "pattern" in line
    assert not (tmp_path / "out").exists()
    no_pwned(tmp_path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", "a\n"),  # re.match(r"^...$") would accept the trailing newline
        ("name", "a$(shell touch PWNED)"),
        ("name", "../../evil"),
        ("mcu", "STM32F405RG\n$(shell touch PWNED)"),
        ("port", "/dev/ttyACM0\n$(shell touch PWNED)"),
        ("port", "--help"),
        ("probe", "-c reset"),
        ("probe", "066DFF*/"),
    ],
)
def test_hostile_device_fields_are_refused(tmp_path: Path, key: str, value: str) -> None:
    fields = {"name": "a", "mcu": "STM32F405RG", key: value}
    body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items())
    boards = tmp_path / "boards.toml"
    boards.write_text("[[device]]\n" + body)
    with pytest.raises(BoardFileError) as info:
        load_boards(boards)
    msg = str(info.value)
    assert "\n" not in msg and str(boards) in msg and key in msg


def test_valid_names_are_kept() -> None:
    for text in ("h7", "d0", "STM32H743ZI", "node_1-a", "/dev/ttyACM0"):
        assert c_string(text) == c_comment(text) == make_comment(text) == md_text(text) == text


# --- 1. generators escape what slipped past validation ------------------------------------------
def hostile_plan() -> F.PlanContext:
    """Two devices built directly (no parser): a hostile device name and a hostile part name."""
    from test_firmware_render import standin_model

    nb = 64
    subs0, subs1 = [(0, 0, nb, nb, nb), (2, 0, nb, nb, nb)], [(1, 0, nb, nb, nb)]
    bad_part = dataclasses.replace(get_part("STM32F405RG"), name=MAKE_PAYLOAD + COMMENT_PAYLOAD)
    devs = [
        F.DeviceSpec(DEVICE_PAYLOAD, 0, bad_part, standin_model(subs0), 16, 2 * nb, subs0),
        F.DeviceSpec("d1", 1, get_part("STM32F405RG"), standin_model(subs1), 8, 2 * nb, subs1),
    ]
    return F.build_plan_context(devs, [0, 1, 0], "0123456789abcdef")


def test_generated_files_escape_the_payloads(tmp_path: Path) -> None:
    fw = F.render_firmware(tmp_path / "out", hostile_plan())
    ddir = fw / DEVICE_PAYLOAD
    makefile = (ddir / "Makefile").read_text()
    assert "$(shell" not in makefile and "\ntouch PWNED" not in makefile
    cmake = (ddir / "CMakeLists.txt").read_text()  # every comment line stays a comment
    assert all(ln.startswith("#") for ln in cmake.split("cmake_minimum_required")[0].splitlines())
    assert "\ntouch PWNED" not in cmake and "project(splitter_d0_____shell_touch_PWNED_" in cmake
    json.loads((ddir / "compile_commands.json").read_text())
    for name in ("main.c", "plan.c", "config.h", "startup.c", "part.ld", "emulator.ld"):
        text = (ddir / name).read_text()
        assert "\n$(shell" not in text and "\n#error broken" not in text
        assert "*/ int pwned" not in text  # the comment does not end before the payload
    wiring = (fw / "WIRING.md").read_text()
    rows = [ln for ln in wiring.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + 2  # header + host-d0 + d0-d1: the payload split no row
    assert all(ln.replace("\\|", "").count("|") == 9 for ln in rows)
    assert "<b>" not in wiring and "\n$(shell" not in wiring


def test_make_n_executes_nothing(tmp_path: Path) -> None:
    fw = F.render_firmware(tmp_path / "out", hostile_plan())
    for flag in ("0", "1"):
        proc = subprocess.run(
            [
                "make",
                "-n",
                "--no-print-directory",
                "-C",
                str(fw / DEVICE_PAYLOAD),
                f"EMULATOR={flag}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "touch PWNED" not in proc.stdout
    no_pwned(tmp_path, Path.cwd())


@pytest.mark.toolchain
@pytest.mark.slow
def test_cross_build_compiles_escaped_names_and_runs_nothing(tmp_path: Path) -> None:
    """-Wall -Werror build of both targets: comments and strings did not break; the device name
    reaches the firmware as its exact bytes; no PWNED file anywhere."""
    from splitter.toolchain.build import run_make

    fw = F.render_firmware(tmp_path / "out", hostile_plan())
    elf = run_make(fw / DEVICE_PAYLOAD)
    run_make(fw / DEVICE_PAYLOAD, emulator=True)
    assert DEVICE_PAYLOAD.encode() + b"\0" in elf.read_bytes()
    no_pwned(tmp_path, Path.cwd())


@pytest.mark.toolchain
def test_c_and_linker_comments_cannot_be_broken_out_of(tmp_path: Path) -> None:
    """A ``*/`` + newline payload in a C comment, a C string and a linker-script comment."""
    src = tmp_path / "t.c"
    src.write_text(
        f"/* {c_comment(COMMENT_PAYLOAD)} */\n"
        f'const char s[] = "{c_string(COMMENT_PAYLOAD)}";\n'
        f"int main(void) {{ return (int)sizeof s; }} /* {c_comment(MAKE_PAYLOAD)} */\n"
    )
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wcomment", "-Wtrigraphs"]
    subprocess.run(["arm-none-eabi-gcc", *flags, "-c", str(src), "-o", str(tmp_path / "t.o")],
                   check=True)  # fmt: skip
    if shutil.which("gcc"):  # the literal holds exactly the payload's bytes
        exe = tmp_path / "t"
        subprocess.run(["gcc", *flags, str(src), "-o", str(exe)], check=True)
        size = subprocess.run([str(exe)], check=False).returncode
        assert size == len(COMMENT_PAYLOAD.encode()) + 1
    ld = tmp_path / "t.ld"
    ld.write_text(f"/* {c_comment(COMMENT_PAYLOAD)} */\nSECTIONS {{ .text : {{ *(.text) }} }}\n")
    subprocess.run(
        ["arm-none-eabi-ld", "-T", str(ld), str(tmp_path / "t.o"), "-o", str(tmp_path / "t.elf")],
        check=True,
        capture_output=True,
    )


# --- 2. paths derived from OUT's files stay inside OUT ------------------------------------------
@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real compile output (firmware generated, not built) at ``base/a/b/out``."""
    from splitter.codegen.firmware import generate_firmware
    from splitter.compile import CompileOptions, compile_model

    base = tmp_path_factory.mktemp("contain")
    boards = base / "boards.toml"
    boards.write_text(BOARDS)
    res = compile_model(MODEL, boards, base / "a" / "b" / "out", CompileOptions(validate=False))
    if not (res.out_dir / "firmware" / "wiring.json").exists():
        generate_firmware(res.out_dir, res.chain, res.boards, res.manifest)
    return res.out_dir


def copy_out(compiled: Path, tmp_path: Path) -> Path:
    """A copy of the compile output at ``tmp/a/b/out`` with a planted ``tmp/a/evil/Makefile``."""
    out = tmp_path / "a" / "b" / "out"
    shutil.copytree(compiled, out, symlinks=True)
    for evil in (tmp_path / "a" / "evil", tmp_path / "a" / "b" / "evil"):
        evil.mkdir(parents=True)
        (evil / "Makefile").write_text("all:\n\ttouch PWNED\n")
    return out


def tamper_wiring(out: Path, name: str) -> None:
    path = out / "firmware" / "wiring.json"
    data = json.loads(path.read_text())
    data["devices"][0]["name"] = name
    path.write_text(json.dumps(data))


def test_contained_refuses_paths_leaving_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "firmware").mkdir(parents=True)
    assert contained(out, "firmware/a") == (out / "firmware" / "a").resolve()
    (out / "firmware" / "link").symlink_to(tmp_path)
    for rel in ("../evil", "firmware/../../evil", "/etc/passwd", "firmware/link/x", "a\0b"):
        with pytest.raises(InputFileError) as info:
            contained(out, rel)
        assert "\n" not in str(info.value)


@pytest.mark.slow
def test_tampered_wiring_device_name_fails_build_and_run(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_out(compiled, tmp_path)
    tamper_wiring(out, "../../evil")
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 28, 28), np.float32))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, err = cli(["build", str(out)], capsys)  # files.sha256 names the edit first
    assert "wiring.json: edited since splitter wrote it" in one_line_error(code, err)
    edited = "--allow-edited"  # past the hashes, the name check meets the tampering
    for args in (
        ["build", str(out), edited],
        ["run", str(out), "--emulate", "--input", str(x), edited],
    ):
        code, err = cli(args, capsys)
        line = one_line_error(code, err)
        assert "wiring.json" in line and "name" in line
    for args in (
        ["emulate", str(out), "--duration", "1", edited],
        ["flash", str(out), "--dry-run", edited],
    ):
        code, err = cli(args, capsys)
        one_line_error(code, err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created anywhere
    no_pwned(tmp_path)


@pytest.mark.slow
def test_device_dir_symlinked_outside_out_is_refused(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_out(compiled, tmp_path)
    name = json.loads((out / "firmware" / "wiring.json").read_text())["devices"][0]["name"]
    shutil.rmtree(out / "firmware" / name)
    (out / "firmware" / name).symlink_to(tmp_path / "a" / "evil")
    code, err = cli(["build", str(out)], capsys)
    assert "edited since splitter wrote it" in one_line_error(code, err)
    code, err = cli(["build", str(out), "--allow-edited"], capsys)
    assert "outside the output directory" in one_line_error(code, err)
    no_pwned(tmp_path)


def _write(path: Path, kind: str) -> None:
    """Replace a manifest by a malformed one of ``kind``."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if kind == "directory":
        path.mkdir()
        return
    good = json.loads((Path(str(path) + ".orig")).read_text())
    content = {
        "array": b"[1, 2]",
        "number": b"42",
        "non-utf8": b'{"schema": "\xff\xfe"}',
        "missing-keys": json.dumps({k: v for k, v in good.items() if k != "devices"}).encode(),
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "device-not-object": json.dumps({**good, "devices": [7]}).encode(),
        "bad-index": json.dumps(
            {**good, "devices": [{**d, "index": "0"} for d in good["devices"]]}
        ).encode(),
    }[kind]
    path.write_bytes(content)


@pytest.mark.slow
@pytest.mark.parametrize("manifest", ["plan.json", "firmware/wiring.json"])
@pytest.mark.parametrize(
    "kind",
    [
        "array",
        "number",
        "directory",
        "non-utf8",
        "missing-keys",
        "deep",
        "device-not-object",
        "bad-index",
    ],
)
def test_malformed_manifests_are_one_line_errors(
    compiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: str, kind: str
) -> None:
    out = copy_out(compiled, tmp_path)
    path = out / manifest
    shutil.copy(path, str(path) + ".orig")
    _write(path, kind)
    for args in (["build", str(out)], ["flash", str(out), "--dry-run"]):
        code, err = cli(args, capsys)
        one_line_error(code, err)
    no_pwned(tmp_path)
    assert not list(out.rglob("firmware.elf"))  # nothing was built


@pytest.mark.parametrize(
    "payload", [MAKE_PAYLOAD, COMMENT_PAYLOAD, DEVICE_PAYLOAD, "`a|b`\r\x1b[2J"]
)
def test_markdown_escapes_keep_one_cell(payload: str) -> None:
    """report.md / WIRING.md cells: one line, no bare '|', no HTML, code spans closed."""
    from splitter.codegen.escape import md_code

    for text in (md_text(payload), md_code(payload)):
        assert "\n" not in text and "\r" not in text and "\x1b" not in text
        assert "|" not in text.replace("\\|", "")
    assert "<" not in md_text(payload).replace("\\<", "")
