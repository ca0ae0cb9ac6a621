"""The per-document table: passages per document, mean score and rank under each method."""

from __future__ import annotations

from typing import Any

from copyprobe.reports.sections.formatting import fmt, label_of, num, side_words

MAX_DOCUMENT_ROWS = 2000  # rows of the document table; the rest are counted, not shown


def _sums_by_document(scores: list[dict], names: list[str]) -> dict[str, dict]:
    """Document id (the passage id when there is none) -> labels seen, passages, score sums per method."""
    docs: dict[str, dict] = {}
    for row in scores:
        key = str(row["doc_id"]) if row.get("doc_id") is not None else str(row.get("id"))
        doc = docs.setdefault(key, {"id": key, "labels": set(), "n": 0,
                                    "sums": {n: [0.0, 0] for n in names}})
        doc["n"] += 1
        doc["labels"].add(label_of(row.get("label")))
        for name in names:
            value = num(row.get(name))
            if value is not None:
                doc["sums"][name][0] += value
                doc["sums"][name][1] += 1
    return docs


def _ranks(docs: dict[str, dict], names: list[str]) -> dict[str, dict[str, int]]:
    """Method -> document -> rank by mean score (1 = highest; ties by id)."""
    ranks: dict[str, dict[str, int]] = {}
    for name in names:
        scored = [(d["sums"][name][0] / d["sums"][name][1], k) for k, d in docs.items() if d["sums"][name][1]]
        scored.sort(key=lambda t: (-t[0], t[1]))
        ranks[name] = {k: r for r, (_, k) in enumerate(scored, 1)}
    return ranks


def documents_context(loaded: dict, names: list[str]) -> dict[str, Any]:
    words = side_words(loaded)
    docs = _sums_by_document(loaded["scores"], names)
    ranks = _ranks(docs, names)
    rows = []
    for key, doc in docs.items():
        labels = doc["labels"] - {None}
        if len(labels) > 1:
            label = "mixed"
        elif labels:
            label = words["pos"] if labels.pop() == 1 else words["neg"]
        else:
            label = "—"
        cells = []
        for name in names:
            total, count = doc["sums"][name]
            mean = total / count if count else None
            cells.append({"score": fmt(mean), "score_sort": "" if mean is None else repr(mean),
                          "rank": ranks[name].get(key)})
        rows.append({"id": key, "label": label, "n": doc["n"], "cells": cells})
    first = names[0] if names else None
    if first:
        rows.sort(key=lambda r: (r["cells"][0]["rank"] is None, r["cells"][0]["rank"] or 0, r["id"]))
    shown = rows[:MAX_DOCUMENT_ROWS]
    return {"rows": shown, "n_total": len(rows), "n_hidden": len(rows) - len(shown),
            "sorted_by": first}


__all__ = ["documents_context"]
