"""Learned aggregation of likelihood features, and the dataset-level t-test
(Maini et al. 2024, "LLM Dataset Inference: Did you train on my dataset?").

Feature vector of one text (``feature_names(ks, reference)`` gives the names), computed
from the per-token losses ``l_i = -log p(x_i | x_<i)`` of its T scored tokens, as in
the authors' ``metrics.py`` (which sorts *losses*, so their "k_min_probs" are the
lowest losses, i.e. the most likely tokens)::

    index            name               value
    0                loss               mean(l)                       (the authors use ppl = exp(loss);
                                                                       the log keeps outliers in check)
    1 .. K           k_min_loss_<k>     mean of the max(1, floor(k*T)) lowest losses
    K+1 .. 2K        k_max_loss_<k>     mean of the max(1, floor(k*T)) highest losses
                                        (= minus Min-K% Prob at that k)
    2K+1             zlib_ratio         mean(l) / len(zlib.compress(text as UTF-8))
    2K+2 (optional)  ref_loss_ratio     mean(l) / mean(l_ref), l_ref the losses of the
                                        ``reference`` model (only when it is set)

with ``ks`` = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6) by default (K = 7, 16 features; 17 with
a reference), the list of the authors' demo code and of VeilProbe's comparison. The
authors' perturbation features (synonym substitution, typos, ...) are not included.

The method sets ``trains = True``: ``run`` returns the feature vector (a list of
floats), the detect pipeline picks a seeded, stratified training subset of about
``n_train`` labelled rows (``copyprobe.scoring.train_split``, seeded by the run's
``--seed``), calls ``fit`` and ``predict``, and leaves the training rows out of the
metrics. The model is a standardisation
followed by an L2-regularised logistic regression (the authors train a linear layer
with a logistic loss); the score is the predicted member probability.

The paper's dataset-level decision (a one-sided two-sample t-test that the suspect
set scores higher than a clean set) is ``copyprobe.evaluation.stats.dataset_test``, a
function for callers of the library. ``copyprobe audit --method feature_agg`` does not
apply it: it gives the audit's per-document verdicts (``copyprobe.evaluation.verdicts``),
with the method fitted on whole suspect and clean documents and the others tested, so
no document is both learnt from and judged.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError, RowError
from copyprobe.methods.base import GREY_BOX, Method, MethodRun
from copyprobe.params import FRACTION, Integer, Items, ModelSpec, Optional, POSITIVE, param
from copyprobe.registry import register

DEFAULT_KS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def _losses(response: TokenLogprobs) -> np.ndarray:
    values = -np.asarray(response.logprobs, dtype=np.float64)
    if values.size == 0:
        raise RowError("text has fewer than two tokens: nothing to score")
    return values


def _k_mean(sorted_values: np.ndarray, k: float) -> float:
    count = max(1, int(len(sorted_values) * k))
    return float(sorted_values[:count].mean())


def _parse_ks(ks: Any) -> tuple[float, ...]:
    try:
        values = tuple(float(k) for k in ks)
    except (TypeError, ValueError):
        raise ConfigError(f"feature_agg.ks must be numbers in (0, 1], got {ks!r}") from None
    if not values or any(not 0 < k <= 1 for k in values):
        raise ConfigError(f"feature_agg.ks must be numbers in (0, 1], got {ks!r}")
    return values


def feature_names(ks: Sequence[float] = DEFAULT_KS, reference: bool = False) -> list[str]:
    ks = _parse_ks(ks)
    names = ["loss"]
    names += [f"k_min_loss_{k:g}" for k in ks]
    names += [f"k_max_loss_{k:g}" for k in ks]
    names.append("zlib_ratio")
    if reference:
        names.append("ref_loss_ratio")
    return names


def text_features(
    text: str,
    response: TokenLogprobs,
    ks: Sequence[float] = DEFAULT_KS,
    reference: TokenLogprobs | None = None,
) -> list[float]:
    """The feature vector of one text (layout in the module docstring)."""
    ks = _parse_ks(ks)
    losses = _losses(response)
    loss = float(losses.mean())
    ascending = np.sort(losses)
    descending = ascending[::-1]
    values = [loss]
    values += [_k_mean(ascending, k) for k in ks]
    values += [_k_mean(descending, k) for k in ks]
    values.append(loss / len(zlib.compress(text.encode("utf-8"))))
    if reference is not None:
        ref_loss = float(_losses(reference).mean())
        if ref_loss == 0:
            raise RowError("reference model has zero loss on the text: ratio undefined")
        values.append(loss / ref_loss)
    if not all(math.isfinite(v) for v in values):
        raise RowError("a feature is not finite (infinite token loss?)")
    return values


@register
class FeatureAgg(Method):
    name = "feature_agg"
    access = GREY_BOX
    trains = True
    summary = "Logistic regression on loss, min/max-k and zlib features, trained on labelled rows (Maini et al. 2024)"

    n_train: int = param(
        50, Integer(2),
        "labelled rows (seeded, stratified) used to train the linear model; excluded from metrics",
    )
    reference: str | None = param(
        None, Optional(ModelSpec(auto=True)),
        "model spec of a reference model: adds the loss-ratio feature (default: none)",
    )
    ks: tuple = param(DEFAULT_KS, Items(FRACTION), "fractions k of the min-k / max-k loss features")
    C: float = param(1.0, POSITIVE, "inverse L2 regularisation strength of the logistic regression")

    def train_size(self) -> int:
        return self.n_train

    def models(self) -> set[str]:
        return {self.reference} if self.reference else set()

    def feature_names(self) -> list[str]:
        return feature_names(self.ks, reference=bool(self.reference))

    def run(self, example: Example) -> MethodRun:
        requests = [TokenLogprobsRequest(example.text, stats=False)]
        if self.reference:
            requests.append(TokenLogprobsRequest(example.text, stats=False, model=self.reference))
        responses = yield requests
        return text_features(
            example.text, responses[0], self.ks, reference=responses[1] if self.reference else None
        )

    def fit(self, features: Sequence[Sequence[float]], labels: Sequence[int]) -> "FeatureAgg":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        X = self._matrix(features)
        y = np.asarray([int(v) for v in labels])
        if len(y) != len(X):
            raise ConfigError(f"feature_agg.fit got {len(X)} feature rows and {len(y)} labels")
        if set(y.tolist()) != {0, 1}:
            raise DataError(
                "feature_agg needs labelled members and non-members among its training rows "
                f"(got labels {sorted(set(y.tolist()))}); raise feature_agg.n_train or add labels"
            )
        model = make_pipeline(StandardScaler(), LogisticRegression(C=float(self.C), max_iter=1000))
        model.fit(X, y)
        self.model_ = model
        return self

    def predict(self, features: Sequence[Sequence[float]]) -> list[float]:
        model = getattr(self, "model_", None)
        if model is None:
            raise ConfigError("feature_agg.predict called before fit")
        if not len(features):
            return []
        proba = model.predict_proba(self._matrix(features))
        member = list(model.classes_).index(1)
        return [float(p) for p in proba[:, member]]

    def _matrix(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        X = np.asarray(features, dtype=np.float64)
        width = len(self.feature_names())
        if X.ndim != 2 or X.shape[1] != width:
            raise ConfigError(f"feature_agg expects feature rows of {width} values, got shape {X.shape}")
        return X

