"""Blind baseline: can members be told from non-members without the target model?

Membership benchmarks often draw members and non-members from different times, topics
or sources. Then a classifier that only reads the texts separates them, and a method's
high AUC may say nothing about the model ("blind baselines" beat many published
attacks). :func:`blind_baseline` fits such model-free classifiers with cross-validation;
:func:`blind_warning` says when the comparison is not to be trusted.

Features: character 2-4-gram TF-IDF (topic, style, spelling) plus a few numbers per text
(length, mean word length, digit / capital / punctuation fractions, years 1900-2099,
years 1000-1899, month names, numeric dates), all into one logistic regression. The AUC
is computed on out-of-fold predictions; with ``groups`` (document ids) the folds keep a
document's passages together, so the classifier cannot recognise a document it has seen.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

from copyprobe.errors import ConfigError, DataError

BLIND_AUC_THRESHOLD = 0.7
FEATURES = (
    "character 2-4-gram TF-IDF + length, word length, digit/capital/punctuation fractions, "
    "years 1900-2099, years 1000-1899, month names, numeric dates; logistic regression"
)

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
            sum(c.isdigit() for c in text) / n_chars,
            sum(c.isupper() for c in text) / n_chars,
            len(_PUNCT.findall(text)) / n_chars,
            len(_MODERN_YEAR.findall(text)),
            len(_OLD_YEAR.findall(text)),
            len(_MONTH.findall(text)),
            len(_NUMERIC_DATE.findall(text)),
        ])
    return np.asarray(rows, dtype=float).reshape(len(rows), len(_META_NAMES))


KINDS = ("combined", "char_ngrams", "length_date")


def _out_of_fold(texts: list[str], meta: np.ndarray, y: np.ndarray,
                 splits: list[tuple[np.ndarray, np.ndarray]], seed: int) -> dict[str, np.ndarray]:
    """Out-of-fold decision values of each feature set. Each fold's n-gram vocabulary and
    scaling are fitted on its training part only; the n-grams are vectorised once per fold."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scores = {kind: np.full(len(y), np.nan) for kind in KINDS}
    for train, test in splits:
        if len(np.unique(y[train])) < 2:  # cannot happen with stratified folds; guard anyway
            for kind in KINDS:
                scores[kind][test] = 0.0
            continue
        vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True,
                                     max_features=100_000, lowercase=False, dtype=np.float64)
        ngrams_train = vectorizer.fit_transform([texts[i] for i in train])
        ngrams_test = vectorizer.transform([texts[i] for i in test])
        scaler = StandardScaler().fit(meta[train])
        meta_train, meta_test = scaler.transform(meta[train]), scaler.transform(meta[test])
        features = {
            "combined": (sparse.hstack([ngrams_train, meta_train]).tocsr(),
                         sparse.hstack([ngrams_test, meta_test]).tocsr()),
            "char_ngrams": (ngrams_train, ngrams_test),
            "length_date": (meta_train, meta_test),
        }
        for kind, (x_train, x_test) in features.items():
            model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed)
            model.fit(x_train, y[train])
            scores[kind][test] = model.decision_function(x_test)
    return scores


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
    "grouped", "features", "components": {"char_ngrams": auc, "length_date": auc},
    "warning"}``; ``auc_low``/``auc_high`` is a 95% bootstrap interval (documents resampled
    when ``groups`` are given). Too few labelled texts per class for two folds give
    ``auc`` None and a ``skipped`` reason. ``warning`` (from :func:`blind_warning`) only
    knows the blind AUC; pass the best method's AUC to :func:`blind_warning` as well.

    More than ``max_texts`` labelled texts are subsampled (whole documents, by ``seed``) to
    bound the cost; ``n`` is then the number used and ``n_total`` the number given.
    """
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    from copyprobe.evaluation.metrics import bootstrap_ci

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

    n_total = len(y)
    if max_texts is not None and len(y) > max_texts:
        keep = _subsample(len(y), g, max_texts, seed)
        texts, y = [texts[i] for i in keep], y[keep]
        g = g[keep] if g is not None else None
    result: dict[str, Any] = {
        "auc": None, "auc_low": None, "auc_high": None, "n": int(len(y)), "n_total": int(n_total),
        "n_members": int((y == 1).sum()), "n_nonmembers": int((y == 0).sum()),
        "folds": None, "grouped": g is not None, "features": FEATURES,
        "components": {}, "warning": None,
    }
    # units that folds distribute: documents with groups, else passages
    if g is not None:
        per_class = [len(set(g[y == c])) for c in (0, 1)]
    else:
        per_class = [int((y == c).sum()) for c in (0, 1)]
    n_splits = min(folds, *per_class)
    if n_splits < 2:
        unit = "documents" if g is not None else "passages"
        result["skipped"] = (f"needs at least 2 member and 2 non-member {unit}, got "
                             f"{per_class[1]} and {per_class[0]}")
        return result
    if g is not None:
        splitter: Any = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        splits = list(splitter.split(np.zeros(len(y)), y, g))
    else:
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        splits = list(splitter.split(np.zeros(len(y)), y))
    result["folds"] = n_splits

    oof_by_kind = _out_of_fold(texts, text_features(texts), y, splits, seed)
    oof = oof_by_kind["combined"]
    auc = float(roc_auc_score(y, oof))
    ci = bootstrap_ci(y, oof, groups=g, n_resamples=n_bootstrap, seed=seed)
    result["auc"] = auc
    result["auc_low"] = ci.low if ci.ok else None
    result["auc_high"] = ci.high if ci.ok else None
    for kind in ("char_ngrams", "length_date"):
        result["components"][kind] = float(roc_auc_score(y, oof_by_kind[kind]))
    result["warning"] = blind_warning(auc, None)
    return result


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


def add_blind_baseline(metrics: dict[str, Any], texts: Sequence[str], labels: Sequence[int],
                       groups: Sequence[Any] | None, seed: int) -> None:
    """Put the blind baseline and its warning (against the best method's passage AUC)
    into a metrics block; the warning also joins ``metrics["notes"]``."""
    blind = blind_baseline(texts, labels, groups=groups, seed=seed)
    aucs = [v["auc"] for v in metrics.get("passage", {}).values() if v.get("auc") is not None]
    warning = blind_warning(blind.get("auc"), max(aucs) if aucs else None)
    blind["warning"] = warning
    metrics["blind_baseline"] = blind
    if warning:
        metrics.setdefault("notes", []).append(warning)
