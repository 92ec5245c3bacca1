"""splitter.graph."""
