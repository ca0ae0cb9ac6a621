"""`detect`: score a dataset with many methods in one pass and write the run record."""

from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from copyprobe.backends.base import Backend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.methods.base import Method, Score
from copyprobe.registry import make_method
from copyprobe.runner import DriveStats, Failure, ProgressFactory, drive
from copyprobe import record

AUTO = "auto"
# constructor parameters whose value "auto" means "the default reference model for this target"
AUTO_MODEL_PARAMS = ("model", "reference", "proxies", "paraphraser", "neighbour_model")


@dataclass
class DetectResult:
    """What a run produced: ``scores`` (one row per passage), ``metrics`` (when labelled)
    and ``run`` (the run.json record)."""

    scores: pd.DataFrame
    metrics: dict[str, Any] | None
    run: dict[str, Any]
    out: Path | None = None
    notes: list[str] = field(default_factory=list)


class Session:
    """The target backend plus any other model a method names, each wrapped by the
    response cache; loaded once and reused."""

    def __init__(
        self,
        target: str | Backend,
        *,
        cache: bool | str | Path = True,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "auto",
        loader: Callable[..., Backend] | None = None,
        api_options: Mapping[str, Any] | None = None,
    ):
        from copyprobe.backends.cache import CachedBackend, ResponseCache, default_cache_path

        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self._loader = loader
        # options for OpenAI-compatible backends only (e.g. api_key_env, concurrency)
        self.api_options = dict(api_options or {})
        if cache is True:
            self.cache = ResponseCache(default_cache_path())
        elif cache is False or cache is None:
            self.cache = None
        else:
            self.cache = ResponseCache(cache)
        self._wrap = (lambda b: CachedBackend(b, self.cache)) if self.cache else (lambda b: b)
        start = time.perf_counter()
        raw = target if isinstance(target, Backend) else self._load(target)
        self.load_s = time.perf_counter() - start
        self.target_spec = raw.spec
        self.backends: dict[str | None, Backend] = {None: self._wrap(raw)}

    def _load(self, spec: str) -> Backend:
        if self._loader is not None:
            return self._loader(spec)
        from copyprobe.backends.specs import load_backend

        options = self.api_options if spec.startswith("openai:") else {}
        return load_backend(spec, device=self.device, dtype=self.dtype, batch_size=self.batch_size, **options)

    def backend_for(self, spec: str | None) -> Backend:
        if spec == self.target_spec:
            spec = None
        if spec not in self.backends:
            start = time.perf_counter()
            self.backends[spec] = self._wrap(self._load(spec))
            self.load_s += time.perf_counter() - start
        return self.backends[spec]

    @property
    def target(self) -> Backend:
        return self.backends[None]

    def cache_counts(self) -> dict[str, Any]:
        hits = sum(getattr(b, "hits", 0) for b in self.backends.values())
        misses = sum(getattr(b, "misses", 0) for b in self.backends.values())
        return {"path": str(self.cache.path) if self.cache else None, "hits": hits, "misses": misses}


def default_reference(target_spec: str) -> str:
    from copyprobe.backends.specs import default_reference as resolve

    return resolve(target_spec)


def build_methods(
    methods: Sequence[str | Method] | str,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    target_spec: str | None = None,
) -> list[Method]:
    """Method objects from names (or instances), with parameters and `auto` models resolved."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not methods:
        raise ConfigError("no methods given (run `copyprobe methods` to list them)")
    params = dict(params or {})
    built: list[Method] = []
    for item in methods:
        method = item if isinstance(item, Method) else make_method(item, **params.pop(item, {}))
        if target_spec is not None:
            for name in AUTO_MODEL_PARAMS:
                if name in method.param_names() and getattr(method, name) == AUTO:
                    method.set_params(**{name: default_reference(target_spec)})
        built.append(method)
    if params:
        raise ConfigError(f"--param names method {next(iter(params))!r}, which is not in --methods")
    names = [m.name for m in built]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ConfigError(f"method {sorted(duplicated)[0]!r} given twice")
    return built


def load_examples(data: Any) -> tuple[list[Example], dict[str, Any]]:
    """Examples and a data description from a path, a Dataset, or a list of texts/Examples."""
    from copyprobe.data.readers import Dataset, load_dataset

    if isinstance(data, (str, Path)):
        data = load_dataset(data)
    if isinstance(data, Dataset):
        info = {
            "path": str(data.path),
            "sha256": data.sha256,
            "n_rows": data.n_rows,
            "n_skipped": data.n_skipped,
            "columns": data.columns,
        }
        return list(data.examples), info
    examples = [
        item if isinstance(item, Example) else Example(id=str(i), text=str(item))
        for i, item in enumerate(data)
    ]
    if not examples:
        raise DataError("no passages to score")
    return examples, {"path": None, "sha256": None, "n_rows": len(examples), "n_skipped": 0}


def _train_split(method: Method, examples: list[Example], seed: int) -> list[int]:
    """Seeded, stratified choice of training rows for a learning method."""
    n_train = int(getattr(method, "n_train", 0))
    labelled = [i for i, e in enumerate(examples) if e.label is not None]
    by_class = {c: [i for i in labelled if examples[i].label == c] for c in (0, 1)}
    needed = max(n_train, 2)
    if len(by_class[0]) + len(by_class[1]) < needed + 2 or min(len(v) for v in by_class.values()) < 3:
        raise DataError(
            f"method {method.name!r} trains on labelled data: it needs at least {needed + 2} labelled "
            f"passages with both classes (>= 3 each) to train on {needed} and evaluate the rest; "
            f"the data has {len(by_class[1])} members and {len(by_class[0])} non-members"
        )
    rng = random.Random(f"{seed}:{method.name}")
    chosen: list[int] = []
    total = len(by_class[0]) + len(by_class[1])
    for cls, rows in sorted(by_class.items()):
        # stratified, with at least 2 per class to fit on and at least 1 left to evaluate
        share = max(2, round(needed * len(rows) / total))
        chosen += rng.sample(rows, min(share, len(rows) - 1))
    return sorted(chosen)


def score_examples(
    examples: list[Example],
    methods: list[Method],
    session: Session,
    *,
    seed: int = 0,
    progress: ProgressFactory | None = None,
    stats: DriveStats | None = None,
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Run every method over every example. Returns per-example rows and the ids each
    learning method trained on."""
    stats = stats if stats is not None else DriveStats()
    runs = {(i, m): method.run(example) for m, method in enumerate(methods) for i, example in enumerate(examples)}
    kwargs = {"progress": progress} if progress else {}
    results = drive(runs, session.backend_for, stats=stats, **kwargs)

    rows: list[dict[str, Any]] = []
    for example in examples:
        row: dict[str, Any] = {"id": example.id}
        if example.doc_id is not None:
            row["doc_id"] = example.doc_id
        if example.label is not None:
            row["label"] = example.label
        rows.append(row)
    train_ids: dict[str, list[str]] = {}

    for m, method in enumerate(methods):
        outputs = [results[(i, m)] for i in range(len(examples))]
        if method.trains:
            ok = [i for i, o in enumerate(outputs) if not isinstance(o, Failure)]
            train_rows = _train_split(method, [examples[i] for i in ok], seed)
            train_rows = [ok[i] for i in train_rows]
            method.fit([outputs[i] for i in train_rows], [examples[i].label for i in train_rows])
            predicted = method.predict([outputs[i] for i in ok])
            for i, value in zip(ok, predicted):
                outputs[i] = value
            train_ids[method.name] = [examples[i].id for i in train_rows]
            for i in train_rows:
                rows[i].setdefault("train", []).append(method.name)
        for row, output in zip(rows, outputs):
            _put_score(row, method.name, output)
    return rows, train_ids


def _put_score(row: dict[str, Any], name: str, output: Any) -> None:
    if isinstance(output, Failure):
        row[name] = None
        row.setdefault("errors", {})[name] = output.reason
        return
    details = None
    if isinstance(output, Score):
        value, details = output.value, output.details
    else:
        value = output
    try:
        value = float(value)
    except (TypeError, ValueError):
        row[name] = None
        row.setdefault("errors", {})[name] = f"method returned a non-number: {value!r}"
        return
    if not math.isfinite(value):
        row[name] = None
        row.setdefault("errors", {})[name] = f"score is {value}"
        return
    row[name] = value
    if details:
        row.setdefault("details", {})[name] = details


def scores_frame(rows: list[dict[str, Any]], method_names: Iterable[str]) -> pd.DataFrame:
    columns = ["id", "doc_id", "label", *method_names]
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame:
            frame[column] = None
    return frame


def compute_metrics(
    frame: pd.DataFrame,
    method_names: list[str],
    train_ids: Mapping[str, Iterable[str]] | None = None,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Metrics from a scores frame (also used to recompute them from a saved run)."""
    from copyprobe.evaluation.metrics import evaluate

    if "label" not in frame or frame["label"].isna().all():
        return None
    exclude = {name: set(ids) for name, ids in (train_ids or {}).items()}
    return evaluate(frame, method_names, n_bootstrap=n_bootstrap, seed=seed, exclude=exclude)


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
) -> DetectResult:
    """Score ``data`` with ``methods`` on ``model`` and (with ``out``) write the run record.

    ``model``: a model spec (e.g. ``"smollm2-135m-instruct"``), a Backend, or a Session.
    ``data``: a data file path, a Dataset, or a list of texts / Examples.
    ``params``: method name -> {parameter: value}.
    ``api_options``: for ``openai:`` models, e.g. ``{"api_key_env": "MY_KEY", "concurrency": 16}``.
    """
    started = time.perf_counter()
    out_dir = record.prepare_out_dir(out) if out is not None else None
    examples, data_info = load_examples(data)
    # methods are checked before the model loads: a typo must not cost a model load
    build_methods(methods, params)
    session = model if isinstance(model, Session) else Session(
        model, cache=cache, batch_size=batch_size, device=device, dtype=dtype, api_options=api_options
    )
    built = build_methods(methods, params, target_spec=session.target_spec)
    names = [m.name for m in built]

    stats = DriveStats()
    score_start = time.perf_counter()
    rows, train_ids = score_examples(examples, built, session, seed=seed, progress=progress, stats=stats)
    score_s = time.perf_counter() - score_start

    frame = scores_frame(rows, names)
    notes: list[str] = []
    if data_info.get("n_skipped"):
        notes.append(f"{data_info['n_skipped']} empty rows were skipped")
    metrics = None
    labels = {e.label for e in examples if e.label is not None}
    if not labels:
        notes.append("no labels: metrics skipped")
    elif len(labels) == 1:
        notes.append(f"all labelled passages have label {labels.pop()}: metrics need both classes, skipped")
    else:
        metrics = compute_metrics(frame, names, train_ids, n_bootstrap=n_bootstrap, seed=seed)
        if blind_baseline and metrics is not None:
            _add_blind_baseline(metrics, examples, seed)
        if metrics is not None:
            notes.extend(metrics.get("notes", []))

    run = {
        "copyprobe_version": record.versions().get("copyprobe"),
        "command": command if command is not None else list(sys.argv),
        "created": record.utc_now(),
        "model": session.target.info(),
        "models": {spec: b.info() for spec, b in session.backends.items() if spec is not None},
        "methods": {m.name: m.get_params() for m in built},
        "data": data_info,
        "versions": record.versions(),
        "n_passages": len(examples),
        "n_tokens": stats.tokens_by_model.get("target", 0),
        "timings": {
            "load_s": round(session.load_s, 3),
            "score_s": round(score_s, 3),
            "total_s": round(time.perf_counter() - started, 3),
        },
        "cache": session.cache_counts(),
        "requests": {
            "rounds": stats.rounds,
            "total": stats.requests_total,
            "unique": stats.requests_unique,
            "by_model_kind": stats.by_model_kind,
            "tokens_by_model": stats.tokens_by_model,
            "failed": stats.failed_requests,
        },
        "seed": seed,
        "bootstrap": {"n": n_bootstrap, "seed": seed},
        "train_ids": train_ids,
        "failures": [
            {"id": r["id"], "errors": r["errors"]} for r in rows if r.get("errors")
        ],
        "notes": notes,
    }
    if out_dir is not None:
        write_run(out_dir, examples, rows, metrics, run)
    return DetectResult(scores=frame, metrics=metrics, run=run, out=out_dir, notes=notes)


def _add_blind_baseline(metrics: dict[str, Any], examples: list[Example], seed: int) -> None:
    """Model-free classifier on the texts alone: a guard against member/non-member shift."""
    try:
        from copyprobe.evaluation.blind import blind_baseline, blind_warning
    except ImportError:  # the guard is optional when scikit-learn extras are missing
        return
    labelled = [e for e in examples if e.label is not None]
    groups = [e.doc_id for e in labelled] if all(e.doc_id is not None for e in labelled) else None
    blind = blind_baseline([e.text for e in labelled], [e.label for e in labelled], groups=groups, seed=seed)
    aucs = [v["auc"] for v in metrics.get("passage", {}).values() if v.get("auc") is not None]
    best = max(aucs) if aucs else None
    warning = blind_warning(blind.get("auc"), best)
    blind["warning"] = warning
    metrics["blind_baseline"] = blind
    if warning:
        metrics.setdefault("notes", []).append(warning)


def write_run(
    out_dir: Path,
    examples: list[Example],
    rows: list[dict[str, Any]],
    metrics: dict[str, Any] | None,
    run: dict[str, Any],
) -> None:
    record.write_jsonl(out_dir / "examples.jsonl", (_example_row(e) for e in examples))
    record.write_jsonl(out_dir / "scores.jsonl", rows)
    if metrics is not None:
        record.write_json(out_dir / "metrics.json", metrics)
    else:
        # a rerun into the same directory must not leave an earlier run's metrics behind
        (out_dir / "metrics.json").unlink(missing_ok=True)
    record.write_json(out_dir / "run.json", run)


def _example_row(example: Example) -> dict[str, Any]:
    row: dict[str, Any] = {"id": example.id, "text": example.text}
    if example.doc_id is not None:
        row["doc_id"] = example.doc_id
    if example.label is not None:
        row["label"] = example.label
    return row
