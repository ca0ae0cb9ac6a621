"""The null battery's subset options: a slow method (DE-COP) is run on some scenarios and
a few passages a document, and the subset must be exactly what those audits read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_audit_validity as bench  # noqa: E402

from copyprobe.evaluation.verdicts import evenly_spaced  # noqa: E402


def test_named_scenarios_keep_their_documents_and_evenly_spaced_passages():
    names = ["archaic vs modern", "many vs many, one style"]
    full = bench.load_battery(64)
    sub = bench.battery_examples(64, names, 1)
    audited = {d for sc in bench.scenarios(names) for s, c in sc["audits"] for d in s + c}
    assert {e.doc_id for e in sub} == audited  # every audited document, nothing else
    assert len(sub) == len(audited)  # one passage each
    for doc in ("modern-03", "archaic-02"):
        passages = [e.id for e in full if e.doc_id == doc]
        assert [e.id for e in sub if e.doc_id == doc] == [passages[evenly_spaced(len(passages), 1)[0]]]
    every = {d for sc in bench.scenarios() for s, c in sc["audits"] for d in s + c}
    whole = bench.battery_examples(64)  # no option: every passage of every audited document
    assert {e.doc_id for e in whole} == every and len(whole) == sum(e.doc_id in every for e in full)


def test_an_unknown_scenario_is_named_with_the_choices():
    with pytest.raises(SystemExit, match="unknown scenario 'verse vs legal'.*archaic vs modern"):
        bench.scenarios(["verse vs legal"])


def _battery(model: str, words: int, evidence: int) -> dict:
    row = {"method": "loss", "test": "t", "alpha": 0.01, "guard": "t", "documents": 108, "evidence": evidence,
           "unguarded_claims": evidence, "cannot tell": 30, "collection_claims": 0, "collections": 2}
    return {"model": model, "passage_words": words, "columns": ["loss"], "params": {}, "scenarios": [{}] * 15,
            "table": [row]}


def test_the_summary_keeps_each_passage_length_and_drops_a_repeat_of_one():
    """validity.json's rows: one per method, parameters, model and passage length (the
    128-word battery is another test of the same documents); the same score of the same
    model at the same length in a later file is the same count, and is dropped."""
    table = bench.validity_summary([_battery("smollm2", 64, 0), _battery("smollm2", 128, 3),
                                    _battery("smollm2", 64, 5)], "src.md")
    rows = table["methods"]["loss"]
    assert [(r["passage_words"], r["false_claims"]) for r in rows] == [(64, 0), (128, 3)]
    assert table["audit"] == {"test": "t", "alpha": 0.01, "guard_test": "t"}


def test_the_summary_counts_one_model_read_through_two_engines_once(capsys):
    """llama.cpp and transformers running one GGUF are one model: a second battery of the
    same weights is not another model's audits, so its counts are not added (the first
    file's row is kept, and the one left out is named)."""
    table = bench.validity_summary([_battery("smollm2-135m-instruct", 64, 0),
                                    _battery("llamacpp:smollm2-135m-instruct", 64, 4),
                                    _battery("llamacpp:gemma-3-270m", 64, 1),
                                    _battery("gguf:/m/f.gguf", 64, 2), _battery("llamacpp:/m/f.gguf", 64, 3),
                                    _battery("gguf:/m/../m/f.gguf", 64, 6),
                                    _battery("llamacpp:smollm2-135m-instruct", 128, 5)], "src.md")
    rows = table["methods"]["loss"]
    assert [(r["model"], r["passage_words"], r["false_claims"]) for r in rows] == [
        ("smollm2-135m-instruct", 64, 0), ("llamacpp:gemma-3-270m", 64, 1), ("gguf:/m/f.gguf", 64, 2),
        ("llamacpp:smollm2-135m-instruct", 128, 5)]
    err = capsys.readouterr().err
    assert "loss of llamacpp:smollm2-135m-instruct left out: the same weights as smollm2-135m-instruct" in err
    assert "loss of llamacpp:/m/f.gguf left out: the same weights as gguf:/m/f.gguf" in err
    assert "loss of gguf:/m/../m/f.gguf left out: the same weights as gguf:/m/f.gguf" in err
    assert err.count("left out") == 3
