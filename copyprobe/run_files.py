"""The files of a run directory, their shapes, and the one validating reader.

Every file that copyprobe reads back from a run or plant directory (run.json,
scores.jsonl, examples.jsonl, metrics.json, verdicts.json, results.jsonl,
canary.json, plant.json) goes through :func:`read_checked`: it parses the file and
holds it against the shape declared here, so a hand-edited file, a file from another
tool or one from a damaged disk is one :class:`DataError` line naming the file and
the field (``metrics.json: 'passage' must be an object, got a list``), never a
traceback further down. A missing key is an error, never read as null.

Shapes say what the readers rely on and leave the rest open: a newer writer may add
keys, and a key this version does not know passes unread.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any, Callable

from copyprobe.errors import DataError
from copyprobe.files import read_json, read_jsonl


class _Bad(Exception):
    """A value that does not fit its shape: where (a key path) and what is wrong."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem)
        self.where, self.problem = where, problem


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


Shape = Callable[[Any, str], None]  # raises _Bad(where, problem)


def _join(where: str, key: Any) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key}" if where else str(key))


def _in_float_range(value: Any, where: str) -> None:
    # json reads a 400-digit literal as an int that float() cannot hold, and 1e400 as inf
    if isinstance(value, float) and not math.isfinite(value):
        raise _Bad(where, f"must be a finite number, got {value}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        raise _Bad(where, f"is a number beyond the float range ({len(str(abs(value)))} digits)")


def ANY(value: Any, where: str) -> None:
    """Anything JSON holds, with every number inside in float range."""
    if isinstance(value, dict):
        for key, item in value.items():
            ANY(item, _join(where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            ANY(item, _join(where, i))
    else:
        _in_float_range(value, where)


def _type(expected: tuple[type, ...], name: str) -> Shape:
    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) and bool not in expected or not isinstance(value, expected):
            raise _Bad(where, f"must be {name}, got {_kind(value)}")
        ANY(value, where)
    return check


NUM = _type((int, float), "a number")
INT = _type((int,), "an integer")
STR = _type((str,), "a string")
BOOL = _type((bool,), "a boolean")
ID = _type((str, int), "a string or an integer")


def opt(shape: Shape) -> Shape:
    """null, or ``shape``."""
    def check(value: Any, where: str) -> None:
        if value is not None:
            shape(value, where)
    return check


def one_of(*choices: Any) -> Shape:
    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or value not in choices:
            raise _Bad(where, f"must be one of {', '.join(map(repr, choices))}, got {value!r}"[:200])
    return check


def at_least(shape: Shape, low: float) -> Shape:
    def check(value: Any, where: str) -> None:
        shape(value, where)
        if value < low:
            raise _Bad(where, f"must be at least {low}, got {value}")
    return check


def lst(item: Shape = ANY) -> Shape:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise _Bad(where, f"must be a list, got {_kind(value)}")
        for i, element in enumerate(value):
            item(element, _join(where, i))
    return check


def obj(required: dict[str, Shape] | None = None, optional: dict[str, Shape] | None = None,
        rest: Shape = ANY) -> Shape:
    """An object with these keys (``rest`` checks the others)."""
    required, optional = required or {}, optional or {}

    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _Bad(where, f"must be an object, got {_kind(value)}")
        for key, shape in required.items():
            if key not in value:
                raise _Bad(_join(where, key), "is missing")
        for key, item in value.items():
            shape = required.get(key) or optional.get(key) or rest
            shape(item, _join(where, key))
    return check


def dict_of(item: Shape) -> Shape:
    return obj(rest=item)


# ------------------------------------------------------------------ the shapes of a run

_METRIC_BLOCK = obj(optional={"n": opt(INT), **{k: opt(NUM) for k in (
    "auc", "auc_low", "auc_high", "tpr_at_1pct_fpr", "tpr_at_5pct_fpr")}})

METRICS = obj(required={"passage": dict_of(_METRIC_BLOCK)}, optional={
    "document": dict_of(_METRIC_BLOCK),
    "blind_baseline": obj(optional={"auc": opt(NUM), "auc_low": opt(NUM), "auc_high": opt(NUM), "n": opt(INT),
                                    "warning": opt(STR), "no_signal": opt(STR)}),
    "notes": lst(STR),
})
# task -> its block: numbers or null, as compute_metrics writes, and the fluency block
# "baseline": the same metrics on unseen text and the differences with their CIs (nested)
COPYING_METRICS = obj(optional={"baseline": obj()},
                      rest=obj(optional={"fluency": dict_of(opt(NUM)), "event_rate_bounds": opt(lst(opt(NUM)))},
                               rest=opt(NUM)))

# verdicts.json: format 2 (copyprobe.evaluation.verdicts) and the older layouts the report
# still reads (the audit's "score"/"mann_whitney_p", the report's own "mean_score"/...)
_STANDING = obj(optional={"rank": opt(INT), "of": opt(INT), "p": opt(NUM), "distance": opt(NUM),
                          "clean_median": opt(NUM), "test": STR, "material": BOOL})
_VERDICT_DOCUMENT = obj(required={"doc_id": ID}, optional={
    "verdict": STR, "reason": opt(STR), "sentence": opt(STR), "n_passages": opt(INT), "n_failed": opt(INT),
    "n_used": opt(INT), "rank": opt(INT), "of": opt(INT), "style": opt(_STANDING), "length": opt(_STANDING),
    "passage_scores": lst(opt(NUM)), **{k: opt(NUM) for k in (
        "score", "score_all_passages", "p", "p_adjusted", "mean_score", "baseline_mean", "baseline_std",
        "welch_p", "mannwhitney_p", "mann_whitney_p")}})
VERDICTS = obj(required={"documents": lst(_VERDICT_DOCUMENT)}, optional={
    "alpha": opt(NUM), "method": STR, "format": INT, "summary": STR, "rule": STR, "notes": lst(STR),
    "test": obj(), "guard": obj(optional={"level": opt(NUM)}), "baseline": obj(), "collection": opt(obj()),
    "baseline_scores": lst(opt(NUM)), "baseline_ids": lst(ID)})

CANARY = obj(required={"method": STR, "alpha": NUM, "p_value": NUM, "canaries": lst(obj(
    required={"index": at_least(INT, 0), "rank": at_least(INT, 1), "n_candidates": at_least(INT, 1),
              "p_value": NUM},
    optional={"n_ties": INT, "n_unscored": INT, "repeat": INT, "published_score": opt(NUM)}))},
    optional={"combined": obj(), "significant": BOOL, "verdict": STR, "reason": STR, "explanation": STR,
              "test": STR, "kit": obj()})

# a canary kit's private/manifest.json (copyprobe.canary.kit): what `canary test` relies on,
# checked after its checksum, so a hand-made manifest with a matching checksum is one line too
KIT_MANIFEST = obj(required={
    "format": STR, "format_version": INT, "style": STR, "repeat": at_least(INT, 1),
    "document": obj(required={"file": STR, "sha256": STR}, optional={"n_chars": at_least(INT, 0)}),
    "canaries": lst(obj(required={"index": at_least(INT, 0), "published": at_least(INT, 0),
                                  "positions": lst(at_least(INT, 0)), "candidates": lst(STR)},
                        optional={"placements": lst(obj())}))},
    optional={"checksum": STR, "n_candidates": at_least(INT, 2), "n_words": opt(at_least(INT, 1)),
              "rng": STR, "normalisation": STR, "placement": STR, "created": STR, "command": lst(STR),
              "versions": dict_of(STR), "source": obj(), "warning": STR})

EXAMPLE = obj(required={"id": ID, "text": STR},
              optional={"doc_id": opt(ID), "label": opt(one_of(0, 1)), "source": STR})

_COPY_TASKS = ("literal", "nonliteral", "qa", "fluency")
_COPY_RESULT_KEYS: dict[str, dict[str, Shape]] = {  # what compute_metrics reads of a row without error
    "literal": {"rouge_l": NUM, "lcs": NUM},
    "nonliteral": {"character_overlap": opt(NUM), "event_copied": opt(BOOL)},
    "qa": {"exact_match": NUM, "f1": NUM, "format_ok": BOOL},
}


def COPY_RESULT(value: Any, where: str) -> None:
    obj(required={"task": one_of(*_COPY_TASKS), "id": ID, "error": opt(STR)},
        optional={"event_overlap": opt(NUM), "fluency": opt(NUM)})(value, where)
    if value["error"] is None:
        obj(required=_COPY_RESULT_KEYS.get(value["task"], {}))(value, where)


def scores_row(methods: list[str]) -> Shape:
    """A scores.jsonl row: every method's score present, a number or null (failures say why in ``errors``)."""
    return obj(required={"id": ID, **{name: opt(NUM) for name in methods}},
               optional={"doc_id": opt(ID), "label": opt(one_of(0, 1)), "train": lst(STR),
                         "errors": dict_of(STR), "details": obj()})


# the kinds a run.json may name: plant here, every engine run kind added as it registers
# (copyprobe.kinds), so a new kind is known to every reader without an edit here
KINDS: list[str] = ["plant"]


def _known_kind(value: Any, where: str) -> None:
    one_of(*KINDS)(value, where)  # read at check time: the registered kinds

RUN = obj(optional={
    "format_version": at_least(INT, 0), "kind": _known_kind, "command": lst(STR), "created": STR,
    "copyprobe_version": opt(STR), "versions": dict_of(STR), "model": opt(obj()), "models": obj(),
    "methods": dict_of(obj()), "data": obj(), "n_passages": opt(at_least(INT, 0)),
    "n_tokens": opt(at_least(INT, 0)), "timings": dict_of(opt(ANY)), "cache": obj(), "requests": obj(),
    "seed": opt(at_least(INT, 0)), "bootstrap": obj(optional={"n": at_least(INT, 0), "seed": at_least(INT, 0)}),
    "blind_baseline": opt(BOOL), "train_ids": dict_of(lst(ID)), "failures": lst(obj()), "notes": lst(STR),
    "audit": opt(obj(required={"method": STR, "alpha": NUM},
                     optional={"suspect": opt(STR), "clean": opt(STR), "test": one_of("rank", "t"),
                               "input_files": dict_of(lst(obj())), "limit": opt(INT),
                               "passages_per_document": opt(INT), "guard_test": one_of("rank", "t"),
                               "selection": obj()})),  # tests: evaluation.vocabulary.TESTS, GUARD_TESTS
    "copying": opt(obj(required={"tasks": lst(one_of(*_COPY_TASKS))},
                       optional={"templates": lst(INT), "limit": opt(INT), **{k: opt(NUM) for k in (
                           "literal_threshold", "literal_words", "event_threshold", "character_threshold",
                           "literal_max_tokens", "nonliteral_max_tokens", "qa_max_tokens", "chunk_tokens")}})),
    "mitigation": opt(obj()),
    "canary": opt(obj(required={"method": STR, "alpha": NUM},
                      optional={"kit": STR, "manifest_checksum": opt(STR), "document": opt(STR), "style": STR,
                                "repeat": INT, "n_canaries": INT, "n_candidates": lst(INT),
                                "document_sha256": STR})),
    "plant": opt(obj()),
})

PLANT = obj(required={"format": INT, "status": one_of("training", "done"), "settings_key": STR, "model": STR,
                      "split": obj(required={"n_members": INT, "n_nonmembers": INT, "seed": INT})},
            optional={"losses_eval": dict_of(opt(NUM)), "command": opt(lst(STR)), "created": STR,
                      "base_model": obj(), "corpus": obj(), "training": obj(), "versions": dict_of(STR),
                      "timings": obj(), "steps": INT,
                      "peak_memory": dict_of(opt(at_least(INT, 0)))})

# file name -> (shape of the file, or of each line of a JSON-lines file)
SHAPES: dict[str, Shape] = {
    "run.json": RUN, "examples.jsonl": EXAMPLE, "metrics.json": METRICS, "verdicts.json": VERDICTS,
    "results.jsonl": COPY_RESULT, "canary.json": CANARY, "plant.json": PLANT,
}


def check(value: Any, shape: Shape, path: str | os.PathLike, line: int | None = None) -> Any:
    """``value`` if it fits ``shape``; else one DataError naming the file (and line) and the field."""
    try:
        shape(value, "")
    except _Bad as bad:
        place = f"{path} line {line}" if line is not None else str(path)
        field = f"'{bad.where}' " if bad.where else "the file "
        raise DataError(f"{place}: {field}{bad.problem}") from None
    return value


def read_checked(path: str | os.PathLike, shape: Shape | None = None, *, required: bool = True,
                 what: str = "copyprobe run directory") -> Any:
    """The file at ``path`` parsed and checked against ``shape`` (by default the one
    :data:`SHAPES` declares for its name); None when absent and not ``required``."""
    path = Path(path)
    shape = shape or SHAPES[path.name]
    if path.suffix == ".jsonl":
        rows = read_jsonl(path, required=required, what=what)
        for number, row in enumerate(rows or [], 1):
            check(row, shape, path, number)
        return rows
    value = read_json(path, required=required, what=what)
    return None if value is None else check(value, shape, path)


__all__ = ["KIT_MANIFEST", "SHAPES", "check", "read_checked", "scores_row"]
