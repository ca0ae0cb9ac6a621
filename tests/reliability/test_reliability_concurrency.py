"""Concurrency: two `copyprobe detect` processes (the real CLI, model swapped for a slow
logging FakeBackend) share one --cache file at the same time -- one on the same data,
one on overlapping data -- and both finish with the results of a solo run; the cache
passes SQLite's integrity check and every entry decodes to its response type.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from rel_util import REPO, assert_cache_entries_decode, env, fake_cli_cmd, make_passages, run, write_jsonl

METHODS = "loss,zlib,lowercase,min_k"


def args(data: Path, out: Path, cache: Path) -> list[str]:
    return ["detect", "--model", "fake", "--data", str(data), "--out", str(out), "--cache", str(cache),
            "--methods", METHODS, "--bootstrap", "100", "--no-progress"]


def test_two_processes_share_one_cache_file(tmp_path):
    rows = make_passages(240, seed=41, words=20)
    data_a = write_jsonl(tmp_path / "a.jsonl", rows[:160])
    data_b = write_jsonl(tmp_path / "b.jsonl", rows[80:])  # 80 passages in common with a
    # solo runs, each with its own cache: what the shared runs must reproduce
    for name, data in (("a", data_a), ("b", data_b)):
        solo = run(fake_cli_cmd(*args(data, tmp_path / f"solo_{name}", tmp_path / f"solo_{name}.sqlite")), env=env())
        assert solo.returncode == 0, solo.stderr

    shared, log = tmp_path / "shared.sqlite", tmp_path / "model.log"
    procs = {
        name: subprocess.Popen(fake_cli_cmd(*args(data, tmp_path / f"run_{name}", shared)), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env(FAKE_LOG=str(log), FAKE_DELAY="0.01"))
        for name, data in (("a", data_a), ("b", data_b), ("a2", data_a))
    }
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (name, stderr)
        assert "Traceback" not in stderr and "locked" not in stderr

    # the processes really ran at the same time: their model answers interleave in the log
    pids = [line.split()[0] for line in log.read_text().splitlines()]
    assert len(set(pids)) >= 2
    switches = sum(1 for x, y in zip(pids, pids[1:]) if x != y)
    assert switches >= 2, "the runs did not overlap"

    for name, solo in (("a", "solo_a"), ("b", "solo_b"), ("a2", "solo_a")):
        for file in ("scores.jsonl", "metrics.json"):
            assert (tmp_path / f"run_{name}" / file).read_bytes() == (tmp_path / solo / file).read_bytes(), (name, file)

    db = sqlite3.connect(shared)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    # one entry per unique request (texts + lower-cased texts of the 240 passages), all decodable
    assert assert_cache_entries_decode(shared) == 2 * 240
