"""The committed DE-COP paraphrases of the one-voice letters: the file reads in the
BookTection layout, each row's verbatim option is the planted passage, the paraphrases keep
the documented bounds, and DE-COP scores the rows with no paraphrasing model."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

import copyprobe
from copyprobe.backends.base import GenerateRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.methods.decop import DECOP, LETTERS
from copyprobe.drive import drive

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/one_voice"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


@pytest.fixture(scope="module")
def dataset():
    return copyprobe.load_dataset(DATA / "decop_paraphrases.csv")


@pytest.fixture(scope="module")
def passages():
    rows = [json.loads(line) for line in (DATA / "planted_passages.jsonl").read_text().splitlines() if line]
    return {r["id"]: r for r in rows}


def test_rows_are_planted_passages_with_both_labels(dataset, passages):
    assert len(dataset.examples) >= 6
    for ex in dataset.examples:
        row = passages[ex.id]
        assert ex.text == row["text"] and ex.label == row["label"] and ex.doc_id == row["doc_id"]
    assert {ex.label for ex in dataset.examples} == {0, 1}


def test_paraphrases_are_distinct_not_copies_and_keep_length(dataset):
    for ex in dataset.examples:
        options = [ex.meta[f"Example_{letter}"] for letter in LETTERS]
        assert ex.meta[f"Example_{ex.meta['Answer']}"] == ex.text
        paras = [o for o in options if o != ex.text]
        assert len(paras) == 3 and all(p.strip() for p in paras)
        for i, p in enumerate(paras):
            sim = difflib.SequenceMatcher(None, words(ex.text), words(p), autojunk=False).ratio()
            assert sim < 0.9, (ex.id, sim)
            assert 0.6 <= len(words(p)) / len(words(ex.text)) <= 1.6
            content = {w for w in words(ex.text) if len(w) >= 4}
            assert len(content & set(words(p))) / len(content) >= 0.3
            for q in paras[i + 1:]:
                assert difflib.SequenceMatcher(None, words(p), words(q), autojunk=False).ratio() < 0.9


def test_decop_runs_from_the_file_without_a_paraphraser(dataset):
    rows = dataset.examples[:3]
    originals = {ex.text for ex in rows}
    asked: list[GenerateRequest] = []

    def pick_verbatim(request: GenerateRequest) -> str:
        asked.append(request)
        user = request.messages[-1][1]
        found = dict(re.findall(r"(?m)^([A-D])\. (.*)$", user))
        return next(letter for letter, option in found.items() if option in originals)

    backend = FakeBackend(generate_fn=pick_verbatim)
    method = DECOP()
    method.validate()
    results = drive({ex.id: method.run(ex) for ex in rows}, lambda spec: backend)
    for ex in rows:
        assert results[ex.id].value == 1.0
        assert results[ex.id].details["paraphrases_from"] == "data"
    # only the 24 multiple-choice questions per row: no paraphrase request reached a model
    assert len(asked) == 24 * len(rows)
    assert not any("Rewrite" in r.messages[-1][1] or "Example A:" in r.messages[-1][1] for r in asked)
