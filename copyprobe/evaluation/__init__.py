"""Metrics and document verdicts computed from scores (no model needed).

Names load on first use (scikit-learn and scipy are slow to import), so
``import copyprobe`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "PRF": "metrics", "BootstrapCI": "metrics", "aggregate_documents": "metrics", "bootstrap_ci": "metrics",
    "evaluate": "metrics", "precision_recall_fbeta": "metrics", "roc_auc": "metrics", "tpr_at_fpr": "metrics",
    "tprs_at_fprs": "metrics",
    "ComparisonResult": "stats", "mann_whitney_greater": "stats", "welch_t_greater": "stats",
    "verdicts": "verdicts", "audit_verdicts": "verdicts",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'copyprobe.evaluation' has no attribute {name!r}")
    return getattr(importlib.import_module(f"copyprobe.evaluation.{_WHERE[name]}"), name)
