"""`canary find`: where the canaries of a kit appear in published copies of the document.

Each file is read with :func:`copyprobe.data.books.read_book` (the same readers as the
audit), normalised with :func:`copyprobe.canary.normalise.normalise`, and searched for
every candidate of every canary. Offsets are character offsets in the text ``read_book``
returns for the file (for a plain-text file, its own characters). A held-out candidate
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
            for at in norm.find_all(key):
                start, end = norm.span(at, at + len(key))
                ctx = (_squash(text[max(0, start - context):start]) + "[" + _squash(text[start:end]) + "]"
                       + _squash(text[end:end + context]))
                hits.append(Hit(file=file, canary=canary.index, candidate=j, published=j == canary.published,
                                start=start, end=end, found=text[start:end], context=ctx.strip()))
    return sorted(hits, key=lambda h: (h.file, h.start))


def find_canaries(kit: str | os.PathLike, files: list[str | os.PathLike], context: int = CONTEXT) -> list[Hit]:
    """Hits of the kit's canaries (kit directory or manifest.json) in each file."""
    from copyprobe.data.books import read_book

    _, _, canaries = read_manifest(kit)
    hits: list[Hit] = []
    for f in files:
        hits.extend(find_in_text(read_book(Path(f)), canaries, str(f), context))
    return hits


__all__ = ["CONTEXT", "Hit", "find_canaries", "find_in_text"]
