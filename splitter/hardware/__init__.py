"""splitter.hardware."""
