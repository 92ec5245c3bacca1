"""The package version (one place: the root package, the output marker and --version read it)."""

__version__ = "0.1.0"
