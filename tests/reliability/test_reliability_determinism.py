"""Determinism: two identical runs, in separate processes with different hash seeds and
no shared cache, write byte-identical scores.jsonl and metrics.json; the bootstrap seed
is recorded in run.json and changing it changes the confidence intervals (so it is
really used).

* a sampled black-box method (DE-COP: paraphrases sampled at temperature 0.1) on the fake
  OpenAI-compatible server, which answers unseeded sampling requests truly at random --
  any request sent without a seed would make the two runs differ;
* the real smollm2 on a few passages (``model``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rel_util import cli_cmd, env, make_passages, run, write_jsonl


def detect(tmp: Path, name: str, model: str, data: Path, methods: str, *extra: str, hash_seed: str) -> Path:
    out = tmp / name
    result = run(cli_cmd("detect", "--model", model, "--data", str(data), "--methods", methods, "--out", str(out),
                         "--no-cache", "--no-progress", "--bootstrap", "300", *extra),
                 env=env(PYTHONHASHSEED=hash_seed, OPENAI_API_KEY=""), timeout=900)
    assert result.returncode == 0, result.stderr
    return out


def test_sampled_black_box_runs_are_byte_identical(tmp_path, fake_openai):
    rows = make_passages(12, seed=31, words=40)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1])
    model = f"openai:tiny-model@{server.base_url}"
    methods = "decop,prefix_probe"
    a = detect(tmp_path, "a", model, data, methods, "--param", "decop.mode=blackbox", hash_seed="1")
    b = detect(tmp_path, "b", model, data, methods, "--param", "decop.mode=blackbox", hash_seed="2")
    sampled = [r for r in server.log if r["body"].get("temperature", 0) > 0]
    assert len(sampled) == 2 * len(rows) and all(r["body"].get("seed") is not None for r in sampled)
    for name in ("scores.jsonl", "metrics.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    scores = [json.loads(l) for l in (a / "scores.jsonl").read_text().splitlines()]
    assert all(r["decop"] is not None and r["details"]["decop"]["paraphrases"] for r in scores)
    run_a = json.loads((a / "run.json").read_text())
    assert run_a["bootstrap"] == {"n": 300, "seed": 0}

    c = detect(tmp_path, "c", model, data, methods, "--param", "decop.mode=blackbox", "--seed", "1", hash_seed="3")
    assert json.loads((c / "run.json").read_text())["bootstrap"] == {"n": 300, "seed": 1}
    metrics_a, metrics_c = (json.loads((d / "metrics.json").read_text()) for d in (a, c))
    ci = lambda m: [(v["auc_low"], v["auc_high"]) for v in m["passage"].values()]  # noqa: E731
    assert ci(metrics_a) != ci(metrics_c)  # the seed drives the bootstrap ...
    assert [v["auc"] for v in metrics_a["passage"].values()] == [v["auc"] for v in metrics_c["passage"].values()]


@pytest.mark.model
def test_smollm2_runs_are_byte_identical(tmp_path):
    rows = make_passages(6, seed=32, words=25)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    methods = "loss,zlib,lowercase,min_k,min_k_pp,slope"
    a = detect(tmp_path, "a", "smollm2-135m-instruct", data, methods, "--device", "cpu", hash_seed="1")
    b = detect(tmp_path, "b", "smollm2-135m-instruct", data, methods, "--device", "cpu", hash_seed="2")
    for name in ("scores.jsonl", "metrics.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    scores = [json.loads(l) for l in (a / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 6 and all(r["loss"] is not None for r in scores)
    assert json.loads((a / "run.json").read_text())["bootstrap"] == {"n": 300, "seed": 0}


def test_document_level_metrics_are_byte_identical_across_processes(tmp_path):
    """Documents (the demo data: doc ids, document-level bootstrap that resamples whole
    documents) through the real CLI with a FakeBackend, in processes with different hash
    seeds: byte-identical outputs."""
    from copyprobe.cli.commands.demo import demo_data_path

    from rel_util import fake_cli_cmd

    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"run{hash_seed}"
        result = run(fake_cli_cmd("detect", "--model", "fake", "--data", str(demo_data_path()), "--out", str(out),
                                  "--methods", "loss,zlib,min_k,min_k_pp", "--no-cache", "--no-progress",
                                  "--bootstrap", "200"), env=env(PYTHONHASHSEED=hash_seed))
        assert result.returncode == 0, result.stderr
        outs.append(out)
    metrics = json.loads((outs[0] / "metrics.json").read_text())
    assert metrics["document"] and all(v["auc_low"] is not None for v in metrics["document"].values())
    for name in ("scores.jsonl", "metrics.json"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
