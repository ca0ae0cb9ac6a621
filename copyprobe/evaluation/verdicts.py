"""Document verdicts of an audit (DE-COP section 5.1): does each suspect document score
above a clean baseline?

Each suspect document's passage scores are compared with all clean passage scores by a
one-sided Welch t-test and a one-sided Mann-Whitney U test (suspect > clean). The
verdict is "seen" when both p-values are below ``alpha``, "inconclusive" when one is,
"not detected" when neither is, and "untested" when a group is too small. A pure
function of the scores: ``copyprobe rescore`` recomputes it from a saved run.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from copyprobe.evaluation.stats import mann_whitney_greater, welch_t_greater

RULE = "seen = Welch and Mann-Whitney one-sided p < alpha; inconclusive = one of them; not detected = neither"


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def verdicts(
    scores: Mapping[str, float | None],
    docs: Mapping[str, str],
    labels: Mapping[str, int],
    alpha: float,
) -> dict[str, Any]:
    """Per suspect document (label 1): score, baseline, p-values, verdict; clean passages
    have label 0. Document ids of the form ``role:name`` are reported as ``name``."""
    clean = [v for i, v in scores.items() if labels[i] == 0 and v is not None and math.isfinite(v)]
    n = len(clean)
    mean = sum(clean) / n if n else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in clean) / (n - 1)) if n > 1 else math.nan
    by_doc: dict[str, list[float]] = {}
    failed: dict[str, int] = {}
    for i, v in scores.items():
        if labels[i] != 1:
            continue
        if v is None or not math.isfinite(v):
            failed[docs[i]] = failed.get(docs[i], 0) + 1
            continue
        by_doc.setdefault(docs[i], []).append(v)
    rows = []
    for doc in sorted(set(by_doc) | set(failed)):
        values = by_doc.get(doc, [])
        welch = welch_t_greater(values, clean)
        mw = mann_whitney_greater(values, clean)
        ps = [welch.p_value, mw.p_value]
        if any(math.isnan(p) for p in ps):
            verdict = "untested"
        else:
            below = sum(p < alpha for p in ps)
            verdict = {2: "seen", 1: "inconclusive", 0: "not detected"}[below]
        rows.append({
            "doc_id": doc.split(":", 1)[1] if ":" in doc else doc,
            "n_passages": len(values),
            "n_failed": failed.get(doc, 0),
            "score": sum(values) / len(values) if values else None,
            "welch_t": _num(welch.statistic),
            "welch_p": _num(welch.p_value),
            "mann_whitney_u": _num(mw.statistic),
            "mann_whitney_p": _num(mw.p_value),
            "verdict": verdict,
            "reason": welch.reason or mw.reason,
        })
    # Dataset level (Maini et al. 2024, "LLM dataset inference", with feature_agg): do the
    # suspect passages as a whole score higher than the clean ones?
    suspect_all = [v for values in by_doc.values() for v in values]
    welch_all = welch_t_greater(suspect_all, clean)
    mw_all = mann_whitney_greater(suspect_all, clean)
    dataset = {
        "n_suspect": len(suspect_all),
        "n_clean": n,
        "welch_t": _num(welch_all.statistic),
        "welch_p": _num(welch_all.p_value),
        "mann_whitney_p": _num(mw_all.p_value),
        "significant": bool(welch_all.ok and welch_all.p_value < alpha),
    }
    return {
        "alpha": alpha,
        "baseline": {"n_passages": n, "mean": _num(mean), "sd": _num(sd)},
        "dataset": dataset,
        "rule": RULE,
        "documents": rows,
    }


def audit_verdicts(rows: list[dict[str, Any]], method: str, train_ids: Mapping[str, Any],
                   alpha: float) -> dict[str, Any]:
    """Verdicts from scores rows (as scores.jsonl holds them): rows a learning method was
    fitted on are no evidence and are left out."""
    trained = {i for ids in train_ids.values() for i in ids}
    scores: dict[str, float | None] = {}
    for row in rows:
        if row["id"] in trained:
            continue
        value = row.get(method)
        scores[row["id"]] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    docs = {r["id"]: r.get("doc_id") for r in rows}
    labels = {r["id"]: r.get("label") for r in rows}
    report = verdicts(scores, docs, labels, alpha)
    report["method"] = method
    return report
