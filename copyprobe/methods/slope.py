"""Probability Slope (AI Disclosures Project, SSRC; shared/papers/004).

A model grows more confident as it reads text it has seen, so the least-squares slope
of token probabilities over position is higher for members. N-gram normalization
subtracts, per token, the probability the model gives it from only its last n tokens,
removing what is predictable from local structure alone.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import Method
from copyprobe.methods.likelihood import token_logprobs
from copyprobe.params import Integer, OneOf, param
from copyprobe.registry import register

NORMALIZATIONS = ("none", "mean", "zscore")


@register
class Slope(Method):
    name = "slope"
    summary = "Slope of token probabilities over position, optionally n-gram normalized (004)"

    ngram: int = param(0, Integer(0, 5), "0 = raw probabilities; n in 1..5 = p(t | prefix) - p(t | last n tokens)")
    normalize: str = param(
        "none", OneOf(*NORMALIZATIONS),
        "none | mean (slope / |mean value|) | zscore (slope / std of values)",
    )

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        own = TokenLogprobsRequest(example.text, stats=False)
        if self.ngram == 0:
            return [own]
        return [own, TokenLogprobsRequest(example.text, ngram=self.ngram, stats=False)]

    def values(self, responses: Sequence[TokenLogprobs]) -> np.ndarray:
        probs = np.exp(token_logprobs(responses[0]))
        if self.ngram:
            local = np.exp(token_logprobs(responses[1]))
            if local.shape != probs.shape:
                raise RowError("n-gram and full-context scores have different lengths")
            probs = probs - local
        return probs

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        values = self.values(responses)
        if len(values) < 2:
            raise RowError("slope needs at least two scored tokens")
        slope = stats.linregress(np.arange(len(values), dtype=np.float64), values).slope
        if self.normalize == "none":
            return float(slope)
        # The source describes dividing the slope by the mean / standard deviation of
        # the same values; n-gram-adjusted values can have a negative mean, so divide by
        # its magnitude to keep "higher = member".
        scale = abs(values.mean()) if self.normalize == "mean" else values.std()
        if scale < 1e-12:
            raise RowError(f"slope normalization by {self.normalize}: values are constant or zero")
        return float(slope / scale)
