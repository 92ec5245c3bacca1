"""LO-SC segment firmware (codegen/segments.py): units, the RAM region, and MobileNet on ONE F405.

The e2e test writes ``splitter segment -o OUT`` for ``mobilenet_v1_025_64.onnx`` (1.87 MB of
float32 weights, more than the F405's 1 MiB flash), builds it with arm-none-eabi-gcc and runs it
once on QEMU with the host streaming every segment's weights; the output must equal onnxruntime.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from test_e2e_support import BOARDS, MODELS, TOL, cli, random_input, reference

from codegen.segments import chain_units
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.partition.segment import segment_memory, solve_segments
from splitter.segment_build import firmware_cap, unit_problem

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


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_mobilenet_runs_on_one_f405_by_segments(tmp_path: Path, planned: tuple) -> None:
    """segment -o, build, one run on QEMU: output equals onnxruntime, every segment loaded once,
    the region the firmware allocates is the largest segment memory, and loading is timed."""
    _chain, _boards, _device, cap, _units = planned
    out = tmp_path / "out"
    seg = cli("segment", str(MODELS / MODEL), "--target", str(BOARD_FILE), "-o", str(out),
              "--json")  # fmt: skip
    assert seg.returncode == 0, seg.stderr
    doc = json.loads(seg.stdout)
    record = json.loads((out / "segments.json").read_text())
    memories = [s["memory_bytes"] for s in record["segments"]]
    assert record["region_bytes"] == max(memories) == doc["region_bytes"] <= cap
    assert record["blob_bytes"] == sum(s["weights_bytes"] for s in record["segments"])
    assert record["blob_bytes"] > F405_FLASH
    plan = json.loads((out / "plan.json").read_text())
    assert plan["submodels"][0]["flash_bytes"] == 0
    assert plan["submodels"][0]["ram_bytes"] == record["region_bytes"]
    build = cli("build", str(out))
    assert build.returncode == 0, build.stderr
    x = random_input((1, 3, 64, 64), seed=16)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate", "--json",
              "--output", str(tmp_path / "y.npy"), "--timeout", "240")  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout)
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= TOL
    assert [x["segment"] for x in res["loads"]] == list(range(len(record["segments"])))
    assert [x["bytes"] for x in res["loads"]] == [s["weights_bytes"] for s in record["segments"]]
    assert 0 < res["load_s"] < res["round_trip_s"]
    assert res["timings"][0]["cycles"] > 0
