"""DC-PDD: divergence-based calibration of token probabilities by corpus frequency.

Zhang et al. 2024, "Pretraining Data Detection for Large Language Models: A
Divergence-based Calibration Method" (EMNLP 2024). For the scored tokens x_1..x_n of a
text (see the token alignment in ``copyprobe.backends.base``)::

    p_i   = exp(log p(x_i | x_<i))                        model probability of the token
    f_i   = (count(x_i) + 1) / (N + |V|)                  Laplace-smoothed frequency of the
                                                          token in a reference corpus of N tokens
    c_i   = min(p_i * -log f_i, a)                        cross-entropy term, clipped above at a
    score = mean of c_i over the first occurrence of each distinct token id

Higher = more likely a member: a member's tokens are predicted confidently even where
they are rare in ordinary text. The clipping stops a few confidently predicted rare
tokens from dominating; only the first occurrence of a token counts because a
repeated token is easy to predict the second time.

Matches the authors' code (zhang-wei-chao/DC-PDD, ``com_det_sco.py``): ``a`` defaults
to 0.01 there, the frequency is Laplace-smoothed as above, and their reported score is
``-mean(c)`` with "larger for non-members", i.e. the same ranking as this score.

The frequency table comes from ``copyprobe freq build --tokenizer <the target model>``
(``copyprobe.freq``). It must be built with the target's tokenizer: the method sees
only token ids and token strings, so it checks that every id is inside the table's
vocabulary and, when the backend returns token strings, that at least half of them
are the table's strings for those ids; otherwise it stops the run with a ConfigError.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.freq import FrequencyTable, load_frequency_table
from copyprobe.methods.base import GREY_BOX, Method, Score
from copyprobe.params import Optional, POSITIVE, Text, param
from copyprobe.registry import register

FREQ_HINT = "build one with `copyprobe freq build --tokenizer <target model> --corpus FILES --out FREQ.npz`"


def first_occurrences(token_ids: Sequence[int]) -> np.ndarray:
    """Positions where a token id appears for the first time."""
    seen: set[int] = set()
    keep = []
    for i, token in enumerate(token_ids):
        if token not in seen:
            seen.add(token)
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def dc_pdd_terms(logprobs: Sequence[float], frequencies: Sequence[float], a: float) -> np.ndarray:
    """Per token min(p * -log f, a)."""
    p = np.exp(np.asarray(logprobs, dtype=np.float64))
    f = np.asarray(frequencies, dtype=np.float64)
    return np.minimum(p * -np.log(f), a)


def dc_pdd_score(response: TokenLogprobs, table: FrequencyTable, a: float) -> Score:
    scored_ids = list(response.token_ids[1:])
    if not response.logprobs:
        raise RowError("text has fewer than two tokens: nothing to score")
    if len(scored_ids) != len(response.logprobs):
        raise RowError("backend returned token ids and log-probs of different lengths")
    tokens = response.tokens[1:] if response.tokens is not None else None
    table.check_tokens(scored_ids, tokens)
    keep = first_occurrences(scored_ids)
    ids = np.asarray(scored_ids, dtype=np.int64)[keep]
    logprobs = np.asarray(response.logprobs, dtype=np.float64)[keep]
    terms = dc_pdd_terms(logprobs, table.frequencies(ids), a)
    return Score(
        float(terms.mean()),
        {"tokens_used": int(len(keep)), "clipped": int((terms >= a).sum())},
    )


@register
class DCPDD(Method):
    name = "dc_pdd"
    access = GREY_BOX
    summary = "Token probabilities calibrated by reference-corpus token frequency (Zhang et al. 2024, DC-PDD)"

    freq: str | None = param(
        None, Optional(Text()),
        "token frequency table (.npz) from `copyprobe freq build` with the target's tokenizer (required)",
    )
    a: float = param(0.01, POSITIVE, "upper clip of each token's p * -log(freq) term (paper's code: 0.01)")

    def validate(self) -> None:
        super().validate()
        if self.freq is None or not str(self.freq).strip():
            raise ConfigError(f"dc_pdd needs a token frequency table: set the parameter dc_pdd.freq to a FREQ.npz file; {FREQ_HINT}")
        load_frequency_table(self.freq)  # fail before any model work

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [TokenLogprobsRequest(example.text, stats=False)]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> Score:
        self.validate()
        return dc_pdd_score(responses[0], load_frequency_table(self.freq), float(self.a))
