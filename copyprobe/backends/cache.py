"""A SQLite cache of model responses that wraps any backend from outside.

Entries are keyed by (model fingerprint, request kind, request hash), so a second run,
or a new method asking for the same texts, makes no new model calls. Misses are answered
in chunks and each chunk is committed in its own transaction: a crash loses at most one
chunk, and a transaction either lands whole or not at all, so no entry is ever half
written. WAL mode lets several processes share one file.

An entry is its response as JSON, except that a list of numbers (a token log-prob answer's
``logprobs``, ``mu`` and ``sigma``; its ``token_ids`` and ``rank``) is stored as
``{"f8": base64 of its float64 bytes}`` (``"i8"``: int64): exact, half the size, and
encoded in a microsecond where printing each number took 0.2 ms an answer (most of the
cache's cost in a run). Entries written before, with plain lists, are read as they are; a
copyprobe from before this form reads such an entry as one of another shape, answers it
again and overwrites it, as for any entry it does not know.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import os
import random
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from copyprobe.backends.base import (
    RESPONSE_TYPES,
    TOKEN_LOGPROBS,
    Backend,
    Request,
    RequestFailed,
    VALUE_FIELDS,
    TokenLogprobs,
    Values,
    hands_over,
    values_as_lists,
)
from copyprobe.errors import BackendError, ConfigError
from copyprobe.files import kind_of

SCHEMA_VERSION = 1
_ENCODER = json.JSONEncoder(separators=(",", ":"))  # an entry's text; json.dumps with an option builds one a call
BUSY_WAIT_S = 60.0  # how long opening a cache waits for other processes creating it
KEYS_PER_QUERY = 500  # keys one look-up binds (SQLite limits bound parameters: 999 before 3.32)
# the entries whose presence shows a model gave a capability (prompt log-probs: an answer
# with them; a context echoed with its text is not shown by one without)
KIND_SHOWING = {TOKEN_LOGPROBS: "token_logprobs"}


def _is_unwritable(exc: sqlite3.OperationalError) -> bool:
    """SQLite's words for a file, or a folder for its -wal and -shm files, it may not write."""
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open database file" in text


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def default_cache_dir() -> Path:
    base = os.environ.get("COPYPROBE_CACHE_DIR")
    if base:
        return Path(base)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("copyprobe"))


def default_cache_path() -> Path:
    return default_cache_dir() / "responses.sqlite"


def _first_problem(report: str) -> str:
    """The first problem ``quick_check`` names, and how many more: its report has a line
    per problem (hundreds for one damaged page), and an error is one line."""
    lines = [line.strip() for line in str(report).splitlines()
             if line.strip() and not line.startswith("*** in database")]
    if not lines:
        return "quick_check failed"
    more = len(lines) - 1
    return lines[0] + (f"; {more} more problem{'s' if more > 1 else ''}" if more else "")


class ResponseCache:
    """The SQLite file. Safe to share between processes."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._closer: Any = None  # the thread of a close begun by start_closing
        self._close_error: BaseException | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create cache directory {self.path.parent}: {exc.strerror}") from None
        if self.path.is_dir():
            raise ConfigError(f"cache path {self.path} is a directory; give a file path, e.g. {self.path / 'responses.sqlite'}")
        try:
            there = os.stat(self.path).st_mode
        except OSError:  # nothing yet: SQLite makes the file
            there = stat.S_IFREG
        if not stat.S_ISREG(there):  # SQLite would say only "disk I/O error"
            raise ConfigError(f"cache path {self.path} is {kind_of(there)}, not a file; give a file path for the cache")
        deadline = time.monotonic() + BUSY_WAIT_S
        attempt = 0
        while True:
            try:
                # check_same_thread=False: a run's commits are written on a thread of their
                # own (CachedBackend), one at a time, while no other call uses the connection
                self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            except sqlite3.DatabaseError as exc:
                raise ConfigError(f"cannot open cache file {self.path}: {exc}") from None
            try:
                self._open()
                return
            except sqlite3.OperationalError as exc:
                self._db.close()
                # Another process is creating the same new file (switching it to WAL,
                # creating the tables): SQLite answers "locked"/"busy" at once for some of
                # these steps instead of waiting, so wait here and start again.
                if _is_busy(exc) and time.monotonic() < deadline:
                    attempt += 1
                    time.sleep(min(1.0, 0.005 * 2 ** attempt) * random.uniform(0.5, 1.5))
                    continue
                if _is_busy(exc):
                    raise BackendError(f"cache file {self.path} stayed locked by another process for "
                                       f"{BUSY_WAIT_S:g} s; retry, or use another cache file") from None
                if _is_unwritable(exc):  # a sound cache on a read-only file or folder: not "corrupt; delete it"
                    raise ConfigError(f"cache file {self.path} cannot be opened or written ({exc}): the file or its "
                                      "folder may be read-only or unreadable; choose a location you can write to for "
                                      "the cache, or run without the cache") from None
                raise self._corrupt(exc) from None
            except sqlite3.DatabaseError as exc:
                self._db.close()
                raise self._corrupt(exc) from None
            except ConfigError:
                self._db.close()
                raise
            except OSError as exc:
                self._db.close()
                raise ConfigError(f"cannot open cache file {self.path}: {exc}") from None

    def _open(self) -> None:
        """WAL mode, the tables, and the checks that this is a copyprobe cache of this schema."""
        self._db.execute("PRAGMA busy_timeout = 60000")
        # Someone else's database is refused before anything is written to it (WAL mode,
        # tables); a new or 0-byte file has no tables and becomes a cache.
        tables = sorted(row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                        if not row[0].startswith("sqlite_"))
        if tables and "responses" not in tables:
            shown = ", ".join(repr(name) for name in tables[:3]) + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
            raise ConfigError(
                f"{self.path} is an SQLite file but not a copyprobe response cache (it has no 'responses' "
                f"table but other tables: {shown}); use another cache file or none"
            )
        if tables:
            self._check_columns()
        self._db.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL never corrupts the file; a power cut may lose the last commits,
        # which are only answers to compute again. FULL waited for the disk at every commit
        # (70 ms here, the last of them after the device had finished).
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses ("
            " fingerprint TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,"
            " response TEXT NOT NULL, created REAL NOT NULL,"
            " PRIMARY KEY (fingerprint, kind, key))"
        )
        self._check_columns()  # another process may have created it since the check above
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        row = self._db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        if row is None or row[0] != str(SCHEMA_VERSION):
            found = row[0] if row else "none"
            raise ConfigError(
                f"cache file {self.path} has cache schema {found!s:.20}, and this copyprobe reads schema "
                f"{SCHEMA_VERSION}; use another cache file (or none); entries of another schema are "
                "never mixed in"
            )
        self._start_check()

    def _check_columns(self) -> None:
        columns = [row[1] for row in self._db.execute("PRAGMA table_info(responses)")]
        if columns != ["fingerprint", "kind", "key", "response", "created"]:
            raise ConfigError(
                f"{self.path} is an SQLite file but not a copyprobe response cache (its 'responses' "
                f"table has columns {', '.join(columns)}); use another cache file or none"
            )

    def _start_check(self) -> None:
        """Start ``PRAGMA quick_check`` of the whole file on a connection and thread of its
        own. The check reads every page (a cache of 1 GB: 0.33 s from memory, 12-13 s from a
        cold disk, here): run at opening, it delayed every run's first forward pass. Now
        it overlaps the model's loading and the run (a WAL reader blocks no one): the
        first write waits for it (:meth:`_checked`), so nothing is written to a damaged
        file, and a read that fails reports what it found. Reads do not wait: a damaged
        page fails the read that touches it, and the check, which reads no entry's
        content, vouches for no more than that."""
        import threading

        self._problem: str | None = None
        self._checker: sqlite3.Connection | None = None
        self._closing = False
        self._checker_lock = threading.Lock()
        self._check: threading.Thread | None = threading.Thread(target=self._quick_check,
                                                                name="copyprobe-cache-check", daemon=True)
        self._check.start()

    def _quick_check(self) -> None:
        try:
            checker = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        except sqlite3.Error as exc:
            self._problem = str(exc)
            return
        try:
            with self._checker_lock:
                if self._closing:
                    return
                self._checker = checker  # close() may interrupt it from now on
            row = checker.execute("PRAGMA quick_check").fetchone()
            if not row or row[0] != "ok":
                self._problem = _first_problem(row[0] if row else "quick_check failed")
        except sqlite3.Error as exc:
            self._problem = str(exc)
        finally:
            with self._checker_lock:
                self._checker = None
            checker.close()

    def _checked(self) -> None:
        """Wait for the check begun at opening; a file that failed it is refused here."""
        check = self._check
        if check is not None:
            check.join()
            self._check = None
        if self._problem is not None:
            raise self._corrupt(self._problem)

    def _corrupt(self, problem: Any) -> ConfigError:
        """The one-line refusal of a damaged file (at opening, or when its check failed);
        a file that is no SQLite database at all is likely another file named by mistake
        (the data, a run.json), which 'delete it' would have cost the user."""
        try:
            with open(self.path, "rb") as handle:
                head = handle.read(16)
        except OSError:
            head = b""
        if head.strip(b"\0") and head != b"SQLite format 3\x00":  # a zeroed header is a cache damaged in a crash
            return ConfigError(f"{self.path} is not a copyprobe cache (not an SQLite database): is the cache path the "
                               "right file? Give a new path for the cache, or run without the cache")
        return ConfigError(f"cache file {self.path} is unreadable or corrupt ({problem}); "
                           "delete it or run without the cache")

    def _rows_of(self, columns: str, fingerprint: str, kind: str, keys: Sequence[str]) -> Iterator[tuple]:
        """``columns`` of the entries of ``keys``, asked KEYS_PER_QUERY keys at a time (SQLite
        limits the number of bound parameters)."""
        for start in range(0, len(keys), KEYS_PER_QUERY):
            part = list(keys[start : start + KEYS_PER_QUERY])
            marks = ",".join("?" * len(part))
            yield from self._read(f"SELECT {columns} FROM responses WHERE fingerprint = ? AND kind = ? "
                                  f"AND key IN ({marks})", [fingerprint, kind, *part])

    def get_many(self, fingerprint: str, kind: str, keys: Sequence[str]) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for key, text in self._rows_of("key, response", fingerprint, kind, keys):
            try:
                found[key] = json.loads(text)
            except json.JSONDecodeError:
                # never trust a damaged entry: treat it as a miss and overwrite it
                continue
        return found

    def stored_keys(self, fingerprint: str, kind: str, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` with an entry (read from the key index: no answer is decoded)."""
        return {key for (key,) in self._rows_of("key", fingerprint, kind, keys)}

    def holds(self, fingerprint: str, kind: str) -> bool:
        """Whether any entry of this model and request kind is stored (one look-up in the
        key index, however big the file)."""
        return bool(self._read("SELECT EXISTS (SELECT 1 FROM responses WHERE fingerprint = ? AND kind = ?)",
                               (fingerprint, kind))[0][0])

    @staticmethod
    def encode(value: dict) -> str:
        """An entry's stored text (a response's :func:`packed` JSON)."""
        return _ENCODER.encode(value)

    def put_many(self, fingerprint: str, kind: str, items: Sequence[tuple[str, dict]]) -> None:
        """Entries given as JSON values (a response's :func:`packed` form), in one transaction."""
        self.put_encoded(fingerprint, kind, [(key, self.encode(value)) for key, value in items])

    def put_encoded(self, fingerprint: str, kind: str, items: Sequence[tuple[str, str]]) -> None:
        """Entries already :meth:`encode`-d, in one transaction."""
        if not items:
            return
        now = time.time()
        with self._transaction() as db:
            db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                           [(fingerprint, kind, key, text, now) for key, text in items])

    def count(self) -> int:
        self._checked()
        return self._read("SELECT COUNT(*) FROM responses")[0][0]

    def fingerprints(self) -> list[str]:
        """The models' fingerprints the cache holds entries of (read off the key index)."""
        self._checked()
        return [fingerprint for (fingerprint,) in self._read("SELECT DISTINCT fingerprint FROM responses")]

    def contents(self) -> list[dict[str, Any]]:
        """Per model fingerprint and request kind, most bytes first: ``entries``, their
        stored ``bytes``, and when the ``first`` and ``last`` were written (Unix time).
        Reads every entry (1.5 s for a GB in memory here)."""
        self._checked()
        rows = self._read("SELECT fingerprint, kind, COUNT(*), SUM(LENGTH(response)), MIN(created), MAX(created)"
                          " FROM responses GROUP BY fingerprint, kind")
        return sorted(({"fingerprint": fp, "kind": kind, "entries": n, "bytes": size, "first": first, "last": last}
                       for fp, kind, n, size, first, last in rows), key=lambda row: -row["bytes"])

    def forget(self, *, fingerprint: str | None = None, written_before: float | None = None) -> int:
        """Delete the entries of the model ``fingerprint``, or those written before
        ``written_before`` (Unix time), or those that are both, in one transaction;
        returns how many. A run computes them again when it needs them."""
        if fingerprint is None and written_before is None:
            raise ValueError("forget: give a fingerprint, a time, or both")
        clauses = [clause for clause, value in (("fingerprint = ?", fingerprint), ("created < ?", written_before))
                   if value is not None]
        values = [value for value in (fingerprint, written_before) if value is not None]
        with self._transaction() as db:
            return db.execute(f"DELETE FROM responses WHERE {' AND '.join(clauses)}", values).rowcount

    def compact(self, wait_s: float = 2.0) -> bool:
        """Rewrite the file without the space deleted entries left (``VACUUM``) and move the
        rewritten pages from the write-ahead log into it. False when another process kept
        it busy for longer than ``wait_s``: one writing stops the rewrite, one reading
        stops the move (the next checkpoint, when no one reads, makes it); the freed
        space is reused by later writes either way."""
        self._checked()
        self._db.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            self._db.execute("VACUUM")
            busy = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                return False
            raise BackendError(f"cannot compact cache file {self.path}: {exc}") from None
        finally:
            self._db.execute("PRAGMA busy_timeout = 60000")
        return not busy

    def _read(self, query: str, values: Sequence[Any] = ()) -> list[tuple]:
        """The rows of ``query``. Reads do not wait for the file's check; one that fails
        waits for it, so that a damaged file is named as the check names it."""
        try:
            return self._db.execute(query, values).fetchall()
        except sqlite3.DatabaseError as exc:
            self._checked()
            raise BackendError(f"cannot read cache file {self.path}: {exc}") from None

    @contextlib.contextmanager
    def _transaction(self):
        """One write transaction (all of it lands or none) on a file that passed its check:
        the first write waits for the check."""
        self._checked()
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
        except sqlite3.OperationalError as exc:
            full = "full" in str(exc).lower()  # SQLITE_FULL: "database or disk is full"
            raise BackendError(f"cannot write cache file {self.path}: {exc}"
                               + ("; free some space: the answers stored before are kept, and the same command "
                                  "run again resumes from them" if full else "")) from None

    def close(self) -> None:
        """Close the file; after :meth:`start_closing`, wait for that close to end (and
        raise what it raised)."""
        closer = self._closer
        if closer is None:
            self._close_now()
            return
        closer.join()
        error, self._close_error = self._close_error, None
        if error is not None:
            raise error

    def start_closing(self) -> None:
        """Begin :meth:`close` on a thread of its own, so the caller's next work overlaps
        it; :meth:`close` waits for it. Nothing else may use the cache meanwhile. As its
        last connection closes, SQLite moves the write-ahead log into the file: about
        12 ms after the 1,650 answers of a WikiMIA run here (bench_cache_misses.py), at
        the run's end, where the run only waited for it."""
        import threading

        if self._closer is not None:
            return

        def close() -> None:
            try:
                self._close_now()
            except BaseException as exc:  # handed to close(), on the caller's thread
                self._close_error = exc

        self._closer = threading.Thread(target=close, name="copyprobe-cache-close")
        self._closer.start()

    def _close_now(self) -> None:
        check = self._check
        if check is not None:  # still checking (a run that only read, or whose model failed to load): stop
            with self._checker_lock:
                self._closing = True
                if self._checker is not None:
                    self._checker.interrupt()
            check.join()
            self._check = None
        self._db.close()


# The keys of packed lists, and the little-endian numpy dtypes they hold.
PACKED = {"f8": "<f8", "i8": "<i8"}
_NATIVE = {key: np.dtype(dtype).newbyteorder("=") for key, dtype in PACKED.items()}  # the same, this machine's order
_PACKED_FOR = {"list[float]": "f8", "list[int]": "i8"}  # a field's annotation -> its packed form


@functools.lru_cache(maxsize=None)
def _number_list_fields(response_type: type) -> tuple[tuple[str, str], ...]:
    """(field, packed key) of each field of a response type annotated as a list of floats
    or of ints."""
    import dataclasses

    out = []
    for f in dataclasses.fields(response_type):
        key = _PACKED_FOR.get(str(f.type).replace(" ", "").split("|")[0])
        if key is not None:
            out.append((f.name, key))
    return tuple(out)


def _packing(response: Any) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """(the answer's JSON fields, {field: (packed key, base64 text)} for each list that
    packs): what :func:`packed` and :func:`entry_text` are made of."""
    # an answer's lists handed over as arrays (Values) are read as arrays, never made lists
    data = response.json_fields() if hasattr(response, "json_fields") else response.to_json()
    kept = response.__dict__.get("_arrays", {})  # arrays the answer holds already (TokenLogprobs.array)
    packs = {}
    for name, key in _number_list_fields(type(response)):
        values = data.get(name)
        if isinstance(values, (list, Values)) and len(values):
            array = kept[name] if name in kept else np.asarray(values)
            if array.ndim == 1 and array.dtype == _NATIVE[key]:
                # the array's own buffer (contiguous, little-endian) straight to base64: no bytes copy
                little = np.ascontiguousarray(array, dtype=PACKED[key])
                packs[name] = (key, binascii.b2a_base64(little, newline=False).decode())
    return data, packs


def packed(response: Any) -> dict[str, Any]:
    """A response's JSON for the cache: ``to_json()`` with each list of floats as
    ``{"f8": base64 of its little-endian float64 bytes}`` and each list of ints as
    ``{"i8": ...}`` of int64 ones (see the module docstring). A list that numpy does not
    read as that type (Nones, bools, ints beyond 64 bits, an empty list) stays JSON."""
    data, packs = _packing(response)
    for name, (key, text) in packs.items():
        data[name] = {key: text}
    return values_as_lists(data)  # an array that cannot be packed stays a JSON list


@functools.lru_cache(maxsize=None)
def _name_json(name: str) -> str:
    return _ENCODER.encode(name)


def entry_text(response: Any) -> str:
    """A response's stored text: the same text as ``ResponseCache.encode(packed(response))``
    (tests/backends/test_cache.py holds them equal), with each packed list's base64 put in
    as it is instead of scanned again by the JSON encoder (nearly all of a token log-prob
    answer's 5.5 KB is base64). The writer thread does this for every answer a run
    computes, and what it holds the interpreter for, the thread that queues the device's
    work waits for (``benchmarks/bench_cache_encode.py``)."""
    data, packs = _packing(response)
    parts = []
    for name, value in data.items():
        if name in packs:
            text = '{"%s":"%s"}' % packs[name]  # base64 and the keys need no JSON escapes
        elif value is None:
            text = "null"
        else:
            text = _ENCODER.encode(list(value) if isinstance(value, Values) else value)
        parts.append(f"{_name_json(name)}:{text}")
    return "{" + ",".join(parts) + "}"


def _unpacked(response_type: type, data: dict) -> dict | None:
    """``data`` with its packed number lists read back; None when one is damaged. A token
    log-prob answer's lists stay the arrays read (:class:`~copyprobe.backends.base.Values`):
    the logit methods read arrays, and making lists of them cost 4 ``tolist`` calls an
    answer read and 4 conversions back."""
    as_values = VALUE_FIELDS if issubclass(response_type, TokenLogprobs) else ()
    for name, key in _number_list_fields(response_type):
        value = data.get(name)
        if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(key), str):
            try:
                array = np.frombuffer(base64.b64decode(value[key], validate=True), dtype=PACKED[key])
            except (binascii.Error, ValueError):
                return None
            data[name] = Values(array) if name in as_values else array.tolist()
    return data


def _decode(response_type: type, data: Any) -> Any:
    """The stored entry as a response, or None when it has another shape than this
    copyprobe's (fields added, removed or of another JSON type: an entry written by
    another version); such an entry is answered again and overwritten, never trusted
    or fatal."""
    names, checks = _shape(response_type)
    if not isinstance(data, dict) or data.keys() != names:
        return None
    data = _unpacked(response_type, data)
    if data is None:
        return None
    for name, tests in checks:
        if not _fits(tests, data[name]):
            return None
    try:
        return response_type.from_json(data)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


_JSON_TYPES: dict[str, Any] = {
    "None": lambda v: v is None,
    "list": lambda v: isinstance(v, (list, Values)),
    "tuple": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, dict),
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
}


def _type_tests(annotation: str) -> tuple[Callable[[Any], bool] | None, ...]:
    """The tests of the outer types an annotation (``list[int] | None``) names, one per
    alternative; None for a type not understood here, which lets any value through."""
    return tuple(_JSON_TYPES.get(part.strip().split("[", 1)[0].strip()) for part in annotation.split("|"))


def _fits(tests: tuple[Callable[[Any], bool] | None, ...], value: Any) -> bool:
    """Whether a JSON value has one of the outer types whose tests these are."""
    for test in tests:
        if test is None or test(value):
            return True
    return False


@functools.lru_cache(maxsize=None)
def _shape(response_type: type) -> tuple[frozenset[str], tuple[tuple[str, tuple], ...]]:
    """(the field names, (name, type tests) of each field) of a response type: read once
    per type, not once per stored answer (9,900 annotation parses for WikiMIA's 1,650
    answers read back)."""
    import dataclasses

    fields = dataclasses.fields(response_type)
    return frozenset(f.name for f in fields), tuple((f.name, _type_tests(str(f.type))) for f in fields)


# Batches of a non-streaming backend answered (and committed) per call.
CHUNK_BATCHES = 32
# A backend that hands its answers over has them committed on the writer thread in this
# many transactions per chunk (4 batches each at CHUNK_BATCHES = 32): the caller waits at
# the end for the last one only (it waited for a whole chunk's: 626 of WikiMIA's 1,650
# answers at batch 32), and an interruption loses fewer answers. In WAL
# mode with synchronous = NORMAL a commit does not sync the disk, so more of them cost little.
COMMITS_PER_CHUNK = 8


def _chunk_order(request: Any) -> tuple[int, str]:
    """The order misses are sent in, chunk by chunk. Texts to score: by length (similar
    lengths together keep padding low). Generations: by prompt, so the prompts that are
    prefixes of one another (topk_loss asks one per word of a passage) share a chunk and
    the HF backend reads them all off one pass of the longest; sent in the drive's order
    they were spread over every chunk, one pass each (10 minutes instead of seconds for
    72 passages of SmolLM2)."""
    text = getattr(request, "text", None)
    if text is not None:
        return len(text), ""
    return 0, str(getattr(request, "prompt", "") or "")


class CachedBackend(Backend):
    """Answers from the cache what it can and asks the wrapped backend for the rest."""

    def __init__(self, backend: Backend, cache: ResponseCache, chunk_size: int | None = None):
        self.backend = backend
        self.cache = cache
        # Backends that stream results have each answer stored as it arrives. Others are
        # asked CHUNK_BATCHES batches at a time and each chunk is committed, so a crash
        # loses at most the chunk in progress. A chunk spans many batches because the
        # in-process backend shares work across the requests it sees together (length-
        # sorted batches, the n-gram prefix tree, DE-COP's 24 orderings, a text's
        # neighbourhood proposals): one batch per call would cut all of that to 8 requests.
        self._chunk_size = chunk_size
        # whether the backend's answer() takes on_result (test doubles may not)
        self._hands_over = hands_over(backend)
        self.hits = 0
        self.misses = 0
        self.stale = 0  # entries found in another shape, recomputed (counted in misses too)
        self.spec = backend.spec
        self.capabilities = backend.capabilities

    @property
    def chunk_size(self) -> int:
        """Requests answered (and committed) per call of the wrapped backend. A backend that
        batches by memory says how many requests make CHUNK_BATCHES batches
        (``chunk_requests``, read when needed: HFBackend sizes its batches at first use);
        the others batch by count."""
        if self._chunk_size:
            return self._chunk_size
        return getattr(self.backend, "chunk_requests", None) or max(1, int(self.backend.batch_size or 1)) * CHUNK_BATCHES

    @property
    def fingerprint(self) -> str:
        return self.backend.fingerprint

    def probe_capabilities(self, wanted=()) -> frozenset[str]:
        """What the wrapped backend's probes settle (here too). Where its server cannot be
        reached, a capability the stored answers of this model already show (an answer of
        that kind under its fingerprint came from it) is taken as shown, so an audit whose
        answers are all stored chooses its method with the server down, as it did when it
        ran; a server that answers is asked (it may have changed behind the same URL)."""
        try:
            self.capabilities = self.backend.probe_capabilities(wanted)
        except BackendError:
            claimed = self.backend.capabilities  # what it claims while unknown, less what it was told
            shown = {c for c in wanted if c in claimed and c in KIND_SHOWING
                     and self.cache.holds(self.fingerprint, KIND_SHOWING[c])}
            if not shown or set(wanted) - shown:
                raise
            self.capabilities = claimed
        return self.capabilities

    def canonical(self, request: Request) -> Request:
        return self.backend.canonical(request)

    def check(self, requests: Sequence[Request]) -> None:
        """The capabilities as known, and, where the wrapped backend checks by asking its
        server (an API model) and the cache cannot answer some request, that backend's own
        check of those requests: an unreachable or unable server is said before another
        model loads (drive checks the target first; before, 'detect --methods reference'
        against a server not started loaded the reference model, 15 s, then said 'cannot
        reach'), while a run the cache answers whole needs no server. The cache's own
        capabilities stay as they were: what the probes settled refuses the misses (in the
        wrapped check), not answers already stored."""
        if requests and type(self.backend).check is not Backend.check:
            unanswered = self._unanswered([self.canonical(r) for r in requests])
            if unanswered:
                self.backend.check(unanswered)
        super().check(requests)

    def _unanswered(self, requests: Sequence[Request]) -> list[Request]:
        """The requests the cache holds no entry for (by key: an entry that turns out damaged
        or of an older shape is recomputed by answer(), unchecked until then)."""
        by_kind: dict[str, list[Request]] = {}
        for request in requests:
            by_kind.setdefault(request.kind, []).append(request)
        fingerprint = self.fingerprint
        unanswered: list[Request] = []
        for kind, group in by_kind.items():
            if not self.cache.holds(fingerprint, kind):
                unanswered.extend(group)
                continue
            keys = [r.key() if r.cacheable() else None for r in group]
            stored = self.cache.stored_keys(fingerprint, kind, [k for k in keys if k is not None])
            unanswered.extend(r for r, k in zip(group, keys) if k is None or k not in stored)
        return unanswered

    def info(self) -> dict[str, Any]:
        return self.backend.info()

    def completed(self, response: Any) -> Any:
        completed = getattr(self.backend, "completed", None)
        return completed(response) if completed is not None else response

    def answer(self, requests: Sequence[Request], progress=None, on_result=None) -> list[Any]:
        """The answers, in order; ``on_result(i, response)`` as each is known: the hits at
        once, the misses as the wrapped backend hands them over (so the caller can use them
        while the rest are computed)."""
        if not requests:
            return []
        requests = [self.canonical(r) for r in requests]  # keys of what is really answered
        # capabilities only: the wrapped backend's answer() checks the misses it is asked
        Backend.check(self, requests)
        kind = requests[0].kind
        response_type = RESPONSE_TYPES[kind]
        fingerprint = self.fingerprint
        cacheable = [r.cacheable() for r in requests]
        results: list[Any] = [None] * len(requests)
        if self.cache.holds(fingerprint, kind):
            keys = [r.key() for r in requests]
            key_of: Callable[[int], str] = keys.__getitem__
            missing = self._looked_up(requests, keys, cacheable, response_type, results, on_result)
        else:
            # No entry of this model and kind (its first run): every request is a miss, and
            # each key is made where its answer is stored (on the writer's thread), not all
            # of them before the first forward pass (9 ms of WikiMIA's 1,650 texts, the
            # device idle).
            def key_of(i: int) -> str:
                return requests[i].key()

            missing = list(range(len(requests)))
        if progress and len(requests) - len(missing):
            progress(len(requests) - len(missing))
        missing.sort(key=lambda i: _chunk_order(requests[i]))
        if not missing:
            return results
        if self.backend.streams_results:
            self._answer_streaming(requests, missing, key_of, cacheable, results, progress, on_result)
            return results
        # answer misses in chunks, committing each, so an interrupted run keeps its work; a
        # backend that hands answers over as they finish gets them all in one call (its
        # batches then run back to back on the device, one length-sorted plan) and every
        # chunk's worth of its answers is committed as it is reached
        chunk_size = self.chunk_size
        if self._hands_over:
            self._answer_chunk(requests, missing, key_of, cacheable, results, progress, on_result,
                               max(1, chunk_size // COMMITS_PER_CHUNK))
            return results
        for start in range(0, len(missing), chunk_size):
            self._answer_chunk(requests, missing[start : start + chunk_size], key_of, cacheable, results, progress,
                               on_result)
        return results

    def _looked_up(self, requests, keys, cacheable, response_type, results, on_result) -> list[int]:
        """Fill ``results`` with the stored answers (each handed over at once); returns the
        indices of the misses."""
        stored = self.cache.get_many(self.fingerprint, requests[0].kind, [k for k, c in zip(keys, cacheable) if c])
        missing: list[int] = []
        completed = getattr(self.backend, "completed", None)  # test doubles may lack it
        for i, (key, can) in enumerate(zip(keys, cacheable)):
            response = _decode(response_type, stored[key]) if can and key in stored else None
            if response is not None:
                results[i] = completed(response) if completed is not None else response
                self.hits += 1
                if on_result is not None:
                    on_result(i, results[i])
            else:
                if can and key in stored:
                    self.stale += 1  # written in another shape (another version): recomputed, overwritten
                missing.append(i)
        return missing

    def _answer_chunk(self, requests, part, key_of, cacheable, results, progress, on_result=None,
                      commit_every: int | None = None) -> None:
        """One call of the wrapped backend, committed in one transaction, or in one every
        ``commit_every`` answers. An answer is kept for the cache as the backend hands it
        over (``on_result``: the HF backend does so while its next batch runs on the
        device), and the answers that finished are committed even when the call fails part
        way.

        The transactions every ``commit_every`` answers are encoded and written on a thread
        of their own, one after another, so the thread that queues the device's work waits
        neither for the disk (a commit of 1,024 answers took 0.1 s here, the device idle all
        the while) nor for the encoding (about 0.1 s per 1,000 passages of the 5 logit
        methods under cProfile: the answers' lists packed and the JSON made); the call
        returns, or fails, only once every one of them has landed. Answers are not changed
        once handed over, so reading them on the writer's thread is safe."""
        from concurrent.futures import ThreadPoolExecutor

        kind = requests[0].kind
        fingerprint = self.fingerprint
        answered: list[tuple[int, Any]] = []  # (request, answer) not yet committed
        kept: set[int] = set()
        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copyprobe-cache") if commit_every else None
        writes: list[Any] = []

        def write(rows: list[tuple[int, Any]]) -> None:
            self.cache.put_encoded(fingerprint, kind, [(key_of(i), entry_text(r)) for i, r in rows])

        def commit(rows: list[tuple[int, Any]]) -> None:
            if writer is None:
                write(rows)
                return
            for done in [w for w in writes if w.done()]:
                done.result()  # a write that failed stops the run now, not at the end
            writes.append(writer.submit(write, rows))

        def keep(local: int, response: Any) -> None:
            i = part[local]
            results[i] = response
            kept.add(local)
            if cacheable[i] and not isinstance(response, RequestFailed):
                answered.append((i, response))
                if commit_every is not None and len(answered) >= commit_every:
                    commit(answered[:])
                    answered.clear()
            if on_result is not None:
                on_result(i, response)

        batch = [requests[i] for i in part]
        try:
            if self._hands_over:
                answers = self.backend.answer(batch, progress=progress, on_result=keep)
            else:
                answers = self.backend.answer(batch, progress=progress)
            for local, response in enumerate(answers):
                if local not in kept:
                    keep(local, response)
        finally:
            try:
                commit(answered)
            finally:
                if writer is not None:
                    writer.shutdown(wait=True)  # every transaction landed (or failed) before we go on
            for write in writes:
                write.result()
        self.misses += len(part)

    def _answer_streaming(self, requests, missing, key_of, cacheable, results, progress, on_result=None) -> None:
        """Store every answer the moment it arrives: a crash or Ctrl-C loses only the
        requests still in flight, and no finished answer is ever asked for again. The
        answers are handed over (``on_result``) once the call is done: the caller's work
        on them (the methods' scoring) would delay the commits of the answers arriving
        meanwhile, and each delayed one is asked again after a crash (50 of 96 resent over
        three kills of an API run, where 48 is the bound of tests/reliability)."""
        kind = requests[0].kind

        def keep(local: int, response: Any) -> None:
            i = missing[local]
            results[i] = response
            self.misses += 1
            if cacheable[i] and not isinstance(response, RequestFailed):
                self.cache.put_encoded(self.fingerprint, kind, [(key_of(i), entry_text(response))])

        self.backend.answer([requests[i] for i in missing], progress=progress, on_result=keep)
        if on_result is not None:
            for i in missing:
                on_result(i, results[i])

    def close(self) -> None:
        self.backend.close()
