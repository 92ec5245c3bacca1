"""``report.html`` as a reader sees it in a browser: no raw mathtext on any figure (the
branch-and-bound colour bar's log ticks) and no horizontal overflow at 1400 px with long TFLite
tensor names in the cuts table (issue 29). Headless chromium, as ``tests/test_report_html.py``."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import splitter
from splitter.compile import CompileOptions

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1400
#: written into the page's DOM after layout; --dump-dom then prints it
PROBE = (
    "<script>document.body.setAttribute('data-scroll-width',"
    "document.documentElement.scrollWidth)</script>"
)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLPerf VWW int8 TFLite (long tensor names) over two boards, solved by branch and
    bound (the heatmap with its log colour bar)."""
    out = tmp_path_factory.mktemp("layout") / "out"
    opts = CompileOptions(solver="bnb", firmware=False, samples=1)
    model = ROOT / "models" / "mlperf_vww_mobilenet_v1_025_int8.tflite"
    splitter.compile_model(model, ROOT / "models/boards/mlperf_vww2.toml", out, opts)
    return out / "report.html"


def _figures(page: Path) -> dict[str, str]:
    text = page.read_text()
    found = re.findall(r'<figure id="([^"]+)">.*?data:image/svg\+xml;base64,([^"]+)"', text, re.S)
    return {name: base64.b64decode(data).decode() for name, data in found}


def test_no_raw_mathtext_in_any_figure(page: Path) -> None:
    figures = _figures(page)
    assert "plot-search" in figures  # the heatmap with the log colour bar is there
    for name, svg in figures.items():
        labels = re.findall(r">([^<>]*)</text>", svg)
        raw = [t for t in labels if "$" in t or "mathdefault" in t or "\\times" in t]
        assert not raw, f"{name}: raw mathtext {raw}"


def test_no_horizontal_overflow_at_1400_px(page: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "chromium missing: apt-get install -y --no-install-recommends chromium"
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},900"]
    dom = subprocess.run(
        [*base, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    width = re.search(r'data-scroll-width="(\d+)"', dom)
    assert width is not None, dom[-500:]
    assert int(width.group(1)) <= WIDTH, f"page is {width.group(1)} px wide at {WIDTH} px"
    shot = tmp_path / "report.png"
    subprocess.run(
        [*base, "--hide-scrollbars", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.is_file() and shot.stat().st_size > 10_000
