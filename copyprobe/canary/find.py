"""`canary find`: where the canaries of a kit appear in published copies of the document.

Plain-text and Markdown files are searched as they are (offsets are their own
characters: the normalisation already copes with wrapping, hyphenation and markup);
HTML, EPUB, PDF and DOCX files are read with :func:`copyprobe.data.books.read_book` (the
same readers as the audit) and offsets are in the text it returns. The text is
normalised with :func:`copyprobe.canary.normalise.normalise` and searched for every
candidate of every canary. A held-out candidate
found in a file means the private manifest leaked: the test is then void.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from copyprobe.canary.kit import read_manifest
from copyprobe.canary.normalise import normalise, normalised_text
from copyprobe.files import refuse_empty_path, refuse_special_file

CONTEXT = 60


@dataclass
class Hit:
    file: str
    canary: int
    candidate: int
    published: bool
    start: int  # offset in the file's text
    end: int
    found: str  # the original text that matched
    context: str  # the match in [brackets] with CONTEXT characters either side, whitespace collapsed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def find_in_text(text: str, canaries, file: str = "", context: int = CONTEXT) -> list[Hit]:
    """Every occurrence of every candidate of ``canaries`` in ``text``."""
    norm = normalise(text)
    hits: list[Hit] = []
    for canary in canaries:
        for j, cand in enumerate(canary.candidates):
            key = normalised_text(cand)
            tail = cand[len(cand.rstrip(".!?")):]  # the final full stop is outside the normalised match
            for at in norm.find_all(key):
                start, end = norm.span(at, at + len(key))
                if tail and text.startswith(tail, end):
                    end += len(tail)
                ctx = (_squash(text[max(0, start - context):start]) + "[" + _squash(text[start:end]) + "]"
                       + _squash(text[end:end + context]))
                hits.append(Hit(file=file, canary=canary.index, candidate=j, published=j == canary.published,
                                start=start, end=end, found=text[start:end], context=ctx.strip()))
    return sorted(hits, key=lambda h: (h.file, h.start))


def file_text(path: str | os.PathLike) -> str:
    """The text searched in a file (module docstring)."""
    from copyprobe.data import books

    refuse_empty_path(path, "the searched file's", "name the files to search")
    refuse_special_file(path, "the file to search")
    p = Path(path)
    if p.suffix.lower() in books.PLAIN_SUFFIXES + books.MARKDOWN_SUFFIXES:
        return books.read_text(p)
    return books.read_book(p)


def find_canaries(kit: str | os.PathLike, files: list[str | os.PathLike], context: int = CONTEXT) -> list[Hit]:
    """Hits of the kit's canaries (kit directory or manifest.json) in each file."""
    _, _, canaries = read_manifest(kit)
    hits: list[Hit] = []
    for f in files:
        hits.extend(find_in_text(file_text(f), canaries, str(f), context))
    return hits


__all__ = ["CONTEXT", "Hit", "file_text", "find_canaries", "find_in_text"]
