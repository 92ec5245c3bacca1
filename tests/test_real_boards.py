"""Real boards at plan time: clock trees, board definitions, baud-rate divisors (issue 11 A).

Everything here is refused by ``splitter plan`` before any solving, one line, exit 2: a clock the
part cannot reach (above its maximum, or no PLL setting), an unknown board, a baud rate whose
divisor is out of the USART's range or more than 2 % off. The clock trees themselves are checked
instruction by instruction in ``test_startup_trace.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_firmware_render import standin_model
from test_plan_cli import run_cli

from splitter.codegen import firmware as F
from splitter.errors import BoardFileError
from splitter.hardware.board_catalog import boards
from splitter.hardware.boards import load_boards
from splitter.hardware.catalog import get_part, parts
from splitter.hardware.clocks import MHZ, Osc, search_pll
from splitter.hardware.families import Family, family_for
from splitter.hardware.families.stm32f4 import F4Clock

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "models" / "profiles" / "thesis_profiles.json#kws_cnn"


def _boards(tmp_path: Path, devices: str, baud: int = 115200) -> Path:
    path = tmp_path / "boards.toml"
    path.write_text(f"[link]\nbaud = {baud}\n\n{devices}")
    return path


def _dev(name: str, body: str) -> str:
    return f'[[device]]\nname = "{name}"\n{body}\n\n'


# ------------------------------------------------------------------ clocks -------------------
def test_pll_search_meets_the_limits() -> None:
    """F4 from HSI 16 MHz: 168 MHz with the RM0090-recommended 2 MHz VCO input (M = 8)."""
    lim = F4Clock.limits
    assert search_pll(16 * MHZ, 168 * MHZ, lim) == (8, 168, 2)
    assert search_pll(25 * MHZ, 168 * MHZ, lim) == (25, 336, 2)  # 1 MHz input: 25 / 2 not whole
    assert search_pll(16 * MHZ, 37_300_000, lim) is None


@pytest.mark.parametrize("part", [p.name for p in parts()])
def test_every_catalog_part_reaches_its_catalog_clock(part: str) -> None:
    p = get_part(part)
    hz = round(p.clock_mhz * MHZ)
    tree = family_for(p.family).clock_tree(p.name, hz, hz, None)
    assert tree.sysclk_hz == hz
    if tree.pll is not None:
        assert tree.pll.out_hz == hz
    assert all(v <= hz for v in tree.bus_hz.values())


def test_clock_above_the_maximum_is_refused_at_plan_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _boards(tmp_path, _dev("a", 'mcu = "STM32F405RG"\nclock_mhz = 200'))
    with pytest.raises(BoardFileError, match="above the part's maximum 168 MHz"):
        load_boards(path)
    code, out, err = run_cli(capsys, "plan", str(PROFILE), "--target", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "device 'a'" in err and "maximum 168 MHz" in err and "clock_mhz <= 168" in err


def test_clock_no_pll_setting_reaches_is_refused(tmp_path: Path) -> None:
    """G071: VCO >= 64 MHz and R <= 8 (RM0444 5.2.4): nothing below 8 MHz but HSI16 itself."""
    path = _boards(tmp_path, _dev("g", 'mcu = "STM32G071RB"\nclock_mhz = 4'))
    with pytest.raises(BoardFileError, match="no PLL setting gives exactly 4 MHz from HSI16"):
        load_boards(path)
    load_boards(_boards(tmp_path, _dev("g", 'mcu = "STM32G071RB"\nclock_mhz = 16')))


def test_lower_clock_is_set_up_exactly(tmp_path: Path) -> None:
    """clock_mhz below the maximum: the firmware sets that clock, the divisors follow it."""
    dev = load_boards(_boards(tmp_path, _dev("a", 'mcu = "STM32F405RG"\nclock_mhz = 48')))
    d = dev.devices[0]
    subs = [(0, 0, 64, 64, 64)]
    spec = F.DeviceSpec("a", 0, d.part, standin_model(subs), 8, 128, subs, d.clock_hz)
    part = F.build_plan_context([spec], [0], "0123456789abcdef").devices[0].targets[0]
    assert part.core_clock_hz == 48 * MHZ
    assert part.usarts[0].brr == round(48 * MHZ / 115200)  # USART1 on APB2 = 48 / 1 (not 84)


# ------------------------------------------------------------------ boards -------------------
def test_board_selects_part_and_routing(tmp_path: Path) -> None:
    b = load_boards(_boards(tmp_path, _dev("h7", 'board = "nucleo-h743zi"')))
    d = b.devices[0]
    assert (d.part.name, d.board, d.clock_hz) == ("STM32H743ZI", "nucleo-h743zi", 480e6)
    assert boards()["nucleo-h743zi"].vcp == "USART3"
    assert boards()["nucleo-l4r5zi"].vcp == "LPUART1"


def test_every_catalog_part_with_a_nucleo_has_a_board() -> None:
    """All catalog parts but the three without a Nucleo (F401RB, F405RG; the U585AI sits on the
    B-U585I-IOT02A Discovery kit, not described) have a board."""
    carried = {b.part for b in boards().values()}
    assert {p.name for p in parts()} - carried == {"STM32F401RB", "STM32F405RG", "STM32U585AI"}
    for b in boards().values():
        fam = family_for(get_part(b.part).family)
        pins = [p for u in b.usarts for p, _ in fam.route(u, b.pins.get(u))]
        assert len(pins) == len(set(pins)), f"{b.name}: two USARTs on one pin"
        assert all(p in b.headers for p in pins), f"{b.name}: a pin without a header place"


def test_unknown_board_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _boards(tmp_path, _dev("x", 'board = "nucleo-h745zi"'))
    code, _out, err = run_cli(capsys, "plan", str(PROFILE), "--target", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "unknown board 'nucleo-h745zi'" in err and "nucleo-h743zi" in err


def test_board_and_other_mcu_is_refused(tmp_path: Path) -> None:
    path = _boards(tmp_path, _dev("x", 'board = "nucleo-h743zi"\nmcu = "STM32F405RG"'))
    with pytest.raises(BoardFileError, match="board nucleo-h743zi carries STM32H743ZI"):
        load_boards(path)


def test_wiring_names_header_pins(tmp_path: Path) -> None:
    """WIRING.md: the host on the ST-LINK USB, board-to-board wires with header places."""
    subs0, subs1 = [(0, 0, 64, 64, 64), (2, 0, 64, 64, 64)], [(1, 0, 64, 64, 64)]
    h7, f4 = get_part("STM32H743ZI"), get_part("STM32F401RE")
    devs = [
        F.DeviceSpec("h7", 0, h7, standin_model(subs0), 16, 128, subs0, board="nucleo-h743zi"),
        F.DeviceSpec("f4", 1, f4, standin_model(subs1), 8, 128, subs1, board="nucleo-f401re"),
    ]
    fw = F.render_firmware(tmp_path, F.build_plan_context(devs, [0, 1, 0], "0123456789abcdef"))
    text = (fw / "WIRING.md").read_text()
    assert "USB cable to the nucleo-h743zi ST-LINK (virtual COM port)" in text
    assert "| h7 | USART2 (PD5 (Zio CN9 pin 6) / PD6 (Zio CN9 pin 4)) | f4 | USART1 " in text
    assert "PA9 (Arduino D8, morpho CN10 pin 21)" in text
    assert "HSE 8 MHz (bypass), PLL M=4 N=480 /2: 480 MHz, 4 flash wait states" in text
    # the real baud rate and its error per link (120 MHz / 1042 = 115163 baud)
    assert "link 0 USART3: 120 MHz, BRR 1042, 115163 baud (-0.03 %)" in text


# ------------------------------------------------------------------ baud rates ---------------
def test_brr_ranges() -> None:
    """USART 16x: 16 <= BRR <= 0xFFFF (RM0090 30.6.3); LPUART: 3 baud <= f <= 4096 baud."""
    assert Family.baud_valid("USART2", 42 * MHZ, 115200).brr == 365  # type: ignore[union-attr]
    # 4 Mbaud: 16x BRR 10 < 16; 8x: USARTDIV = 2 f / baud = 21 -> BRR 0x12 with OVER8
    b8 = Family.baud_valid("USART2", 42 * MHZ, 4_000_000)
    assert b8 is not None and b8.over8 and b8.brr == 0x12 and b8.actual == 4_000_000
    assert Family.baud_valid("USART2", 42 * MHZ, 6_000_000) is None  # USARTDIV 14 < 16
    assert Family.baud_valid("USART2", 42 * MHZ, 5_400_000) is None  # USARTDIV 16: -2.8 %
    assert Family.baud_valid("LPUART1", 20 * MHZ, 7_000_000) is None  # f < 3 x baud
    assert Family.baud_valid("LPUART1", 120 * MHZ, 9600) is None  # f > 4096 x baud
    lp = Family.baud_valid("LPUART1", 120 * MHZ, 115200)
    assert lp is not None and lp.brr == 266667 and abs(lp.error) < 1e-5


def test_out_of_range_baud_is_refused_at_plan_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F405 (no board): USART2, its second USART, on APB1 42 MHz: 6 Mbaud needs a divisor of
    7 (8x oversampling: 14 < 16)."""
    two = _dev("a", 'mcu = "STM32F405RG"') + _dev("b", 'mcu = "STM32F405RG"')
    path = _boards(tmp_path, two, baud=6_000_000)
    code, out, err = run_cli(capsys, "plan", str(PROFILE), "--target", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "device 'a' board-to-board links (USART2)" in err
    assert "6000000 baud from its 42 MHz clock" in err and "nearest valid rates: 4000000" in err
    assert "its limit is 5250000 baud" in err and "set [link] baud = 4000000" in err


def test_issue_case_l4r5_921600_is_valid(tmp_path: Path) -> None:
    """Issue 11: at 921600 the L4R5's USART1 had BRR = 4 (reset clock); at 120 MHz it is 130."""
    b = load_boards(_boards(tmp_path, _dev("l4", 'mcu = "STM32L4R5ZI"'), baud=921600))
    d = b.devices[0]
    tree = family_for("L4").clock_tree(d.part.name, 120 * MHZ, 120 * MHZ, None)
    assert family_for("L4").check_baud("USART1", tree, 921600, "x").brr == 130
    assert Osc("HSE", 8 * MHZ, True).label == "HSE 8 MHz (bypass)"


def test_inline_part_is_checked_when_firmware_is_generated(tmp_path: Path) -> None:
    """An inline F4 part at 480 MHz plans (a planning study), but its firmware is refused."""
    inline = 'part = { name = "X4", flash_kib = 512, ram_kib = 128, clock_mhz = 480, cpm = 9, '
    b = load_boards(_boards(tmp_path, _dev("x", inline + 'family = "F4" }')))
    d = b.devices[0]
    subs = [(0, 0, 64, 64, 64)]
    spec = F.DeviceSpec("x", 0, d.part, standin_model(subs), 8, 128, subs, d.clock_hz)
    with pytest.raises(BoardFileError, match="X4: clock 480 MHz is above the part's maximum 180"):
        F.build_plan_context([spec], [0], "0123456789abcdef")
