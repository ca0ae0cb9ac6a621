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

Two additions for audits, both off by default (the paper's single probe):

* ``probes`` > 1 cuts the passage at several places, every ``stride`` words from word k
  on (k, k + stride, ...) while a full suffix of k words remains; each probe continues
  everything before its cut (a longer cue than k words) and is compared with the next k
  words. The score is the mean similarity over the probes: a passage's score then reads
  more of it and is less noisy, which a document-level test needs.
* ``reference``: a second model continues the same prompts and its similarity is
  subtracted. Text any model continues well (formulaic, famous, repetitive) then scores
  no higher than text no model can guess; what remains is what the target knows beyond
  a model that did not train on the passage (the black-box analogue of the reference
  log-likelihood score).
"""

from __future__ import annotations

from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.text import lcs_length, rouge_l_scorer
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.params import AUTO, Boolean, COUNT, ModelSpec, NON_NEGATIVE_INT, OneOf, Optional, PROBABILITY, param
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
            import rouge_score  # noqa: F401
        except ImportError:
            raise ConfigError("prefix_probe needs rouge-score: pip install rouge-score") from None
        # rouge-score's numbers on Latin script; other scripts' words counted (it gave them none)
        _ROUGE = rouge_l_scorer(use_stemmer=False)
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
    probes: int = param(1, COUNT, "cuts per passage, every `stride` words from word k on, while k words remain after "
                                  "the cut; the score is the mean over them (1 = the paper's single probe)")
    stride: int = param(0, NON_NEGATIVE_INT, "words between cuts when probes > 1; 0 = prefix_tokens")
    reference: str | None = param(
        None, Optional(ModelSpec(auto=True)),
        "a model whose similarity on the same prompts is subtracted (auto = the default reference model of the "
        "target); none = no calibration")
    recorded_defaults = {"probes": 1, "stride": 0, "reference": None}

    def models(self) -> set[str]:
        return {self.reference} if self.reference else set()

    def cuts(self, n_words: int) -> list[int]:
        """Word positions where the probes cut the passage (each leaves k words to compare)."""
        k = self.prefix_tokens
        if n_words <= k:
            raise RowError(f"prefix_probe: passage has {n_words} words, needs more than prefix_tokens={k}")
        step = self.stride or k
        cuts = [k + i * step for i in range(self.probes) if k + i * step + k <= n_words]
        return cuts or [k]  # a short passage keeps the single probe, its suffix shorter than k

    def request(self, prefix: str, model: str | None = None) -> GenerateRequest:
        budget = self.max_tokens or 2 * self.prefix_tokens + 8
        if self.chat:
            return GenerateRequest(messages=(("user", CHAT_INSTRUCTION + prefix),), max_tokens=budget, temperature=0.0,
                                   model=model)
        return GenerateRequest(prompt=prefix, max_tokens=budget, temperature=0.0, model=model)

    def run(self, example: Example) -> MethodRun:
        if self.reference == AUTO:
            raise ConfigError("prefix_probe.reference 'auto' must be resolved against the target model first")
        words = example.text.split()
        probes = [(" ".join(words[:cut]), " ".join(words[cut:cut + self.prefix_tokens])) for cut in self.cuts(len(words))]
        models = [None] + ([self.reference] if self.reference else [])
        generations = yield [self.request(prefix, model) for model in models for prefix, _ in probes]
        rows = []
        for j, (prefix, suffix) in enumerate(probes):
            n = len(suffix.split())
            completion = " ".join(generations[j].text.split()[:n])
            rows.append({"prefix": prefix, "suffix": suffix, "completion": completion, **similarities(suffix, completion)})
            if self.reference:
                ref_completion = " ".join(generations[len(probes) + j].text.split()[:n])
                ref = similarities(suffix, ref_completion)
                rows[-1]["reference_completion"] = ref_completion
                rows[-1]["reference"] = {name: ref[name] for name in SIMILARITIES}
        means = {name: sum(r[name] for r in rows) / len(rows) for name in (*SIMILARITIES, "lcs_words")}
        if self.reference:  # the calibrated value of each similarity, so a dump reports all three
            for name in SIMILARITIES:
                means[name] -= sum(r["reference"][name] for r in rows) / len(rows)
        value = means[self.similarity]
        details: dict[str, Any] = {**rows[0], **means, "match": value > self.threshold}
        if len(rows) > 1 or self.reference:
            details["probes"] = rows
        return Score(value=value, details=details)
