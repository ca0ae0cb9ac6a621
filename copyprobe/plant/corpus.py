"""Turn a corpus into passages: data files as they are, plain-text and EPUB books cut
into passages of about N tokens (64 / 128 / 256 like BookTection).

Cutting works on whitespace-separated words, so a passage never splits a word: words
are added while the passage stays within ``passage_tokens`` (each word counted as
``count_tokens(" " + word)``, which for BPE / SentencePiece tokenizers is the number of
tokens it adds inside running text), then a new passage starts. Whitespace inside a
passage is collapsed to single spaces. A last passage shorter than ``min_tokens``
(default half of ``passage_tokens``) is dropped. A single word longer than
``passage_tokens`` becomes a passage of its own.

Books are read by :mod:`copyprobe.data.books` (UTF-8 text; EPUB chapters in spine order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from copyprobe.data.books import EPUB_SUFFIXES, TEXT_SUFFIXES, read_epub, read_text
from copyprobe.data.books import html_to_text  # noqa: F401 - plant.corpus's name for it, kept
from copyprobe.files import printable_name
from copyprobe.errors import DataError
from copyprobe.files import walk_folder

DATA_SUFFIXES = (".jsonl", ".json-lines", ".json", ".csv", ".tsv", ".parquet")

CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class Passage:
    id: str
    text: str
    doc_id: str | None = None
    n_tokens: int | None = None  # approximate, from word counts; None for data-file rows


def whitespace_count(text: str) -> int:
    """Token counter for tests and tokenizer-free use: one token per whitespace word."""
    return len(text.split())


def tokenizer_counter(tokenizer) -> CountTokens:
    """``count_tokens`` for a Hugging Face tokenizer (no special tokens), memoized per word."""
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        n = cache.get(text)
        if n is None:
            n = len(tokenizer.encode(text, add_special_tokens=False))
            if len(cache) < 500_000:
                cache[text] = n
        return n

    return count


def cut_passages(
    text: str,
    passage_tokens: int,
    count_tokens: CountTokens = whitespace_count,
    *,
    doc_id: str | None = None,
    min_tokens: int | None = None,
) -> list[Passage]:
    """Cut ``text`` into passages of at most ``passage_tokens`` tokens (see module doc)."""
    if passage_tokens < 1:
        raise DataError(f"passage length must be at least 1 token, got {passage_tokens}")
    if min_tokens is None:
        min_tokens = max(1, passage_tokens // 2)
    chunks: list[tuple[list[str], int]] = []
    words: list[str] = []
    size = 0
    for word in text.split():
        n = max(1, count_tokens(" " + word))
        if words and size + n > passage_tokens:
            chunks.append((words, size))
            words, size = [], 0
        words.append(word)
        size += n
    if words:
        chunks.append((words, size))
    if chunks and chunks[-1][1] < min_tokens:
        chunks.pop()
    prefix = f"{doc_id}-" if doc_id else "p"
    return [
        Passage(id=f"{prefix}{i:04d}", text=" ".join(ws), doc_id=doc_id, n_tokens=n)
        for i, (ws, n) in enumerate(chunks)
    ]


# -- whole corpus ---------------------------------------------------------------------

def _data_file_passages(path: Path, text_column: str | None) -> list[Passage]:
    from copyprobe.data.readers import load_dataset

    dataset = load_dataset(path, text_column=text_column)
    return [Passage(id=str(e.id), text=e.text, doc_id=e.doc_id) for e in dataset.examples]


def corpus_files(root: Path, name: str | Path | None = None) -> tuple[list[Path], list[dict[str, str]]]:
    """The files of a corpus directory that plant reads, in name order, hidden ones left
    out (:func:`copyprobe.files.walk_folder`), and the entries that could not be read
    ({"path", "skipped": why}), each said in one warning line naming ``name``."""
    walk = walk_folder(root)
    walk.warn(name if name is not None else root, stacklevel=4)
    files = [p for p in walk.files if p.suffix.lower() in TEXT_SUFFIXES + EPUB_SUFFIXES + DATA_SUFFIXES]
    return files, walk.records(name)


@dataclass
class Corpus:
    passages: list[Passage]
    sources: list[str]  # files read
    sha256: str  # of the passages (ids, texts, documents)
    n_duplicates: int  # passages dropped because the same text came earlier
    cut: bool  # whether any file was cut into passages
    skipped: list[dict[str, str]] = field(default_factory=list)  # entries of the folder that could not be read


@dataclass
class _File:
    """One file of a corpus as read: a data file's rows, or a book's text (cut later)."""

    path: Path
    doc_id: str
    rows: list[Passage] | None = None
    text: str | None = None


@dataclass
class CorpusText:
    """A corpus read but not yet cut (:func:`read_corpus`): cutting books needs the model's
    tokenizer, reading them does not, so a corpus that cannot be read is refused before
    the model loads."""

    path: str | Path
    what: str
    files: list[_File]
    skipped: list[dict[str, str]] = field(default_factory=list)


def read_corpus(path: str | Path, *, text_column: str | None = None, what: str = "corpus") -> CorpusText:
    """Every file of a corpus read (see :func:`load_corpus`); a DataError when it is missing,
    a directory holds nothing to read, or a file cannot be read or parsed."""
    root = Path(path).expanduser()
    if not root.exists():
        raise DataError(f"{what} not found: {path}")
    skipped: list[dict[str, str]] = []
    if root.is_dir():
        found, skipped = corpus_files(root, path)
        if not found:
            raise DataError(f"{what} directory {path} holds no .txt, .md, .epub or data files")
    else:
        found = [root]
    files: list[_File] = []
    for f in found:
        suffix = f.suffix.lower()
        # a name's bytes that are not UTF-8 as \xe9 escapes: an id is text
        doc_id = printable_name(f.relative_to(root).with_suffix("").as_posix() if root.is_dir() else f.stem)
        if suffix in DATA_SUFFIXES:
            files.append(_File(f, doc_id, rows=_data_file_passages(f, text_column)))
        elif suffix in EPUB_SUFFIXES:
            files.append(_File(f, doc_id, text=read_epub(f)))
        elif suffix in TEXT_SUFFIXES or not root.is_dir():
            if suffix not in TEXT_SUFFIXES and suffix:
                raise DataError(
                    f"unsupported {what} file type {suffix!r} for {f}; supported: "
                    f"{', '.join(TEXT_SUFFIXES + EPUB_SUFFIXES + DATA_SUFFIXES)}"
                )
            files.append(_File(f, doc_id, text=read_text(f)))
    return CorpusText(path, what, files, skipped)


def cut_corpus(read: CorpusText, passage_tokens: int = 128, count_tokens: CountTokens = whitespace_count) -> Corpus:
    """The passages of a corpus read with :func:`read_corpus`: books cut, data-file rows as
    they are, each text kept once (see :func:`load_corpus`)."""
    passages: list[Passage] = []
    for f in read.files:
        if f.rows is not None:
            passages.extend(f.rows)
        else:
            passages.extend(cut_passages(f.text or "", passage_tokens, count_tokens, doc_id=f.doc_id))
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    unique: list[Passage] = []
    n_dup = 0
    for p in passages:
        if p.id in seen_ids:
            raise DataError(f"duplicate passage id {p.id!r} in {read.what} {read.path} (ids must be unique across files)")
        seen_ids.add(p.id)
        if p.text in seen_texts:
            n_dup += 1
            continue
        seen_texts.add(p.text)
        unique.append(p)
    digest = hashlib.sha256()
    for p in unique:
        digest.update(f"{p.id}\x1f{p.doc_id}\x1f{p.text}\x1e".encode())
    return Corpus(unique, [str(f.path) for f in read.files], digest.hexdigest(), n_dup,
                  any(f.rows is None for f in read.files), read.skipped)


def load_corpus(
    path: str | Path,
    passage_tokens: int = 128,
    count_tokens: CountTokens = whitespace_count,
    *,
    text_column: str | None = None,
    what: str = "corpus",
) -> Corpus:
    """Passages of a corpus: a data file (rows as they are), a .txt/.md/.epub book (cut),
    or a directory holding any of these (read recursively, in name order).

    Books get ``doc_id`` = their path relative to the directory without the suffix (the
    file stem for a single file). Exact duplicate texts are kept once, so the same text
    can never be both a member and a non-member. ``what`` names the input in messages
    (plant also reads its background text with this function). :func:`read_corpus` and
    :func:`cut_corpus` are its two steps (plant reads before the tokenizer loads).
    """
    return cut_corpus(read_corpus(path, text_column=text_column, what=what), passage_tokens, count_tokens)
