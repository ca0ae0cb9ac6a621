"""SURP (Zhang & Wu 2024, "Adaptive Pre-training Data Detection for Large Language Models
via Surprising Tokens", §3).

A *surprising token* is one the model was confident about (low entropy of its next-token
distribution) yet gave the true token a low probability. A model that saw the text in
training is less often surprised this way, so the true tokens at such positions keep
higher log-probs for members. Per text, over its scored tokens t::

    H_t   = entropy of the next-token distribution at t       (= -mu_t, same pass as Min-K%++)
    L     = the max(1, floor(k * T)) of the T scored tokens with the lowest log p(x_t)
    S     = { t in L : H_t < max_entropy }
    surp(x) = mean_{t in S} log p(x_t)

Higher = member. Defaults (k = 0.2, max_entropy = 2.0 nats) and the selection are the
SoK benchmark's (computationalprivacy/mia_llms_benchmark, ``attacks/surp.py``): the
floor(k * T) lowest-log-prob tokens of the whole text (``topk``), then of those the ones
below the entropy threshold, so the entropy filter can leave fewer than floor(k * T).
Deviations from that code: at least one token is taken where floor(k * T) = 0 (it takes
none), ties in log-prob go to the earlier token (``topk`` leaves them unspecified), and a
text with no surprising token fails for this method only (recorded as a row failure)
where it scores -100.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest, entropies
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import GREY_BOX_FULL, Method, Score
from copyprobe.methods.likelihood import token_logprobs
from copyprobe.params import FRACTION, POSITIVE, param
from copyprobe.registry import register


def surprising(response: TokenLogprobs, k: float, max_entropy: float) -> np.ndarray:
    """Boolean mask of the surprising scored tokens (see the module docstring)."""
    values = token_logprobs(response)
    if response.mu is None:
        raise RowError("backend returned no next-token distribution statistics")
    entropy = np.asarray(entropies(response), dtype=np.float64)
    # a count, as the benchmark's topk: a threshold at np.quantile(values, k) keeps
    # floor(k(T-1)) + 1 tokens, often one more than its floor(k * T)
    lowest = np.zeros(len(values), dtype=bool)
    lowest[np.argsort(values, kind="stable")[:max(1, int(k * len(values)))]] = True
    return lowest & (entropy < max_entropy)


@register
class Surp(Method):
    name = "surp"
    access = GREY_BOX_FULL
    summary = "Mean log-prob of surprising tokens: low entropy, low true-token probability (Zhang & Wu 2024, SURP)"

    k: float = param(0.2, FRACTION, "fraction of the text's tokens, those with the lowest log-probs, that can be surprising")
    max_entropy: float = param(2.0, POSITIVE, "entropy (nats) below which the model counts as confident")

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [TokenLogprobsRequest(example.text, stats=True)]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> Score:
        mask = surprising(responses[0], self.k, self.max_entropy)
        if not mask.any():
            raise RowError("no surprising token (none is both low-entropy and low-probability)")
        values = token_logprobs(responses[0])
        return Score(float(values[mask].mean()), {"n_surprising": int(mask.sum())})
