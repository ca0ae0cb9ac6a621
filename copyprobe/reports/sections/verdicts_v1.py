"""verdicts.json written before format 2 (no "format" key): passages pooled, Welch and
Mann-Whitney per document; old verdict words read as today's."""

from __future__ import annotations

from typing import Any

from copyprobe.evaluation.vocabulary import EVIDENCE, NO_EVIDENCE, normalise_verdict
from copyprobe.reports.sections.formatting import as_list, fmt, fmt_p, label_of, num
from copyprobe.reports.sections.verdict_words import VERDICT_CSS, counts, plotted_first, short_title


def verdict_sentence(doc: dict, alpha: float, method: str) -> str:
    """What the evidence for one document of an older (format 1) verdicts.json does and does
    not show, in plain words, in today's vocabulary.

    ``doc`` holds the fields of a format-1 verdicts.json document (docs/report.md).
    """
    name = str(doc.get("doc_id"))
    n = doc.get("n_passages")
    mean, base = num(doc.get("mean_score")), num(doc.get("baseline_mean"))
    welch, mw = num(doc.get("welch_p")), num(doc.get("mannwhitney_p"))
    recorded = str(doc.get("verdict"))
    verdict = normalise_verdict(recorded)
    compare = (f"its {n} passages score {fmt(mean)} on average under {method}, against "
               f"{fmt(base)} for the clean baseline") if mean is not None and base is not None else (
               f"its passages were scored under {method}")
    tests = f"Welch p = {fmt_p(welch)}, Mann-Whitney p = {fmt_p(mw)}, threshold alpha = {alpha:g}"
    if verdict == EVIDENCE:
        return (f"Evidence for document {name}: {compare} ({tests}). The model treats this text "
                f"differently from comparable text it is assumed not to have seen, which is consistent "
                f"with the text, or close copies of it, having been in its training data. This is "
                f"statistical evidence, not proof: it does not show how the text got there, "
                f"whether its use was licensed or lawful, or that the model reproduces it; it "
                f"also assumes the baseline texts are truly comparable and unseen.")
    if verdict == NO_EVIDENCE:
        return (f"No evidence for document {name}: {compare} ({tests}). The scores are not "
                f"significantly higher than the baseline's. This does not show that the text was not "
                f"used for training: membership signals are weak for text seen only once, and few "
                f"passages give the tests little power.")
    if doc.get("reason") or recorded.strip().lower() == "untested":
        reason = f": {doc['reason']}" if doc.get("reason") else ""
        return (f"Cannot tell for document {name}: not tested{reason}. These scores say nothing about "
                f"whether the text was used for training.")
    return (f"Cannot tell for document {name}: {compare} ({tests}). The tests disagree (recorded as "
            f"\u201c{recorded}\u201d): the evidence is mixed. It neither shows that the text was "
            f"in the training data nor that it was not; more passages, or another method, may "
            f"settle it.")


def _scores_of(loaded: dict, method: str) -> tuple[dict[str, list[float]], dict[str, float]]:
    """(document id -> its passages' scores, passage id -> score) under ``method``."""
    by_doc: dict[str, list[float]] = {}
    by_id: dict[str, float] = {}
    for row in loaded["scores"]:
        value = num(row.get(method))
        if value is None:
            continue
        by_id[str(row.get("id"))] = value
        if row.get("doc_id") is not None:
            by_doc.setdefault(str(row["doc_id"]), []).append(value)
    return by_doc, by_id


def _baseline_scores(loaded: dict, verdicts: dict, method: str, by_id: dict[str, float]) -> list[float] | None:
    """The clean baseline's passage scores, from whichever field this older file has."""
    if isinstance(verdicts.get("baseline_scores"), list):
        return [v for v in map(num, verdicts["baseline_scores"]) if v is not None]
    if isinstance(verdicts.get("baseline_ids"), list):
        return [by_id[str(i)] for i in verdicts["baseline_ids"] if str(i) in by_id]
    # the audit command wrote one top-level "baseline" ({"mean", "sd", "n_passages"}) and its
    # clean passages with label 0
    if isinstance(verdicts.get("baseline"), dict):
        baseline = [num(r.get(method)) for r in loaded["scores"] if label_of(r.get("label")) == 0]
        return [v for v in baseline if v is not None] or None
    return None


def _document_row(i: int, raw: dict, shared: dict, alpha: float, method: str) -> dict[str, Any]:
    # the audit command's per-document "score" and "mann_whitney_p" read as the report's names
    doc = {
        **raw,
        "mean_score": raw.get("mean_score", raw.get("score")),
        "baseline_mean": raw.get("baseline_mean", shared.get("mean")),
        "baseline_std": raw.get("baseline_std", shared.get("sd")),
        "mannwhitney_p": raw.get("mannwhitney_p", raw.get("mann_whitney_p")),
    }
    recorded = str(doc.get("verdict", "—"))
    verdict = normalise_verdict(recorded)
    return {
        "doc_id": str(doc["doc_id"]),
        "anchor": f"verdict-{i}",
        "verdict": verdict,
        "recorded": recorded if recorded != verdict else None,
        "css": VERDICT_CSS[verdict],
        "reason": str(doc["reason"]) if doc.get("reason") else None,
        "n_passages": doc.get("n_passages", "—"),
        "mean_score": fmt(doc.get("mean_score")),
        "baseline_mean": fmt(doc.get("baseline_mean")),
        "baseline_std": fmt(doc.get("baseline_std")),
        "welch_p": fmt_p(doc.get("welch_p")),
        "mannwhitney_p": fmt_p(doc.get("mannwhitney_p")),
        "sentence": verdict_sentence(doc, alpha, method),
        "raw": doc,
    }


def verdicts_context_v1(loaded: dict, verdicts: dict, method: str, alpha: float, plots: Any) -> dict[str, Any]:
    by_doc, by_id = _scores_of(loaded, method)
    baseline = _baseline_scores(loaded, verdicts, method, by_id)
    shared = verdicts.get("baseline") if isinstance(verdicts.get("baseline"), dict) else {}
    docs = [_document_row(i, raw, shared, alpha, method) for i, raw in enumerate(verdicts["documents"])]
    detailed = plotted_first(docs)
    for d in detailed:
        doc = d.pop("raw")
        passages = doc.get("passage_scores")
        if isinstance(passages, list):
            passages = [v for v in map(num, passages) if v is not None]
        else:  # the audit command prefixed document ids with "suspect:" in scores.jsonl
            passages = by_doc.get(d["doc_id"]) or by_doc.get(f"suspect:{d['doc_id']}", [])
        d["png"] = plots.passage_verdict_plot(passages, baseline, num(doc.get("baseline_mean")),
                                              num(doc.get("baseline_std")),
                                              title=f"{short_title(d['doc_id'])}: passages vs clean baseline")
    for d in docs:
        d.pop("raw", None)
        d.setdefault("png", None)
    tally = counts(docs)
    summary = (f"Of {len(docs)} suspect document{'s' if len(docs) != 1 else ''}, {tally['evidence']} with "
               f"evidence, {tally['no-evidence']} without, {tally['cannot-tell']} cannot tell (older "
               f"passage-level tests under {method}, alpha {alpha:g}).")
    return {
        "format": 1,
        "summary": summary,
        "method": method,
        "alpha": f"{alpha:g}",
        "documents": docs,
        "detailed": detailed,
        "n_hidden_plots": len(docs) - len(detailed),
        "counts": tally,
        "expected_false": f"{alpha * len(docs):.2g}",
        "collection": None,
        "notes": [str(n) for n in as_list(verdicts.get("notes"))]
        + ([f"rule: {verdicts['rule']}"] if verdicts.get("rule") else []),
    }


__all__ = ["verdict_sentence", "verdicts_context_v1"]
