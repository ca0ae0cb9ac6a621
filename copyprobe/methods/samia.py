"""SaMIA (Kaneko et al. 2024, "Sampling-based Pseudo-Likelihood for Membership Inference
Attacks", §3): black-box, generated text only.

The text's words are split at ``prefix_ratio`` (the first half by default): the model
continues the prefix ``n_samples`` times by sampling (temperature ``temperature``, each
sample with its own seed derived from ``seed``, so samples are cached and reproducible),
and each continuation is compared with the true remainder by ROUGE-N recall::

    candidate  = the continuation's words, all of them
    rouge_n    = |n-grams(candidate) & n-grams(reference)| / |n-grams(reference)|   (multiset overlap)
    samia(x)   = mean over samples of rouge_n          (zlib = true: rouge_n * zlib bytes of the candidate)

A model that saw the text tends to continue it with the true words. Higher = member.
Defaults follow the paper's main setting: ROUGE-1 (n = 1), temperature 1.0, top-k 50
and 10 samples (§4.1; fast-mia uses 5). ``top_k`` = 0 samples from the full
distribution, for an API that refuses a ``top_k`` field (OpenAI's own; vLLM and
llama.cpp's server read it). Words are whitespace-separated.

As in the authors' code (nlp-titech/samia, ``src/eval_samia.py``) the candidate is the
whole continuation, not cut to the reference's length, for ROUGE and for the zlib size
alike, so a continuation that finds the true words a few words late still counts them.
Deviations: ``max_tokens`` (128) bounds each continuation, where the authors generate up
to 1024 tokens with the prompt; for n > 1 the recall divides by the reference's n-gram
count (ROUGE-N), where their script divides by its word count (the same for n = 1).
"""

from __future__ import annotations

import zlib as zlib_module
from collections import Counter
from typing import Sequence

import numpy as np

from copyprobe.backends.base import GenerateRequest, Generation
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import BLACK_BOX, Method, Score
from copyprobe.params import COUNT, NON_NEGATIVE_INT, PER_TEXT, POSITIVE, SEED, Boolean, Real, param
from copyprobe.registry import register


def split_text(text: str, prefix_ratio: float) -> tuple[str, list[str]]:
    """(prompt: the first floor(ratio * W) words joined by spaces, reference: the other words)."""
    words = text.split()
    cut = int(len(words) * prefix_ratio)
    if cut < 1 or cut >= len(words):
        raise RowError(f"text of {len(words)} words leaves no prefix or no remainder at ratio {prefix_ratio}")
    return " ".join(words[:cut]), words[cut:]


def ngrams(words: Sequence[str], n: int) -> Counter:
    return Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def rouge_n_recall(candidate: Sequence[str], reference: Sequence[str], n: int) -> float:
    reference_grams = ngrams(reference, n)
    total = sum(reference_grams.values())
    if total == 0:
        return 0.0
    return sum((ngrams(candidate, n) & reference_grams).values()) / total


@register
class SaMIA(Method):
    name = "samia"
    access = BLACK_BOX
    summary = "ROUGE-N of sampled continuations of the first half against the true second half (Kaneko et al. 2024)"

    n_samples: int = param(10, PER_TEXT, "sampled continuations per text")
    prefix_ratio: float = param(0.5, Real(0, 1, low_open=True, high_open=True),
                                "share of the text's words given as the prompt, in (0, 1)")
    n: int = param(1, COUNT, "n of ROUGE-N")
    temperature: float = param(1.0, POSITIVE, "sampling temperature")
    top_k: int = param(50, NON_NEGATIVE_INT, "sample from the k likeliest tokens (0: the full distribution)")
    max_tokens: int = param(128, COUNT, "maximum tokens per continuation")
    zlib: bool = param(False, Boolean(), "multiply each ROUGE-N by the zlib-compressed size of the candidate (SaMIA*zlib)")
    seed: int = param(0, SEED, "base seed of the samples (sample j uses seed + j)")

    def requests(self, example: Example) -> list[GenerateRequest]:
        prompt, _ = split_text(example.text, self.prefix_ratio)
        return [GenerateRequest(prompt=prompt, max_tokens=self.max_tokens, temperature=self.temperature, top_k=self.top_k,
                                seed=(self.seed + j) % 2**32) for j in range(self.n_samples)]

    def score(self, example: Example, responses: Sequence[Generation]) -> Score:
        _, reference = split_text(example.text, self.prefix_ratio)
        values = []
        for generation in responses:
            candidate = generation.text.split()
            value = rouge_n_recall(candidate, reference, self.n)
            if self.zlib:
                value *= len(zlib_module.compress(" ".join(candidate).encode("utf-8")))
            values.append(value)
        return Score(float(np.mean(values)), {"rouge": [round(v, 6) for v in values]})
