"""The kernel library's libm-free math and its cross builds.

k_expf / k_sigmoidf / k_tanhf are compiled for the host (ASan+UBSan) and compared with float64
numpy on a dense grid; kernels.c, k_libc.c and the int8 kernels (kernels_q8.c, kernels_q8_opt.c:
the DSP variants through the intrinsics on M4F / M7, through k_dsp_emu.h on M0+) must build
warning-free for M0+, M4F and M7 with the real arm-none-eabi-gcc.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from splitter.codegen.model_c import KERNELS_DIR

MATH_MAIN = r"""
#include <stdio.h>
#include "kernels.h"
int main(int argc, char **argv)
{
    float x, r[3];
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    (void)argc;
    while (fread(&x, sizeof x, 1, in) == 1) {
        r[0] = k_expf(x); r[1] = k_sigmoidf(x); r[2] = k_tanhf(x);
        fwrite(r, sizeof r, 1, out);
    }
    fclose(in); fclose(out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def math_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, np.ndarray]:
    work = tmp_path_factory.mktemp("kmath")
    (work / "main.c").write_text(MATH_MAIN)
    exe = work / "kmath"
    flags = ["-std=c99", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined"]
    srcs = [str(work / "main.c"), str(KERNELS_DIR / "kernels.c")]
    subprocess.run(["gcc", *flags, f"-I{KERNELS_DIR}", "-o", str(exe), *srcs], check=True)
    x = np.concatenate(
        [np.linspace(-90, 90, 40001), np.linspace(-1, 1, 20001), [-1e-6, 0.0, 1e-6, 87.0]]
    ).astype(np.float32)
    (work / "x.bin").write_bytes(x.tobytes())
    subprocess.run([str(exe), str(work / "x.bin"), str(work / "y.bin")], check=True)
    y = np.frombuffer((work / "y.bin").read_bytes(), dtype=np.float32).reshape(-1, 3)
    return x.astype(np.float64), y.astype(np.float64)


def test_kernels_expf_relative_error(math_results: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = math_results
    ok = (x > -87.0) & (x < 88.72)  # float32 range: no denormals, no overflow
    ref = np.exp(x[ok])
    assert np.max(np.abs(y[ok, 0] - ref) / ref) < 1e-6


def test_kernels_sigmoid_tanh_absolute_error(math_results: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = math_results
    assert np.max(np.abs(y[:, 1] - 1 / (1 + np.exp(-x)))) < 1e-6
    assert np.max(np.abs(y[:, 2] - np.tanh(x))) < 1e-6
    small = np.abs(x) < 0.5
    assert (
        np.max(np.abs(y[small, 2] - np.tanh(x[small])) / np.maximum(np.abs(x[small]), 1e-30)) < 1e-6
    )


CORES = {
    "cortex-m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
    "cortex-m7": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
}


@pytest.mark.parametrize("core", sorted(CORES))
def test_kernels_cross_build_warning_free(core: str, tmp_path: Path) -> None:
    gcc = shutil.which("arm-none-eabi-gcc")
    assert gcc, (
        "apt-get install -y --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi"
    )
    flags = [*CORES[core], "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffreestanding",
             "-fno-tree-loop-distribute-patterns"]  # fmt: skip
    for src in ("kernels.c", "k_libc.c", "kernels_q8.c", "kernels_q8_opt.c"):
        cmd = [gcc, *flags, "-c", str(KERNELS_DIR / src), "-o", str(tmp_path / "k.o")]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0 and res.stderr == "", res.stderr
