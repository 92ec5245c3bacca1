"""Shared helpers of the partition tests: thesis profiles as LayerCost lists, board dicts."""

from __future__ import annotations

import json
from math import prod
from pathlib import Path

from splitter.hardware.boards import boards_from_dict
from splitter.ir import Boards, LayerCost

DATA = Path(__file__).resolve().parents[1] / "models" / "profiles"
PROFILES = json.loads((DATA / "thesis_profiles.json").read_text())
CASES = json.loads((DATA / "thesis_reference_cases.json").read_text())["cases"]


def thesis_costs(model: str) -> list[LayerCost]:
    """The thesis profile as costs: KiB -> bytes, kMAC -> MAC, OUT = 4 * prod(output shape)."""
    return [
        LayerCost(
            flash=round(row["flash_kb"] * 1024),
            ram=round(row["ram_kb"] * 1024),
            macs=round(row["kmac"] * 1000),
            out_bytes=4 * prod(row["output"]),
        )
        for row in PROFILES["models"][model]
    ]


def case_boards_toml(case: dict) -> str:
    """A boards.toml for a reference case (bits_per_byte = 8 as the thesis)."""
    lines = ["[link]", "baud = 115200", "bits_per_byte = 8", ""]
    for k, dev in enumerate(case["devices"]):
        lines += [
            "[[device]]",
            f'name = "d{k}"',
            f'mcu = "{dev["mcu"]}"',
            f'flash = "{dev["flash"]}"',
            "",
        ]
    return "\n".join(lines)


def case_boards(case: dict) -> Boards:
    """Parsed boards of a reference case."""
    import tomllib

    return boards_from_dict(tomllib.loads(case_boards_toml(case)), "case.toml")


def profile_csv(model: str) -> str:
    """The thesis profile in the CSV format of the profile importer."""
    out = ["name,input_shape,output_shape,flash_kb,ram_kb,kmacc"]
    for row in PROFILES["models"][model]:
        shp = lambda s: "x".join(str(v) for v in s)  # noqa: E731
        out.append(
            f"{row['name']},{shp(row['input'])},{shp(row['output'])},"
            f"{row['flash_kb']},{row['ram_kb']},{row['kmac']}"
        )
    return "\n".join(out) + "\n"
