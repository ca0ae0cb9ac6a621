"""Prefix probing (Liu et al., 2023; the black-box baseline of DE-COP section 5.1.1).

A passage x = [p || s] is split into a prefix p of k "tokens" and a suffix s of the same
length (DE-COP: length(p) = length(s), k in {32, 50}). The target continues p greedily
and the completion is compared with s. Methods never see a tokenizer, so tokens are
approximated by whitespace words: p = the first ``prefix_tokens`` words, s = the next
``prefix_tokens`` words (fewer when the passage is shorter), and the completion is cut
to as many words as s before comparing.

Similarities (all in [0, 1], all recorded in the details):

* ``token_sort``: rapidfuzz ``fuzz.token_sort_ratio`` / 100 (the paper's "Token Sort",
  thefuzz and rapidfuzz compute the same ratio);
* ``rouge_l``: ROUGE-L F-measure (rouge-score, no stemming);
* ``lcs``: longest common subsequence of words / number of words of s.

Score = the chosen ``similarity``; ``match`` = similarity > ``threshold`` (paper: "higher
than 80%").
"""

from __future__ import annotations

from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.text import lcs_length
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.params import Boolean, COUNT, NON_NEGATIVE_INT, OneOf, PROBABILITY, param
from copyprobe.registry import register

SIMILARITIES = ("token_sort", "rouge_l", "lcs")

CHAT_INSTRUCTION = "Continue the following text exactly as it appears in its source. Output only the continuation.\n\n"


# Longest common subsequence of two word lists: the same measure CopyBench's literal task reports.
lcs_words = lcs_length


def token_sort(a: str, b: str) -> float:
    try:
        from rapidfuzz import fuzz
    except ImportError:
        raise ConfigError("prefix_probe needs rapidfuzz: pip install rapidfuzz") from None
    return fuzz.token_sort_ratio(a, b) / 100.0


_ROUGE = None


def rouge_l(reference: str, candidate: str) -> float:
    global _ROUGE
    if _ROUGE is None:
        try:
            from rouge_score import rouge_scorer
        except ImportError:
            raise ConfigError("prefix_probe needs rouge-score: pip install rouge-score") from None
        _ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    return _ROUGE.score(reference, candidate)["rougeL"].fmeasure


def similarities(reference: str, candidate: str) -> dict[str, float]:
    ref_words, cand_words = reference.split(), candidate.split()
    n_lcs = lcs_words(ref_words, cand_words)
    return {
        "token_sort": token_sort(reference, candidate),
        "rouge_l": rouge_l(reference, candidate),
        "lcs": n_lcs / len(ref_words) if ref_words else 0.0,
        "lcs_words": n_lcs,
    }


@register
class PrefixProbe(Method):
    name = "prefix_probe"
    access = BLACK_BOX
    summary = "prefix probing: continue the first k words greedily, similarity to the true next k words"

    prefix_tokens: int = param(
        32, COUNT,
        "length k of the prefix and of the compared suffix, in whitespace words (paper: 32 or 50 tokens)",
    )
    similarity: str = param(
        "token_sort", OneOf(*SIMILARITIES),
        "score: token_sort (rapidfuzz), rouge_l, or lcs (LCS words / suffix words)",
    )
    threshold: float = param(0.8, PROBABILITY, "a completion matches when its similarity is above this (paper: 0.8)")
    chat: bool = param(
        False, Boolean(),
        "ask with a chat instruction (for chat-only APIs) instead of a plain completion prompt",
    )
    max_tokens: int = param(0, NON_NEGATIVE_INT, "tokens generated; 0 = auto (2 x prefix_tokens + 8)")

    def split(self, text: str) -> tuple[str, str]:
        words = text.split()
        k = self.prefix_tokens
        if len(words) <= k:
            raise RowError(f"prefix_probe: passage has {len(words)} words, needs more than prefix_tokens={k}")
        return " ".join(words[:k]), " ".join(words[k : 2 * k])

    def request(self, prefix: str) -> GenerateRequest:
        budget = self.max_tokens or 2 * self.prefix_tokens + 8
        if self.chat:
            return GenerateRequest(messages=(("user", CHAT_INSTRUCTION + prefix),), max_tokens=budget, temperature=0.0)
        return GenerateRequest(prompt=prefix, max_tokens=budget, temperature=0.0)

    def run(self, example: Example) -> MethodRun:
        prefix, suffix = self.split(example.text)
        (generation,) = yield [self.request(prefix)]
        n = len(suffix.split())
        completion = " ".join(generation.text.split()[:n])
        sims = similarities(suffix, completion)
        value = sims[self.similarity]
        details: dict[str, Any] = {
            "prefix": prefix,
            "suffix": suffix,
            "completion": completion,
            **sims,
            "match": value > self.threshold,
        }
        return Score(value=value, details=details)
