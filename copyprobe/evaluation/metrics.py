"""Membership-inference metrics: AUC, TPR at low FPR, bootstrap intervals, documents.

Labels are 1 = member, 0 = non-member; scores are higher = more likely a member.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import auc, precision_recall_fscore_support, roc_curve

from copyprobe.errors import ConfigError, DataError

Metric = Callable[[np.ndarray, np.ndarray], float]

# more single-class resamples than this fraction and the interval is not reported: the
# surviving resamples would no longer describe the sampling distribution
MAX_DEGENERATE_FRACTION = 0.1
# cells of the (resamples x rows) weight matrix handled at once by the fast AUC path
_CHUNK_CELLS = 4_000_000
# resamples x groups cells up to which the seeded draw is kept whole and shared by every
# method of a run (64 MB as int32); above, each method draws it a chunk at a time and
# keeps none: 200,000 passages take about 150 MiB a method, not the 4.6 GB of a whole draw
_KEEP_CELLS = 16_000_000
# columns (resamples) from which _prefix_sums adds row by row (the two ways break even at
# about 256 here: 0.58 against 0.56 ms for 825 rows)
_ROW_BY_ROW = 256
# threads computing the methods' metrics at once (one method each), where the bootstrap
# has at least THREADED_CELLS (rows x resamples) a method: below, starting them and
# sharing the GIL (roc_curve's checks are Python) cost more than they save (5 methods on
# 2 cores, 1,000 resamples: 1,650 rows 34 ms serial, 37 threaded; 3,300 rows 51 and 47)
MAX_METRIC_THREADS = 8
THREADED_CELLS = 2_500_000


def _first(values: np.ndarray) -> Any:
    # a plain Python value, so messages read "2", not "np.int64(2)"
    v = values[0]
    return v.item() if isinstance(v, np.generic) else v


def _arrays(labels: Any, scores: Any, what: str = "scores") -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=float)
    if y.ndim != 1 or s.ndim != 1 or len(y) != len(s):
        raise ValueError(f"labels and {what} must be 1-d and of equal length, "
                         f"got shapes {y.shape} and {s.shape}")
    bad = ~np.isin(y, (0, 1))
    if bad.any():
        raise DataError(f"labels must be 0 or 1, got {_first(y[bad])!r}")
    if np.isnan(s).any():
        raise DataError(f"{what} contain NaN at position {int(np.flatnonzero(np.isnan(s))[0])}; "
                        f"leave those rows out")
    if np.isinf(s).any():
        # scikit-learn's curves refuse infinities with a ValueError of their own, and the
        # bootstrap would rank them; one rule for every function here
        raise DataError(f"{what} contain an infinite value at position "
                        f"{int(np.flatnonzero(np.isinf(s))[0])}; leave those rows out")
    return y.astype(int), s


def _need_both(y: np.ndarray) -> None:
    if len(np.unique(y)) < 2:
        only = "none" if len(y) == 0 else f"only label {int(y[0])}"
        raise DataError(f"AUC needs both members (1) and non-members (0), got {only}")


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve (ties count one half)."""
    y, s = _arrays(labels, scores)
    _need_both(y)
    # roc_auc_score's binary case is exactly this (sklearn's _binary_roc_auc_score: the
    # trapezoids under roc_curve); called directly it skips the label checks _arrays and
    # _need_both made: 0.6 ms instead of 1.7 for 1,650 rows, the same value bit for bit
    fprs, tprs, _ = roc_curve(y, s)
    return float(auc(fprs, tprs))


def tpr_at_fpr(labels: Sequence[int], scores: Sequence[float], fpr: float) -> float:
    """The largest true-positive rate on the ROC curve whose false-positive rate <= ``fpr``.

    Every threshold is kept (``drop_intermediate=False``) so no operating point is lost.
    """
    return tprs_at_fprs(labels, scores, (fpr,))[0]


def tprs_at_fprs(labels: Sequence[int], scores: Sequence[float], fprs: Sequence[float]) -> list[float]:
    """:func:`tpr_at_fpr` at each of ``fprs``, read off one ROC curve."""
    for fpr in fprs:
        if not 0 <= fpr <= 1:
            raise ConfigError(f"fpr must lie in [0, 1], got {fpr!r}")
    y, s = _arrays(labels, scores)
    _need_both(y)
    curve_fprs, curve_tprs, _ = roc_curve(y, s, drop_intermediate=False)
    # curve_fprs[0] == 0 always, so no selection is empty
    return [float(curve_tprs[curve_fprs <= fpr + 1e-12].max()) for fpr in fprs]


@dataclass(frozen=True)
class BootstrapCI:
    low: float  # NaN when too many resamples were degenerate
    high: float
    n_resamples: int  # resamples drawn
    n_degenerate: int  # resamples with a single class, skipped

    @property
    def ok(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def _group_index(groups: Sequence[Any] | None, n: int) -> tuple[np.ndarray, int]:
    """Map each row to a group number 0..G-1; without groups every row is its own group."""
    if groups is None:
        return np.arange(n), n
    g = pd.Series(list(groups), dtype=object)
    if len(g) != n:
        raise ValueError(f"groups must have one entry per row ({n}), got {len(g)}")
    if g.isna().any():
        raise DataError(f"group (document) ids missing for {int(g.isna().sum())} rows")
    codes, uniques = pd.factorize(g.astype(str))
    return codes, len(uniques)


def _weighted_auc(y: np.ndarray, s: np.ndarray, counts: np.ndarray,
                  codes: np.ndarray) -> np.ndarray:
    """AUC of each resample, given as group counts (resamples x groups) and row->group codes.

    Equals the AUC of the data with row i repeated ``counts[b, codes[i]]`` times: each
    positive beats every lower-scored negative and ties half the equal-scored ones. The
    negatives' weights are summed in score order once for all resamples; each positive
    row reads the sums below and up to its score there. NaN where a resample lacks a class.
    """
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    if len(pos) == 0 or len(neg) == 0:
        return np.full(counts.shape[0], np.nan)
    neg = neg[np.argsort(s[neg], kind="stable")]
    sn, sp = s[neg], s[pos]
    # the negatives strictly below / at most each positive's score: rows of the prefix sums
    lo = np.searchsorted(sn, sp, side="left")
    hi = np.searchsorted(sn, sp, side="right")
    untied = np.array_equal(lo, hi)  # no positive ties a negative: the two reads are one
    out = np.empty(counts.shape[0])
    step = max(1, _CHUNK_CELLS // max(1, len(y)))
    work = _count_dtype(counts, len(pos), len(neg))
    # Rows of the data are gathered as rows of the groups x resamples matrix: whole
    # contiguous rows where the draw is F-ordered (as _draw_counts makes it), 1.6x faster
    # than gathering columns of resamples x groups. Sums of whole numbers are exact in any
    # order, so the AUCs are the same bit for bit whatever the order of the additions (rows
    # of tied scores are no longer summed first: np.add.reduceat along rows took 1-4 ms).
    by_group, rows_p, rows_n = counts.T, codes[pos], codes[neg]
    for a in range(0, counts.shape[0], step):
        c = by_group[:, a:a + step]
        wp = c[rows_p].astype(work, copy=False)
        below_n = _prefix_sums(c[rows_n].astype(work, copy=False), work)
        below = below_n[lo]
        if not untied:
            below += below_n[hi]
        # in the count type: _count_dtype's bound holds for these sums too (every term is
        # non-negative and the total is at most twice the positives' times the negatives'
        # weight); einsum multiplies and sums in one pass, 4x faster than (wp * below).sum
        num = np.einsum("ij,ij->j", wp, below) * (1.0 if untied else 0.5)
        den = np.add.reduce(wp, axis=0, dtype=work).astype(np.int64) * below_n[-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[a:a + step] = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return out


def _prefix_sums(q: np.ndarray, work: type) -> np.ndarray:
    """Rows 0..n of the running sums of ``q``'s rows (row 0 all zeros). Row by row where
    rows are long: np.cumsum along axis 0 adds one element at a time (2.5 ms for 825 x
    1,000 int32, row by row 0.75); below _ROW_BY_ROW columns the loop's calls cost more."""
    out = np.zeros((q.shape[0] + 1, q.shape[1]), dtype=work)
    if q.shape[1] >= _ROW_BY_ROW:
        for i in range(q.shape[0]):
            np.add(out[i], q[i], out=out[i + 1])
    else:
        np.cumsum(q, axis=0, out=out[1:])
    return out


def _count_dtype(counts: np.ndarray, n_pos: int, n_neg: int) -> type:
    """The integer type :func:`_weighted_auc` counts in: int32 where no product it forms
    can overflow it, else int64. Counts are whole numbers, so the sums are exact in either
    (and in float64, which it used before: the same AUCs bit for bit) and int32 arrays are
    half the memory traffic: 13 ms a method instead of 50 for 1,650 rows and 1,000
    resamples. The largest product is a distinct positive score's weight (at most every
    positive row at the largest count) times twice the negatives' total weight."""
    most = int(counts.max(initial=0))
    return np.int32 if 2 * (most * n_pos) * (most * n_neg) < np.iinfo(np.int32).max else np.int64


def _draw_counts(rng: np.random.Generator, n_groups: int, n_resamples: int) -> np.ndarray:
    """How often each group is drawn when drawing n_groups with replacement, per resample
    (resamples x groups, F-ordered: a group's counts lie together for :func:`_weighted_auc`)."""
    draws = rng.integers(0, n_groups, size=(n_resamples, n_groups))
    # counted group-major (cell group * n_resamples + resample), so no transposing copy
    flat = (draws * n_resamples + np.arange(n_resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n_groups).reshape(n_groups, n_resamples).T


@functools.lru_cache(maxsize=4)
def _seeded_counts(seed: int, n_groups: int, n_resamples: int) -> np.ndarray:
    """:func:`_draw_counts` of a fresh generator seeded ``seed``, read-only and kept: every
    method of a run is bootstrapped with the same seed over the same rows, so they share
    one draw (18 ms each for 1,650 rows and 1,000 resamples, more than a method's interval)."""
    counts = _narrowed(_draw_counts(np.random.default_rng(seed), n_groups, n_resamples), n_groups)
    counts.setflags(write=False)
    return counts


def _narrowed(counts: np.ndarray, n_groups: int) -> np.ndarray:
    """``counts`` in int32 where they fit (a count is at most n_groups): what
    :func:`_weighted_auc` counts in, half the memory of int64."""
    return counts.astype(np.int32) if n_groups < np.iinfo(np.int32).max else counts


def _counts_in_chunks(seed: int, n_groups: int, n_resamples: int) -> Iterator[np.ndarray]:
    """The seeded draw of :func:`_seeded_counts`, as consecutive chunks of its resamples:
    the kept matrix where it is small, else drawn a chunk at a time from one generator.
    The chunks are the matrix's rows, in order, number for number: numpy draws the
    resamples one after another whether asked for all at once or a few at a time."""
    if n_groups * n_resamples <= _KEEP_CELLS:
        yield _seeded_counts(seed, n_groups, n_resamples)
        return
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_CELLS // n_groups)
    for start in range(0, n_resamples, step):
        yield _narrowed(_draw_counts(rng, n_groups, min(step, n_resamples - start)), n_groups)


def _resample_values(y: np.ndarray, s: np.ndarray, metric: Metric, counts: np.ndarray,
                     codes: np.ndarray) -> np.ndarray:
    """``metric`` of each resample in ``counts`` (resamples x groups); NaN for one class."""
    if metric is roc_auc:
        return _weighted_auc(y, s, counts, codes)
    weights = counts[:, codes]  # row i appears as often as its group was drawn
    values = np.full(counts.shape[0], np.nan)
    rows = np.arange(len(y))
    for b in range(counts.shape[0]):
        idx = np.repeat(rows, weights[b])
        if len(np.unique(y[idx])) == 2:
            values[b] = metric(y[idx], s[idx])
    return values


def bootstrap_ci(
    labels: Sequence[int],
    scores: Sequence[float],
    metric: Metric = roc_auc,
    *,
    groups: Sequence[Any] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    max_degenerate_fraction: float = MAX_DEGENERATE_FRACTION,
) -> BootstrapCI:
    """Percentile bootstrap interval of ``metric(labels, scores)``.

    With ``groups`` (document ids) whole groups are drawn with replacement, as many as
    there are groups, so passages of one document stay together: they are not
    independent samples. Resamples with a single class are skipped and counted; if more
    than ``max_degenerate_fraction`` of them are, the bounds are NaN. Fewer than two
    groups (or rows) give NaN bounds too, with every resample counted degenerate.

    ``metric=roc_auc`` takes a vectorised path (many resamples at once); any other callable
    is called once per resample. Memory is bounded for any number of rows: a large draw is
    made and used a chunk of resamples at a time. The same seed draws the same resamples, so intervals of
    different methods on the same rows are paired.
    """
    if n_resamples < 1:
        raise ConfigError(f"n_resamples must be at least 1, got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence!r}")
    y, s = _arrays(labels, scores)
    codes, n_groups = _group_index(groups, len(y))
    if n_groups < 2:
        # every resample of one group is that group again: no spread to read an interval from
        return BootstrapCI(math.nan, math.nan, n_resamples, n_resamples)
    values = np.concatenate([_resample_values(y, s, metric, counts, codes)
                             for counts in _counts_in_chunks(int(seed), n_groups, n_resamples)])
    valid = values[~np.isnan(values)]
    n_degenerate = n_resamples - len(valid)
    if len(valid) == 0 or n_degenerate > max_degenerate_fraction * n_resamples:
        return BootstrapCI(math.nan, math.nan, n_resamples, n_degenerate)
    alpha = 1.0 - confidence
    low, high = np.quantile(valid, [alpha / 2, 1 - alpha / 2])
    return BootstrapCI(float(low), float(high), n_resamples, n_degenerate)


def aggregate_documents(
    frame: pd.DataFrame,
    score_columns: Sequence[str],
    *,
    doc_column: str = "doc_id",
    label_column: str = "label",
    how: str = "mean",
) -> pd.DataFrame:
    """One row per document: its label, the ``how`` of each score column over its
    passages (missing scores ignored; NaN when a document has none), and ``n_passages``.

    Without ``label_column`` in the frame only scores are aggregated. Passages of one
    document with different labels raise DataError.
    """
    if how not in ("mean", "median", "max"):
        raise ConfigError(f"how must be 'mean', 'median' or 'max', got {how!r}")
    missing = [c for c in [doc_column, *score_columns] if c not in frame.columns]
    if missing:
        raise DataError(f"column(s) {', '.join(map(repr, missing))} not in the scores; "
                        f"columns: {', '.join(map(str, frame.columns))}")
    if frame[doc_column].isna().any():
        raise DataError(f"{int(frame[doc_column].isna().sum())} rows have no document id in "
                        f"column {doc_column!r}")
    grouped = frame.groupby(doc_column, sort=True)
    out = pd.DataFrame(index=grouped.size().index)
    for c in score_columns:
        out[c] = pd.to_numeric(frame[c], errors="coerce").groupby(frame[doc_column],
                                                                  sort=True).agg(how)
    if label_column in frame.columns:
        n_labels = grouped[label_column].nunique(dropna=False)
        mixed = n_labels[n_labels > 1]
        if len(mixed):
            doc = mixed.index[0]
            values = sorted(map(str, frame.loc[frame[doc_column] == doc, label_column].unique()))
            raise DataError(f"document {doc!r} has passages with different labels "
                            f"({', '.join(values)}); a document is a member or not as a whole"
                            + (f" ({len(mixed)} such documents)" if len(mixed) > 1 else ""))
        out.insert(0, label_column, grouped[label_column].first())
    out["n_passages"] = grouped.size()
    return out.reset_index()


class PRF(NamedTuple):
    precision: float
    recall: float
    fbeta: float


def precision_recall_fbeta(labels: Sequence[int], decisions: Sequence[int],
                           beta: float = 0.1) -> PRF:
    """Precision, recall and F-beta of yes/no membership decisions (1 = "member").

    The small default beta weighs precision far above recall: a false accusation of
    training on a text costs more than a missed one. Undefined ratios (no positive
    decisions, no members) are 0.
    """
    if not beta > 0:
        raise ConfigError(f"beta must be positive, got {beta!r}")
    y = np.asarray(labels)
    d = np.asarray(decisions)
    if len(y) != len(d):
        raise ValueError(f"labels and decisions differ in length ({len(y)} vs {len(d)})")
    for name, arr in (("labels", y), ("decisions", d)):
        bad = ~np.isin(arr, (0, 1))
        if bad.any():
            raise DataError(f"{name} must be 0 or 1, got {_first(arr[bad])!r}")
    p, r, f, _ = precision_recall_fscore_support(y.astype(int), d.astype(int), beta=beta,
                                                 average="binary", pos_label=1,
                                                 zero_division=0.0)
    return PRF(float(p), float(r), float(f))


# -- the metrics.json block ------------------------------------------------------------

def _level(y: np.ndarray, s: np.ndarray, groups: np.ndarray | None, n_bootstrap: int,
           seed: int, label: str, notes: list[str]) -> dict[str, Any]:
    area = roc_auc(y, s)
    tprs = tprs_at_fprs(y, s, (0.01, 0.05))
    low = high = None
    if n_bootstrap > 0:
        ci = bootstrap_ci(y, s, roc_auc, groups=groups, n_resamples=n_bootstrap, seed=seed)
        if ci.ok:
            low, high = ci.low, ci.high
            if ci.n_degenerate:
                notes.append(f"{label}: {ci.n_degenerate} of {ci.n_resamples} bootstrap "
                             f"resamples had one class only and were skipped")
        else:
            notes.append(f"{label}: {ci.n_degenerate} of {ci.n_resamples} bootstrap resamples "
                         f"had one class only; no confidence interval (too few "
                         f"{'documents' if groups is not None else 'rows'})")
    return {
        "auc": area,
        "auc_low": low,
        "auc_high": high,
        "tpr_at_1pct_fpr": tprs[0],
        "tpr_at_5pct_fpr": tprs[1],
        "n": int(len(y)),
    }


def _labels_with_one_unit(labels: np.ndarray, units: np.ndarray | None) -> list[str]:
    """The labels (as text, 1 first) held by a single unit: a document, or a row where
    there are no documents."""
    units = np.arange(len(labels)) if units is None else units
    named = {1: "1 (member; suspect, in an audit)", 0: "0 (non-member; clean, in an audit)"}
    return [named[c] for c in (1, 0) if len(np.unique(units[labels == c])) == 1]


def _one_class_note(level: str, unit: str, y: np.ndarray) -> str:
    if len(y) == 0:
        return f"{level} level: no {unit}; no metrics"
    return (f"{level} level: all {len(y)} {unit} have label {int(y[0])}; AUC and TPR need "
            f"both members and non-members, so no {level} metrics")


def evaluate(
    frame: pd.DataFrame,
    methods: Iterable[str],
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
    exclude: Mapping[str, Iterable[Any]] | None = None,
) -> dict[str, Any]:
    """Build the ``metrics.json`` block from a scores frame.

    ``frame`` has ``id``, ``label``, optionally ``doc_id``, and one score column per
    method. A row with no score (None/NaN/inf) for a method is left out of that method's
    metrics; ``exclude`` maps a method to row ids also left out (its training rows).
    Document scores are the mean of a document's remaining passage scores. With
    documents, passage-level intervals resample documents.

    Returns ``{"passage": {method: {...}}, "document": {...} (only with documents),
    "notes": [...]}``; a bound that cannot be computed is None.
    """
    methods = list(methods)
    exclude = {m: {str(i) for i in ids} for m, ids in (exclude or {}).items()}
    notes: list[str] = []
    has_docs = "doc_id" in frame.columns and frame["doc_id"].notna().any()
    result: dict[str, Any] = {"passage": {}}
    if has_docs:
        result["document"] = {}
    result["notes"] = notes

    if "label" not in frame.columns or frame["label"].isna().all():
        notes.append("no labels; metrics skipped")
        return result
    labels = _checked_labels(frame, methods, bool(exclude), has_docs)
    passage_ok = len(np.unique(labels)) == 2
    if not passage_ok:
        notes.append(_one_class_note("passage", "passages", labels))
    doc_ok = False
    if has_docs:
        docs = aggregate_documents(frame[["doc_id", "label"]], [])  # checks label agreement
        doc_labels = docs["label"].to_numpy().astype(int)
        doc_ok = len(np.unique(doc_labels)) == 2
        if not doc_ok:
            notes.append(_one_class_note("document", "documents", doc_labels))
    if not passage_ok and not doc_ok:
        return result
    if n_bootstrap > 0:
        alone = _labels_with_one_unit(labels, frame["doc_id"].astype(str).to_numpy() if has_docs else None)
        if alone:
            # every resample holding both labels holds that one unit, and about 1/e hold
            # none of it, far above MAX_DEGENERATE_FRACTION: an interval only by chance at a
            # handful of resamples, so none is drawn (an audit of one book printed two notes
            # a method on skipped resamples instead)
            unit = "document" if has_docs else "passage"
            notes.append(f"no confidence intervals: only 1 {unit} has label {' and only 1 has label '.join(alone)}; "
                         f"the bootstrap resamples whole {unit}s and needs at least 2 with each label")
            n_bootstrap = 0

    ids = frame["id"].astype(str).to_numpy() if "id" in frame.columns else None

    def one_method(m: str) -> tuple[dict | None, dict | None, list[str]]:
        own: list[str] = []  # this method's notes, merged in method order below
        passage = document = None
        keep, scores = _scored_rows(frame, m, ids, exclude.get(m), own)
        if passage_ok:
            y, s = labels[keep], scores[keep]
            if len(np.unique(y)) == 2:
                groups = frame["doc_id"].to_numpy()[keep] if has_docs else None
                passage = _level(y, s, groups, n_bootstrap, seed, f"{m} (passage)", own)
            else:
                own.append(f"{m}: the {len(y)} passages left are of one class; no passage "
                           f"metrics")
        if doc_ok:
            document = _document_level(frame, m, keep, scores[keep], n_bootstrap, seed, own)
        return passage, document, own

    # The methods' bootstrap intervals in threads where they are large: numpy's array work
    # releases the GIL, and the intervals are most of derive (2.2 ms a method for 1,650
    # passages and 1,000 resamples)
    large = len(frame) * n_bootstrap >= THREADED_CELLS
    workers = min(len(methods), os.cpu_count() or 1, MAX_METRIC_THREADS) if large else 1
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(one_method, methods))
    else:
        done = [one_method(m) for m in methods]
    for m, (passage, document, own) in zip(methods, done):
        notes.extend(own)
        if passage is not None:
            result["passage"][m] = passage
        if document is not None:
            result["document"][m] = document
    return result


def _checked_labels(frame: pd.DataFrame, methods: list[str], excluding: bool, has_docs: bool) -> np.ndarray:
    """The labels as ints, once the frame is found complete: every row labelled 0 or 1, a
    score column per method, ids when rows are to be left out, a document for every row
    when any has one."""
    if frame["label"].isna().any():
        raise DataError(f"{int(frame['label'].isna().sum())} of {len(frame)} rows have no "
                        f"label; label all rows or none")
    missing = [m for m in methods if m not in frame.columns]
    if missing:
        raise DataError(f"no score column for method(s) {', '.join(missing)}")
    if excluding and "id" not in frame.columns:
        raise DataError("the scores have no 'id' column, needed to leave out training rows")
    if has_docs and frame["doc_id"].isna().any():
        raise DataError(f"{int(frame['doc_id'].isna().sum())} rows have no document id; give "
                        f"every row a document or none")
    labels = frame["label"].to_numpy()
    bad = ~np.isin(labels, (0, 1))
    if bad.any():
        raise DataError(f"labels must be 0 or 1, got {_first(labels[bad])!r}")
    return labels.astype(int)


def _scored_rows(frame: pd.DataFrame, method: str, ids: np.ndarray | None, excluded_ids: set[str] | None,
                 notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(rows that count for ``method``, its scores as floats): rows without a finite score and
    its training rows are left out, each with a note."""
    scores = pd.to_numeric(frame[method], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(scores)
    n_missing = int((~keep).sum())
    if n_missing:
        notes.append(f"{method}: {n_missing} of {len(scores)} passages have no score and are "
                     f"left out")
    if excluded_ids is not None:
        excluded = np.isin(ids, list(excluded_ids))
        if excluded.any():
            notes.append(f"{method}: {int((excluded & keep).sum())} training rows left out")
        keep &= ~excluded
    return keep, scores


def _document_level(frame: pd.DataFrame, method: str, keep: np.ndarray, scores: np.ndarray, n_bootstrap: int,
                    seed: int, notes: list[str]) -> dict[str, Any] | None:
    """Metrics over documents scored by the mean of their kept passages; None (with a note)
    when the documents left are of one class."""
    sub = frame.loc[keep, ["doc_id", "label"]].assign(**{"__score": scores})
    agg = aggregate_documents(sub, ["__score"])
    dy = agg["label"].to_numpy().astype(int)
    ds = agg["__score"].to_numpy(dtype=float)
    if len(np.unique(dy)) != 2:
        notes.append(f"{method}: the {len(dy)} documents left are of one class; no "
                     f"document metrics")
        return None
    return _level(dy, ds, None, n_bootstrap, seed, f"{method} (document)", notes)
