"""splitter.bench: repeated timed inferences, calibration of the cost model, fault injection."""
