"""The response cache against other versions and other processes: entries written in
another shape are recomputed and overwritten (never exit 1), a cache of another schema
is explained in one line, and processes that create the same new cache file at the same
instant all open it (SQLITE_BUSY on the WAL switch and the schema creation is retried)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from copyprobe.backends.cache import ResponseCache
from copyprobe.cli.main import main

from rel_util import REPO, assert_cache_entries_decode, env, make_passages
from test_reliability_bad_input import fake_loader, jsonl, run_cli

ROWS = make_passages(20, seed=8, words=12)


@pytest.fixture
def fake_model(monkeypatch):
    from copyprobe.backends import specs

    monkeypatch.setitem(specs.__dict__, "_real_load_backend", specs.load_backend)
    monkeypatch.setattr(specs, "load_backend", fake_loader)


def _detect(tmp_path, out="run"):
    return ["detect", "--model", "fake", "--data", str(tmp_path / "data.jsonl"), "--out", str(tmp_path / out),
            "--methods", "loss,lowercase", "--cache", str(tmp_path / "cache.sqlite"), "--no-progress",
            "--bootstrap", "20"]


STALE_FORMS = [
    lambda r: {**r, "added_by_a_newer_version": 1},  # a field this version does not know
    lambda r: {k: v for k, v in r.items() if k != "mu"},  # a field an older version did not write
    lambda r: {**r, "token_ids": "1 2 3"},  # another type
    lambda r: {**r, "logprobs": {"a": 1}},
    lambda r: [r],  # not an object at all
    lambda r: "old text format",
]


def test_entries_of_another_shape_are_recomputed_not_fatal(tmp_path, capsys, fake_model):
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    assert run_cli(_detect(tmp_path, "clean"), capsys)[0] == 0
    clean = (tmp_path / "clean" / "scores.jsonl").read_text()
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    keys = [row[0] for row in db.execute("SELECT key FROM responses ORDER BY key")]
    tampered = keys[: len(STALE_FORMS) * 2]
    for i, key in enumerate(tampered):
        (text,) = db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        stale = STALE_FORMS[i % len(STALE_FORMS)](json.loads(text))
        db.execute("UPDATE responses SET response = ? WHERE key = ?", (json.dumps(stale), key))
    db.commit()
    db.close()

    code, out, err = run_cli(_detect(tmp_path), capsys)
    assert code == 0 and "Traceback" not in err, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["cache"]["misses"] == len(tampered) and run["cache"]["hits"] == len(keys) - len(tampered)
    assert (tmp_path / "run" / "scores.jsonl").read_text() == clean  # the same answers again
    assert assert_cache_entries_decode(tmp_path / "cache.sqlite") == len(keys)  # overwritten in today's shape
    code, _, _ = run_cli(_detect(tmp_path), capsys)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["cache"]["misses"] == 0


@pytest.mark.parametrize("version", ["2", "0", "x"])
def test_a_cache_of_another_schema_is_explained(tmp_path, capsys, fake_model, version):
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    ResponseCache(tmp_path / "cache.sqlite").close()
    db = sqlite3.connect(tmp_path / "cache.sqlite")
    db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (version,))
    db.commit()
    db.close()
    code, out, err = run_cli(_detect(tmp_path), capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert f"has cache schema {version}, and this copyprobe reads schema 1" in lines[0]


class _Flaky:
    """A connection whose first ``n`` WAL switches / table creations answer 'database is locked'."""

    def __init__(self, connection, failures):
        self._connection, self._failures = connection, failures

    def execute(self, sql, *args):
        if ("journal_mode" in sql or "CREATE TABLE" in sql) and self._failures[0] > 0:
            self._failures[0] -= 1
            raise sqlite3.OperationalError("database is locked")
        return self._connection.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._connection, name)

    def __enter__(self):
        return self._connection.__enter__()

    def __exit__(self, *exc):
        return self._connection.__exit__(*exc)


def test_busy_while_creating_is_retried(tmp_path, monkeypatch):
    real_connect = sqlite3.connect
    failures = [5]
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: _Flaky(real_connect(*a, **k), failures))
    cache = ResponseCache(tmp_path / "new.sqlite")
    cache.put_many("fp", "token_logprobs", [("k", {"token_ids": [1], "logprobs": []})])
    assert failures == [0] and cache.count() == 1
    cache.close()


def test_busy_for_too_long_is_one_line(tmp_path, monkeypatch):
    from copyprobe.backends import cache as cache_module
    from copyprobe.errors import BackendError

    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: _Flaky(real_connect(*a, **k), [10**9]))
    monkeypatch.setattr(cache_module, "BUSY_WAIT_S", 0.2)
    with pytest.raises(BackendError, match="stayed locked by another process for 0.2 s"):
        ResponseCache(tmp_path / "new.sqlite")


RACER = r"""
import sys, time
from copyprobe.backends.cache import ResponseCache
path, start, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
while time.time() < start:
    pass
cache = ResponseCache(path)
cache.put_many("fp", "token_logprobs", [(name, {"token_ids": [1], "logprobs": []})])
print(cache.count() >= 1)
cache.close()
"""


def test_two_processes_creating_one_new_cache_20_times_in_a_row(tmp_path):
    """Each round: two processes wait for the same instant, then open the same new cache
    file and write to it. Every round, both succeed and both entries are there."""
    for round_ in range(20):
        path = tmp_path / f"cache{round_}.sqlite"
        start = time.time() + 0.7  # both processes are up and spinning by then
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(path), repr(start), f"p{k}"], cwd=REPO,
                                   env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for k in range(2)]
        results = [racer.communicate(timeout=120) for racer in racers]
        for racer, (out, err) in zip(racers, results):
            assert racer.returncode == 0 and out.strip() == "True", f"round {round_}: {err.strip()[-300:]}"
        db = sqlite3.connect(path)
        assert sorted(k for (k,) in db.execute("SELECT key FROM responses")) == ["p0", "p1"]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.close()


def test_cli_on_a_cache_in_the_middle_of_creation_by_another_process(tmp_path, capsys, fake_model, monkeypatch):
    """Through the command: a lock held while the run opens its cache is waited for."""
    from copyprobe.backends import cache as cache_module

    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    real_connect = sqlite3.connect
    failures = [3]
    opened = []

    def connect(path, *args, **kwargs):
        opened.append(str(path))
        return _Flaky(real_connect(path, *args, **kwargs), failures)

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(cache_module, "BUSY_WAIT_S", 10.0)
    code = main(_detect(tmp_path))
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, (err, opened)
    # 3 opens refused, the 4th taken, and the file check's own connection
    assert failures == [0] and opened.count(str(tmp_path / "cache.sqlite")) == 5
