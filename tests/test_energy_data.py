"""The per-part energy constants of ``splitter/hardware/energy.toml`` against their sources.

``DATASHEET_FIGURES`` holds every figure read on a stored copy of a datasheet, with the table
file it was read on; the rows must equal them, cite that datasheet and table, carry that file,
and only rows whose Run and Sleep figures were both read may say ``checked``.
``SECONDARY_FIGURES`` holds figures others quote from a datasheet.
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
#: (part, "run" | "wait") -> (mA, MHz, document and table, the table file read). The copy is the
#: collection github.com/MaleBenAttia/st_datasheets153 (commit defa71a6): ST's PDFs and the tables
#: extracted from them (energy.toml says per row which were read). The energy.toml rows must
#: equal these and carry the same file; a figure not listed here was not read (its row stays
#: ``checked = false``): STM32L4R5ZI's, no copy of DS12023 being reachable here.
DATASHEET_FIGURES: dict[tuple[str, str], tuple[float, float, str, str]] = {
    ("STM32H743ZI", "run"): (
        110.0,
        480.0,
        "DS12110 Rev 11 Table 120",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h742ag/table_120.json",
    ),
    ("STM32H743ZI", "wait"): (
        50.7,
        480.0,
        "DS12110 Rev 11 Table 124",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h742ag/table_124.json",
    ),
    ("STM32H723ZG", "run"): (
        145.0,
        550.0,
        "DS13313 Rev 5 Table 21",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h723ve/table_21.json",
    ),
    ("STM32H723ZG", "wait"): (
        36.0,
        550.0,
        "DS13313 Rev 5 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h723ve/table_25.json",
    ),
    ("STM32F767ZI", "run"): (
        92.0,
        216.0,
        "DS11532 Rev 9 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f765bg/table_25.json",
    ),
    ("STM32F767ZI", "wait"): (
        18.0,
        216.0,
        "DS11532 Rev 9 Table 33",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f765bg/table_33.json",
    ),
    ("STM32F746NG", "run"): (
        108.0,
        216.0,
        "DS10916 Rev 5 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f745ie/table_26.json",
    ),
    ("STM32F746NG", "wait"): (
        35.0,
        216.0,
        "DS10916 Rev 5 Table 30",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f745ie/table_30.json",
    ),
    ("STM32F746ZG", "run"): (
        108.0,
        216.0,
        "DS10916 Rev 5 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f745ie/table_26.json",
    ),
    ("STM32F746ZG", "wait"): (
        35.0,
        216.0,
        "DS10916 Rev 5 Table 30",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F7/stm32f745ie/table_30.json",
    ),
    ("STM32F446RE", "run"): (
        46.0,
        180.0,
        "DS10693 Rev 11 Table 24",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f446mc/table_24.json",
    ),
    ("STM32F446RE", "wait"): (
        11.36,
        180.0,
        "DS10693 Rev 11 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f446mc/table_26.json",
    ),
    ("STM32F405RG", "run"): (
        40.0,
        168.0,
        "DS8626 Rev 12 Table 20",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f405oe/table_20.json",
    ),
    ("STM32F405RG", "wait"): (
        12.0,
        168.0,
        "DS8626 Rev 12 Table 22",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f405oe/table_22.json",
    ),
    ("STM32F401RE", "run"): (
        21.6,
        84.0,
        "DS10086 Rev 5 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f401cd/table_25.json",
    ),
    ("STM32F401RE", "wait"): (
        5.3,
        84.0,
        "DS10086 Rev 5 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f401cd/table_26.json",
    ),
    ("STM32F401RB", "run"): (
        21.2,
        84.0,
        "DS9716 Rev 11 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f401cb/table_25.json",
    ),
    ("STM32F401RB", "wait"): (
        5.2,
        84.0,
        "DS9716 Rev 11 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f401cb/table_26.json",
    ),
    ("STM32F411RE", "run"): (
        22.5,
        100.0,
        "DS10314 Rev 8 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f411cc/table_25.json",
    ),
    ("STM32F411RE", "wait"): (
        3.0,
        100.0,
        "DS10314 Rev 8 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/F4/stm32f411cc/table_26.json",
    ),
    ("STM32L452RE", "run"): (
        8.45,
        80.0,
        "DS11912 Rev 7 Table 27",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l452cc/table_27.json",
    ),
    ("STM32L452RE", "wait"): (
        2.3,
        80.0,
        "DS11912 Rev 7 Table 42",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l452cc/table_42.json",
    ),
    ("STM32L433RC", "run"): (
        8.53,
        80.0,
        "DS11449 Rev 8 Table 26",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l433cb/table_26.json",
    ),
    ("STM32L433RC", "wait"): (
        2.23,
        80.0,
        "DS11449 Rev 8 Table 41",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l433cb/table_41.json",
    ),
    ("STM32L412KB", "run"): (
        7.3,
        80.0,
        "DS12469 Rev 9 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l412c8/table_25.json",
    ),
    ("STM32L412KB", "wait"): (
        1.65,
        80.0,
        "DS12469 Rev 9 Table 40",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l412c8/table_40.json",
    ),
    ("STM32L476RG", "run"): (
        10.2,
        80.0,
        "DS10198 Rev 11 Table 27",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l476je/table_27.json",
    ),
    ("STM32L476RG", "wait"): (
        2.96,
        80.0,
        "DS10198 Rev 11 Table 42",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L4/stm32l476je/table_42.json",
    ),
    ("STM32G071RB", "run"): (
        6.3,
        64.0,
        "DS12232 Rev 5 Table 25",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/G0/stm32g071c8/table_25.json",
    ),
    ("STM32G071RB", "wait"): (
        1.8,
        64.0,
        "DS12232 Rev 5 Table 27",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/G0/stm32g071c8/table_27.json",
    ),
    ("STM32G474RE", "run"): (
        29.5,
        170.0,
        "DS12288 Rev 6 Table 21",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/G4/stm32g474cb/table_21.json",
    ),
    ("STM32G474RE", "wait"): (
        6.6,
        170.0,
        "DS12288 Rev 6 Table 28",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/G4/stm32g474cb/table_28.json",
    ),
    ("STM32L552ZE", "run"): (
        18.8,
        110.0,
        "DS12736 Rev 6 Table 35",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L5/stm32l552cc/table_35.json",
    ),
    ("STM32L552ZE", "wait"): (
        4.73,
        110.0,
        "DS12736 Rev 6 Table 59",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/L5/stm32l552cc/table_59.json",
    ),
    ("STM32U575ZI", "run"): (
        13.5,
        160.0,
        "DS13737 Rev 10 Table 37",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/U5/stm32u575ag/table_37.json",
    ),
    ("STM32U575ZI", "wait"): (
        4.35,
        160.0,
        "DS13737 Rev 10 Table 44",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/U5/stm32u575ag/table_44.json",
    ),
    ("STM32U585AI", "run"): (
        13.5,
        160.0,
        "DS13086 Rev 10 Table 38",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/U5/stm32u585ai/table_38.json",
    ),
    ("STM32U585AI", "wait"): (
        4.35,
        160.0,
        "DS13086 Rev 10 Table 45",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/U5/stm32u585ai/table_45.json",
    ),
    ("STM32H7A3ZI", "run"): (
        33.5,
        280.0,
        "DS13195 Rev 8 Table 35",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h7a3ag/table_35.json",
    ),
    ("STM32H7A3ZI", "wait"): (
        13.0,
        280.0,
        "DS13195 Rev 8 Table 39",
        "https://github.com/MaleBenAttia/st_datasheets153/blob/defa71a69cd38438f869f8eb4573acd6b17fa7f8/outJason/H7/stm32h7a3ag/table_39.json",
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
    key: tuple[str, str], figure: tuple[float, float, str, str]
) -> None:
    part, mode = key
    ma, mhz, document, url = figure
    row = energy_of(part)
    if mode == "run":
        assert (row.run_ma, row.run_mhz) == (ma, mhz), document
        assert row.run_source_url == url
        cited = row.run_table
    else:
        assert (row.wait_ma, row.wait_mhz) == (ma, mhz), document
        assert row.wait_source_url == url
        cited = row.wait_table
    doc, table = document.split(" Table ")
    assert cited.startswith(doc) and f"Table {table} " in cited, (cited, document)
    assert url.endswith(f"/table_{table}.json"), url


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
