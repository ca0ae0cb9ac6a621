"""The console summary of a copying run, shared by `copyprobe copying` and the demo."""

from __future__ import annotations


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
            out.append(f"  fluency ({task}): mean {_f(fl['mean'])}, n={fl['n']}, unparseable={fl['n_unparseable']}")
    if run.get("failures"):
        out.append(f"  {len(run['failures'])} item(s) not scored: see failures in run.json / error in results.jsonl")
    for note in run.get("notes") or []:  # what changed the run's meaning (an unmatched baseline, MemFree idle)
        out.append(f"note: {note}")
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
