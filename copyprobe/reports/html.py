"""One self-contained HTML page from a run directory (see docs/run-record.md, docs/report.md).

Everything is read from the saved run; no model is loaded. The page has no external
reference: plots are embedded PNG data URIs, CSS and the table-sorting script are
inline. All text taken from the data goes through jinja2's autoescaping.

This module reads the run and assembles the page; each part of the page is computed by
a module of copyprobe.reports.sections. Canary and copying runs have pages of their own
(copyprobe.reports.pages).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from copyprobe.errors import ConfigError, DataError
from copyprobe.files import atomic_write, refuse_empty_path, regular_or_absent
from copyprobe.reports.sections.blind_baseline import best_recorded_auc, blind_context, warning_of
from copyprobe.reports.sections.cost import cost_context
from copyprobe.reports.sections.documents import documents_context
from copyprobe.reports.sections.failures import failures_context
from copyprobe.reports.sections.formatting import as_list, fmt, fmt_p, label_of, pct, side_words
from copyprobe.reports.sections.per_method import method_names, methods_context, summary_curves
from copyprobe.reports.sections.run_settings import settings_context
from copyprobe.reports.sections.verdicts import standings_sentence, verdict_class, verdict_sentence, verdicts_context
from copyprobe.reports.templating import environment
from copyprobe.text import article

# ---------------------------------------------------------------- reading the run

def load_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The run directory as the templates use it: run (run.json as a dict), scores,
    metrics, examples, verdicts, canary (None if absent); every file already checked
    against its shape by copyprobe.run_files."""
    from copyprobe.record import load_run as read

    loaded = read(run_dir)
    if loaded.scores is None:  # load_run requires scores.jsonl of the kinds that write one
        kind = loaded.record.kind
        raise DataError(f"{loaded.dir} holds {article(kind)} {kind} run, which has no scores.jsonl; the report "
                        "shows detect, audit, canary and copying runs")
    return {"dir": loaded.dir, "run": loaded.record.to_json(), "scores": loaded.scores,
            "metrics": loaded.metrics, "examples": loaded.examples, "verdicts": loaded.verdicts,
            "canary": loaded.canary}


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
    """Everything report.html.j2 shows, from :func:`load_run`'s dict."""
    from copyprobe.reports import plots

    run, scores = loaded["run"], loaded["scores"]
    metrics = loaded["metrics"] or {}
    names = method_names(run, scores)
    has_labels = any(label_of(r.get("label")) is not None for r in scores)
    has_docs = any(r.get("doc_id") is not None for r in scores)
    methods = methods_context(loaded, names, has_docs, plots)
    curves = summary_curves(scores, names) if has_labels else []
    labels = Counter(label_of(r.get("label")) for r in scores)
    notes = _unique([*as_list(run.get("notes")), *as_list(metrics.get("notes"))])
    model = run.get("model")
    model_name = (model.get("spec") if isinstance(model, dict) else model) or "?"
    words = side_words(loaded)
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
        "summary_png": plots.roc_plot(curves, title="ROC, passages, all methods",
                                      positive=words["pos_pl"], negative=words["neg_pl"]) if curves else None,
        "words": words,
        "blind": blind_context(metrics, methods),
        "documents": documents_context(loaded, names),
        "failures": failures_context(loaded, names),
        "cost": cost_context(run),
        "notes": notes,
        "settings": settings_context(run),
        "verdicts": verdicts_context(loaded, plots),
    }


def _require_extras() -> None:
    import importlib.util

    missing = [m for m in ("jinja2", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"the report needs {' and '.join(missing)}: pip install 'copyprobe[report]'")


def render_report(run_dir: str | os.PathLike) -> str:
    """The report page of a run directory, as an HTML string."""
    _require_extras()
    from copyprobe.kinds import check_kind
    from copyprobe.reports.pages import page_for  # canary and copying runs have pages of their own

    _check_run_dir(run_dir)
    check_kind(run_dir)
    if (page := page_for(run_dir)) is not None:
        return page
    context = build_context(load_run(run_dir))
    return environment().get_template("report.html.j2").render(**context)


def _check_run_dir(run_dir: str | os.PathLike) -> None:
    """A file given for the run directory is said as such (the OS would say "Not a
    directory" of the report path beneath it)."""
    path = Path(run_dir)
    if path.is_file():
        hint = f"; here that is {path.parent}" if path.name == "run.json" else ""
        raise DataError(f"{path} is a file: a report is made from a run directory (the one with run.json){hint}")


def _check_report_target(path: Path, chosen: bool = True) -> None:
    """A report is written to a new file or over an earlier page, never over anything else:
    ``--out`` pointed at a run's scores.jsonl or at the data would destroy them. A folder
    that does not exist is not made (as a frequency table's): a typo in a chosen path
    would scatter pages into new folders. (``chosen``: false for the default path inside
    the run directory, whose absence load_run names.)"""
    if path.is_dir():
        raise ConfigError(f"cannot write the report to {path}: it is a directory")
    if chosen and not path.parent.is_dir():
        problem = "is a file, not a folder" if path.parent.exists() else "does not exist"
        raise ConfigError(f"cannot write the report to {path}: folder {path.parent} {problem}")
    try:
        if regular_or_absent(path) is None:  # a device or a named pipe is refused before it is read
            return
        with open(path, "rb") as existing:
            head = existing.read(512).lstrip().lower()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    if head and not head.startswith((b"<!doctype html", b"<html")):
        raise ConfigError(f"will not write the report over {path}: it exists and is not an HTML page "
                          f"(a report replaces only an earlier report)")


def write_report(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``); return its path.
    An existing ``out`` is replaced only if it is an HTML page (an earlier report)."""
    _check_run_dir(run_dir)
    refuse_empty_path(out, "the report's", "name the HTML file to write", ConfigError)
    path = Path(out) if out is not None else Path(run_dir) / "report.html"
    _check_report_target(path, chosen=out is not None)
    page = render_report(run_dir)
    try:
        atomic_write(path, page)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    return path


def blind_warning_of(run_dir: str | os.PathLike) -> str | None:
    """The blind-baseline warning of a saved run (as the report shows it), or None."""
    metrics = load_run(run_dir)["metrics"] or {}
    return warning_of(metrics, best_recorded_auc(metrics))


__all__ = [
    "blind_warning_of", "build_context", "fmt", "fmt_p", "load_run", "pct", "render_report", "side_words",
    "standings_sentence", "verdict_class", "verdict_sentence", "write_report",
]
