"""Link kinds (``splitter/hardware/links``): the UART link's facts behind one ``LinkKind``.

* the registry: ``[link] kind`` selects a kind, ``"uart"`` by default; an unknown kind is one
  line naming the known ones (exit code 2 from the CLI);
* the UART kind is what the families, the board parser, the firmware generator and the wire
  cost ask: its rate check gives the divisors the reference manuals give (RM0090 30.6.3,
  RM0351 38.4.4), the families' old entry points return exactly its answers, and the wire time
  is ``bytes * bits_per_byte / baud`` to the last bit;
* the firmware still copies the UART driver where it did (file list unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_plan_cli import run_cli

from splitter.cost.wire import record_seconds, wire
from splitter.errors import BoardFileError
from splitter.hardware.boards import load_boards
from splitter.hardware.catalog import parts
from splitter.hardware.families import FAMILIES, family_for
from splitter.hardware.links import LINK_KINDS, link_kind
from splitter.hardware.links.uart import UART, Uart, baud_valid
from splitter.ir import LinkSpec
from splitter.protocol import TIMING

MHZ = 1_000_000
PROFILE = (
    Path(__file__).resolve().parent.parent / "models" / "profiles" / "thesis_profiles.json#kws_cnn"
)


def _boards(tmp_path: Path, link: str) -> Path:
    path = tmp_path / "boards.toml"
    path.write_text(f'[link]\n{link}\n\n[[device]]\nname = "a"\nmcu = "STM32F405RG"\n')
    return path


def test_registry_and_default_kind(tmp_path: Path) -> None:
    """One kind today, UART, the default of ``[link]`` and of ``LinkSpec``."""
    assert dict(LINK_KINDS) == {"uart": UART} and isinstance(UART, Uart)
    assert link_kind() is UART and LinkSpec().kind == "uart"
    assert load_boards(_boards(tmp_path, "baud = 115200")).link.kind == "uart"
    assert load_boards(_boards(tmp_path, 'kind = "uart"\nbaud = 921600')).link == LinkSpec(921600)
    with pytest.raises(BoardFileError, match="unknown; use one of uart"):
        link_kind("spi")


def test_unknown_kind_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``[link] kind = "spi"``: exit code 2, one line naming the file, the key and the fix."""
    path = _boards(tmp_path, 'kind = "spi"')
    code, out, err = run_cli(capsys, "plan", str(PROFILE), "--target", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert str(path) in err and "[link] kind = 'spi'; use one of 'uart'" in err


def test_uart_rate_check_by_hand() -> None:
    """F405 USART2 on APB1 42 MHz: 115200 -> BRR 365 (42e6 / 115200 = 364.6, 16x); 4 Mbaud
    only with 8x oversampling (USARTDIV 21 -> BRR 0x12 | 5 >> 1); LPUART1 at 120 MHz, 115200:
    BRR = 256 * 120e6 / 115200 = 266667 > 0xFFFFF? no: 266667 <= 1048575, valid."""
    f4 = family_for("F4")
    assert UART.divisor(f4, "USART2", 42 * MHZ, 115200) == 365
    b = baud_valid("USART2", 42 * MHZ, 4_000_000)
    assert b is not None and b.over8 and b.brr == (21 & ~0xF) | ((21 & 0xF) >> 1)
    lp = baud_valid("LPUART1", 120 * MHZ, 115200)
    assert lp is not None and lp.brr == 266667
    assert UART.peripherals(f4) == f4.usarts
    with pytest.raises(BoardFileError, match="is not a USART of family F4"):
        UART.check_peripheral(f4, "USART9", "STM32F405RG")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_delegate_to_the_uart_kind(name: str) -> None:
    """Every family's ``brr`` / ``baud_valid`` / ``check_baud`` is the UART kind's answer (on
    the clock tree of the family's first catalog part at its catalog clock)."""
    fam = FAMILIES[name]
    part = next(p for p in parts() if p.family == name)
    hz = int(part.clock_mhz * MHZ)
    tree = fam.clock_tree(part.name, hz, hz, None)
    for usart in fam.usarts:
        for baud in (9600, 115200, 921600, 2_000_000):
            assert fam.brr(usart, fam.reset_clock_hz, baud) == UART.divisor(
                fam, usart, fam.reset_clock_hz, baud
            )
            fck = tree.bus_hz[fam.usart_bus(usart)]
            assert fam.baud_valid(usart, fck, baud) == baud_valid(usart, fck, baud)
            args = (usart, tree, baud, "x")
            assert _answer(fam.check_baud, *args) == _answer(UART.check_rate, fam, *args)


def _answer(check: Callable[..., object], *args: object) -> object:
    """What ``check(*args)`` returns, or the message of the BoardFileError it raises."""
    try:
        return check(*args)
    except BoardFileError as exc:
        return str(exc)


def test_wire_time_is_bytes_times_bits_over_baud() -> None:
    """``seconds = total * bits_per_byte / baud`` exactly as before the link kinds (8N1)."""
    link = LinkSpec(baud=921600, bits_per_byte=10, retransmit=0.05)
    w = wire(4000, 3, link.retransmit)
    assert w.seconds(link) == w.total * 10 / 921600
    assert record_seconds(link) == TIMING.size * (1.0 + 0.05) * 10 / 921600


def test_firmware_copies_the_uart_driver_where_it_did() -> None:
    """The firmware's static files are those of before, the UART kind's sources in place."""
    from splitter.codegen.firmware import MODE_ONLY, STATIC_FILES

    assert UART.firmware_sources == ("uart.c", "uart.h")
    assert STATIC_FILES[STATIC_FILES.index("timer.h") + 1 :][:3] == ("uart.c", "uart.h", "libc.c")
    assert MODE_ONLY["uart.c"] == MODE_ONLY["uart.h"] == ("harness", "standalone")
