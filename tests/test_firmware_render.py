"""Firmware projects: wiring, render context, templates, atomic output, cross builds."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import jinja2
import pytest

from splitter.codegen import firmware as F
from splitter.errors import BoardFileError, InfeasibleError, ValidationError
from splitter.hardware.catalog import get_part
from splitter.hardware.families import family_for
from splitter.toolchain.build import check, measure, run_make, section_sizes

GOLDEN = Path(__file__).resolve().parent / "test_firmware_golden"


def standin_model(subs: list[tuple[int, int, int, int, int]]) -> dict[str, str]:
    """A hand-written stand-in of splitter/codegen/model_c.py's output: sub-model k computes
    ``y = 2 x + (k + 1)`` on its input floats; 8 bytes of weights per sub-model."""
    protos = "\n".join(f"int sm_{k:02d}(float *arena);" for k, *_ in subs)
    header = f"#ifndef MODEL_H\n#define MODEL_H\nextern float model_arena[];\n{protos}\n#endif\n"
    weights = "\n".join(
        f'const float W{k}[2] __attribute__((section(".weights"), aligned(4))) = '
        f"{{2.0f, {k + 1}.0f}};"
        for k, *_ in subs
    )
    bodies = "\n".join(
        f"int sm_{k:02d}(float *arena) {{\n"
        f"    const float *x = arena + {io // 4};\n    float *y = arena + {oo // 4};\n"
        f"    for (int i = 0; i < {ib // 4}; i++) y[i] = W{k}[0] * x[i] + W{k}[1];\n"
        "    return 0;\n}"
        for k, io, ib, oo, _ob in subs
    )
    arena = max(oo + ob for _k, _io, _ib, oo, ob in subs)
    source = (
        f'#include "model.h"\n{weights}\n'
        f"float model_arena[{arena // 4}] __attribute__((aligned(8)));\n{bodies}\n"
    )
    return {"model.h": header, "model.c": source}


def standin_plan(
    parts: tuple[str, str] = ("STM32F405RG", "STM32G071RB"), n: int = 16
) -> F.PlanContext:
    """Sub-models A (d0), B (d1), C (d0) on ``n`` floats: d0 hosts two non-adjacent ones."""
    nb = 4 * n
    subs0 = [(0, 0, nb, nb, nb), (2, 0, nb, nb, nb)]
    subs1 = [(1, 0, nb, nb, nb)]
    devs = [
        F.DeviceSpec("d0", 0, get_part(parts[0]), standin_model(subs0), 16, 2 * nb, subs0),
        F.DeviceSpec("d1", 1, get_part(parts[1]), standin_model(subs1), 8, 2 * nb, subs1),
    ]
    return F.build_plan_context(devs, [0, 1, 0], "0123456789abcdef")


def test_links_of_a_chain() -> None:
    assert F.device_links([0, 1]) == {0: [-1, 1], 1: [0, -1]}
    assert F.device_links([0, 1, 2]) == {0: [-1, 1], 1: [0, 2], 2: [1, -1]}
    assert F.device_links([0]) == {0: [-1]}


def test_links_of_non_adjacent_submodels() -> None:
    """A on d0, B on d1, C on d0: d0 talks to the host and to d1 over one pair each."""
    assert F.device_links([0, 1, 0]) == {0: [-1, 1], 1: [0]}
    assert F.device_links([1, 0, 2, 0]) == {1: [-1, 0], 0: [1, 2, -1], 2: [0]}


def test_context_numbers() -> None:
    ctx = standin_plan()
    d0, d1 = ctx.devices
    assert [ln.peer for ln in d0.links] == ["host", "d1"]
    assert [ln.usart for ln in d0.links] == ["USART1", "USART2"]
    # the host link takes the first USART of the list (the Nucleo's ST-LINK virtual COM port),
    # links between devices the following ones: d1 (G071) talks only to d0
    assert [ln.usart for ln in d1.links] == ["USART1"]
    assert d0.links[1].server and not d1.links[0].server
    a, c = d0.submodels
    assert (a.in_link, a.out_link, a.is_last, a.next_index) == (0, 1, False, 1)
    assert (c.in_link, c.out_link, c.is_last) == (1, 0, True)
    part, emu = d1.targets
    assert part.cpu_flags == "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft"
    assert part.usart_layout_sr_dr == 0 and emu.usart_layout_sr_dr == 1
    # G071 at its catalog 64 MHz (HSI16 -> PLL), USART1 on the one APB at 64 MHz
    assert part.core_clock_hz == 64_000_000
    assert part.usarts[0].brr == round(64_000_000 / 115200)
    assert emu.usarts[0].brr == round(168_000_000 / 115200)
    assert part.usarts[0].irq == 27 and emu.usarts[0].irq == 37
    assert part.ram_bytes == 36 * 1024 and emu.ram_bytes == 128 * 1024
    assert emu.n_vectors == 16 + 38
    assert ctx.emulated_as_f405 == "STM32G071RB"


def test_cpu_flags_per_core() -> None:
    for part, flags in (
        ("STM32H743ZI", "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard"),
        ("STM32F405RG", "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard"),
        ("STM32G071RB", "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft"),
        ("STM32U575ZI", "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard"),
    ):
        ctx = standin_plan((part, "STM32F405RG"))
        assert ctx.devices[0].targets[0].cpu_flags == flags


def test_render_writes_every_file(tmp_path: Path) -> None:
    fw = F.render_firmware(tmp_path, standin_plan())
    files = {p.relative_to(fw / "d0").as_posix() for p in (fw / "d0").rglob("*") if p.is_file()}
    for name in (
        "main.c",
        "config.h",
        "startup.c",
        "Makefile",
        "part.ld",
        "emulator.ld",
        "proto.c",
        "uart.c",
        "timer.c",
        "libc.c",
        "watchdog.c",
        "plan.c",
        "CMakeLists.txt",
        "arm-none-eabi.cmake",
        "compile_commands.json",
        "model.c",
        "model.h",
        "kernels/kernels.h",
    ):
        assert name in files
    wiring = (fw / "WIRING.md").read_text()
    assert "| d0 | USART2 (PA2/PA3) | d1 | USART1 (PA9/PA10) |" in wiring
    assert "STM32G071RB is emulated as an F405" in wiring
    assert "-fno-tree-loop-distribute-patterns" in (fw / "d0" / "Makefile").read_text()
    assert not list(tmp_path.glob(".firmware-*"))


def test_golden_main_and_makefile(tmp_path: Path) -> None:
    """Rendered main.c, plan.c, Makefile and CMakeLists.txt of the stand-in plan;
    SPLITTER_REGEN_GOLDEN=1 rewrites."""
    fw = F.render_firmware(tmp_path, standin_plan())
    for name in ("main.c", "plan.c", "Makefile", "CMakeLists.txt"):
        got = (fw / "d0" / name).read_text()
        golden = GOLDEN / f"d0_{name}"
        if os.environ.get("SPLITTER_REGEN_GOLDEN"):
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(got)
        assert got == golden.read_text(), f"{name} changed; review, then SPLITTER_REGEN_GOLDEN=1"


def test_template_error_leaves_previous_project(tmp_path: Path) -> None:
    good = standin_plan()
    F.render_firmware(tmp_path, good)
    before = (tmp_path / "firmware" / "d0" / "main.c").read_text()
    broken: Any = object()  # a link without the fields the templates print
    dev = dataclasses.replace(good.devices[0], links=(good.devices[0].links[0], broken))
    with pytest.raises(jinja2.UndefinedError):
        F.render_firmware(tmp_path, dataclasses.replace(good, devices=(dev, good.devices[1])))
    assert (tmp_path / "firmware" / "d0" / "main.c").read_text() == before
    assert not list(tmp_path.glob(".firmware-*"))


def test_too_many_links_is_a_board_error() -> None:
    subs = [(k, 0, 64, 64, 64) for k in (0, 2, 4)]
    devs = [F.DeviceSpec("hub", 0, get_part("STM32L412KB"), standin_model(subs), 24, 128, subs)]
    for i in (1, 2, 3):
        s = [(2 * i - 1, 0, 64, 64, 64)]
        devs.append(F.DeviceSpec(f"s{i}", i, get_part("STM32F405RG"), standin_model(s), 8, 128, s))
    with pytest.raises(
        BoardFileError, match=r"hub: link 2 \(to s2\) and link 1 \(to s1\) would share USART1"
    ):
        F.build_plan_context(devs, [0, 1, 0, 2, 0, 3], "00" * 8)


@pytest.mark.toolchain
@pytest.mark.slow
@pytest.mark.parametrize(
    "part",
    ["STM32G071RB", "STM32F405RG", "STM32H743ZI", "STM32U575ZI", "STM32L552ZE", "STM32G474RE"],
)
def test_cross_build_sizes_equal_estimates(tmp_path: Path, part: str) -> None:
    """-Wall -Werror build per core; .weights and .arena sizes equal the context's numbers."""
    ctx = standin_plan((part, "STM32F405RG"))
    fw = F.render_firmware(tmp_path, ctx)
    elf = run_make(fw / "d0")
    sizes = section_sizes(elf)
    assert sizes[".weights"] == ctx.devices[0].weights_bytes == 16
    assert sizes[".arena"] == ctx.devices[0].arena_bytes == 128
    device = {"name": "d0", "part": part, "weights_bytes": 16, "arena_bytes": 128}
    build = measure(device, elf, (1 << 20, 1 << 20))
    check(build)
    assert build.code_bytes > 1000  # vector table, runtime, protocol


def test_board_init_routes_usart_pins() -> None:
    """F405 USART1 on PA9/PA10 AF7 (RM0090 8.4.10, DS8626 table 9); G071 USART2 PA2/PA3 AF1."""
    f4 = {(w.addr, w.clear, w.set) for w in family_for("F4").board_init_writes(["USART1"])}
    assert ("0x40023844", "0x00000000", "0x00000010") in f4  # RCC_APB2ENR.USART1EN
    assert ("0x40023830", "0x00000000", "0x00000001") in f4  # RCC_AHB1ENR.GPIOAEN
    assert ("0x40020000", "0x000C0000", "0x00080000") in f4  # GPIOA_MODER9 = AF
    assert ("0x40020024", "0x000000F0", "0x00000070") in f4  # GPIOA_AFRH9 = 7
    assert ("0x40020024", "0x00000F00", "0x00000700") in f4  # GPIOA_AFRH10 = 7
    g0 = {(w.addr, w.set) for w in family_for("G0").board_init_writes(["USART2"])}
    assert ("0x4002103C", "0x00020000") in g0  # RCC_APBENR1.USART2EN
    assert ("0x50000020", "0x00000100") in g0  # GPIOA_AFRL2 = 1
    assert family_for(get_part("STM32H743ZI").family).pins["USART3"] == "PD8/PD9"


@pytest.mark.toolchain
def test_overflow_is_an_infeasible_error_naming_the_device(tmp_path: Path) -> None:
    """An arena larger than the G071's 36 KiB RAM: a plan error, not a raw linker message."""
    n = 5000  # floats: 2 x 20000 B of arena
    ctx = standin_plan(("STM32G071RB", "STM32F405RG"), n=n)
    fw = F.render_firmware(tmp_path, ctx)
    with pytest.raises(InfeasibleError, match=r"device d0: firmware overflows its part"):
        run_make(fw / "d0")


@pytest.mark.toolchain
def test_estimate_mismatch_is_reported(tmp_path: Path) -> None:
    fw = F.render_firmware(tmp_path, standin_plan())
    elf = run_make(fw / "d1")
    device = {"name": "d1", "part": "STM32G071RB", "weights_bytes": 12, "arena_bytes": 128}
    with pytest.raises(ValidationError, match=r"\.weights is 8 B but the plan estimates 12 B"):
        check(measure(device, elf, (1 << 20, 1 << 20)))
