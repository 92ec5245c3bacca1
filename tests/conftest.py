"""Shared test settings: progress display off (``splitter/cli/progress.py``), so a command's
stderr is exactly its error line; ``tests/test_cli_progress.py`` turns it on where it checks it."""

import os

os.environ.setdefault("SPLITTER_PROGRESS", "off")
