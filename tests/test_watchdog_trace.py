"""``compile --watchdog-ms``: the IWDG start-up traced in unicorn, one part per family, against
the reference manuals; out-of-range timeouts refused at compile time.

As ``test_startup_trace.py`` does for the clock tree: the part's real-board ``startup.c``,
``uart.c``, ``timer.c`` and ``watchdog.c`` are cross-compiled with a harness ``main`` that calls
``board_init()``, ``link_init()`` and ``watchdog_kick()``, run in unicorn over the modelled
peripheral space, and every write is checked against :data:`IWDG`, written by hand from the
manuals (not from splitter's code): the IWDG's address, the key sequence of RM0090 21.3.2
(0xCCCC start, 0x5555 unlock, PR, RLR, 0xAAAA reload), and PR / RLR for the timeout from
``t = 4 * 2**PR * (RL + 1) / 32 kHz`` (RM0090 table 107), the finest prescaler first. For the
G4, L5, U5 and H7A3 the address, PR width and sequence are ST's own device headers and HAL
(``stm32g474xx.h``, ``stm32l552xx.h``, ``stm32u575xx.h``, ``stm32h7a3xxq.h``,
``stm32{g4,l5,u5}xx_hal_iwdg.c``: start, unlock, PR, RLR, wait for the update flags).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from startup_tables import MODELS, PARTS
from test_firmware_render import standin_model
from test_startup_trace import LDSCRIPT, Trace, _run, arm_gcc  # noqa: F401 (fixture)

from splitter.codegen import firmware as F
from splitter.codegen.watchdog import WatchdogContext, watchdog_context
from splitter.errors import BoardFileError
from splitter.hardware.catalog import get_part
from splitter.hardware.families import family_for

pytestmark = pytest.mark.toolchain
ROOT = Path(__file__).resolve().parents[1]

HARNESS = """#include "config.h"
#include "watchdog.h"
LINK_TABLES
void board_init(void);
void link_init(void);
void __attribute__((noinline)) harness_done(void) { __asm volatile("nop"); }
int main(void) { board_init(); link_init(); watchdog_kick(); harness_done(); for (;;) { } }
"""

#: family -> (part, IWDG base, --watchdog-ms, IWDG_PR, IWDG_RLR, source). PR / RL by hand at
#: f_LSI = 32 kHz: ticks = ms * 32; the first divider 4 * 2**PR with ticks / divider <= 4096;
#: RL = ticks / divider - 1.
IWDG = {
    # 1000 ms: 32000 ticks; /4 -> 8000 > 4096, /8 -> 4000: PR 1, RL 3999
    "F4": ("STM32F405RG", 0x4000_3000, 1000, 1, 3999, "RM0090 2.3 memory map, 21.4"),
    # 20 s: 640000 ticks; /128 -> 5000 > 4096, /256 -> 2500: PR 6, RL 2499
    "F7": ("STM32F767ZI", 0x4000_3000, 20000, 6, 2499, "RM0410 2.2 memory map, IWDG chapter"),
    # 300 ms: 9600 ticks; /4 -> 2400: PR 0, RL 2399 (IWDG1 in the D3 domain)
    "H7": ("STM32H743ZI", 0x5800_4800, 300, 0, 2399, "RM0433 2.3.2 memory map (IWDG1)"),
    # 5 s: 160000 ticks; /32 -> 5000 > 4096, /64 -> 2500: PR 4, RL 2499
    "L4": ("STM32L452RE", 0x4000_3000, 5000, 4, 2499, "RM0351 2.2.2 memory map"),
    # 2 s: 64000 ticks; /8 -> 8000 > 4096, /16 -> 4000: PR 2, RL 3999
    "G0": ("STM32G071RB", 0x4000_3000, 2000, 2, 3999, "RM0444 2.2 memory map"),
    # 8 s: 256000 ticks; /32 -> 8000 > 4096, /64 -> 4000: PR 4, RL 3999 (ST stm32g474xx.h:
    # IWDG_BASE = APB1PERIPH_BASE + 0x3000; stm32g4xx_hal_iwdg.c: the same key sequence)
    "G4": ("STM32G474RE", 0x4000_3000, 8000, 4, 3999, "RM0440 IWDG; stm32g474xx.h"),
    # 3 s: 96000 ticks; /16 -> 6000 > 4096, /32 -> 3000: PR 3, RL 2999 (stm32l552xx.h:
    # IWDG_BASE_NS = 0x4000_0000 + 0x3000, TrustZone off)
    "L5": ("STM32L552ZE", 0x4000_3000, 3000, 3, 2999, "RM0438 IWDG; stm32l552xx.h"),
    # 60 s: 1920000 ticks; /256 -> 7500 > 4096, /512 -> 3750: PR 7, RL 3749 -- beyond the /256
    # of the other families: the U5's 4-bit PR (stm32u575xx.h IWDG_PR_PR 0xF,
    # stm32u5xx_hal_iwdg.h IWDG_PRESCALER_512 = PR 7, IWDG_PRESCALER_1024 = PR 8)
    "U5": ("STM32U575ZI", 0x4000_3000, 60000, 7, 3749, "RM0456 IWDG; stm32u575xx.h"),
    # 1 s: 32000 ticks; /8 -> 4000: PR 1, RL 3999 (stm32h7a3xxq.h IWDG1_BASE 0x5800_4800)
    "H7AB": ("STM32H7A3ZI", 0x5800_4800, 1000, 1, 3999, "RM0455 IWDG; stm32h7a3xxq.h"),
}
KR, PR, RLR = 0x00, 0x04, 0x08
#: the clock-switch register whose SW write ends the clock start-up (RCC_CFGR; H7: RCC_CFGR at
#: 0x5802_4410), RM0090 6.3.3, RM0433 8.7.7, RM0351 6.4.3, RM0444 5.4.3
CFGR = {"F4": 0x4002_3808, "F7": 0x4002_3808, "H7": 0x5802_4410, "H7AB": 0x5802_4410,
        "L4": 0x4002_1008, "U5": 0x4602_0C1C}  # fmt: skip


def _build(part_name: str, ms: int, tmp: Path) -> tuple[Path, str]:
    """Render a two-device plan with ``--watchdog-ms ms`` and cross-compile the part's startup,
    UART, timer, watchdog and the harness."""
    part = get_part(part_name)
    nb = 64
    subs0, subs1 = [(0, 0, nb, nb, nb), (2, 0, nb, nb, nb)], [(1, 0, nb, nb, nb)]
    devs = [
        F.DeviceSpec(
            "d0", 0, part, standin_model(subs0), 16, 2 * nb, subs0,
            board=PARTS[part_name].board, watchdog_ms=ms,
        ),
        F.DeviceSpec("d1", 1, get_part("STM32F405RG"), standin_model(subs1), 8, 2 * nb, subs1),
    ]  # fmt: skip
    ctx = F.build_plan_context(devs, [0, 1, 0], "0123456789abcdef")
    fw = F.render_firmware(tmp, ctx) / "d0"
    (fw / "harness.c").write_text(HARNESS)
    ram = part.ram_regions[0][1] if part.ram_regions else 0x2000_0000
    (fw / "h.ld").write_text(LDSCRIPT.format(flash=part.flash_origin, ram=ram))
    family = family_for(part.family)
    elf = fw / "wd.elf"
    cmd = ["arm-none-eabi-gcc", *family.cpu_flags(part.fpu).split(), "-std=c99", "-O2",
           "-Wall", "-Werror", "-ffreestanding", "-nostdlib", "-DEMULATOR=0", "-I.", "-Th.ld",
           "startup.c", "uart.c", "timer.c", "watchdog.c", "harness.c", "-lgcc",
           "-o", str(elf)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=fw, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return elf, family.core.name


@pytest.mark.parametrize("family", sorted(IWDG))
def test_iwdg_start_trace(family: str, arm_gcc: None, tmp_path: Path) -> None:  # noqa: F811
    part, base, ms, want_pr, want_rl, source = IWDG[family]
    assert get_part(part).family == family
    elf, core = _build(part, ms, tmp_path)
    trace = Trace(MODELS[family])
    _run(elf, core, trace)
    iwdg = [(a - base, v) for a, v in trace.writes if base <= a < base + 0x400]
    # start, unlock, prescaler, reload, reload the counter (start), the harness's kick
    assert iwdg == [
        (KR, 0xCCCC), (KR, 0x5555), (PR, want_pr), (RLR, want_rl), (KR, 0xAAAA), (KR, 0xAAAA)
    ], f"{part}: {[(hex(o), hex(v)) for o, v in iwdg]}; {source}"  # fmt: skip
    assert 4 * 2**want_pr * (want_rl + 1) / 32 == ms  # the table's own timeout, in ms
    # started after the clock start-up: after the last write that switches SYSCLK
    cfgr = CFGR.get(family, 0x4002_1008)
    last_switch = max(i for i, (a, _v) in enumerate(trace.writes) if a == cfgr)
    first = next(i for i, (a, _v) in enumerate(trace.writes) if a == base)
    assert last_switch < first


def test_iwdg_ranges_follow_the_prescaler_width() -> None:
    """At 32 kHz the 3-bit PR's /256 reaches 256 * 4096 / 32 kHz = 32768 ms (F4, G4, L5, H7,
    H7AB); the U5's 4-bit PR goes on to /1024: 131072 ms, and 100 s is PR 8 (/1024) with
    RL = 100 s * 32 kHz / 1024 - 1 = 3124."""
    from splitter.hardware.watchdog import iwdg_range_ms, iwdg_setting

    for name in ("F4", "G4", "L5", "H7", "H7AB"):
        assert iwdg_range_ms(family_for(name)) == (0.125, 32768.0), name
        assert iwdg_setting(family_for(name), 100_000) is None
    u5 = family_for("U5")
    assert iwdg_range_ms(u5) == (0.125, 131072.0)
    got = iwdg_setting(u5, 100_000)
    assert got is not None and (got.pr, got.rl) == (8, 3124)


def test_no_watchdog_writes_nothing(arm_gcc: None, tmp_path: Path) -> None:  # noqa: F811
    elf, core = _build("STM32F405RG", 0, tmp_path)
    trace = Trace(MODELS["F4"])
    _run(elf, core, trace)
    assert not [a for a, _v in trace.writes if 0x4000_3000 <= a < 0x4000_3400]


def test_out_of_range_is_a_board_error() -> None:
    """F405 at 168 MHz: SysTick wraps every 2**24 / 168 MHz = 99.9 ms, a 1034-byte frame takes
    89.8 ms at 115200 baud: kicks at least every 99.9 ms, so 200 ms is the shortest timeout;
    the IWDG reaches 256 * 4096 / 32 kHz = 32768 ms."""
    f4 = family_for("F4")

    def f405(ms: int, busy_s: float = 0.0) -> object:
        return watchdog_context(
            "d0", "STM32F405RG", f4, ms, clock_hz=168_000_000, baud=115200, busy_s=busy_s
        )

    for ms in (199, 32769, 40000):
        with pytest.raises(BoardFileError, match=r"^device d0 \(STM32F405RG\): --watchdog-ms "):
            f405(ms)
    with pytest.raises(BoardFileError, match=r"outside 200\.\.32768 ms.*use --watchdog-ms 200"):
        f405(50)
    # a sub-model that runs 20 s leaves no timeout the IWDG reaches
    with pytest.raises(BoardFileError, match=r"longest sub-model run\); drop --watchdog-ms"):
        f405(30000, busy_s=20.0)
    ok = f405(200)
    assert isinstance(ok, WatchdogContext) and (ok.pr, ok.rl) == (0, 1599)  # 6400 ticks / 4
    assert f405(0) is None


@pytest.mark.slow
def test_compile_refuses_a_timeout_the_iwdg_cannot_reach(tmp_path: Path) -> None:
    """One line naming the device, the range and the fix; exit 2; OUT not written."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "compile", "models/tiny_cnn.onnx",
         "--target", "models/boards/e2e_tiny2.toml", "-o", str(out), "--watchdog-ms", "40000"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "device a (STM32F405RG): --watchdog-ms 40000 is outside 200..32768 ms" in lines[0]
    assert "use --watchdog-ms 200 to 32768" in lines[0]
    assert not out.exists()


@pytest.mark.slow
def test_compile_writes_the_watchdog_and_compile_commands(tmp_path: Path) -> None:
    """``compile --watchdog-ms 1000``: each board's config.h holds the F405's IWDG setting (PR 1,
    RLR 3999: 32000 ticks / 8) and startup.c starts it; compile_commands.json names the final
    project directory, not the temporary one compile wrote into."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "compile", "models/tiny_cnn.onnx", "--no-validate",
         "--target", "models/boards/e2e_tiny2.toml", "-o", str(out), "--watchdog-ms", "1000"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for device in ("a", "b"):
        project = out / "firmware" / device
        config = (project / "config.h").read_text()
        assert "#define IWDG_BASE 0x40003000u" in config
        assert "#define IWDG_PR_VALUE 1u" in config and "#define IWDG_RLR_VALUE 3999u" in config
        assert "watchdog_start();" in (project / "startup.c").read_text()
        entries = json.loads((project / "compile_commands.json").read_text())
        assert {e["directory"] for e in entries} == {str(project.resolve())}
