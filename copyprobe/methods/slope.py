"""Probability Slope (AI Disclosures Project, SSRC; shared/papers/004).

A model grows more confident as it reads text it has seen, so the least-squares slope
of the per-token values over position is higher for members. N-gram normalization
subtracts, per token, the value the model gives it from only its last n tokens,
removing what is predictable from local structure alone.

Three variants (``variant``), all with the same ``ngram`` (0-5) and ``normalize``
(none / mean / zscore), 18 settings each; docs/methods.md has the comparison:

``notebook`` (default): the computation of the authors' notebook, which produced the
    seed's published table (as described in copyprobe issue 29; the notebook itself is
    not public where we could look). Values are token **log**-probabilities, minus the
    n-gram log-probability for n >= 1; only the T - n tokens that have n text tokens
    before them are fitted (T = the text's own tokens, leading special tokens such as
    <bos> do not count); ``mean`` = slope - mean(values), ``zscore`` = (slope -
    mean(values)) / std(values) (population std, ddof = 0).
``probability``: the seed text's literal reading ("fit a line through the predicted
    probabilities", 004 section 1): the same alignment and normalisations over
    probabilities p(t | prefix) - p(t | last n tokens).
``legacy``: what copyprobe computed before issue 29, kept so old runs can be
    reproduced and named (a run.json whose slope parameters have no ``variant`` was
    written by it): probabilities over all T - 1 scored tokens, the first ones without an
    n-token context getting the value 0; ``mean`` = slope / |mean|, ``zscore`` = slope / std.

The notebook's ``mean`` and ``zscore`` subtract the mean log-probability, which is
higher for likely text, so for those settings a member does not necessarily score
higher; copyprobe keeps the notebook's sign so that its values are the notebook's.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar, Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import Method
from copyprobe.methods.likelihood import answer_array, token_logprobs
from copyprobe.params import Integer, OneOf, param
from copyprobe.registry import register

NORMALIZATIONS = ("none", "mean", "zscore")
VARIANTS = ("notebook", "probability", "legacy")


def fitted_slope(values: np.ndarray) -> float:
    """Least-squares slope of ``values`` against 0, 1, 2, ...: the covariance formula of
    scipy.stats.linregress (``np.cov(x, y, bias=1)``, then ssxy / ssx), bit for bit,
    without its 1 ms of argument handling per call (1.6 s on WikiMIA's 1,650 passages).
    np.cov's own steps, without its checks (half its 70 us a call): the rows of x and y
    centred on their means, their products in one matrix product, scaled by 1/n. The
    centred positions are exact and kept per length (:func:`centred_positions`), and y's
    mean is np.cov's (the same pairwise sum, divided by n): 7 us a call instead of 12."""
    values = np.asarray(values, dtype=np.float64)  # np.cov's float64 sums whatever came in
    n = len(values)
    rows = np.empty((2, n))
    rows[0] = centred_positions(n)
    np.subtract(values, np.add.reduce(values) / n, out=rows[1])
    covariance = np.dot(rows, rows.T)
    covariance *= np.true_divide(1, n)
    return float(covariance[0, 1] / covariance[0, 0])


# lengths up to this have their centred positions kept (128 of them: at most 4 MB)
KEPT_POSITIONS = 4096


def centred_positions(n: int) -> np.ndarray:
    """0, 1, ..., n - 1 less their mean, (n - 1) / 2, read-only. Exactly what np.cov
    centres them to: every partial sum of 0..n-1 is an integer below 2**53, so their mean
    is exact, and so is each difference (a multiple of 1/2)."""
    return _kept_positions(n) if n <= KEPT_POSITIONS else _positions(n)


def _positions(n: int) -> np.ndarray:
    positions = np.arange(n) - (n - 1) / 2
    positions.setflags(write=False)
    return positions


_kept_positions = functools.lru_cache(maxsize=128)(_positions)


@register
class Slope(Method):
    name = "slope"
    summary = "Slope of token log-probabilities over position, optionally n-gram normalized (004, authors' notebook)"
    # a run.json written before `variant` existed was computed by the legacy variant
    recorded_defaults: ClassVar[dict[str, Any]] = {"variant": "legacy"}

    ngram: int = param(0, Integer(0, 5), "0 = raw values; n in 1..5 = value(t | prefix) - value(t | last n tokens)")
    normalize: str = param(
        "none", OneOf(*NORMALIZATIONS),
        "none | mean (slope - mean of the values) | zscore ((slope - mean) / std of the values), "
        "the notebook's sign: with these a member need not score higher; "
        "legacy variant: slope / |mean|, slope / std",
    )
    variant: str = param(
        "notebook", OneOf(*VARIANTS),
        "notebook (log-probs, the authors' notebook) | probability (probabilities) | "
        "legacy (copyprobe before issue 29, to reproduce old runs)",
    )

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        own = TokenLogprobsRequest(example.text, stats=False)
        if self.ngram == 0:
            return [own]
        # the notebook's alignment: only the tokens that have their n-token context
        local = TokenLogprobsRequest(example.text, ngram=self.ngram, stats=False,
                                     ngram_drop_short=self.variant != "legacy")
        return [own, local]

    def values(self, responses: Sequence[TokenLogprobs]) -> np.ndarray:
        """The per-token values the line is fitted through."""
        full = token_logprobs(responses[0])
        if not self.ngram:
            return full if self.variant == "notebook" else np.exp(full)
        local = answer_array(responses[1], "logprobs")
        if self.variant == "legacy":
            if local.shape != full.shape:
                raise RowError("n-gram and full-context scores have different lengths")
            return np.exp(full) - np.exp(local)
        # the n-gram answer holds the last T - n scored tokens
        if len(local) > len(full):
            raise RowError("the n-gram answer has more tokens than the full-context one")
        full = full[len(full) - len(local):]
        if self.variant == "notebook":
            return full - local
        return np.exp(full) - np.exp(local)

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        values = self.values(responses)
        if len(values) < 2:
            needed = "two scored tokens" if not self.ngram else f"two tokens with {self.ngram} tokens before them"
            raise RowError(f"slope needs at least {needed}")
        slope = fitted_slope(values)
        if self.normalize == "none":
            return slope
        if self.variant == "legacy":
            # dividing by the magnitude of the mean kept "higher = member" for n-gram
            # values with a negative mean
            scale = abs(values.mean()) if self.normalize == "mean" else values.std()
            if scale < 1e-12:
                raise RowError(f"slope normalization by {self.normalize}: values are constant or zero")
            return slope / scale
        centred = slope - float(values.mean())
        if self.normalize == "mean":
            return centred
        std = float(values.std())
        if std < 1e-12:
            raise RowError("slope zscore normalization: the values are constant")
        return centred / std
