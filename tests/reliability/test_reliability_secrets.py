"""Secrets: the API key comes from the environment only and never reaches the cache, the
run directory, the report, any other file the run writes, or the process output --
including the error message when the server rejects the key (the fake server echoes a
wrong key back in its 401 body, as OpenAI's "Incorrect API key provided" does).

The CLI runs as a real subprocess with HOME, the cache dir and the temp dir inside the
test's directory, so every file it could write is scanned.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from rel_util import cli_cmd, env, make_passages, run, write_jsonl

SECRET = "sk-copyprobe-CANARY-7f3a9c1e5b2d4086-do-not-leak"
WRONG = "sk-copyprobe-WRONG-KEY-1b9e77c04d2a55f3"


def sandbox_env(root: Path, key: str) -> dict[str, str]:
    for name in ("home", "cachedir", "tmp"):
        (root / name).mkdir(exist_ok=True)
    return env(OPENAI_API_KEY=key, HOME=str(root / "home"), COPYPROBE_CACHE_DIR=str(root / "cachedir"),
               XDG_CACHE_HOME=str(root / "home" / ".cache"), TMPDIR=str(root / "tmp"))


def files_holding(root: Path, needles: list[str], min_files: int = 5) -> list[str]:
    hits = []
    scanned = 0
    for path in sorted(root.rglob("*")):
        if path.is_file():
            scanned += 1
            data = path.read_bytes()
            for needle in needles:
                if needle.encode() in data or needle.encode("utf-16-le") in data:
                    hits.append(f"{path.relative_to(root)} holds {needle[:14]}...")
    assert scanned >= min_files, "too little was written: the scan would prove nothing"
    return hits


def fragments(key: str) -> list[str]:
    """The key and its distinctive middle (a truncated or partly masked echo leaks too)."""
    return [key, key[8:30]]


def test_api_key_is_in_no_file_and_no_output(tmp_path, fake_openai):
    rows = make_passages(6, seed=21, words=60)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1], api_key=SECRET)
    want_report = importlib.util.find_spec("copyprobe.reports.html") is not None
    args = ["detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
            "--methods", "prefix_probe,decop", "--param", "decop.mode=blackbox",
            "--out", str(tmp_path / "run"), "--bootstrap", "20", "--no-progress"]
    if want_report:
        args.append("--report")
    result = run(cli_cmd(*args), env=sandbox_env(tmp_path, SECRET))
    assert result.returncode == 0, result.stderr
    # the key was used: the server accepts nothing else, and it got every request
    assert len(server.log) >= 6 * (1 + 24) and all(r["path"].endswith("completions") for r in server.log)
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["model"]["api_key_env"] == "OPENAI_API_KEY" and run_json["model"]["api_key_set"] is True
    assert not run_json["failures"]
    # the default cache (COPYPROBE_CACHE_DIR) was written, WAL included, and is scanned too
    assert list((tmp_path / "cachedir").glob("responses.sqlite*"))
    if want_report:
        assert (tmp_path / "run" / "report.html").is_file()
    assert files_holding(tmp_path, fragments(SECRET)) == []
    for stream in (result.stdout, result.stderr):
        assert not any(f in stream for f in fragments(SECRET))


def test_rejected_key_is_not_echoed(tmp_path, fake_openai):
    rows = make_passages(4, seed=22, words=60)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(api_key=SECRET)
    result = run(cli_cmd("detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
                         "--methods", "prefix_probe", "--out", str(tmp_path / "run"), "--no-progress"),
                 env=sandbox_env(tmp_path, WRONG))
    assert result.returncode == 2, result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "401" in lines[0] and "Traceback" not in result.stderr, result.stderr
    # the server did echo the wrong key; the client did not pass it on
    assert any(r["path"].endswith("completions") for r in server.log)
    for stream in (result.stdout, result.stderr):
        assert not any(f in stream for f in fragments(WRONG) + fragments(SECRET))
    assert list((tmp_path / "cachedir").glob("responses.sqlite*"))
    assert files_holding(tmp_path, fragments(WRONG), min_files=2) == []
