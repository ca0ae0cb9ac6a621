"""Copying evaluation (CopyBench, Chen et al. 2024): literal and non-literal copying, fact
recall and fluency, with MemFree decoding and the system-prompt self-reminder as mitigations.
See docs/copying.md."""

from copyprobe.copying.common import GenConfig
from copyprobe.copying.data import (
    CopySet,
    LiteralItem,
    NonLiteralItem,
    QAItem,
    load_copyset,
)
from copyprobe.copying.runner import CopyConfig, compute_metrics, run_copying

__all__ = [
    "CopyConfig", "CopySet", "GenConfig", "LiteralItem", "NonLiteralItem", "QAItem",
    "compute_metrics", "load_copyset", "run_copying",
]
