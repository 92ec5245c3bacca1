"""splitter.slicing."""
