"""splitter.partition."""
