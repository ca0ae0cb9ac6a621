"""Top-k loss: a loss-like score through an API that generates text and returns the
top-k log-probs of each generated token, but does not score a given prompt.

For each word start of the passage (every whitespace-separated word after the first, at
most ``max_words`` of them), one greedy one-token generation is asked for, with the
passage up to the end of the previous word as the prompt (never ending in a space: for
BPE models the space belongs to the next word's first token, and a prompt ending in one
ends in a token the model rarely sees there)::

    GenerateRequest(prompt=text[:end of word i-1], max_tokens=1, temperature=0, top_logprobs=k)

The API's tokenizer is unknown, so the passage's next token is read off the answer by
text: the longest of the k returned candidates (decoded pieces, leading space included)
that is a prefix of the rest of the passage (which starts with the whitespace before word
i). So each position scores the first token of a word given the whole preceding text,
as ``loss`` scores it when that token is among the k likeliest.

**The floor.** When no candidate is a prefix of the rest (the word's first token is not
among the top k), the position gets the smallest log-prob among the returned k. That
token is less likely than every returned one, so the floor is an upper bound on its
true log-prob: such positions raise the score of unlikely text to the k-th log-prob,
and the score is a loss truncated at the k-th candidate. ``coverage`` in the details is
the share of positions found among the top k; with a small k on unfamiliar text it drops
and the floor decides the score. Two cases read another token than the tokenizer's own
first token: a shorter candidate when the tokenizer's token is longer and not among the
k (" the" for " theatre": its log-prob, too, is an upper bound then), and a longer
candidate that also begins the rest (" referendum" where the tokenizer writes
" referend" + "ums": rare, 1 in 168 positions on WikiMIA with SmolLM2). The commonest
shorter candidate is the lone space token (" "), a prefix of every word start: on 40
WikiMIA passages SmolLM2 matched it at 472 of 2,520 word starts, where its tokenizer's
own first token was the space in 153 (numbers: " 1984" is " " + "1" + "9" + "8" + "4")
and a longer one in 319; ``whitespace_only`` in the details counts these positions.
Requiring a candidate to reach into the word instead (floor otherwise) lowered the mean
error against the true log-probs from +1.11 to +0.52 but raised the mean absolute error
(1.13 to 1.30) and lowered the correlation with ``loss`` from 0.83 to 0.61
(benchmarks/results/topk_loss.md), so the longest candidate stays the rule. Matching is by
exact characters: a candidate that is a lone byte of a longer character (U+FFFD) or
that reads as nothing matches no text, so a word whose first token is such a byte (some
CJK characters and emoji) takes the floor even when that token is among the k.

Score: the mean over positions ("mean") or the mean of the lowest ``min_k_fraction`` of
them ("min_k", the Min-K% analogue); higher = more likely a member, as for ``loss``.

Cost: one request per word, known up front (one round, cached, batched); prompts grow
along the passage, so a passage of W scored words sends about W^2/2 prompt words in
W requests. In process, backends share the common prefixes: the HF backend reads all
the prompts of a passage off one forward pass of the longest, and llama.cpp resumes each
prompt in the KV cache of the one before it (from a multiple of 32 tokens, so about 16
tokens decoded per word), see docs/black-box.md. Positions whose answer has no top
log-probs at all (a server that stopped before generating) are left out and counted in
``unanswered``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from copyprobe.backends.base import GenerateRequest, Generation
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX_LOGITS, Method, Score
from copyprobe.methods.likelihood import lowest_k_mean
from copyprobe.params import COUNT, FRACTION, ModelSpec, OneOf, param
from copyprobe.registry import register
from copyprobe.text import split_words

STATISTICS = ("mean", "min_k")


@dataclass(frozen=True)
class Position:
    """One word start: the prompt ends at ``cut``; the passage goes on with ``text[cut:]``."""

    cut: int
    prompt_words: int  # words in the prompt (the approximate prompt tokens it costs)


def word_starts(text: str, max_words: int) -> list[Position]:
    """The positions scored: the first token of each word after the first, the first
    ``max_words`` of them, each with the passage up to the end of the previous word."""
    words = split_words(text)
    return [Position(cut=words[i - 1].end, prompt_words=i) for i in range(1, min(len(words), max_words + 1))]


def match_next(candidates: dict[str, float], rest: str) -> tuple[str | None, float]:
    """(the longest candidate that is a prefix of ``rest``, its log-prob), or (None, the
    smallest candidate log-prob: the floor). An empty candidate (a token that reads as
    nothing) matches no text."""
    found = [piece for piece in candidates if piece and rest.startswith(piece)]
    if found:
        best = max(found, key=len)
        return best, float(candidates[best])
    return None, float(min(candidates.values()))


@register
class TopkLoss(Method):
    name = "topk_loss"
    access = BLACK_BOX_LOGITS
    summary = ("Mean log-prob of each word's first token from one-token generations' top-k log-probs "
               "(no prompt scoring needed); a token outside the top k gets the k-th log-prob, an upper bound")

    k: int = param(20, COUNT, "top log-probs asked per position (20: the usual API maximum; "
                                         "OpenAI's legacy completions allow 5)")
    max_words: int = param(128, COUNT, "word starts scored per passage, the first N (one request each)")
    statistic: str = param("mean", OneOf(*STATISTICS),
                           "'mean' over positions, or 'min_k': the mean of the lowest min_k_fraction")
    min_k_fraction: float = param(0.2, FRACTION, "share of the lowest positions averaged (statistic=min_k), in (0, 1]")

    def requests(self, example: Example) -> list[GenerateRequest]:
        positions = word_starts(example.text, self.max_words)
        if not positions:
            raise RowError("the passage has fewer than two words: no word start to score")
        return [GenerateRequest(prompt=example.text[:p.cut], max_tokens=1, temperature=0.0, top_logprobs=self.k)
                for p in positions]

    def score(self, example: Example, responses: Sequence[Generation]) -> Score:
        value, details = self.statistic_of(example, responses)
        return Score(value, details)

    def statistic_of(self, example: Example, responses: Sequence[Generation]) -> tuple[float, dict]:
        """The passage's statistic from one model's answers to :meth:`requests`, and its details."""
        positions = word_starts(example.text, self.max_words)
        values, found, spaces, unanswered = [], 0, 0, 0
        for position, response in zip(positions, responses):
            candidates = response.top_logprobs[0] if response.top_logprobs else None
            if not candidates:
                unanswered += 1
                continue
            piece, value = match_next(candidates, example.text[position.cut:])
            values.append(value)
            found += piece is not None
            spaces += piece is not None and not piece.strip()
        if not values:
            raise RowError("the model returned no top log-probs for any word start")
        logprobs = np.asarray(values, dtype=np.float64)
        value = float(logprobs.mean()) if self.statistic == "mean" else lowest_k_mean(logprobs, self.min_k_fraction)
        reported = [r.prompt_tokens for r in responses]
        details = {
            "positions": len(values),
            "in_top_k": found,
            "coverage": found / len(values),
            "whitespace_only": spaces,  # found as a candidate that is only the space before the word
            "unanswered": unanswered,
            "requests": len(positions),
            "prompt_words": sum(p.prompt_words for p in positions),
        }
        if all(isinstance(n, int) for n in reported):  # what the backend counted, where it says
            details["prompt_tokens"] = int(sum(reported))
        return value, details


@register
class TopkReference(TopkLoss):
    """``topk_loss`` of the target minus ``topk_loss`` of a local reference model, asked
    the same way (same word starts, same k, same floor): the reference calibration of
    Carlini et al. (2021) through a generation-only API. Text that is easy for any model
    (formulaic, encyclopedic, repetitive) is easy for both and cancels; what the target
    alone finds easy remains. Computing the reference's score by the same top-k procedure,
    not from its full log-probs, gives both sides the same truncation at the k-th
    candidate. Cost: the target's requests (see ``topk_loss``) plus as many to the
    reference model, which runs where the user has it (in process, sharing prefixes)."""

    name = "topk_reference"
    calibration_models = ("model",)
    summary = ("topk_loss of the target minus topk_loss of a local reference model asked the same way "
               "(reference calibration through top-k log-probs of generations)")

    model: str = param(
        "auto", ModelSpec(auto=True),
        "reference model spec (a model you run, with top-k log-probs); 'auto' = gemma-3-270m, or smollm2 for gemma "
        "targets",
    )

    def models(self) -> set[str]:
        return {self.model}

    def requests(self, example: Example) -> list[GenerateRequest]:
        if self.model == "auto":
            raise ConfigError("topk_reference.model 'auto' must be resolved against the target model first")
        target = super().requests(example)
        return target + [replace(r, model=self.model) for r in target]

    def score(self, example: Example, responses: Sequence[Generation]) -> Score:
        half = len(responses) // 2
        target, target_details = self.statistic_of(example, responses[:half])
        reference, reference_details = self.statistic_of(example, responses[half:])
        return Score(target - reference, {"target": target, "reference": reference,
                                          "target_coverage": target_details["coverage"],
                                          "reference_coverage": reference_details["coverage"],
                                          "requests": len(responses)})
