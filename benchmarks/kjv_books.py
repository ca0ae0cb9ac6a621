"""Public-domain documents for the audit benchmarks, written offline from Debian's KJV
(``apt-get install bible-kjv``; the ``bible`` command prints verses as ``Ge1:1 In the ...``).

A document is a plain-text file, one verse per paragraph (blank lines between verses), so
the passage cutter (docs/input-files.md) packs whole verses into passages.
``bench_catalogue.py`` writes one file per chapter, ``bench_audit_cost.py`` one per book.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# `bible` book abbreviations and chapter counts, in canonical order
OLD_TESTAMENT = [("Ge", 50), ("Ex", 40), ("Le", 27), ("Nu", 36), ("De", 34), ("Jos", 24), ("Jg", 21),
                 ("Ru", 4), ("1Sa", 31), ("2Sa", 24), ("1Ki", 22), ("2Ki", 25), ("1Ch", 29), ("2Ch", 36),
                 ("Ezr", 10), ("Ne", 13), ("Es", 10), ("Job", 42), ("Ps", 150), ("Pr", 31), ("Ec", 12),
                 ("So", 8), ("Isa", 66), ("Jer", 52), ("La", 5), ("Eze", 48), ("Da", 12), ("Ho", 14), ("Joe", 3),
                 ("Am", 9), ("Ob", 1), ("Jon", 4), ("Mic", 7), ("Na", 3), ("Hab", 3), ("Zep", 3), ("Hag", 2),
                 ("Zec", 14), ("Mal", 4)]
NEW_TESTAMENT = [("Mt", 28), ("Mk", 16), ("Lk", 24), ("Jn", 21), ("Ac", 28), ("Ro", 16), ("1Co", 16),
                 ("2Co", 13), ("Ga", 6), ("Eph", 6), ("Php", 4), ("Col", 4), ("1Th", 5), ("2Th", 3),
                 ("1Ti", 6), ("2Ti", 4), ("Tit", 3), ("Phm", 1), ("Heb", 13), ("Jas", 5), ("1Pe", 5)]
_REFERENCE = re.compile(r"^\S+?(\d+):(\d+) ")


def verses(book: str, first: int = 1, last: int = 999) -> dict[int, list[str]]:
    """Chapter -> its verses (reference removed) of ``book`` from chapter ``first`` to ``last``."""
    if shutil.which("bible") is None:
        raise SystemExit("the `bible` command is missing: apt-get install bible-kjv")
    out = subprocess.run(["bible", "-f", f"{book}{first}:1-{book}{last}:999"], capture_output=True, text=True,
                         check=True).stdout
    chapters: dict[int, list[str]] = {}
    for line in out.splitlines():
        found = _REFERENCE.match(line)
        if found:
            chapters.setdefault(int(found.group(1)), []).append(line[found.end():].strip())
    if not chapters:
        raise SystemExit(f"`bible -f {book}{first}:1-{book}{last}:999` printed no verses")
    return chapters


def write_document(path: Path, paragraphs: list[str], max_words: int | None = None) -> int:
    """Write the paragraphs (the first ``max_words`` words' worth, whole verses) and return
    the number of words written."""
    kept, words = [], 0
    for paragraph in paragraphs:
        n = len(paragraph.split())
        if max_words is not None and kept and words + n > max_words:
            break
        kept.append(paragraph)
        words += n
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return words


def chapters(books: list[tuple[str, int]], count: int) -> list[tuple[str, list[str]]]:
    """The first ``count`` chapters of ``books`` in order, as (name, verses)."""
    found: list[tuple[str, list[str]]] = []
    for book, n_chapters in books:
        for number, text in sorted(verses(book, 1, n_chapters).items()):
            found.append((f"{book}-{number:03d}", text))
            if len(found) == count:
                return found
    raise SystemExit(f"only {len(found)} chapters in {[b for b, _ in books]}, {count} asked")
