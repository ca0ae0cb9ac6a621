"""The shift guard of an audit: does the suspect document stand out from the clean
documents by its text alone, without any model?

An audit's p-value assumes that, had the model never seen the suspect document, its
score would be exchangeable with the clean documents' scores. Style and topic break that
assumption: a model finds archaic or formulaic prose likelier whether or not it trained on
the document (a fresh King James pastiche against modern drafts looks "trained on"). The
guard checks the assumption with no model at all, on the same documents and the same
passages the test uses, in two parts:

- **style**: each document is a bag of character 2-4-grams (within words, so spelling,
  morphology and function words) and words, TF-IDF weighted, over its passages; two
  documents' distance is the cosine distance of those profiles. A document's *style
  distance* is its mean distance to the clean documents (a clean document's, to the other
  clean documents and the suspect: every document's distance to the other k of the pool). Every document is represented by the same number of passages, so no
  document looks closer or farther only because its profile is less noisy.
- **length**: the mean number of words per passage, compared on a log scale the same way
  (shorter or longer passages change token log-probabilities by themselves).

Each part gives the suspect's rank among the clean documents (1 = farthest) and the
rank p-value ``(1 + #clean documents at least as far) / (k + 1)``, exact when the suspect
is exchangeable with the clean documents. This is a nearest-neighbour classifier's
question ("how unlike the clean documents is this one?") asked without saturating:
every two documents differ in topic, so a passage classifier separates almost any pair;
what matters is whether the suspect differs from the clean documents *more than they
differ from each other*. A clean set as varied in topic as the suspect keeps the guard
quiet; a clean set in another style or genre does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from copyprobe.evaluation.stats import prediction_t_p

GUARD_LEVEL = 0.1  # a suspect farther than 90% of the clean documents is a style outlier
# With the t guard, passages whose mean length is within 10% of the clean documents' (a mean
# |log ratio| below log 1.1) cannot explain a score: the length part stays quiet for them.
# Passages cut to one token budget differ by a few percent in words; the battery's length
# shifts that moved scores were 25% and more (48 against 64 words).
LENGTH_MATERIAL = math.log(1.1)
FEATURES = ("character 2-4-gram (within words) + word TF-IDF profile per document, cosine distance; "
            "mean words per passage, log scale")


@dataclass(frozen=True)
class Standing:
    """Where one document stands among k clean documents on one model-free feature."""

    value: float  # the suspect's mean distance to the clean documents
    clean_values: tuple[float, ...]  # each clean document's mean distance to the others of the pool
    rank: int  # 1 + #clean documents at least as far (1 = farther than every one)
    p_value: float  # rank / (k + 1), or the prediction t-test's p with test "t"
    test: str = "rank"  # how p_value was computed: "rank" (exact) or "t" (by how much, assuming normality)
    material: bool = True  # False: a difference too small to explain any score (the t guard's length part)
    # each clean document's mean distance to the other clean ones alone: what the group test
    # (collection_standing) sets the suspects against, the same for every suspect
    clean_apart: tuple[float, ...] = ()

    def as_json(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {
            "distance": _round(self.value), "rank": self.rank, "of": len(self.clean_values) + 1,
            "p": _round(self.p_value),
            "clean_median": _round(float(np.median(self.clean_values))) if self.clean_values else None}
        if self.test != "rank":  # verdicts.json of rank-guarded audits keeps its earlier layout
            out["test"] = self.test
        if not self.material:
            out["material"] = False
        return out


def _round(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else x


def rank_standing(value: float, clean_values: Sequence[float], test: str = "rank") -> Standing:
    """Rank (1 = largest) of ``value`` among ``clean_values`` and its p-value: the exact rank
    p-value, or with ``test="t"`` the prediction t-test's (by how far it stands out, not
    only whether it is farthest)."""
    clean = tuple(float(v) for v in clean_values)
    # ties count against the suspect (as in the p-value): rank 1 = strictly farther than all
    rank = 1 + sum(c >= value for c in clean)
    if test == "t" and len(clean) >= 2 and all(map(math.isfinite, clean)) and math.isfinite(value):
        return Standing(float(value), clean, rank, prediction_t_p(float(value), clean), "t")
    return Standing(float(value), clean, rank, rank / (len(clean) + 1))


def style_distances(doc_texts: Sequence[str]) -> np.ndarray:
    """Cosine distance matrix of the documents' character/word TF-IDF profiles (the
    mean of the two kinds' distances)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_distances

    texts = [t if t.strip() else " " for t in doc_texts]
    parts = []
    for analyzer, ngrams in (("char_wb", (2, 4)), ("word", (1, 1))):
        extra = {"token_pattern": r"(?u)\b\w+\b"} if analyzer == "word" else {}
        vec = TfidfVectorizer(analyzer=analyzer, ngram_range=ngrams, sublinear_tf=True, lowercase=True, **extra)
        try:
            matrix = vec.fit_transform(texts)
        except ValueError:  # no token at all (e.g. only punctuation)
            parts.append(np.zeros((len(texts), len(texts))))
            continue
        parts.append(cosine_distances(matrix))
    return np.clip(np.mean(parts, axis=0), 0.0, None)


def length_distances(words_per_passage: Sequence[float]) -> np.ndarray:
    logs = np.log(np.maximum(np.asarray(words_per_passage, dtype=float), 1.0))
    return np.abs(logs[:, None] - logs[None, :])


def standings(distances: np.ndarray, suspect: int, clean: Sequence[int], test: str = "rank") -> Standing:
    """The suspect's mean distance to the clean documents against each clean document's
    mean distance to the other k documents of the pool (the other clean ones and the
    suspect). Every document's value is then the same function of the pool, so under
    exchangeability the suspect's rank is uniform and the rank p exact; a clean document's
    distance to the other clean ones alone made the suspect first about 1 time in 6 with
    6 clean documents, not 1 in 7."""
    clean = list(clean)
    value = float(np.mean(distances[suspect, clean])) if clean else math.nan
    clean_values, apart = [], []
    for c in clean:
        others = [o for o in clean if o != c]
        clean_values.append(float(np.mean(distances[c, others + [suspect]])) if others else math.nan)
        apart.append(float(np.mean(distances[c, others])) if others else math.nan)
    return replace(rank_standing(value, clean_values, test), clean_apart=tuple(apart))


def guard(doc_passages: Mapping[str, Sequence[str]], suspects: Sequence[str],
          clean: Sequence[str], test: str = "rank") -> dict[str, dict[str, Standing]]:
    """For each suspect document, its style and length standing among the clean documents.

    ``doc_passages`` maps every document (suspect and clean) to the passages that represent
    it (the same number for every document, chosen by the caller); ``test``: how each
    standing's p-value is computed (:func:`rank_standing`)."""
    names = list(suspects) + [c for c in clean if c not in suspects]
    index = {n: i for i, n in enumerate(names)}
    style = style_distances(["\n".join(doc_passages[n]) for n in names])
    length = length_distances([np.mean([len(p.split()) for p in doc_passages[n]]) if doc_passages[n] else 0.0
                               for n in names])
    clean_idx = [index[c] for c in clean]
    out = {}
    for s in suspects:
        by_length = standings(length, index[s], clean_idx, test)
        if test == "t" and by_length.value < LENGTH_MATERIAL:
            by_length = replace(by_length, material=False)
        out[s] = {"style": standings(style, index[s], clean_idx, test), "length": by_length}
    return out


def collection_standing(per_suspect: Mapping[str, Mapping[str, Standing]]) -> dict[str, float]:
    """Do the suspect documents as a group stand out from the clean ones by text alone?
    One-sided Mann-Whitney p-values (exact for small sets) of the suspects' style and
    length distances to the clean documents against the clean documents' own, from the
    standings :func:`guard` already computed."""
    from scipy.stats import mannwhitneyu

    out = {}
    for part in ("style", "length"):
        s_values = [st[part].value for st in per_suspect.values()]
        first = next(iter(per_suspect.values()))[part] if per_suspect else None
        c_values = list(first.clean_apart or first.clean_values) if first else []
        if len(s_values) < 1 or len(c_values) < 2 or not all(map(math.isfinite, s_values + c_values)):
            out[part] = math.nan
            continue
        out[part] = float(mannwhitneyu(s_values, c_values, alternative="greater").pvalue)
    return out
