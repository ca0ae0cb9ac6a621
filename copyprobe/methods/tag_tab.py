"""Tag&Tab (Antebi et al. 2025, "Tag&Tab: Pretraining Data Detection in Large Language
Models Using Keyword-Based Membership Inference Attack", §3).

Two steps:

1. **Tag**: choose the text's ``k`` keywords, the words with the highest entropy (the
   least predictable words according to corpus statistics). Here a word's entropy is
   its self-information under a reference corpus, ``I(w) = sum over w's tokens t of
   -log f(t)`` with ``f`` the Laplace-smoothed token frequency of a
   :class:`~copyprobe.freq.FrequencyTable` (``copyprobe freq build``, the same table as
   DC-PDD). Candidates are words with an alphanumeric core that are not English stop
   words and whose tokens are all scored; ties keep text order.
2. **Tab**: the score is the mean token log-probability over the tokens of those
   keywords (the text's own TokenLogprobsRequest, shared with loss / Min-K%).

Higher = member. Differences from the paper: the paper builds a word-level entropy map
from a corpus and adds spaCy named entities to the keywords; copyprobe ranks words by
token-level corpus frequency (no word map, no spaCy dependency) and uses no NER.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.freq import FrequencyTable, load_frequency_table
from copyprobe.methods.base import GREY_BOX, Method, Score
from copyprobe.params import COUNT, Optional, Text, param
from copyprobe.registry import register
from copyprobe.text import response_spans, split_words

FREQ_HINT = "build one with `copyprobe freq build --tokenizer <target model> --corpus FILES --out FREQ.npz`"

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves
""".split())


def word_tokens(text: str, response: TokenLogprobs) -> list[tuple[str, list[int]]]:
    """(word core, indices of its tokens in ``response.token_ids``) for each word with an
    alphanumeric core whose tokens are located and scored (token 0 of a plain request
    has no log-prob)."""
    spans = response_spans(text, response)
    first_scored = len(response.token_ids) - len(response.logprobs)  # 1 plain, 0 after a context
    located = [(t, span) for t, span in enumerate(spans) if span is not None]
    out, lo = [], 0
    for word in split_words(text):
        if not any(ch.isalnum() for ch in word.core):
            continue
        while lo < len(located) and located[lo][1][1] <= word.core_start:
            lo += 1
        members, k = [], lo
        while k < len(located) and located[k][1][0] < word.core_end:
            if located[k][1][1] > word.core_start:
                members.append(located[k][0])
            k += 1
        if members and min(members) >= first_scored:
            out.append((word.core, members))
    return out


def keywords(text: str, response: TokenLogprobs, table: FrequencyTable, k: int) -> list[tuple[str, list[int]]]:
    """The ``k`` non-stop-words with the highest self-information (text order on ties)."""
    candidates = [(word, tokens) for word, tokens in word_tokens(text, response)
                  if word.lower() not in STOP_WORDS]
    if not candidates:
        raise RowError("no keyword candidate (every word is a stop word or unscored)")
    ids = np.asarray(response.token_ids, dtype=np.int64)
    table.check_tokens(response.token_ids, response.tokens)
    information = -np.log(table.frequencies(ids))
    scores = [float(information[tokens].sum()) for _, tokens in candidates]
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))[:k]
    return [candidates[i] for i in sorted(order)]


@register
class TagTab(Method):
    name = "tag_tab"
    access = GREY_BOX
    summary = "Mean log-prob of the k highest-entropy keywords (Antebi et al. 2025, Tag&Tab)"

    k: int = param(5, COUNT, "number of keywords per text (the paper's default top-K entropy words)")
    freq: str | None = param(
        None, Optional(Text()),
        "token frequency table (.npz) from `copyprobe freq build` with the target's tokenizer (required)",
    )

    def validate(self) -> None:
        super().validate()
        if self.freq is None or not str(self.freq).strip():
            raise ConfigError(f"tag_tab ranks words by corpus frequency: set the parameter tag_tab.freq to a FREQ.npz file; {FREQ_HINT}")
        load_frequency_table(self.freq)  # fail before any model work

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [TokenLogprobsRequest(example.text)]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> Score:
        self.validate()
        response = responses[0]
        chosen = keywords(example.text, response, load_frequency_table(self.freq), self.k)
        offset = len(response.token_ids) - len(response.logprobs)
        values = [response.logprobs[t - offset] for _, tokens in chosen for t in tokens]
        return Score(float(np.mean(values)), {"keywords": [word for word, _ in chosen]})
