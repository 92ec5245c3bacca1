"""The CMake project beside each device's Makefile (``splitter/codegen/build_files.py``).

* ``cmake`` builds the same firmware as ``make``: the loaded bytes of the two ELFs (every
  ``PT_LOAD`` segment: address and contents) are equal, for an M0+ (STM32G071RB), an M4
  (STM32F446RE) and an M7 (STM32H743ZI) part with the watchdog on, and for the emulator
  variant;
* ``compile_commands.json`` holds exactly the compiler lines ``make`` runs (``make -n``);
* the library target: ``SPLITTER_LIBRARY=ON`` builds ``splitter_<device>`` without main(), the
  start-up code and the UART driver, and a separate tiny user CMake project links it with
  ``add_subdirectory`` + ``target_link_libraries`` into its own ``main()`` (the user's start-up
  code, linker script and UART port), for the same three cores.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_firmware_render import standin_plan

from splitter.codegen import build_files as B
from splitter.codegen import firmware as F
from splitter.codegen.watchdog import watchdog_context
from splitter.hardware.catalog import get_part
from splitter.hardware.families import family_for
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.toolchain, pytest.mark.slow]

#: one part per core: M0+, M4, M7
PARTS = ["STM32G071RB", "STM32F446RE", "STM32H743ZI"]
CMAKE_INSTALL = "apt-get install --no-install-recommends cmake"


@dataclass(frozen=True)
class UserApi:
    """The names the user's ``main()`` calls: today's runtime entry points. When the public
    header of issue 24 (engineer ``api``) lands, switch these three to it; nothing else here
    names the runtime."""

    header: str = "runtime.h"
    init: str = "runtime_init();"
    step: str = "runtime_poll();"


USER_API = UserApi()

#: the user's application: main() plus the start-up a CubeMX project has in startup_*.s
USER_APP = """#include <stdint.h>
#include "{header}"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;

int main(void) {{
    {init}
    for (;;) {{
        {step}
    }}
}}

void Reset_Handler(void) {{
    uint32_t *src = &_sidata;
    for (uint32_t *dst = &_sdata; dst < &_edata;) *dst++ = *src++;
    for (uint32_t *dst = &_sbss; dst < &_ebss;) *dst++ = 0;
    main();
}}

__attribute__((section(".isr_vector"), used)) void (*const user_vectors[2])(void) = {{
    (void (*)(void))(&_estack), Reset_Handler,
}};
"""
#: the user's UART port (link.h), here a loopback in RAM where a product calls HAL_UART_*
USER_PORT = """#include "link.h"

static uint8_t loop[64];
static uint32_t n;

void link_init(void) { n = 0; }
int link_wait_any(void) { return 0; }
int link_read_byte(int l, uint64_t deadline) {
    (void)l; (void)deadline;
    return n ? loop[--n] : -1;
}
void link_write(int l, const uint8_t *data, uint32_t len) {
    (void)l;
    for (uint32_t i = 0; i < len && n < sizeof loop; i++) loop[n++] = data[i];
}
"""
USER_LD = """ENTRY(Reset_Handler)
MEMORY {{ FLASH (rx) : ORIGIN = {flash:#x}, LENGTH = 256K
          RAM (rwx) : ORIGIN = {ram:#x}, LENGTH = 32K }}
_estack = ORIGIN(RAM) + LENGTH(RAM);
SECTIONS {{
  .isr_vector : {{ KEEP(*(.isr_vector)) }} > FLASH
  .text : {{ *(.text .text.*) *(.rodata .rodata.*) *(.weights .weights.*) }} > FLASH
  _sidata = LOADADDR(.data);
  .data : ALIGN(4) {{ _sdata = .; *(.data .data.*) . = ALIGN(4); _edata = .; }} > RAM AT> FLASH
  .bss (NOLOAD) : ALIGN(8) {{ _sbss = .; *(.bss .bss.* COMMON .arena .arena.*) . = ALIGN(4);
                             _ebss = .; }} > RAM
}}
"""
USER_CMAKE = """cmake_minimum_required(VERSION 3.16)
# a CubeMX project names its own toolchain file here; the generated one serves as well
set(CMAKE_TOOLCHAIN_FILE {splitter}/arm-none-eabi.cmake)
project(user_app C)
add_subdirectory({splitter} splitter)
add_executable(app app.c port.c)
target_compile_options(app PRIVATE {cpu} -Wall -Werror)
target_link_options(app PRIVATE {cpu} -nostdlib -Wl,--gc-sections
  -T${{CMAKE_CURRENT_SOURCE_DIR}}/app.ld)
target_link_libraries(app PRIVATE {target} gcc)
"""


@pytest.fixture(scope="module")
def cmake() -> str:
    path = shutil.which("cmake")
    if path is None:
        pytest.fail(f"cmake is not installed; run: {CMAKE_INSTALL} (make system-deps does)")
    return path


def _cmake_build(cmake: str, src: Path, build: Path, *defs: str) -> None:
    for args in ([cmake, "-S", str(src), "-B", str(build), *defs], [cmake, "--build", str(build)]):
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _loaded(elf: Path) -> list[tuple[int, int, bytes]]:
    """``(physical address, memory size, file bytes)`` of every PT_LOAD segment."""
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as fh:
        return [
            (s["p_paddr"], s["p_memsz"], s.data())
            for s in ELFFile(fh).iter_segments()
            if s["p_type"] == "PT_LOAD"
        ]


def _symbols(elf: Path) -> set[str]:
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as fh:
        tab = ELFFile(fh).get_section_by_name(".symtab")
        return {s.name for s in tab.iter_symbols() if s.name}


def _project(tmp_path: Path, part: str, watchdog_ms: int = 0) -> tuple[Path, F.DeviceContext]:
    """The stand-in plan's ``d0`` on ``part`` (with ``--watchdog-ms watchdog_ms``), rendered."""
    ctx = standin_plan((part, "STM32F405RG"))
    dev = ctx.devices[0]
    if watchdog_ms:
        family = family_for(get_part(part).family)
        clock = dev.targets[0].core_clock_hz
        wd = watchdog_context("d0", part, family, watchdog_ms, clock_hz=clock, baud=ctx.baud)
        dev = dataclasses.replace(dev, watchdog=wd)
        ctx = dataclasses.replace(ctx, devices=(dev, *ctx.devices[1:]))
    fw = F.render_firmware(tmp_path, ctx)
    return fw / "d0", dev


@pytest.mark.parametrize("part", PARTS)
def test_cmake_builds_the_makefile_firmware(part: str, cmake: str, tmp_path: Path) -> None:
    """With the watchdog on (its code in both builds: -Wall -Werror on every core)."""
    d0, _dev = _project(tmp_path, part, watchdog_ms=2000)
    assert "#define IWDG_PR_VALUE 2u" in (d0 / "config.h").read_text()  # 64000 ticks / 16
    made = run_make(d0)
    _cmake_build(cmake, d0, d0 / "build" / "cmake")
    built = d0 / "build" / "cmake" / "firmware.elf"
    assert _loaded(built) == _loaded(made) and len(_loaded(made)) >= 2
    bin_make = made.with_suffix(".bin").read_bytes()
    assert (built.with_suffix(".bin")).read_bytes() == bin_make


def test_cmake_builds_the_emulator_variant(cmake: str, tmp_path: Path) -> None:
    d0, _dev = _project(tmp_path, "STM32G071RB")  # the emulator variant is an F405 build
    made = run_make(d0, emulator=True)
    _cmake_build(cmake, d0, d0 / "build" / "cmake-emu", "-DSPLITTER_EMULATOR=1")
    built = d0 / "build" / "cmake-emu" / "firmware.elf"
    assert _loaded(built) == _loaded(made)


def test_compile_commands_are_the_makefile_lines(tmp_path: Path) -> None:
    """``make -n`` (nothing built) prints one compile line per source: the database's
    ``arguments`` are exactly those words, the directory the project's absolute path."""
    d0, _dev = _project(tmp_path, "STM32H743ZI")
    entries = json.loads((d0 / "compile_commands.json").read_text())
    proc = subprocess.run(["make", "-n", "-C", str(d0)], capture_output=True, text=True, check=True)
    lines = [shlex.split(ln) for ln in proc.stdout.splitlines() if " -c " in ln]
    assert [e["arguments"] for e in entries] == lines
    assert {e["directory"] for e in entries} == {str(d0.resolve())}
    assert [e["file"] for e in entries] == sorted(e["file"] for e in entries)
    assert "-mcpu=cortex-m7" in entries[0]["arguments"] and "-DEMULATOR=0" in lines[0]


def test_mode_sources() -> None:
    files = ["main.c", "startup.c", "uart.c", "runtime.c", "kernels/kernels.c", "config.h"]
    assert B.mode_sources("harness", files) == (
        "kernels/kernels.c", "main.c", "runtime.c", "startup.c", "uart.c"
    )  # fmt: skip
    assert B.mode_sources("library", files) == ("kernels/kernels.c", "runtime.c")
    with pytest.raises(ValueError, match="app mode 'rtos'"):
        B.mode_sources("rtos", files)


@pytest.mark.parametrize("part", PARTS)
def test_library_links_into_a_user_main(part: str, cmake: str, tmp_path: Path) -> None:
    d0, dev = _project(tmp_path / "out", part)
    lib_build = tmp_path / "lib"
    _cmake_build(cmake, d0, lib_build, "-DSPLITTER_LIBRARY=ON")
    ar = subprocess.run(
        ["arm-none-eabi-ar", "t", str(lib_build / "libsplitter_d0.a")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    members = {m.removesuffix(".obj").removesuffix(".o") for m in ar.stdout.split()}
    assert members == {Path(s).name for s in B.mode_sources("library", _files(d0))}
    assert not members & {"main.c", "startup.c", "uart.c"} and "runtime.c" in members

    app = tmp_path / "app"
    app.mkdir()
    part_info = get_part(part)
    ram = part_info.ram_regions[0][1] if part_info.ram_regions else 0x2000_0000
    (app / "app.c").write_text(USER_APP.format(**vars(USER_API)))
    (app / "port.c").write_text(USER_PORT)
    (app / "app.ld").write_text(USER_LD.format(flash=part_info.flash_origin, ram=ram))
    (app / "CMakeLists.txt").write_text(
        USER_CMAKE.format(splitter=d0, cpu=dev.targets[0].cpu_flags, target="splitter_d0")
    )
    _cmake_build(cmake, app, app / "build")
    syms = _symbols(app / "build" / "app")
    assert {"main", "runtime_poll", "submodels", "sm_00", "sm_02", "link_write"} <= syms
    assert not syms & {"board_init", "clock_init", "vector_table", "uart_irq", "runtime_main"}


def _files(project: Path) -> list[str]:
    """The project's files, relative (what ``render_device`` wrote)."""
    return [p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()]


def test_extflash_projects_leave_the_window_out_of_the_bin(tmp_path: Path) -> None:
    """A segmented project with external flash (segments.build): as its Makefile, its CMake
    post-build step drops ``.extflash`` from ``firmware.bin`` (else the image spans both
    address ranges)."""
    from splitter.segments.firmware import extflash_cmake, extflash_makefile

    d0, _dev = _project(tmp_path, "STM32F767ZI")
    cmake_text = extflash_cmake((d0 / "CMakeLists.txt").read_text())
    make_text = extflash_makefile((d0 / "Makefile").read_text())
    assert "${CMAKE_OBJCOPY} -O binary -R .extflash $<TARGET_FILE:firmware>" in cmake_text
    assert "$(OBJCOPY) -O binary -R .extflash $< $@" in make_text
