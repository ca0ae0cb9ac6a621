"""`copyprobe cache`: what the response cache holds, and forgetting part of it."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from copyprobe.backends.base import GenerateRequest, TokenLogprobsRequest
from copyprobe.backends.cache import CachedBackend, ResponseCache
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main

TEXTS = {"model-a": 5, "model-b": 3}  # token log-prob requests per model; each also 2 generations


def _fill(path) -> dict[str, str]:
    """Answers of two fake models into a cache; their fingerprints by spec."""
    cache = ResponseCache(path)
    for spec, n in TEXTS.items():
        fake = FakeBackend(spec=spec)
        CachedBackend(fake, cache).answer([TokenLogprobsRequest(f"{spec} text {i}") for i in range(n)])
        CachedBackend(fake, cache).answer([GenerateRequest(prompt=f"{spec} prompt {i}") for i in range(2)])
    cache.close()
    return {spec: FakeBackend(spec=spec).fingerprint for spec in TEXTS}


def _cache(path, capsys, *options):
    code = main(["cache", "--cache", str(path), "--json", *options])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def _rows(path) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT fingerprint, kind, key, response FROM responses").fetchall()
    finally:
        db.close()


def test_lists_entries_and_bytes_per_model_and_kind(tmp_path, capsys):
    path = tmp_path / "c.sqlite"
    fingerprints = _fill(path)
    code, report = _cache(path, capsys)
    assert code == 0
    got = {(row["fingerprint"], row["kind"]): row["entries"] for row in report["contents"]}
    assert got == {(fingerprints[spec], kind): n for spec, n in TEXTS.items()
                   for kind, n in (("token_logprobs", n), ("generate", 2))}
    stored: dict[tuple, int] = {}
    for fingerprint, kind, _key, response in _rows(path):
        stored[fingerprint, kind] = stored.get((fingerprint, kind), 0) + len(response.encode())
    assert {(row["fingerprint"], row["kind"]): row["bytes"] for row in report["contents"]} == stored
    assert report["entries"] == sum(TEXTS.values()) + 4
    assert report["bytes_on_disk"] >= path.stat().st_size > 0
    today = time.strftime("%Y-%m-%d")
    code = main(["cache", "--cache", str(path)])
    table = capsys.readouterr().out
    assert code == 0 and fingerprints["model-a"] in table and today in table  # whole, to be given back


def test_forget_a_model_by_the_start_of_its_fingerprint(tmp_path, capsys):
    path = tmp_path / "c.sqlite"
    fingerprints = _fill(path)
    code, report = _cache(path, capsys, "--forget-model", fingerprints["model-a"][:8])
    assert code == 0 and report["forgotten"] == {"entries": TEXTS["model-a"] + 2, "compacted": True}
    assert {fingerprint for fingerprint, *_ in _rows(path)} == {fingerprints["model-b"]}
    for spec, misses in (("model-a", TEXTS["model-a"]), ("model-b", 0)):  # forgotten answers are computed again
        again = CachedBackend(FakeBackend(spec=spec), ResponseCache(path))
        again.answer([TokenLogprobsRequest(f"{spec} text {i}") for i in range(TEXTS[spec])])
        assert again.misses == misses
        again.cache.close()


def test_forget_entries_older_than_some_days_of_one_model_or_all(tmp_path, capsys):
    path = tmp_path / "c.sqlite"
    fingerprints = _fill(path)
    db = sqlite3.connect(path)
    with db:  # the token answers written ten days ago
        db.execute("UPDATE responses SET created = ? WHERE kind = 'token_logprobs'", (time.time() - 10 * 86400,))
    db.close()
    code, report = _cache(path, capsys, "--forget-older-than", "5", "--forget-model", fingerprints["model-b"])
    assert code == 0 and report["forgotten"]["entries"] == TEXTS["model-b"]
    code, report = _cache(path, capsys, "--forget-older-than", "5")
    assert code == 0 and report["forgotten"]["entries"] == TEXTS["model-a"]
    assert sorted(kind for _fp, kind, *_ in _rows(path)) == ["generate"] * 4
    code, report = _cache(path, capsys, "--forget-older-than", "5")
    assert code == 0 and report["forgotten"]["entries"] == 0


@pytest.mark.parametrize("options, message", [
    (["--forget-model", "abc"], "at least its first 8 characters"),
    (["--forget-model", ""], "at least its first 8 characters"),
    (["--forget-model", "ffffffffff"], "no model's fingerprint in this cache starts so"),
    (["--forget-model", "abcdefgh"], "the fingerprints of 2 models start so"),
    (["--forget-older-than", "-1"], "must be a finite number >= 0"),
    (["--forget-older-than", "soon"], "--forget-older-than"),
])
def test_bad_options_are_one_line_and_forget_nothing(tmp_path, capsys, options, message):
    path = tmp_path / "c.sqlite"
    _fill(path)
    db = sqlite3.connect(path)
    with db:  # two models whose fingerprints start alike
        db.executemany("INSERT INTO responses VALUES (?, 'generate', 'k', '{}', 0)", [("abcdefgh1",), ("abcdefgh2",)])
    db.close()
    before = _rows(path)
    code, err = _cache(path, capsys, *options)
    assert code == 2 and message in err and err.count("\n") == 1
    assert _rows(path) == before


def test_no_cache_file_is_said_and_not_made(tmp_path, capsys):
    path = tmp_path / "none.sqlite"
    code, report = _cache(path, capsys)
    assert code == 0 and report == {"path": str(path), "exists": False} and not path.exists()
    code, err = _cache(path, capsys, "--forget-older-than", "1")
    assert code == 2 and "nothing to forget" in err and not path.exists()


@pytest.mark.parametrize("hold", ["BEGIN", "BEGIN IMMEDIATE"])  # another process reading, writing
def test_compacting_a_cache_another_process_holds_gives_up_and_keeps_what_it_forgot(tmp_path, hold):
    path = tmp_path / "c.sqlite"
    _fill(path)
    cache = ResponseCache(path)
    long_texts = [TokenLogprobsRequest(" ".join(f"word{i}x{j}" for j in range(300))) for i in range(40)]
    CachedBackend(FakeBackend(spec="model-c"), cache).answer(long_texts)  # pages for compacting to free
    forgotten = cache.forget(written_before=time.time() + 1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute(hold)
    other.execute("SELECT COUNT(*) FROM responses").fetchone()
    try:
        assert cache.compact(wait_s=0.1) is False
    finally:
        other.close()
    assert forgotten == sum(TEXTS.values()) + 4 + len(long_texts) and cache.count() == 0
    wal = tmp_path / "c.sqlite-wal"
    on_disk = path.stat().st_size + wal.stat().st_size
    assert cache.compact(wait_s=0.1) is True
    assert path.stat().st_size < on_disk / 4 and wal.stat().st_size == 0
    cache.close()
