"""``plan.json`` <-> the manifest's records, derived from the dataclass fields.

One walk over :func:`dataclasses.fields` writes a record and one reads it back: a field's key is
its name and its value is converted by its annotated type (``int``, ``float``, ``str``,
``bool``, ``X | None``, a nested record, a :class:`~splitter.ir.TensorSpec`, ``tuple[T, ...]``
as a list, a ``tuple[tuple[str, V], ...]`` of pairs as a ``{name: value}`` object), unless the
field's :class:`~splitter.manifest.records.JsonSpec` says otherwise; the keys a class computes
from itself are its :class:`~splitter.manifest.records.Derived`. Keys come out in field order,
so ``plan.json``'s bytes (and the plan hash the firmware carries) follow from the records.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from splitter.inputs import check_depth, read_input_text
from splitter.ir import QuantParams, TensorSpec
from splitter.manifest import records
from splitter.manifest.records import (
    MANIFEST_FILE,
    SCHEMA,
    Derived,
    JsonSpec,
    ManifestError,
    PlanManifest,
    tensor_bytes,
)

R = TypeVar("R")

_PLAIN = JsonSpec()


def _spec(f: dataclasses.Field[Any]) -> JsonSpec:
    spec = f.metadata.get("json", _PLAIN)
    assert isinstance(spec, JsonSpec)
    return spec


def _hints(cls: type) -> dict[str, Any]:
    """The resolved field types of record class ``cls``."""
    return _hints_of(cls)


@cache
def _hints_of(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(records))


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _derived(cls: type) -> tuple[Derived, ...]:
    return tuple(getattr(cls, "JSON_DERIVED", ()))


# --- types ------------------------------------------------------------------------------------


def _optional(hint: Any) -> Any:
    """``X`` of ``X | None`` (``None`` when ``hint`` is not optional)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return None


def _pairs(hint: Any) -> Any:
    """``V`` of ``tuple[tuple[str, V], ...]`` (a name -> value map), else ``None``."""
    if typing.get_origin(hint) is not tuple:
        return None
    args = typing.get_args(hint)
    if len(args) != 2 or args[1] is not Ellipsis or typing.get_origin(args[0]) is not tuple:
        return None
    inner = typing.get_args(args[0])
    return inner[1] if len(inner) == 2 and inner[0] is str and inner[1] is not Ellipsis else None


def to_json(value: Any, hint: Any, spec: JsonSpec = _PLAIN) -> Any:
    """``value`` of type ``hint`` as JSON data."""
    if spec.write is not None:
        return spec.write(value)
    if value is None:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tensor_dict(value) if isinstance(value, TensorSpec) else encode(value)
    if _pairs(hint) is not None:
        if spec.empty_as_null and not value:
            return None
        return {k: to_json(v, _pairs(hint)) for k, v in value}
    if isinstance(value, tuple):
        args = typing.get_args(_optional(hint) or hint)
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else None
        return [to_json(v, item if item is not None else args[i]) for i, v in enumerate(value)]
    return value


def from_json(data: Any, hint: Any, spec: JsonSpec = _PLAIN) -> Any:
    """JSON ``data`` as a value of type ``hint`` (ValueError / TypeError / KeyError when not)."""
    if spec.read is not None:
        return spec.read(data)
    inner = _optional(hint)
    if inner is not None:
        return None if data is None else from_json(data, inner)
    if hint is TensorSpec:
        return _tensor(data)
    if dataclasses.is_dataclass(hint):
        return decode(hint, data)  # type: ignore[arg-type]
    value_type = _pairs(hint)
    if value_type is not None:
        pairs = [(str(k), from_json(v, value_type)) for k, v in dict(data or {}).items()]
        return tuple(sorted(pairs) if spec.sort else pairs)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(x, args[0]) for x in data)
        return tuple(from_json(x, a) for x, a in zip(data, args, strict=True))
    if hint in (int, float, str, bool):
        return hint(data)
    return data


# --- records ------------------------------------------------------------------------------------


def encode(record: Any) -> dict[str, Any]:
    """The JSON object of a record: its fields in order, then each :class:`Derived` key right
    after its field; a :attr:`JsonSpec.group` field goes into the nested object of that key."""
    cls, out = type(record), dict[str, Any]()
    hints = _hints(cls)
    after: dict[str, list[Derived]] = {}
    for d in _derived(cls):
        after.setdefault(d.after, []).append(d)
    groups: dict[str, dict[str, Any] | None] = {}
    for f in dataclasses.fields(record):
        spec, value = _spec(f), getattr(record, f.name)
        target: dict[str, Any] | None = out
        if spec.group is not None:
            if spec.group not in groups:  # a group is written when its first field is set
                groups[spec.group] = {} if value != _default(f) else None
                if groups[spec.group] is not None:
                    out[spec.group] = groups[spec.group]
            target = groups[spec.group]
        if target is None or (spec.omit_default and value == _default(f)):
            continue
        target[spec.key or f.name] = to_json(value, hints[f.name], spec)
        for d in after.get(f.name, ()):
            target[d.key] = d.value(record)
    return out


def decode(cls: type[R], data: Mapping[str, Any]) -> R:
    """The record ``cls`` of a JSON object (:func:`encode`'s inverse); a missing required key is
    a KeyError, a derived key that disagrees with the record a ValueError."""
    hints, kwargs = _hints(cls), {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        spec = _spec(f)
        src = data if spec.group is None else dict(data.get(spec.group) or {})
        key = spec.key or f.name
        if key in src:
            kwargs[f.name] = from_json(src[key], hints[f.name], spec)
        elif spec.fallback is not None:
            kwargs[f.name] = from_json(src[spec.fallback], hints[f.name])
        elif not (spec.optional or spec.omit_default or spec.group):
            raise KeyError(key)
    record = cls(**kwargs)
    for d in _derived(cls):
        if d.check and data[d.key] != d.value(record):
            raise ValueError(
                f"{d.key} {data[d.key]!r} disagrees with the record ({d.value(record)!r})"
            )
    return record


# --- tensors ------------------------------------------------------------------------------------


def tensor_dict(spec: TensorSpec) -> dict[str, Any]:
    """Name, shape, dtype, bytes and quantisation (scale, zero point, axis) of a tensor."""
    quant = None
    if spec.quant is not None:
        quant = {
            "scale": list(spec.quant.scale),
            "zero_point": list(spec.quant.zero_point),
            "axis": spec.quant.axis,
        }
    return {
        "name": spec.name,
        "shape": list(spec.shape),
        "dtype": spec.dtype,
        "bytes": tensor_bytes(spec),
        "quant": quant,
    }


def _tensor(data: Mapping[str, Any]) -> TensorSpec:
    """:func:`tensor_dict`'s inverse; its ``bytes`` must be the shape's."""
    q = data.get("quant")
    quant = None
    if q is not None:
        axis = q.get("axis")
        quant = QuantParams(
            tuple(float(s) for s in q["scale"]),
            tuple(int(z) for z in q["zero_point"]),
            None if axis is None else int(axis),
        )
    shape = tuple(int(d) for d in data["shape"])
    spec = TensorSpec(str(data["name"]), shape, str(data["dtype"]), quant)
    if data.get("bytes") != tensor_bytes(spec):
        raise ValueError(f"tensor {spec.name}: bytes {data.get('bytes')} != shape x itemsize")
    return spec


# --- the manifest -------------------------------------------------------------------------------


def manifest_json(manifest: PlanManifest, indent: int | None = 2) -> str:
    """The manifest as JSON text (what ``plan --json`` prints and ``plan.json`` holds)."""
    return json.dumps(encode(manifest), indent=indent)


def parse_manifest(data: Mapping[str, Any], where: str = MANIFEST_FILE) -> PlanManifest:
    """Parse and check a manifest object; :class:`ManifestError` on any problem."""
    from splitter.manifest.checks import problems

    if not isinstance(data, Mapping):
        raise ManifestError(f"{where}: not a JSON object; re-run `splitter compile`")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ManifestError(
            f"{where}: unknown plan schema {schema!r} (this splitter reads {SCHEMA!r}); "
            "re-run `splitter compile` with this version"
        )
    try:
        manifest = decode(PlanManifest, data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ManifestError(
            f"{where}: malformed plan ({type(exc).__name__}: {exc}); re-run `splitter compile`"
        ) from None
    problem = next(iter(problems(manifest)), None)
    if problem is None and data.get("links") != manifest.links():
        problem = "links disagree with the sub-models"
    if problem is not None:
        raise ManifestError(f"{where}: {problem}; re-run `splitter compile`")
    return manifest


def read_manifest_text(text: str, where: str = MANIFEST_FILE) -> PlanManifest:
    """Parse JSON text (see :func:`parse_manifest`)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ManifestError(f"{where}: not valid JSON ({exc}); re-run `splitter compile`") from None
    check_depth(data, where, error=ManifestError)  # and no NUL in a key or string
    return parse_manifest(data, where)


def require_out_dir(out_dir: str | Path) -> None:
    """A one-line error when ``OUT`` itself does not exist (a typo), before any file in it is
    said to be missing."""
    if not Path(out_dir).is_dir():
        raise ManifestError(
            f"{out_dir}: no such output directory; give the -o directory of `splitter compile`"
        )


def read_manifest(out_dir: str | Path) -> PlanManifest:
    """``OUT/plan.json`` as a checked :class:`PlanManifest`, or a one-line error with the fix."""
    require_out_dir(out_dir)
    path = Path(out_dir) / MANIFEST_FILE
    if not path.exists():
        raise ManifestError(
            f"{path}: missing, so {out_dir} is not a `splitter compile` output; "
            f"run `splitter compile MODEL --target BOARDS.toml -o {out_dir}`"
        )
    text = read_input_text(path, "plan", error=ManifestError, generated=True)
    return read_manifest_text(text, str(path))
