"""The console summary of a copying run, shared by `copyprobe copying` and the demo, and
the rule for a run that scored nothing (:func:`unscored`)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from copyprobe.detect import Unscored


def _f(value, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def summary_lines(metrics: dict, run: dict) -> list[str]:
    """The console summary of a copying run (the literal table beside its clean baseline)."""
    out: list[str] = []
    mit = run.get("mitigation", {}).get("name", "none")
    out.append(f"copying evaluation (mitigation: {mit})")
    lit = metrics.get("literal")
    if lit and metrics.get("baseline"):
        out.extend(baseline_lines(metrics))
    elif lit:
        out.append(f"  literal:     rate {_f(lit['rate'], True)} (ROUGE-L >= {lit['threshold']}), "
                   f"mean ROUGE-L {_f(lit['mean_rouge_l'])}, mean LCS {_f(lit['mean_lcs'])}, n={lit['n']}, errors={lit['n_errors']}")
    nl = metrics.get("nonliteral")
    if nl:
        out.append(f"  non-literal: events {_f(nl['event_rate'], True)} (>= {nl['event_threshold']}), "
                   f"characters {_f(nl['character_rate'], True)} (>= {nl['character_threshold']}), "
                   f"n={nl['n']}, undetermined={nl['n_event_undetermined']}, errors={nl['n_errors']}")
        bounds = nl.get("event_rate_bounds")
        if nl["n_event_undetermined"] and bounds:
            out.append(f"    {nl['n_event_undetermined']} item(s) undetermined (unreadable judge answers or a "
                       f"failed judge): the event rate is {_f(bounds[0], True)} to {_f(bounds[1], True)} counting them "
                       "as not copied / as copied")
    qa = metrics.get("qa")
    if qa:
        out.append(f"  fact recall: F1 {_f(qa['f1'])}, EM {_f(qa['exact_match'])}, n={qa['n']}, errors={qa['n_errors']}")
    for task in ("literal", "nonliteral"):
        fl = (metrics.get(task) or {}).get("fluency")
        if fl:
            failed = f", judge failed={fl['n_judge_failed']}" if fl.get("n_judge_failed") else ""
            out.append(f"  fluency ({task}): mean {_f(fl['mean'])}, n={fl['n']}, unparseable={fl['n_unparseable']}{failed}")
    if run.get("failures"):
        out.append(f"  {len(run['failures'])} item(s) not scored: see failures in run.json / error in results.jsonl")
    out.extend(f"  {line}" for line in partial_failure_lines(run.get("partial_failures") or []))
    for note in run.get("notes") or []:  # what changed the run's meaning (an unmatched baseline, MemFree idle)
        out.append(f"note: {note}")
    return out


def partial_failure_lines(partial: list[dict]) -> list[str]:
    """One line per judge that failed on items which kept their other scores (run.json's
    ``partial_failures``; absent from runs written before it existed): the console summary
    and the report page say the same."""
    from copyprobe.copying.fluency import JUDGE_FAILED as FLUENCY_FAILED
    from copyprobe.copying.nonliteral import JUDGE_FAILED

    out = []
    for missing, kept, judge, failed, field in (
            ("event score", "their character score", "event", JUDGE_FAILED, "event_error"),
            ("fluency score", "their copying scores", "fluency", FLUENCY_FAILED, "fluency_error")):
        these = [f for f in partial if f.get("missing", "event score") == missing]
        if these:
            first = str(these[0].get("error")).removeprefix(f"{failed}: ")
            out.append(f"{len(these)} item(s) kept {kept} but the {judge} judge failed (first reason: "
                       f"{first}): see partial_failures in run.json / {field} in results.jsonl")
    return out


def baseline_lines(metrics: dict) -> list[str]:
    """Literal copying on the book beside the same metrics on unseen text."""
    out: list[str] = []
    base = metrics["baseline"]
    rows = [("ROUGE-L (mean)", "mean_rouge_l", False), ("LCS (mean, tokens)", "mean_lcs", False),
            (f"copied (ROUGE-L >= {metrics['literal']['threshold']})", "rate", True)]
    out.append(f"  literal copying, beside a clean baseline (n = {base['literal']['mean_rouge_l']['n_suspect']} book / "
          f"{base['literal']['mean_rouge_l']['n_clean']} unseen items):")
    out.append(f"    {'metric':<26} {'book':>9} {'baseline':>9} {'difference [95% CI]':>28}")
    for label, key, pct in rows:
        d = base["literal"][key]
        ci = ("n/a" if d["ci_low"] is None else f"{_f(d['difference'], pct)} [{_f(d['ci_low'], pct)}, "
                   f"{_f(d['ci_high'], pct)}]")
        out.append(f"    {label:<26} {_f(d['suspect'], pct):>9} {_f(d['clean'], pct):>9} {ci:>28}")
    out.append(f"  {base['conclusion']}")
    return out


def unscored(rows: Sequence[Mapping[str, Any]]) -> list[Unscored]:
    """The one rule for a copying run that produced nothing, as :func:`copyprobe.detect.unscored`
    is for scoring runs, per task of ``rows`` (results.jsonl): the literal items of the book,
    those of the clean baseline, the non-literal and the QA items, each counted with the
    reasons in ``error``; and the non-literal items scored whose event judge failed (their
    character score stands, their event score is missing), and the graded items whose fluency
    judge failed. A part with every row unscored
    produced nothing (:attr:`Unscored.nothing`)."""
    from copyprobe.copying.fluency import fluency_judge_failed
    from copyprobe.copying.nonliteral import event_judge_failed

    parts: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        what = "literal (clean baseline)" if row.get("set") == "clean" else str(row.get("task"))
        parts.setdefault(what, []).append(row)
    out = []
    for what, part in parts.items():
        out.extend(_count(what, part, [str(r["error"]) for r in part if r.get("error") is not None]))
        scored = [r for r in part if r.get("error") is None]
        if what == "nonliteral":
            out.extend(_count("nonliteral events", scored,
                              [str(r["event_error"]) for r in scored if event_judge_failed(r)],
                              lost="kept their character score but have no event score"))
        graded = [r for r in scored if "fluency" in r]
        out.extend(_count(f"{what} fluency", graded,
                          [str(r["fluency_error"]) for r in graded if fluency_judge_failed(r)],
                          lost="kept their copying scores but have no fluency score"))
    return out


def _count(what: str, part: Sequence[Mapping[str, Any]], reasons: list[str], lost: str = "have no score"):
    from copyprobe.detect import Unscored

    if not reasons:
        return []
    ids = [r.get("id") for r in part]
    unit = "items" if len(set(map(str, ids))) == len(ids) else "(item, template) rows"
    return [Unscored(what, len(reasons), len(part), tuple(Counter(reasons).most_common()), unit=unit, lost=lost,
                     where="results.jsonl")]
