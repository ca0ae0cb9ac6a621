"""copyprobe: training-data membership and copying evaluation for language models."""

__version__ = "0.1.0"
