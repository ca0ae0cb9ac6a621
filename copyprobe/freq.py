"""Token frequency tables of a reference corpus, for DC-PDD (Zhang et al. 2024).

A table counts how often each token id of one tokenizer occurs in plain text. It is
built by streaming: text is read in chunks of ``chunk_chars`` characters, cut at the
last whitespace so no word is split between two chunks, tokenized, and added to a
count vector with ``numpy.bincount``. Memory use is one chunk plus the count vector
(vocabulary size x 8 bytes), whatever the corpus size, so a table can be built from
gigabytes of text or from a pipe.

Tokens are counted without special tokens (``add_special_tokens=False``): the table
describes text. The DC-PDD authors count ``tokenizer.encode(text)`` (with BOS where the
tokenizer adds one) and truncate each document to 1,024 tokens; copyprobe does
neither, which only changes the smoothed frequency of BOS (never scored) and stops
long documents being under-counted.

Line breaks: each line is tokenized with its line break, so a line-break token is
counted at every line end, where the authors (JSON documents, tokenized whole) count
line breaks only inside a document's text and merged with their neighbours as the
tokenizer merges them. copyprobe keeps its counting on purpose (issue 29): a plain-text
corpus has no document records, its line breaks are text the model reads and scores,
and the effect on dc_pdd is at most 4.4e-4 relative (docs/methods.md).

Saved file (``numpy.savez_compressed``, ``FORMAT`` = 1):

==============  ========================================================================
``counts``      int64[vocab_size], occurrences of each token id
``total``       int64, sum of counts
``vocab_size``  int64, ``len(tokenizer)`` (added tokens included)
``name``        str, the tokenizer's name (the model spec it came from)
``vocab_hash``  str, sha256 of the sorted ``token -> id`` mapping
``token_crc``   uint32[vocab_size], crc32 of each id's token string (``convert_ids_to_tokens``)
``piece_crc``   uint32[vocab_size], crc32 of each id decoded alone (``decode([id])``)
``format``      int64, ``FORMAT``
==============  ========================================================================

``token_crc``/``piece_crc`` let a method that sees only token ids and token strings
(a :class:`~copyprobe.backends.base.TokenLogprobs`) check that the model's tokenizer
is the table's: see :meth:`FrequencyTable.check_tokens`.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import itertools
import json
import os
import sys
import threading
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from copyprobe.errors import ConfigError, DataError, DataWarning
from copyprobe.files import binary_controls, too_many_controls

FORMAT = 1
DEFAULT_CHUNK_CHARS = 1 << 20  # characters read per step (about 1-4 MB of text)


# ----------------------------------------------------------------------------- tokenizer
def _vocab_size(tokenizer: Any) -> int:
    try:
        size = len(tokenizer)
    except TypeError:
        size = getattr(tokenizer, "vocab_size", None)
    if not isinstance(size, int) or size <= 0:
        raise ConfigError("tokenizer has no vocabulary size (len(tokenizer) failed)")
    return size


def tokenizer_name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


def vocab_hash(tokenizer: Any) -> str:
    """sha256 of the tokenizer's sorted ``token -> id`` mapping (added tokens included)."""
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if get_vocab is None:
        raise ConfigError("tokenizer has no get_vocab(): cannot identify its vocabulary")
    items = sorted(get_vocab().items(), key=lambda kv: (kv[1], kv[0]))
    data = json.dumps(items, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _crc(text: str | None) -> int:
    return zlib.crc32((text or "").encode("utf-8", "surrogatepass"))


def _token_crcs(tokenizer: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    ids = list(range(size))
    raw = tokenizer.convert_ids_to_tokens(ids)
    token_crc = np.fromiter((_crc(t) for t in raw), dtype=np.uint32, count=size)
    decode = getattr(tokenizer, "decode", None)
    if decode is None:
        pieces = raw
    else:
        pieces = [decode([i]) for i in ids]
    piece_crc = np.fromiter((_crc(t) for t in pieces), dtype=np.uint32, count=size)
    return token_crc, piece_crc


def _encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    encoded = tokenizer(texts, add_special_tokens=False)
    ids = encoded["input_ids"] if not isinstance(encoded, list) else encoded
    return ids


# ----------------------------------------------------------------------------- table
@dataclass(frozen=True)
class FrequencyTable:
    counts: np.ndarray  # int64[vocab_size]
    name: str
    vocab_hash: str
    token_crc: np.ndarray | None = None
    piece_crc: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return int(self.counts.shape[0])

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def frequencies(self, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Laplace-smoothed corpus frequency of each id: (count + 1) / (total + V)."""
        ids = np.asarray(token_ids, dtype=np.int64)
        self.check_ids(ids)
        return (self.counts[ids] + 1.0) / (self.total + self.vocab_size)

    def check_ids(self, ids: np.ndarray) -> None:
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ConfigError(
                f"frequency table is for tokenizer {self.name!r} ({self.vocab_size} tokens) but the "
                f"model produced token id {int(ids.max())}: tokenizer mismatch; build a table with "
                "`copyprobe freq build --tokenizer <the model>`"
            )

    def check_tokens(self, token_ids: Sequence[int], tokens: Sequence[str] | None) -> None:
        """Raise ConfigError unless ``tokens`` (the model's strings for ``token_ids``) are
        this table's. Both common spellings are accepted: the raw vocabulary entry
        (``convert_ids_to_tokens``, e.g. 'Ġthe') and the decoded piece (' the'). A
        tokenizer is taken to match when at least half the tokens agree (decoding
        artefacts such as partial UTF-8 bytes can make a few differ)."""
        ids = np.asarray(token_ids, dtype=np.int64)
        self.check_ids(ids)
        if tokens is None or self.token_crc is None or len(tokens) != len(ids) or not len(ids):
            return
        crcs = np.fromiter((_crc(t) for t in tokens), dtype=np.uint32, count=len(tokens))
        agree = (crcs == self.token_crc[ids]) | (crcs == self.piece_crc[ids])
        if agree.mean() < 0.5:
            raise ConfigError(
                f"frequency table is for tokenizer {self.name!r} but the model's tokens differ "
                f"({int(agree.sum())} of {len(ids)} agree): tokenizer mismatch; build a table with "
                "`copyprobe freq build --tokenizer <the model>`"
            )

    def check_tokenizer(self, tokenizer: Any) -> None:
        """Raise ConfigError unless ``tokenizer`` has exactly this table's vocabulary."""
        size = _vocab_size(tokenizer)
        if size != self.vocab_size or vocab_hash(tokenizer) != self.vocab_hash:
            raise ConfigError(
                f"frequency table is for tokenizer {self.name!r} ({self.vocab_size} tokens), not "
                f"{tokenizer_name(tokenizer)!r} ({size} tokens): vocabularies differ"
            )

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        if path.parent and not path.parent.exists():
            raise ConfigError(f"cannot write {path}: folder {path.parent} does not exist")
        arrays: dict[str, Any] = {
            "counts": self.counts.astype(np.int64),
            "total": np.int64(self.total),
            "vocab_size": np.int64(self.vocab_size),
            "name": np.str_(self.name),
            "vocab_hash": np.str_(self.vocab_hash),
            "format": np.int64(FORMAT),
        }
        if self.token_crc is not None:
            arrays["token_crc"] = self.token_crc.astype(np.uint32)
            arrays["piece_crc"] = self.piece_crc.astype(np.uint32)
        tmp = path.with_name(path.name + ".tmp")
        try:
            with open(tmp, "wb") as handle:  # a file handle: numpy does not append ".npz"
                np.savez_compressed(handle, **arrays)
            os.replace(tmp, path)
        except OSError as exc:  # a full device, read-only folder, a directory named like the table
            if tmp.is_file():
                try:
                    tmp.unlink()
                except OSError:
                    pass
            raise DataError(f"cannot write frequency table {path}: {exc.strerror or exc}; "
                            "nothing was written (an earlier table there is unchanged)") from None
        return path


_LOADED: dict[tuple[str, int, int], FrequencyTable] = {}


def load_frequency_table(path: str | os.PathLike) -> FrequencyTable:
    """Load a table written by :func:`build_frequency_table` (cached per path and mtime)."""
    if path is None or str(path).strip() == "":
        raise ConfigError("no frequency table given: build one with `copyprobe freq build`")
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        raise ConfigError(
            f"frequency table {str(p)!r} not found: build one with `copyprobe freq build`"
        ) from None
    key = (str(p.resolve()), stat.st_mtime_ns, stat.st_size)
    if key in _LOADED:
        return _LOADED[key]
    table = _table_from_arrays(_read_npz(p), str(p))
    _LOADED[key] = table
    return table


def _read_npz(p: Path) -> dict[str, np.ndarray]:
    """The arrays of the .npz archive ``p``; anything else is one ConfigError saying in
    words what the file is instead (an exception class name tells a user nothing)."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{str(p)!r} is not a copyprobe frequency table ({why})")

    if p.is_dir():
        raise bad("it is a directory")
    try:
        with open(p, "rb") as handle:
            magic = handle.read(6)
    except OSError as exc:
        raise bad(f"cannot read it: {exc.strerror or exc}") from None
    # Checked here because np.load would try a .npy or pickle reader on anything else.
    if not magic:
        raise bad("the file is empty")
    if magic == b"\x93NUMPY":
        raise bad("a single NumPy .npy array, not a .npz archive")
    if not magic.startswith(b"PK"):
        raise bad("not a NumPy .npz archive")
    try:
        with np.load(p, allow_pickle=False) as data:
            return {name: np.asarray(data[name]) for name in data.files}
    except (zipfile.BadZipFile, EOFError, zlib.error):  # a copy or download cut short
        raise bad("the .npz archive is truncated or damaged") from None
    except OSError as exc:
        raise bad(f"cannot read it: {exc.strerror or exc}") from None
    except (ValueError, KeyError):  # a damaged array header, or a pickled object array
        raise bad("an array in it is damaged or holds Python objects") from None


def _table_from_arrays(arrays: dict[str, np.ndarray], where: str) -> FrequencyTable:
    """A FrequencyTable from the arrays of a .npz file, each checked for its layout: any
    other shape or type (a 2-D counts array, a format given as a list, CRCs of another
    length) is one ConfigError naming the array."""

    def bad(name: str, expected: str) -> ConfigError:
        got = arrays.get(name)
        found = "missing" if got is None else f"a {got.dtype} array of shape {got.shape}"
        return ConfigError(f"frequency table {where!r}: {name!r} must be {expected}, found {found}; "
                           "rebuild it with `copyprobe freq build`")

    def scalar(name: str, kinds: str, expected: str):
        value = arrays.get(name)
        if value is None or value.shape != () or value.dtype.kind not in kinds:
            raise bad(name, expected)
        return value.item()

    if "counts" not in arrays and "format" not in arrays:
        raise ConfigError(f"{where!r} is not a copyprobe frequency table (no 'counts' or 'format' array)")
    fmt = scalar("format", "iu", "one integer")
    if fmt != FORMAT:
        raise ConfigError(f"frequency table {where!r} has format {fmt}; this copyprobe reads {FORMAT}")
    counts = arrays.get("counts")
    if counts is None or counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise bad("counts", "a 1-D integer array (one count per vocabulary entry)")
    if counts.size == 0 or (counts < 0).any() or int(counts.sum()) <= 0:
        raise ConfigError(f"frequency table {where!r} is empty or has negative counts")
    name = scalar("name", "U", "one string")
    vocab_hash = scalar("vocab_hash", "U", "one string")
    crcs = {}
    for crc in ("token_crc", "piece_crc"):
        value = arrays.get(crc)
        if value is not None and (value.ndim != 1 or value.dtype.kind not in "iu" or value.size != counts.size):
            raise bad(crc, f"a 1-D integer array of {counts.size} entries (one per vocabulary entry)")
        crcs[crc] = value
    return FrequencyTable(counts=counts.astype(np.int64), name=str(name), vocab_hash=str(vocab_hash), **crcs)


# ----------------------------------------------------------------------------- streaming
# A web corpus of gigabytes often holds a few bytes that are not UTF-8: they are counted as
# U+FFFD (as errors="replace" reads them), and the build says how many there were per file.
_NOT_UTF8 = "copyprobe-freq-not-utf8"
_not_utf8 = threading.local()  # per thread: the handler runs in the thread that reads


def _count_and_replace(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    _not_utf8.bytes = getattr(_not_utf8, "bytes", 0) + error.end - error.start
    return "\ufffd", error.end


codecs.register_error(_NOT_UTF8, _count_and_replace)


def _open_text(path: str) -> io.TextIOBase:
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors=_NOT_UTF8)
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8", errors=_NOT_UTF8)
        return open(path, "r", encoding="utf-8", errors=_NOT_UTF8)
    except OSError as exc:
        raise DataError(f"cannot read corpus file {path!r}: {exc.strerror or exc}") from None


def _refuse_binary(chunk: str, path: str) -> None:
    """A file whose first chunk is mostly not UTF-8 text (control characters, or bytes that
    are not UTF-8, read as U+FFFD) is refused: counted, it would be tokens of noise in the
    table. A few stray bytes in a web corpus are not this (they are counted, with a warning);
    tabs, line and page breaks and terminal colour codes are text."""
    controls = binary_controls(chunk)
    replaced = chunk.count("\ufffd")
    if too_many_controls(controls, len(chunk)) or replaced > max(3, len(chunk) // 10):
        name = "standard input" if path == "-" else repr(path)
        raise DataError(f"corpus {name} is not UTF-8 text ({controls:,} control characters and {replaced:,} bytes "
                        f"that are not UTF-8 in its first {len(chunk):,} characters): a binary file, or text in "
                        "another encoding (UTF-16, Latin-1, GBK ...) to convert to UTF-8 first")


def _raw_chunks(source: Any, chunk_chars: int) -> Iterator[str]:
    """Chunks of text from a path (``-`` = stdin, ``.gz`` read compressed) or from an
    iterable of strings."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path != "-" and os.path.isdir(path):
            raise DataError(f"corpus {path!r} is a folder; give the text files inside it")
        handle = _open_text(path)
        replaced_before = getattr(_not_utf8, "bytes", 0)
        first = True
        try:
            while True:
                try:
                    chunk = handle.read(chunk_chars)
                except EOFError:  # a .gz file cut short (an interrupted download or copy)
                    raise DataError(f"corpus file {path!r} is truncated: the compressed data ends before "
                                    "its end marker; download or copy it again") from None
                except (OSError, zlib.error) as exc:  # not gzip, or damaged compressed data
                    raise DataError(f"cannot read corpus file {path!r}: {exc}") from None
                if not chunk:
                    break
                if first:
                    first = False
                    _refuse_binary(chunk, path)
                yield chunk
        finally:
            if path != "-":
                handle.close()
        replaced = getattr(_not_utf8, "bytes", 0) - replaced_before
        if replaced:
            name = "standard input" if path == "-" else repr(path)
            warnings.warn(DataWarning(f"corpus {name}: {replaced:,} byte{'s' if replaced != 1 else ''} not UTF-8, "
                                      "counted as the replacement character U+FFFD"), stacklevel=2)
    else:
        try:
            iterator = iter(source)
        except TypeError:
            raise ConfigError(f"corpus must be file paths or iterables of text, got {type(source).__name__}") from None
        for piece in iterator:
            if not isinstance(piece, str):
                raise DataError(f"corpus iterable yielded {type(piece).__name__}, expected text")
            # long pieces are cut so one chunk stays about chunk_chars long
            for start in range(0, len(piece), chunk_chars):
                yield piece[start : start + chunk_chars]


def _text_blocks(sources: Iterable[Any], chunk_chars: int) -> Iterator[str]:
    """Chunks cut at whitespace, so no word (and no token) straddles two blocks. Each
    source ends at its own end: documents never run into each other."""
    for source in sources:
        carry = ""
        for chunk in _raw_chunks(source, chunk_chars):
            text = carry + chunk
            cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
            if cut <= 0 or len(text) - cut > chunk_chars:
                # no usable whitespace: give the text as it is rather than grow forever
                carry = ""
                yield text
            else:
                carry = text[cut:]
                yield text[:cut]
        if carry:
            yield carry


def _pieces(block: str, max_piece: int = 16384) -> list[str]:
    """Split a block at line ends into pieces for batched tokenization."""
    out: list[str] = []
    for line in block.splitlines(keepends=True):
        if not line.strip():
            continue
        while len(line) > max_piece:
            cut = line.rfind(" ", 0, max_piece)
            cut = cut if cut > 0 else max_piece
            out.append(line[:cut])
            line = line[cut:]
        out.append(line)
    return out


def build_frequency_table(
    tokenizer: Any,
    corpus: Iterable[Any],
    *,
    name: str | None = None,
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
    progress: Any = None,
) -> FrequencyTable:
    """Count the tokens of ``tokenizer`` over ``corpus``: file paths (``-`` = stdin, ``.gz``
    allowed) and/or iterables of text chunks, streamed ``chunk_chars`` at a time.

    ``tokenizer`` is a Hugging Face tokenizer, or anything with ``__call__(texts,
    add_special_tokens=False) -> {"input_ids": [[...], ...]}``, ``__len__``,
    ``get_vocab`` and ``convert_ids_to_tokens``. ``progress(n_chars)`` is called after
    each block. Raises DataError for an unreadable or empty corpus.
    """
    if isinstance(corpus, (str, os.PathLike)):
        corpus = [corpus]
    if not isinstance(chunk_chars, int) or chunk_chars < 1:
        raise ConfigError(f"chunk_chars must be a positive integer, got {chunk_chars!r}")
    sources = list(corpus)
    if not sources:
        raise DataError("no corpus given: name at least one text file")
    size = _vocab_size(tokenizer)
    counts = np.zeros(size, dtype=np.int64)
    for block in _text_blocks(sources, chunk_chars):
        pieces = _pieces(block)
        if pieces:
            encoded = _encode_batch(tokenizer, pieces)
            n = sum(len(ids) for ids in encoded)
            if n:
                arr = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=n)
                if arr.min() < 0 or arr.max() >= size:
                    raise ConfigError(
                        f"tokenizer produced id {int(arr.max())} outside its vocabulary of {size}"
                    )
                counts += np.bincount(arr, minlength=size)
        if progress is not None:
            progress(len(block))
    if counts.sum() == 0:
        raise DataError("corpus is empty: it has no text to count tokens in")
    token_crc, piece_crc = _token_crcs(tokenizer, size)
    return FrequencyTable(
        counts=counts,
        name=name or tokenizer_name(tokenizer),
        vocab_hash=vocab_hash(tokenizer),
        token_crc=token_crc,
        piece_crc=piece_crc,
    )
