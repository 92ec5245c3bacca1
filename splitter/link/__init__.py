"""splitter.link."""
