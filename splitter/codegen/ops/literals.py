"""C literals and the weights table every emitter writes its constants to.

Float constants are written so that they round-trip float32 (``%.9g``); integer arrays (int8
weights, int32 biases and requantisation multipliers / shifts) as plain integers. Every array is
``static const`` in section ``.weights`` (flash); :attr:`WeightTable.nbytes` is FLASH of the
device's model, checked layer by layer against ``splitter.cost.handlers.op_flash``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from splitter.codegen.ops.formulas import WEIGHT_ALIGN
from splitter.errors import UnsupportedOpError

FLT_MAX = 3.4028234663852886e38


#: Literals per line of a weights array, and the indent of each line.
PER_LINE = 8
INDENT = "    "
#: Per-value formats: ``%.9g`` prints a float32 with neither ``.`` nor an exponent exactly when
#: the value is integral and ``|v| < 1e9`` (Python's ``g`` rule with 9 significant digits; a
#: non-integral float32 never rounds to an integer, since 9 digits resolve ``|v| * 1e-8``, finer
#: than the float32 spacing ``|v| * 2**-24``); those get ``%.1f``, i.e. the ``N.0`` that
#: :func:`c_floats` writes.
_G, _INT = "%.9gf", "%.1ff"


def _finite_float32(values: np.ndarray) -> np.ndarray:
    """``values`` as flat float32; infinities clamp to +-FLT_MAX, NaN raises."""
    a = np.asarray(values, dtype=np.float32).ravel()
    if np.isnan(a).any():
        raise UnsupportedOpError("NaN constant in the model; fix the model")
    if not np.isfinite(a).all():
        a = np.clip(a, -FLT_MAX, FLT_MAX)
    return a


def c_float_lines(values: np.ndarray, per_line: int = PER_LINE, indent: str = INDENT) -> str:
    """The literals of :func:`c_floats`, ``", "``-separated, ``per_line`` per indented line.

    Byte-identical to ``",\\n".join(indent + ", ".join(chunk))`` over ``per_line``-chunks of
    :func:`c_floats`, but with no Python code per value: the format string (one format per
    value, picked by numpy indexing) is applied by a single C-level ``%``, which renders
    ``%.9g`` with the same correctly rounded ``PyOS_double_to_string`` as ``format(v, ".9g")``;
    so every literal is the same text and the same float32 as before.
    """
    a = _finite_float32(values)
    n = int(a.size)
    if n == 0:
        return ""
    brk = ",\n" + indent.replace("%", "%%")
    variants = np.array([_G + ", ", _INT + ", ", _G + brk, _INT + brk], dtype=object)
    code = ((a == np.trunc(a)) & (np.abs(a) < 1e9)).astype(np.intp)
    code[per_line - 1 :: per_line] += 2
    fmts: list[str] = variants[code].tolist()
    fmts[-1] = fmts[-1][: len(_G)]  # no separator after the last value
    return indent + "".join(fmts) % tuple(a.tolist())


def c_floats(values: np.ndarray) -> list[str]:
    """C float literals that round-trip float32 (``%.9g``); infinities clamp to +-FLT_MAX.

    NaN is refused (:class:`UnsupportedOpError`): a model constant should never be NaN.
    The reference formatting (one f-string per value); :func:`c_float_lines` is the fast path.
    """
    a = _finite_float32(values)
    out = []
    for v in a.tolist():
        s = f"{v:.9g}"
        out.append(s + "f" if "." in s or "e" in s else s + ".0f")
    return out


def c_float(value: float) -> str:
    """One C float literal, as :func:`c_floats`."""
    return c_floats(np.array([value]))[0]


#: C element type of each weights dtype the kernels read.
C_TYPES = {"float32": "float", "int8": "int8_t", "int32": "int32_t"}


@dataclass
class WeightTable:
    """The ``const`` arrays of one device, in emission order; ``nbytes`` = FLASH total.

    float32 arrays (every float model) plus, for int8 models, int8 weights and int32 biases /
    requantisation multipliers and shifts.
    """

    arrays: list[tuple[str, np.ndarray]] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)

    @property
    def nbytes(self) -> int:
        """Sum of the emitted arrays' bytes (``size * itemsize``; every array a multiple of 4
        bytes, so the linker places them back to back: the ``.weights`` section's size)."""
        return sum(int(a.nbytes) for _, a in self.arrays)

    def add(self, hint: str, values: np.ndarray, dtype: type = np.float32) -> str:
        """Register an array (flattened, as ``dtype``) and return its C name. An int8 array is
        zero-padded to a multiple of 4 bytes (:data:`~splitter.codegen.ops.formulas.
        WEIGHT_ALIGN`): an int32 array after it would otherwise start after padding the plan
        does not count."""
        base = "w_" + "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in hint)
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        arr = np.asarray(values)
        if dtype is not np.float32 and not np.array_equal(arr.astype(dtype), arr):
            raise UnsupportedOpError(f"{hint}: values do not fit {np.dtype(dtype).name}")
        flat: np.ndarray = np.ascontiguousarray(arr, dtype=dtype).ravel()
        pad = -flat.nbytes % WEIGHT_ALIGN
        if pad:
            flat = np.concatenate([flat, np.zeros(pad // flat.itemsize, dtype=flat.dtype)])
        self.arrays.append((name, flat))
        return name

    def render(self) -> str:
        """C definitions of every array, :data:`PER_LINE` values per line."""
        out = []
        for name, a in self.arrays:
            ctype = C_TYPES[a.dtype.name]
            lines = c_float_lines(a) if a.dtype == np.float32 else c_int_lines(a)
            out.append(f"static const {ctype} {name}[{a.size}] WEIGHTS = {{\n{lines}\n}};\n")
        return "\n".join(out)


def c_int_lines(values: np.ndarray, per_line: int = 16, indent: str = INDENT) -> str:
    """Integer literals, ``per_line`` per indented line (INT32_MIN written as an expression)."""
    vals = [str(v) if v != -(2**31) else "(-2147483647 - 1)" for v in values.tolist()]
    rows = [", ".join(vals[i : i + per_line]) for i in range(0, len(vals), per_line)]
    return ",\n".join(indent + r for r in rows)
