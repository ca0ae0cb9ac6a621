"""Faults: a black-box run through a fault-injecting proxy (20% of requests get a 429
with Retry-After, a 500, a timeout, a dropped connection or garbled JSON) completes;
retries honour Retry-After (measured); every request that still fails is listed with its
reason in run.json and its row has a null score with the reason -- never a silent score;
every other row equals the fault-free run.

The fast tests use the fake OpenAI-compatible server of fake_openai.py; the ``server``
test puts the proxy in front of the real llama.cpp server (tests/server/conftest.py).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest

import copyprobe
from copyprobe.backends.openai_compat import OpenAIBackend
from copyprobe.cli.main import main

from fault_proxy import FaultProxy
from rel_util import make_passages, write_jsonl

POISON = (7, 30, 51)  # rows whose requests fail every time


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def upstream_of(server) -> str:
    return f"http://127.0.0.1:{server.port}"


def check_retry_after(proxy: FaultProxy, seconds: float) -> list[float]:
    """Gap between each 429 and the next attempt of the same request."""
    by_key = defaultdict(list)
    for event in proxy.events:
        by_key[event["key"]].append(event)
    gaps = []
    for events in by_key.values():
        for this, following in zip(events, events[1:]):
            if this["fault"] == "429":
                gaps.append(following["t"] - this["t"])
    assert gaps, "no 429 was injected"
    assert min(gaps) >= seconds - 0.05, gaps
    return gaps


def test_api_run_with_all_faults_completes_and_records_every_failure(tmp_path, fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rows = make_passages(60, seed=5, words=70)
    for i in POISON:
        rows[i]["text"] = "POISON " + rows[i]["text"]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    upstream = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1])
    clean = copyprobe.detect(OpenAIBackend("tiny-model", upstream.base_url), str(data), ["prefix_probe"],
                             out=tmp_path / "clean", cache=False, n_bootstrap=100)
    assert not clean.run["failures"]

    with FaultProxy(upstream_of(upstream), rate=0.2, seed=7, retry_after=1, hang_s=4.0,
                    always_fail=lambda body: "POISON" in json.dumps(body)) as proxy:
        backend = OpenAIBackend("tiny-model", proxy.base_url, timeout=3.0, max_retries=3, backoff=0.05,
                                max_backoff=2.0)
        started = time.monotonic()
        result = copyprobe.detect(backend, str(data), ["prefix_probe"], out=tmp_path / "run",
                                  cache=tmp_path / "cache.sqlite", n_bootstrap=100)
        elapsed = time.monotonic() - started
        events = list(proxy.events)
        gaps = check_retry_after(proxy, 1.0)
        # the same server, now healthy: a rerun with the same cache asks only for what failed
        with proxy.lock:
            proxy.rate, proxy.always_fail, proxy.events = 0.0, None, []
        again = copyprobe.detect(OpenAIBackend("tiny-model", proxy.base_url), str(data), ["prefix_probe"],
                                 out=tmp_path / "again", cache=tmp_path / "cache.sqlite", n_bootstrap=100)
        resent = list(proxy.events)

    kinds = {e["fault"] for e in events if e["fault"] and not e["forced"]}
    assert kinds == {"429", "500", "timeout", "drop", "garbled"}, kinds
    injected = sum(1 for e in events if e["fault"] and not e["forced"])
    assert injected >= 0.1 * len(events)

    run = json.loads((tmp_path / "run" / "run.json").read_text())
    poison_ids = {rows[i]["id"] for i in POISON}
    failed_ids = {f["id"] for f in run["failures"]}
    # every request that failed for good is listed with its reason: the forced ones, and any
    # whose four attempts all met a fault by chance (on a loaded machine, also a slow answer)
    assert poison_ids <= failed_ids and len(failed_ids - poison_ids) <= 2, failed_ids
    failed = run["requests"]["failed"]
    assert len(failed) == len(failed_ids)
    assert sum("HTTP 500" in e["reason"] for e in failed) >= len(POISON)
    for entry in failed:
        assert entry["kind"] == "generate" and "gave up after 4 attempts" in entry["reason"], entry
    # ... its row is null with the reason; every other row equals the fault-free run
    written = read_rows(tmp_path / "run" / "scores.jsonl")
    clean_rows = {r["id"]: r for r in read_rows(tmp_path / "clean" / "scores.jsonl")}
    assert len(written) == 60
    for row in written:
        if row["id"] in failed_ids:
            assert row["prefix_probe"] is None and row["errors"]["prefix_probe"].startswith("request failed: ")
            if row["id"] in poison_ids:
                assert "HTTP 500" in row["errors"]["prefix_probe"]
        else:
            assert row == clean_rows[row["id"]]  # no fault became a wrong or silent score
    # the record accounts for every attempt: sent = proxy log, retries = attempts beyond the first
    usage = run["model"]["usage"]
    assert usage["requests"] == len(events)
    assert usage["retries"] == len(events) - len({e["key"] for e in events})
    assert usage["failed"] == len(failed_ids)
    for key in {e["key"] for e in events}:
        attempts = [e for e in events if e["key"] == key]
        if attempts[0]["forced"]:
            assert len(attempts) == 4  # 1 + max_retries, all failed
    assert result.run["cache"]["misses"] == 60
    # the rerun asks for nothing else (nothing was lost), after one look for the server
    assert [e["path"] for e in resent if e["path"].endswith("/models")] == ["/v1/models"]
    assert len(resent) == len(failed_ids) + 1
    assert not again.run["failures"]
    assert (tmp_path / "again" / "scores.jsonl").read_bytes() == (tmp_path / "clean" / "scores.jsonl").read_bytes()
    print(f"events={len(events)} injected={injected} retry_after_gaps={sorted(round(g, 2) for g in gaps)} elapsed={elapsed:.1f}s")


def test_cli_black_box_run_through_the_proxy_matches_the_fault_free_run(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rows = make_passages(50, seed=9, words=70)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    upstream = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1])

    def detect(url: str, out: str) -> int:
        return main(["detect", "--model", f"openai:tiny-model@{url}", "--data", str(data), "--methods",
                     "prefix_probe", "--out", str(tmp_path / out), "--cache", str(tmp_path / f"{out}.sqlite"),
                     "--bootstrap", "100", "--no-progress"])

    assert detect(upstream.base_url, "clean") == 0
    with FaultProxy(upstream_of(upstream), rate=0.2, seed=11, kinds=("429", "500", "drop", "garbled"),
                    retry_after=1) as proxy:
        started = time.monotonic()
        assert detect(proxy.base_url, "faulty") == 0
        elapsed = time.monotonic() - started
        events = list(proxy.events)
        check_retry_after(proxy, 1.0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    # one look for the server before work (GET /models: a fault there is not retried; the
    # requests themselves find out), then the 50 generations
    looks = [e for e in events if e["path"].endswith("/models")]
    assert len(looks) == 1
    n_faults = sum(1 for e in events if e["fault"] and e not in looks)
    assert n_faults >= 5
    run = json.loads((tmp_path / "faulty" / "run.json").read_text())
    assert run["failures"] == [] and run["requests"]["failed"] == []
    # one retry per injected fault, all recorded; the results equal the fault-free run's
    assert run["model"]["usage"]["retries"] == n_faults
    assert run["model"]["usage"]["requests"] == len(events) == 1 + 50 + n_faults
    for name in ("scores.jsonl", "metrics.json"):
        assert (tmp_path / "faulty" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    print(f"faults={n_faults} of {len(events)} elapsed={elapsed:.1f}s")


@pytest.mark.server
def test_faults_in_front_of_the_real_llama_server(tmp_path, llama_server, monkeypatch):
    """The same guarantees against llama-cpp-python's server (skipped when not installed)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rows = make_passages(50, seed=13, words=40)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    params = {"prefix_probe": {"prefix_tokens": 8, "max_tokens": 12}}
    upstream = llama_server.rsplit("/v1", 1)[0]
    clean = copyprobe.detect(OpenAIBackend("smollm2", llama_server, concurrency=2), str(data), ["prefix_probe"],
                             params=params, out=tmp_path / "clean", cache=False, n_bootstrap=100)
    assert not clean.run["failures"]
    # a hang costs the client its timeout: 8 s is several times a 12-token answer here, and
    # the hang (12 s) outlasts it, so each is a client timeout and a retry
    with FaultProxy(upstream, rate=0.2, seed=3, retry_after=1, hang_s=12.0) as proxy:
        backend = OpenAIBackend("smollm2", proxy.base_url, concurrency=2, timeout=8.0, max_retries=4,
                                backoff=0.05, max_backoff=2.0)
        result = copyprobe.detect(backend, str(data), ["prefix_probe"], params=params, out=tmp_path / "run",
                                  cache=tmp_path / "c.sqlite", n_bootstrap=100)
        events = list(proxy.events)
        check_retry_after(proxy, 1.0)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    failed_ids = {f["id"] for f in run["failures"]}
    assert len(run["requests"]["failed"]) == len(failed_ids)
    for row in read_rows(tmp_path / "run" / "scores.jsonl"):
        if row["id"] in failed_ids:
            assert row["prefix_probe"] is None and row["errors"]["prefix_probe"]
        else:
            assert row["prefix_probe"] is not None
    assert run["model"]["usage"]["requests"] == len(events)
    assert result.run["n_passages"] == 50
