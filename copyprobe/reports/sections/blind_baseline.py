"""The model-free blind baseline (metrics.json "blind_baseline") and its warning."""

from __future__ import annotations

from typing import Any

from copyprobe.reports.sections.formatting import fmt, num


def blind_context(metrics: dict, methods: list[dict]) -> dict[str, Any] | None:
    """The section's values; ``methods`` are per_method.methods_context's blocks (their AUCs)."""
    blind = metrics.get("blind_baseline")
    if not isinstance(blind, dict):
        return None
    aucs = [m["auc_value"] for m in methods if m["auc_value"] is not None]
    best = max(aucs) if aucs else None
    components = blind.get("components") if isinstance(blind.get("components"), dict) else {}
    return {
        "auc": fmt(blind.get("auc")),
        "ci": (f"{fmt(blind.get('auc_low'))}–{fmt(blind.get('auc_high'))}"
               if num(blind.get("auc_low")) is not None else "—"),
        "n": blind.get("n", "—"),
        "features": str(blind.get("features") or ""),
        "components": [(str(k), fmt(v)) for k, v in components.items()],
        "skipped": blind.get("skipped"),
        "no_signal": blind.get("no_signal"),
        "validation": blind.get("validation"),
        "warning": warning_of(metrics, best),
        "best": fmt(best),
    }


def warning_of(metrics: dict, best_auc: float | None) -> str | None:
    """The warning metrics.json stored, else the one the blind AUC and ``best_auc`` (the
    best method's) call for; None without a blind baseline."""
    blind = metrics.get("blind_baseline")
    if not isinstance(blind, dict):
        return None
    if blind.get("warning"):
        return str(blind["warning"])
    if blind.get("signal") is False:  # the run decided the texts alone carry no signal: no warning (as it did)
        return None
    from copyprobe.evaluation.blind import blind_warning

    return blind_warning(num(blind.get("auc")), best_auc)


def best_recorded_auc(metrics: dict) -> float | None:
    """The highest passage AUC metrics.json holds."""
    aucs = [num(v.get("auc")) for v in (metrics.get("passage") or {}).values() if isinstance(v, dict)]
    aucs = [a for a in aucs if a is not None]
    return max(aucs) if aucs else None


__all__ = ["blind_context", "best_recorded_auc", "warning_of"]
