"""The run kinds, by the name run.json records: one line each.

A run kind is one module that declares its collect (a :class:`copyprobe.engine.Collection`)
and its derive in a :class:`copyprobe.engine.RunKind` named ``KIND``; registering it here
is what lets every reader of run directories know it (run.json's ``kind``, the files
``load_run`` reads) and ``copyprobe rescore`` derive its results again. ``import copyprobe``
imports this module, so the kinds are registered whatever is imported first. See
docs/architecture.md.

:func:`check_kind` holds a run directory's files against the kind its run.json names,
for every reader that takes that kind on trust (the report, rescore).
"""

from __future__ import annotations

import os
from pathlib import Path

from copyprobe.audit import KIND as AUDIT
from copyprobe.canary.scoring import KIND as CANARY
from copyprobe.copying.runner import KIND as COPYING
from copyprobe.detect import KIND as DETECT
from copyprobe.engine import RunKind, register
from copyprobe.errors import DataError
from copyprobe.files import read_json
from copyprobe.record import RESULT_FILES
from copyprobe.text import article

KINDS: dict[str, RunKind] = {kind.name: register(kind) for kind in (
    DETECT,
    AUDIT,
    COPYING,
    CANARY,
)}

# a run of these kinds records its settings in the run.json section of its kind's name,
# and a run of no other kind writes that section
SECTIONS = ("audit", "canary", "copying")


def check_kind(run_dir: str | os.PathLike) -> None:
    """Refuse a run whose run.json names a kind that its files do not belong to (a kind
    edited by hand, or files of two runs mixed): a detect run's scores drawn as a copying
    page, or an audit's verdicts.json rescored as a detect run, would show something no
    run computed. The report and rescore both ask it before reading the run. A record
    without ``kind`` (written before run.json said it) is left to its inferred kind."""
    path = Path(run_dir)
    where = path / "run.json"
    try:
        record = read_json(where, what="run record") if where.is_file() else None
    except DataError:
        return  # load_run gives the one-line error
    kind = record.get("kind") if isinstance(record, dict) else None
    # a kind that is not text (a hand-made list) is no dict key: load_run's shape check says so
    if not isinstance(kind, str) or kind not in KINDS or kind not in RESULT_FILES:
        return  # no kind, or one that is no run kind here: load_run and the caller say so
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
