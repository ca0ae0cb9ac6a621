"""The report page of a `copyprobe copying` run: the metrics table (with the clean
baseline column and the bootstrap CI of the difference when the run has one) and the
items with the longest spans copied word for word. Read from the run directory only."""

from __future__ import annotations

import os
from typing import Any

from copyprobe.errors import DataError
from copyprobe.reports.templating import environment

N_SPANS = 10


def _f(value: Any, pct: bool = False) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def _signed(value: Any, pct: bool = False) -> str:
    if value is None:
        return "—"
    return f"{100 * value:+.1f}%" if pct else f"{value:+.3f}"


def _highlight(output: str, span: str) -> tuple[str, str, str]:
    """(before, span, after) of ``output`` around the copied span, found word by word."""
    words, target = output.split(), span.split()

    def norm(w: str) -> str:
        return "".join(c for c in w.lower() if c.isalnum())

    t = [norm(w) for w in target]
    for i in range(len(words) - len(t) + 1):
        if t and [norm(w) for w in words[i:i + len(t)]] == t:
            return " ".join(words[:i]), " ".join(words[i:i + len(t)]), " ".join(words[i + len(t):])
    return output, "", ""


def build_context(run_dir: str | os.PathLike) -> dict[str, Any]:
    from copyprobe.copying.runner import recorded_config
    from copyprobe.copying.summary import partial_failure_lines
    from copyprobe.record import load_run

    run = load_run(run_dir)
    if run.results is None:
        raise DataError(f"{run.dir / 'results.jsonl'} does not exist (is this a copying run?)")
    if run.record.copying:  # a hand-edited setting is refused here as rescore refuses it
        recorded_config(run)
    metrics = run.metrics or {}
    lit = metrics.get("literal") or {}
    base = metrics.get("baseline") or {}
    table = []
    if lit:
        threshold = lit.get("threshold")
        for label, key, pct in (("ROUGE-L (mean)", "mean_rouge_l", False), ("LCS (mean, tokens)", "mean_lcs", False),
                                (f"copied (ROUGE-L ≥ {threshold})", "rate", True)):
            d = (base.get("literal") or {}).get(key) or {}
            table.append({"label": label, "book": _f(lit.get(key), pct), "clean": _f(d.get("clean"), pct),
                          "diff": _signed(d.get("difference"), pct),
                          "ci": "—" if d.get("ci_low") is None else f"{_signed(d['ci_low'], pct)} to {_signed(d['ci_high'], pct)}",
                          "more": d.get("more")})
    others = []
    nl, qa = metrics.get("nonliteral"), metrics.get("qa")
    if nl:
        others.append(("non-literal: event copying", _f(nl.get("event_rate"), True), nl.get("n")))
        others.append(("non-literal: character copying", _f(nl.get("character_rate"), True), nl.get("n")))
    if qa:
        others.append(("fact recall: F1", _f(qa.get("f1")), qa.get("n")))
    spans = sorted((r for r in run.results if r.get("task") == "literal" and r.get("error") is None
                    and r.get("set") != "clean" and r.get("longest_span_words")),
                   key=lambda r: -int(r["longest_span_words"]))[:N_SPANS]
    examples = []
    for r in spans:
        before, span, after = _highlight(str(r.get("output", "")), str(r.get("longest_span", "")))
        examples.append({"id": r.get("id"), "title": r.get("title"), "words": r["longest_span_words"],
                         "rouge": _f(r.get("rouge_l")), "prefix": r.get("prefix_tail", ""),
                         "reference": r.get("reference", ""), "before": before, "span": span, "after": after})
    model = run.record.model
    clean_info = (run.record.data or {}).get("clean") or {}
    return {
        "title": "copyprobe copying report",
        "model_name": (model.get("spec") if isinstance(model, dict) else model) or "?",
        "created": run.record.created or "—", "run_dir": str(run.dir),
        "mitigation": (run.record.mitigation or {}).get("name", "none"),
        "table": table, "has_baseline": bool(base), "conclusion": base.get("conclusion"),
        "n_book": lit.get("n"), "n_clean": (base.get("clean_literal") or {}).get("n"),
        "n_bootstrap": base.get("n_bootstrap"), "clean_path": clean_info.get("path"),
        "clean_default": clean_info.get("default"), "others": others, "examples": examples,
        "n_failures": len(run.record.failures or []),
        "partial_failures": partial_failure_lines(run.record.extra.get("partial_failures") or []),
    }


def render(run_dir: str | os.PathLike) -> str:
    return environment().get_template("copying.html.j2").render(**build_context(run_dir))


__all__ = ["build_context", "render"]
