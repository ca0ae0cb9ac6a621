"""Black-box methods on a model that can follow their prompts: Qwen2.5-Coder-0.5B-Instruct
through llama.cpp (``bigmodel``: skipped without the ``qwen`` packages or llama-cpp-python).

Four demo passages: the two famous ones this small model partly recites (Ecclesiastes 3
"a time to ...", the opening of A Tale of Two Cities) and two written in November 2026.
The checks are about the prompts and the parsing working with a real instruction model
(every answer parsed), and about the direction of the signal where the model recalls the
text; on the whole demo set the 0.5B model is at chance (benchmarks/results/blackbox.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copyprobe.data.example import Example
from copyprobe.methods.name_cloze import NameCloze
from copyprobe.methods.prefix_probe import PrefixProbe
from copyprobe.drive import Failure, drive

pytestmark = [pytest.mark.model, pytest.mark.bigmodel]  # "not model" runs skip them too
DEMO = Path(__file__).resolve().parents[2] / "copyprobe/demo/demo.jsonl"
IDS = ["kjv-wisdom-2", "novel-openings-a-2", "fresh-scripture-a-1", "fresh-founding-1"]


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


def test_prefix_probe_separates_recalled_text_from_fresh_text(qwen, passages):
    # measured ROUGE-L: 0.59 and 0.59 for the famous passages, 0.22 and 0.15 for the fresh ones
    results = run(PrefixProbe(similarity="rouge_l"), passages, qwen)
    members = [results[e.id].value for e in passages if e.label == 1]
    fresh = [results[e.id].value for e in passages if e.label == 0]
    assert min(members) > max(fresh), (members, fresh)


def test_name_cloze_answers_are_all_parsed(qwen, passages):
    # the model answers with <name> tags or in a sentence ('... is "door".'); both parse
    results = run(NameCloze(), passages, qwen)
    for e in passages:
        details = results[e.id].details
        assert details["guess"] and details["guess"] in details["raw_answer"], details["raw_answer"]
        assert details["guess"].lower() not in ("the", "output", "answer"), details["raw_answer"]
