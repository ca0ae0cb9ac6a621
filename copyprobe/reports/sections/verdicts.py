"""The audit's verdicts on the report page: one reader for every verdicts.json.

:func:`verdicts_context` is the one entry point. The layout switch happens once, at its
edge (:func:`current`): a file written before format 2 (no ``"format"`` key: passages
pooled, Welch and Mann-Whitney per document, old verdict words) is normalised into
today's layout (copyprobe.evaluation.verdicts); everything after reads that one layout,
whatever wrote it.

The words are verdicts.json's and are shown as it holds them: the summary, each
document's reason, sentence, short line and note, the collection's reason, and what the
audit says once (``shared``: the reference model as a witness, whether the target could
have seen a text of the given date, the null battery behind ``evidence``, what ``no
evidence`` rules out), shown once above the per-document table. Only a format-1 file,
which holds no sentences, gets them from the normaliser (in today's vocabulary). What the
page adds is layout: numbers formatted, standings side by side, plots.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from copyprobe.evaluation.verdicts import raw_baseline
from copyprobe.evaluation.vocabulary import (
    CANNOT_TELL, EVIDENCE, NO_EVIDENCE, VERDICTS, normalise_verdict, ordinal,
)
from copyprobe.reports.sections.formatting import as_list, fmt, fmt_p, label_of, num

MAX_VERDICT_PLOTS = 60  # documents shown with a plot; suspect ones first
VERDICT_CSS = {EVIDENCE: "evidence", NO_EVIDENCE: "no-evidence", CANNOT_TELL: "cannot-tell"}


# ---------------------------------------------------------------- the entry point

def verdicts_context(loaded: dict, plots: Any) -> dict[str, Any] | None:
    """The verdicts section of the page from a loaded run (copyprobe.reports.html.load_run),
    whichever format its verdicts.json has; None without one."""
    if loaded.get("verdicts") is None:
        return None
    return _context(current(loaded["verdicts"], loaded), plots)


def current(verdicts: dict, loaded: dict | None = None) -> dict[str, Any]:
    """verdicts.json in today's layout: a format-2 file as it is, an older one normalised
    (``loaded``: the run, whose scores.jsonl holds an older file's passage scores)."""
    version = num(verdicts.get("format"))
    if version is not None and version >= 2:
        return verdicts
    return _from_format1(verdicts, loaded or {"scores": []})


# ---------------------------------------------------------------- shared helpers

def verdict_class(verdict: Any) -> str:
    """CSS class of a verdict written by any version (old words read as today's)."""
    return VERDICT_CSS[normalise_verdict(verdict)]


def standing_text(part: Any) -> str:
    """'9th of 25' for a rank/of pair (a document row, a guard standing, a witness)."""
    rank = part.get("rank") if isinstance(part, dict) else None
    if isinstance(rank, bool) or not isinstance(rank, int):  # true is no rank, though an int
        return "—"
    return f"{ordinal(rank)} of {part.get('of', '?')}"


def standings_sentence(doc: dict, method: str) -> str:
    """The model's standing and the text-only standings of one suspect document, side by side
    (a layout of verdicts.json's fields; ``method``: the score the document was tested on)."""
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


def _short_title(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "not known"


# ---------------------------------------------------------------- the edge: format 1

def verdict_sentence(doc: dict, alpha: float, method: str) -> str:
    """What the evidence for one document of an older (format 1) verdicts.json does and does
    not show, in plain words, in today's vocabulary: the sentence such a file lacks.

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


def _passage_scores(loaded: dict, method: str) -> tuple[dict[str, list[float]], dict[str, float]]:
    """(document id -> its passages' scores, passage id -> score) under ``method``."""
    by_doc: dict[str, list[float]] = {}
    by_id: dict[str, float] = {}
    for row in loaded.get("scores") or []:
        value = num(row.get(method))
        if value is None:
            continue
        by_id[str(row.get("id"))] = value
        if row.get("doc_id") is not None:
            by_doc.setdefault(str(row["doc_id"]), []).append(value)
    return by_doc, by_id


def _clean_passages(loaded: dict, verdicts: dict, method: str, by_id: dict[str, float]) -> list[float] | None:
    """An older file's clean baseline passage scores, from whichever field it has."""
    if isinstance(verdicts.get("baseline_scores"), list):
        return [v for v in map(num, verdicts["baseline_scores"]) if v is not None]
    if isinstance(verdicts.get("baseline_ids"), list):
        return [by_id[str(i)] for i in verdicts["baseline_ids"] if str(i) in by_id]
    # the audit command wrote one top-level "baseline" ({"mean", "sd", "n_passages"}) and its
    # clean passages with label 0
    if isinstance(verdicts.get("baseline"), dict):
        baseline = [num(r.get(method)) for r in loaded.get("scores") or [] if label_of(r.get("label")) == 0]
        return [v for v in baseline if v is not None] or None
    return None


def _from_format1(verdicts: dict, loaded: dict) -> dict[str, Any]:
    """A verdicts.json written before format 2, in today's layout: today's verdict words (the
    recorded one kept as ``recorded``), the audit command's "score"/"mann_whitney_p" and the
    report's own "mean_score"/... read as one set of names, each document's passage scores
    and the clean passages' (for its plot), and the sentences the file lacks."""
    method = str(verdicts.get("method") or "?")
    alpha = _alpha(verdicts)
    by_doc, by_id = _passage_scores(loaded, method)
    pooled = _dict(verdicts.get("baseline"))
    documents = []
    for raw in verdicts["documents"]:
        doc = {**raw,
               "mean_score": raw.get("mean_score", raw.get("score")),
               "baseline_mean": raw.get("baseline_mean", pooled.get("mean")),
               "baseline_std": raw.get("baseline_std", pooled.get("sd")),
               "mannwhitney_p": raw.get("mannwhitney_p", raw.get("mann_whitney_p"))}
        name = str(doc["doc_id"])
        recorded = str(doc.get("verdict", "—"))
        passages = doc.get("passage_scores")
        if isinstance(passages, list):
            passages = [v for v in map(num, passages) if v is not None]
        else:  # the audit command prefixed document ids with "suspect:" in scores.jsonl
            passages = by_doc.get(name) or by_doc.get(f"suspect:{name}", [])
        documents.append({
            "doc_id": name, "verdict": normalise_verdict(recorded),
            "recorded": recorded if recorded != normalise_verdict(recorded) else None,
            "reason": str(doc["reason"]) if doc.get("reason") else None,
            "sentence": verdict_sentence(doc, alpha, method),
            "n_passages": doc.get("n_passages"), "score": doc["mean_score"],
            "baseline_mean": doc["baseline_mean"], "baseline_std": doc["baseline_std"],
            "welch_p": doc.get("welch_p"), "mannwhitney_p": doc["mannwhitney_p"],
            "passage_scores": passages,
        })
    n = len(documents)
    tally = {w: sum(d["verdict"] == w for d in documents) for w in VERDICTS}
    notes = [str(x) for x in as_list(verdicts.get("notes"))]
    notes += [f"rule: {verdicts['rule']}"] if verdicts.get("rule") else []
    if n > 1:
        notes.append(f"With {n} documents tested, about {alpha * n:.2g} would fall below alpha by chance even if "
                     f"none had been trained on (these older tests make no adjustment for testing several).")
    return {
        "format": 1, "method": method, "alpha": alpha,
        "summary": (f"Of {n} suspect document{'s' if n != 1 else ''}, {tally[EVIDENCE]} with evidence, "
                    f"{tally[NO_EVIDENCE]} without, {tally[CANNOT_TELL]} cannot tell (older passage-level "
                    f"tests under {method}, alpha {alpha:g})."),
        "baseline": {"mean": pooled.get("mean"), "sd": pooled.get("sd"),
                     "passages": _clean_passages(loaded, verdicts, method, by_id)},
        "documents": documents,
        "notes": notes,
    }


# ---------------------------------------------------------------- today's layout -> the page

def _alpha(verdicts: dict) -> float:
    alpha = num(verdicts.get("alpha"))
    return 0.01 if alpha is None else alpha


def _standing(part: Any) -> dict[str, str]:
    """A style or length standing of the guard, formatted."""
    part = _dict(part)
    return {"rank": standing_text(part), "p": fmt_p(part.get("p")),
            "distance": fmt(part.get("distance")), "clean_median": fmt(part.get("clean_median"))}


def _passages(doc: dict) -> str:
    if "n_used" in doc:  # used for the document's score / in the document / failed to score
        return f"{doc.get('n_used', '—')} / {doc.get('n_passages', '—')} / {doc.get('n_failed') or 0}"
    return str(doc.get("n_passages") if doc.get("n_passages") is not None else "—")


def _tested_on(doc: dict, method: str) -> str:
    return str(doc.get("tested_on") or _dict(doc.get("witness")).get("tested_on") or method)


class Column(NamedTuple):
    """A column of the per-document table, shown when a document holds one of ``keys``
    (None: always)."""

    header: str
    keys: tuple[str, ...] | None
    cell: Callable[[dict, str], str]  # (document, method) -> the cell's text
    sort: Callable[[dict], Any] | None  # the cell's sort key, where its text does not sort
    legend: str  # what the column means, under the table
    css: str = "num"


COLUMNS: list[Column] = [
    Column("score", None, lambda d, m: fmt(d.get("score")), None,
           "score: the document's mean passage score"),
    Column("tested on", ("tested_on", "witness"), lambda d, m: _tested_on(d, m), None,
           "tested on: the score the document was tested on (the target's own likelihood where the reference "
           "model recognises the document)", "tested-on"),
    Column("model's rank", ("rank", "p"), lambda d, m: standing_text(d), lambda d: d.get("rank"),
           "model's rank: 1st = the highest score among the suspect document and the clean documents"),
    Column("p", ("p",), lambda d, m: fmt_p(d.get("p")), None, ""),
    Column("Holm p", ("p_adjusted",), lambda d, m: fmt_p(d.get("p_adjusted")), None,
           "Holm p: p adjusted for testing several suspect documents"),
    Column("baseline mean", ("baseline_mean",), lambda d, m: fmt(d.get("baseline_mean")), None,
           "baseline mean and sd: the clean passages' scores"),
    Column("baseline sd", ("baseline_std",), lambda d, m: fmt(d.get("baseline_std")), None, ""),
    Column("Welch p", ("welch_p",), lambda d, m: fmt_p(d.get("welch_p")), None, ""),
    Column("Mann-Whitney p", ("mannwhitney_p",), lambda d, m: fmt_p(d.get("mannwhitney_p")), None, ""),
    Column("style rank", ("style",), lambda d, m: standing_text(d.get("style")),
           lambda d: _dict(d.get("style")).get("rank"),
           "style and length rank: 1st = farthest from the clean documents, compared with how far they are from "
           "each other (no model)"),
    Column("length rank", ("length",), lambda d, m: standing_text(d.get("length")),
           lambda d: _dict(d.get("length")).get("rank"), ""),
    Column("passages", None, lambda d, m: _passages(d), None,
           "passages: used for the document's score / in the document / failed to score"),
    Column("in short", ("note",), lambda d, m: str(d.get("note") or "—"), None,
           "in short: why, in a few words, where the standing does not say it; the full reason is under each "
           "document", "note"),
]


def _columns(docs: list[dict]) -> list[Column]:
    return [c for c in COLUMNS if c.keys is None or any(k in d for d in docs for k in c.keys)]


def _witness(doc: dict, method: str) -> dict[str, str] | None:
    """What the reference model said of one document, formatted."""
    said = doc.get("witness")
    if not isinstance(said, dict):
        return None
    return {"model": str(said.get("model") or "—"), "rank": standing_text(said), "p": fmt_p(said.get("p")),
            "recognises": _yes_no(said.get("recognises")), "could_have_seen": _yes_no(said.get("could_have_seen")),
            "tested_on": _tested_on(doc, method)}


def _clean_scores(verdicts: dict, tested_on: str) -> tuple[list[float], str]:
    """The clean documents' scores on the score a document was tested on: the raw score's
    (``baseline.raw``) for a document the witness switched, the method's otherwise; and
    their mean."""
    baseline = _dict(verdicts.get("baseline"))
    raw = _dict(baseline.get("raw"))
    method = str(verdicts.get("method") or "?")
    if tested_on != method:
        docs = as_list(raw.get("documents")) if raw.get("method") == tested_on else []
    else:
        docs = as_list(baseline.get("documents"))
    scores = [v for v in (num(d.get("score")) for d in docs if isinstance(d, dict)) if v is not None]
    if tested_on == method and baseline.get("mean") is not None:
        return scores, fmt(baseline.get("mean"))
    return scores, fmt(sum(scores) / len(scores)) if scores else "—"


def _document(i: int, raw: dict, verdicts: dict, columns: list[Column]) -> dict[str, Any]:
    method = str(verdicts.get("method") or "?")
    verdict = normalise_verdict(raw.get("verdict"))
    tested_on = _tested_on(raw, method)
    sentence = str(raw.get("sentence") or "")
    reason = str(raw.get("reason") or ("" if sentence else "no reason recorded"))
    current_layout = "p" in raw or "rank" in raw  # a document test against clean documents' scores
    clean, clean_mean = _clean_scores(verdicts, tested_on)
    return {
        "doc_id": str(raw["doc_id"]),
        "anchor": f"verdict-{i}",
        "verdict": verdict,
        "recorded": raw.get("recorded"),
        "css": VERDICT_CSS[verdict],
        "line": str(raw["line"]) if raw.get("line") else None,
        "sentence": sentence or None,
        "reason": reason if reason and reason not in sentence else None,  # said apart where the sentence lacks it
        "tested_on": tested_on,
        "switched": tested_on != method,
        "witness": _witness(raw, method),
        "standings": standings_sentence(raw, tested_on) if current_layout else None,
        "score": fmt(raw.get("score")),
        # the mean over all passages is on the method's score, not on a switched document's
        "score_all": fmt(raw.get("score_all_passages")) if tested_on == method else "—",
        "p": fmt_p(raw.get("p")),
        "p_adjusted": fmt_p(raw.get("p_adjusted")),
        "rank": standing_text(raw),
        "style": _standing(raw.get("style")),
        "length": _standing(raw.get("length")),
        "clean_mean": clean_mean,
        "cells": [{"text": c.cell(raw, method), "sort": None if c.sort is None else c.sort(raw), "css": c.css}
                  for c in columns],
        "_raw": raw, "_clean": clean,
    }


def _plot(d: dict, verdicts: dict, plots: Any) -> str:
    raw = d["_raw"]
    if "passage_scores" in raw:  # an older file's passage test: the passages against the clean passages
        return plots.passage_verdict_plot(raw["passage_scores"], _dict(verdicts.get("baseline")).get("passages"),
                                          num(raw.get("baseline_mean")), num(raw.get("baseline_std")),
                                          title=f"{_short_title(d['doc_id'])}: passages vs clean baseline")
    rank = raw.get("rank") if isinstance(raw.get("rank"), int) else None
    return plots.verdict_plot(num(raw.get("score")), d["_clean"], rank=rank, score_name=d["tested_on"],
                              title=f"{_short_title(d['doc_id'])}: its {d['tested_on']} score among the clean "
                                    f"documents'")


def _collection(verdicts: dict) -> dict[str, Any] | None:
    """The test over all suspect documents together, formatted; None when not run."""
    collection = verdicts.get("collection")
    if not isinstance(collection, dict):
        return None
    word = normalise_verdict(collection.get("verdict"))
    return {
        "verdict": word, "css": VERDICT_CSS[word], "reason": str(collection.get("reason") or ""),
        "n_suspect": collection.get("n_suspect", "—"), "n_clean": collection.get("n_clean", "—"),
        "p": fmt_p(collection.get("p")), "min_p": fmt_p(collection.get("min_p")),
        "style_p": fmt_p(collection.get("style_p")), "length_p": fmt_p(collection.get("length_p")),
        "test": str(collection.get("test") or "—"),
        "tested_on": str(collection["tested_on"]) if collection.get("tested_on") else None,
    }


def _test(verdicts: dict, alpha: float) -> dict[str, Any] | None:
    test = verdicts.get("test")
    if not isinstance(test, dict):
        return None
    baseline = _dict(verdicts.get("baseline"))
    min_p = num(test.get("min_p"))
    return {
        "name": str(test.get("name") or "?"),
        "assumptions": str(test.get("assumptions") or "not recorded"),
        "n_clean": test.get("n_clean_documents", baseline.get("n_documents", len(as_list(baseline.get("documents"))))),
        "min_p": fmt_p(min_p) if min_p else "no lower bound",
        "min_p_above_alpha": min_p is not None and min_p > alpha,
        "clean_needed": test.get("clean_needed", "—"),
        "passages_per_document": test.get("passages_per_document", "—"),
        "p_from": str(test["p_from"]) if test.get("p_from") else None,
        "tied": test.get("tied_clean_documents", "—"),
        "multiple_testing": str(test.get("multiple_testing") or "none (fewer than two suspect documents tested)"),
        "holm": bool(test.get("multiple_testing")),
        "normality": _dict(test.get("normality")),
        "normality_own": _dict(test.get("normality_own")),
    }


def _guard(verdicts: dict) -> dict[str, str]:
    guard = _dict(verdicts.get("guard"))
    if not guard:
        return {}
    level = num(guard.get("level"))
    shown = "—" if level is None else f"{level:g}"
    if guard.get("test", "rank") == "t":  # verdicts.json records the test only when it is not rank
        # 10%: guard.LENGTH_MATERIAL, which the report does not import (old runs are shown as recorded)
        when = (f"its style or passage-length distance from the clean documents lies so far beyond their own "
                f"distances from each other that a t test gives it p at most {shown} or at most the model's own "
                f"p-value (a passage length within 10% of theirs does not count)")
    else:
        farther = "" if level is None else f" (farther from them than {100 * (1 - level):.0f}% of them are from each other)"
        when = (f"its style or passage-length standing among the clean documents has a rank p-value at most {shown}"
                f"{farther}, at most 1/(k+1) (farther than all of them) or at most the model's own p-value")
    return {"features": str(guard.get("features") or "not recorded"), "level": shown, "when": when}


def _witness_section(verdicts: dict) -> dict[str, Any] | None:
    """verdicts.json's ``witness`` section as fields (its words are in ``shared``)."""
    said = verdicts.get("witness")
    if not isinstance(said, dict):
        return None
    group = _dict(said.get("group"))
    return {"run": bool(said.get("run")), "model": str(said.get("model") or "—"),
            "level": "—" if num(said.get("level")) is None else f"{num(said.get('level')):g}", "calibrated": str(said.get("calibrated") or "—"),
            "raw": str(said.get("raw") or "—"), "could_have_seen": _yes_no(said.get("could_have_seen")),
            "recognised": [str(x) for x in as_list(said.get("recognised"))],
            "switched": [str(x) for x in as_list(said.get("switched"))],
            "group_p": fmt_p(group.get("p")) if group else None,
            "group_switched": bool(group.get("switched")),
            "rule": str(said.get("rule") or "")}


def _target(verdicts: dict) -> dict[str, str] | None:
    target = verdicts.get("target")
    if not isinstance(target, dict):
        return None
    return {"model": str(target.get("model") or "—"), "could_have_seen": _yes_no(target.get("could_have_seen"))}


def _context(verdicts: dict, plots: Any) -> dict[str, Any]:
    """The one code path from today's layout to what templates/report.html.j2 shows."""
    alpha = _alpha(verdicts)
    baseline = _dict(verdicts.get("baseline"))
    documents = [d for d in as_list(verdicts.get("documents")) if isinstance(d, dict)]
    columns = _columns(documents)
    docs = [_document(i, raw, verdicts, columns) for i, raw in enumerate(documents)]
    ordered = sorted(docs, key=lambda d: d["verdict"] != EVIDENCE)  # evidence first, then the file's order
    for n, d in enumerate(ordered):
        d["png"] = _plot(d, verdicts, plots) if n < MAX_VERDICT_PLOTS else None
    for d in docs:
        del d["_raw"], d["_clean"]
    shared = [{"title": str(s.get("title") or ""), "text": str(s.get("text") or "")}
              for s in as_list(verdicts.get("shared")) if isinstance(s, dict) and s.get("text")]
    return {
        "older": (num(verdicts.get("format")) or 1) < 2,  # the page says what an older file's tests lack
        "summary": str(verdicts.get("summary") or ""),
        "method": str(verdicts.get("method") or "?"),
        "alpha": f"{alpha:g}",
        "shared": shared,
        "test": _test(verdicts, alpha),
        "guard": _guard(verdicts),
        "witness": _witness_section(verdicts),
        "published": str(verdicts["published"]) if verdicts.get("published") else None,
        "target": _target(verdicts),
        "rule": str(verdicts.get("rule") or ""),
        "baseline": {"n": baseline.get("n_documents", len(as_list(baseline.get("documents")))),
                     "mean": fmt(baseline.get("mean")), "sd": fmt(baseline.get("sd")),
                     "raw": ({"method": str(raw["method"]), "mean": fmt(raw["mean"]), "sd": fmt(raw["sd"])}
                             if (raw := raw_baseline(verdicts)) else None),
                     "unscored": [str(u) for u in as_list(baseline.get("unscored"))]},
        "columns": [c.header for c in columns],
        "legend": [c.legend for c in columns if c.legend],
        "documents": docs,
        "detailed": ordered,
        "n_plots": min(len(docs), MAX_VERDICT_PLOTS),
        "n_hidden_plots": max(0, len(docs) - MAX_VERDICT_PLOTS),
        "counts": {VERDICT_CSS[w]: sum(d["verdict"] == w for d in docs) for w in VERDICTS},
        "collection": _collection(verdicts),
        "notes": [str(n) for n in as_list(verdicts.get("notes"))],
    }


__all__ = ["MAX_VERDICT_PLOTS", "VERDICT_CSS", "current", "standing_text", "standings_sentence", "verdict_class",
           "verdict_sentence", "verdicts_context"]
