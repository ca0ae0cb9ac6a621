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
from copyprobe.kinds import KINDS, check_kind


def rescore(run_dir: str | os.PathLike, *, n_bootstrap: int | None = None,
            inputs: Mapping[str, Any] | None = None) -> record.Run:
    """Recompute and rewrite the derived files of ``run_dir``; ``n_bootstrap`` overrides
    the recorded number of resamples; ``inputs``: where inputs that derive reads are now,
    when they moved since the run (``{"kit": DIR}`` for a canary test). Returns the run as
    read back."""
    # before the run is read as its kind: a relabelled run would be recomputed as what it is not
    check_kind(run_dir)
    with record.holding(run_dir):  # a run writing there meanwhile would mix its files with these
        return _rescore(run_dir, n_bootstrap, inputs)


def _rescore(run_dir: str | os.PathLike, n_bootstrap: int | None, inputs: Mapping[str, Any] | None) -> record.Run:
    run = record.load_run(run_dir, derived=False)  # rewritten below: a damaged one is no obstacle
    kind = KINDS.get(run.record.kind)
    if kind is None:
        raise DataError(f"{run.dir} is a {run.record.kind!r} run: rescore recomputes "
                        f"{', '.join(KINDS)} runs")
    if (inputs or {}).get("kit") is not None and kind.name != "canary":
        # a kit given to another kind of run would be ignored: said, not silently dropped
        raise SettingError("kit", f"does not apply: {run.dir} is a {kind.name} run; only a canary test reads a kit")
    if kind.check_recorded is not None:
        # a hand-edited run directory is read as strictly as the command line
        kind.check_recorded(run)
    run.inputs = dict(inputs or {})
    rewrite_derived(run, derive_run(kind, run, n_bootstrap=n_bootstrap))
    return record.load_run(run.dir)
