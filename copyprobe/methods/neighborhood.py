"""Neighbourhood comparison (Mattern et al. 2023, "Membership Inference Attacks against
Language Models via Neighbourhood Comparison", Findings of ACL 2023).

A member is likelier under the target model than texts that differ from it by a few
words; a non-member is not special among its neighbours. For each text:

1. make ``n_neighbours`` neighbours: neighbour j replaces ``max(1, round(fraction * W))``
   of the text's W replaceable words (every word but the first), chosen with a
   random generator seeded by (``seed``, j, text). Substitutes come from a causal LM
   (``neighbour_model``: ``"target"`` or any model spec) that sees the text's left
   context, in one of two ways (``proposals``):

   * ``"top"`` (default): one greedy one-token GenerateRequest per replaced position
     asks for the ``candidates`` most likely next tokens (``top_logprobs``); those that
     are whole words at a word boundary, other than the original word, are the
     position's substitutes, and neighbour j draws one in proportion to its
     probability (seeded by ``seed``, j, position). The requests are deterministic,
     batched and shared by all neighbours, so a text costs one short forward pass per
     replaced position. This is the closest a causal LM gets to the paper's BERT
     top-k proposals; a proposed token that is only the start of a longer word
     still counts as a word (as with BERT word pieces);
   * ``"sample"``: neighbour j samples a continuation of ``max_new_tokens`` tokens at
     ``temperature`` with a seed derived from (``seed``, j, position) and takes its
     first word. Any backend that generates text works, but each proposal is its own
     sampled generation (batched by the HF backend, still one decoding run per
     proposal): several times slower.

   A substitute equal to the original word (ignoring case) leaves it unchanged; a
   neighbour with no change at all is dropped; the original's capitalisation is kept;
2. score the text and its neighbours with TokenLogprobsRequests (shared batching and
   cache with every other method);
3. score = ll(text) - mean_j ll(neighbour_j), where ll is the **mean** token
   log-probability. Higher = member.

Rounds: (1) the text's log-probs and all substitute proposals, (2) the neighbours'
log-probs.

Differences from the paper: Mattern et al. propose substitutes with BERT (a masked LM
that sees both sides of the word, with dropout on the word's embedding) and keep the
most likely replacements; copyprobe has no masked-LM request, so a causal LM proposes a
continuation of the left context only. Substitutes therefore fit the left context and
may fit the right context less well, which lowers neighbours' likelihood a little for
members and non-members alike. The paper compares the models' *loss*, which for a
causal LM is the mean per-token negative log-likelihood: using the mean (not the sum)
also keeps neighbours with longer or shorter substitutes comparable to the text.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from typing import Any, Sequence

import numpy as np

from copyprobe.backends.base import GenerateRequest, Generation, TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import CapabilityError, RowError
from copyprobe.methods.base import GREY_BOX, Method, MethodRun, Score
from copyprobe.params import COUNT, FRACTION, ModelSpec, OneOf, PER_TEXT, POSITIVE, SEED, param
from copyprobe.registry import register

TARGET = "target"
PROPOSALS = ("top", "sample")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_FIRST_WORD = re.compile(r"\s*([^\W_]+(?:['\u2019][^\W_]+)*)")


def _digest(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def replaceable_words(text: str) -> list[tuple[int, int]]:
    """(start, end) of every word that has some text before it (the first word is
    context only: a substitute needs a prompt)."""
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if text[: m.start()].strip()]


def choose_positions(text: str, n_words: int, fraction: float, seed: int, neighbour: int) -> list[int]:
    """Indices (into ``replaceable_words``) that neighbour ``neighbour`` replaces."""
    count = min(n_words, max(1, round(fraction * n_words)))
    rng = random.Random(_digest("positions", seed, neighbour, text))
    return sorted(rng.sample(range(n_words), count))


def substitute_seed(seed: int, neighbour: int, start: int) -> int:
    return int(_digest("substitute", seed, neighbour, start)[:8], 16)


def first_word(generated: str) -> str | None:
    match = _FIRST_WORD.match(generated)
    return match.group(1) if match else None


def word_candidates(
    generation: Generation, text: str, span: tuple[int, int], model: str
) -> list[tuple[str, float]]:
    """(word, probability) of the proposed next tokens that are whole words at the
    replaced word's boundary and differ from it. Where the original word follows
    whitespace, only tokens that start with whitespace qualify (else a word piece would
    be glued onto the previous word); where none does, any word-like token is used."""
    if not generation.top_logprobs:
        raise CapabilityError(
            f"model {model!r} returned no top log-probs for substitute proposals; "
            "set the parameter neighborhood.proposals to sample"
        )
    start, end = span
    original = text[start:end].lower()
    after_space = text[start - 1].isspace()
    fitting, any_word = [], []
    for piece, logprob in generation.top_logprobs[0].items():
        word = piece.strip()
        if not _WORD.fullmatch(word) or word.lower() == original:
            continue
        any_word.append((word, math.exp(logprob)))
        if piece[:1].isspace() == after_space:
            fitting.append((word, math.exp(logprob)))
    return fitting or any_word


def pick_candidate(options: Sequence[tuple[str, float]], seed: int, neighbour: int, start: int) -> str | None:
    """Draw one word in proportion to its probability, seeded per (neighbour, position)."""
    if not options:
        return None
    rng = random.Random(_digest("pick", seed, neighbour, start))
    words = [w for w, _ in options]
    weights = [p for _, p in options]
    return rng.choices(words, weights=weights, k=1)[0]


def apply_substitutes(text: str, spans: Sequence[tuple[int, int]], words: Sequence[str | None]) -> tuple[str, int]:
    """Replace each span with its word (None or the same word = keep). Returns the new
    text and how many words changed."""
    out, last, changed = [], 0, 0
    for (start, end), word in zip(spans, words):
        original = text[start:end]
        if word is None or word.lower() == original.lower():
            continue
        if original[:1].isupper() and word[:1].islower():
            word = word[:1].upper() + word[1:]
        out.append(text[last:start])
        out.append(word)
        last = end
        changed += 1
    out.append(text[last:])
    return "".join(out), changed


def mean_ll(response: TokenLogprobs) -> float:
    if not response.logprobs:
        raise RowError("text has fewer than two tokens: nothing to score")
    return float(np.mean(response.logprobs))


def neighbourhood_score(text_ll: float, neighbour_lls: Sequence[float]) -> float:
    """ll(text) - mean ll(neighbours), ll = mean token log-prob."""
    if not len(neighbour_lls):
        raise RowError("no neighbour differs from the text")
    return float(text_ll - np.mean(neighbour_lls))


@register
class Neighbourhood(Method):
    name = "neighborhood"
    access = GREY_BOX
    summary = "Log-likelihood relative to LM-proposed word-substitution neighbours (Mattern et al. 2023)"

    n_neighbours: int = param(10, PER_TEXT, "neighbours per text (VeilProbe's comparison of the baselines: 10)")
    fraction: float = param(
        0.1, FRACTION,
        "fraction of the words each neighbour replaces (at least one word), in (0, 1]",
    )
    neighbour_model: str = param(
        TARGET, ModelSpec(auto=True, keywords=(TARGET,)),
        "model that proposes substitute words: 'target' or a model spec",
    )
    proposals: str = param(
        "top", OneOf(*PROPOSALS),
        "'top': draw from the model's top next-token candidates (fast, batched); "
                             "'sample': sample a continuation per neighbour and word (slow)",
    )
    candidates: int = param(10, COUNT, "top next tokens considered per replaced word (proposals=top)")
    temperature: float = param(
        1.0, POSITIVE,
        "sampling temperature of the substitute proposals (proposals=sample, > 0)",
    )
    max_new_tokens: int = param(
        4, COUNT,
        "tokens generated per substitute proposal (proposals=sample; its first word is used)",
    )
    seed: int = param(0, SEED, "seed of the word positions and substitute samples")

    def models(self) -> set[str]:
        return set() if self.neighbour_model == TARGET else {self.neighbour_model}

    def _proposal_model(self) -> str | None:
        return None if self.neighbour_model == TARGET else self.neighbour_model

    def run(self, example: Example) -> MethodRun:
        text = example.text
        spans = replaceable_words(text)
        if not spans:
            raise RowError("text has no word to replace (needs at least two words)")
        plan = [choose_positions(text, len(spans), self.fraction, self.seed, j) for j in range(self.n_neighbours)]
        model = self._proposal_model()
        if self.proposals == "top":
            needed = sorted({i for positions in plan for i in positions})
            generate = [
                GenerateRequest(
                    prompt=text[: spans[i][0]].rstrip(),
                    max_tokens=1,
                    temperature=0.0,
                    top_logprobs=self.candidates,
                    model=model,
                )
                for i in needed
            ]
        else:
            generate = [
                GenerateRequest(
                    prompt=text[: spans[i][0]].rstrip(),
                    max_tokens=self.max_new_tokens,
                    temperature=float(self.temperature),
                    seed=substitute_seed(self.seed, j, spans[i][0]),
                    stop=("\n",),
                    model=model,
                )
                for j, positions in enumerate(plan)
                for i in positions
            ]
        responses = yield [TokenLogprobsRequest(text, stats=False), *generate]
        text_ll = mean_ll(responses[0])
        generations: list[Generation] = list(responses[1:])

        if self.proposals == "top":
            options = {
                i: word_candidates(g, text, spans[i], self.neighbour_model) for i, g in zip(needed, generations)
            }
            chosen = [
                [pick_candidate(options[i], self.seed, j, spans[i][0]) for i in positions]
                for j, positions in enumerate(plan)
            ]
        else:
            chosen, cursor = [], 0
            for positions in plan:
                chosen.append([first_word(g.text) for g in generations[cursor : cursor + len(positions)]])
                cursor += len(positions)

        neighbours: list[str] = []
        changed_words: list[int] = []
        for positions, words in zip(plan, chosen):
            neighbour, changed = apply_substitutes(text, [spans[i] for i in positions], words)
            if changed and neighbour != text:
                neighbours.append(neighbour)
                changed_words.append(changed)
        if not neighbours:
            raise RowError("no neighbour differs from the text (every proposed substitute was the original word)")

        scored = yield [TokenLogprobsRequest(n, stats=False) for n in neighbours]
        neighbour_lls = [mean_ll(r) for r in scored]
        return Score(
            neighbourhood_score(text_ll, neighbour_lls),
            {
                "ll": text_ll,
                "neighbour_ll": float(np.mean(neighbour_lls)),
                "neighbours": len(neighbours),
                "words_replaced": float(np.mean(changed_words)),
            },
        )
