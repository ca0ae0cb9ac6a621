"""`detect`: score a dataset with many methods in one pass and write the run record.

The run kind ``detect``: collect is :class:`ScoringCollection` (shared with audit and
canary), derive is :func:`derive_metrics`; :func:`copyprobe.engine.execute` runs it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from copyprobe import record
from copyprobe.backends.base import Backend
from copyprobe.data.example import Example
from copyprobe.engine import Chunk, Chunked, Collected, Derived, Executed, RunKind, execute
from copyprobe.errors import DataError
from copyprobe.methods.base import Method
from copyprobe.params import (LIMIT_SETTING, MAX_BOOTSTRAP, SEED_SETTING, Boolean, OneOf, Setting, Settings,
                              n_bootstrap_setting)
from copyprobe.drive import DriveStats, ProgressFactory
from copyprobe.scoring import (
    TRAIN_SPLITS,
    ScoringPlan,
    build_methods,
    example_row,
    load_examples,
    scores_frame,
    summarize,
)
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


@dataclass(frozen=True)
class Unscored:
    """A method's passages without a score in one run, and why (the commonest reason first).
    A copying run counts its parts with it too (copyprobe.copying.summary.unscored): then
    ``method`` names the part, ``unit`` what it counts, ``lost`` what those rows lack and
    ``where`` the file holding every reason."""

    method: str
    n_failed: int
    n_passages: int
    reasons: tuple[tuple[str, int], ...]  # (reason, passages) by count
    unit: str = "passages"
    lost: str = "have no score"
    where: str = "scores.jsonl"

    @property
    def nothing(self) -> bool:
        return self.n_failed == self.n_passages and self.n_passages > 0

    def why(self) -> str:
        top, count = self.reasons[0] if self.reasons else ("no score and no reason recorded", self.n_failed)
        more = len(self.reasons) - 1
        return (f"{top} ({count} of them" + (f"; {more} other reason{'s' * (more > 1)} in {self.where}" if more else "")
                + ")")

    def line(self) -> str:
        if self.nothing:
            return f"{self.method} scored none of {self.n_passages} {self.unit}: {self.why()}"
        return f"{self.method}: {self.n_failed} of {self.n_passages} {self.unit} {self.lost}: {self.why()}"


def unscored(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> list[Unscored]:
    """The one rule for a run that produced nothing: per method, the rows of ``rows``
    (scores.jsonl) with no finite score, counted by the reason recorded in their
    ``errors``. A method with every row unscored produced nothing (:attr:`Unscored.nothing`):
    the command line ends such a run with one error line and exit 2, after writing it; a
    method with some rows unscored is a partial run: exit 0 and one warning line."""
    import math
    from collections import Counter

    out = []
    for method in methods:
        reasons: Counter[str] = Counter()
        failed = 0
        for row in rows:
            value = row.get(method)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                continue
            failed += 1
            reasons[str((row.get("errors") or {}).get(method) or "no score and no reason recorded")] += 1
        if failed:
            out.append(Unscored(method, failed, len(rows), tuple(reasons.most_common())))
    return out


def first_passages(examples: list, data_info: dict[str, Any], limit: int | None) -> tuple[list, dict[str, Any]]:
    """The first ``limit`` passages (all with None; ``limit`` already checked as a setting),
    and the data record saying so."""
    if limit is None or limit >= len(examples):
        return examples, data_info
    return examples[:limit], {**data_info, "limit": limit, "n_before_limit": len(examples)}


def sampled_passages(examples: list, data_info: dict[str, Any], limit: int | None,
                     seed: int) -> tuple[list, dict[str, Any]]:
    """``limit`` passages drawn at random with ``seed``, in data order (all with None), and
    the data record saying so: a labelled file's first passages may all have one label
    (the bundled demo lists its 24 members first), which leaves nothing to compare."""
    from copyprobe.data.sampling import sample_items

    if limit is None or limit >= len(examples):
        return examples, data_info
    return (sample_items(examples, limit, seed),
            {**data_info, "limit": limit, "n_before_limit": len(examples), "limit_sample_seed": seed})


# passages driven at a time when a run has more (see chunked): an audit's documents show
# progress one chunk at a time; a detect run is chunked only when it is big
AUDIT_CHUNK_PASSAGES = 256
DETECT_CHUNK_PASSAGES = 4096

# detect's settings, declared once: the keywords of detect() take their defaults from here,
# detect() checks them here (once), and the command line makes its options from them
SETTINGS = Settings(
    SEED_SETTING,
    n_bootstrap_setting(1000),
    Setting("blind_baseline", True, Boolean(), "also fit the model-free blind baseline"),
    replace(LIMIT_SETTING, help="only N passages of the data, a random sample drawn with the seed and kept in data "
                                "order (a quick try-out)"),
    Setting("train_split", "passage", OneOf(*TRAIN_SPLITS),
            "how a learning method (veilprobe, feature_agg ...) picks its training rows: single passages, "
            "or whole documents so that no document is both trained on and evaluated"),
)


def skipped_rows_note(n: int, first: str | None, where: str = "") -> str:
    """"2 rows with empty or no text were skipped (the first: line 4)", ``where`` before it."""
    return (f"{where}{n} row{'s' if n != 1 else ''} with empty or no text {'were' if n != 1 else 'was'} skipped"
            + (f" (the first: {first})" if first else ""))


class ScoringCollection:
    """collect for the kinds that score passages with methods (detect, audit, canary):
    one generator per (passage, method), then one scores row per passage."""

    def __init__(self, examples: list[Example], methods: list[Method], data_info: dict[str, Any], *,
                 seed: int = 0, n_bootstrap: int = 1000, blind_baseline: bool | None = True,
                 section: tuple[str, Mapping[str, Any]] | None = None, train_split: str = "passage",
                 chunk_passages: int | None = None):
        self.examples, self.methods, self.data_info = examples, methods, data_info
        # passages driven at a time (None: all at once), which bounds the model answers held
        self.chunk_passages = chunk_passages
        self.seed, self.n_bootstrap, self.blind_baseline = seed, n_bootstrap, blind_baseline
        self.train_split = train_split
        self.section = section  # (kind, settings): the kind's settings section of run.json
        self.notes: list[str] = []
        self.data_notes: list[str] = []  # what reading the data warned of (files left out, long rows)
        self.resolved: list[Method] = []
        self.plan_: ScoringPlan | None = None

    def begin(self) -> None:
        """Before the model loads: check the methods against the data (the plan's hold-out
        rows, e.g. ReCaLL's prefix files, and the learning methods' training split), then
        start the blind baseline on a thread: it reads the texts and labels only, and
        derive (:func:`derive_metrics`) takes its result, or computes it when the inputs
        differ. Skipped where derive would skip it (no baseline, fewer than two classes)."""
        # a prefix file that cannot be read or too few rows to train on needs no model to
        # find: said before a load that takes 20 s, by the plan that keeps what it read
        self.plan_ = ScoringPlan(self.examples, self.methods, self.seed, self.train_split)
        if self.blind_baseline is False:
            return
        rows = [example_row(e) for e in self.examples]
        if len({r["label"] for r in rows if r.get("label") is not None}) < 2:
            return
        from copyprobe.evaluation.blind import baseline_inputs, prefetch

        texts = {r["id"]: r["text"] for r in rows}
        sources = {r["id"]: r["source"] for r in rows if isinstance(r.get("source"), str)}
        prefetch(*baseline_inputs(rows, texts, sources), self.seed)

    def choose(self, session: Session) -> list[Method]:
        """The methods, once the model is known (audit's ``auto`` chooses here)."""
        return self.methods

    def plan(self, session: Session) -> dict | Chunked:
        chosen = self.choose(session)
        self.resolved = [method.resolve(session.target_spec) for method in chosen]
        if self.plan_ is not None and chosen is self.methods:
            # checked in begin(); the model-dependent parameters settled now change no rows
            self.plan_.methods = self.resolved
        else:  # methods chosen once the model is known (audit's auto), or no begin()
            self.plan_ = ScoringPlan(self.examples, self.resolved, self.seed, self.train_split)
        if self.chunk_passages is None or len(self.examples) <= self.chunk_passages:
            return self.plan_.runs()
        return chunked(self.plan_, self.chunk_passages)

    def skipped_notes(self) -> list[str]:
        """What the reader left out (rows with no text), for the run's notes."""
        n = self.data_info.get("n_skipped")
        return [skipped_rows_note(n, self.data_info.get("first_skipped"))] if n else []

    def finish(self, results: dict, stats: DriveStats) -> Collected:
        assert self.plan_ is not None
        rows, train_ids = self.plan_.rows(results)
        notes = [*self.data_notes, *self.notes]
        notes.extend(self.skipped_notes())
        if self.train_split == "document" and any(m.trains for m in self.resolved):
            notes.append("learning methods trained on whole documents (train split by document): "
                         "no document is both trained on and evaluated")
        fields: dict[str, Any] = dict(
            methods={m.name: m.get_params() for m in self.resolved},
            data=self.data_info,
            n_passages=len(self.examples),
            n_tokens=stats.tokens_by_model.get("target", 0),
            seed=self.seed,
            bootstrap={"n": self.n_bootstrap, "seed": self.seed},
            blind_baseline=self.blind_baseline,
            train_ids=train_ids,
            failures=[{"id": r["id"], "errors": r["errors"]} for r in rows if r.get("errors")],
            notes=notes,
        )
        if self.section is not None:
            fields[self.section[0]] = dict(self.section[1])
        return Collected(files={"examples.jsonl": [example_row(e) for e in self.examples], "scores.jsonl": rows},
                         record=fields)


def chunked(plan: ScoringPlan, size: int) -> Chunked:
    """The plan's generators in chunks of ``size`` passages in data order (a document's
    passages are contiguous, so documents finish one after another)."""
    examples = plan.examples
    docs = [e.doc_id if e.doc_id is not None else e.id for e in examples]
    last = {doc: i for i, doc in enumerate(docs)}
    chunks = []
    for start in range(0, len(examples), size):
        rows = range(start, min(start + size, len(examples)))
        first_doc, last_doc = docs[rows[0]], docs[rows[-1]]
        chunks.append(Chunk(make=lambda rows=rows: plan.runs(rows), units=len(rows),
                            finished=[d for d in dict.fromkeys(docs[i] for i in rows) if last[d] in rows],
                            current=first_doc if first_doc == last_doc else f"{first_doc} … {last_doc}"))
    return Chunked(chunks, units=len(examples), documents=len(last))


def derive_metrics(run: record.Run) -> Derived:
    """metrics.json (AUCs with bootstrap CIs, the blind baseline) from the scores and texts."""
    rec = run.record
    if run.examples is None:
        raise DataError(f"{run.dir / 'examples.jsonl'} is missing: the texts are needed for the blind baseline")
    texts = {str(e.get("id")): e.get("text", "") for e in run.examples}
    boot = rec.bootstrap or {}
    n_bootstrap = int(boot.get("n", 1000))
    if n_bootstrap > MAX_BOOTSTRAP:  # a hand-edited record, or one from before the bound: read, not recomputed
        raise DataError(f"{run.dir / 'run.json'} asks for {n_bootstrap:,} bootstrap resamples; metrics are "
                        f"recomputed with at most {MAX_BOOTSTRAP:,} (give a number of resamples)")
    metrics, notes = summarize(
        run.scores or [], texts, list(rec.methods), rec.train_ids,
        n_bootstrap=n_bootstrap,
        seed=int(boot.get("seed", rec.seed or 0)),
        blind_baseline=rec.blind_baseline is not False,
        sources={str(e.get("id")): e["source"] for e in run.examples if isinstance(e.get("source"), str)},
    )
    return Derived({"metrics.json": metrics}, notes)


def resample(rec: record.RunRecord, n_bootstrap: int | None) -> None:
    """run.json says how many resamples the metrics beside it used (issue 27: it kept the old N)."""
    boot = rec.bootstrap or {}
    used = int(boot.get("n", 1000) if n_bootstrap is None else n_bootstrap)
    rec.bootstrap = {**boot, "n": used, "seed": int(boot.get("seed", rec.seed or 0))}


KIND = RunKind("detect", {"examples.jsonl": True, "scores.jsonl": True, "metrics.json": False},
               derive_metrics, resample)


@record.discards_new_out_dir  # a run refused after making its directory leaves none behind
def detect(
    model: str | Backend | Session,
    data: Any,
    methods: Sequence[str | Method] | str,
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | Path | None = None,
    cache: bool | str | Path = True,
    batch_size: int | str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    seed: int = SETTINGS.default("seed"),
    n_bootstrap: int = SETTINGS.default("n_bootstrap"),
    blind_baseline: bool = SETTINGS.default("blind_baseline"),
    progress: ProgressFactory | bool | None = None,
    command: list[str] | None = None,
    api_options: Mapping[str, Any] | None = None,
    limit: int | None = SETTINGS.default("limit"),
    read_options: Mapping[str, Any] | None = None,
    train_split: str = SETTINGS.default("train_split"),
) -> DetectResult:
    """Score ``data`` with ``methods`` on ``model`` and (with ``out``) write the run record.

    ``model``: a model spec (e.g. ``"smollm2-135m-instruct"``), a Backend, or a Session
    (reused and left open). ``data``: a data file path, a Dataset, or a list of texts /
    Examples. ``params``: method name -> {parameter: value}. ``api_options``: for
    ``openai:`` models, e.g. ``{"api_key_env": "MY_KEY", "concurrency": 16, "request_timeout": 30}``.
    ``limit``: score only ``limit`` passages of the data, a random sample drawn with
    ``seed`` and kept in data order (a quick try-out).
    ``read_options``: how a data file is read (text_column, label_column, doc_column,
    id_column, split, passage_words; see :func:`copyprobe.load_dataset`).
    ``train_split``: ``"passage"`` or ``"document"``, how learning methods choose the
    labelled rows they train on (see :func:`copyprobe.scoring.train_split`).
    ``progress``: True for progress bars on stderr; None or False for none (the default);
    or a factory ``(label, total) -> tick(n)`` of your own.
    """
    started = time.perf_counter()
    SETTINGS.check({"seed": seed, "n_bootstrap": n_bootstrap, "blind_baseline": blind_baseline, "limit": limit,
                    "train_split": train_split})
    # methods are checked before the output, the data and the model: a typo must not cost any
    built = build_methods(methods, params)
    if out is not None:
        record.prepare_out_dir(out, "detect", model)
    from copyprobe.data.readers import said_while_reading  # (the readers' imports wait for a read)

    with said_while_reading() as said:
        examples, data_info = load_examples(data, **{k: v for k, v in dict(read_options or {}).items()
                                                     if v is not None})
    examples, data_info = sampled_passages(examples, data_info, limit, seed)
    collection = ScoringCollection(examples, built, data_info, seed=seed, n_bootstrap=n_bootstrap,
                                   blind_baseline=blind_baseline, train_split=train_split,
                                   chunk_passages=DETECT_CHUNK_PASSAGES)
    collection.data_notes = said
    done = execute(KIND, model, collection, out=out, cache=cache, batch_size=batch_size, device=device,
                   dtype=dtype, api_options=api_options, progress=progress, command=command, started=started)
    return scored_result(done, collection)


def check_method_column(run: record.Run, method: Any, what: str) -> None:
    """A saved run's scores hold its recorded ``method``: one that is no column would leave
    every verdict 'cannot tell' (``what`` names the run's test in the message)."""
    if run.scores and method is not None and not any(method in row for row in run.scores):
        raise DataError(f"{run.dir / 'scores.jsonl'} has no {method!r} scores: the {what}'s method "
                        "is not a column of its rows")


def scored_result(done: Executed, collection: ScoringCollection) -> DetectResult:
    """The DetectResult of an executed scoring run."""
    rows = done.files["scores.jsonl"]
    return DetectResult(scores=scores_frame(rows, [m.name for m in collection.resolved]),
                        metrics=done.files.get("metrics.json"), record=done.record,
                        examples=collection.examples, rows=rows, out=done.out, notes=done.record.notes)
