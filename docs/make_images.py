"""Redraw the README's pictures: ``docs/img/report.png`` (the demo's report.html in headless
chromium at 1400 px). ``docs/img/pipeline.svg`` is drawn by hand. Run with ``make docs-images``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import splitter

ROOT = Path(__file__).resolve().parents[1]


def report_png(out_png: Path) -> None:
    """Compile the demo (MobileNet v1 0.25 over models/boards/demo.toml, no firmware) and
    screenshot the top of its report.html."""
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium missing: apt-get install --no-install-recommends chromium")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo-out"
        opts = splitter.CompileOptions(firmware=False, samples=1)
        splitter.compile_model(
            ROOT / "models/mobilenet_v1_025.onnx", ROOT / "models/boards/demo.toml", out, opts
        )
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={out_png}",
            "--window-size=1400,1500",
            (out / "report.html").as_uri(),
        ]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)  # fmt: skip


if __name__ == "__main__":
    report_png(ROOT / "docs" / "img" / "report.png")
    print("wrote docs/img/report.png")
