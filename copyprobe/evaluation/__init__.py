"""Metrics and document verdicts computed from scores (no model needed)."""

from copyprobe.evaluation.metrics import (
    PRF,
    BootstrapCI,
    aggregate_documents,
    bootstrap_ci,
    evaluate,
    precision_recall_fbeta,
    roc_auc,
    tpr_at_fpr,
)
from copyprobe.evaluation.stats import ComparisonResult, mann_whitney_greater, welch_t_greater

__all__ = [
    "PRF",
    "BootstrapCI",
    "ComparisonResult",
    "aggregate_documents",
    "bootstrap_ci",
    "evaluate",
    "mann_whitney_greater",
    "precision_recall_fbeta",
    "roc_auc",
    "tpr_at_fpr",
    "welch_t_greater",
]
