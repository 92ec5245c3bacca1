"""The fast weights-literal path (``c_float_lines``) writes exactly what ``c_floats`` writes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from splitter.codegen.ops.literals import WeightTable, c_float_lines, c_floats
from splitter.errors import UnsupportedOpError


def reference_lines(values: np.ndarray, per_line: int = 8, indent: str = "    ") -> str:
    """The layout before the fast path: per-value f-strings, chunked and joined in Python."""
    vals = c_floats(values)
    chunks = (vals[i : i + per_line] for i in range(0, len(vals), per_line))
    return ",\n".join(indent + ", ".join(chunk) for chunk in chunks)


SPECIAL = np.array(
    [0.0, -0.0, 1.0, -1.0, 3.0, 0.5, 0.1, -2.5, 1e-30, 1.4e-45, -1.4e-45, 1.17549435e-38,
     123456789.0, 999999936.0, 1e9, -1e9, 1e10, 8388607.5, 16777216.0, 1048576.125, 1e-4,
     9.99999975e-05, 3.4028235e38, -3.4028235e38, np.inf, -np.inf, 65504.0, 1e8, 100.0],
    dtype=np.float32,
)  # fmt: skip


def test_codegen_literals_special_values_match_reference() -> None:
    """Zeros, integers around 1e9, subnormals, ties of 9 digits, infinities (clamped)."""
    for per_line in (1, 3, 8, 100):
        assert c_float_lines(SPECIAL, per_line) == reference_lines(SPECIAL, per_line)
    assert "-0.0f" in c_float_lines(SPECIAL) and "999999936.0f" in c_float_lines(SPECIAL)


def test_codegen_literals_random_bit_patterns_match_reference() -> None:
    """200k float32 drawn uniformly over bit patterns: every exponent, sign and mantissa."""
    bits = np.random.default_rng(7).integers(0, 2**32, size=200_000, dtype=np.uint64)
    values = bits.astype(np.uint32).view(np.float32)
    values = values[~np.isnan(values)]
    assert c_float_lines(values) == reference_lines(values)


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.integers(0, 40),
        elements=st.floats(width=32, allow_nan=False, allow_subnormal=True),
    ),
    st.integers(1, 9),
    st.sampled_from(["    ", "", "\t", "% "]),
)
def test_codegen_literals_property(values: np.ndarray, per_line: int, indent: str) -> None:
    assert c_float_lines(values, per_line, indent) == reference_lines(values, per_line, indent)


def test_codegen_literals_nan_is_an_error() -> None:
    with pytest.raises(UnsupportedOpError, match="NaN"):
        c_float_lines(np.array([1.0, np.nan], dtype=np.float32))


def test_codegen_weight_table_renders_arrays() -> None:
    """``static const float`` definitions, 8 values a line, names made unique."""
    table = WeightTable()
    a = table.add("conv/W", np.arange(10, dtype=np.float32) / 4)
    b = table.add("conv/W", np.array([[1.5]], dtype=np.float32))
    assert (a, b) == ("w_conv_W", "w_conv_W_1") and table.nbytes == 44
    assert table.render() == (
        "static const float w_conv_W[10] WEIGHTS = {\n"
        "    0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,\n"
        "    2.0f, 2.25f\n};\n\n"
        "static const float w_conv_W_1[1] WEIGHTS = {\n    1.5f\n};\n"
    )


def test_int8_arrays_are_padded_to_four_bytes_as_the_plan_counts() -> None:
    """An int8 array of 45 bytes (a 3x3 depthwise of 5 channels, or a layer split's odd slice)
    is emitted as 48 (three zero bytes), so the int32 array after it starts with no padding the
    plan would not count: the table's bytes are the op's ``op_flash``."""
    from splitter.codegen.ops.formulas import op_flash
    from splitter.ir import Op

    w = np.arange(45, dtype=np.int8).reshape(5, 1, 3, 3)
    b = np.arange(5, dtype=np.int32)
    table = WeightTable()
    table.add("dw_W", w, np.int8)
    table.add("dw_B", b, np.int32)
    (_, padded), _ = table.arrays
    assert padded.size == 48 and not padded[45:].any()
    assert (padded[:45] == w.ravel()).all()
    assert "int8_t w_dw_W[48]" in table.render()
    op = Op("dw", "conv2d", ("x",), ("y",), {"groups": 5}, {"W": w, "B": b})
    assert table.nbytes == op_flash(op) == 48 + 20
