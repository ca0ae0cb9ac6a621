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


# Code points rouge-score's tokenizer drops that belong to Latin script or to symbols shared by
# all scripts: everything below Greek (U+0370: ASCII punctuation, Latin-1, Latin Extended A/B,
# IPA, combining diacritics), phonetic extensions and Latin Extended Additional, general
# punctuation to miscellaneous symbols (letterlike ℓ, roman numerals), Latin Extended C/D/E,
# the ﬁ ligatures, fullwidth ASCII, Latin Extended F and G, mathematical letters, enclosed
# alphanumerics and legacy computing symbols.
_LATIN_OR_SHARED = ((0x0000, 0x036F), (0x1AB0, 0x1AFF), (0x1D00, 0x1EFF), (0x2000, 0x2BFF), (0x2C60, 0x2C7F),
                    (0xA720, 0xA7FF), (0xAB30, 0xAB6F), (0xFB00, 0xFB06), (0xFE20, 0xFE2F), (0xFF01, 0xFF5E),
                    (0x10780, 0x107BF), (0x1D400, 0x1D7FF), (0x1DF00, 0x1DFFF), (0x1F100, 0x1F1FF),
                    (0x1FB00, 0x1FBFF))
# letters and digits of a word; "No" (fractions, circled and archaic numbers) is no word, as in rouge-score
_WORD_CATEGORIES = frozenset(("Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl"))
# scripts written without spaces between words whose characters are words or morphemes: one
# token each (Han, kana, halfwidth katakana), as ROUGE for Chinese and Japanese is counted
_ONE_TOKEN_EACH = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F),
                   (0x20000, 0x3FFFF))


def _in(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


class RougeTokenizer:
    """rouge-score's tokenizer, extended to words of other scripts.

    rouge-score keeps only ``[a-z0-9]`` after lower-casing, so a Cyrillic, Greek, Hebrew,
    Arabic, Devanagari or Chinese text has no token, and copying it word for word scored
    ROUGE-L 0. Here ASCII letters and digits are tokens exactly as rouge-score makes them
    (Porter-stemmed when longer than 3 with ``use_stemmer``), and so is any text in Latin
    script (its accented letters split words there too, as in the published tool: the
    CopyBench numbers stay comparable); letters, digits and marks of other scripts make
    words as well (case-folded), and each Han or kana character is a token of its own.
    Numbers that are no digits (½, ①, archaic numerals) are dropped, as rouge-score drops
    them. Thai, Lao, Khmer and Myanmar, written without spaces, give one token per run of
    letters (no segmenter)."""

    def __init__(self, use_stemmer: bool = False):
        from rouge_score import tokenize, tokenizers

        self._default = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)
        self._stem = (lambda token: self._default._stemmer.stem(token) if len(token) > 3 else token) \
            if use_stemmer else (lambda token: token)
        self._valid = tokenize.VALID_TOKEN_RE

    def tokenize(self, text: str) -> list[str]:
        if text.isascii():
            return self._default.tokenize(text)
        tokens: list[str] = []
        run: list[str] = []
        run_ascii = False

        def close() -> None:
            if run:
                word = "".join(run)
                # casefold: characters are lower-cased one by one, so Greek's final sigma (ς) and
                # the σ of an upper-case ΟΔΟΣ must meet
                tokens.append(self._stem(word) if run_ascii else word.casefold())
                run.clear()

        # rouge-score lower-cases first (the Kelvin sign becomes k, a token); a character of Latin
        # script or a shared symbol is dropped even where its lower case is another script's (Ω, ω)
        for ch in (low for original in text for low in self._lower(original)):
            if ch is None:
                close()
                continue
            code = ord(ch)
            if ("a" <= ch <= "z") or ("0" <= ch <= "9"):
                if run and not run_ascii:
                    close()
                run_ascii = True
                run.append(ch)
            elif _in(code, _LATIN_OR_SHARED):
                close()
            elif _in(code, _ONE_TOKEN_EACH) and unicodedata.category(ch) in _WORD_CATEGORIES:
                close()
                tokens.append(ch)
            elif (category := unicodedata.category(ch)) in _WORD_CATEGORIES or (
                    run and not run_ascii and category[0] == "M"):
                if run and run_ascii:
                    close()
                run_ascii = False
                run.append(ch)
            else:
                close()
        close()
        return [t for t in tokens if not t.isascii() or self._valid.match(t)]

    @staticmethod
    def _lower(ch: str) -> str | tuple[str | None, ...]:
        """``ch`` lower-cased, its non-ASCII characters dropped (None) when ``ch`` itself is of
        Latin script or a shared symbol."""
        low = ch.lower()
        if low.isascii() or not _in(ord(ch), _LATIN_OR_SHARED):
            return low
        return tuple(c if c.isascii() else None for c in low)


def rouge_l_scorer(use_stemmer: bool = False) -> Any:
    """rouge-score's ROUGE-L scorer with :class:`RougeTokenizer`: the same numbers on text in
    Latin script, words of other scripts counted."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer, tokenizer=RougeTokenizer(use_stemmer))
