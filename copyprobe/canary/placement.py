"""Where a canary may go: sentence and paragraph boundaries in narrative prose only.

An editor deletes a sentence that interrupts dialogue, sits in a heading or a list, or
breaks a table or a code block; a model can single out an odd sentence too. So the
document is cut into paragraphs (blank-line separated) and a paragraph is **narrative
prose** only if

* it is not inside a fenced code block (```` ``` ```` / ``~~~``) and no line of it is a
  fence, a Markdown heading (``#``), a block quote (``>``), a list item (``-``, ``*``,
  ``+``, ``•``, ``1.``, ``a)``), a table row (``|``, or a rule of ``-+=|:``), or markup
  (a line starting with ``<``); not every line is indented by 4 spaces or a tab (code);
* it has at least :data:`MIN_WORDS` words, is not written in capitals, and ends a sentence
  (``.``, ``!``, ``?``, possibly followed by a closing quote or bracket) or holds one
  inside it. A paragraph without a final full stop is a heading ("Chapter One") only when
  no sentence ends inside it: a long paragraph whose last sentence is cut off (a text that
  is one paragraph, with no blank lines) keeps every boundary before that last sentence.

Inside a prose paragraph the sentences are split at ``.``/``!``/``?`` followed by
whitespace and a capital letter (not after a common abbreviation such as "Mr." or an
initial). A canary may go before the first sentence, between two sentences, or after the
last one, of a paragraph that holds **no quotation mark** (straight or curly double
quotes, guillemets, or a single quote that opens or closes a quotation rather than an
apostrophe): never inside or beside dialogue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_WORDS = 12
PREVIEW = 80

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_NOT_PROSE_LINE = re.compile(
    r"^\s{0,3}(#|>|[-*+\u2022]\s|\d{1,3}[.)]\s|[A-Za-z][.)]\s|<)|\||^\s*[-+=|:]{3,}\s*$")
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]?[A-Z0-9]|\s*$)")
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "mt", "jr", "sr", "prof", "rev", "capt", "col", "gen", "lt",
                  "sgt", "no", "vs", "etc", "e.g", "i.e", "fig", "vol", "ch", "p", "pp"}
_QUOTES = "\"\u201c\u201d\u201e\u00ab\u00bb\u2018\u201a"


@dataclass(frozen=True)
class Paragraph:
    start: int
    end: int  # offset after its last non-space character
    prose: bool


def paragraphs(text: str) -> list[Paragraph]:
    """Blank-line separated paragraphs, each classified prose or not (module docstring)."""
    out: list[Paragraph] = []
    in_code = False
    block: list[tuple[int, str]] = []  # (offset, line) of the current paragraph

    def close() -> None:
        nonlocal block
        if block:
            start = block[0][0]
            last_off, last_line = block[-1]
            end = last_off + len(last_line.rstrip())
            out.append(Paragraph(start, end, _is_prose([line for _, line in block], block_code)))
        block = []

    block_code = False
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if _FENCE.match(bare):
            block.append((offset, bare))
            block_code = True
            in_code = not in_code
        elif not bare.strip():
            if not in_code:
                close()
                block_code = False
        else:
            if not block:
                block_code = in_code
            block.append((offset, bare))
        offset += len(line)
    close()
    return out


def _is_prose(lines: list[str], code: bool) -> bool:
    if code or any(_NOT_PROSE_LINE.search(line) for line in lines):
        return False
    if all(line.startswith(("    ", "\t")) for line in lines):
        return False
    text = " ".join(line.strip() for line in lines)
    letters = [c for c in text if c.isalpha()]
    if len(text.split()) < MIN_WORDS or not letters or sum(c.isupper() for c in letters) > 0.5 * len(letters):
        return False
    return _ends_sentence(text) or len(_sentence_ends(text, 0, len(text))) > 1  # a sentence ends inside it


def _ends_sentence(text: str) -> bool:
    return bool(re.search(r"[.!?][\"'\u201d\u2019)\]]*$", text.rstrip()))


def _sentence_ends(text: str, start: int, end: int) -> list[int]:
    """Offsets just after each sentence end in text[start:end]."""
    ends = []
    for m in _SENTENCE_END.finditer(text, start, end):
        word = re.search(r"([\w.]+)[.!?]?[\"'\u201d\u2019)\]]*$", text[max(start, m.start() - 12):m.end()])
        prev = (word.group(1) if word else "").lower().rstrip(".")
        if text[m.start()] == "." and (prev in _ABBREVIATIONS or (len(prev) == 1 and prev.isalpha())):
            continue
        ends.append(m.end())
    if not ends or ends[-1] != end:
        ends.append(end)
    return ends


def _has_quote(sentence: str) -> bool:
    if any(q in sentence for q in _QUOTES):
        return True
    # a single quote that opens (after a space) or closes (before a space) a quotation,
    # not an apostrophe inside a word ("don't", "Orla's")
    return bool(re.search(r"(^|\s)['\u2018\u2019]|['\u2019](\s|$)", sentence.strip()))


def prose_boundaries(text: str) -> list[int]:
    """Offsets where a canary may start (before a sentence) or follow the last sentence of
    a narrative-prose paragraph, away from dialogue (module docstring)."""
    spots: set[int] = set()
    for para in paragraphs(text):
        if not para.prose or _has_quote(text[para.start:para.end]):
            continue  # a paragraph with a quotation in it is dialogue: no canary anywhere in it
        ends = _sentence_ends(text, para.start, para.end)
        spots.add(para.start)
        spots.update(_skip_space(text, e) for e in ends[:-1])
        if _ends_sentence(text[para.start:para.end]):  # not after a sentence cut off
            spots.add(ends[-1])
    return sorted(spots)


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def preview(text: str, start: int, end: int, width: int = PREVIEW) -> dict[str, str]:
    """The surrounding text of text[start:end], whitespace collapsed, for the author to check."""
    def squash(s: str) -> str:
        return re.sub(r"\s+", " ", s)

    return {"before": squash(text[max(0, start - width):start]).strip(),
            "after": squash(text[end:end + width]).strip()}


__all__ = ["MIN_WORDS", "Paragraph", "paragraphs", "preview", "prose_boundaries"]
