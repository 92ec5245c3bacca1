"""The manifest's checks: the invariants of a :class:`~splitter.manifest.records.PlanManifest`
and the schema of ``OUT/firmware/wiring.json``.

:func:`problems` lists every broken invariant of a plan (``PlanManifest.check`` and the reader
raise the first as a :class:`~splitter.manifest.records.ManifestError`); :func:`read_wiring`
validates the wiring description before anything is built, flashed or run.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from splitter import names
from splitter.inputs import check_depth, read_input_text
from splitter.manifest.records import (
    HOST,
    MANIFEST_FILE,
    WIRING_FILE,
    ManifestError,
    PlanManifest,
)


def problems(m: PlanManifest) -> list[str]:
    """Every broken invariant of ``m`` (empty when it is consistent)."""
    out = _range_problems(m) or _name_problems(m)
    if out:
        return out
    n_dev = len(m.devices)
    for d in m.devices:
        if not 0 <= d.index < n_dev or m.devices[d.index] is not d:
            out.append(f"device {d.name} has index {d.index}, listed at another position")
    for s in m.submodels:
        if not 0 <= s.device_index < n_dev or m.devices[s.device_index].name != s.device:
            out.append(f"sub-model {s.index}: device {s.device!r} is not device {s.device_index}")
    if out:
        return out
    totals = m.device_totals()
    for d in m.devices:
        flash, ram = totals.get(d.name, (0, 0))
        if (d.flash_used, d.ram_used) != (flash, ram):
            out.append(
                f"device {d.name}: totals {d.flash_used} B FLASH / {d.ram_used} B RAM but its "
                f"sub-models sum to {flash} / {ram}"
            )
        if d.flash_total > d.flash_budget or d.ram_total > d.ram_limit:
            out.append(
                f"device {d.name}: needs {d.flash_total} B FLASH / {d.ram_total} B RAM, budget "
                f"{d.flash_budget} / {d.ram_limit}"
            )
    out += _boundary_problems(m)
    return out or _segment_problems(m)


def _segment_problems(m: PlanManifest) -> list[str]:
    """Segments: one device hosting the whole chain as one sub-model; numbered in order, layer
    ranges in order from layer 0 to the last (consecutive segments may share a sliced layer);
    weights laid out back to back in ``weights.bin``; each within the region, the sub-model's
    RAM; every segment but the last carries its last unit's output to the next."""
    seg = m.segments
    if seg is None:
        return []
    if len(m.submodels) != 1 or m.submodels[0].device != seg.device or not seg.rows:
        return [f"segments: expected one sub-model on device {seg.device!r} and a segment"]
    sub = m.submodels[0]
    if seg.region_bytes != sub.ram_bytes:
        return [f"segments: region {seg.region_bytes} B but the sub-model's RAM {sub.ram_bytes} B"]
    at, offset = 0, 0
    for k, r in enumerate(seg.rows):
        if r.index != k or r.first not in (at, at + 1) or r.last < r.first or not r.units:
            return [f"segment {k}: layers {r.first}..{r.last} do not follow layer {at}"]
        if r.blob_offset != offset:
            return [f"segment {k}: weights at {r.blob_offset} in weights.bin, expected {offset}"]
        if r.memory_bytes > seg.region_bytes:
            return [f"segment {k}: {r.memory_bytes} B exceed the region's {seg.region_bytes} B"]
        at, offset = r.last, offset + r.weights_bytes
    if seg.rows[0].first != 0 or at != m.model.layers - 1 or offset != seg.weights_bytes:
        return [f"segments: cover layers {seg.rows[0].first}..{at} and {offset} B of weights"]
    return []


def _name_problems(m: PlanManifest) -> list[str]:
    """Device and part names and ports fully matching :mod:`splitter.names`; sub-model files only
    ``submodels/<file>`` (a path that cannot leave ``OUT``)."""
    found = [
        names.problem(names.DEVICE_NAME, d.name, f"device {d.index} name")
        or names.problem(names.PART_NAME, d.mcu, f"device {d.index} mcu")
        or (None if d.port is None else names.problem(names.PORT, d.port, f"device {d.index} port"))
        for d in m.devices
    ]
    found += [
        names.problem(names.SUBMODEL_FILE, s.file, f"sub-model {s.index} file")
        for s in m.submodels
        if s.file is not None
    ]
    return [p for p in found if p is not None]


def _range_problems(m: PlanManifest) -> list[str]:
    """Sub-models numbered in order, contiguous, covering ``0..layers-1``; assignment agrees."""
    n = m.model.layers
    if not m.submodels:
        return ["no sub-models"]
    expect = 0
    for k, s in enumerate(m.submodels):
        if s.index != k or s.first != expect or s.last < s.first:
            return [f"sub-model {k}: layers {s.first}..{s.last}, expected to start at {expect}"]
        if sum(c for _, c in s.macs_by_class) > s.macs:
            return [f"sub-model {k}: MACs by class exceed its {s.macs} MACs"]
        expect = s.last + 1
    if expect != n:
        return [f"sub-models cover layers 0..{expect - 1} of {n}"]
    per_layer = [s.device_index for s in m.submodels for _ in range(s.layers)]
    if list(m.assignment) != per_layer:
        return ["assignment disagrees with the sub-models' layer ranges"]
    return []


def _boundary_problems(m: PlanManifest) -> list[str]:
    """Every sub-model has boundary tensors; ``k``'s outputs are ``k + 1``'s inputs."""
    subs = m.submodels
    for s in subs:
        if not s.inputs or not s.outputs:
            return [f"sub-model {s.index}: no boundary tensors"]
    for a, b in itertools.pairwise(subs):
        sent, read = [t.name for t in a.outputs], [t.name for t in b.inputs]
        if sent != read:
            return [f"sub-model {a.index} sends {sent}, sub-model {b.index} reads {read}"]
    return []


# --- wiring.json ----------------------------------------------------------------------------


_HASH = re.compile(r"[0-9a-f]{16}")


def read_wiring(out_dir: str | Path) -> dict[str, Any]:
    """``OUT/firmware/wiring.json`` validated against its schema, or a one-line
    :class:`ManifestError` naming the file, the field and the fix.

    Checked before anything is built, flashed or run: a JSON object with ``plan_hash`` (16 hex
    digits), ``baud`` (> 0), ``first_device`` / ``last_device`` (device names),
    ``emulated_as_f405`` (text), and a non-empty ``devices`` list whose entries have a unique
    ``name`` fully matching :data:`splitter.names.DEVICE_NAME` (it names a directory under
    ``OUT/firmware``), a unique ``index >= 0``, a ``part`` matching
    :data:`splitter.names.PART_NAME`, integer ``weights_bytes`` / ``arena_bytes`` >= 0, a
    ``clock_hz`` object of positive integers, and ``links`` / ``submodels`` lists of objects
    (links: integer ``index``, ``peer_index`` >= -1, boolean ``server``, ``peer`` "host" or a
    device name).
    """
    from splitter.manifest.codec import require_out_dir

    require_out_dir(out_dir)
    path = Path(out_dir) / WIRING_FILE
    if not path.exists():
        raise ManifestError(
            f"{path}: missing, {out_dir} has no firmware (compiled with --no-firmware?); "
            "re-run `splitter compile` without --no-firmware"
        )
    text = read_input_text(path, "wiring description", error=ManifestError, generated=True)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc}); re-run `splitter compile`") from None
    check_depth(data, str(path), error=ManifestError)
    problem = _wiring_problem(data) or _link_problem(data)
    if problem is None and (Path(out_dir) / MANIFEST_FILE).exists():
        from splitter.manifest.codec import read_manifest

        problem = _parts_problem(data, read_manifest(out_dir))
    if problem is not None:
        raise ManifestError(f"{path}: {problem}; re-run `splitter compile`")
    return dict(data)


def _link_problem(data: dict[str, Any]) -> str | None:
    """Each link between two devices is one serial line: the peer lists the link back, and
    exactly one end is the server (a TCP listener in the emulator, the side that answers
    first on a board)."""
    by_name = {d["name"]: d for d in data["devices"]}
    for dev in data["devices"]:
        for k, ln in enumerate(dev["links"]):
            if ln["peer"] == HOST:
                continue
            peer = by_name.get(ln["peer"])
            back = [b for b in (peer or {}).get("links", []) if b.get("peer") == dev["name"]]
            if not back:
                return f"devices[{dev['index']}].links[{k}]: peer {ln['peer']!a} has no link back"
            if all(b.get("server") == ln["server"] for b in back):
                side = "server" if ln["server"] else "client"
                return (
                    f"devices[{dev['index']}].links[{k}].server: both ends of the link "
                    f"{dev['name']!a} - {ln['peer']!a} are {side}s"
                )
    return None


def _parts_problem(data: dict[str, Any], manifest: PlanManifest) -> str | None:
    """Every device of wiring.json has the part plan.json planned for it."""
    planned = {d.name: d.mcu for d in manifest.devices}
    for dev in data["devices"]:
        if dev["name"] not in planned:
            return f"devices[{dev['index']}].name: {dev['name']!a} is not a device of plan.json"
        if dev["part"] != planned[dev["name"]]:
            return (
                f"devices[{dev['index']}].part: {dev['part']!a}, but plan.json plans "
                f"{planned[dev['name']]!a} for device {dev['name']!a}"
            )
    return None


def _is_int(x: object, low: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _wiring_problem(data: object) -> str | None:
    """The first schema violation of a wiring.json object, or ``None``."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, ok in (
        ("plan_hash", lambda v: names.matches(_HASH, v)),
        ("baud", lambda v: _is_int(v, 1)),
        ("first_device", lambda v: names.matches(names.DEVICE_NAME, v)),
        ("last_device", lambda v: names.matches(names.DEVICE_NAME, v)),
        ("emulated_as_f405", lambda v: names.matches(names.TEXT, v)),
        ("devices", lambda v: isinstance(v, list) and len(v) > 0),
    ):
        if key not in data:
            return f"no key {key!r}"
        if not ok(data[key]):
            return f"{key} = {_shown(data[key])} is malformed"
    seen_names: set[str] = set()
    seen_index: set[int] = set()
    for k, dev in enumerate(data["devices"]):
        problem = _wiring_device_problem(dev)
        if problem is not None:
            return f"devices[{k}]: {problem}"
        if dev["name"] in seen_names or dev["index"] in seen_index:
            return f"devices[{k}]: name or index repeats an earlier device"
        seen_names.add(dev["name"])
        seen_index.add(dev["index"])
    if not {data["first_device"], data["last_device"]} <= seen_names:
        return "first_device / last_device is not one of the devices"
    return None


def _wiring_device_problem(dev: object) -> str | None:
    if not isinstance(dev, dict):
        return "not a JSON object"
    for key in ("name", "index", "part", "weights_bytes", "arena_bytes", "clock_hz", "links"):
        if key not in dev:
            return f"no key {key!r}"
    bad = names.problem(names.DEVICE_NAME, dev["name"], "name") or names.problem(
        names.PART_NAME, dev["part"], "part"
    )
    if bad is not None:
        return bad
    if not all(_is_int(dev[k], 0) for k in ("index", "weights_bytes", "arena_bytes")):
        return "index, weights_bytes and arena_bytes must be integers >= 0"
    clocks = dev["clock_hz"]
    if not isinstance(clocks, dict) or not all(_is_int(v, 1) for v in clocks.values()):
        return "clock_hz must map targets to positive integers"
    if not isinstance(dev.get("submodels", []), list) or not all(
        isinstance(s, dict) for s in dev.get("submodels", [])
    ):
        return "submodels must be a list of objects"
    links = dev["links"]
    if not isinstance(links, list) or not links:
        return "links must be a non-empty list"
    for ln in links:
        if not (
            isinstance(ln, dict)
            and _is_int(ln.get("index"), 0)
            and _is_int(ln.get("peer_index"), -1)
            and isinstance(ln.get("server"), bool)
            and (ln.get("peer") == HOST or names.matches(names.DEVICE_NAME, ln.get("peer")))
        ):
            return f"link {_shown(ln)} lacks an integer index / peer_index, server or peer"
    return None


def _shown(value: object) -> str:
    """A value of a tampered file as a short, one-line, ASCII message fragment."""
    text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."
