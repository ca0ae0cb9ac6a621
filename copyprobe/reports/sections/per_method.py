"""One block per method: metrics, ROC and score-distribution plots, examples with details."""

from __future__ import annotations

from typing import Any

from copyprobe.reports.sections.formatting import (
    TEXT_LIMIT, as_list, detail_value, fmt, label_of, num, pct, side_words, truncate,
)

RESERVED_KEYS = {"id", "doc_id", "label", "errors", "details", "train", "text"}
N_EXAMPLES_PER_CLASS = 3


def method_names(run: dict, scores: list[dict]) -> list[str]:
    """The methods run.json declares; without that, numeric columns of scores.jsonl."""
    declared = run.get("methods")
    if isinstance(declared, dict) and declared:
        return [str(n) for n in declared]
    names: list[str] = []
    for row in scores:
        for key, value in row.items():
            if key in RESERVED_KEYS or key in names:
                continue
            if num(value) is not None or key in (row.get("errors") or {}):
                names.append(key)
    return names


def method_points(scores: list[dict], method: str) -> dict[str, Any]:
    """Scores of one method: labelled points (training rows left out) and failures."""
    points, failed, trained = [], 0, 0
    for row in scores:
        value = num(row.get(method))
        if value is None:
            failed += method in row or bool((row.get("errors") or {}).get(method))
            continue
        if method in as_list(row.get("train")):
            trained += 1
            continue
        points.append((str(row.get("id")), row.get("doc_id"), label_of(row.get("label")), value))
    return {"points": points, "n_failed": failed, "n_train": trained}


def roc(labels: list[int], values: list[float]) -> dict[str, Any] | None:
    if len(set(labels)) < 2:
        return None
    from sklearn.metrics import roc_auc_score, roc_curve

    fpr, tpr, _ = roc_curve(labels, values)
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "auc": float(roc_auc_score(labels, values))}


def summary_curves(scores: list[dict], names: list[str]) -> list[dict]:
    """The passage ROC curve of every method with two labels, for the summary plot."""
    curves = []
    for name in names:
        pts = [p for p in method_points(scores, name)["points"] if p[2] is not None]
        curve = roc([p[2] for p in pts], [p[3] for p in pts])
        if curve:
            curves.append({**curve, "label": name})
    return curves


def _document_means(points: list[tuple]) -> list[tuple[str, int | None, float]]:
    sums: dict[str, list] = {}
    for pid, doc, label, value in points:
        key = str(doc) if doc is not None else pid
        entry = sums.setdefault(key, [0.0, 0, label])
        entry[0] += value
        entry[1] += 1
    return [(k, v[2], v[0] / v[1]) for k, v in sums.items()]


def metric_row(block: Any) -> dict[str, str] | None:
    if not isinstance(block, dict):
        return None
    return {
        "auc": fmt(block.get("auc")),
        "ci": (f"{fmt(block.get('auc_low'))}–{fmt(block.get('auc_high'))}"
               if num(block.get("auc_low")) is not None else "—"),
        "tpr1": pct(block.get("tpr_at_1pct_fpr")),
        "tpr5": pct(block.get("tpr_at_5pct_fpr")),
        "n": str(block.get("n", "—")),
    }


def _curves(points: list[tuple], has_docs: bool) -> tuple[dict | None, list[dict]]:
    """(passage ROC, the curves to draw: passages, and documents by mean score)."""
    labelled = [(p[2], p[3]) for p in points if p[2] is not None]
    passage_roc = roc([lab for lab, _ in labelled], [v for _, v in labelled])
    doc_roc = None
    if has_docs:
        docs = _document_means([p for p in points if p[2] is not None])
        doc_roc = roc([d[1] for d in docs], [d[2] for d in docs])
    curves = []
    if passage_roc:
        curves.append({**passage_roc, "label": "passages", "color": "#1f77b4"})
    if doc_roc:
        curves.append({**doc_roc, "label": "documents (mean score)", "color": "#ff7f0e", "dashed": True})
    return passage_roc, curves


def methods_context(loaded: dict, names: list[str], has_docs: bool, plots: Any) -> list[dict]:
    scores, metrics = loaded["scores"], loaded["metrics"] or {}
    words = side_words(loaded)
    run = loaded["run"]
    params = run.get("methods") if isinstance(run.get("methods"), dict) else {}
    out = []
    for i, name in enumerate(names):
        data = method_points(scores, name)
        points = data["points"]
        labelled = [(p[2], p[3]) for p in points if p[2] is not None]
        members = [v for lab, v in labelled if lab == 1]
        nonmembers = [v for lab, v in labelled if lab == 0]
        unlabelled = [p[3] for p in points if p[2] is None]
        passage_roc, curves = _curves(points, has_docs)
        recorded = (metrics.get("passage") or {}).get(name)
        passage_metrics = metric_row(recorded)
        document_metrics = metric_row((metrics.get("document") or {}).get(name))
        if passage_metrics is None and passage_roc:
            passage_metrics = {"auc": fmt(passage_roc["auc"]) + " (computed here)", "ci": "—",
                               "tpr1": "—", "tpr5": "—", "n": str(len(labelled))}
        out.append({
            "name": name,
            "anchor": f"method-{i}",
            "params": params.get(name) if isinstance(params.get(name), dict) else None,
            "n_scored": len(points),
            "n_failed": data["n_failed"],
            "n_train": data["n_train"],
            "passage": passage_metrics,
            "document": document_metrics,
            "auc_value": num((recorded or {}).get("auc")) if isinstance(recorded, dict)
            else (passage_roc["auc"] if passage_roc else None),
            "roc_png": plots.roc_plot(curves, title=f"ROC — {name}", positive=words["pos_pl"],
                                      negative=words["neg_pl"]) if curves else None,
            "dist_png": plots.distribution_plot(members, nonmembers, unlabelled,
                                                title=f"score distribution — {name}",
                                                xlabel=f"score (higher = {words['higher']})",
                                                names=(words["pos_pl"], words["neg_pl"])),
            "examples": examples(loaded, name),
        })
    return out


def examples(loaded: dict, method: str) -> list[dict]:
    """Rows of one method with details (prompts, answers): the first members and non-members."""
    texts = {str(e.get("id")): e.get("text") for e in (loaded["examples"] or [])}
    chosen: dict[Any, list[dict]] = {1: [], 0: [], None: []}
    for row in loaded["scores"]:
        details = (row.get("details") or {}).get(method) if isinstance(row.get("details"), dict) else None
        if not isinstance(details, dict) or not details:
            continue
        label = label_of(row.get("label"))
        bucket = chosen[label]
        limit = N_EXAMPLES_PER_CLASS if label is not None else 2 * N_EXAMPLES_PER_CLASS
        if len(bucket) >= limit:
            continue
        text = texts.get(str(row.get("id")))
        bucket.append({
            "id": str(row.get("id")),
            "label": label,
            "score": fmt(row.get(method)),
            "text": truncate(text, TEXT_LIMIT) if isinstance(text, str) else None,
            "details": [(str(k), detail_value(v)) for k, v in details.items()],
        })
    return chosen[1] + chosen[0] + chosen[None]


__all__ = ["examples", "method_names", "method_points", "methods_context", "metric_row", "roc", "summary_curves"]
