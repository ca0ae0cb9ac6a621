"""`rescore`: recompute everything after the model calls from a saved run directory.

Every run kind's derived files (metrics with bootstrap CIs and the blind baseline, audit
verdicts, copying metrics, canary.json) are its ``derive`` applied to what the run
directory holds (:func:`copyprobe.engine.derive_run`), so this loads no model and makes
no model call: a run can be re-evaluated (or re-reported) anywhere, years later.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from copyprobe import record
from copyprobe.engine import derive_run, rewrite_derived
from copyprobe.errors import DataError, SettingError
from copyprobe.kinds import KINDS


def rescore(run_dir: str | os.PathLike, *, n_bootstrap: int | None = None,
            inputs: Mapping[str, Any] | None = None) -> record.Run:
    """Recompute and rewrite the derived files of ``run_dir``; ``n_bootstrap`` overrides
    the recorded number of resamples; ``inputs``: where inputs that derive reads are now,
    when they moved since the run (``{"kit": DIR}`` for a canary test). Returns the run as
    read back."""
    run = record.load_run(run_dir, derived=False)  # rewritten below: a damaged one is no obstacle
    kind = KINDS.get(run.record.kind)
    if kind is None:
        raise DataError(f"{run.dir} is a {run.record.kind!r} run: rescore recomputes "
                        f"{', '.join(KINDS)} runs")
    if (inputs or {}).get("kit") is not None and kind.name != "canary":
        # a kit given to another kind of run would be ignored: said, not silently dropped
        raise SettingError("kit", f"does not apply: {run.dir} is a {kind.name} run; only a canary test reads a kit")
    _check_recorded_settings(run, kind.name)
    run.inputs = dict(inputs or {})
    rewrite_derived(run, derive_run(kind, run, n_bootstrap=n_bootstrap))
    return record.load_run(run.dir)


def _check_recorded_settings(run: record.Run, kind: str) -> None:
    """A hand-edited run directory is read as strictly as the command line: an alpha of 2
    turned every verdict into evidence, a method that is no column of the scores 'cannot
    tell' everywhere. (A run being made checked these once, at its start; only an edit
    between then and a rescore can break them, so they are checked here, not in derive.)"""
    if kind == "copying":
        if run.record.copying:  # missing: derive says so
            from copyprobe.copying.runner import recorded_config

            recorded_config(run)  # before the rows are counted against what it asked for
        return
    if kind == "audit":
        from copyprobe.audit import SETTINGS, check_audit_rows
    elif kind == "canary":
        from copyprobe.canary.scoring import SETTINGS
    else:
        return
    section = getattr(run.record, kind, None)
    if section is None:
        return
    where = run.dir / "run.json"
    SETTINGS.check_recorded(section, f"{where}: '{kind}")
    if kind == "audit":
        from copyprobe.backends.cutoffs import check_published

        try:
            check_published(section.get("published"))
        except SettingError as exc:
            raise DataError(f"{where}: 'audit.published' {exc.problem}") from None
        check_audit_rows(run.scores or [], run.dir / "scores.jsonl")
    method = section.get("method")
    if run.scores and method is not None and not any(method in row for row in run.scores):
        raise DataError(f"{run.dir / 'scores.jsonl'} has no {method!r} scores: the {_TEST_OF[kind]}'s method "
                        "is not a column of its rows")


_TEST_OF = {"audit": "audit", "canary": "canary test"}
