"""Latency and throughput of the product (no PC) and of the PC harness, each labelled and each
what it claims (``splitter.partition.planner.headlines``, issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import splitter
from splitter.cli import cli
from splitter.compile import CompileOptions

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "models" / "tiny_cnn.onnx"


def _boards(tmp_path: Path, baud: int, devices: int = 2) -> Path:
    text = f"[link]\nbaud = {baud}\n"
    for i, flash in enumerate(("62 KiB", "84 KiB")[:devices]):
        text += f'\n[[device]]\nname = "{"ab"[i]}"\nmcu = "STM32F405RG"\nflash = "{flash}"\n'
    if devices == 1:
        text = text.replace('flash = "62 KiB"', 'flash = "100%"')
    path = tmp_path / "boards.toml"
    path.write_text(text)
    return path


def test_product_leaves_out_the_host_and_harness_counts_it(tmp_path: Path) -> None:
    """At 9600 baud the host's input transfer dominates: the product's latency is the plan's
    latency less host I/O and its throughput eq. 17; the harness's latency is the whole plan
    latency and its throughput cannot beat one input transfer per inference."""
    m = splitter.plan(TINY, _boards(tmp_path, 9600)).manifest
    assert m.product is not None and m.harness is not None
    io = m.host_io
    assert io.counted and io.input.seconds > 3.0  # 3284 B on the wire at 960 B/s
    assert m.product.latency_s == pytest.approx(m.latency_s - io.seconds)
    assert m.product.throughput_per_s == pytest.approx(m.throughput_per_s)
    assert m.harness.latency_s == pytest.approx(m.latency_s)
    assert m.harness.throughput_per_s is not None
    assert m.harness.throughput_per_s <= 1.0 / io.input.seconds
    assert m.harness.throughput_per_s < m.product.throughput_per_s


def test_no_host_io_keeps_both_figures_true(tmp_path: Path) -> None:
    """With --no-host-io the plan's latency is the product's; the harness still adds the host."""
    opts = CompileOptions(host_io=False)
    m = splitter.plan(TINY, _boards(tmp_path, 115200), opts).manifest
    assert m.product is not None and m.harness is not None
    assert m.product.latency_s == pytest.approx(m.latency_s)
    assert m.harness.latency_s == pytest.approx(m.latency_s + m.host_io.seconds)


def test_one_board_harness_is_one_inference_at_a_time(tmp_path: Path) -> None:
    """First and last device are the same board: bench cannot pipeline, so the harness's
    throughput is 1 / latency."""
    m = splitter.plan(TINY, _boards(tmp_path, 115200, devices=1)).manifest
    assert m.harness is not None and m.harness.throughput_per_s is not None
    assert m.harness.throughput_per_s == pytest.approx(1.0 / m.harness.latency_s)


def test_plan_and_compile_print_both_labelled(tmp_path: Path) -> None:
    boards = _boards(tmp_path, 115200)
    out = CliRunner().invoke(cli, ["plan", str(TINY), "--target", str(boards)]).output
    assert "product (first board fed locally, no PC): latency 315.293 ms" in out
    assert "PC harness (host sends the 3136 B input at 115200 baud): latency 610.432 ms" in out
    res = CliRunner().invoke(
        cli, ["compile", str(TINY), "--target", str(boards), "-o", str(tmp_path / "o"),
              "--no-firmware"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "product (first board fed locally, no PC)" in res.output
    report = (tmp_path / "o" / "report.md").read_text()
    assert "- product (first board fed locally, no PC): latency 315.293 ms" in report
    page = (tmp_path / "o" / "report.html").read_text()
    assert "product (first board fed locally, no PC)" in page and "PC harness" in page
    m = splitter.read_manifest(tmp_path / "o")
    assert m.harness is not None and m.harness.latency_s == pytest.approx(m.latency_s)
