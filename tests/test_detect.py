"""The detect pipeline end to end on the model-free FakeBackend."""

import json

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.data.readers import load_dataset
from copyprobe.errors import ConfigError
from copyprobe.evaluation.metrics import roc_auc

CORE = ["loss", "zlib", "lowercase", "min_k", "min_k_pp", "slope"]


@pytest.fixture
def demo():
    from copyprobe.cli.commands.demo import demo_data_path

    return load_dataset(demo_data_path())


def fake_for(dataset):
    return FakeBackend(member_texts=[e.text for e in dataset.examples if e.label == 1])


def test_run_directory_follows_the_contract(tmp_path, demo):
    result = copyprobe.detect(fake_for(demo), demo, CORE, out=tmp_path / "run", cache=tmp_path / "c.sqlite")
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 48
    assert {"id", "doc_id", "label", *CORE} <= set(rows[0])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for level in ("passage", "document"):
        for name in CORE:
            assert set(metrics[level][name]) >= {"auc", "auc_low", "auc_high", "tpr_at_1pct_fpr", "tpr_at_5pct_fpr", "n"}
    # metrics agree with an independent AUC over the written scores
    labels = [r["label"] for r in rows]
    assert metrics["passage"]["loss"]["auc"] == pytest.approx(roc_auc(labels, [r["loss"] for r in rows]))
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["methods"]["min_k"] == {"k": 0.2}
    assert run["data"]["sha256"] and run["n_tokens"] > 0
    assert set(run["timings"]) >= {"load_s", "score_s"} and set(run["cache"]) >= {"hits", "misses"}
    assert result.scores.shape[0] == 48


def test_one_forward_pass_serves_all_own_text_methods(tmp_path, demo):
    fake = fake_for(demo)
    result = copyprobe.detect(fake, demo, ["loss", "zlib", "min_k", "min_k_pp", "slope"], cache=False)
    assert fake.calls["token_logprobs"] == 48
    assert result.run["requests"]["total"] == 5 * 48


def test_warm_cache_rerun_makes_no_model_calls(tmp_path, demo):
    cache = tmp_path / "c.sqlite"
    copyprobe.detect(fake_for(demo), demo, CORE, cache=cache)
    fake = fake_for(demo)
    result = copyprobe.detect(fake, demo, CORE, cache=cache)
    assert result.run["cache"]["misses"] == 0 and not fake.calls


def test_identical_runs_write_identical_scores_and_metrics(tmp_path, demo):
    for name in ("a", "b"):
        copyprobe.detect(fake_for(demo), demo, CORE, out=tmp_path / name, cache=False)
    for file in ("scores.jsonl", "metrics.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()


def test_single_class_writes_scores_and_skips_metrics(tmp_path):
    examples = [Example(id=str(i), text=f"member text number {i} here", label=1) for i in range(4)]
    result = copyprobe.detect(FakeBackend(), examples, ["loss"], out=tmp_path / "run", cache=False)
    assert result.metrics is None
    assert any("both classes" in n for n in result.notes)
    assert (tmp_path / "run" / "scores.jsonl").exists() and not (tmp_path / "run" / "metrics.json").exists()


def test_row_failures_are_null_with_a_reason(tmp_path):
    examples = [Example(id="short", text="one", label=0), Example(id="ok", text="two words here", label=1)]
    result = copyprobe.detect(FakeBackend(), examples, ["loss"], out=tmp_path / "run", cache=False)
    rows = [json.loads(l) for l in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert rows[0]["loss"] is None and "fewer than two tokens" in rows[0]["errors"]["loss"]
    assert rows[1]["loss"] is not None and "errors" not in rows[1]
    assert result.run["failures"] == [{"id": "short", "errors": rows[0]["errors"]}]


def test_auto_reference_model_is_resolved_and_recorded(tmp_path):
    from copyprobe.session import Session

    target = FakeBackend(spec="smollm2-135m-instruct")
    session = Session(target, cache=False, loader=lambda spec: FakeBackend(spec=spec))
    result = copyprobe.detect(session, ["a b c d", "e f g h"], ["reference"])
    assert result.run["methods"]["reference"] == {"model": "gemma-3-270m"}
    assert "gemma-3-270m" in result.run["models"]


def test_unknown_method_and_parameter_fail_before_work():
    fake = FakeBackend()
    with pytest.raises(ConfigError, match="did you mean 'min_k'"):
        copyprobe.detect(fake, ["a b"], ["min_kk"], cache=False)
    with pytest.raises(ConfigError, match="no parameter"):
        copyprobe.detect(fake, ["a b"], ["min_k"], params={"min_k": {"kk": 0.1}}, cache=False)
    assert not fake.calls


def test_unwritable_output_directory_fails_before_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    fake = FakeBackend()
    with pytest.raises(ConfigError, match="cannot write"):
        copyprobe.detect(fake, ["a b"], ["loss"], out=blocker / "run", cache=False)
    assert not fake.calls


def test_blind_baseline_folds_group_by_source_when_the_data_has_one(tmp_path, demo):
    from copyprobe.evaluation.blind import blind_baseline
    from copyprobe.rescore import rescore

    # plant-style data: each source document split into a member and a non-member
    # pseudo-document; the folds must hold whole sources, not whole pseudo-documents
    examples = [Example(id=e.id, text=e.text, label=i % 2, doc_id=f"{e.doc_id}#{i % 2}", meta={"source": e.doc_id})
                for i, e in enumerate(demo.examples)]
    copyprobe.detect(fake_for(demo), examples, ["loss"], out=tmp_path / "run", cache=tmp_path / "c.sqlite",
                     n_bootstrap=50)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    by_source = blind_baseline([e.text for e in examples], [e.label for e in examples],
                               groups=[e.meta["source"] for e in examples], seed=0, n_bootstrap=50)
    by_doc = blind_baseline([e.text for e in examples], [e.label for e in examples],
                            groups=[e.doc_id for e in examples], seed=0, n_bootstrap=50)
    assert by_source["auc"] != by_doc["auc"]
    assert metrics["blind_baseline"]["auc"] == pytest.approx(by_source["auc"])
    written = [json.loads(line) for line in (tmp_path / "run" / "examples.jsonl").read_text().splitlines()]
    assert [r["source"] for r in written] == [e.meta["source"] for e in examples]
    # rescore reads the sources back from the record
    assert rescore(tmp_path / "run").metrics["blind_baseline"]["auc"] == pytest.approx(by_source["auc"])


def test_limit_scores_a_seeded_sample_of_n_passages_and_says_so(tmp_path, demo, capsys):
    """The demo lists its 24 members first: the first 10 passages had one label and no AUC."""
    from copyprobe.data.sampling import sample_items

    assert {e.label for e in demo.examples[:10]} == {1}
    result = copyprobe.detect(fake_for(demo), demo, ["loss"], out=tmp_path / "run", cache=False, limit=10, seed=3)
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [e.id for e in sample_items(demo.examples, 10, 3)] != [
        e.id for e in demo.examples[:10]]
    assert result.scores.shape[0] == 10 and {e.label for e in sample_items(demo.examples, 10, 3)} == {0, 1}
    assert result.metrics["passage"]["loss"]["auc"] is not None
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["data"]["limit"] == 10 and run["data"]["n_before_limit"] == 48 and run["data"]["limit_sample_seed"] == 3
    again = copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False, limit=10, seed=3)
    assert list(again.scores["id"]) == [r["id"] for r in rows]  # the same seed, the same passages
    assert copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False, limit=500).scores.shape[0] == 48
    with pytest.raises(ConfigError, match="limit"):
        copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False, limit=0)
    from copyprobe.cli.main import main

    assert main(["detect", "--model", "x", "--data", "d.jsonl", "--out", str(tmp_path / "o"), "--limit", "0"]) == 2
    err = capsys.readouterr().err
    assert "--limit" in err and "Traceback" not in err


def test_progress_takes_true_false_or_a_factory_and_refuses_anything_else(tmp_path, demo, capsys):
    """progress=False and True are what a user writes first: False draws nothing and gives
    the same scores as None; True draws copyprobe's own bars on stderr; a string is refused
    in one line before the model loads (before: a TypeError from inside the run, after the
    model had loaded)."""
    plain = copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False)
    quiet = copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False, progress=False)
    assert quiet.scores["loss"].tolist() == plain.scores["loss"].tolist()
    assert capsys.readouterr().err == ""
    drawn = copyprobe.detect(fake_for(demo), demo, ["loss"], cache=False, progress=True)
    assert drawn.scores["loss"].tolist() == plain.scores["loss"].tolist()
    err = capsys.readouterr().err
    assert "48/48" in err  # the bar of the 48 passages' log-probs, finished
    with pytest.raises(ConfigError, match=r"^progress must be True, False, None or a function .* got 'yes'$"):
        copyprobe.detect("gguf:" + str(tmp_path / "missing.gguf"), demo, ["loss"], progress="yes")


def test_a_data_file_and_an_out_dir_named_with_bytes_that_are_not_utf8_keep_the_run(tmp_path, demo):
    """Such names (Latin-1 files on a Linux disk) reach run.json as lone surrogates, which
    UTF-8 cannot hold: the run was scored, then lost when its record could not be written."""
    import os
    import shutil

    from copyprobe.cli.commands.demo import demo_data_path
    from copyprobe.rescore import rescore

    data = os.fsdecode(bytes(tmp_path) + b"/d\xe9mo.jsonl")
    out = os.fsdecode(bytes(tmp_path) + b"/r\xe9sultat")
    try:
        shutil.copy(demo_data_path(), data)
    except (OSError, UnicodeEncodeError):  # a file system that takes only UTF-8 names (macOS)
        pytest.skip("this file system refuses names that are not UTF-8")
    copyprobe.detect(fake_for(demo), data, ["loss"], out=out, cache=False)
    run = json.loads((tmp_path / os.fsdecode(b"r\xe9sultat") / "run.json").read_text())
    assert run["data"]["path"] == data  # the escape reads back as the same name
    rescore(out)
