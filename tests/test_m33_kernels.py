"""The int8 ``_dsp`` kernels built for the Cortex-M33 (issue 31), run on QEMU's mps2-an505.

``benchmarks/m33_ipm.py`` cross-compiles the kernels for the M33 and for the M4 (mps2-an386),
runs both under ``-icount shift=0`` and fails unless both builds compute the same output bits;
here its measurement also shows that the M33 build of each ``_dsp`` kernel runs within 3 % of
the M4 build's instructions, the figures the kernel cost table lends the M33 (``M33.dsp`` is a
copy of ``M4F.dsp``, ``Core.measured_as``).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.qemu, pytest.mark.toolchain, pytest.mark.slow]


def test_m33_dsp_kernels_match_the_m4_build() -> None:
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        assert shutil.which(tool), f"{tool} missing: make system-deps installs it"
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("m33_ipm", ROOT / "benchmarks" / "m33_ipm.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["m33_ipm"] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    rows = [r for r in bench.measure() if "case" in r]
    dsp = [r for r in rows if "_dsp)" in str(r["case"])]
    assert len(dsp) == 4 and all(r["same_output_bits"] for r in rows)
    for r in dsp:
        assert 0.97 <= float(r["m33_over_m4"]) <= 1.03, r
        assert float(r["m33_instr_per_mac"]) < float(r["m4_instr_per_mac"]) * 1.03
