"""Report pages of their own for run kinds that are not membership scores: a canary test
(copyprobe.reports.canary_page) and a copying evaluation (copyprobe.reports.copying_page).
:func:`copyprobe.reports.html.render_report` asks :func:`page_for` first."""

from __future__ import annotations

import os
from pathlib import Path

from copyprobe.errors import DataError
from copyprobe.files import read_json
from copyprobe.text import article


def run_kind(run_dir: str | os.PathLike) -> str | None:
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    try:
        record = read_json(path, what="run record")
    except DataError:
        return None  # the main report path gives the one-line error
    return record.get("kind") if isinstance(record, dict) else None


# the kinds the report shows; a run of the last three records its settings in the run.json
# section of its kind's name, and a run of no other kind writes that section
SHOWN = ("detect", "audit", "canary", "copying")
SECTIONS = ("audit", "canary", "copying")


def check_kind(run_dir: str | os.PathLike) -> None:
    """Refuse a run whose run.json names a kind that its files do not belong to (a kind
    edited by hand, or files of two runs mixed): a detect run's scores drawn as a copying
    page, or an audit's verdicts.json drawn into a detect page, would show something no
    run computed. A record without ``kind`` (written before run.json said it) is left to
    its inferred kind."""
    from copyprobe.record import RESULT_FILES

    path = Path(run_dir)
    where = path / "run.json"
    try:
        record = read_json(where, what="run record") if where.is_file() else None
    except DataError:
        return  # load_run gives the one-line error
    kind = record.get("kind") if isinstance(record, dict) else None
    if kind not in SHOWN or kind not in RESULT_FILES:
        return  # no kind, or one the report does not show: load_run and the report say so
    owners = {name: [k for k, files in RESULT_FILES.items() if name in files]
              for files in RESULT_FILES.values() for name in files}
    # the file of fewest kinds first: results.jsonl names the copying run better than metrics.json
    foreign = sorted((name for name in owners if name not in RESULT_FILES[kind] and (path / name).exists()),
                     key=lambda name: len(owners[name]))
    other = next((section for section in SECTIONS if section != kind and record.get(section) is not None), None)
    if foreign:
        mismatch = f"but {foreign[0]} beside it belongs to {_either(owners[foreign[0]])} runs, not {kind} runs"
    elif other is not None:
        mismatch = f"but holds the '{other}' settings of {article(other)} {other} run"
    else:
        return
    raise DataError(f"{where} says {article(kind)} {kind} run, {mismatch}: the run is not of the kind "
                    "run.json names (was its kind edited?)")


def _either(kinds: list[str]) -> str:
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


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


__all__ = ["check_kind", "page_for", "run_kind"]
