"""Reading and writing copyprobe's own JSON files: one atomic writer for every file a run,
a plant, a kit or a benchmark writes, and readers that turn a damaged file into one
DataError line.

Writes go to a temporary file in the same directory that then replaces the target
(``os.replace``), so a reader never sees a half-written file and an interrupted write
leaves the previous file intact. NaN and infinite floats become null (strict JSON has
no NaN); numpy scalars and arrays become plain numbers and lists.
"""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import json
import math
import os
import platform
import re
import stat
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator

from copyprobe.errors import DataError

TRACKED_PACKAGES = (
    "copyprobe", "torch", "transformers", "gguf", "accelerate", "numpy", "scipy", "scikit-learn", "pandas",
    "llama-cpp-python", "rouge-score", "rapidfuzz", "peft", "sentence-transformers", "spacy",
)


def jsonable(value: Any) -> Any:
    """``value`` made strict-JSON safe (see module docstring)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy scalars and arrays
        return jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    return value


def _json_default(value: Any) -> Any:
    # what jsonable() left: dates (from Parquet/CSV columns), sets
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def dumps_line(obj: Any) -> str:
    return json.dumps(jsonable(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=_json_default)


@functools.lru_cache(maxsize=1)
def _umask_by_setting() -> int:
    """The umask where /proc does not say it, read once a process: reading it means setting
    it, which other threads would see (the safest mask meanwhile)."""
    umask = os.umask(0o077)
    os.umask(umask)
    return umask


def _new_file_mode() -> int:
    """The mode a new file gets from open(): 0o666 less the process's umask (mkstemp makes
    0o600 files, which colleagues on a shared server could not read)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = _umask_by_setting()
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, chunks: str | Iterable[str], mode: int | None = None) -> Path:
    """Write text (a string, or chunks streamed one by one) to ``path`` atomically.
    An OSError (full disk, read-only, a directory in the way) names ``path`` itself,
    not the temporary file. Anything but a regular file there (a device such as /dev/null,
    a named pipe, or a link to one) is refused, not replaced; a link to a file is replaced
    by the file, as before (writing through it would change a shared store's object). The
    file gets ``mode``, else an existing file's own, else open()'s (the umask's): 0o600
    for what must stay private. Text no UTF-8 holds (a file name's undecodable bytes, as
    Python reads them) is written as a \\uXXXX escape, which JSON reads back as the same
    character."""
    target = Path(path)
    try:
        existing = regular_or_absent(target)
        if mode is None:
            mode = stat.S_IMODE(existing.st_mode) if existing is not None else _new_file_mode()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
            for chunk in ([chunks] if isinstance(chunks, str) else chunks):
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise type(exc)(exc.errno, exc.strerror, str(target)) from None
        raise
    try:  # after the move: a read-only mode on the temporary file would stop its removal (Windows)
        os.chmod(target, mode)
    except OSError:
        pass
    return target


def name_bytes(name: str) -> bytes:
    """A file name as its bytes: those that are not UTF-8 come back from the lone surrogates
    Python reads them as; a surrogate no byte made (a Windows name) is escaped."""
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace")


def printable_name(name: str) -> str:
    """A file name's bytes that are not UTF-8 (Python reads them as lone surrogates, which
    no table, hash or UTF-8 file takes) as ``\\xe9``: a document id is text."""
    return name_bytes(name).decode("utf-8", "backslashreplace")


def refuse_empty_path(value: Any, what: str, hint: str, error: type[Exception] = DataError) -> None:
    """Refuse a path given as empty text or spaces (an unset variable in a script): ``Path("")``
    is the working folder, so it would read or write whatever is there. ``what`` names the
    path ("the data"), ``hint`` says what to give instead."""
    if isinstance(value, (str, os.PathLike)) and not str(value).strip():
        raise error(f"{what} path is empty ({str(value)!r}; an unset variable?): {hint}")


def regular_or_absent(target: Path) -> os.stat_result | None:
    """The stat of an existing regular file, None when nothing is there; an OSError for
    anything else, said as what it is."""
    try:
        found = os.stat(target)
    except FileNotFoundError:
        return None
    mode = found.st_mode
    if stat.S_ISREG(mode):
        return found
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(target))
    raise OSError(errno.EINVAL, f"not a regular file but {kind_of(mode)}: not replaced", str(target))


def refuse_special_file(path: str | os.PathLike, what: str) -> None:
    """Refuse to read a named pipe, a socket or a device as data: reading one waits for a
    writer or never ends. A missing or unreadable path passes, for the reader to name."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise DataError(f"cannot read {what} {path}: it is {kind_of(mode)}, not a file or folder (save it to a "
                        "file first)")


def kind_of(mode: int) -> str:
    """What a file's ``st_mode`` says it is, as words for a message."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    return "a socket" if stat.S_ISSOCK(mode) else "a device"


def write_json(path: str | os.PathLike, obj: Any, mode: int | None = None) -> Path:
    text = json.dumps(jsonable(obj), indent=2, ensure_ascii=False, allow_nan=False, default=_json_default)
    return atomic_write(path, text + "\n", mode=mode)


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """One JSON object per line, atomically; returns the number of rows written."""
    count = 0

    def lines() -> Iterator[str]:
        nonlocal count
        for row in rows:
            count += 1
            yield dumps_line(row if isinstance(row, dict) else dict(row)) + "\n"

    atomic_write(path, lines())
    return count


def json_problem(exc: json.JSONDecodeError) -> str:
    """What is wrong and where: ``exc.msg`` may itself end in "at" ("Unterminated string
    starting at"), so the place goes in brackets, never after another "at"."""
    return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"


def read_json(path: str | os.PathLike, *, required: bool = True, what: str = "copyprobe run directory") -> Any:
    """The parsed file, None when absent and not ``required``; damage is one DataError."""
    path = Path(path)
    if not path.exists():
        if required:
            raise DataError(f"{path} does not exist (is this a {what}?)")
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {json_problem(exc)}") from None
    except RecursionError:
        raise DataError(f"{path} is nested too deeply to read") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def read_jsonl(path: str | os.PathLike, *, required: bool = True,
               what: str = "copyprobe run directory") -> list[dict] | None:
    """Rows of a JSON-lines file (each must be an object); None when absent and not ``required``."""
    path = Path(path)
    if not path.exists():
        if required:
            raise DataError(f"{path} does not exist (is this a {what}?)")
        return None
    rows = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path} line {number} is not valid JSON: {exc.msg} (column {exc.colno})") from None
                except RecursionError:
                    raise DataError(f"{path} line {number} is nested too deeply to read") from None
                if not isinstance(row, dict):
                    raise DataError(f"{path} line {number} is not a JSON object")
                rows.append(row)
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    return rows


def versions() -> dict[str, str]:
    """Python, platform and the versions of the packages that can change a result (a
    fresh dict each call)."""
    return dict(_installed_versions())


@functools.lru_cache(maxsize=1)
def _installed_versions() -> dict[str, str]:
    # Read once per process: each run record asks, and the metadata look-ups cost 13 ms
    # (the packages a process has imported do not change under it; one installed later
    # takes effect only in a new process, which reads them again).
    found = {"python": platform.python_version(), "platform": sys.platform}
    for name in TRACKED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


# -- user folders ---------------------------------------------------------------------------

class FolderWalk:
    """What :func:`walk_folder` found: ``files`` (regular, readable, in name order) and
    ``skipped`` ((path, reason) for each entry it could not read)."""

    def __init__(self, root: Path, files: list[Path], skipped: list[tuple[Path, str]]):
        self.root, self.files, self.skipped = root, files, skipped

    def records(self, shown: str | os.PathLike | None = None) -> list[dict[str, str]]:
        """The skipped entries for a run record: {"path", "skipped": reason}."""
        base = Path(shown) if shown is not None else self.root
        return [{"path": str(base / p.relative_to(self.root)), "skipped": why} for p, why in self.skipped]

    def warn(self, name: str | os.PathLike, stacklevel: int = 3) -> None:
        """One warning line (``copyprobe: warning: ...`` on the terminal) naming what was skipped."""
        if not self.skipped:
            return
        import warnings

        from copyprobe.errors import DataWarning

        shown = first_few([(p.relative_to(self.root).as_posix(), why) for p, why in self.skipped])
        warnings.warn(DataWarning(f"{name}: {len(self.skipped)} entr{'y' if len(self.skipped) == 1 else 'ies'} "
                                  f"skipped: {shown}"), stacklevel=stacklevel)


# Unicode's control characters (C0, DEL, C1) but those that are text: tabs, line and page
# breaks (\v is Word's line break) and ESC (terminal colour codes in a log)
_BINARY_CONTROLS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f]")


def binary_controls(text: str) -> int:
    """How many characters of ``text`` no text holds: the one count by which every reader
    of user text (books, code, corpus files) tells binary data that happens to decode
    (NUL bytes are valid UTF-8) from text."""
    return len(_BINARY_CONTROLS.findall(text))


def too_many_controls(controls: int, n_chars: int) -> bool:
    """Text has next to none; binary data has many (above 1 in 50, and above 3)."""
    return controls > max(3, n_chars // 50)


def first_few(items: list[tuple[str, str]], shown: int = 3) -> str:
    """'a (why); b (why); c (why); and 2 more': what a warning line names of a list."""
    more = f"; and {len(items) - shown} more" if len(items) > shown else ""
    return "; ".join(f"{what} ({why})" for what, why in items[:shown]) + more


def walk_folder(root: str | os.PathLike, *, hidden: tuple[str, ...] = (".",)) -> FolderWalk:
    """The one walker of the user's folders (book folders of detect and audit, plant's
    corpus and background): every regular file under ``root``, recursively, in name order.
    Entries whose name starts with one of ``hidden`` (and everything under them) are left
    out on purpose and not reported. Everything else that cannot be read is reported, with
    why, in ``skipped``: a link to a missing file, a link to a directory (not followed, so
    a link cannot make a loop), a file that is not a regular file (a FIFO, a socket, a
    device), a file or folder without read permission."""
    root = Path(root)
    files: list[Path] = []
    skipped: list[tuple[Path, str]] = []

    def visit(folder: Path) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped.append((folder, f"cannot list it: {exc.strerror or exc}"))
            return
        for entry in entries:
            if entry.name.startswith(hidden):
                continue
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    if not path.exists():
                        skipped.append((path, f"a link to a missing file ({os.readlink(path)})"))
                        continue
                    if path.is_dir():
                        skipped.append((path, "a link to a directory, not followed"))
                        continue
                if entry.is_dir(follow_symlinks=False):
                    if not os.access(path, os.R_OK | os.X_OK):
                        skipped.append((path, "a folder without read permission"))
                        continue
                    visit(path)
                elif not path.is_file():
                    skipped.append((path, "not a regular file"))
                elif not os.access(path, os.R_OK):
                    skipped.append((path, "no read permission"))
                else:
                    files.append(path)
            except OSError as exc:
                skipped.append((path, exc.strerror or str(exc)))

    visit(root)
    files.sort()
    return FolderWalk(root, files, skipped)
