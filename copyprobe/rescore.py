"""`rescore`: recompute everything after the model calls from a saved run directory.

Metrics (with bootstrap CIs and the blind baseline), audit verdicts and copying metrics
are pure functions of what the run record holds, so this loads no model and makes no
model call: a run can be re-evaluated (or re-reported) anywhere, years later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from copyprobe import record
from copyprobe.errors import DataError
from copyprobe.scoring import summarize


def rescore(run_dir: str | os.PathLike, *, n_bootstrap: int | None = None) -> record.Run:
    """Recompute and rewrite the derived files of ``run_dir`` (metrics.json, and
    verdicts.json for audits); ``n_bootstrap`` overrides the recorded number of
    resamples. Returns the run as read back."""
    run = record.load_run(run_dir)
    rec = run.record
    files: dict[str, Any] = {}
    if rec.kind in ("detect", "audit"):
        if run.examples is None:
            raise DataError(f"{run.dir / 'examples.jsonl'} is missing: the texts are needed for the blind baseline")
        texts = {str(e.get("id")): e.get("text", "") for e in run.examples}
        boot = rec.bootstrap or {}
        used = int(boot.get("n", 1000) if n_bootstrap is None else n_bootstrap)
        # run.json says how many resamples the metrics beside it used (issue 27: it kept the old N)
        rec.bootstrap = {**boot, "n": used, "seed": int(boot.get("seed", rec.seed or 0))}
        metrics, _notes = summarize(
            run.scores or [], texts, list(rec.methods), rec.train_ids,
            n_bootstrap=used,
            seed=int(boot.get("seed", rec.seed or 0)),
            blind_baseline=rec.blind_baseline is not False,
            sources={str(e.get("id")): e["source"] for e in run.examples if isinstance(e.get("source"), str)},
        )
        files["metrics.json"] = metrics
        if rec.kind == "audit":
            from copyprobe.evaluation.verdicts import audit_verdicts

            settings = rec.audit or {}
            if "method" not in settings or "alpha" not in settings:
                raise DataError(f"{run.dir / 'run.json'} has no audit method and alpha to recompute verdicts from")
            files["verdicts.json"] = audit_verdicts(run.scores or [], settings["method"], rec.train_ids,
                                                    float(settings["alpha"]), texts,
                                                    test=str(settings.get("test", "rank")))
    elif rec.kind == "copying":
        from copyprobe.copying.runner import CopyConfig, compute_metrics

        if run.results is None or not rec.copying:
            raise DataError(f"{run.dir} lacks results.jsonl or the copying settings in run.json")
        config = CopyConfig.from_description(rec.copying)
        if n_bootstrap is not None:
            config.n_bootstrap = n_bootstrap
            rec.copying = {**rec.copying, "n_bootstrap": n_bootstrap}
        files["metrics.json"] = compute_metrics(run.results, config)
    else:
        raise DataError(f"{run.dir} is a {rec.kind!r} run: rescore recomputes detect, audit and copying runs")
    for name, content in files.items():
        path = Path(run.dir) / name
        if content is None:
            path.unlink(missing_ok=True)
        else:
            record.write_json(path, content)
    record.write_json(Path(run.dir) / "run.json", rec.to_json())  # last, as write_run does
    return record.load_run(run.dir)
