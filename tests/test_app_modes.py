"""``compile --app harness|standalone|library``: which files each mode gets, the refusals, and the
library linked into a minimal user ``main()`` for an M0+, an M4 and an M7 part.

The user program (``USER_MAIN``) includes only ``splitter.h`` and ``splitter_port.h``, implements
the port with stand-ins for HAL calls and is linked by arm-none-eabi-gcc with newlib's
``nosys.specs`` against ``build/part/libsplitter.a`` (what ``make`` builds in library mode), as a
CubeMX project would link it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_e2e_support import BOARDS, MODELS, cli

from splitter.codegen.firmware import APP_MODES, MODE_ONLY, mode_sources
from splitter.compile import CompileOptions, compile_model
from splitter.toolchain.build import run_make

FILES = [
    "main.c", "plan.c", "startup.c", "uart.c", "uart.h", "timer.c", "timer.h", "libc.c",
    "part.ld", "emulator.ld", "runtime.c", "proto.c", "port.c", "splitter.h", "splitter_port.h",
    "app.c", "app.h", "app_samples.c", "model.c", "kernels/kernels.c", "Makefile",
]  # fmt: skip

USER_MAIN = r"""
#include "splitter.h"
#include "splitter_port.h"

static volatile uint32_t ticks;
static volatile uint32_t last_class;

/* The product's port: HAL_UART_Transmit / HAL_GetTick in a CubeMX project. */
void splitter_port_write(int link, const uint8_t *data, uint32_t n) {
    (void)link; (void)data; (void)n;
}
uint32_t splitter_port_millis(void) { return ticks++; }

static void on_result(const splitter_result_t *r, void *user) {
    (void)user;
    last_class = r->inference;
}

int main(void) {
    static float x[784];
    splitter_init();
    splitter_on_result(on_result, 0);
    for (int k = 0; k < 3; k++) {
        if (splitter_ready()) (void)splitter_submit(x, sizeof x);
        (void)splitter_poll();
        if (splitter_status()->code != 0) return 1;
    }
    return (int)last_class;
}
"""


def test_mode_sources_leave_out_what_the_product_owns() -> None:
    lib = mode_sources("library", FILES)
    assert not {"main.c", "startup.c", "uart.c", "timer.c", "libc.c", "app.c", "part.ld"} & set(lib)
    assert {"plan.c", "runtime.c", "proto.c", "port.c", "model.c", "kernels/kernels.c"} <= set(lib)
    assert "Makefile" in lib and "splitter.h" in lib
    std = mode_sources("standalone", FILES)
    assert {"main.c", "startup.c", "uart.c", "app.c", "app_samples.c"} <= set(std)
    assert "port.c" not in std
    harness = mode_sources("harness", FILES)
    assert not {"app.c", "port.c", "splitter_port.h"} & set(harness)
    assert set(MODE_ONLY) <= set(FILES) and set(APP_MODES) == {"harness", "standalone", "library"}
    with pytest.raises(ValueError, match="choose one of"):
        mode_sources("rtos", FILES)


def test_app_mode_a_plan_cannot_support_is_refused_and_out_kept(tmp_path: Path) -> None:
    """kws_cnn on e2e_kws3: d0 hosts sub-models 0 and 3, so the library (whose figures the
    plan counts; the standalone image no longer fits these tight budgets at all) is refused in
    one line naming d0 and the fix, exit 2, and the OUT of an earlier compile is untouched."""
    out = tmp_path / "out"
    model, boards = str(MODELS / "kws_cnn.onnx"), str(BOARDS / "e2e_kws3.toml")
    first = cli("compile", model, "-t", boards, "-o", str(out), "--no-validate", "--no-firmware")
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    r = cli("compile", model, "-t", boards, "-o", str(out), "--force", "--app", "library")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "device d0: hosts sub-models 0, 3" in lines[0] and "--app harness" in lines[0]
    head = cli("compile", model, "-t", boards, "-o", str(out), "--force", "--result-on", "head")
    assert head.returncode == 2 and len(head.stderr.strip().splitlines()) == 1
    assert "device d0" in head.stderr and "--app standalone or --app library" in head.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_result_on_head_without_a_free_usart_is_refused_and_out_kept(tmp_path: Path) -> None:
    """The head a is an STM32L412KB, whose Nucleo-32 routes two USARTs (the ST-LINK's and the one
    to b): the return link of --result-on head has none left. Refused before anything is
    written, in one line naming a and the fix; the OUT of an earlier compile is untouched; with
    --result-on tail the same plan compiles. (The planner, which counts the return link,
    would rather put the head elsewhere: the plan is given, as ``--assignment`` does.)"""
    from splitter.errors import BoardFileError

    boards = tmp_path / "boards.toml"
    boards.write_text(
        '[[device]]\nname = "a"\nmcu = "STM32L412KB"\nboard = "nucleo-l412kb"\n'
        '[[device]]\nname = "b"\nmcu = "STM32F405RG"\n'
    )
    out = tmp_path / "out"
    model = MODELS / "tiny_cnn.onnx"
    opts = CompileOptions(validate=False, assignment=(0, 1, 1, 1, 1), app="standalone")
    compile_model(model, boards, out, opts)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    head = CompileOptions(validate=False, assignment=(0, 1, 1, 1, 1), app="standalone",
                          result_on="head", force=True)  # fmt: skip
    with pytest.raises(BoardFileError) as info:
        compile_model(model, boards, out, head)
    (line,) = str(info.value).splitlines()
    assert "device a: --result-on head needs a USART for the return link to b" in line
    assert "nucleo-l412kb has 2 (USART2, USART1)" in line and "use --result-on tail" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_result_on_head_with_one_board_behaves_as_tail(tmp_path: Path) -> None:
    """One board runs the whole chain: head = tail, no return link, the results stay on it."""
    boards = tmp_path / "boards.toml"
    boards.write_text('[[device]]\nname = "a"\nmcu = "STM32F405RG"\n')
    opts = CompileOptions(validate=False, app="standalone", result_on="head")
    res = compile_model(MODELS / "tiny_cnn.onnx", boards, tmp_path / "o", opts)
    assert res.firmware.startswith("generated"), res.firmware
    config = (res.out_dir / "firmware" / "a" / "config.h").read_text()
    assert "#define RESULT_LINK -1" in config and "#define N_LINKS 1" in config


def test_standalone_samples_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    """e2e_tiny2 gives board a 62 KiB of flash: 20 samples of 3136 B do not fit beside its code."""
    import numpy as np

    x = np.zeros((20, 1, 1, 28, 28), np.float32)
    np.save(tmp_path / "x.npy", x)
    r = cli("compile", str(MODELS / "tiny_cnn.onnx"), "-t", str(BOARDS / "e2e_tiny2.toml"),
            "-o", str(tmp_path / "out"), "--no-validate", "--app", "standalone",
            "--input", str(tmp_path / "x.npy"))  # fmt: skip
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "device a: --app standalone adds 62720 B of sample inputs" in r.stderr
    assert "pass fewer --input samples" in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.toolchain
@pytest.mark.slow
@pytest.mark.extended  # the Make twin of tests/test_cmake_build.py's library test
def test_library_links_into_a_user_main_on_m0plus_m4_m7(tmp_path: Path) -> None:
    """tiny_cnn over f4 (F405, M4F: layers 0-1), h7 (H743, M7: layer 2) and g0 (STM32G071RB,
    M0+: the rest): each board's
    libsplitter.a (make, library mode) links into USER_MAIN with newlib's startup."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("install it: apt-get install --no-install-recommends gcc-arm-none-eabi")
    opts = CompileOptions(assignment=(1, 1, 2, 0, 0), validate=False, force=True, app="library")
    res = compile_model(MODELS / "tiny_cnn.onnx", BOARDS / "m0_m4_m7.toml", tmp_path / "o", opts)
    assert res.firmware.startswith("generated"), res.firmware
    (tmp_path / "user_main.c").write_text(USER_MAIN)
    for dev in ("g0", "f4", "h7"):
        proj = res.out_dir / "firmware" / dev
        assert not (proj / "main.c").exists() and not (proj / "startup.c").exists()
        run_make(proj, emulator=False)
        lib = proj / "build" / "part" / "libsplitter.a"
        cpu = _cpu_flags(proj)
        elf = tmp_path / f"{dev}.elf"
        cmd = ["arm-none-eabi-gcc", *cpu, "-O2", f"-I{proj}", str(tmp_path / "user_main.c"),
               str(lib), "--specs=nosys.specs", "-Wl,--gc-sections", "-o", str(elf)]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
        syms = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True)
        for sym in ("splitter_init", "splitter_poll", "model_arena", "sm_0"):
            assert sym in syms.stdout, (dev, sym)


def _cpu_flags(project: Path) -> list[str]:
    """The part's CPU flags from the project's Makefile (``CPU := ...`` of EMULATOR=0)."""
    for line in (project / "Makefile").read_text().splitlines():
        if line.startswith("CPU := "):
            return line.removeprefix("CPU := ").split()
    raise AssertionError("no CPU line")


def test_result_on_head_counts_the_return_link() -> None:
    """``--result-on head`` in the plan: the result's trip from the tail back to the head (the
    model's 40 output bytes with the TIMING records of the inference tag and both sub-models)
    is in the latency (eq. 13) and in the tail's sending and the head's receiving time (eq. 17);
    the head's runtime RAM holds the return link and its 40-byte result buffer. One device
    (head = tail): no return link."""
    from dataclasses import replace

    from splitter.hardware.boards import load_boards
    from splitter.importers import load_chain
    from splitter.ir import FirmwareUse, SubModel
    from splitter.partition.planner import chain_problem, firmware_needs
    from splitter.partition.problem import evaluate

    chain = load_chain(MODELS / "tiny_cnn.onnx")
    boards = load_boards(BOARDS / "e2e_tiny2.toml")
    tail = replace(boards, firmware=FirmwareUse("standalone", "tail", 4))
    head = replace(boards, firmware=FirmwareUse("standalone", "head", 4))
    a = (0, 0, 1, 1, 1)
    problem = chain_problem(chain, head, upper=False)
    et, eh = evaluate(chain_problem(chain, tail, upper=False), a), evaluate(problem, a)
    trip = problem.transfer(40, 3).seconds(boards.link)
    assert trip > 0 and eh.return_s == pytest.approx(trip) and et.return_s == 0
    assert eh.latency_s == pytest.approx(et.latency_s + trip)
    assert eh.send[1] == pytest.approx(et.send[1] + trip)
    assert eh.recv[0] == pytest.approx(et.recv[0] + trip)
    assert eh.waiting_s > et.waiting_s
    assert evaluate(problem, (0, 0, 0, 0, 0)).return_s == 0
    subs = (SubModel(0, 0, 0, 1), SubModel(1, 1, 2, 4))
    (code_t, ram_t), _ = firmware_needs(chain, tail, subs)
    (code_h, ram_h), _ = firmware_needs(chain, head, subs)
    assert ram_h >= ram_t + 40 and code_h > code_t
