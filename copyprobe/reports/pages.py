"""Report pages of their own for run kinds that are not membership scores: a canary test
(copyprobe.reports.canary_page) and a copying evaluation (copyprobe.reports.copying_page).
:func:`copyprobe.reports.html.render_report` asks :func:`page_for` first."""

from __future__ import annotations

import os
from pathlib import Path

from copyprobe.errors import DataError
from copyprobe.files import read_json


def run_kind(run_dir: str | os.PathLike) -> str | None:
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    try:
        record = read_json(path, what="run record")
    except DataError:
        return None  # the main report path gives the one-line error
    return record.get("kind") if isinstance(record, dict) else None


def page_for(run_dir: str | os.PathLike) -> str | None:
    """The HTML page of a canary or copying run, or None for the general report."""
    kind = run_kind(run_dir)
    if kind == "canary" and (Path(run_dir) / "canary.json").is_file():
        from copyprobe.reports.canary_page import render

        return render(run_dir)
    if kind == "copying":
        from copyprobe.reports.copying_page import render

        return render(run_dir)
    return None


__all__ = ["page_for", "run_kind"]
