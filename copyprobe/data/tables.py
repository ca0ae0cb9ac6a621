"""Read passages from JSON lines, JSON, CSV/TSV, Parquet or a saved Hugging Face dataset
(tables of rows; books are :mod:`copyprobe.data.passages`, the entry point for any path
or dataset name is :func:`copyprobe.data.readers.load_dataset`).

Every problem the user can fix (missing file, bad JSON, invalid UTF-8, no text column,
bad labels, duplicate ids ...) raises :class:`~copyprobe.errors.DataError` with a
one-line message naming the file and, where there is one, the row and column.

Columns are found by common names (first match wins) unless given explicitly:

========  =====================================
role      names tried
========  =====================================
text      text, input, snippet, Example_A
label     label, Label
document  doc_id, doc, ID, book_id, book
id        id (else the 0-based row number)
========  =====================================

Every other column goes into ``Example.meta``.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import hashlib
import io
import json
import math
import numbers
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError, DataSettingError, DataWarning
from copyprobe.files import name_bytes
from copyprobe.files import write_jsonl as files_write_jsonl

TEXT_NAMES = ("text", "input", "snippet", "Example_A")
LABEL_NAMES = ("label", "Label")
DOC_NAMES = ("doc_id", "doc", "ID", "book_id", "book")
ID_NAMES = ("id",)

SUPPORTED = (".jsonl", ".json-lines", ".json", ".csv", ".tsv", ".parquet",
             "a directory saved with datasets' save_to_disk")

_TRUE_STRINGS = {"1", "1.0", "true"}
_FALSE_STRINGS = {"0", "0.0", "false"}


@dataclass
class Dataset:
    examples: list[Example]
    path: str
    sha256: str
    n_rows: int  # rows read, including the skipped ones
    n_skipped: int  # rows with empty, whitespace-only or null text
    columns: dict[str, str | None]  # role (text, label, doc_id, id) -> column used, None if none
    has_labels: bool
    has_documents: bool
    # the files read, each {"path", "bytes", "sha256"}, in reading order ([] for data from the hub)
    files: list[dict[str, Any]] = field(default_factory=list)
    passage_words: int | None = None  # how book files were cut into passages; None for tables
    first_skipped: str | None = None  # where the first skipped row is ("line 3"), for the note

    def __len__(self) -> int:
        return len(self.examples)

    def to_frame(self, *, meta: bool = False):
        """One row per example: id, text, then label / doc_id when known.

        With ``meta=True`` the meta columns follow; a meta key that collides with one of
        the first columns gets a ``meta.`` prefix.
        """
        import pandas as pd

        records = []
        for ex in self.examples:
            row: dict[str, Any] = {"id": ex.id, "text": ex.text}
            if self.has_labels:
                row["label"] = ex.label
            if self.has_documents:
                row["doc_id"] = ex.doc_id
            if meta:
                for key, value in ex.meta.items():
                    row[f"meta.{key}" if key in ("id", "text", "label", "doc_id") else key] = value
            records.append(row)
        frame = pd.DataFrame.from_records(records)
        if self.has_labels:
            frame["label"] = frame["label"].astype("int64")
        return frame


# -- entry point for tables -----------------------------------------------------------

TABLE_SUFFIXES = (".jsonl", ".json-lines", ".json", ".csv", ".tsv", ".parquet")


def is_hf_dir(p: Path) -> bool:
    """A directory written by datasets' save_to_disk."""
    return (p / "dataset_dict.json").is_file() or (p / "state.json").is_file()


def read_table(
    path: str | os.PathLike,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    doc_column: str | None = None,
    id_column: str | None = None,
    split: str | None = None,
) -> Dataset:
    """Read an existing data file (or saved HF dataset directory) into a :class:`Dataset`.

    ``split`` picks the split of a saved ``DatasetDict``; it is needed only when the
    dict has more than one split.
    """
    p = Path(path).expanduser()
    name = str(path)
    if p.is_dir():
        rows, columns, digest, files = _read_hf_dir(p, name, split)
    else:
        if split is not None:
            raise ConfigError(f"split={split!r} applies only to a saved Hugging Face dataset "
                              f"directory, not to the file {name}")
        raw = _read_bytes(p, name)
        digest = hashlib.sha256(raw).hexdigest()
        files = [file_record(name, raw)]
        suffix = p.suffix.lower()
        if suffix in (".jsonl", ".json-lines"):
            rows = _parse_jsonl(_decode(raw, name), name)
        elif suffix == ".json":
            rows = _parse_json(_decode(raw, name), name)
        elif suffix in (".csv", ".tsv"):
            rows = _parse_csv(_decode(raw, name), name, "," if suffix == ".csv" else "\t")
        elif suffix == ".parquet":
            rows = _parse_parquet(raw, name, text_column)
        else:
            raise DataError(f"unsupported data file type {p.suffix or '(no extension)'!r} "
                            f"for {name}; supported: {', '.join(SUPPORTED)}")
        columns = _union_columns(r for _, r in rows)
    dataset = _build(rows, columns, name, digest, text_column, label_column, doc_column, id_column)
    dataset.files = files
    if text_column is None:
        dataset = apply_decop_layout(dataset)  # DE-COP rows: the verbatim option is the passage
    return dataset


def file_record(path: str, raw: bytes) -> dict[str, Any]:
    """What run records keep of an input file: its path, size and sha256."""
    return {"path": path, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


DECOP_COLUMNS = ("Example_A", "Example_B", "Example_C", "Example_D")
LETTERS = "ABCD"


def apply_decop_layout(dataset):
    """A Dataset read from DE-COP columns with the verbatim option as text and all four
    options plus ``Answer`` in meta; other datasets come back unchanged."""
    if dataset.columns.get("text") not in DECOP_COLUMNS:
        return dataset
    text_col = dataset.columns["text"]
    examples = []
    for ex in dataset.examples:
        meta = dict(ex.meta)
        if "Answer" not in meta or not all(c in meta for c in DECOP_COLUMNS if c != text_col):
            return dataset
        meta[text_col] = ex.text
        answer = meta["Answer"]
        if isinstance(answer, str) and answer.strip().upper() in LETTERS:
            letter = answer.strip().upper()
        elif isinstance(answer, int) and not isinstance(answer, bool) and answer in range(4):
            letter = LETTERS[answer]
        else:
            raise DataError(f"{dataset.path}: id {ex.id!r}: Answer {answer!r} is not one of A, B, C, D")
        verbatim = meta.get(f"Example_{letter}")
        if not isinstance(verbatim, str) or not verbatim.strip():
            raise DataError(f"{dataset.path}: id {ex.id!r}: Example_{letter} (the Answer) is empty")
        examples.append(replace(ex, text=verbatim, meta=meta))
    columns = dict(dataset.columns, text="Example_{Answer}")
    return replace(dataset, examples=examples, columns=columns)



# -- raw reading ----------------------------------------------------------------------

# rows are (where, record): `where` locates the row in messages ("line 3", "row 2")
Rows = list[tuple[str, dict[str, Any]]]


def _read_bytes(p: Path, name: str) -> bytes:
    try:
        return p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {name}: {exc.strerror or exc}") from None


def _utf16_without_mark(raw: bytes) -> bool:
    """Mostly ASCII text in UTF-16 (either byte order) shows a NUL as every other byte."""
    head = raw[:4096]
    if len(head) < 8:
        return False
    shares = sorted(half.count(0) / len(half) for half in (head[0::2], head[1::2]))
    return shares[1] > 0.9 and shares[0] < 0.1


def _decode(raw: bytes, name: str) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{name} is UTF-16 encoded; save it as UTF-8")
    nul = raw.find(b"\x00")
    if nul >= 0:
        if _utf16_without_mark(raw):
            raise DataError(f"{name} looks UTF-16 encoded (without a byte-order mark: a NUL byte beside every "
                            "ASCII character); save it as UTF-8")
        raise DataError(f"{name} looks like a binary file, not text (NUL byte at byte offset {nul})")
    try:
        # utf-8-sig drops a leading byte-order mark, which editors on Windows add
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw[:offset].count(b"\n") + 1
        raise DataError(f"{name} is not valid UTF-8: byte 0x{raw[offset]:02x} at byte offset "
                        f"{offset} (line {line}); mixed or non-UTF-8 encodings are not "
                        f"supported, re-save the file as UTF-8") from None


def _parse_jsonl(text: str, name: str) -> Rows:
    rows: Rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name}: invalid JSON on line {lineno} (column {exc.colno}): "
                            f"{exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise DataError(f"{name}: cannot read line {lineno}: {_json_limit(exc)}") from None
        if not isinstance(obj, dict):
            raise DataError(f"{name}: line {lineno} is a JSON {type(obj).__name__}, "
                            f"expected an object")
        rows.append((f"line {lineno}", obj))
    return rows


def _parse_json(text: str, name: str) -> Rows:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            # many ".json" files are really JSON lines (pandas to_json(lines=True))
            return _parse_jsonl(text, name)
        raise DataError(f"{name}: invalid JSON on line {exc.lineno} (column {exc.colno}): "
                        f"{exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{name}: cannot read it: {_json_limit(exc)}") from None
    if isinstance(data, dict):
        raise DataError(f"{name}: expected a JSON list of objects, got an object with keys "
                        f"{', '.join(map(str, list(data)[:10]))}")
    if not isinstance(data, list):
        raise DataError(f"{name}: expected a JSON list of objects, got {type(data).__name__}")
    rows: Rows = []
    for i, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise DataError(f"{name}: item {i} of the list is a JSON {type(obj).__name__}, "
                            f"expected an object")
        rows.append((f"row {i}", obj))
    return rows


def _json_limit(exc: BaseException) -> str:
    """What a JSON value beyond Python's limits is, in words."""
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply (more levels of brackets than can be read)"
    text = str(exc)
    if "digits" in text:  # int() refuses numbers of more than 4300 digits
        return "a number with thousands of digits (more than 4300)"
    return text.splitlines()[0] if text else type(exc).__name__


def _parse_csv(text: str, name: str, delimiter: str) -> Rows:
    # the default limit (128 KiB per field) is too small for whole chapters or books
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    spanning: list[tuple[int, int]] = []  # (first, last) line of rows that span several lines
    start = 1
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{name} is empty (no header row)")
        if reader.line_num > 1:
            raise DataError(f"{name}: line 1: the header row spans lines 1-{reader.line_num} (a quote opened in it "
                            f"closes only there); check the quotes of the header")
        seen: set[str] = set()
        for col in header:
            if col in seen:
                raise DataError(f"{name}: column {col!r} appears twice in the header")
            seen.add(col)
        rows: Rows = []
        while True:
            start = reader.line_num + 1
            values = next(reader, None)
            if values is None:
                break
            if not values:
                continue
            if reader.line_num > start:
                spanning.append((start, reader.line_num))
            where = f"line {start}"
            if len(values) > len(header):
                raise DataError(f"{name}: {where} has {len(values)} fields but the header has "
                                f"{len(header)}")
            # trailing fields left out count as missing values
            rows.append((where, dict(zip(header, values))))
    except csv.Error as exc:
        raise DataError(f"{name}: cannot parse line {reader.line_num}: {exc}") from None
    if '"' in text and _unterminated_quote(text, delimiter):
        first, last = rows[-1][0].split()[-1] if rows else start, reader.line_num
        rest = f"lines {first}-{last}" if str(first) != str(last) else f"line {first}"
        raise DataError(f"{name}: line {first}: a quote opened on this line is never closed, so {rest} "
                        f"(the rest of the file) would be read as one field; close the quote or double "
                        f"the quote character inside quoted fields")
    if spanning:
        first, last = spanning[0]
        n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        warnings.warn(DataWarning(
            f"{name}: {len(spanning)} row(s) span several lines (the first at lines {first}-{last}: a quoted "
            f"field holding line breaks), so {len(rows)} rows were read from {n_lines} lines; check the "
            f"quotes if that is not intended"), stacklevel=4)
    return rows


def _unterminated_quote(text: str, delimiter: str) -> bool:
    """True when a quoted field runs to the end of the file (strict csv says so)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        for _ in reader:
            pass
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


def _parse_parquet(raw: bytes, name: str, text_column: str | None = None) -> Rows:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(pa.BufferReader(raw))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(f"cannot read {name} as Parquet: {str(exc).splitlines()[0]}") from None
    # The text column's type is checked from the schema, before any row is converted:
    # a struct, list or map there is refused by name and type rather than handed on.
    text_col = _pick(list(schema.names), text_column, TEXT_NAMES, "text_column", name)
    if text_col is not None and schema.names.count(text_col) == 1:
        kind = schema.field(text_col).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        textual = (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
                   or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
                   or getattr(pa.types, "is_string_view", lambda _: False)(kind))
        if not textual:
            raise DataSettingError("text_column", f"{'selects' if text_column else 'is not given, so'} {name}: "
                                                  f"column {text_col!r} is a Parquet {kind} column, expected text "
                                                  "(string); name a column that holds the text")
    if len(set(schema.names)) != len(schema.names):
        twice = sorted({n for n in schema.names if schema.names.count(n) > 1})
        raise DataError(f"{name}: column {twice[0]!r} appears twice")
    try:
        # No thread may outlive the read: an Arrow thread-pool worker alive at exit can abort
        # the process ("terminate called without an active exception", exit 134;
        # apache/arrow#34314). pq.read_table goes through the dataset scanner, which starts a
        # pool worker even with use_threads=False (a rare abort in CI remained);
        # ParquetFile.read without threads starts none.
        table = pq.ParquetFile(pa.BufferReader(raw), pre_buffer=False).read(use_threads=False)
        records = table.to_pylist()
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:  # e.g. dates beyond year 9999
        raise DataError(f"cannot read {name} as Parquet: {str(exc).splitlines()[0]}") from None
    return [(f"row {i}", r) for i, r in enumerate(records)]


def _read_hf_dir(p: Path, name: str, split: str | None) -> tuple[Rows, list[str], str, list[dict[str, Any]]]:
    if not is_hf_dir(p):
        raise DataError(f"{name} is a directory but not a Hugging Face dataset saved with "
                        f"save_to_disk (no dataset_dict.json or state.json in it)")
    try:
        import datasets
    except ImportError:
        raise DataError(f"reading the Hugging Face dataset directory {name} needs the "
                        f"'datasets' package: pip install datasets") from None
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as exc:  # datasets raises many types for a damaged directory
        raise DataError(f"cannot load the Hugging Face dataset {name}: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if split is not None:
            if split not in ds:
                raise DataError(f"{name} has no split {split!r}; splits: {', '.join(splits)}")
            chosen = split
        elif len(splits) == 1:
            chosen = splits[0]
        else:
            raise DataError(f"{name} has several splits ({', '.join(splits)}); choose one with "
                            f"split=")
        ds = ds[chosen]
        digest_root = p / chosen
    else:
        if split is not None:
            raise ConfigError(f"split={split!r} given but {name} holds a single dataset, "
                              f"not a DatasetDict")
        digest_root = p
    rows = [(f"row {i}", r) for i, r in enumerate(ds.to_list())]
    digest, files = _hash_dir(digest_root, Path(name) / digest_root.relative_to(p))
    return rows, list(ds.column_names), digest, files


def _hash_dir(root: Path, shown: Path) -> tuple[str, list[dict[str, Any]]]:
    """sha256 over the relative paths and contents of every file, in sorted order, and
    each file's record (its path under ``shown``)."""
    h = hashlib.sha256()
    files = []
    for f in sorted(x for x in root.rglob("*") if x.is_file()):
        rel = name_bytes(f.relative_to(root).as_posix())  # a name's bytes, UTF-8 or not
        h.update(len(rel).to_bytes(8, "big") + rel)
        with open(f, "rb") as fh:
            content = fh.read()
        h.update(len(content).to_bytes(8, "big") + content)
        files.append(file_record(str(shown / f.relative_to(root)), content))
    return h.hexdigest(), files


def _union_columns(records: Iterable[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        for k in r:
            seen.setdefault(k, None)
    return list(seen)


# -- building examples ----------------------------------------------------------------

def _pick(columns: list[str], explicit: str | None, names: tuple[str, ...], kwarg: str,
          name: str) -> str | None:
    if explicit is not None:
        if explicit not in columns:
            raise DataError(f"{name}: {kwarg}={explicit!r} is not a column; columns: "
                            f"{_column_list(columns)}")
        return explicit
    for n in names:
        if n in columns:
            return n
    return None


def _column_list(columns: list[str], limit: int = 20) -> str:
    """Column names for a one-line message: plain names as they are, others quoted and cut."""
    shown = [c if isinstance(c, str) and c.isprintable() and len(c) <= 40 else _short(c) for c in columns[:limit]]
    more = f", ... ({len(columns)} columns)" if len(columns) > limit else ""
    return (", ".join(shown) + more) or "(none)"


def _is_missing(value: Any) -> bool:
    return (value is None or (isinstance(value, float) and math.isnan(value))
            or (isinstance(value, str) and value == ""))


def id_problem(value: Any, what: str = "an id") -> str | None:
    """Why ``value`` cannot be an id ("is an object ({...}); ..."), or None: str() would make
    a Python repr of an object or a list the id ("{'a': 1}"), matching nothing anyone wrote.
    ``what`` names another field read as text by the same rule ("a title")."""
    if isinstance(value, dict):
        shape = "an object"
    elif isinstance(value, (list, tuple, set)) or type(value).__name__ == "ndarray":
        shape = "a list"
    else:
        return None
    try:
        shown = json.dumps(value.tolist() if hasattr(value, "tolist") else value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    return f"is {shape} ({shown[:60]}{'...' if len(shown) > 60 else ''}); {what} must be text or a number"


def _key_str(value: Any, what: str = "the id") -> str:
    # ids and documents are compared as strings; 3.0 from a float column means "3"
    problem = id_problem(value)
    if problem is not None:
        raise DataError(f"{what} {problem}")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _parse_label(value: Any) -> int | None:
    """0/1 or None if the value is not an accepted spelling of a binary label."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value) if value in (0, 1) else None
    if isinstance(value, numbers.Real):
        f = float(value)
        return int(f) if f in (0.0, 1.0) else None
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _TRUE_STRINGS:
            return 1
        if s in _FALSE_STRINGS:
            return 0
    return None


def _jsonable(value: Any) -> Any:
    """Meta values as plain JSON types (they end up in run records)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _jsonable(value.tolist())
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _jsonable(float(value))
    return str(value)


def _build(rows: Rows, columns: list[str], name: str, digest: str, text_column: str | None,
           label_column: str | None, doc_column: str | None, id_column: str | None) -> Dataset:
    if not rows:
        raise DataError(f"{name} has no rows")
    text_col, label_col, doc_col, id_col = _column_roles(columns, name, text_column, label_column, doc_column,
                                                         id_column)
    used = {c for c in (text_col, label_col, doc_col, id_col) if c is not None}
    examples: list[Example] = []
    seen_ids: dict[str, str] = {}
    labels, documents = _FirstOfEach(), _FirstOfEach()  # to name one row of each kind when they mix
    n_skipped, first_skipped = 0, None
    long_rows: list[tuple[int, int, str]] = []  # (words, -row, where) of rows over LONG_ROW_WORDS
    for index, (where, record) in enumerate(rows):
        text = _row_text(record.get(text_col), name, where, text_col)
        if not text.strip():
            # nothing to score: the row's other columns (even a bad label) do not matter
            n_skipped += 1
            first_skipped = first_skipped or where
            continue
        if len(text) > 2 * LONG_ROW_WORDS and len(words := text.split()) > LONG_ROW_WORDS:  # a word and a space
            long_rows.append((len(words), -index, where))  # of equal ones, max() takes the first
        _check_encodable(text, f"{name}: {where}: column {text_col!r}")
        ex_id = _row_id(record, index, id_col, name, where)
        here = f"{name}: {where} (id {ex_id!r})"
        if ex_id in seen_ids:
            raise DataError(f"{name}: duplicate id {ex_id!r} ({seen_ids[ex_id]} and {where})")
        seen_ids[ex_id] = where

        label = _row_label(record, label_col, here)
        if labels.mixed(label is not None, where, ex_id):
            (w_has, id_has), (w_lacks, id_lacks) = labels.with_value, labels.without_value
            raise DataError(f"{name}: some rows have a label and some do not (e.g. {w_has} id {id_has!r} has one, "
                            f"{w_lacks} id {id_lacks!r} has none in column {label_col!r}); label all rows or none")
        doc_id = _row_document(record, doc_col, here)
        if documents.mixed(doc_id is not None, where, ex_id):
            w_lacks, id_lacks = documents.without_value
            raise DataError(f"{name}: some rows have a document id and some do not (e.g. {w_lacks} id "
                            f"{id_lacks!r} has none in column {doc_col!r}); give every row a document or none")

        meta = {k: _jsonable(v) for k, v in record.items() if k not in used}
        examples.append(Example(id=ex_id, text=text, label=label, doc_id=doc_id, meta=meta))

    if not examples:
        raise DataError(f"{name}: all {len(rows)} rows have empty text in column {text_col!r}")
    if long_rows:
        words, _, where = max(long_rows)
        warnings.warn(DataWarning(
            f"{name}: {len(long_rows)} row(s) hold more than {LONG_ROW_WORDS:,} words (the longest: {where}, "
            f"{words:,} words); a row is one passage, scored whole in windows of the model's context (slow, "
            f"and with no progress shown until it is done), and one score for a whole book says little: give "
            f"a book as its own file (.txt, .pdf, ...) to have it cut into passages"), stacklevel=4)
    has_labels = labels.with_value is not None
    has_documents = documents.with_value is not None
    return Dataset(
        examples=examples,
        path=name,
        sha256=digest,
        n_rows=len(rows),
        n_skipped=n_skipped,
        first_skipped=first_skipped,
        columns={"text": text_col, "label": label_col if has_labels else None,
                 "doc_id": doc_col if has_documents else None, "id": id_col},
        has_labels=has_labels,
        has_documents=has_documents,
    )


# a row longer than this is a book, not a passage (passages are tens to a few thousand words)
LONG_ROW_WORDS = 10_000


def _column_roles(columns: list[str], name: str, text_column: str | None, label_column: str | None,
                  doc_column: str | None, id_column: str | None) -> tuple[str, str | None, str | None, str | None]:
    """(text, label, document, id) column: the ones given, else found by name; a text
    column is required and no column plays two roles."""
    text_col = _pick(columns, text_column, TEXT_NAMES, "text_column", name)
    if text_col is None:
        raise DataSettingError("text_column", f"is not given and {name} has no text column; columns found: "
                                              f"{_column_list(columns)}; names tried: {', '.join(TEXT_NAMES)}; "
                                              "name the column that holds the text")
    label_col = _pick(columns, label_column, LABEL_NAMES, "label_column", name)
    doc_col = _pick(columns, doc_column, DOC_NAMES, "doc_column", name)
    id_col = _pick(columns, id_column, ID_NAMES, "id_column", name)
    roles = [c for c in (text_col, label_col, doc_col, id_col) if c is not None]
    if len(set(roles)) != len(roles):
        raise DataError(f"{name}: one column is used for two roles "
                        f"(text={text_col!r}, label={label_col!r}, document={doc_col!r}, "
                        f"id={id_col!r})")
    return text_col, label_col, doc_col, id_col


class _FirstOfEach:
    """(where, id) of the first row with a value and of the first without one."""

    def __init__(self) -> None:
        self.with_value: tuple[str, str] | None = None
        self.without_value: tuple[str, str] | None = None

    def mixed(self, has_value: bool, where: str, ex_id: str) -> bool:
        """Note this row; True once rows of both kinds were seen."""
        if has_value:
            self.with_value = self.with_value or (where, ex_id)
        else:
            self.without_value = self.without_value or (where, ex_id)
        return self.with_value is not None and self.without_value is not None


def _row_text(text: Any, name: str, where: str, text_col: str) -> str:
    """A row's text: bytes decoded as UTF-8, null or NaN read as empty, anything else refused."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{name}: {where}: column {text_col!r} is not valid UTF-8 "
                            f"(byte offset {exc.start} of the value)") from None
    if text is None or (isinstance(text, float) and math.isnan(text)):
        text = ""
    if not isinstance(text, str):
        raise DataError(f"{name}: {where}: column {text_col!r} holds a "
                        f"{type(text).__name__} ({_short(text)}), expected text")
    return text


def _row_id(record: dict, index: int, id_col: str | None, name: str, where: str) -> str:
    """The row's id from the id column (required there), else its position."""
    if id_col is not None:
        raw_id = record.get(id_col)
        if _is_missing(raw_id):
            raise DataError(f"{name}: {where} has no id in column {id_col!r}")
        ex_id = _key_str(raw_id, f"{name}: {where}: column {id_col!r}")
    else:
        ex_id = str(index)
    _check_encodable(ex_id, f"{name}: {where}: the id")
    return ex_id


def _row_label(record: dict, label_col: str | None, here: str) -> int | None:
    """0, 1, or None for a null or empty cell; NaN is not a missing marker here but a bad value."""
    raw = record.get(label_col) if label_col is not None else None
    if raw is None or raw == "":
        return None
    label = _parse_label(raw)
    if label is None:
        raise DataError(f"{here}: label must be 0 or 1, got {_short(raw)} in column {label_col!r}")
    return label


def _row_document(record: dict, doc_col: str | None, here: str) -> str | None:
    if doc_col is None or _is_missing(record.get(doc_col)):
        return None
    doc_id = _key_str(record[doc_col], f"{here}: column {doc_col!r}")
    _check_encodable(doc_id, f"{here}: column {doc_col!r}")
    return doc_id


def _check_encodable(value: str, what: str) -> None:
    """A JSON "\\ud800" escape gives a lone surrogate: a str that is not text and cannot be
    hashed or written as UTF-8 later, so it is refused here, naming the row."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataError(f"{what} holds an unpaired surrogate \\u{ord(value[exc.start]):04x} at character "
                        f"{exc.start} (a broken \\u escape), which is not valid text") from None


def _short(value: Any, limit: int = 40) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def write_jsonl(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON object per line, atomically (NaN as null); returns the number of rows.
    The data layer's name for :func:`copyprobe.files.write_jsonl`."""
    return files_write_jsonl(path, rows)
