"""The plan manifest's codec (``splitter/manifest/codec.py``): JSON derived from the fields.

* a toy record exercises every :class:`~splitter.manifest.records.JsonSpec` option and a
  :class:`~splitter.manifest.records.Derived` key, both ways;
* every field of every manifest record has its key in a real plan's JSON, and the JSON of a
  real plan (split, energy, PEX loops, segments) reads back to the same record and the same
  bytes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from splitter.manifest import PlanManifest, codec, records
from splitter.manifest.records import SORTED, Derived, js

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, kw_only=True)
class Toy:
    name: str
    size: int | None
    shape: tuple[int, ...]
    by_class: tuple[tuple[str, float], ...] = js(**SORTED)
    speed: float = js(group="link", key="rate")
    mode: str = js("a", group="link", optional=True)
    extra: str = js("", omit_default=True, optional=True)
    old: int = js(0, fallback="size")

    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("rank", "shape", lambda t: len(t.shape), check=True),
    )


TOY = Toy(name="t", size=3, shape=(1, 2), by_class=(("b", 2.0), ("a", 1.0)), speed=9.5, old=7)


def test_toy_record_encodes_in_field_order() -> None:
    assert codec.encode(TOY) == {
        "name": "t",
        "size": 3,
        "shape": [1, 2],
        "rank": 2,
        "by_class": {"b": 2.0, "a": 1.0},
        "link": {"rate": 9.5, "mode": "a"},
        "old": 7,
    }


def test_toy_record_decodes_with_defaults_fallbacks_and_checks() -> None:
    data = codec.encode(TOY)
    back = codec.decode(Toy, data)
    assert back == dataclasses.replace(TOY, by_class=(("a", 1.0), ("b", 2.0)))  # read sorted
    del data["link"]["mode"], data["old"]
    assert codec.decode(Toy, data).mode == "a"  # optional: the default
    assert codec.decode(Toy, data).old == 3  # fallback: the size key
    with pytest.raises(ValueError, match="rank 5 disagrees"):
        codec.decode(Toy, {**data, "rank": 5})
    with pytest.raises(KeyError, match="shape"):
        codec.decode(Toy, {k: v for k, v in data.items() if k != "shape"})
    assert codec.encode(dataclasses.replace(TOY, extra="x"))["extra"] == "x"


def _plan(tmp_path: Path, *args: str) -> str:
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "splitter", "plan", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return res.stdout


PLANS = {
    "split-energy": ("models/tiny_cnn.onnx", "--target", "models/boards/split_tiny3.toml"),
    "pex": (
        "models/pex_irb_48.onnx",
        "--target",
        "models/boards/e2e_pex.toml",
        "--partial-execution",
        "on",
    ),
    "segments": (
        "models/tiny_cnn.onnx",
        "--target",
        "models/boards/e2e_segments_f405.toml",
        "--segments",
    ),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_real_plans_read_back_to_the_same_bytes(name: str, tmp_path: Path) -> None:
    text = _plan(tmp_path, *PLANS[name])
    manifest = PlanManifest.from_json(text)
    assert manifest.to_json() + "\n" == text
    assert PlanManifest.from_dict(json.loads(text)) == manifest


def test_every_record_field_has_a_key(tmp_path: Path) -> None:
    """The codec writes every field (under its key or group) unless it is at an omitted
    default: nothing of a record is lost on the way to plan.json."""
    manifest = PlanManifest.from_json(_plan(tmp_path, *PLANS["pex"]))
    for record in (manifest, manifest.model, manifest.devices[0], manifest.submodels[0]):
        data = codec.encode(record)
        for f in dataclasses.fields(record):
            spec = f.metadata.get("json", records.JsonSpec())
            where = data.get(spec.group, {}) if spec.group else data
            omitted = spec.omit_default and getattr(record, f.name) == f.default
            assert omitted or (spec.key or f.name) in where, (type(record).__name__, f.name)
