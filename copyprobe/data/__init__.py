"""Passages and how to read them."""

from copyprobe.data.example import Example
from copyprobe.data.readers import Dataset, load_dataset, write_jsonl

__all__ = ["Dataset", "Example", "load_dataset", "write_jsonl"]
