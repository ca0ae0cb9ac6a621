"""Helpers shared by the reliability tests."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE_CLI = Path(__file__).with_name("fake_cli.py")

VOCAB = (
    "The river ran past the Old mill where Mary kept her Lantern and the wind of "
    "October moved through Silver grass while Thomas counted stones on the Harbour wall"
).split()


def make_passages(n: int, seed: int = 0, words: int = 30) -> list[dict]:
    """``n`` labelled passages (alternating 1/0) of mixed-case words; all distinct."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        text = " ".join(rng.choice(VOCAB) for _ in range(words)) + f" Passage{i}"
        rows.append({"id": f"p{i:03d}", "text": text, "label": 1 if i % 2 == 0 else 0})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(REPO) + (os.pathsep + out["PYTHONPATH"] if out.get("PYTHONPATH") else "")
    out.update(extra)
    return out


def fake_cli_cmd(*args: str) -> list[str]:
    return [sys.executable, str(FAKE_CLI), *args]


def cli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "copyprobe.cli.main", *args]


def run(cmd: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


def cache_rows(path: Path) -> list[tuple[str, str, str, str]]:
    """(fingerprint, kind, key, response) of every cache entry (read-only connection)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        return db.execute("SELECT fingerprint, kind, key, response FROM responses").fetchall()
    finally:
        db.close()


def assert_cache_entries_decode(path: Path) -> int:
    """Every entry parses as JSON and rebuilds its response type in today's shape (the
    cache's own reader, packed float lists included); returns the count."""
    from copyprobe.backends.base import RESPONSE_TYPES
    from copyprobe.backends.cache import _decode

    rows = cache_rows(path)
    for fingerprint, kind, key, text in rows:
        assert _decode(RESPONSE_TYPES[kind], json.loads(text)) is not None, (kind, key, text[:200])
    return len(rows)
