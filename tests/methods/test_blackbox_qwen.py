"""Black-box methods on a model that can follow their prompts: Qwen2.5-Coder-0.5B-Instruct
through llama.cpp (``bigmodel``: skipped without the ``qwen`` packages or llama-cpp-python).

A handful of demo passages: two the model has seen many times (KJV Genesis, the
Declaration of Independence) and two written in November 2026. The checks are about the
prompts and the parsing working with a real instruction model (answers in the asked
format, parsed), and about the direction of the signal where the model memorised the
text verbatim; AUCs with confidence intervals are in benchmarks/results/blackbox.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copyprobe.data.example import Example
from copyprobe.methods.name_cloze import NameCloze
from copyprobe.methods.prefix_probe import PrefixProbe
from copyprobe.runner import Failure, drive

pytestmark = [pytest.mark.model, pytest.mark.bigmodel]  # "not model" runs skip them too
DEMO = Path(__file__).resolve().parents[2] / "copyprobe/demo/demo.jsonl"
IDS = ["kjv-genesis-1", "declaration-of-independence-1", "fresh-scripture-a-1", "fresh-founding-1"]


@pytest.fixture(scope="module")
def qwen():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install 'copyprobe[llamacpp]'")
    import os

    from copyprobe.backends.specs import load_backend, resolve_local
    from copyprobe.errors import BackendError

    try:
        resolve_local("llamacpp:qwen2.5-coder-0.5b-instruct")
    except BackendError as exc:
        pytest.skip(str(exc))
    threads = os.environ.get("COPYPROBE_TEST_THREADS")
    backend = load_backend("llamacpp:qwen2.5-coder-0.5b-instruct", max_length=1024,
                           n_threads=int(threads) if threads else None)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def passages():
    rows = {r["id"]: r for r in map(json.loads, DEMO.read_text().splitlines())}
    return [Example(id=i, text=rows[i]["text"], label=rows[i]["label"], doc_id=rows[i]["doc_id"]) for i in IDS]


def run(method, examples, backend):
    results = drive({e.id: method.run(e) for e in examples}, lambda spec: backend)
    failed = {k: v.reason for k, v in results.items() if isinstance(v, Failure)}
    assert not failed, failed
    return results


def test_prefix_probe_separates_verbatim_scripture_from_fresh_text(qwen, passages):
    results = run(PrefixProbe(), passages, qwen)
    members = [results[e.id].value for e in passages if e.label == 1]
    fresh = [results[e.id].value for e in passages if e.label == 0]
    assert min(members) > max(fresh), (members, fresh)


def test_name_cloze_answers_are_in_the_asked_format(qwen, passages):
    results = run(NameCloze(), passages, qwen)
    tagged = [e.id for e in passages if "<name>" in results[e.id].details["raw_answer"]]
    assert len(tagged) >= 3, {e.id: results[e.id].details["raw_answer"] for e in passages}
    for e in passages:  # the parsed guess is the tagged word
        details = results[e.id].details
        if "<name>" in details["raw_answer"] and details["guess"]:
            assert details["guess"] in details["raw_answer"]
