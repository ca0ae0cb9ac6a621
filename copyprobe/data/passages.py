"""Books as passages: a book file, or a directory of them, as a :class:`Dataset`.

Each file is one document. Its ``doc_id`` is the file name without the suffix (the stem);
in a directory, files whose stems clash get their path relative to the directory (with
the suffix) instead, so document ids are unique. Passage ids are ``DOC:0001``,
``DOC:0002`` ... in reading order, and ``meta`` holds ``source`` (the file) and
``passage`` (the number).

The passage rule (``passage_words`` = N, default 128; words are whitespace-separated):

1. Paragraphs (from :func:`copyprobe.data.books.book_paragraphs`) are packed greedily: a
   passage takes whole paragraphs while it stays within N words.
2. When the next paragraph does not fit, the passage ends there if it already holds at
   least N/2 words; otherwise the paragraph's leading sentences fill it up to N words and
   the rest of the paragraph continues in the next passage. A paragraph of more than N
   words is always cut at sentence ends this way.
3. A sentence of more than N words is cut every N words.
4. A document's last passage with fewer than N/4 words is merged into the passage before
   it (so a document's last passage can hold up to N + N/4 - 1 words); a document shorter
   than that is one passage.

Passages never cross documents. Paragraphs inside one passage are separated by a line
break.

Source files (``CODE_SUFFIXES``: .py, .js, .c ...) are read as written, by another rule
(:func:`cut_code`): whole lines, indentation and line breaks kept, packed while a passage
holds at most N words; a line of more than N words is a passage of its own. Joined as
prose, code is not the text a model trained on.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections import Counter
from pathlib import Path

from copyprobe.data.books import BOOK_SUFFIXES, BOOK_TYPES, CODE_SUFFIXES, CODE_TYPES, book_paragraphs, code_text, empty_file_error
from copyprobe.data.example import Example
from copyprobe.data.tables import LONG_ROW_WORDS, Dataset, file_record
from copyprobe.errors import ConfigError, DataError, DataWarning
from copyprobe.files import FolderWalk, first_few, name_bytes, printable_name, walk_folder

DEFAULT_PASSAGE_WORDS = 128
DOCUMENT_SUFFIXES = BOOK_SUFFIXES + CODE_SUFFIXES  # what read_books reads
DOCUMENT_TYPES = f"books ({BOOK_TYPES}) or {CODE_TYPES}"  # for messages

# a sentence ends at . ! ? (and closing quotes/brackets) before a space and a capital,
# digit or opening quote
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]*[A-Z0-9])")


def check_passage_words(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"passage_words must be a whole number of words, at least 1, got {value!r}")
    return value


def sentences(paragraph: str) -> list[str]:
    """A paragraph cut after each sentence end (see ``_SENTENCE_END``)."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(paragraph):
        out.append(paragraph[start:m.end()].strip())
        start = m.end()
    rest = paragraph[start:].strip()
    return [s for s in out + [rest] if s]


def cut_passages(paragraphs: list[str], passage_words: int = DEFAULT_PASSAGE_WORDS) -> list[str]:
    """One document's paragraphs as passages, by the rule in the module doc."""
    n = check_passage_words(passage_words)
    passages: list[list[list[str]]] = []  # passage -> paragraphs (pieces) -> words
    current: list[list[str]] = []
    size = 0

    def close() -> None:
        nonlocal current, size
        if current:
            passages.append(current)
        current, size = [], 0

    for paragraph in paragraphs:
        words = paragraph.split()
        if not words:
            continue
        if size + len(words) <= n:
            current.append(words)
            size += len(words)
            continue
        if size >= n / 2:
            close()
            if len(words) <= n:
                current, size = [words], len(words)
                continue
        piece: list[str] = []  # the part of this paragraph in the current passage
        for sentence in sentences(paragraph):
            sw = sentence.split()
            for chunk in (sw[i:i + n] for i in range(0, len(sw), n)):
                if size + len(chunk) > n and size:
                    if piece:
                        current.append(piece)
                    close()
                    piece = []
                piece += chunk
                size += len(chunk)
        if piece:
            current.append(piece)
    if current:
        tail = sum(len(p) for p in current)
        if passages and tail < n / 4:
            passages[-1] += current
        else:
            passages.append(current)
    return ["\n".join(" ".join(p) for p in passage) for passage in passages]


def cut_code(text: str, passage_words: int = DEFAULT_PASSAGE_WORDS) -> list[str]:
    """A source file as passages of whole lines, as written (the rule in the module doc);
    blank lines at a passage's ends are dropped, and a passage of blank lines only."""
    n = check_passage_words(passage_words)
    passages: list[list[str]] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        words = len(line.split())
        if size and size + words > n:
            passages.append(current)
            current, size = [], 0
        current.append(line)
        size += words
    passages.append(current)
    out = []
    for lines in passages:
        filled = [i for i, line in enumerate(lines) if line.strip()]
        if filled:  # blank lines (spaces or tabs only, too) at either end dropped
            out.append("\n".join(lines[filled[0]:filled[-1] + 1]))
    return out


def document_passages(raw: bytes, name: str, passage_words: int) -> list[str]:
    """One file's passages: source code by :func:`cut_code`, books by :func:`cut_passages`."""
    if Path(name).suffix.lower() in CODE_SUFFIXES:
        text = code_text(raw, name)
        if not text:
            raise empty_file_error(raw, name)
        return cut_code(text, passage_words)
    return cut_passages(book_paragraphs(raw, name), passage_words)


def _folder_code_passages(raw: bytes, where: str, passage_words: int) -> tuple[list[str], str | None]:
    """A source file's passages in a folder, or ([], why it is left out): a source tree is
    full of empty files (a package's __init__.py), and some suffixes are also binary
    formats (.ts video); an empty or unreadable book in a folder stays an error."""
    try:
        text = code_text(raw, where)
    except DataError as exc:  # its reason, without the file's name: the list names it
        return [], f"not text, though its suffix is a source file's: {str(exc).removeprefix(where).strip()}"
    return (cut_code(text, passage_words), None) if text else ([], "empty")


def book_files(root: Path) -> tuple[list[Path], list[Path], FolderWalk]:
    """(book and source files, other files, the walk) under a directory, recursively and
    in name order (:func:`copyprobe.files.walk_folder`); hidden files and folders and Office
    lock files (``~$...``) are left out of both; what could not be read is in the walk's ``skipped``."""
    walk = walk_folder(root, hidden=(".", "~$"))
    books, others = [], []
    for p in walk.files:
        (books if p.suffix.lower() in DOCUMENT_SUFFIXES else others).append(p)
    return books, others, walk


def document_ids(files: list[Path], root: Path | None) -> list[str]:
    """File stems, or the path relative to ``root`` for a stem that occurs twice or that is
    another file's path (``x.py.md``'s stem is ``x.py``): every id is unique."""
    if root is None:
        return [printable_name(f.stem) for f in files]
    paths = [printable_name(f.relative_to(root).as_posix()) for f in files]
    ids = [printable_name(f.stem) for f in files]
    while True:  # relative paths are unique; each pass turns at least one clashing id into one
        counts = Counter(ids)
        clashing = {i for i, doc in enumerate(ids) if counts[doc] > 1 and doc != paths[i]}
        if not clashing:
            twice = next((d for d, n in Counter(ids).items() if n > 1), None)
            if twice is not None:  # two names print alike: one with bytes that are not UTF-8, one spelled so
                raise DataError(f"two files give the document id {twice!r} (a name whose bytes are not UTF-8 "
                                "is written with \\x escapes, and another is spelled so): rename one")
            return ids
        ids = [paths[i] if i in clashing else doc for i, doc in enumerate(ids)]


def read_books(path: str | os.PathLike, *, passage_words: int | None = None) -> Dataset:
    """A book or source file, or a directory of them, as passages (see the module doc)."""
    n = DEFAULT_PASSAGE_WORDS if passage_words is None else check_passage_words(passage_words)
    name = str(path)
    p = Path(path).expanduser()
    if p.is_dir():
        files, others, walk = book_files(p)
        walk.warn(name, stacklevel=4)  # a missing chapter is said, and listed in run.json
        if not files:
            raise DataError(f"{name} is a directory with no book or source files ({BOOK_TYPES}; {CODE_TYPES}) "
                            f"and not a Hugging Face dataset saved with save_to_disk")
        if others:
            kinds = sorted({f.suffix.lower() or "(no extension)" for f in others})
            warnings.warn(DataWarning(
                f"{name}: {len(others)} file(s) of other types were left out ({', '.join(kinds)}; e.g. "
                f"{others[0].relative_to(p).as_posix()}); read: {DOCUMENT_TYPES}"), stacklevel=3)
        shown = [str(Path(name) / f.relative_to(p)) for f in files]
        docs = document_ids(files, p)
    else:
        walk = None
        files, shown, docs = [p], [name], document_ids([p], None)
    examples: list[Example] = []
    records = []
    left_out: list[tuple[str, str]] = []  # in a folder: (source file, why) left out
    code_read: list[Path] = []
    longest = (0, "")  # the passage with the most words (a minified line): (words, id)
    for f, where, doc in zip(files, shown, docs):
        try:
            raw = f.read_bytes()
        except OSError as exc:
            raise DataError(f"cannot read {where}: {exc.strerror or exc}") from None
        records.append(file_record(where, raw))
        code = f.suffix.lower() in CODE_SUFFIXES
        if walk is not None and code:
            passages, why = _folder_code_passages(raw, where, n)
            if why:
                left_out.append((f.relative_to(p).as_posix(), why))
                records[-1]["skipped"] = why  # read, and left out: in run.json
                continue
        else:
            passages = document_passages(raw, where, n)
        if code:
            code_read.append(f)
        for i, text in enumerate(passages, start=1):
            examples.append(Example(id=f"{doc}:{i:04d}", text=text, doc_id=doc,
                                    meta={"source": where, "passage": i}))
            # one line over the limit (a book's sentences are cut every N words)
            if code and "\n" not in text and len(text) > 2 * LONG_ROW_WORDS and (words := len(text.split())) > longest[0]:
                longest = (words, examples[-1].id)
    if left_out:
        warnings.warn(DataWarning(f"{name}: {len(left_out)} source file(s) left out: {first_few(left_out)}"),
                      stacklevel=3)
    books_read = len(files) - len(code_read) - len(left_out)
    if walk is not None and code_read and books_read:  # a build script among the chapters is a document too
        warnings.warn(DataWarning(
            f"{name}: {len(code_read)} source file(s) read as documents beside {books_read} book(s) (e.g. "
            f"{code_read[0].relative_to(p).as_posix()}); move them out if they are not what is audited"), stacklevel=3)
    if not examples:
        k = len(left_out)
        raise DataError(f"{name}: every file in it was left out ({k} source file{'s' if k != 1 else ''}, "
                        f"e.g. {left_out[0][0]}: {left_out[0][1]})")
    if longest[0] > LONG_ROW_WORDS:
        warnings.warn(DataWarning(
            f"{name}: passage {longest[1]} holds {longest[0]:,} words, one line longer than {LONG_ROW_WORDS:,} "
            "words (minified or generated code?): it is scored whole in windows of the model's context, slowly"),
            stacklevel=3)
    if len(records) == 1:
        digest = records[0]["sha256"]
    else:  # over each file's name and content hash, so renaming a file changes it too
        listing = "".join(f"{f.relative_to(p).as_posix()}\0{r['sha256']}\n" for f, r in zip(files, records))
        # a name's bytes that are not UTF-8 (read as lone surrogates) hash as those bytes
        digest = hashlib.sha256(name_bytes(listing)).hexdigest()
    if walk is not None:
        records += walk.records(name)  # {"path", "skipped": why}: in run.json with the files read
    return Dataset(examples=examples, path=name, sha256=digest, n_rows=len(examples), n_skipped=0,
                   columns={"text": None, "label": None, "doc_id": None, "id": None},
                   has_labels=False, has_documents=True, files=records,
                   passage_words=n)
