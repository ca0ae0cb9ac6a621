#!/usr/bin/env python
"""Build an offline plant corpus (JSONL: id, text, doc_id) for `copyprobe plant`.

Sources, both Debian packages that work without network:

* the King James Bible (``apt-get install bible-kjv``): whole chapters read with
  ``bible -f BOOKch:1-200`` (one chapter per call: the verse range stops at the end of the
  chapter), verse numbers removed, each book's chapters joined and cut into passages of
  about ``--passage-tokens`` model tokens; ``doc_id`` = the book;
* the literature file of ``fortunes-min`` (``/usr/share/games/fortunes/literature``):
  the fortunes are short, so consecutive fortunes are packed into passages of up to
  ``--passage-tokens`` tokens (a fortune is never split unless it alone is longer);
  ``doc_id`` = ``fortunes-literature``.

Passages are cut with the tokenizer of ``--tokenizer`` (default smollm2-135m-instruct),
so their length is in that model's tokens; ``--tokenizer whitespace`` counts words.
Exact duplicate passages are dropped. ``--max-passages N`` keeps N passages picked at
random with ``--seed`` (in corpus order), for a plant that fits a small machine.

    python scripts/build_plant_corpus.py --out plant_corpus.jsonl
    copyprobe plant --model smollm2-135m-instruct --corpus plant_corpus.jsonl --out plant1
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

# (bible abbreviation, document name, chapters)
DEFAULT_BOOKS = [
    ("Ge", "Genesis", range(1, 12)),
    ("Ex", "Exodus", range(1, 6)),
    ("Ru", "Ruth", range(1, 5)),
    ("Job", "Job", range(1, 4)),
    ("Pr", "Proverbs", range(1, 7)),
    ("Ec", "Ecclesiastes", range(1, 13)),
    ("Is", "Isaiah", range(40, 44)),
    ("Jon", "Jonah", range(1, 5)),
    ("Mt", "Matthew", range(5, 8)),
    ("Lu", "Luke", range(1, 4)),
    ("Joh", "John", range(1, 4)),
    ("Ac", "Acts", range(1, 4)),
]
# KJV books that share no chapter with DEFAULT_BOOKS: text for the token frequency tables
# of dc_pdd and tag_tab, which must come from text that holds none of the passages (Psalms
# is left out: the demo quotes Psalm 23).
DISJOINT_BOOKS = [("Le", 27), ("Nu", 36), ("De", 34), ("Ro", 16), ("Re", 22), ("Jos", 24), ("Jg", 21)]
FORTUNES_LITERATURE = Path("/usr/share/games/fortunes/literature")
VERSE_PREFIX = re.compile(r"^\S+?\d+:\d+\s+")


def bible_chapter(abbrev: str, chapter: int) -> str:
    """The text of one chapter, verses joined by spaces, without references."""
    result = subprocess.run(["bible", "-f", f"{abbrev}{chapter}:1-200"], capture_output=True,
                            text=True, check=True)
    verses = [VERSE_PREFIX.sub("", line).strip() for line in result.stdout.splitlines() if line.strip()]
    return " ".join(v for v in verses if v)


def read_fortunes(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [" ".join(block.split()) for block in re.split(r"^%\s*$", text, flags=re.M) if block.strip()]


def pack(items: list[str], passage_tokens: int, count, doc_id: str, cut_passages) -> list[dict]:
    """Pack short texts into passages of at most ``passage_tokens`` tokens."""
    out: list[dict] = []
    current: list[str] = []
    size = 0

    def flush():
        nonlocal current, size
        if current:
            out.append(" ".join(current))
        current, size = [], 0

    for item in items:
        n = count(" " + item)
        if n > passage_tokens:
            flush()
            out.extend(p.text for p in cut_passages(item, passage_tokens, count, doc_id=doc_id))
            continue
        if current and size + n > passage_tokens:
            flush()
        current.append(item)
        size += n
    flush()
    return [{"id": f"{doc_id}-{i:04d}", "text": t, "doc_id": doc_id} for i, t in enumerate(out)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--passage-tokens", type=int, default=128, help="passage length in tokens (default 128)")
    parser.add_argument("--tokenizer", default="smollm2-135m-instruct",
                        help="model spec whose tokenizer measures passages, or 'whitespace' (default smollm2-135m-instruct)")
    parser.add_argument("--no-bible", action="store_true", help="leave out the King James Bible")
    parser.add_argument("--no-fortunes", action="store_true", help="leave out fortunes-min's literature file")
    parser.add_argument("--fortunes-file", default=str(FORTUNES_LITERATURE), help="fortune file to read")
    parser.add_argument("--max-passages", type=int, default=None, help="keep this many passages, picked at random")
    parser.add_argument("--seed", type=int, default=0, help="seed for --max-passages (default 0)")
    parser.add_argument("--disjoint-text", metavar="FILE",
                        help="also write the plain text of KJV books outside the corpus and the demo (Le, Nu, De, Ro, Re, "
                             "Jos, Jg) for `copyprobe freq build`")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from copyprobe.data.readers import write_jsonl
    from copyprobe.plant.corpus import cut_passages, tokenizer_counter, whitespace_count

    if args.tokenizer == "whitespace":
        count = whitespace_count
    else:
        from copyprobe.backends.specs import load_tokenizer

        count = tokenizer_counter(load_tokenizer(args.tokenizer))

    rows: list[dict] = []
    if not args.no_bible:
        if shutil.which("bible") is None:
            print("error: `bible` not found; apt-get install bible-kjv (or pass --no-bible)", file=sys.stderr)
            return 2
        for abbrev, name, chapters in DEFAULT_BOOKS:
            text = " ".join(bible_chapter(abbrev, c) for c in chapters)
            for p in cut_passages(text, args.passage_tokens, count, doc_id=name):
                rows.append({"id": p.id, "text": p.text, "doc_id": name})
    if not args.no_fortunes:
        path = Path(args.fortunes_file)
        if not path.is_file():
            print(f"error: {path} not found; apt-get install fortunes-min (or pass --no-fortunes)", file=sys.stderr)
            return 2
        rows.extend(pack(read_fortunes(path), args.passage_tokens, count, "fortunes-literature", cut_passages))

    seen: set[str] = set()
    unique = []
    for row in rows:
        if row["text"] not in seen:
            seen.add(row["text"])
            unique.append(row)
    if args.max_passages is not None and args.max_passages < len(unique):
        keep = set(random.Random(args.seed).sample(range(len(unique)), args.max_passages))
        unique = [r for i, r in enumerate(unique) if i in keep]
    if args.disjoint_text:
        chapters = (bible_chapter(abbrev, c) for abbrev, last in DISJOINT_BOOKS for c in range(1, last + 1))
        Path(args.disjoint_text).write_text("\n".join(chapters) + "\n", encoding="utf-8")
        print(f"wrote the disjoint KJV books to {args.disjoint_text}")
    n = write_jsonl(args.out, unique)
    docs = sorted({r["doc_id"] for r in unique})
    print(f"wrote {n} passages from {len(docs)} documents to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
