"""Scoring passages with methods, and summarising the scores: the steps `detect`,
`audit`, `canary` and `rescore` share.

``score_examples`` runs every method over every example through the runner (one shared
request per text for all logit methods) and fits learning methods on a seeded training
split; ``summarize`` turns the per-passage rows into metrics (with the blind baseline)
and is all that ``copyprobe rescore`` needs, so a saved run gives the same metrics.
"""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.methods.base import Method, Score
from copyprobe.params import comma_items, shown
from copyprobe.registry import make_method
from copyprobe.drive import DriveStats, Failure, OneStep, ProgressFactory, drive


def build_methods(
    methods: Sequence[str | Method] | str,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Method]:
    """Validated method objects from names (or instances) and their parameters."""
    if isinstance(methods, str):
        try:
            methods = comma_items(methods)
        except ValueError as e:
            raise ConfigError(f"methods {shown(methods)}: {e}") from None
    if not methods:
        raise ConfigError("no methods given (run `copyprobe methods` to list them)")
    params = dict(params or {})
    built: list[Method] = []
    for item in methods:
        if isinstance(item, Method):
            item.validate()
            built.append(item)
        else:
            built.append(make_method(item, **params.pop(item, {})))
    if params:
        raise ConfigError(f"parameters are given for method {next(iter(params))!r}, which is not among the methods")
    names = [m.name for m in built]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ConfigError(f"method {sorted(duplicated)[0]!r} given twice")
    return built


def load_examples(data: Any, **read_options: Any) -> tuple[list[Example], dict[str, Any]]:
    """Examples and a data description from a path (read with ``read_options``), a
    Dataset, or a list of texts/Examples."""
    from copyprobe.data.readers import Dataset, load_dataset

    if isinstance(data, (str, Path)):
        data = load_dataset(data, **read_options)
    if isinstance(data, Dataset):
        info = {
            "path": str(data.path),
            "sha256": data.sha256,
            "n_rows": data.n_rows,
            "n_skipped": data.n_skipped,
            "columns": data.columns,
            "files": list(data.files),  # path, bytes and sha256 of every input file
        }
        if data.passage_words is not None:
            info["passage_words"] = data.passage_words
        if data.first_skipped is not None:
            info["first_skipped"] = data.first_skipped
        return list(data.examples), info
    examples = [
        item if isinstance(item, Example) else Example(id=str(i), text=str(item))
        for i, item in enumerate(data)
    ]
    if not examples:
        raise DataError("no passages to score")
    return examples, {"path": None, "sha256": None, "n_rows": len(examples), "n_skipped": 0}


TRAIN_SPLITS = ("passage", "document")


def train_split(method: Method, examples: list[Example], seed: int, by: str = "passage") -> list[int]:
    """Seeded, stratified choice of training rows for a learning method. ``by="document"``
    takes whole documents (every passage of a document, by ``doc_id``; a passage without
    one is its own document), so no document is both trained on and evaluated: with
    passages of one document on both sides a learner can recognise the document instead of
    membership."""
    if by not in TRAIN_SPLITS:
        raise ConfigError(f"train split must be one of {', '.join(TRAIN_SPLITS)}, got {by!r}")
    n_train = int(method.train_size())
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
    if by == "document":
        return _document_split(method, examples, by_class, needed, rng)
    chosen: list[int] = []
    for cls, rows in sorted(by_class.items()):
        # at least 1 left to evaluate
        chosen += rng.sample(rows, min(_class_share(by_class, cls, needed), len(rows) - 1))
    return sorted(chosen)


def _class_share(by_class: dict[int, list[int]], cls: int, needed: int) -> int:
    """Training passages of class ``cls``: stratified, and at least 2 to fit on."""
    return max(2, round(needed * len(by_class[cls]) / sum(len(rows) for rows in by_class.values())))


def _document_split(method: Method, examples: list[Example], by_class: dict[int, list[int]], needed: int,
                    rng: random.Random) -> list[int]:
    """Whole documents per class, in seeded order, until the class's share of ``needed``
    passages (at least 2) is reached, leaving at least one document of each class out."""
    documents: dict[int, dict[str, list[int]]] = {0: {}, 1: {}}
    for cls, rows in by_class.items():
        for i in rows:
            documents[cls].setdefault(examples[i].doc_id or f"\0{examples[i].id}", []).append(i)
    mixed = set(documents[0]) & set(documents[1])
    if mixed:
        raise DataError(f"method {method.name!r}: document {sorted(mixed)[0]!r} has members and non-members; "
                        f"a split by document needs one label per document (or split by passage)")
    if min(len(docs) for docs in documents.values()) < 2:
        raise DataError(
            f"method {method.name!r} trains on whole documents: it needs at least 2 documents of each class "
            f"(one to train on, one to evaluate); the data has {len(documents[1])} member and "
            f"{len(documents[0])} non-member documents")
    chosen: list[int] = []
    for cls, docs in sorted(documents.items()):
        share = _class_share(by_class, cls, needed)
        order = sorted(docs)
        rng.shuffle(order)
        taken = 0
        for name in order[:-1]:  # the last document is always left to evaluate
            if taken >= share:
                break
            chosen += docs[name]
            taken += len(docs[name])
        if taken < 2:
            raise DataError(f"method {method.name!r} trains on whole documents: all but one "
                            f"{'member' if cls else 'non-member'} document hold fewer than 2 passages")
    return sorted(chosen)


def score_examples(
    examples: list[Example],
    methods: list[Method],
    backend_for: Any,
    *,
    seed: int = 0,
    progress: ProgressFactory | None = None,
    stats: DriveStats | None = None,
    train_split_by: str = "passage",
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Run every method over every example. ``backend_for`` is a Session's (spec -> backend).
    Returns per-example rows and the ids each learning method trained on (chosen by
    passage or by whole document, see :func:`train_split`)."""
    plan = ScoringPlan(examples, methods, seed, train_split_by)
    kwargs = {"progress": progress} if progress else {}
    results = drive(plan.runs(), backend_for, stats=stats if stats is not None else DriveStats(), **kwargs)
    return plan.rows(results)


class ScoringPlan:
    """Scoring as collect's two steps: the generators of every (example, method) pair, then
    the scores rows from their results (learning methods fitted on a seeded split)."""

    def __init__(self, examples: list[Example], methods: list[Method], seed: int = 0,
                 train_split_by: str = "passage"):
        self.examples, self.methods, self.seed = examples, methods, seed
        self.train_split_by = train_split_by
        # rows a method takes from the data (ReCaLL's prefix) count as its training rows
        self.held = {m: sorted(set(method.hold_out(examples, seed))) for m, method in enumerate(methods)}
        for method in methods:
            if method.trains:
                # the split reads labels and documents only: data it cannot split is refused
                # before the model runs, not after
                train_split(method, examples, seed, train_split_by)

    def runs(self, rows: Iterable[int] | None = None) -> dict[tuple[int, int], Any]:
        """The runs of every method on the examples at ``rows`` (all by default): generators,
        or :class:`~copyprobe.drive.OneStep` for the methods that ask once (:func:`runner`)."""
        rows = range(len(self.examples)) if rows is None else list(rows)
        examples, runs = self.examples, {}
        for m, method in enumerate(self.methods):
            make = runner(method)  # decided once per method, not per run (8,250 for WikiMIA)
            runs.update({(i, m): make(examples[i]) for i in rows})
        return runs

    def rows(self, results: Mapping[Any, Any]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
        examples, seed = self.examples, self.seed
        rows = [example_row(example, text=False) for example in examples]
        train_ids: dict[str, list[str]] = {}
        for m, method in enumerate(self.methods):
            outputs = [results[(i, m)] for i in range(len(examples))]
            if method.trains:
                ok = [i for i, o in enumerate(outputs) if not isinstance(o, Failure)]
                train_rows = [ok[i] for i in train_split(method, [examples[i] for i in ok], seed,
                                                         self.train_split_by)]
                method.fit([outputs[i] for i in train_rows], [examples[i].label for i in train_rows])
                for i, value in zip(ok, method.predict([outputs[i] for i in ok])):
                    outputs[i] = value
                train_ids[method.name] = [examples[i].id for i in train_rows]
                for i in train_rows:
                    rows[i].setdefault("train", []).append(method.name)
            if self.held[m]:
                train_ids[method.name] = [examples[i].id for i in self.held[m]]
                for i in self.held[m]:
                    rows[i].setdefault("train", []).append(method.name)
            for row, output in zip(rows, outputs):
                put_score(row, method.name, output)
        return rows, train_ids


def runner(method: Method) -> Callable[[Example], Any]:
    """What makes the run the driver takes for ``method`` on an example: its generator
    (``method.run``), or a :class:`~copyprobe.drive.OneStep` where the method keeps
    ``Method.run`` (it asks once and scores), which the driver runs without one."""
    return functools.partial(OneStep, method) if type(method).run is Method.run else method.run


def example_row(example: Example, *, text: bool = True) -> dict[str, Any]:
    """An example as a record row (examples.jsonl with text, scores.jsonl without)."""
    row: dict[str, Any] = {"id": example.id}
    if text:
        row["text"] = example.text
    if example.doc_id is not None:
        row["doc_id"] = example.doc_id
    if text and isinstance(example.meta.get("source"), str):
        row["source"] = example.meta["source"]  # the blind baseline's folds group by it
    if example.label is not None:
        row["label"] = example.label
    return row


def put_score(row: dict[str, Any], name: str, output: Any) -> None:
    """A method's output into a scores row: a finite float, or None with the reason."""
    if type(output) is float and math.isfinite(output):  # most outputs: no details, no checks left
        row[name] = output
        return
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


def scores_frame(rows: list[dict[str, Any]], method_names: Iterable[str]):
    """The rows as a pandas DataFrame: id, doc_id, label, one column per method."""
    import pandas as pd

    columns = ["id", "doc_id", "label", *method_names]
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame:
            frame[column] = None
    return frame


def summarize(
    rows: list[dict[str, Any]],
    texts: Mapping[str, str],
    method_names: list[str],
    train_ids: Mapping[str, Iterable[str]] | None = None,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    blind_baseline: bool = True,
    sources: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, list[str]]:
    """(metrics or None, notes) from scores rows; ``texts`` (id -> text) feed the blind
    baseline. A pure function of the run record: ``rescore`` calls it with what was saved.
    The blind baseline's folds hold whole documents: the ``sources`` (id -> the document a
    passage was cut from) when every labelled row has one, else the doc ids (see
    :func:`copyprobe.evaluation.blind.baseline_inputs`)."""
    from copyprobe.evaluation.metrics import evaluate

    notes: list[str] = []
    labels = {r["label"] for r in rows if r.get("label") is not None}
    if not labels:
        return None, ["no labels: metrics skipped"]
    if len(labels) == 1:
        return None, [f"all labelled passages have label {labels.pop()}: metrics need both classes, skipped"]
    frame = scores_frame(rows, method_names)
    exclude = {name: set(ids) for name, ids in (train_ids or {}).items()}
    metrics = evaluate(frame, method_names, n_bootstrap=n_bootstrap, seed=seed, exclude=exclude)
    if blind_baseline:
        from copyprobe.evaluation.blind import add_blind_baseline, baseline_inputs

        add_blind_baseline(metrics, *baseline_inputs(rows, texts, sources), seed)
    notes.extend(metrics.get("notes", []))
    return metrics, notes
