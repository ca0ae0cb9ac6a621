"""``load_dataset``: passages from any path or dataset name.

* a data file (JSON lines, JSON, CSV/TSV, Parquet) or a saved Hugging Face dataset
  directory: rows as they are (:mod:`copyprobe.data.tables`, which documents the columns);
* a book file (``.txt``, ``.md``, ``.epub``, ``.pdf``, ``.docx``, ``.html``/``.htm``), a
  source file (``.py``, ``.js``, ``.c`` ...: ``CODE_SUFFIXES``) or a directory of them: one
  document per file, cut into passages (:mod:`copyprobe.data.passages`, cleaning in
  :mod:`copyprobe.data.books`, both described in docs/input-files.md);
* a dataset name such as ``wikimia:64`` (:mod:`copyprobe.data.datasets`).

Every problem the user can fix raises :class:`~copyprobe.errors.DataError` (or
:class:`~copyprobe.errors.ConfigError` for options that do not apply) with a one-line
message naming the file. Imports run one way: this module imports ``datasets``,
``passages`` and ``tables``; none of them imports it.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Iterator

from copyprobe.data import datasets
from copyprobe.data.books import CODE_SUFFIXES
from copyprobe.data.passages import (DEFAULT_PASSAGE_WORDS, DOCUMENT_SUFFIXES, DOCUMENT_TYPES,
                                     check_passage_words, read_books)
from copyprobe.data.tables import (
    SUPPORTED,
    TABLE_SUFFIXES,
    Dataset,
    is_hf_dir,
    read_table,
    write_jsonl,
)
from copyprobe.errors import ConfigError, DataError, DataWarning
from copyprobe.files import refuse_empty_path, refuse_special_file

__all__ = ["DEFAULT_PASSAGE_WORDS", "Dataset", "load_dataset", "said_while_reading", "write_jsonl"]


def load_dataset(
    path: str | os.PathLike,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    doc_column: str | None = None,
    id_column: str | None = None,
    split: str | None = None,
    passage_words: int | None = None,
) -> Dataset:
    """Read a data file, a saved HF dataset directory, a book or source file, a directory
    of them or a named dataset into a :class:`Dataset`.

    ``split`` picks the split of a saved ``DatasetDict`` (or a named dataset's split);
    ``passage_words`` is the most words of a passage cut from a book or source file
    (default 128); the column options apply to data files only.
    """
    refuse_empty_path(path, "the data", "name a data file, a book, a folder of them or a dataset")
    p = Path(path).expanduser()
    name = str(path)
    columns = {k: v for k, v in (("text_column", text_column), ("label_column", label_column),
                                 ("doc_column", doc_column), ("id_column", id_column)) if v}
    if passage_words is not None:
        check_passage_words(passage_words)
    if not p.exists():
        if not datasets.is_dataset_name(name):
            raise DataError(f"data file not found: {name} (nor a dataset name; datasets: "
                            f"{datasets.known_names()})")
        if columns or passage_words is not None:
            given = [*columns, *(["passage_words"] if passage_words is not None else [])]
            raise ConfigError(f"{', '.join(given)} do not apply to the named dataset {name}")
        return datasets.load_named(name, split=split)
    refuse_special_file(p, "the data")
    is_books = (p.is_dir() and not is_hf_dir(p)) or (p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES)
    if is_books:
        what = ("the directory" if p.is_dir() else "the source file" if p.suffix.lower() in CODE_SUFFIXES
                else "the book file")
        if columns:
            verb = "does" if len(columns) == 1 else "do"
            raise ConfigError(f"{', '.join(columns)} {verb} not apply to {what} {name} (books and source files "
                              "have no columns)")
        if split is not None:
            raise ConfigError(f"split={split!r} applies only to a saved Hugging Face dataset directory, "
                              f"not to {what} {name}")
        return read_books(path, passage_words=passage_words)
    if passage_words is not None:
        raise ConfigError(f"passage_words applies only to {DOCUMENT_TYPES}, not to the data file {name}")
    if p.is_file() and p.suffix.lower() not in TABLE_SUFFIXES:
        raise DataError(f"unsupported data file type {p.suffix or '(no extension)'!r} for {name}; "
                        f"supported: {', '.join(SUPPORTED)}; {DOCUMENT_TYPES} (or a directory of them)")
    return read_table(path, text_column=text_column, label_column=label_column, doc_column=doc_column,
                      id_column=id_column, split=split)


@contextlib.contextmanager
def said_while_reading() -> Iterator[list[str]]:
    """The DataWarnings shown inside (files left out, long rows, rows spanning lines, PDF
    pages without text), as a list of their messages for the run's notes: what the
    terminal showed is then in run.json too. Only what is shown is kept, and it is shown
    as it would be: the warning filters act first (an error filter still raises, an
    ignored warning is no note), then the display in use prints it."""
    said: list[str] = []
    with warnings.catch_warnings():  # restores the display on leaving, an error too
        show = warnings.showwarning

        def keep(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, DataWarning):
                said.append(str(message))
            show(message, category, filename, lineno, file, line)

        warnings.showwarning = keep
        yield said
