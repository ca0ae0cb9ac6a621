"""The package version (one place; the CLI and the run record read it)."""

__version__ = "0.2.2"
