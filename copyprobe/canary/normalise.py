"""The one text normalisation of canary audits, used by `canary make`, `canary test` and
`canary find` (docs/canary.md, "Finding a canary in a reformatted copy").

A published copy is never the file the author marked: publishers re-wrap lines, curl
quotes, turn "--" into dashes, set ligatures, hyphenate words at line ends, change the
case of headings and render the text as HTML, EPUB, PDF or DOCX. Both the canary and the
searched text go through :func:`normalise`, which keeps only what survives all of that:

1. **markup stripped**: HTML/XML tags and comments become a word break, character
   references (``&rsquo;``, ``&#8212;``) are decoded;
2. **Unicode compatibility folding** (NFKD, then combining marks dropped): ligatures
   (``ﬁ`` -> ``fi``), full-width and superscript forms, accents (``é`` -> ``e``);
   invisible format characters (soft hyphen, zero-width space/joiner, BOM) are removed;
3. **case**: everything lower-cased (headings set in capitals, small caps);
4. **dashes and hyphenation**: every dash or hyphen (``-``, ``‐``, ``–``, ``—``, ``−``,
   ...) is removed together with the whitespace around it, so ``care-\\nfully`` (a
   hyphenated line break), ``slate-grey``, ``a -- b`` and ``a — b`` all read the same;
5. **quotes, punctuation, whitespace, line wrapping**: any run of characters that are
   not letters or digits (straight or curly quotes, commas, full stops, spaces, line
   breaks) becomes one space; leading and trailing ones are dropped.

So ``“Orla kept 4,817 ﬁne lamps—” she said`` reads ``orla kept 4 817 fine lampsshe said``.
Every character of the normalised text remembers the span of original text it came
from, so a match maps back to offsets in the original file text.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

# a tag (<p>, </em>, <br/>, <a href="...">) or a comment; a lone "<" in prose is not one
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>", re.S)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_DASHES = {"-", "\u2212", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2e3a", "\u2e3b",
           "\ufe58", "\ufe63", "\uff0d"}

_ALNUM, _SEP, _DASH = 0, 1, 2


@dataclass(frozen=True)
class Normalised:
    """Normalised text; ``starts[i]:ends[i]`` is the original span of character ``i``."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original [start, end) of normalised [start, end) (end > start)."""
        return self.starts[start], self.ends[end - 1]

    def find_all(self, needle: str) -> list[int]:
        """Normalised offsets of every (non-overlapping) occurrence of a normalised needle."""
        if not needle:
            return []
        found, at = [], self.text.find(needle)
        while at != -1:
            found.append(at)
            at = self.text.find(needle, at + len(needle))
        return found


def _fold(ch: str) -> str:
    # per character, so each output character keeps its source span
    return "".join(c for c in unicodedata.normalize("NFKD", ch.lower()) if not unicodedata.combining(c))


def _kind(ch: str) -> int | None:
    if ch.isalnum():
        return _ALNUM
    if ch in _DASHES or unicodedata.category(ch) == "Pd":
        return _DASH
    if unicodedata.category(ch) == "Cf":  # soft hyphen, zero-width space/joiner, BOM: invisible
        return None
    return _SEP


def normalise(text: str) -> Normalised:
    """The normalised text of ``text`` with the map back to it (module docstring)."""
    units: list[tuple[int, str, int, int]] = []  # (kind, char, start, end)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "<":
            m = _MARKUP.match(text, i)
            if m:
                units.append((_SEP, " ", i, m.end()))
                i = m.end()
                continue
        if ch == "&":
            m = _ENTITY.match(text, i)
            if m:
                for c in _fold(html.unescape(m.group())):
                    kind = _kind(c)
                    if kind is not None:
                        units.append((kind, c, i, m.end()))
                i = m.end()
                continue
        for c in _fold(ch):
            kind = _kind(c)
            if kind is not None:
                units.append((kind, c, i, i + 1))
        i += 1

    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    gap: list[tuple[int, str, int, int]] = []  # the run of non-letters since the last letter
    for unit in units:
        if unit[0] != _ALNUM:
            gap.append(unit)
            continue
        if gap and out and not any(g[0] == _DASH for g in gap):
            out.append(" ")
            starts.append(gap[0][2])
            ends.append(gap[-1][3])
        gap = []
        out.append(unit[1])
        starts.append(unit[2])
        ends.append(unit[3])
    return Normalised("".join(out), tuple(starts), tuple(ends))


def normalised_text(text: str) -> str:
    """Only the normalised string (for keys and containment)."""
    return normalise(text).text


def contains(haystack: str | Normalised, needle: str) -> bool:
    """Whether ``needle`` appears in ``haystack`` once both are normalised."""
    hay = haystack.text if isinstance(haystack, Normalised) else normalised_text(haystack)
    key = normalised_text(needle)
    return bool(key) and key in hay


__all__ = ["Normalised", "contains", "normalise", "normalised_text"]
