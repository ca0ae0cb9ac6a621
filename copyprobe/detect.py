"""`detect`: score a dataset with many methods in one pass and write the run record."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from copyprobe import record
from copyprobe.backends.base import Backend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.base import Method
from copyprobe.runner import DriveStats, ProgressFactory
from copyprobe.scoring import build_methods, example_row, load_examples, score_examples, scores_frame, summarize
from copyprobe.session import Session


@dataclass
class DetectResult:
    """What a run produced: ``scores`` (a pandas DataFrame, one row per passage),
    ``metrics`` (when labelled), ``record`` (the run record; ``run`` is it as a dict),
    ``rows`` (the scores.jsonl rows) and ``out`` (the run directory, once written)."""

    scores: Any
    metrics: dict[str, Any] | None
    record: record.RunRecord
    examples: list[Example]
    rows: list[dict[str, Any]]
    out: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def run(self) -> dict[str, Any]:
        return self.record.to_json()

    def write(self, out_dir: str | Path, extra_files: Mapping[str, Any] | None = None) -> Path:
        """Write the run directory (run.json last); ``extra_files`` are added beside it."""
        self.out = record.write_run(out_dir, self.record, {
            "examples.jsonl": (example_row(e) for e in self.examples),
            "scores.jsonl": self.rows,
            "metrics.json": self.metrics,  # None removes an earlier run's metrics
            **dict(extra_files or {}),
        })
        return self.out


def first_passages(examples: list, data_info: dict[str, Any], limit: int | None) -> tuple[list, dict[str, Any]]:
    """The first ``limit`` passages (all with None), and the data record saying so."""
    if limit is None:
        return examples, data_info
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be a positive integer, got {limit!r}")
    if limit >= len(examples):
        return examples, data_info
    return examples[:limit], {**data_info, "limit": limit, "n_before_limit": len(examples)}


def detect(
    model: str | Backend | Session,
    data: Any,
    methods: Sequence[str | Method] | str,
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | Path | None = None,
    cache: bool | str | Path = True,
    batch_size: int = 8,
    device: str = "auto",
    dtype: str = "auto",
    seed: int = 0,
    n_bootstrap: int = 1000,
    blind_baseline: bool = True,
    progress: ProgressFactory | None = None,
    command: list[str] | None = None,
    api_options: Mapping[str, Any] | None = None,
    kind: str = "detect",
    settings: Mapping[str, Any] | None = None,
    limit: int | None = None,
) -> DetectResult:
    """Score ``data`` with ``methods`` on ``model`` and (with ``out``) write the run record.

    ``model``: a model spec (e.g. ``"smollm2-135m-instruct"``), a Backend, or a Session
    (reused and left open). ``data``: a data file path, a Dataset, or a list of texts /
    Examples. ``params``: method name -> {parameter: value}. ``api_options``: for
    ``openai:`` models, e.g. ``{"api_key_env": "MY_KEY", "concurrency": 16}``.
    ``kind``/``settings``: for commands built on detect (audit records kind "audit" and
    its settings, then writes through :meth:`DetectResult.write` with verdicts.json).
    ``limit``: score only the first ``limit`` passages of the data (a quick try-out).
    """
    started = time.perf_counter()
    out_dir = record.prepare_out_dir(out) if out is not None else None
    # methods are checked before the data and the model load: a typo must not cost either
    built = build_methods(methods, params)
    examples, data_info = load_examples(data)
    examples, data_info = first_passages(examples, data_info, limit)
    own_session = not isinstance(model, Session)
    session = Session(
        model, cache=cache, batch_size=batch_size, device=device, dtype=dtype, api_options=api_options
    ) if own_session else model
    try:
        resolved = [method.resolve(session.target_spec) for method in built]
        names = [m.name for m in resolved]
        stats = DriveStats()
        score_start = time.perf_counter()
        rows, train_ids = score_examples(examples, resolved, session.backend_for, seed=seed,
                                         progress=progress, stats=stats)
        score_s = time.perf_counter() - score_start
        target_info, other_models = session.model_info()
        load_s, cache_counts = session.load_s, session.cache_counts()
    finally:
        if own_session:
            session.close()

    notes: list[str] = []
    if data_info.get("n_skipped"):
        notes.append(f"{data_info['n_skipped']} empty rows were skipped")
    sources = {e.id: e.meta["source"] for e in examples if isinstance(e.meta.get("source"), str)}
    metrics, metric_notes = summarize(rows, {e.id: e.text for e in examples}, names, train_ids,
                                      n_bootstrap=n_bootstrap, seed=seed, blind_baseline=blind_baseline,
                                      sources=sources)
    notes.extend(metric_notes)

    run = record.RunRecord(
        kind=kind,
        command=command if command is not None else list(sys.argv),
        model=target_info,
        models=other_models,
        methods={m.name: m.get_params() for m in resolved},
        data=data_info,
        n_passages=len(examples),
        n_tokens=stats.tokens_by_model.get("target", 0),
        timings={"load_s": round(load_s, 3), "score_s": round(score_s, 3),
                 "total_s": round(time.perf_counter() - started, 3)},
        cache=cache_counts,
        requests=stats.as_record(),
        seed=seed,
        bootstrap={"n": n_bootstrap, "seed": seed},
        blind_baseline=blind_baseline,
        train_ids=train_ids,
        failures=[{"id": r["id"], "errors": r["errors"]} for r in rows if r.get("errors")],
        notes=notes,
        **({kind: dict(settings)} if settings is not None else {}),
    )
    result = DetectResult(scores=scores_frame(rows, names), metrics=metrics, record=run, examples=examples,
                          rows=rows, notes=notes)
    if out_dir is not None:
        result.write(out_dir)
    return result
