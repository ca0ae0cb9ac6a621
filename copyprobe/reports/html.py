"""One self-contained HTML page from a run directory (see docs/run-record.md, docs/report.md).

Everything is read from the saved run; no model is loaded. The page has no external
reference: plots are embedded PNG data URIs, CSS and the table-sorting script are
inline. All text taken from the data goes through jinja2's autoescaping.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from copyprobe.errors import ConfigError, DataError
from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE, VERDICTS, normalise_verdict
from copyprobe.files import atomic_write

RESERVED_KEYS = {"id", "doc_id", "label", "errors", "details", "train", "text"}
MAX_DOCUMENT_ROWS = 2000  # rows of the document table; the rest are counted, not shown
MAX_FAILURE_ROWS = 200
MAX_VERDICT_PLOTS = 60  # documents shown with plot and sentence; suspect ones first
N_EXAMPLES_PER_CLASS = 3
TEXT_LIMIT = 600
DETAIL_LIMIT = 1200
DETAIL_ITEMS = 12


# ---------------------------------------------------------------- reading the run

def load_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The run directory as the templates use it: run (run.json as a dict), scores,
    metrics, examples, verdicts, canary (None if absent)."""
    from copyprobe.record import load_run as read

    loaded = read(run_dir)
    if loaded.scores is None:
        raise DataError(f"{loaded.dir / 'scores.jsonl'} does not exist (the report shows detect and audit runs)")
    if loaded.verdicts is not None:
        _check_verdicts(loaded.verdicts, loaded.dir / "verdicts.json")
    return {"dir": loaded.dir, "run": loaded.record.to_json(), "scores": loaded.scores,
            "metrics": loaded.metrics, "examples": loaded.examples, "verdicts": loaded.verdicts,
            "canary": loaded.canary}


def _check_verdicts(verdicts: Any, path: Path) -> None:
    if not isinstance(verdicts, dict) or not isinstance(verdicts.get("documents"), list):
        raise DataError(f"{path} must be an object with a 'documents' list (see docs/report.md)")
    for i, doc in enumerate(verdicts["documents"]):
        if not isinstance(doc, dict) or "doc_id" not in doc:
            raise DataError(f"{path}: documents[{i}] has no 'doc_id'")


# ---------------------------------------------------------------- small helpers

def _num(value: Any) -> float | None:
    """A finite float, or None (null, NaN, text, booleans are no scores)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _label(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value in (0, 1) else None


def fmt(value: Any, digits: int = 3) -> str:
    number = _num(value)
    if number is None:
        return "—"
    if number != 0 and (abs(number) >= 1e5 or abs(number) < 10 ** -digits):
        return f"{number:.{digits}g}"
    return f"{number:.{digits}f}"


def fmt_p(value: Any) -> str:
    number = _num(value)
    if number is None:
        return "—"
    return f"{number:.2g}" if number < 0.001 else f"{number:.3f}"


def pct(value: Any) -> str:
    number = _num(value)
    return "—" if number is None else f"{100 * number:.1f}%"


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more characters]"


def _detail_value(value: Any) -> dict[str, Any]:
    """A details value for display: text, a list of texts, or JSON."""
    if isinstance(value, str):
        return {"kind": "text", "value": _truncate(value, DETAIL_LIMIT)}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        items = [_truncate(v, DETAIL_LIMIT // 2) for v in value[:DETAIL_ITEMS]]
        more = len(value) - len(items)
        return {"kind": "list", "value": items, "more": more}
    if isinstance(value, (int, float, bool)) or value is None:
        return {"kind": "text", "value": fmt(value) if isinstance(value, float) else json.dumps(value)}
    dumped = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return {"kind": "json", "value": _truncate(dumped, DETAIL_LIMIT)}


def _method_names(run: dict, scores: list[dict]) -> list[str]:
    """The methods run.json declares; without that, numeric columns of scores.jsonl."""
    declared = run.get("methods")
    if isinstance(declared, dict) and declared:
        return [str(n) for n in declared]
    names: list[str] = []
    for row in scores:
        for key, value in row.items():
            if key in RESERVED_KEYS or key in names:
                continue
            if _num(value) is not None or key in (row.get("errors") or {}):
                names.append(key)
    return names


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def side_words(loaded: dict) -> dict[str, str]:
    """What label-1 and label-0 rows are called. In an audit they are the user's suspect and
    clean inputs, whose membership nobody knows; "member" only where ground truth is known."""
    if loaded["run"].get("kind") == "audit" or loaded.get("verdicts") is not None:
        return {"pos": "suspect", "neg": "clean", "pos_pl": "suspect passages", "neg_pl": "clean passages",
                "higher": "more like trained-on text"}
    return {"pos": "member", "neg": "non-member", "pos_pl": "members", "neg_pl": "non-members",
            "higher": "more likely a member"}


# ---------------------------------------------------------------- per-method content

def _method_points(scores: list[dict], method: str) -> dict[str, Any]:
    """Scores of one method: labelled points (training rows left out) and failures."""
    points, failed, trained = [], 0, 0
    for row in scores:
        value = _num(row.get(method))
        if value is None:
            failed += method in row or bool((row.get("errors") or {}).get(method))
            continue
        if method in _as_list(row.get("train")):
            trained += 1
            continue
        points.append((str(row.get("id")), row.get("doc_id"), _label(row.get("label")), value))
    return {"points": points, "n_failed": failed, "n_train": trained}


def _roc(labels: list[int], values: list[float]) -> dict[str, Any] | None:
    if len(set(labels)) < 2:
        return None
    from sklearn.metrics import roc_auc_score, roc_curve

    fpr, tpr, _ = roc_curve(labels, values)
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "auc": float(roc_auc_score(labels, values))}


def _document_means(points: list[tuple]) -> list[tuple[str, int | None, float]]:
    sums: dict[str, list] = {}
    for pid, doc, label, value in points:
        key = str(doc) if doc is not None else pid
        entry = sums.setdefault(key, [0.0, 0, label])
        entry[0] += value
        entry[1] += 1
    return [(k, v[2], v[0] / v[1]) for k, v in sums.items()]


def _metric_row(block: Any) -> dict[str, str] | None:
    if not isinstance(block, dict):
        return None
    return {
        "auc": fmt(block.get("auc")),
        "ci": (f"{fmt(block.get('auc_low'))}–{fmt(block.get('auc_high'))}"
               if _num(block.get("auc_low")) is not None else "—"),
        "tpr1": pct(block.get("tpr_at_1pct_fpr")),
        "tpr5": pct(block.get("tpr_at_5pct_fpr")),
        "n": str(block.get("n", "—")),
    }


def _methods_context(loaded: dict, names: list[str], has_docs: bool, plots: Any) -> list[dict]:
    scores, metrics = loaded["scores"], loaded["metrics"] or {}
    words = side_words(loaded)
    run = loaded["run"]
    params = run.get("methods") if isinstance(run.get("methods"), dict) else {}
    out = []
    for i, name in enumerate(names):
        data = _method_points(scores, name)
        points = data["points"]
        labelled = [(p[2], p[3]) for p in points if p[2] is not None]
        members = [v for lab, v in labelled if lab == 1]
        nonmembers = [v for lab, v in labelled if lab == 0]
        unlabelled = [p[3] for p in points if p[2] is None]
        passage_roc = _roc([lab for lab, _ in labelled], [v for _, v in labelled])
        doc_roc = None
        if has_docs:
            docs = [d for d in _document_means([p for p in points if p[2] is not None])]
            doc_roc = _roc([d[1] for d in docs], [d[2] for d in docs])
        curves = []
        if passage_roc:
            curves.append({**passage_roc, "label": "passages", "color": "#1f77b4"})
        if doc_roc:
            curves.append({**doc_roc, "label": "documents (mean score)", "color": "#ff7f0e",
                           "dashed": True})
        passage_metrics = _metric_row((metrics.get("passage") or {}).get(name))
        document_metrics = _metric_row((metrics.get("document") or {}).get(name))
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
            "auc_value": _num(((metrics.get("passage") or {}).get(name) or {}).get("auc"))
            if isinstance((metrics.get("passage") or {}).get(name), dict)
            else (passage_roc["auc"] if passage_roc else None),
            "roc_png": plots.roc_plot(curves, title=f"ROC — {name}", positive=words["pos_pl"],
                                      negative=words["neg_pl"]) if curves else None,
            "dist_png": plots.distribution_plot(members, nonmembers, unlabelled,
                                                title=f"score distribution — {name}",
                                                xlabel=f"score (higher = {words['higher']})",
                                                names=(words["pos_pl"], words["neg_pl"])),
            "examples": _examples(loaded, name),
        })
    return out


def _examples(loaded: dict, method: str) -> list[dict]:
    """Rows of one method with details (prompts, answers): the first members and non-members."""
    texts = {str(e.get("id")): e.get("text") for e in (loaded["examples"] or [])}
    chosen: dict[Any, list[dict]] = {1: [], 0: [], None: []}
    for row in loaded["scores"]:
        details = (row.get("details") or {}).get(method) if isinstance(row.get("details"), dict) else None
        if not isinstance(details, dict) or not details:
            continue
        label = _label(row.get("label"))
        bucket = chosen[label]
        limit = N_EXAMPLES_PER_CLASS if label is not None else 2 * N_EXAMPLES_PER_CLASS
        if len(bucket) >= limit:
            continue
        text = texts.get(str(row.get("id")))
        bucket.append({
            "id": str(row.get("id")),
            "label": label,
            "score": fmt(row.get(method)),
            "text": _truncate(text, TEXT_LIMIT) if isinstance(text, str) else None,
            "details": [(str(k), _detail_value(v)) for k, v in details.items()],
        })
    return chosen[1] + chosen[0] + chosen[None]


# ---------------------------------------------------------------- documents, failures, cost

def _documents_context(loaded: dict, names: list[str]) -> dict[str, Any]:
    words = side_words(loaded)
    docs: dict[str, dict] = {}
    for row in loaded["scores"]:
        key = str(row["doc_id"]) if row.get("doc_id") is not None else str(row.get("id"))
        doc = docs.setdefault(key, {"id": key, "labels": set(), "n": 0,
                                    "sums": {n: [0.0, 0] for n in names}})
        doc["n"] += 1
        doc["labels"].add(_label(row.get("label")))
        for name in names:
            value = _num(row.get(name))
            if value is not None:
                doc["sums"][name][0] += value
                doc["sums"][name][1] += 1
    ranks: dict[str, dict[str, int]] = {}
    for name in names:
        scored = [(d["sums"][name][0] / d["sums"][name][1], k) for k, d in docs.items() if d["sums"][name][1]]
        scored.sort(key=lambda t: (-t[0], t[1]))
        ranks[name] = {k: r for r, (_, k) in enumerate(scored, 1)}
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


def _failures_context(loaded: dict, names: list[str]) -> dict[str, Any]:
    per_method: Counter = Counter()
    reasons: Counter = Counter()
    rows = []
    for row in loaded["scores"]:
        errors = row.get("errors") if isinstance(row.get("errors"), dict) else {}
        for name in names:
            if name in row and _num(row.get(name)) is None or name in errors:
                reason = str(errors.get(name) or "no score and no reason recorded")
                per_method[name] += 1
                reasons[(name, reason)] += 1
                if len(rows) < MAX_FAILURE_ROWS:
                    rows.append({"id": str(row.get("id")), "method": name, "reason": _truncate(reason, 300)})
    failed_requests = _as_list((loaded["run"].get("requests") or {}).get("failed")
                               if isinstance(loaded["run"].get("requests"), dict) else None)
    return {
        "total": sum(per_method.values()),
        "per_method": sorted(per_method.items()),
        "reasons": [{"method": m, "reason": _truncate(r, 300), "count": c}
                    for (m, r), c in reasons.most_common(30)],
        "rows": rows,
        "requests": [json.dumps(f, ensure_ascii=False, default=str)[:300] for f in failed_requests[:50]],
    }


def _cost_context(run: dict) -> dict[str, Any]:
    timings = run.get("timings") if isinstance(run.get("timings"), dict) else {}
    cache = run.get("cache") if isinstance(run.get("cache"), dict) else {}
    requests = run.get("requests") if isinstance(run.get("requests"), dict) else {}
    hits, misses = _num(cache.get("hits")), _num(cache.get("misses"))
    hit_rate = pct(hits / (hits + misses)) if hits is not None and misses is not None and hits + misses else "—"
    simple = {k: v for k, v in requests.items() if not isinstance(v, (dict, list))}
    nested = {k: v for k, v in requests.items() if isinstance(v, dict) and v}
    return {
        "timings": [(k, fmt(v, 2) + " s" if _num(v) is not None else str(v)) for k, v in timings.items()],
        "cache": cache,
        "hit_rate": hit_rate,
        "requests": simple,
        "requests_nested": nested,
        "n_tokens": run.get("n_tokens"),
        "present": bool(timings or cache or requests or run.get("n_tokens") is not None),
    }


# ---------------------------------------------------------------- blind baseline and verdicts

def _blind_context(metrics: dict, methods: list[dict]) -> dict[str, Any] | None:
    blind = metrics.get("blind_baseline")
    if not isinstance(blind, dict):
        return None
    from copyprobe.evaluation.blind import blind_warning

    aucs = [m["auc_value"] for m in methods if m["auc_value"] is not None]
    best = max(aucs) if aucs else None
    warning = blind.get("warning") or blind_warning(_num(blind.get("auc")), best)
    components = blind.get("components") if isinstance(blind.get("components"), dict) else {}
    return {
        "auc": fmt(blind.get("auc")),
        "ci": (f"{fmt(blind.get('auc_low'))}–{fmt(blind.get('auc_high'))}"
               if _num(blind.get("auc_low")) is not None else "—"),
        "n": blind.get("n", "—"),
        "features": str(blind.get("features") or ""),
        "components": [(str(k), fmt(v)) for k, v in components.items()],
        "skipped": blind.get("skipped"),
        "no_signal": blind.get("no_signal"),
        "validation": blind.get("validation"),
        "warning": warning,
        "best": fmt(best),
    }


VERDICT_CSS = {EVIDENCE: "evidence", NO_EVIDENCE: "no-evidence", CANNOT_TELL: "cannot-tell"}


def verdict_class(verdict: Any) -> str:
    """CSS class of a verdict written by any version (old words read as today's)."""
    return VERDICT_CSS[normalise_verdict(verdict)]


def _ordinal(n: Any) -> str:
    if isinstance(n, bool) or not isinstance(n, int):
        return "—"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _standing_text(part: Any) -> str:
    """'9th of 25' for a rank/of pair (a document row or a guard standing)."""
    if not isinstance(part, dict) or not isinstance(part.get("rank"), int):
        return "—"
    return f"{_ordinal(part['rank'])} of {part.get('of', '?')}"


def standings_sentence(doc: dict, method: str) -> str:
    """The model's standing and the text-only standings of one suspect document, side by side."""
    if not isinstance(doc.get("rank"), int):
        return "No standing: the document has no score, or no clean document has one."
    line = f"By {method}, the model's score ranks it {_standing_text(doc)}"
    parts = [(name, doc.get(key)) for name, key in (("style", "style"), ("passage length", "length"))]
    if any(isinstance(v, dict) for _, v in parts):
        line += "; " + "; ".join(f"its {name} alone {_standing_text(v)}" for name, v in parts
                                 if isinstance(v, dict))
        line += (" (1st = the highest score; for style and length, the farthest from the clean documents "
                 "compared with how far they are from each other)")
    else:
        line += " (1st = the highest score); style and length were not compared (fewer than 2 clean documents)"
    return line + "."


def verdict_sentence(doc: dict, alpha: float, method: str) -> str:
    """What the evidence for one document of an older (format 1) verdicts.json does and does
    not show, in plain words, in today's vocabulary.

    ``doc`` holds the fields of a format-1 verdicts.json document (docs/report.md).
    """
    name = str(doc.get("doc_id"))
    n = doc.get("n_passages")
    mean, base = _num(doc.get("mean_score")), _num(doc.get("baseline_mean"))
    welch, mw = _num(doc.get("welch_p")), _num(doc.get("mannwhitney_p"))
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


def _verdicts_context(loaded: dict, plots: Any) -> dict[str, Any] | None:
    verdicts = loaded["verdicts"]
    if verdicts is None:
        return None
    method = str(verdicts.get("method") or "?")
    alpha = _num(verdicts.get("alpha"))
    alpha = 0.01 if alpha is None else alpha
    fmt_version = _num(verdicts.get("format"))
    if fmt_version is not None and fmt_version >= 2:
        return _verdicts_context_v2(verdicts, method, alpha, plots)
    return _verdicts_context_v1(loaded, verdicts, method, alpha, plots)


def _counts(docs: list[dict]) -> dict[str, int]:
    return {VERDICT_CSS[w]: sum(d["verdict"] == w for d in docs) for w in VERDICTS}


def _verdicts_context_v2(verdicts: dict, method: str, alpha: float, plots: Any) -> dict[str, Any]:
    """verdicts.json format 2: one score per document, rank or t test against the clean
    documents, Holm over suspects, a model-free style/length guard (copyprobe.evaluation.verdicts)."""
    test = verdicts.get("test") if isinstance(verdicts.get("test"), dict) else {}
    guard = verdicts.get("guard") if isinstance(verdicts.get("guard"), dict) else {}
    baseline = verdicts.get("baseline") if isinstance(verdicts.get("baseline"), dict) else {}
    clean_docs = [d for d in _as_list(baseline.get("documents")) if isinstance(d, dict)]
    clean_scores = [v for v in (_num(d.get("score")) for d in clean_docs) if v is not None]
    docs = []
    for i, raw in enumerate(verdicts["documents"]):
        verdict = normalise_verdict(raw.get("verdict"))
        style = raw.get("style") if isinstance(raw.get("style"), dict) else None
        length = raw.get("length") if isinstance(raw.get("length"), dict) else None
        docs.append({
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
            "rank": _standing_text(raw),
            "style": {"rank": _standing_text(style), "p": fmt_p((style or {}).get("p")),
                      "distance": fmt((style or {}).get("distance")),
                      "clean_median": fmt((style or {}).get("clean_median"))},
            "length": {"rank": _standing_text(length), "p": fmt_p((length or {}).get("p")),
                       "distance": fmt((length or {}).get("distance")),
                       "clean_median": fmt((length or {}).get("clean_median"))},
            "_score": _num(raw.get("score")),
            "_rank": raw.get("rank") if isinstance(raw.get("rank"), int) else None,
        })
    # the plots: evidence first, then the file's order
    detailed = sorted(docs, key=lambda d: d["verdict"] != EVIDENCE)[:MAX_VERDICT_PLOTS]
    for d in detailed:
        d["png"] = plots.verdict_plot(d["_score"], clean_scores, rank=d["_rank"],
                                      title=f"{_short_title(d['doc_id'])}: its score among the clean documents'")
    for d in docs:
        d.setdefault("png", None)
    k = test.get("n_clean_documents", baseline.get("n_documents", len(clean_docs)))
    min_p = _num(test.get("min_p"))
    collection = verdicts.get("collection") if isinstance(verdicts.get("collection"), dict) else None
    if collection is not None:
        word = normalise_verdict(collection.get("verdict"))
        collection = {
            "verdict": word, "css": VERDICT_CSS[word], "reason": str(collection.get("reason") or ""),
            "n_suspect": collection.get("n_suspect", "—"), "n_clean": collection.get("n_clean", "—"),
            "p": fmt_p(collection.get("p")), "min_p": fmt_p(collection.get("min_p")),
            "style_p": fmt_p(collection.get("style_p")), "length_p": fmt_p(collection.get("length_p")),
            "test": str(collection.get("test") or "—"),
        }
    level = _num(guard.get("level"))
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
                     "unscored": [str(u) for u in _as_list(baseline.get("unscored"))]},
        "documents": [{k_: v for k_, v in d.items() if not k_.startswith("_")} for d in docs],
        "detailed": [{k_: v for k_, v in d.items() if not k_.startswith("_")} for d in detailed],
        "n_hidden_plots": len(docs) - len(detailed),
        "counts": _counts(docs),
        "collection": collection,
        "notes": [str(n) for n in _as_list(verdicts.get("notes"))],
    }


def _verdicts_context_v1(loaded: dict, verdicts: dict, method: str, alpha: float, plots: Any) -> dict[str, Any]:
    """verdicts.json written before format 2 (no "format" key): passages pooled, Welch and
    Mann-Whitney per document; old verdict words read as today's."""
    by_doc: dict[str, list[float]] = {}
    by_id: dict[str, float] = {}
    for row in loaded["scores"]:
        value = _num(row.get(method))
        if value is None:
            continue
        by_id[str(row.get("id"))] = value
        if row.get("doc_id") is not None:
            by_doc.setdefault(str(row["doc_id"]), []).append(value)
    baseline = None
    if isinstance(verdicts.get("baseline_scores"), list):
        baseline = [v for v in map(_num, verdicts["baseline_scores"]) if v is not None]
    elif isinstance(verdicts.get("baseline_ids"), list):
        baseline = [by_id[str(i)] for i in verdicts["baseline_ids"] if str(i) in by_id]
    # the audit command wrote one top-level "baseline" ({"mean", "sd", "n_passages"}), its
    # clean passages with label 0, and per document "score" and "mann_whitney_p"
    shared = verdicts.get("baseline") if isinstance(verdicts.get("baseline"), dict) else None
    if baseline is None and shared is not None:
        baseline = [_num(r.get(method)) for r in loaded["scores"] if _label(r.get("label")) == 0]
        baseline = [v for v in baseline if v is not None] or None
    shared = shared or {}
    docs = []
    for i, raw in enumerate(verdicts["documents"]):
        doc = {
            **raw,
            "mean_score": raw.get("mean_score", raw.get("score")),
            "baseline_mean": raw.get("baseline_mean", shared.get("mean")),
            "baseline_std": raw.get("baseline_std", shared.get("sd")),
            "mannwhitney_p": raw.get("mannwhitney_p", raw.get("mann_whitney_p")),
        }
        recorded = str(doc.get("verdict", "—"))
        verdict = normalise_verdict(recorded)
        docs.append({
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
        })
    detailed = sorted(docs, key=lambda d: d["verdict"] != EVIDENCE)[:MAX_VERDICT_PLOTS]
    for d in detailed:
        doc = d.pop("raw")
        passages = doc.get("passage_scores")
        if isinstance(passages, list):
            passages = [v for v in map(_num, passages) if v is not None]
        else:  # the audit command prefixed document ids with "suspect:" in scores.jsonl
            passages = by_doc.get(d["doc_id"]) or by_doc.get(f"suspect:{d['doc_id']}", [])
        d["png"] = plots.passage_verdict_plot(passages, baseline, _num(doc.get("baseline_mean")),
                                              _num(doc.get("baseline_std")),
                                              title=f"{_short_title(d['doc_id'])}: passages vs clean baseline")
    for d in docs:
        d.pop("raw", None)
        d.setdefault("png", None)
    counts = _counts(docs)
    summary = (f"Of {len(docs)} suspect document{'s' if len(docs) != 1 else ''}, {counts['evidence']} with "
               f"evidence, {counts['no-evidence']} without, {counts['cannot-tell']} cannot tell (older "
               f"passage-level tests under {method}, alpha {alpha:g}).")
    return {
        "format": 1,
        "summary": summary,
        "method": method,
        "alpha": f"{alpha:g}",
        "documents": docs,
        "detailed": detailed,
        "n_hidden_plots": len(docs) - len(detailed),
        "counts": counts,
        "expected_false": f"{alpha * len(docs):.2g}",
        "collection": None,
        "notes": [str(n) for n in _as_list(verdicts.get("notes"))]
        + ([f"rule: {verdicts['rule']}"] if verdicts.get("rule") else []),
    }


def _short_title(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# ---------------------------------------------------------------- settings

def _settings_context(run: dict) -> list[tuple[str, Any]]:
    """run.json fields for the settings table, in a readable order; nested values as JSON."""
    skip = {"failures", "notes", "timings", "cache", "requests", "n_tokens", "train_ids"}
    order = ["created", "command", "copyprobe_version", "model", "models", "data", "methods",
             "n_passages", "seed", "bootstrap", "versions"]
    keys = [k for k in order if k in run] + [k for k in run if k not in order and k not in skip]
    out = []
    for key in keys:
        value = run[key]
        if key == "command" and isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, (dict, list)):
            if not value:
                continue
            out.append((key, {"kind": "json", "value": _truncate(
                json.dumps(value, ensure_ascii=False, indent=1, default=str), 4000)}))
        else:
            out.append((key, {"kind": "text", "value": "—" if value is None else str(value)}))
    train = run.get("train_ids")
    if isinstance(train, dict) and train:
        out.append(("train_ids", {"kind": "text", "value": "; ".join(
            f"{m}: {len(ids)} rows used for fitting, left out of the metrics"
            for m, ids in train.items() if isinstance(ids, list))}))
    return out


# ---------------------------------------------------------------- the page

def _unique(items: Iterable[Any]) -> list[str]:
    seen, out = set(), []
    for item in items:
        text = str(item)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def build_context(loaded: dict) -> dict[str, Any]:
    from copyprobe.reports import plots

    run, scores = loaded["run"], loaded["scores"]
    metrics = loaded["metrics"] or {}
    names = _method_names(run, scores)
    has_labels = any(_label(r.get("label")) is not None for r in scores)
    has_docs = any(r.get("doc_id") is not None for r in scores)
    methods = _methods_context(loaded, names, has_docs, plots)
    summary_curves = []
    if has_labels:
        for i, name in enumerate(names):
            pts = [p for p in _method_points(scores, name)["points"] if p[2] is not None]
            roc = _roc([p[2] for p in pts], [p[3] for p in pts])
            if roc:
                summary_curves.append({**roc, "label": name})
    labels = Counter(_label(r.get("label")) for r in scores)
    notes = _unique([*_as_list(run.get("notes")), *_as_list(metrics.get("notes"))])
    model = run.get("model")
    model_name = (model.get("spec") if isinstance(model, dict) else model) or "?"
    return {
        "title": f"copyprobe report — {model_name}",
        "run_dir": str(loaded["dir"]),
        "model_name": str(model_name),
        "created": str(run.get("created") or "—"),
        "n_passages": len(scores),
        "n_documents": len({str(r["doc_id"]) for r in scores if r.get("doc_id") is not None}),
        "n_members": labels.get(1, 0),
        "n_nonmembers": labels.get(0, 0),
        "has_labels": has_labels,
        "has_docs": has_docs,
        "has_metrics": bool(metrics.get("passage") or metrics.get("document")),
        "methods": methods,
        "summary_png": plots.roc_plot(summary_curves, title="ROC, passages, all methods",
                                      positive=side_words(loaded)["pos_pl"], negative=side_words(loaded)["neg_pl"])
        if summary_curves else None,
        "words": side_words(loaded),
        "blind": _blind_context(metrics, methods),
        "documents": _documents_context(loaded, names),
        "failures": _failures_context(loaded, names),
        "cost": _cost_context(run),
        "notes": notes,
        "settings": _settings_context(run),
        "verdicts": _verdicts_context(loaded, plots),
        "canary": _canary_context(loaded.get("canary")),
    }


def _canary_context(canary: Any) -> dict[str, Any] | None:
    """canary.json (a `canary test` run) for the page: the verdict and one row per canary."""
    if not isinstance(canary, dict) or not isinstance(canary.get("canaries"), list):
        return None
    rows = [{"index": c.get("index"), "rank": c.get("rank"), "n": c.get("n_candidates"), "repeat": c.get("repeat"),
             "p": fmt_p(c.get("p_value")), "ties": c.get("n_ties"), "unscored": c.get("n_unscored")}
            for c in canary["canaries"] if isinstance(c, dict)]
    combined = canary.get("combined") if isinstance(canary.get("combined"), dict) else {}
    return {"method": str(canary.get("method", "?")), "alpha": canary.get("alpha"), "p": fmt_p(canary.get("p_value")),
            "significant": bool(canary.get("significant")), "verdict": str(canary.get("verdict", "")), "rows": rows,
            "combined_p": fmt_p(combined.get("sum_of_ranks_p")) if len(rows) > 1 else None,
            "min_p_p": fmt_p(combined.get("min_p_p")) if len(rows) > 1 else None}


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def _require_extras() -> None:
    import importlib.util

    missing = [m for m in ("jinja2", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"the report needs {' and '.join(missing)}: pip install 'copyprobe[report]'")


def render_report(run_dir: str | os.PathLike) -> str:
    """The report page of a run directory, as an HTML string."""
    _require_extras()
    from copyprobe.reports.pages import page_for  # canary and copying runs have pages of their own

    if (page := page_for(run_dir)) is not None:
        return page
    context = build_context(load_run(run_dir))
    return _environment().get_template("report.html.j2").render(**context)


def write_report(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``); return its path."""
    page = render_report(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / "report.html"
    try:
        atomic_write(path, page)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    return path


def blind_warning_of(run_dir: str | os.PathLike) -> str | None:
    """The blind-baseline warning of a saved run (as the report shows it), or None."""
    loaded = load_run(run_dir)
    metrics = loaded["metrics"] or {}
    blind = metrics.get("blind_baseline")
    if not isinstance(blind, dict):
        return None
    if blind.get("warning"):
        return str(blind["warning"])
    from copyprobe.evaluation.blind import blind_warning

    aucs = [_num(v.get("auc")) for v in (metrics.get("passage") or {}).values() if isinstance(v, dict)]
    aucs = [a for a in aucs if a is not None]
    return blind_warning(_num(blind.get("auc")), max(aucs) if aucs else None)
