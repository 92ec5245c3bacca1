"""Layer-profile importer: per-layer tables (CSV or JSON) from vendor tools to a :class:`Chain`.

CSV: exactly the header ``name,input_shape,output_shape,flash_kb,ram_kb,kmacc``, one row per
layer in order (first row usually the input). Shapes are ``(49, 10, 1)`` or ``49x10x1``; sizes
are KiB (``bytes = round(kb * 1024)``); ``kmacc`` is thousands of MACs
(``macs = round(kmacc * 1000)``); ``out_bytes = (activation_bytes or 4) * prod(output_shape)``.

JSON: a list of objects with the CSV's keys, or a multi-profile document like the thesis's
``thesis_profiles.json`` (``{"models": {name: [{name, input, output, flash_kb, ram_kb, kmac}]}}``)
where ``FILE.json#name`` picks one profile. Profile layers have no ops; a first row named
``Input`` becomes the input layer (kind ``"input"``), every other row has kind ``"profile"``.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from splitter.errors import InputFileError, quoted
from splitter.inputs import parse_json, read_input_text
from splitter.ir import Chain, Layer, LayerCost, TensorSpec

HEADER = ("name", "input_shape", "output_shape", "flash_kb", "ram_kb", "kmacc")
#: JSON key spellings accepted for each CSV column (the thesis file uses the short ones).
JSON_KEYS: Mapping[str, tuple[str, ...]] = {
    "name": ("name",),
    "input_shape": ("input_shape", "input"),
    "output_shape": ("output_shape", "output"),
    "flash_kb": ("flash_kb",),
    "ram_kb": ("ram_kb",),
    "kmacc": ("kmacc", "kmac"),
}
_DTYPE_OF_BYTES = {1: "int8", 2: "int16", 4: "float32", 8: "float64"}
_SHAPE_SEP = re.compile(r"\s*[xX,]\s*")
#: Largest value of each numeric column (4 GiB of FLASH or RAM, 10^15 MACs): beyond any MCU,
#: they keep the planner's arithmetic finite.
MAXIMA = {"flash_kb": float(1 << 22), "ram_kb": float(1 << 22), "kmacc": 1e12}
#: Largest number of elements of a layer's input or output tensor (2^32).
MAX_ELEMENTS = 1 << 32
#: (row number, line number or None, {column: value}) of one profile row.
Row = tuple[int, int | None, dict[str, Any]]


class _Where:
    """Names a place in the file for error messages: ``file: row k (line n), column 'c'``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def row(self, row: int, line: int | None = None) -> str:
        at = f"row {row}" + (f" (line {line})" if line is not None else "")
        return f"{self.source}: {at}"

    def fail(self, row: int, line: int | None, column: str, problem: str, fix: str) -> NoReturn:
        raise InputFileError(f"{self.row(row, line)}, column {quoted(column)}: {problem}; {fix}")


def load_profile(text: str, *, activation_bytes: int | None = None) -> Chain:
    """Read the profile at ``text`` (a path, optionally ``FILE.json#name``) as a costed chain."""
    path_text, _, pick = text.partition("#")
    path = Path(path_text)
    if activation_bytes is not None and activation_bytes < 1:
        raise InputFileError(f"{path}: activation bytes must be >= 1, got {activation_bytes}")
    raw = read_input_text(path, "profile")
    if not raw.strip():
        raise InputFileError(f"{path}: the profile is empty; add the header {','.join(HEADER)}")
    if path.suffix.lower() == ".json":
        name, rows, source = _json_rows(path, raw, pick)
    elif pick:
        raise InputFileError(f"{path}: '#{pick}' only selects a profile of a JSON file; drop it")
    else:
        name, rows, source = path.stem, _csv_rows(path, raw), str(path)
    layers = _layers(rows, _Where(source), activation_bytes or 4)
    return Chain(name, tuple(layers), graph=None, source_path=text)


def _csv_rows(path: Path, raw: str) -> list[Row]:
    """(row number, line number, {column: text}) for every data row of a CSV profile; a line the
    CSV reader cannot split (a bare carriage return inside a field, found by the fuzzer) is a
    one-line :class:`InputFileError`."""
    reader = csv.reader(io.StringIO(raw))
    try:
        return _csv_table(path, reader)
    except csv.Error as exc:
        raise InputFileError(
            f"{path}: line {reader.line_num}: not CSV ({exc}); end lines with a newline and "
            "quote fields that hold one"
        ) from None


def _csv_table(path: Path, reader: Any) -> list[Row]:
    """:func:`_csv_rows` over an open ``csv.reader``."""
    header = [h.strip() for h in next(reader)]
    missing = [h for h in HEADER if h not in header]
    extra = [h for h in header if h not in HEADER]
    if missing or extra or tuple(header) != HEADER:
        what = f"missing column(s) {', '.join(missing)}" if missing else ""
        what = what or (
            f"unknown column(s) {', '.join(extra)}" if extra else "columns out of order"
        )
        raise InputFileError(
            f"{path}: line 1: bad header ({what}); the header must be exactly {','.join(HEADER)}"
        )
    rows: list[Row] = []
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue
        row, line = len(rows) + 1, reader.line_num
        if len(cells) != len(HEADER):
            raise InputFileError(
                f"{path}: row {row} (line {line}): {len(cells)} values for {len(HEADER)} columns; "
                'quote shapes that contain commas, e.g. "(49, 10, 1)", or write 49x10x1'
            )
        rows.append((row, line, dict(zip(HEADER, (c.strip() for c in cells), strict=True))))
    if not rows:
        raise InputFileError(
            f"{path}: the profile has a header but no layer rows; add one per layer"
        )
    return rows


def _json_rows(path: Path, raw: str, pick: str) -> tuple[str, list[Row], str]:
    """(profile name, rows, source label) of a JSON profile (list, or ``{"models": ...}``)."""
    data = parse_json(raw, str(path))
    name, source = path.stem, str(path)
    if isinstance(data, dict) and isinstance(data.get("models"), dict):
        name, data = _pick(path, data["models"], pick)
        source = f"{path}#{name}"
    elif pick:
        raise InputFileError(
            f"{path}: '#{pick}' given but the file holds a single profile; drop it"
        )
    if not isinstance(data, list):
        raise InputFileError(
            f'{source}: expected a list of layer objects (or {{"models": {{name: [...]}}}}), '
            f"got {type(data).__name__}"
        )
    if not data:
        raise InputFileError(f"{source}: the profile has no layers; add one object per layer")
    rows: list[Row] = []
    for i, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise InputFileError(
                f"{source}: row {i}: expected an object with keys {', '.join(HEADER)}"
            )
        rows.append((i, None, _json_row(_Where(source), i, item)))
    return name, rows, source


def _pick(path: Path, models: Mapping[str, Any], pick: str) -> tuple[str, Any]:
    """The profile called ``pick`` (or the only one) of a multi-profile document."""
    names = ", ".join(sorted(models))
    if not pick and len(models) == 1:
        return next(iter(models.items()))
    if not pick:
        raise InputFileError(f"{path}: holds several profiles; pick one with {path}#NAME ({names})")
    if pick not in models:
        raise InputFileError(f"{path}: no profile named {quoted(pick)}; available: {names}")
    return pick, models[pick]


def _json_row(where: _Where, row: int, item: Mapping[str, Any]) -> dict[str, Any]:
    """Map a JSON object's keys (either spelling) to the CSV columns."""
    out: dict[str, Any] = {}
    for column, keys in JSON_KEYS.items():
        key = next((k for k in keys if k in item), None)
        if key is None:
            where.fail(row, None, column, "missing", f"add {quoted(keys[0])} to every layer object")
        out[column] = item[key]
    return out


def _layers(rows: Sequence[Row], where: _Where, act_bytes: int) -> list[Layer]:
    """One profile :class:`Layer` per row (no ops)."""
    layers = []
    dtype = _DTYPE_OF_BYTES.get(act_bytes, "float32")
    for index, (row, line, cells) in enumerate(rows):
        name = str(cells["name"]).strip()
        if not name:
            where.fail(row, line, "name", "empty layer name", "give every layer a name")
        in_shape = _shape(where, row, line, "input_shape", cells["input_shape"])
        out_shape = _shape(where, row, line, "output_shape", cells["output_shape"])
        cost = LayerCost(
            flash=round(_number(where, row, line, "flash_kb", cells["flash_kb"]) * 1024),
            ram=round(_number(where, row, line, "ram_kb", cells["ram_kb"]) * 1024),
            macs=round(_number(where, row, line, "kmacc", cells["kmacc"]) * 1000),
            out_bytes=act_bytes * math.prod(out_shape),
        )
        kind = "input" if index == 0 and name.lower() == "input" else "profile"
        layers.append(
            Layer(
                index=index,
                name=name,
                kind=kind,
                ops=(),
                input=TensorSpec(f"{index}:{name}:in", in_shape, dtype),
                output=TensorSpec(f"{index}:{name}:out", out_shape, dtype),
                cost=cost,
            )
        )
    return layers


def _unbracketed(text: str) -> str | None:
    """``text`` without one enclosing ``(...)`` or ``[...]`` pair; ``None`` when a bracket is
    unbalanced or mismatched (``(49, 10``, ``49, 10]``, ``(49, 10]``, ``((49))``)."""
    pairs = {"(": ")", "[": "]"}
    if text[:1] in pairs:
        if text[-1:] != pairs[text[0]]:
            return None
        text = text[1:-1]
    return None if any(ch in text for ch in "()[]") else text


def _shape(where: _Where, row: int, line: int | None, column: str, value: Any) -> tuple[int, ...]:
    """``(49, 10, 1)``, ``[49, 10, 1]``, ``49x10x1`` or a JSON list -> positive int tuple."""
    if isinstance(value, list | tuple):
        parts: list[Any] = list(value)
    else:
        text = _unbracketed(str(value).strip())
        if text is None:
            where.fail(
                row,
                line,
                column,
                f"bad shape {value!r} (unbalanced brackets)",
                "write it as 49x10x1, (49, 10, 1) or [49, 10, 1]",
            )
        text = (text or "").strip().rstrip(",")
        parts = [p for p in _SHAPE_SEP.split(text)] if text else []
    dims = []
    for part in parts:
        try:
            dim = int(str(part).strip()) if not isinstance(part, int) else part
        except ValueError:
            dim = None
        if dim is None or isinstance(part, bool) or dim <= 0:
            where.fail(
                row,
                line,
                column,
                f"bad shape {value!r}",
                "write positive dimensions as 49x10x1 or (49, 10, 1)",
            )
        dims.append(int(dim))
    if not dims:
        where.fail(row, line, column, f"bad shape {value!r}", "write it as 49x10x1 or (49, 10, 1)")
    if math.prod(dims) > MAX_ELEMENTS:
        where.fail(
            row,
            line,
            column,
            f"shape {value!r} is too large",
            f"a tensor has at most {MAX_ELEMENTS} elements",
        )
    return tuple(dims)


def _number(where: _Where, row: int, line: int | None, column: str, value: Any) -> float:
    """A finite number in ``[0, MAXIMA[column]]``."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        where.fail(
            row, line, column, f"{value!r} is not a number", "write a plain number like 18.125"
        )
    if not math.isfinite(number):
        where.fail(
            row, line, column, f"{value!r} is not finite", "write a plain number like 18.125"
        )
    if number < 0:
        where.fail(row, line, column, f"negative size {value!r}", "sizes and MACs must be >= 0")
    if number > MAXIMA[column]:
        where.fail(
            row, line, column, f"{value!r} is out of range", f"give at most {MAXIMA[column]:.15g}"
        )
    return number
