"""splitter.cost."""
