"""verdicts.json format 2: one score per document, rank or t test against the clean
documents, Holm over suspects, a model-free style/length guard (copyprobe.evaluation.verdicts)."""

from __future__ import annotations

from typing import Any

from copyprobe.evaluation.vocabulary import normalise_verdict
from copyprobe.reports.sections.formatting import as_list, fmt, fmt_p, num
from copyprobe.reports.sections.verdict_words import (
    VERDICT_CSS, counts, plotted_first, short_title, standing_text,
)


def standings_sentence(doc: dict, method: str) -> str:
    """The model's standing and the text-only standings of one suspect document, side by side."""
    if not isinstance(doc.get("rank"), int):
        return "No standing: the document has no score, or no clean document has one."
    line = f"By {method}, the model's score ranks it {standing_text(doc)}"
    parts = [(name, doc.get(key)) for name, key in (("style", "style"), ("passage length", "length"))]
    if any(isinstance(v, dict) for _, v in parts):
        line += "; " + "; ".join(f"its {name} alone {standing_text(v)}" for name, v in parts
                                 if isinstance(v, dict))
        line += (" (1st = the highest score; for style and length, the farthest from the clean documents "
                 "compared with how far they are from each other)")
    else:
        line += " (1st = the highest score); style and length were not compared (fewer than 2 clean documents)"
    return line + "."


def _guard_standing(part: dict | None) -> dict[str, str]:
    """A style or length standing of the guard, formatted."""
    return {"rank": standing_text(part), "p": fmt_p((part or {}).get("p")),
            "distance": fmt((part or {}).get("distance")), "clean_median": fmt((part or {}).get("clean_median"))}


def _document_row(i: int, raw: dict, method: str) -> dict[str, Any]:
    verdict = normalise_verdict(raw.get("verdict"))
    style = raw.get("style") if isinstance(raw.get("style"), dict) else None
    length = raw.get("length") if isinstance(raw.get("length"), dict) else None
    return {
        "doc_id": str(raw["doc_id"]),
        "anchor": f"verdict-{i}",
        "verdict": verdict,
        "recorded": None,
        "css": VERDICT_CSS[verdict],
        "reason": str(raw.get("reason") or "no reason recorded"),
        "sentence": str(raw.get("sentence") or raw.get("reason") or ""),
        "standings": standings_sentence(raw, method),
        "n_passages": raw.get("n_passages", "—"),
        "n_failed": raw.get("n_failed") or 0,
        "n_used": raw.get("n_used", "—"),
        "score": fmt(raw.get("score")),
        "score_all": fmt(raw.get("score_all_passages")),
        "p": fmt_p(raw.get("p")),
        "p_adjusted": fmt_p(raw.get("p_adjusted")),
        "rank": standing_text(raw),
        "style": _guard_standing(style),
        "length": _guard_standing(length),
        "_score": num(raw.get("score")),
        "_rank": raw.get("rank") if isinstance(raw.get("rank"), int) else None,
    }


def _collection(verdicts: dict) -> dict[str, Any] | None:
    """The test over all suspect documents together, formatted; None when not run."""
    collection = verdicts.get("collection") if isinstance(verdicts.get("collection"), dict) else None
    if collection is None:
        return None
    word = normalise_verdict(collection.get("verdict"))
    return {
        "verdict": word, "css": VERDICT_CSS[word], "reason": str(collection.get("reason") or ""),
        "n_suspect": collection.get("n_suspect", "—"), "n_clean": collection.get("n_clean", "—"),
        "p": fmt_p(collection.get("p")), "min_p": fmt_p(collection.get("min_p")),
        "style_p": fmt_p(collection.get("style_p")), "length_p": fmt_p(collection.get("length_p")),
        "test": str(collection.get("test") or "—"),
    }


def verdicts_context_v2(verdicts: dict, method: str, alpha: float, plots: Any) -> dict[str, Any]:
    test = verdicts.get("test") if isinstance(verdicts.get("test"), dict) else {}
    guard = verdicts.get("guard") if isinstance(verdicts.get("guard"), dict) else {}
    baseline = verdicts.get("baseline") if isinstance(verdicts.get("baseline"), dict) else {}
    clean_docs = [d for d in as_list(baseline.get("documents")) if isinstance(d, dict)]
    clean_scores = [v for v in (num(d.get("score")) for d in clean_docs) if v is not None]
    docs = [_document_row(i, raw, method) for i, raw in enumerate(verdicts["documents"])]
    detailed = plotted_first(docs)
    for d in detailed:
        d["png"] = plots.verdict_plot(d["_score"], clean_scores, rank=d["_rank"],
                                      title=f"{short_title(d['doc_id'])}: its score among the clean documents'")
    for d in docs:
        d.setdefault("png", None)
    k = test.get("n_clean_documents", baseline.get("n_documents", len(clean_docs)))
    min_p = num(test.get("min_p"))
    level = num(guard.get("level"))
    return {
        "format": 2,
        "summary": str(verdicts.get("summary") or ""),
        "method": method,
        "alpha": f"{alpha:g}",
        "test": {
            "name": str(test.get("name") or "?"),
            "assumptions": str(test.get("assumptions") or "not recorded"),
            "n_clean": k,
            "min_p": fmt_p(min_p) if min_p else "no lower bound",
            "min_p_above_alpha": min_p is not None and min_p > alpha,
            "clean_needed": test.get("clean_needed", "—"),
            "passages_per_document": test.get("passages_per_document", "—"),
            "multiple_testing": str(test.get("multiple_testing") or "none (fewer than two suspect documents tested)"),
        },
        "guard": {"features": str(guard.get("features") or "not recorded"),
                  "level": "—" if level is None else f"{level:g}",
                  "farther": None if level is None else f"{100 * (1 - level):.0f}%"},
        "rule": str(verdicts.get("rule") or ""),
        "baseline": {"n": baseline.get("n_documents", len(clean_docs)), "mean": fmt(baseline.get("mean")),
                     "sd": fmt(baseline.get("sd")),
                     "unscored": [str(u) for u in as_list(baseline.get("unscored"))]},
        "documents": [{k_: v for k_, v in d.items() if not k_.startswith("_")} for d in docs],
        "detailed": [{k_: v for k_, v in d.items() if not k_.startswith("_")} for d in detailed],
        "n_hidden_plots": len(docs) - len(detailed),
        "counts": counts(docs),
        "collection": _collection(verdicts),
        "notes": [str(n) for n in as_list(verdicts.get("notes"))],
    }


__all__ = ["standings_sentence", "verdicts_context_v2"]
