"""Blind baseline: can members be told from non-members without the target model?

Membership benchmarks often draw members and non-members from different times, topics
or sources. Then a classifier that only reads the texts separates them, and a method's
high AUC may say nothing about the model ("blind baselines" beat many published
attacks: Das, Zhang & Tramer 2024 reach AUC 0.99 on WikiMIA with a bag of words, and use
date detection on the temporally split sets). :func:`blind_baseline` fits such
model-free classifiers with cross-validation; :func:`blind_warning` says when the
comparison is not to be trusted.

Features, all into one logistic regression: character 2-4-gram TF-IDF (topic, style,
spelling), word 1-2-gram TF-IDF (the bag of words), and the date feature of Das et al.:
"the latest year the text mentions is >= Y" for every cut-off Y in 1950, 1952, ... 2030
(so the regression learns where the cut-off lies; written from the paper's description,
not its code). Each part is also scored alone (``components``), with a few per-text
numbers (length, word length, digit / capital / punctuation fractions, year, month-name
and numeric-date counts) as the ``length_date`` part.

Validation: stratified k-fold (with ``groups``, a document's passages stay in one fold),
and the AUC counts only member/non-member pairs that sit in the same test fold. Pooling
out-of-fold scores of different fold models is biased below chance on unbalanced data
(each fold's intercept follows its training class balance, which mirrors its test
balance: a run with 117 members and 10 non-members gave 0.14); within one fold the
classifier is fixed before it sees the test texts, so when members and non-members come
from one distribution its within-fold AUC is 0.5 in expectation whatever the balance. When the
95% bootstrap interval does not lie above 0.5 the result says ``signal: False`` with
the reason (``no_signal``), so a value below 0.5 is read as "no signal", never as a
reversed one.

Cost: the n-grams of all texts are counted once (:func:`ngram_counts`) and each fold's
vocabulary and TF-IDF are sliced from those counts, the same matrices as vectorizers
fitted on each fold's texts. The result is a pure function of the texts, labels, groups
and seed: :func:`cached_blind_baseline` keeps it in the cache directory under a hash of
them, and :func:`prefetch` starts it on a thread as soon as the data is known.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import re
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from copyprobe.errors import ConfigError, DataError

BLIND_AUC_THRESHOLD = 0.7
FEATURES = (
    "character 2-4-gram TF-IDF + word 1-2-gram TF-IDF + latest year mentioned >= Y for "
    "Y = 1950..2030 (Das et al.'s date feature); logistic regression"
)
VALIDATION = (
    "stratified {folds}-fold{grouped} cross-validation; AUC over member/non-member pairs in "
    "the same test fold (0.5 in expectation for a classifier without signal, whatever the "
    "class balance)"
)
DATE_CUTOFFS = tuple(range(1950, 2031, 2))

_ANY_YEAR = re.compile(r"(?<![\d.,])(1[5-9]\d\d|20\d\d)(?!\d|[.,]\d)")  # not in 1,500,000 or 3.2014
_MODERN_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_OLD_YEAR = re.compile(r"(?<!\d)1[0-8]\d\d(?!\d)")
_MONTH = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b\.?",
    re.IGNORECASE,
)
_NUMERIC_DATE = re.compile(r"\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b")
_PUNCT = re.compile(r"[^\w\s]")

_META_NAMES = (
    "log_chars", "log_words", "mean_word_len", "digit_frac", "upper_frac", "punct_frac",
    "years_1900_2099", "years_1000_1899", "month_names", "numeric_dates",
)


def text_features(texts: Sequence[str]) -> np.ndarray:
    """The per-text numbers (length and date-like tokens), one row per text."""
    rows = []
    for text in texts:
        words = text.split()
        n_chars = max(len(text), 1)
        rows.append([
            math.log1p(len(text)),
            math.log1p(len(words)),
            (sum(len(w) for w in words) / len(words)) if words else 0.0,
            sum(map(str.isdigit, text)) / n_chars,
            sum(map(str.isupper, text)) / n_chars,
            len(_PUNCT.findall(text)) / n_chars,
            len(_MODERN_YEAR.findall(text)),
            len(_OLD_YEAR.findall(text)),
            len(_MONTH.findall(text)),
            len(_NUMERIC_DATE.findall(text)),
        ])
    return np.asarray(rows, dtype=float).reshape(len(rows), len(_META_NAMES))


def date_features(texts: Sequence[str], cutoffs: Sequence[int] = DATE_CUTOFFS) -> np.ndarray:
    """Das et al.'s date feature: per text, [mentions a year 1500-2099] + [the latest such
    year >= Y for each cut-off Y]."""
    rows = []
    for text in texts:
        years = [int(y) for y in _ANY_YEAR.findall(text)]
        latest = max(years) if years else None
        rows.append([1.0 if years else 0.0] + [float(latest is not None and latest >= c) for c in cutoffs])
    return np.asarray(rows, dtype=float).reshape(len(rows), 1 + len(cutoffs))


KINDS = ("combined", "char_ngrams", "words", "dates", "length_date")


MAX_FEATURES = 100_000  # per n-gram family: the most frequent terms of a fold's training part
_WORD = re.compile(r"(?u)\b\w+\b")


def ngram_counts(texts: Sequence[str]) -> tuple[Any, Any]:
    """Term counts of every text (CSR, int64): character 2-4-grams inside words (each word
    padded with a space on both sides) and lower-cased word 1-2-grams, columns in
    alphabetical order of the terms: what scikit-learn's ``CountVectorizer`` gives with
    ``analyzer="char_wb", ngram_range=(2, 4), lowercase=False`` and ``analyzer="word",
    ngram_range=(1, 2)`` and the token pattern ``_WORD`` (tests/evaluation/test_blind.py
    checks both), computed once for all texts instead of once per fold."""
    return _char_counts(texts), _word_counts(texts)


def _counts_matrix(rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, n_rows: int, n_cols: int) -> Any:
    """CSR from (row, col, count) triples sorted by row, then col."""
    from scipy import sparse

    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return sparse.csr_matrix((counts.astype(np.int64), cols, indptr), shape=(n_rows, n_cols))


_TEXTS_PER_BLOCK = 512  # texts whose character windows are held at once


def _char_counts(texts: Sequence[str]) -> Any:
    # Every n-gram of a padded word " w " is a window of 2-4 characters that does not cross
    # into the next word (scikit-learn's short-word rule never applies from n = 2: a padded
    # word has at least 3 characters). Characters become their rank in code point order
    # (0 marks a word's end), and an n-gram the number with those ranks as its first n
    # digits in base (characters + 1): numeric order is then alphabetical order.
    n_texts = len(texts)
    blocks = [[t.split() for t in texts[i:i + _TEXTS_PER_BLOCK]] for i in range(0, n_texts, _TEXTS_PER_BLOCK)]
    present = np.zeros(0x110000, dtype=bool)
    for block in blocks:
        present[_code_points(block)] = True
    base = int(present.sum()) + 1
    digits = base ** 4  # an n-gram's number is below this
    if not any(any(ws) for block in blocks for ws in block) or n_texts * digits >= 2 ** 62:
        # no words (scikit-learn's error), or too many distinct characters for one int64 key
        from sklearn.feature_extraction.text import CountVectorizer

        return CountVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=False).fit_transform(texts)
    rank_of = np.cumsum(present, dtype=np.int32)
    keys, counts = [], []
    for number, block in enumerate(blocks):
        key, count = _block_char_keys(block, rank_of, base)
        keys.append(key + number * _TEXTS_PER_BLOCK * digits)
        counts.append(count)
    # blocks hold consecutive texts and each block's keys are sorted: concatenated, they are too
    rows, gram = np.divmod(np.concatenate(keys), digits)
    vocabulary = np.unique(gram)
    return _counts_matrix(rows, np.searchsorted(vocabulary, gram), np.concatenate(counts), n_texts, len(vocabulary))


def _code_points(block: list[list[str]]) -> np.ndarray:
    """The code points of a block's words, each padded with a space on both sides and
    followed by a separator."""
    joined = "\0".join(" " + w + " " for ws in block for w in ws) + "\0"
    return np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _block_char_keys(block: list[list[str]], rank_of: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys (text within the block x base^4 + n-gram number) and their counts."""
    digits = base ** 4
    ranks = rank_of[_code_points(block)]
    lengths = np.fromiter((len(w) + 3 for ws in block for w in ws), dtype=np.int64)  # " w " and the separator
    ranks[np.cumsum(lengths) - 1] = 0
    words_in_text = np.fromiter(map(len, block), dtype=np.int64, count=len(block))
    text_of_char = np.repeat(np.repeat(np.arange(len(block), dtype=np.int64), words_in_text), lengths)
    keys = []
    for n in (2, 3, 4):
        m = len(ranks) - n + 1
        inside = ranks[:m] > 0
        for j in range(1, n):
            inside &= ranks[j:j + m] > 0
        starts = np.flatnonzero(inside)
        key = text_of_char[starts] * digits
        for j in range(n):
            key += ranks[starts + j].astype(np.int64) * base ** (3 - j)
        keys.append(key)
    return np.unique(np.concatenate(keys), return_counts=True)


def _word_counts(texts: Sequence[str]) -> Any:
    tokens_per_text = [_WORD.findall(t.lower()) for t in texts]
    tokens = [w for ts in tokens_per_text for w in ts]
    n_texts = len(tokens_per_text)
    if not tokens:  # no word in any text (emoji, punctuation): no column, where scikit-learn raises
        return _counts_matrix(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), n_texts, 0)
    unigrams = sorted(set(tokens))
    index = {w: i for i, w in enumerate(unigrams)}
    ids = np.fromiter((index[w] for w in tokens), dtype=np.int64, count=len(tokens))
    text_of_token = np.repeat(np.arange(n_texts, dtype=np.int64),
                              np.fromiter(map(len, tokens_per_text), dtype=np.int64, count=n_texts))
    same_text = text_of_token[1:] == text_of_token[:-1]
    pairs, pair_of = np.unique(ids[:-1][same_text] * len(unigrams) + ids[1:][same_text], return_inverse=True)
    firsts, seconds = np.divmod(pairs, len(unigrams))
    terms = unigrams + [f"{unigrams[a]} {unigrams[b]}" for a, b in zip(firsts.tolist(), seconds.tolist())]
    column = np.empty(len(terms), dtype=np.int64)
    column[sorted(range(len(terms)), key=terms.__getitem__)] = np.arange(len(terms))
    rows = np.concatenate([text_of_token, text_of_token[:-1][same_text]])
    key = rows * len(terms) + np.concatenate([column[ids], column[len(unigrams) + pair_of]])
    key, counts = np.unique(key, return_counts=True)
    rows, cols = np.divmod(key, len(terms))
    return _counts_matrix(rows, cols, counts, n_texts, len(terms))


def _fold_tfidf(counts: Any, train: np.ndarray, test: np.ndarray) -> tuple[Any, Any]:
    """TF-IDF (sublinear tf, l2 rows) of the training and test rows over the training
    part's vocabulary (at most MAX_FEATURES terms, the most frequent): scikit-learn's
    ``TfidfVectorizer`` fitted on the training texts, from counts computed once."""
    from sklearn.feature_extraction.text import TfidfTransformer

    counts_train = counts[train]
    seen = np.flatnonzero(np.bincount(counts_train.indices, minlength=counts.shape[1]))
    if len(seen) > MAX_FEATURES:  # as CountVectorizer(max_features): highest total count, its tie order
        totals = np.asarray(counts_train[:, seen].sum(axis=0)).ravel()
        seen = np.sort(seen[(-totals).argsort()[:MAX_FEATURES]])
    counts_train = counts_train[:, seen]
    if not len(seen):  # no term in the training texts: no column (TfidfTransformer refuses none)
        return counts_train.astype(float), counts[test][:, seen].astype(float)
    tfidf = TfidfTransformer(sublinear_tf=True).fit(counts_train)
    return tfidf.transform(counts_train, copy=False), tfidf.transform(counts[test][:, seen], copy=False)


def _out_of_fold(texts: list[str], meta: np.ndarray, dates: np.ndarray, y: np.ndarray,
                 splits: list[tuple[np.ndarray, np.ndarray]], seed: int) -> dict[str, np.ndarray]:
    """Out-of-fold decision values of each feature set. Each fold's vocabularies, IDF
    weights and scaling are fitted on its training part only; the n-grams are counted
    once for all texts, and only one fold's matrices exist at a time."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    _check_stop()
    char_counts, word_counts = ngram_counts(texts)
    scores = {kind: np.full(len(y), np.nan) for kind in KINDS}
    for train, test in splits:
        _check_stop()
        if len(np.unique(y[train])) < 2:  # cannot happen with stratified folds; guard anyway
            for kind in KINDS:
                scores[kind][test] = 0.0
            continue
        chars_train, chars_test = _fold_tfidf(char_counts, train, test)
        words_train, words_test = _fold_tfidf(word_counts, train, test)
        scaler = StandardScaler().fit(meta[train])
        features = {
            "combined": (sparse.hstack([chars_train, words_train, dates[train]]).tocsr(),
                         sparse.hstack([chars_test, words_test, dates[test]]).tocsr()),
            "char_ngrams": (chars_train, chars_test),
            "words": (words_train, words_test),
            "dates": (dates[train], dates[test]),
            "length_date": (scaler.transform(meta[train]), scaler.transform(meta[test])),
        }
        for kind, (x_train, x_test) in features.items():
            _check_stop()
            if x_train.shape[1] == 0:  # texts without words or characters to count: nothing to learn
                scores[kind][test] = 0.0
                continue
            model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed).fit(x_train, y[train])
            scores[kind][test] = model.decision_function(x_test)
    return scores


def within_fold_auc(labels: Sequence[int], scores: Sequence[float], folds: Sequence[int],
                    counts: np.ndarray | None = None, codes: np.ndarray | None = None) -> np.ndarray | float:
    """AUC over the member/non-member pairs that share a fold (ties count half).

    With ``counts`` (resamples x groups) and ``codes`` (row -> group), row i weighs
    ``counts[b, codes[i]]`` in resample b and one AUC per resample comes back (NaN where
    no fold has both classes); without them, one float (NaN likewise).
    """
    from copyprobe.evaluation.metrics import _weighted_auc

    y, s, f = np.asarray(labels, dtype=int), np.asarray(scores, dtype=float), np.asarray(folds)
    single = counts is None
    if single:
        counts, codes = np.ones((1, len(y)), dtype=np.int64), np.arange(len(y))
    num = np.zeros(counts.shape[0])
    den = np.zeros(counts.shape[0])
    for fold in np.unique(f):
        rows = np.flatnonzero(f == fold)
        yf, sf, cf = y[rows], s[rows], codes[rows]
        if len(np.unique(yf)) < 2:
            continue
        pairs = counts[:, cf[yf == 1]].sum(axis=1).astype(float) * counts[:, cf[yf == 0]].sum(axis=1)
        auc = _weighted_auc(yf, sf, counts, cf)
        ok = pairs > 0
        num[ok] += auc[ok] * pairs[ok]
        den += pairs
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return float(out[0]) if single else out


def _within_fold_ci(y: np.ndarray, s: np.ndarray, folds: np.ndarray, groups: np.ndarray | None,
                    n_resamples: int, seed: int) -> tuple[float | None, float | None]:
    """95% percentile bootstrap interval of :func:`within_fold_auc` (groups drawn whole)."""
    from copyprobe.evaluation.metrics import MAX_DEGENERATE_FRACTION, _draw_counts

    if n_resamples < 1:
        return None, None
    if groups is None:
        codes, n_groups = np.arange(len(y)), len(y)
    else:
        _, codes = np.unique(groups, return_inverse=True)
        n_groups = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    values = []
    for a in range(0, n_resamples, 200):
        counts = _draw_counts(rng, n_groups, min(200, n_resamples - a))
        values.append(within_fold_auc(y, s, folds, counts, codes))
    aucs = np.concatenate(values)
    finite = aucs[np.isfinite(aucs)]
    if len(finite) < (1 - MAX_DEGENERATE_FRACTION) * n_resamples:
        return None, None
    return float(np.quantile(finite, 0.025)), float(np.quantile(finite, 0.975))


def _subsample(n: int, groups: np.ndarray | None, max_texts: int, seed: int) -> np.ndarray:
    """Indices of at most ``max_texts`` rows, whole groups at a time, in random order."""
    rng = np.random.default_rng(seed)
    if groups is None:
        return np.sort(rng.choice(n, size=max_texts, replace=False))
    order = rng.permutation(np.unique(groups))
    sizes = {g: c for g, c in zip(*np.unique(groups, return_counts=True))}
    chosen, total = set(), 0
    for g in order:
        if total + sizes[g] > max_texts and chosen:
            continue
        chosen.add(g)
        total += sizes[g]
    return np.flatnonzero(np.isin(groups, list(chosen)))


def blind_baseline(
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    groups: Sequence[Any] | None = None,
    seed: int = 0,
    folds: int = 5,
    n_bootstrap: int = 1000,
    max_texts: int | None = 5000,
) -> dict[str, Any]:
    """Cross-validated AUC of model-free classifiers separating members (1) from non-members (0).

    Returns ``{"auc", "auc_low", "auc_high", "n", "n_members", "n_nonmembers", "folds",
    "grouped", "features", "components": {"char_ngrams", "words", "dates", "length_date": auc},
    "validation", "signal", "no_signal", "warning"}``. ``auc`` is the within-fold AUC (see the
    module docstring); ``auc_low``/``auc_high`` a 95% bootstrap interval of it (documents
    resampled when ``groups`` are given, fold assignment kept). ``signal`` is False, with the
    reason in ``no_signal``, when the AUC is not above 0.5, its interval includes 0.5, or
    resamples were asked and too many had one class in a fold for an interval (a handful of
    texts); then ``warning`` is None. With ``n_bootstrap=0`` the point estimate alone decides. Too few labelled texts per class for two folds give
    ``auc`` None and a ``skipped`` reason. ``warning`` (from :func:`blind_warning`) only
    knows the blind AUC; pass the best method's AUC to :func:`blind_warning` as well.

    More than ``max_texts`` labelled texts are subsampled (whole documents, by ``seed``) to
    bound the cost; ``n`` is then the number used and ``n_total`` the number given.
    """
    texts, y, g = _checked_inputs(texts, labels, groups, folds, max_texts)
    n_total = len(y)
    if max_texts is not None and len(y) > max_texts:
        keep = _subsample(len(y), g, max_texts, seed)
        texts, y = [texts[i] for i in keep], y[keep]
        g = g[keep] if g is not None else None
    result: dict[str, Any] = {
        "auc": None, "auc_low": None, "auc_high": None, "n": int(len(y)), "n_total": int(n_total),
        "n_members": int((y == 1).sum()), "n_nonmembers": int((y == 0).sum()),
        "folds": None, "grouped": g is not None, "features": FEATURES,
        "components": {}, "warning": None, "validation": None, "signal": None, "no_signal": None,
    }
    splits = _splits(y, g, folds, seed)
    if isinstance(splits, str):
        result["skipped"] = splits
        return result
    n_splits = len(splits)
    result["folds"] = n_splits
    result["validation"] = VALIDATION.format(folds=n_splits, grouped=" grouped (by document)" if g is not None else "")
    fold_of = np.empty(len(y), dtype=int)
    for k, (_, test) in enumerate(splits):
        fold_of[test] = k

    _check_stop()
    meta = text_features(texts)
    _check_stop()
    dates = date_features(texts)
    oof_by_kind = _out_of_fold(texts, meta, dates, y, splits, seed)
    oof = oof_by_kind["combined"]
    auc = within_fold_auc(y, oof, fold_of)
    _check_stop()
    low, high = _within_fold_ci(y, oof, fold_of, g, n_bootstrap, seed)
    result["auc"] = auc
    result["auc_low"], result["auc_high"] = low, high
    for kind in KINDS[1:]:
        result["components"][kind] = within_fold_auc(y, oof_by_kind[kind], fold_of)
    result["signal"], result["no_signal"] = _signal(auc, low, n_bootstrap)
    result["warning"] = blind_warning(auc, None) if result["signal"] else None
    return result


def _checked_inputs(texts: Sequence[str], labels: Sequence[int], groups: Sequence[Any] | None, folds: int,
                    max_texts: int | None) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """(texts, labels as ints, groups as strings or None), once the arguments are found usable."""
    texts = list(texts)
    if any(not isinstance(t, str) for t in texts):
        bad = next(t for t in texts if not isinstance(t, str))
        raise DataError(f"blind baseline: texts must be strings, got {type(bad).__name__}")
    y = np.asarray(list(labels))
    if len(y) != len(texts):
        raise DataError(f"blind baseline: {len(texts)} texts but {len(y)} labels")
    if len(y) and not np.isin(y, (0, 1)).all():
        raise DataError(f"blind baseline: labels must be 0 or 1, got {y[~np.isin(y, (0, 1))][0]!r}")
    if not isinstance(folds, int) or folds < 2:
        raise ConfigError(f"blind baseline: folds must be an integer of at least 2, got {folds!r}")
    if max_texts is not None and (not isinstance(max_texts, int) or max_texts < 4):
        raise ConfigError(f"blind baseline: max_texts must be an integer of at least 4 or None, "
                          f"got {max_texts!r}")
    y = y.astype(int)
    g = None
    if groups is not None:
        g = np.asarray([str(x) for x in groups], dtype=object)
        if len(g) != len(y):
            raise DataError(f"blind baseline: {len(y)} labels but {len(g)} groups")
    return texts, y, g


def _splits(y: np.ndarray, g: np.ndarray | None, folds: int, seed: int) -> list | str:
    """The (train, test) index pairs of up to ``folds`` stratified folds (whole documents
    with groups); the reason instead when a class has fewer than 2 units to spread."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    # units that folds distribute: documents with groups, else passages
    if g is not None:
        per_class = [len(set(g[y == c])) for c in (0, 1)]
    else:
        per_class = [int((y == c).sum()) for c in (0, 1)]
    n_splits = min(folds, *per_class)
    if n_splits < 2:
        unit = "documents" if g is not None else "passages"
        return f"needs at least 2 member and 2 non-member {unit}, got {per_class[1]} and {per_class[0]}"
    if g is not None:
        splitter: Any = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(y)), y, g))
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def _signal(auc: float, low: float | None, n_resamples: int = 0) -> tuple[bool, str | None]:
    """Whether the texts alone separate the classes, and the reason when they do not. With
    resamples asked and no interval (too many had one class in a fold: a handful of texts),
    the AUC rests on a few pairs: no signal is claimed (4 one-word rows gave 1.00)."""
    if not math.isfinite(auc) or auc <= 0.5:
        return False, (f"no signal: the within-fold AUC {auc:.2f} is not above chance; values "
                       f"below 0.5 are noise (few texts or one class rare), not a reversed signal")
    if low is None and n_resamples >= 1:
        return False, (f"no signal claimed: the within-fold AUC {auc:.2f} rests on too few texts for a 95% "
                       f"interval (too many resamples left a fold with one class)")
    if low is not None and low <= 0.5:
        return False, (f"no signal: the 95% interval of the AUC ({low:.2f} and up) includes "
                       f"chance (0.5)")
    return True, None


def blind_warning(blind_auc: float | None, best_method_auc: float | None) -> str | None:
    """A loud one-line warning when the blind baseline undermines the comparison, else None.

    Fires when the blind AUC is >= 0.7 (members and non-members differ in the text itself)
    or above the best method's AUC (no method beats reading the text alone).
    """
    if blind_auc is None or not math.isfinite(float(blind_auc)):
        return None
    blind_auc = float(blind_auc)
    best = None
    if best_method_auc is not None and math.isfinite(float(best_method_auc)):
        best = float(best_method_auc)
    if blind_auc >= BLIND_AUC_THRESHOLD:
        beats = ""
        if best is not None and blind_auc >= best:
            beats = f", as well as or better than the best method ({best:.2f})"
        return (f"WARNING: a model-free classifier separates members from non-members with "
                f"AUC {blind_auc:.2f} without the model{beats}: members and non-members differ "
                f"in the texts themselves (date, topic or style), so the methods' AUCs may "
                f"measure that shift, not training-data membership")
    if best is not None and blind_auc > best:
        return (f"WARNING: a model-free classifier reaches AUC {blind_auc:.2f} without the "
                f"model, above the best method's {best:.2f}: no method separates members from "
                f"non-members better than the texts alone do")
    return None


def baseline_inputs(rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str],
                    sources: Mapping[str, str] | None) -> tuple[list[str], list[int], list[Any] | None]:
    """(texts, labels, groups) of the labelled rows (scores rows: id, label, doc_id) whose
    text is known. The groups are whole documents: the ``sources`` (id -> the document a
    passage was cut from, the ``source`` column of plant data) when every labelled row has
    one, else the doc ids, else None. A plant's doc ids are label-pure pseudo-documents (a
    book's members, its non-members); folds of those teach a style classifier the opposite
    label of the held-out half (within-fold AUC 0.06-0.08 on the planted benchmark's random
    split, where grouping by book gives 0.52-0.54)."""
    labelled = [r for r in rows if r.get("label") is not None and r["id"] in texts]
    if sources and all(r["id"] in sources for r in labelled):
        groups: list[Any] | None = [sources[r["id"]] for r in labelled]
    elif all(r.get("doc_id") is not None for r in labelled):
        groups = [r["doc_id"] for r in labelled]
    else:
        groups = None
    return [texts[r["id"]] for r in labelled], [r["label"] for r in labelled], groups


# -- computed once per data set ----------------------------------------------------------
# The baseline is a pure function of the texts, labels, groups and seed, so its result is
# kept under a hash of them (and of this code and the libraries that compute it) in the
# cache directory: a rerun, a rescore or another method on the same data reads it back.
# ``prefetch`` starts it on a thread as soon as the data is known (before the model
# loads); whoever asks for the same key then waits for that thread instead of starting over.

_RUNNING: dict[str, Any] = {}  # key -> concurrent.futures.Future of a prefetch
_RUNNING_LOCK = threading.Lock()
_THREAD_NAME = "copyprobe-blind-baseline"  # how finish_prefetches finds the prefetches running
# Set while the program exits (see finish_prefetches): a prefetch stops at its next step.
_STOP = threading.Event()


class PrefetchStopped(Exception):
    """A prefetch stopped because the program is exiting; nothing of it is stored."""


def _check_stop() -> None:
    if _STOP.is_set():
        raise PrefetchStopped("the blind baseline was stopped: the program is exiting")


def finish_prefetches(timeout: float = 60.0) -> None:
    """Ask the prefetches still running to stop at their next step (between the
    classifiers' fits) and wait for them, at most ``timeout`` seconds. Registered to run at
    exit: Python (up to 3.13) ends a daemon thread still running when the interpreter
    finalizes with pthread_exit, which inside scikit-learn's or scipy's C++ code aborts
    the process ("terminate called without an active exception"), as when a script
    exits right after catching a KeyboardInterrupt out of ``detect``."""
    import time

    threads = [t for t in threading.enumerate() if t.name == _THREAD_NAME]
    if not threads:
        return
    _STOP.set()
    try:
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:  # another Ctrl-C: the user would rather not wait
        pass
    finally:
        _STOP.clear()


atexit.register(finish_prefetches)


def baseline_key(texts: Sequence[str], labels: Sequence[int], groups: Sequence[Any] | None, seed: int) -> str:
    """sha256 over the inputs, the code of this module and of the AUC it uses, and the
    versions of the libraries that fit the classifiers."""
    from importlib import metadata

    from copyprobe.evaluation import metrics

    digest = hashlib.sha256()
    for path in (__file__, metrics.__file__):
        digest.update(Path(path).read_bytes())
    versions = []
    for package in ("numpy", "scipy", "scikit-learn"):
        try:
            versions.append(metadata.version(package))
        except metadata.PackageNotFoundError:
            versions.append("?")
    digest.update(json.dumps({"seed": seed, "versions": versions, "n": len(texts),
                              "grouped": groups is not None}).encode())
    for i, text in enumerate(texts):
        for part in (text, str(labels[i]), "" if groups is None else str(groups[i])):
            encoded = part.encode("utf-8", "surrogatepass")
            digest.update(len(encoded).to_bytes(8, "little") + encoded)
    return digest.hexdigest()


def _cache_file(key: str, cache_dir: str | os.PathLike | None) -> Path:
    if cache_dir is None:
        from copyprobe.backends.cache import default_cache_dir

        cache_dir = default_cache_dir()
    return Path(cache_dir) / "blind" / f"{key}.json"


def cached_blind_baseline(texts: Sequence[str], labels: Sequence[int], groups: Sequence[Any] | None, seed: int,
                          *, cache_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """:func:`blind_baseline` with its defaults, computed once per data set: from a prefetch
    of the same inputs when one runs (:func:`prefetch`), else from the cache file of their
    key, else computed and stored there (a cache that cannot be read or written is skipped).
    The result equals the uncached one."""
    key = baseline_key(texts, labels, groups, seed)
    with _RUNNING_LOCK:
        running = _RUNNING.pop(key, None)
    if running is not None:
        try:
            return running.result()
        except Exception:  # computed again below, so an error is raised here, in the caller's thread
            pass
    return _stored_or_computed(key, texts, labels, groups, seed, cache_dir)


def _stored_or_computed(key: str, texts: Sequence[str], labels: Sequence[int], groups: Sequence[Any] | None,
                        seed: int, cache_dir: str | os.PathLike | None) -> dict[str, Any]:
    path = _cache_file(key, cache_dir)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("key") == key and isinstance(stored.get("result"), dict):
            return stored["result"]
    except (OSError, ValueError):
        pass
    result = blind_baseline(texts, labels, groups=groups, seed=seed)
    try:
        from copyprobe.files import atomic_write

        # json's NaN round-trips exactly, so a result read back equals this one
        atomic_write(path, json.dumps({"key": key, "result": result}))
    except (OSError, TypeError, ValueError):
        pass
    return result


def prefetch(texts: Sequence[str], labels: Sequence[int], groups: Sequence[Any] | None, seed: int,
             *, cache_dir: str | os.PathLike | None = None) -> Any:
    """Start :func:`cached_blind_baseline` on a daemon thread; a later call with the same
    inputs takes its result. Returns the Future."""
    from concurrent.futures import Future

    texts, labels = list(texts), list(labels)
    groups = list(groups) if groups is not None else None
    key = baseline_key(texts, labels, groups, seed)
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(_stored_or_computed(key, texts, labels, groups, seed, cache_dir))
        except BaseException as exc:  # handed to whoever waits for it
            future.set_exception(exc)

    with _RUNNING_LOCK:
        _RUNNING[key] = future
    # a daemon: a program that ends does not wait for the fits, only for the step in
    # progress (finish_prefetches, at exit)
    threading.Thread(target=work, name=_THREAD_NAME, daemon=True).start()
    return future


def add_blind_baseline(metrics: dict[str, Any], texts: Sequence[str], labels: Sequence[int],
                       groups: Sequence[Any] | None, seed: int) -> None:
    """Put the blind baseline (computed once per data set, see
    :func:`cached_blind_baseline`) and its warning (against the best method's passage AUC)
    into a metrics block; the warning also joins ``metrics["notes"]``."""
    blind = dict(cached_blind_baseline(texts, labels, groups, seed))
    aucs = [v["auc"] for v in metrics.get("passage", {}).values() if v.get("auc") is not None]
    # no warning when the texts alone carry no signal (see _signal)
    warning = blind_warning(blind.get("auc"), max(aucs) if aucs else None) if blind.get("signal") else None
    blind["warning"] = warning
    metrics["blind_baseline"] = blind
    if warning:
        metrics.setdefault("notes", []).append(warning)
