#!/usr/bin/env python
"""Write the whole King James Bible as plain text, for `copyprobe plant --background`.

The text comes from Debian's ``bible-kjv`` package (public domain; ``apt-get install
bible-kjv``), read offline with one call of ``bible -f Gen1:1-Rev22:21``. Verse
references are removed; each verse is one line and a blank line separates books, so the
output is the same on every machine with the same package version (4.38 here).

    python scripts/build_background.py kjv.txt                    # one file, 66 books
    python scripts/build_background.py kjv_books/ --per-book      # 01-Ge.txt ... 66-Rev.txt
    python scripts/build_background.py kjv.txt --count-tokens smollm2-135m-instruct

With ``--count-tokens SPEC`` it also prints the size in that model's tokens (the text
as `copyprobe plant` cuts it, without special tokens).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

WHOLE_BIBLE = "Gen1:1-Rev22:21"
VERSE = re.compile(r"^(\S+?)(\d+):(\d+)\s+(.*)$")  # "1Sm3:4 text": book, chapter, verse, text


def kjv_books() -> list[tuple[str, list[str]]]:
    """(book abbreviation as `bible` prints it, its verses) in canonical order."""
    exe = shutil.which("bible")
    if exe is None:
        raise SystemExit("error: the `bible` command is missing; apt-get install bible-kjv")
    out = subprocess.run([exe, "-f", WHOLE_BIBLE], capture_output=True, text=True, check=True).stdout
    books: list[tuple[str, list[str]]] = []
    for line in out.splitlines():
        if not line.strip():
            continue
        match = VERSE.match(line.strip())
        if match is None:
            raise SystemExit(f"error: unexpected line from bible: {line[:80]!r}")
        book, text = match.group(1), " ".join(match.group(4).split())
        if not books or books[-1][0] != book:
            books.append((book, []))
        books[-1][1].append(text)
    return books


def count_tokens(spec: str, text: str) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from copyprobe.backends.specs import load_tokenizer

    tokenizer = load_tokenizer(spec)
    # in pieces of whole lines: the tokenizer is fast on short texts, and no word is split
    lines = text.splitlines()
    return sum(len(ids) for start in range(0, len(lines), 1000)
               for ids in [tokenizer.encode("\n".join(lines[start:start + 1000]), add_special_tokens=False)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="file to write (or directory, with --per-book)")
    parser.add_argument("--per-book", action="store_true", help="one file per book, NN-<abbrev>.txt, in OUT")
    parser.add_argument("--count-tokens", metavar="SPEC", help="also print the size in this model's tokens")
    args = parser.parse_args(argv)

    books = kjv_books()
    texts = ["\n".join(verses) + "\n" for _, verses in books]
    out = Path(args.out)
    if args.per_book:
        out.mkdir(parents=True, exist_ok=True)
        for n, ((book, _), text) in enumerate(zip(books, texts), 1):
            (out / f"{n:02d}-{book}.txt").write_text(text, encoding="utf-8")
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(texts), encoding="utf-8")
    whole = "\n".join(texts)
    n_verses = sum(len(v) for _, v in books)
    print(f"wrote {len(books)} books, {n_verses} verses, {len(whole.split())} words to {out} "
          f"(sha256 of the text {hashlib.sha256(whole.encode()).hexdigest()[:16]})")
    if args.count_tokens:
        print(f"{count_tokens(args.count_tokens, whole)} tokens ({args.count_tokens})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
