"""splitter.deploy: put firmware on real boards (flash)."""
