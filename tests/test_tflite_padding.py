"""SAME / VALID padding of the TFLite importer against hand-computed numbers and TFLite's rule."""

from __future__ import annotations

import pytest
import tflite
from hypothesis import given
from hypothesis import strategies as st

from splitter.importers.tflite_ops import explicit_pads, same_pads, spatial_out, window_out


@pytest.mark.parametrize(
    ("in_size", "kernel", "stride", "dilation", "expected"),
    [
        (49, 3, 2, 1, (1, 1)),  # out 25: total (25-1)*2+3-49 = 2
        (10, 3, 1, 1, (1, 1)),  # out 10: total 9+3-10 = 2
        (224, 3, 2, 1, (0, 1)),  # out 112: total 111*2+3-224 = 1 -> odd pixel after
        (225, 3, 2, 1, (1, 1)),  # out 113: total 112*2+3-225 = 2
        (7, 1, 1, 1, (0, 0)),  # 1x1 kernels never pad
        (8, 2, 2, 1, (0, 0)),  # out 4: total 3*2+2-8 = 0
        (5, 4, 1, 1, (1, 2)),  # out 5: total 4+4-5 = 3
        (10, 3, 1, 2, (2, 2)),  # dilated: eff_k 5, total 9+5-10 = 4
        (3, 5, 3, 1, (1, 1)),  # out 1: total 0+5-3 = 2
    ],
)
def test_same_pads_hand_computed(
    in_size: int, kernel: int, stride: int, dilation: int, expected: tuple[int, int]
) -> None:
    assert same_pads(in_size, kernel, stride, dilation) == expected


def test_explicit_pads_order_top_left_bottom_right() -> None:
    same = tflite.Padding.SAME
    # H: 224 k3 s2 -> (0, 1); W: 49 k4 s1 -> out 49, total 48+4-49 = 3 -> (1, 2)
    assert explicit_pads(same, (224, 49), (3, 4), (2, 1)) == (0, 1, 1, 2)
    assert explicit_pads(tflite.Padding.VALID, (224, 49), (3, 4), (2, 1)) == (0, 0, 0, 0)


def test_valid_output_sizes() -> None:
    # VALID: out = ceil((in - eff_k + 1) / stride)
    assert window_out(49, 3, 2, 0) == 24
    assert window_out(26, 3, 2, 0) == 12
    assert window_out(10, 3, 1, 0, dilation=2) == 6
    assert spatial_out((25, 10), (2, 2), (2, 2), (0, 0, 0, 0)) == (12, 5)


@given(
    in_size=st.integers(1, 300),
    kernel=st.integers(1, 9),
    stride=st.integers(1, 4),
    dilation=st.integers(1, 3),
)
def test_same_gives_ceil_in_over_stride(
    in_size: int, kernel: int, stride: int, dilation: int
) -> None:
    """TFLite SAME: ``out = ceil(in / stride)``, ``before <= after <= before + 1``."""
    before, after = same_pads(in_size, kernel, stride, dilation)
    assert 0 <= before <= after <= before + 1
    out = window_out(in_size, kernel, stride, before + after, dilation)
    assert out == -(-in_size // stride)
