"""LO-SC segment firmware (segments/firmware.py): units, the RAM region, and MobileNet on ONE F405.

The e2e test writes ``splitter segment -o OUT`` for ``mobilenet_v1_025_64.onnx`` (1.87 MB of
float32 weights, more than the F405's 1 MiB flash), builds it with arm-none-eabi-gcc and runs it
once on QEMU with the host streaming every segment's weights; the output must equal onnxruntime.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_cli_json import DOCS, assert_shape
from test_e2e_support import BOARDS, MODELS, TOL, cli, random_input, reference

from splitter import protocol as P
from splitter.device.host import MalformedFrameError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.manifest import ManifestError, PlanManifest
from splitter.segments.build import firmware_cap, unit_problem
from splitter.segments.firmware import chain_units, generate_segmented_c, runtime_records
from splitter.segments.problem import segment_memory, solve_segments
from splitter.segments.server import LOAD, WEIGHTS, WeightServer
from splitter.toolchain.build import run_make

MODEL = "mobilenet_v1_025_64.onnx"
BOARD_FILE = BOARDS / "e2e_segments_f405.toml"
#: Flash of one emulated STM32F405, bytes.
F405_FLASH = 1024 * 1024


@pytest.fixture(scope="module")
def planned() -> tuple:
    chain = load_chain(MODELS / MODEL)
    boards = load_boards(BOARD_FILE)
    device = boards.devices[0]
    cap = firmware_cap(device)
    units = chain_units(chain, cap, core="cortex-m4")
    return chain, boards, device, cap, units


def test_units_cover_every_layer_and_weight_once(planned: tuple) -> None:
    """Units run the layers in order; a sliced layer's slices cover its output channels once
    and their weights add up to the layer's FLASH; every unit fits a segment."""
    chain, _boards, _device, cap, units = planned
    assert [u.layer for u in units] == sorted(u.layer for u in units)
    assert {u.layer for u in units} == set(range(len(chain.layers)))
    sliced = {u.layer for u in units if u.parts > 1}
    assert 28 in sliced  # the 1,028,000 B classifier cannot be one unit in 128 KiB
    for j in range(len(chain.layers)):
        parts = [u for u in units if u.layer == j]
        assert sum(u.weights for u in parts) == chain.layers[j].cost.flash
        assert sum(u.macs for u in parts) == chain.layers[j].cost.macs
        if len(parts) > 1:
            rows = [u.rows for u in parts]
            assert rows[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(rows))
            assert rows[-1][1] == chain.layers[j].ops[parts[0].op].weights["W"].shape[0]
            assert [u.out for u in parts[:-1]] == [u.peak for u in parts[:-1]]
    assert all(u.weights + u.peak <= cap for u in units)


def test_segments_fit_the_firmware_cap(planned: tuple) -> None:
    """Every segment's weights + largest activation buffer fit the RAM the firmware has."""
    chain, boards, device, cap, units = planned
    problem = unit_problem(chain, boards, device, units, cap, None)
    answer = solve_segments(problem)
    assert answer.optimal
    assert all(segment_memory(problem, a, b) <= cap for a, b in answer.segments)
    assert len(answer.segments) > 1


#: (model, boards file, input shape) run by segments on one emulated F405: KWS CNN (279 KB of
#: weights) on a board whose declared flash is 128 KiB, and (extended: 1.87 MB streamed byte
#: by byte, 90 s) MobileNet, more than the part's whole 1 MiB flash
SEGMENT_RUNS = [
    pytest.param("kws_cnn.onnx", Path(__file__).parent / "segments_f405_128k.toml", (1, 1, 49, 10),
                 id="kws_cnn"),
    pytest.param(MODEL, BOARD_FILE, (1, 3, 64, 64), id="mobilenet", marks=pytest.mark.extended),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
@pytest.mark.parametrize(("model", "board_file", "shape"), SEGMENT_RUNS)
def test_model_runs_on_one_f405_by_segments(
    tmp_path: Path, model: str, board_file: Path, shape: tuple[int, ...]
) -> None:
    """segment -o, build, one run on QEMU: output equals onnxruntime, every segment loaded once,
    the region the firmware allocates is the largest segment memory, and loading is timed."""
    device = load_boards(board_file).devices[0]
    cap = firmware_cap(device)
    out = tmp_path / "out"
    seg = cli("segment", str(MODELS / model), "--target", str(board_file), "-o", str(out),
              "--json")  # fmt: skip
    assert seg.returncode == 0, seg.stderr
    doc = json.loads(seg.stdout)
    assert_shape(doc, DOCS["segment"], "segment -o")
    record = json.loads((out / "segments.json").read_text())
    memories = [s["memory_bytes"] for s in record["segments"]]
    assert record["region_bytes"] == max(memories) == doc["region_bytes"] <= cap
    assert record["blob_bytes"] == sum(s["weights_bytes"] for s in record["segments"])
    assert record["blob_bytes"] > device.flash_bytes
    plan = json.loads((out / "plan.json").read_text())
    assert plan["submodels"][0]["flash_bytes"] == 0
    assert plan["submodels"][0]["ram_bytes"] == record["region_bytes"]
    build = cli("build", str(out))
    assert build.returncode == 0, build.stderr
    x = random_input(shape, seed=16)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate", "--json",
              "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout)
    assert_shape(res, DOCS["run"], "run (segmented)")
    assert set(res["loads"][0]) == {"segment", "bytes", "seconds"}  # docs/cli-json.md: run
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference(model, x)))) <= TOL
    assert [x["segment"] for x in res["loads"]] == list(range(len(record["segments"])))
    assert [x["bytes"] for x in res["loads"]] == [s["weights_bytes"] for s in record["segments"]]
    assert 0 < res["load_s"] < res["round_trip_s"]
    # compute cycles only: under -icount they are deterministic, about 1.6 M for MobileNet's
    # 3.8 M MACs; with the loading's busy-waiting left in they would be far above 0.1 s
    assert 0 < res["compute_s"] < 0.1


#: one STM32F746G-DISCO (not in models/boards/: test_firmware_fit would build every model on it)
DISCO = Path(__file__).parent / "segments_f746g_disco.toml"


@pytest.fixture(scope="module")
def disco(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    """``segment -o`` on the STM32F746G-DISCO: the board catalog gives its QUADSPI flash
    (N25Q128A, 16 MiB at 0x90000000), no --extflash."""
    out = tmp_path_factory.mktemp("disco") / "out"
    seg = cli("segment", str(MODELS / MODEL), "--target", str(DISCO), "-o", str(out), "--json")
    assert seg.returncode == 0, seg.stderr
    return out, json.loads(seg.stdout), DISCO


def test_board_external_flash_holds_the_weights(disco: tuple[Path, dict, Path]) -> None:
    """segments.json and plan.json name the board's flash; loading is a memory-mapped read:
    2 QUADSPI clocks per byte at 216 MHz / 2 = 108 MHz (1-4-4), not the link."""
    out, doc, _ = disco
    record = json.loads((out / "segments.json").read_text())
    ext = {"name": "QUADSPI", "origin": 0x90000000, "bytes": 16 << 20}
    assert record["extflash"] == ext and record["blob_bytes"] > F405_FLASH
    seg = json.loads((out / "plan.json").read_text())["segments"]
    assert seg["extflash"] == ext and seg["weights_bytes"] == record["blob_bytes"]
    assert seg["region_bytes"] == record["region_bytes"] == doc["region_bytes"]
    assert [r["units"] for r in seg["rows"]] == [r["units"] for r in record["segments"]]
    for row in seg["rows"]:
        assert row["load_s"] == pytest.approx(row["weights_bytes"] * 2 / 108e6)
        assert row["memory_bytes"] == row["weights_bytes"] + row["activation_bytes"]
    assert "108 MHz" in seg["load_via"] and doc["load_via"] == seg["load_via"]
    # `run --emulate` streams them over the link: its deadline grows by that estimate
    assert record["stream_s"] == pytest.approx(record["blob_bytes"] * 10 / 115200)


def test_plan_segments_json_is_the_plan_segment_writes(
    disco: tuple[Path, dict, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --segments --json` prints what `segment -o OUT` writes as OUT/plan.json (same
    segments, same hash), as `plan --json` does for compile."""
    from test_report_html import run

    out, _, boards = disco
    code, stdout, err = run(
        ["plan", str(MODELS / MODEL), "--target", str(boards), "--segments", "--json"], capsys
    )
    assert code == 0, err
    assert json.loads(stdout) == json.loads((out / "plan.json").read_text())


def test_plan_json_segments_are_checked(disco: tuple[Path, dict, Path], tmp_path: Path) -> None:
    """A tampered segment table is refused in one line (ManifestError)."""
    out, _, _ = disco
    plan = json.loads((out / "plan.json").read_text())
    read = lambda d: PlanManifest.from_dict(d)  # noqa: E731
    assert read(plan).segments is not None
    plan["segments"]["rows"][1]["first"] += 3
    with pytest.raises(ManifestError, match=r"segment 1: layers .* do not follow layer"):
        read(plan)
    plan = json.loads((out / "plan.json").read_text())
    plan["segments"]["rows"][0]["activation_bytes"] += plan["segments"]["region_bytes"]
    with pytest.raises(ManifestError, match=r"segment 0: .* exceed the region"):
        read(plan)


def test_segments_in_report_html(disco: tuple[Path, dict, Path]) -> None:
    """report.html's LO-SC section names the board's external flash and the load model; one
    table row per segment."""
    out, doc, _ = disco
    html = (out / "report.html").read_text()
    section = html.split("<h2>LO-SC segments</h2>")[1].split("<h2>")[0]
    assert f"{len(doc['segments'])} segments run one after another on disco" in section
    assert "external flash QUADSPI at 0x90000000" in section and doc["load_via"] in section
    table = section.split("<table>")[1]
    assert table.count("<tr>") == 1 + len(doc["segments"])
    for row in doc["segments"]:
        assert f"<td>{row['weights_bytes']}</td>" in table


@pytest.mark.slow
@pytest.mark.toolchain
def test_board_extflash_build_and_flash_lines(disco: tuple[Path, dict, Path]) -> None:
    """The part's ELF holds weights.bin at 0x90000000, read in place by segments.c (seg_blob),
    its startup maps the flash (extflash_init); firmware.bin (internal flash) leaves it out.
    `flash --dry-run`: openocd through the board script, STM32_Programmer_CLI with the board's
    external loader, st-flash refused. Built, not run (no QUADSPI in QEMU, no probe here)."""
    out, _, _ = disco
    record = json.loads((out / "segments.json").read_text())
    elf = run_make(out / "firmware" / "disco")
    sections = subprocess.run(
        ["arm-none-eabi-readelf", "-SW", str(elf)], capture_output=True, text=True, check=True
    ).stdout
    row = next(line.split() for line in sections.splitlines() if " .extflash " in line)
    addr, size = int(row[row.index(".extflash") + 2], 16), int(row[row.index(".extflash") + 4], 16)
    assert (addr, size) == (0x90000000, record["blob_bytes"]) and size > F405_FLASH
    symbols = subprocess.run(
        ["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True
    ).stdout
    assert "90000000 R seg_blob" in symbols and "seg_rx" not in symbols
    assert (elf.parent / "firmware.bin").stat().st_size < 64 * 1024
    assert "    extflash_init();" in (out / "firmware" / "disco" / "startup.c").read_text()
    ocd = cli("flash", str(out), "--dry-run", "--tool", "openocd", "--json")
    assert ocd.returncode == 0, ocd.stderr
    dev = json.loads(ocd.stdout)["devices"][0]
    assert dev["command"] == ["openocd", "-f", "board/stm32f746g-disco.cfg", "-c",
                              f"program {elf} verify reset exit"]  # fmt: skip
    assert dev["extflash"] == {"name": "QUADSPI", "origin": 0x90000000,
                               "bytes": record["blob_bytes"]}  # fmt: skip
    cube = cli("flash", str(out), "--dry-run", "--tool", "cubeprog", "--json")
    cmd = json.loads(cube.stdout)["devices"][0]["command"]
    assert cmd[cmd.index("-el") + 1].endswith("ExternalLoader/N25Q128A_STM32F746G-DISCO.stldr")
    assert cmd[cmd.index("-w") + 1] == str(elf)
    st = cli("flash", str(out), "--dry-run", "--tool", "st-flash")
    assert st.returncode == 2 and len(st.stderr.strip().splitlines()) == 1
    assert "st-flash cannot program; use --tool openocd or --tool cubeprog" in st.stderr


def test_extflash_option_is_checked(tmp_path: Path) -> None:
    bad = cli("segment", str(MODELS / MODEL), "--target", str(BOARD_FILE), "-o",
              str(tmp_path / "o"), "--extflash", "0x90000000:lots")  # fmt: skip
    assert bad.returncode == 2
    assert "expected ORIGIN:SIZE[:NAME]" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    small = cli("segment", str(MODELS / MODEL), "--target", str(BOARD_FILE), "-o",
                str(tmp_path / "o"), "--extflash", "0x90000000:1MiB")  # fmt: skip
    assert small.returncode == 2 and "the weights take 1869344 B" in small.stderr
    assert not (tmp_path / "o").exists()


def test_int8_records_pointing_at_loaded_weights_are_not_static() -> None:
    """The int8 kernels' records point at the multipliers, which live in RAM (W8 + offset) in
    segment firmware: those records become automatic, the others stay static const."""
    chain = load_chain(MODELS / "tiny_cnn_int8.tflite")
    units = chain_units(chain, 15 * 1024, core="cortex-m4")
    gen = generate_segmented_c(chain, units, [(0, 3), (4, len(units) - 1)], "f4")
    text = gen.files["model.c"]
    assert "        const k_q_params q = {" in text
    static = text.split("static const k_q_params")[1:]
    assert all(".mult = w_" not in block.split("};")[0] for block in static)
    assert "static const k_window_params p = {" in text
    assert len(gen.blob) == sum(layer.cost.flash for layer in chain.layers)
    assert gen.region_bytes == max(
        sum(u.weights for u in units[a : b + 1]) + max(u.peak for u in units[a : b + 1])
        for a, b in [(0, 3), (4, len(units) - 1)]
    )
    lines = ["static const k_x p = {", "    .w = w_a,", "};", "static const k_y q = {", "};"]
    assert runtime_records(lines, {"w_a"})[::3] == ["const k_x p = {", "static const k_y q = {"]


class _FakeLink:
    """What WeightServer uses of a HostLink: it records the frames it is asked to send."""

    url, device, plan_tag, on_bytes = "fake://", "f4", 0x1234, None

    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []

    def send(self, ftype: int, payload: bytes) -> int:
        self.sent.append((ftype, payload))
        return 1


def test_weight_server_answers_load_with_the_segment_bytes() -> None:
    blob = bytes(range(256)) * 12  # 3072 B: segment 0 = 1000 B, segment 1 = 2072 B
    server = WeightServer(blob, [(0, 1000), (1000, 2072)])
    link = _FakeLink()
    load = P.Frame(LOAD, 1, P.CHUNK.pack(1, 0, 0x1234, 2072, 0))
    assert server(link, load)  # type: ignore[arg-type]
    got = bytearray()
    for ftype, payload in link.sent:
        chunk = P.decode_chunk(payload)
        assert (ftype, chunk.submodel, chunk.total, chunk.tag) == (WEIGHTS, 1, 2072, 0x1234)
        assert chunk.offset == len(got) and len(chunk.data) <= P.CHUNK_DATA
        got += chunk.data
    assert bytes(got) == blob[1000:]
    assert [(x.segment, x.bytes) for x in server.loads] == [(1, 2072)]
    assert not server(link, P.Frame(P.FrameType.TIMING, 2, b""))  # type: ignore[arg-type]
    for bad in (P.CHUNK.pack(2, 0, 0, 10, 0), P.CHUNK.pack(0, 0, 0, 999, 0), b"\x00"):
        with pytest.raises(MalformedFrameError, match="device f4"):
            server(link, P.Frame(LOAD, 3, bad))  # type: ignore[arg-type]


def test_segment_out_refuses_a_layer_profile(tmp_path: Path) -> None:
    profile = str(MODELS / "profiles" / "thesis_profiles.json") + "#kws_cnn"
    res = cli("segment", profile, "--target", str(BOARD_FILE), "-o", str(tmp_path / "o"))
    assert res.returncode == 2 and "layer profile has no weights" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_plan_segments_needs_one_device(capsys: pytest.CaptureFixture[str]) -> None:
    from test_report_html import BOARDS as TWO_BOARDS
    from test_report_html import one_line_error, run

    code, _, err = run(
        ["plan", str(MODELS / MODEL), "--target", str(TWO_BOARDS), "--segments", "--json"], capsys
    )
    one_line_error(code, err, "--segments runs on one: give a board file with one [[device]]")
