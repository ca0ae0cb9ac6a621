"""A deterministic model-free backend for tests and examples (like inspect's mockllm).

Tokens are whitespace-separated words. Log-probs come from a hash of (previous word,
word), so they are stable across runs and processes; ``member_texts`` get every token's
log-prob raised, which makes them "members" for methods that look at likelihood.
A request with a ``context`` scores every word of the text, the first one after the
context's last word; under a context, member words keep only half their boost (so a
non-member prefix lowers members' likelihood more than non-members', as ReCaLL finds).
Generation answers with ``generate_fn(request)`` or echoes the prompt's last words; with
``top_logprobs`` it also gives, per generated word, the k likeliest next words (" word",
space included) among the prompt's words, the member words and a few common ones, with
the log-probs token log-probs give them after the same previous word.
Gradient norms grow with the text's fake loss. Every call is counted in ``calls``
so tests can check what reached the backend.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from typing import Any, Callable, Iterable

from copyprobe.backends.base import (
    ALL_CAPABILITIES,
    Backend,
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    Generation,
    GenerateRequest,
    GradNorm,
    GradNormRequest,
    TokenLogprobs,
    TokenLogprobsRequest,
)


# words every fake next-token distribution ranges over, besides the prompt's and the members'
COMMON_WORDS = ("the", "of", "and", "a", "to", "in", "was", "it", "is", "that")


def _unit(*parts: str) -> float:
    """Deterministic number in [0, 1) from strings."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FakeBackend(Backend):
    def __init__(
        self,
        *,
        spec: str = "fake",
        member_texts: Iterable[str] = (),
        boost: float = 2.0,
        capabilities: Iterable[str] = ALL_CAPABILITIES,
        generate_fn: Callable[[GenerateRequest], str] | None = None,
    ):
        self.spec = spec
        self.member_words = {w for t in member_texts for w in t.split()}
        self.boost = boost
        self.capabilities = frozenset(capabilities)
        self.generate_fn = generate_fn
        self.calls: Counter[str] = Counter()  # kind -> number of requests answered

    streams_results = True

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"fake:{self.spec}:{self.boost}".encode()).hexdigest()[:16]

    def _word_logprob(self, prev: str, word: str, boost: float | None = None) -> float:
        lp = -1.0 - 8.0 * _unit(self.spec, prev, word)
        if word in self.member_words:
            lp = min(-0.05, lp + (self.boost if boost is None else boost))
        return lp

    def _each(self, requests: list[Any], respond: Callable[[Any], Any], progress=None, on_result=None) -> list[Any]:
        """Answer one request at a time, streaming each answer as it is ready."""
        out = []
        for request in requests:
            out.append(respond(request))
            self.calls[request.kind] += 1
            if on_result:
                on_result(len(out) - 1, out[-1])
            if progress:
                progress(1)
        return out

    def _answer_token_logprobs(self, requests: list[TokenLogprobsRequest], progress=None, on_result=None) -> list[Any]:
        return self._each(requests, self._token_logprobs, progress, on_result)

    def _token_logprobs(self, request: TokenLogprobsRequest) -> TokenLogprobs:
        words = request.text.split()
        ids = [int(_unit("id", w) * 50000) for w in words]
        lps, mus, sigmas, ranks = [], [], [], []
        context = request.context.split()
        boost = self.boost / 2 if context else None
        if context:  # every word is scored, the first after the context's last word
            words = context[-1:] + words
        for i in range(1, len(words)):
            prev = words[i - 1]
            if request.ngram is not None and i >= request.ngram:
                # shorter context than the full prefix: a different (fake) value
                prev = "ngram|" + "|".join(words[i - request.ngram : i])
            lp = self._word_logprob(prev, words[i], boost)
            lps.append(lp)
            mus.append(-3.0 - _unit("mu", words[i - 1]))
            sigmas.append(1.0 + _unit("sigma", words[i - 1]))
            ranks.append(1 + int(math.exp(-lp)))
        if request.ngram is not None and request.ngram_drop_short:
            # only the words with n predecessors (the fake has no leading special tokens)
            keep = max(len(words) - request.ngram, 0)
            lps, mus, sigmas, ranks = (values[len(values) - keep:] for values in (lps, mus, sigmas, ranks))
        stats = request.stats
        return TokenLogprobs(
            token_ids=ids,
            logprobs=lps,
            mu=mus if stats else None,
            sigma=sigmas if stats else None,
            rank=ranks if stats else None,
            tokens=words[1:] if context else words,
        )

    def _answer_generate(self, requests: list[GenerateRequest], progress=None, on_result=None) -> list[Any]:
        return self._each(requests, self._generate, progress, on_result)

    def _generate(self, request: GenerateRequest) -> Generation:
        if self.generate_fn is not None:
            text = self.generate_fn(request)
        else:
            source = request.prompt or (request.messages[-1][1] if request.messages else "")
            text = " ".join(source.split()[-request.max_tokens :])
        for stop in request.stop:
            if stop and stop in text:
                text = text[: text.index(stop)]
        top = None
        if request.top_logprobs > 0:
            source = (request.prompt or (request.messages[-1][1] if request.messages else "")).split()
            words = source + text.split()
            vocabulary = sorted(set(source) | self.member_words | set(COMMON_WORDS))
            top = []
            # one distribution per generated word, at least the one after the prompt
            for step in range(max(len(text.split()), 1)):
                at = len(source) + step
                prev = words[at - 1] if 0 < at <= len(words) else ""
                ranked = sorted(vocabulary, key=lambda w: (-self._word_logprob(prev, w), w))
                top.append({" " + w: self._word_logprob(prev, w) for w in ranked[:request.top_logprobs]})
        return Generation(
            text=text,
            finish_reason="stop",
            prompt_tokens=len((request.prompt or "").split()),
            completion_tokens=len(text.split()),
            top_logprobs=top,
        )

    def _answer_choice_logprobs(self, requests: list[ChoiceLogprobsRequest], progress=None, on_result=None) -> list[Any]:
        return self._each(requests, self._choice_logprobs, progress, on_result)

    def _choice_logprobs(self, request: ChoiceLogprobsRequest) -> ChoiceLogprobs:
        raw = {c: -1.0 - 4.0 * _unit(self.spec, request.prompt, c) for c in request.choices}
        norm = math.log(sum(math.exp(v) for v in raw.values())) if raw else 0.0
        return ChoiceLogprobs(logprobs={c: v - norm for c, v in raw.items()})

    def _answer_grad_norm(self, requests: list[GradNormRequest], progress=None, on_result=None) -> list[Any]:
        return self._each(requests, self._grad_norm, progress, on_result)

    def _grad_norm(self, request: GradNormRequest) -> GradNorm:
        # a fake gradient that shrinks with the text's likelihood (members have lower loss)
        logprobs = self._token_logprobs(TokenLogprobsRequest(request.text)).logprobs or [0.0]
        loss = -sum(logprobs) / len(logprobs)
        return GradNorm(global_norm=loss * 10.0, mean_tensor_norm=loss, loss=loss)
