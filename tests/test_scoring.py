"""scoring.train_split: how a learning method picks its training rows, by passage or by
whole document, and detect's train_split setting end to end."""

from __future__ import annotations

import json
import random

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.registry import make_method
from copyprobe.scoring import train_split


def letters(n_docs: int, sizes: list[int], seed: int) -> list[Example]:
    """Documents of varying passage counts, half of them members, passages shuffled."""
    rng = random.Random(seed)
    rows = []
    for d in range(n_docs):
        for p in range(sizes[d % len(sizes)]):
            rows.append(Example(id=f"d{d}p{p}", text=f"letter {d} passage {p}", label=d % 2, doc_id=f"d{d}"))
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_split_by_document_takes_whole_documents_of_both_classes(seed):
    examples = letters(24, [1, 2, 3, 4], seed)
    method = make_method("veilprobe", n_train=20)
    chosen = train_split(method, examples, seed, by="document")
    docs_in = {examples[i].doc_id for i in chosen}
    for doc in docs_in:  # every passage of a chosen document, none of the others
        assert {i for i, e in enumerate(examples) if e.doc_id == doc} <= set(chosen)
    assert {examples[i].doc_id for i in range(len(examples)) if i not in chosen}.isdisjoint(docs_in)
    for label in (0, 1):
        rows = [i for i in chosen if examples[i].label == label]
        assert len(rows) >= 2
        # the class's share of n_train (stratified), passed by less than one document (<= 4 passages)
        share = round(20 * sum(e.label == label for e in examples) / len(examples))
        assert share <= len(rows) < share + 4
        left = {e.doc_id for e in examples if e.label == label} - docs_in
        assert left  # something of each class is left to evaluate
    assert chosen == train_split(method, examples, seed, by="document")  # seeded


def test_split_by_passage_may_cut_documents_which_by_document_never_does():
    examples = letters(24, [3], 0)
    method = make_method("veilprobe", n_train=24)
    cut = set()
    for seed in range(5):
        chosen = set(train_split(method, examples, seed, by="passage"))
        cut |= {e.doc_id for i, e in enumerate(examples) if i in chosen} & \
               {e.doc_id for i, e in enumerate(examples) if i not in chosen}
    assert cut  # the old behaviour: passages of one document on both sides
    assert train_split(method, examples, 0) == train_split(method, examples, 0, by="passage")


def test_split_by_document_refusals():
    method = make_method("veilprobe", n_train=4)
    mixed = letters(8, [2], 0) + [Example(id="odd", text="x", label=1, doc_id="d0")]  # d0 is a non-member doc
    with pytest.raises(DataError, match="document 'd0' has members and non-members"):
        train_split(method, mixed, 0, by="document")
    one_member_doc = [Example(id=f"m{i}", text="m", label=1, doc_id="book") for i in range(6)] + \
                     [Example(id=f"n{i}", text="n", label=0, doc_id=f"n{i}") for i in range(6)]
    with pytest.raises(DataError, match="at least 2 documents of each class.*1 member and 6 non-member"):
        train_split(method, one_member_doc, 0, by="document")
    with pytest.raises(ConfigError, match="train split must be one of passage, document"):
        train_split(method, letters(8, [2], 0), 0, by="chapter")


def test_detect_train_split_document_end_to_end(tmp_path, capsys):
    rows = [{"id": e.id, "text": f"{e.text} " + " ".join(f"w{e.doc_id}x{j}" for j in range(12)),
             "label": e.label, "doc_id": e.doc_id} for e in letters(12, [3], 1)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    from copyprobe import detect

    fake = FakeBackend(spec="fake-split", member_texts=[r["text"] for r in rows if r["label"] == 1])
    result = detect(fake, str(data), ["feature_agg"], params={"feature_agg": {"n_train": 12}}, out=out,
                    cache=False, train_split="document", n_bootstrap=0)
    trained = set(json.loads((out / "run.json").read_text())["train_ids"]["feature_agg"])
    by_doc = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], set()).add(r["id"])
    assert trained and all(ids <= trained or not (ids & trained) for ids in by_doc.values())
    assert any("train split by document" in note for note in result.notes)
    code = main(["detect", "--model", "fake", "--data", str(data), "--methods", "loss", "--train-split", "chapter",
                 "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--train-split" in err


@pytest.mark.parametrize("split, passages, message", [
    ("passage", 3, "at least 14 labelled passages"),  # 6 passages in all
    ("document", 10, "at least 2 documents of each class"),  # 20, but one document a class
])
def test_detect_refuses_data_a_learning_method_cannot_split_before_the_model_runs(tmp_path, capsys, split,
                                                                                   passages, message):
    rows = [{"id": e.id, "text": e.text, "label": e.label, "doc_id": e.doc_id} for e in letters(2, [passages], 0)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fake = FakeBackend(spec="fake-split")
    from copyprobe.cli import main as cli_main

    code = None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
        code = cli_main.main(["detect", "--model", "fake", "--data", str(data), "--methods", "loss,feature_agg",
                              "--param", "feature_agg.n_train=12", "--train-split", split, "--no-cache",
                              "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err
    assert sum(fake.calls.values()) == 0


def test_methods_that_ask_once_run_without_a_generator_and_score_as_before():
    import inspect

    from copyprobe.drive import OneStep, drive
    from copyprobe.scoring import runner

    examples = [Example(id=str(i), text=t) for i, t in enumerate(["the cat sat on the mat", "a b c d e f g"])]
    for name in ("loss", "min_k_pp", "slope"):
        method = make_method(name)
        run = runner(method)(examples[0])
        assert isinstance(run, OneStep) and run.method is method
        by_step = drive({i: runner(method)(e) for i, e in enumerate(examples)}, lambda spec: FakeBackend())
        by_generator = drive({i: method.run(e) for i, e in enumerate(examples)}, lambda spec: FakeBackend())
        assert by_step == by_generator and all(isinstance(v, float) for v in by_step.values())
    multi = make_method("neighborhood")  # asks for neighbours, then scores them
    assert inspect.isgenerator(runner(multi)(examples[0]))


def test_put_score_keeps_finite_numbers_and_the_reason_for_anything_else():
    import math

    import numpy as np

    from copyprobe.drive import Failure
    from copyprobe.methods.base import Score
    from copyprobe.scoring import put_score

    row: dict = {"id": "p"}
    put_score(row, "plain", -1.25)
    put_score(row, "numpy", np.float64(0.5))
    put_score(row, "whole", 3)
    put_score(row, "detailed", Score(2.0, {"k": 1}))
    put_score(row, "failed", Failure("no answer"))
    put_score(row, "nan", math.nan)
    put_score(row, "inf", np.float64(-math.inf))
    put_score(row, "word", "high")
    assert row["plain"] == -1.25 and type(row["numpy"]) is float and row["numpy"] == 0.5
    assert row["whole"] == 3.0 and type(row["whole"]) is float
    assert row["detailed"] == 2.0 and row["details"] == {"detailed": {"k": 1}}
    assert all(row[name] is None for name in ("failed", "nan", "inf", "word"))
    assert row["errors"] == {"failed": "no answer", "nan": "score is nan", "inf": "score is -inf",
                             "word": "method returned a non-number: 'high'"}


def test_few_bootstrap_resamples_are_said_on_the_console(tmp_path, capsys, monkeypatch):
    rng = random.Random(3)
    rows = [{"id": f"p{i}", "text": " ".join(rng.choice("abcdefgh") * 3 for _ in range(12)), "label": i % 2}
            for i in range(20)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in rows if r["label"] == 1])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)

    def said(n, out):
        assert main(["detect", "--model", "fake", "--data", str(data), "--methods", "loss", "--bootstrap", str(n),
                     "--out", str(tmp_path / out), "--no-cache", "--no-progress"]) == 0
        return [line for line in capsys.readouterr().out.splitlines() if "bootstrap resample" in line]

    assert said(7, "a") == ["note: the 95% intervals rest on 7 bootstrap resample(s): their ends move with the seed "
                            "(the default is 1,000)"]
    assert said(1000, "b") == [] and said(0, "c") == []
    assert main(["rescore", str(tmp_path / "b"), "--bootstrap", "12"]) == 0  # said again for the new count
    assert "rest on 12 bootstrap resample(s)" in capsys.readouterr().out
