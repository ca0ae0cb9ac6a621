"""Writing and reading the run directory (see docs/run-record.md).

Files are written atomically (temporary file in the same directory, then os.replace),
so a reader never sees a half-written scores.jsonl or metrics.json.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from copyprobe.errors import ConfigError, DataError

TRACKED_PACKAGES = (
    "copyprobe", "torch", "transformers", "gguf", "numpy", "scipy", "scikit-learn", "pandas",
    "llama-cpp-python", "rouge-score", "rapidfuzz", "peft", "sentence-transformers", "spacy",
)


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null (strict JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _clean(value.item())
    return value


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    _atomic_write(Path(path), json.dumps(_clean(obj), indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    text = "".join(json.dumps(_clean(r), ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    _atomic_write(Path(path), text)


def read_json(path: str | os.PathLike) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise DataError(f"{path} does not exist (is this a copyprobe run directory?)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    rows = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DataError(f"{path} line {number} is not valid JSON: {exc.msg}") from None
    except FileNotFoundError:
        raise DataError(f"{path} does not exist (is this a copyprobe run directory?)") from None
    return rows


def prepare_out_dir(out: str | os.PathLike) -> Path:
    """Create the output directory now, so an unwritable one fails before any model work."""
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".copyprobe-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write to output directory {path}: {exc.strerror or exc}") from None
    return path


def versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": sys.platform}
    for name in TRACKED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
