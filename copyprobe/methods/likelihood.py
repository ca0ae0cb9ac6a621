"""Likelihood baselines that need only the text's own token log-probs: loss, zlib,
lowercase, Min-K% and Min-K%++. All of them share one forward pass per text: they ask
for the same TokenLogprobsRequest, which the runner answers once.

Formulas follow the Min-K%++ authors' code (zjysteven/mink-plus-plus: run.py for loss,
zlib, Min-K% and Min-K%++, run_ref.py for lowercase), which agrees with the Min-K%
authors' code (swj0419/detect-pretrain-code, src/run.py) up to its sign convention; in
all of them ``ll`` is the mean token log-likelihood (= -loss) over the scored tokens.
docs/methods.md gives the file and line of each formula.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import GREY_BOX_FULL, Method
from copyprobe.params import FRACTION, param
from copyprobe.registry import register


def answer_array(response: TokenLogprobs, name: str) -> np.ndarray | None:
    """The answer's list ``name`` as a float64 array: the one the answer keeps (shared by
    every method, read-only), or a conversion of the list for other response objects."""
    if isinstance(response, TokenLogprobs):
        return response.array(name)
    values = getattr(response, name)
    return None if values is None else np.asarray(values, dtype=np.float64)


def token_logprobs(response: TokenLogprobs) -> np.ndarray:
    values = answer_array(response, "logprobs")
    if values.size == 0:
        raise RowError("text has fewer than two tokens: nothing to score")
    return values


def mean(values: np.ndarray) -> float:
    """``values.mean()`` bit for bit (the same pairwise sum, divided by the count) without
    its Python-level argument handling: 4 us of a 5 us call, five times a passage."""
    return float(np.add.reduce(values)) / len(values)


def mean_loglik(response: TokenLogprobs) -> float:
    """Mean log-probability of the scored tokens, i.e. minus the LM loss."""
    return mean(token_logprobs(response))


def lowest_k_mean(values: np.ndarray, k: float) -> float:
    """Mean of the lowest floor(k*T) values, at least one (Min-K% / Min-K%++)."""
    count = max(1, int(len(values) * k))
    return mean(np.sort(values)[:count])


def zlib_length(text: str) -> int:
    return len(zlib.compress(text.encode("utf-8")))


class _OwnLogprobsMethod(Method):
    """A method that needs exactly one TokenLogprobsRequest of the text itself."""

    needs_stats = False

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        # Backends that can give mu/sigma cheaply upgrade stats=False requests to
        # stats=True (Backend.canonical), so all these methods still share one pass.
        return [TokenLogprobsRequest(example.text, stats=self.needs_stats)]


@register
class Loss(_OwnLogprobsMethod):
    name = "loss"
    summary = "Mean token log-likelihood (-loss); Yeom et al. 2018 / Carlini et al. 2021"

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        return mean_loglik(responses[0])


@register
class Zlib(_OwnLogprobsMethod):
    name = "zlib"
    summary = "Log-likelihood divided by the zlib-compressed byte length (Carlini et al. 2021)"

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        # As in the Min-K%++ code: ll / len(zlib.compress(text)). ll < 0, so texts the
        # model finds likely relative to their information content score higher.
        return mean_loglik(responses[0]) / zlib_length(example.text)


@register
class Lowercase(Method):
    name = "lowercase"
    summary = "Log-likelihood of the lower-cased copy divided by the text's own (Carlini et al. 2021)"

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [
            TokenLogprobsRequest(example.text, stats=False),
            TokenLogprobsRequest(example.text.lower(), stats=False),
        ]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        # ll_lower / ll, the Min-K%++ authors' run_ref.py (scores['lowercase']) and, with
        # their evaluation's sign flip, the Min-K% authors' src/run.py (-(log ppl_lower /
        # log ppl), ranked by its negative). A member's own casing is much likelier than
        # its lower-cased copy, so ll is near 0 and the ratio large.
        ll = mean_loglik(responses[0])
        ll_lower = mean_loglik(responses[1])
        if ll == 0:
            raise RowError("the text has zero loss: lowercase ratio undefined")
        return ll_lower / ll


@register
class MinK(_OwnLogprobsMethod):
    name = "min_k"
    summary = "Mean of the lowest k% token log-probs (Shi et al. 2024, Min-K% Prob)"

    k: float = param(0.2, FRACTION, "fraction of tokens with the lowest log-prob to average, in (0, 1]")

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        return lowest_k_mean(token_logprobs(responses[0]), self.k)


def min_k_pp_values(response: TokenLogprobs) -> np.ndarray:
    """Per token (log p - mu) / sigma, with mu, sigma of log p under the next-token
    distribution (Zhang et al. 2024, Min-K%++)."""
    values = token_logprobs(response)
    if response.mu is None or response.sigma is None:
        raise RowError("backend returned no next-token distribution statistics")
    mu = answer_array(response, "mu")
    sigma = answer_array(response, "sigma")
    # The clamp only guards sigma = 0 (a one-hot next-token distribution), where the
    # authors' code divides by zero and gets inf/nan. It does not bound z: sigma >=
    # sqrt(p) * |log p - mu|, so |z| is bounded only by 1/sqrt(p): a confident position
    # with an unlikely true token gives a z far below -1000, as the authors' formula does.
    return (values - mu) / np.maximum(sigma, 1e-6)


@register
class MinKPlusPlus(_OwnLogprobsMethod):
    name = "min_k_pp"
    access = GREY_BOX_FULL
    needs_stats = True
    summary = "Min-K% over token log-probs standardised by the next-token distribution (Zhang et al. 2024)"

    k: float = param(0.2, FRACTION, "fraction of tokens with the lowest standardised log-prob to average, in (0, 1]")

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        return lowest_k_mean(min_k_pp_values(responses[0]), self.k)

