"""Word-level text helpers shared by methods and copying metrics: words with their
character spans, normalisation for exact match, alignment of a model's token strings
with the text, and the longest common subsequence of two word lists."""

from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

from copyprobe.errors import RowError
from copyprobe.params import comma_items

_EDGE_PUNCT = string.punctuation + "“”‘’«»—–…„‚‹›"
_SPACE_MARKERS = {"Ġ": " ", "▁": " ", "Ċ": "\n", "ĉ": "\t"}


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


def response_spans(text: str, response: Any) -> list[tuple[int, int] | None]:
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


def split_specs(value: Any) -> list[str]:
    """The model specs of a list parameter (a comma-separated string, checked by
    params.ModelSpec(many=True), or a sequence)."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(s).strip() for s in value if str(s).strip()]
    return comma_items(str(value))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(a) * len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def article(word: str) -> str:
    """The indefinite article before ``word``: "an" before a vowel letter, else "a" (for
    copyprobe's own words: run kinds, canary word lists; "an hour" is not among them)."""
    return "an" if word[:1].lower() in "aeiou" else "a"
