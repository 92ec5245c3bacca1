"""The per-part energy constants of ``splitter/hardware/energy.toml`` against their sources.

``DATASHEET_FIGURES`` holds every figure read on a stored copy of a datasheet, with the page;
the rows must equal them, carry that page, and only rows whose Run and Sleep figures were both
read may say ``checked``. ``SECONDARY_FIGURES`` holds figures others quote from a datasheet.
Each row is one line of a datasheet table, ``I mA at f MHz``; where the citation quotes the
datasheet's own ``uA/MHz`` figure (its front page), the row must reproduce it. The power at a
clock is worked by hand for one part, and every catalog part (and every part the ``boards``
engineer is adding) has a row and a dated, sourced price.
"""

from __future__ import annotations

import re

import pytest

from splitter.errors import BoardFileError
from splitter.hardware.catalog import part_names
from splitter.hardware.energy import (
    energies,
    energy_from_table,
    energy_of,
    price_from_table,
    prices,
)

#: parts being added to the catalog concurrently (issue 26's brief): their data is ready
NEW_PARTS = ("STM32U575ZI", "STM32U585AI", "STM32L552ZE", "STM32F411RE", "STM32L476RG",
             "STM32G474RE", "STM32F746ZG", "STM32H7A3ZI", "STM32H743ZI")  # fmt: skip
QUOTED = re.compile(r"(\d+(?:\.\d+)?) uA/MHz")

#: Every datasheet figure read on a stored copy of the datasheet (2026-11-27), as printed:
#: (part, "run" | "wait") -> (uA/MHz, document and place, the page read). The energy.toml rows
#: must equal these and carry the same page; a figure not listed here was not read (its row
#: stays ``checked = false``). The search found no supply-current table page of any catalog
#: part; DS12469's front page is the one copy that quotes a Run figure.
DATASHEET_FIGURES: dict[tuple[str, str], tuple[float, str, str]] = {
    ("STM32L412KB", "run"): (
        79.0,
        "DS12469 Rev 7 (STM32L412xx), front page (Features): 79 uA/MHz run mode (LDO Mode)",
        "https://pdfslide.us/documents/datasheet-stm32l412xx-ultra-low-power-arm-cortex-m4-.html",
    ),
}
TABLE = re.compile(r"DS\d{4,5} Rev \d+.*Table \d+")


@pytest.mark.parametrize("part", sorted(energies()))
def test_row_cites_its_table_and_reproduces_the_quoted_figure(part: str) -> None:
    row = energy_of(part)
    assert TABLE.search(row.run_table), row.run_table
    assert re.search(r"DS\d{4,5}.*Table \d+", row.wait_table), row.wait_table
    quoted = QUOTED.search(row.run_table)
    if quoted is not None:
        assert row.run_ua_per_mhz == pytest.approx(float(quoted.group(1)), rel=0.01)
    # Sleep (CPU in WFI, clocks on) draws less than Run, and both are an MCU's figures
    assert 0 < row.wait_ua_per_mhz < row.run_ua_per_mhz
    assert 10 <= row.run_ua_per_mhz <= 600
    assert row.regulator in ("LDO", "SMPS") and row.vdd_v == 3.3


#: Figures quoted from a datasheet by a third party (not a copy of the datasheet, so they do not
#: make a row ``checked``): (part, mode) -> (mA, MHz, what it says, where).
SECONDARY_FIGURES: dict[tuple[str, str], tuple[float, float, str, str]] = {
    ("STM32F405RG", "run"): (
        40.0,
        168.0,
        "'From datasheet Table 20 and Figure 24: Run mode, 168 MHz, TA = 25 C, peripherals "
        "disabled: Icore = 40 mA (approx)'",
        "github.com/lendzeg/stm32f405-devboard docs/power_consumption.md (commit 44e9ea1)",
    ),
}


@pytest.mark.parametrize(("key", "figure"), sorted(SECONDARY_FIGURES.items()))
def test_rows_agree_with_figures_quoted_by_others(
    key: tuple[str, str], figure: tuple[float, float, str, str]
) -> None:
    part, mode = key
    ma, mhz, quote, where = figure
    row = energy_of(part)
    got = (row.run_ma, row.run_mhz) if mode == "run" else (row.wait_ma, row.wait_mhz)
    assert got == (ma, mhz), (quote, where)


@pytest.mark.parametrize(("key", "figure"), sorted(DATASHEET_FIGURES.items()))
def test_rows_equal_the_figures_read_on_the_datasheet(
    key: tuple[str, str], figure: tuple[float, str, str]
) -> None:
    part, mode = key
    ua_per_mhz, document, url = figure
    row = energy_of(part)
    if mode == "run":
        assert row.run_ua_per_mhz == pytest.approx(ua_per_mhz, rel=1e-9), document
        assert row.run_source_url == url and document.split(" (")[0] in row.run_table
    else:
        assert row.wait_ua_per_mhz == pytest.approx(ua_per_mhz, rel=1e-9), document
        assert row.wait_source_url == url and document.split(" (")[0] in row.wait_table


def test_only_figures_read_carry_a_source_and_only_rows_read_whole_are_checked() -> None:
    for part, row in energies().items():
        assert row.run_checked == ((part, "run") in DATASHEET_FIGURES), part
        assert row.wait_checked == ((part, "wait") in DATASHEET_FIGURES), part
        assert row.checked == (row.run_checked and row.wait_checked), part


def test_a_checked_row_without_its_pages_is_refused() -> None:
    table = {"vdd_v": 3.3, "run_ma": 8.0, "run_mhz": 80.0, "wait_ma": 2.0, "wait_mhz": 80.0,
             "run_table": "t", "wait_table": "t", "checked": True,
             "run_source_url": "u"}  # fmt: skip
    with pytest.raises(BoardFileError, match="checked = true needs run_source_url and wait_"):
        energy_from_table("P", table, "energy.toml")


def test_power_at_a_clock_by_hand() -> None:
    """STM32L4R5ZI: 13.2 mA at 120 MHz (110 uA/MHz, DS12023 front page); at 80 MHz, 3.3 V:
    3.3 V x 110 uA/MHz x 80 MHz = 29.04 mW; Sleep 4.8 mA at 120 MHz -> 40 uA/MHz -> 10.56 mW."""
    row = energy_of("STM32L4R5ZI")
    assert row.run_w(80e6) == pytest.approx(0.02904, rel=1e-9)
    assert row.wait_w(80e6) == pytest.approx(0.01056, rel=1e-9)


def test_every_catalog_part_and_every_new_part_has_energy_data() -> None:
    for part in [*part_names(), *NEW_PARTS]:
        assert part in energies(), part


def test_prices_are_sourced_and_dated() -> None:
    for part, price in prices().items():
        assert 1 < price.usd < 1000, part
        assert price.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.date), part
    for part in NEW_PARTS:
        assert part in prices(), part


def test_a_part_without_energy_data_is_refused_by_name() -> None:
    with pytest.raises(
        BoardFileError, match=r"STM32Q123 has no energy data.*\[energy\.STM32Q123\]"
    ):
        energy_of("STM32Q123")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"vdd_v": 3.3}, "missing run_ma"),
        ({"vdd_v": 3.3, "run_ma": -1.0, "run_mhz": 80.0, "wait_ma": 1.0, "wait_mhz": 80.0,
          "run_table": "t", "wait_table": "t"}, "run_ma = -1.0; give a positive number"),
        ({"vdd_v": 33.0, "run_ma": 1.0, "run_mhz": 80.0, "wait_ma": 1.0, "wait_mhz": 80.0,
          "run_table": "t", "wait_table": "t"}, "is not an MCU's"),
    ],
)  # fmt: skip
def test_bad_rows_are_one_line_errors(table: dict, message: str) -> None:
    with pytest.raises(BoardFileError, match=re.escape(message)):
        energy_from_table("P", table, "energy.toml")


def test_bad_prices_are_one_line_errors() -> None:
    for value in (0, -2.0, float("nan"), float("inf"), 1e9, True):
        with pytest.raises(BoardFileError):
            price_from_table("P", {"usd": value}, "parts.toml")
