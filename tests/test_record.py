"""The run record: typed and versioned, one writer, read back by load_run; rescore
recomputes every derived file from it byte for byte without loading a model."""

from __future__ import annotations

import hashlib

import json

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.errors import DataError
from copyprobe.record import FORMAT_VERSION, RunRecord, load_run, write_run
from copyprobe.rescore import rescore


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load a model fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", refuse)
    monkeypatch.setattr("copyprobe.backends.hf.HFBackend.__init__", refuse)


def labelled_rows(n=24):
    rows = []
    for i in range(n):
        words = [f"w{(i * 7 + j) % 40}" for j in range(30)]
        rows.append({"id": f"p{i}", "text": " ".join(words), "label": i % 2, "doc_id": f"d{i % 8}"})
    return rows


def write_data(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def detect_run(tmp_path, methods=("loss", "zlib", "min_k", "feature_agg"), **kwargs):
    rows = labelled_rows()
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in rows if r["label"] == 1])
    data = write_data(tmp_path / "data.jsonl", rows)
    params = {"feature_agg": {"n_train": 8}} if "feature_agg" in methods else None
    return copyprobe.detect(fake, str(data), list(methods), params=params, out=tmp_path / "run",
                            cache=False, n_bootstrap=200, seed=3, command=["copyprobe", "detect"], **kwargs)


def test_record_is_typed_versioned_and_round_trips(tmp_path):
    result = detect_run(tmp_path)
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["format_version"] == FORMAT_VERSION and saved["kind"] == "detect"
    record = RunRecord.from_json(saved)
    assert record.to_json() == saved
    assert record.train_ids["feature_agg"] == result.record.train_ids["feature_agg"]
    loaded = load_run(tmp_path / "run")
    assert loaded.record.methods == json.loads(json.dumps(result.record.methods))
    assert loaded.record.methods["min_k"] == {"k": 0.2} and loaded.record.methods["feature_agg"]["n_train"] == 8
    assert [r["id"] for r in loaded.scores] == [f"p{i}" for i in range(24)]
    assert loaded.metrics == json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert list(loaded.scores_frame()["min_k"]) == list(result.scores["min_k"])


def test_records_before_versioning_still_read_and_newer_ones_are_refused(tmp_path):
    detect_run(tmp_path)
    path = tmp_path / "run" / "run.json"
    legacy = json.loads(path.read_text())
    del legacy["format_version"], legacy["kind"]
    legacy["written_by_hand"] = True
    path.write_text(json.dumps(legacy))
    record = load_run(tmp_path / "run").record
    assert record.format_version == 0 and record.kind == "detect" and record.extra == {"written_by_hand": True}
    path.write_text(json.dumps({**legacy, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(DataError, match="newer copyprobe"):
        load_run(tmp_path / "run")
    path.write_text(json.dumps({**legacy, "methods": ["loss"]}))
    with pytest.raises(DataError, match="'methods' must be an object, got a list"):
        load_run(tmp_path / "run")


def test_write_run_removes_stale_files_and_writes_run_json_last(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    write_run(out, RunRecord(kind="detect", command=[]), {"scores.jsonl": [{"id": "a"}], "metrics.json": None})
    assert not (out / "metrics.json").exists()
    assert load_run(out).scores == [{"id": "a"}]


def test_a_run_whose_empty_directory_another_failed_run_removed_still_writes(tmp_path):
    """Two runs into one empty directory: the one that made it fails and removes it while it
    is empty; the other's results must still land."""
    from copyprobe.record import discards_new_out_dir, prepare_out_dir

    out = tmp_path / "shared"

    @discards_new_out_dir
    def failing():
        prepare_out_dir(out, "detect")
        prepare_out_dir(out, "detect")  # the other run accepts the empty directory meanwhile
        raise DataError("bad data")

    with pytest.raises(DataError):
        failing()
    assert not out.exists()
    write_run(out, RunRecord(kind="detect", command=[]), {"scores.jsonl": [{"id": "a"}]})
    assert load_run(out).scores == [{"id": "a"}]


def test_a_failed_run_removes_only_the_directories_it_made_and_left_empty(tmp_path):
    from copyprobe.record import discards_new_out_dir, prepare_out_dir

    @discards_new_out_dir
    def inner(out):  # a run inside a run (detect calls the engine), which succeeds
        return prepare_out_dir(out, "detect")

    @discards_new_out_dir
    def outer(outs, written):
        for out in outs:
            inner(out)
        (written / "scores.jsonl").write_text("computed")
        raise ValueError("refused")

    (tmp_path / "old").mkdir()
    (tmp_path / "made").mkdir()
    outs = [tmp_path / "a" / "b", tmp_path / "old" / "c", tmp_path / "made", tmp_path / "w"]
    with pytest.raises(ValueError, match="^refused$"):
        outer(outs, tmp_path / "w")
    # a/b and its parent a, and old/c, made by the call and empty, are gone; what existed or was written stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made", "old", "w"]
    assert list((tmp_path / "old").iterdir()) == [] and (tmp_path / "w" / "scores.jsonl").read_text() == "computed"
    assert inner(tmp_path / "ok") == tmp_path / "ok" and (tmp_path / "ok").is_dir()  # a run that ends keeps it


def test_a_run_of_another_model_does_not_replace_a_run(tmp_path):
    from copyprobe.errors import ConfigError

    detect_run(tmp_path, methods=("loss",))
    before = (tmp_path / "run" / "scores.jsonl").read_bytes()
    other = FakeBackend(spec="another-fake")
    with pytest.raises(ConfigError, match=r"holds a detect run of model fake; a run of another-fake would overwrite it"):
        copyprobe.detect(other, str(tmp_path / "data.jsonl"), ["loss"], out=tmp_path / "run", cache=False)
    assert (tmp_path / "run" / "scores.jsonl").read_bytes() == before
    # the same model again (a resume, or more methods) reuses the directory
    detect_run(tmp_path, methods=("loss", "zlib"))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["methods"].keys() == {"loss", "zlib"}


def test_one_model_written_two_ways_is_the_same_model(tmp_path, monkeypatch):
    from copyprobe.errors import ConfigError

    for name in ("a/m", "b/m"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    rows = labelled_rows()
    data = str(write_data(tmp_path / "data.jsonl", rows))

    def run(spec, out="run"):
        return copyprobe.detect(FakeBackend(spec=spec), data, ["loss"], out=tmp_path / out, cache=False)

    monkeypatch.chdir(tmp_path / "a")
    run("hf:./m")
    saved = json.loads((tmp_path / "run" / "run.json").read_text())["model"]
    assert saved["weights_location"] == ["hf", str(tmp_path / "a" / "m")]
    monkeypatch.chdir(tmp_path)
    run("hf:a/m")  # the same directory, from another working directory: reused
    run(f"hf:{tmp_path}/a/m")
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(ConfigError, match=r"holds a detect run of model hf:/\S+/a/m; a run of hf:\./m would"):
        run("hf:./m")  # ./m here is another model, though written as the first run wrote it
    with pytest.raises(ConfigError, match="a run of gguf:../w.gguf would overwrite it"):
        run("gguf:../w.gguf")  # another file, and another kind of model
    run("gguf:../w.gguf", out="run-w")
    run(f"gguf:{tmp_path / 'w.gguf'}", out="run-w")
    # a spec that names no local weights (a remote model, a record of an earlier version) is
    # compared as written, and a path that cannot be read is a refusal, not a traceback
    monkeypatch.chdir(tmp_path)
    run("hf:~no-such-user-xyz/m", out="run-home")
    with pytest.raises(ConfigError, match="of model hf:~no-such-user-xyz/m; a run of hf:~no-such-user-xyz/n"):
        run("hf:~no-such-user-xyz/n", out="run-home")


def test_rescore_reproduces_metrics_byte_for_byte_without_a_model(tmp_path, no_model):
    detect_run(tmp_path)
    run_dir = tmp_path / "run"
    original = (run_dir / "metrics.json").read_bytes()
    assert b"blind_baseline" in original
    (run_dir / "metrics.json").unlink()
    rescore(run_dir)
    assert (run_dir / "metrics.json").read_bytes() == original
    # the command line: same bytes again, and the report, still without a model
    assert main(["rescore", str(run_dir), "--report"]) == 0
    assert (run_dir / "metrics.json").read_bytes() == original
    assert (run_dir / "report.html").exists()


def test_rescore_can_change_the_bootstrap(tmp_path, no_model):
    detect_run(tmp_path)
    before = json.loads((tmp_path / "run" / "metrics.json").read_text())
    rescore(tmp_path / "run", n_bootstrap=0)
    after = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert after["passage"]["loss"]["auc"] == before["passage"]["loss"]["auc"]
    assert before["passage"]["loss"]["auc_low"] is not None and after["passage"]["loss"]["auc_low"] is None
    assert load_run(tmp_path / "run").record.bootstrap["n"] == 0  # run.json records the N it used
    assert main(["rescore", str(tmp_path / "run"), "--bootstrap", "37"]) == 0
    assert load_run(tmp_path / "run").record.bootstrap["n"] == 37


def test_rescore_reproduces_audit_verdicts(tmp_path, monkeypatch):
    rows = labelled_rows()
    suspect = write_data(tmp_path / "suspect.jsonl", [r for r in rows if r["label"] == 1])
    clean = write_data(tmp_path / "clean.jsonl", [r for r in rows if r["label"] == 0])
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in rows if r["label"] == 1])
    result = copyprobe.audit(fake, str(suspect), str(clean), "loss", alpha=0.05, out=tmp_path / "audit",
                             cache=False, command=["copyprobe", "audit"])
    assert result.out == tmp_path / "audit" and result.verdicts["method"] == "loss"
    run_dir = tmp_path / "audit"
    recorded = load_run(run_dir).record.audit
    assert {k: recorded[k] for k in ("method", "alpha", "test", "suspect", "clean")} == {
        "method": "loss", "alpha": 0.05, "test": "t", "suspect": str(suspect), "clean": str(clean)}
    for side, path in (("suspect", suspect), ("clean", clean)):
        (entry,) = recorded["input_files"][side]
        assert entry["bytes"] == path.stat().st_size
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    files = {name: (run_dir / name).read_bytes() for name in ("metrics.json", "verdicts.json")}
    for name in files:
        (run_dir / name).unlink()
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda *a, **k: pytest.fail("model loaded"))
    rescore(run_dir)
    assert {name: (run_dir / name).read_bytes() for name in files} == files


def test_rescore_reproduces_copying_metrics(tmp_path, no_model):
    from copyprobe.copying import CopyConfig
    from copyprobe.copying.nonliteral import BackendJudge
    from copyprobe.copying.runner import copying

    fake = FakeBackend(generate_fn=lambda request: "In the beginning God created the heaven and the earth.")
    cfg = CopyConfig(tasks=("literal", "qa"), judge=BackendJudge(None), literal_max_tokens=30)
    copying(fake, "kjv", cfg, out=tmp_path / "copy", cache=False, command=["copyprobe", "copying"])
    original = (tmp_path / "copy" / "metrics.json").read_bytes()
    (tmp_path / "copy" / "metrics.json").unlink()
    rescore(tmp_path / "copy")
    assert (tmp_path / "copy" / "metrics.json").read_bytes() == original


def test_rescore_refuses_what_is_not_a_run(tmp_path, capsys):
    assert main(["rescore", str(tmp_path / "nothing")]) == 2
    assert "nothing does not exist" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["rescore", str(tmp_path / "file")]) == 2
    assert "file is not a directory" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("[1, 2]")
    assert main(["rescore", str(tmp_path / "bad")]) == 2
    assert "not a JSON object" in capsys.readouterr().err


def test_session_closes_what_it_loaded_and_leaves_the_callers_backend(tmp_path):
    loaded = []

    class Closing(FakeBackend):
        closed = False

        def close(self):
            self.closed = True

    def loader(spec):
        loaded.append(Closing(spec=spec))
        return loaded[-1]

    mine = Closing(spec="mine")
    with copyprobe.Session(mine, cache=tmp_path / "c.sqlite", loader=loader) as session:
        session.backend_for("reference-model")
        cache = session.cache
    assert loaded[0].closed and not mine.closed
    with pytest.raises(Exception):
        cache.count()  # the SQLite connection is closed
    with copyprobe.Session("by-spec", cache=False, loader=loader) as session:
        pass
    assert loaded[-1].spec == "by-spec" and loaded[-1].closed


def test_recorded_versions_are_the_installed_ones_and_each_caller_gets_its_own_copy():
    from importlib import metadata

    from copyprobe.files import versions

    first = versions()
    assert first["numpy"] == metadata.version("numpy") and first["copyprobe"] == metadata.version("copyprobe")
    first["numpy"] = "edited by a caller"
    assert versions()["numpy"] == metadata.version("numpy")


def test_an_audit_reads_datasets_as_it_reads_their_files(tmp_path):
    """Datasets from load_dataset, as audit's docstring allows, give the same verdicts as
    their paths (a Dataset was taken for a list of texts and failed), and books read as a
    Dataset record the length they were cut at."""
    rows = labelled_rows()
    suspect = write_data(tmp_path / "suspect.jsonl", [r for r in rows if r["label"] == 1])
    clean = write_data(tmp_path / "clean.jsonl", [r for r in rows if r["label"] == 0])
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in rows if r["label"] == 1])
    by_path = copyprobe.audit(fake, str(suspect), str(clean), "loss", alpha=0.05, cache=False, n_bootstrap=0)
    by_dataset = copyprobe.audit(fake, copyprobe.load_dataset(str(suspect)), copyprobe.load_dataset(str(clean)),
                                 "loss", alpha=0.05, cache=False, n_bootstrap=0)
    assert [(d["doc_id"], d["verdict"], d["p"]) for d in by_dataset.verdicts["documents"]] == \
        [(d["doc_id"], d["verdict"], d["p"]) for d in by_path.verdicts["documents"]]
    for side in ("s", "c"):
        (tmp_path / side).mkdir()
        for k in range(6):
            (tmp_path / side / f"{side}{k}.txt").write_text(" ".join(f"{side}{k}w{i}" for i in range(90)))
    cut = [copyprobe.load_dataset(str(tmp_path / side), passage_words=40) for side in ("s", "c")]
    copyprobe.audit(fake, *cut, "loss", alpha=0.05, cache=False, n_bootstrap=0, out=tmp_path / "run")
    assert load_run(tmp_path / "run").record.audit["passage_words"] == 40


def test_a_run_stopped_while_its_files_were_written_is_refused_not_read(tmp_path):
    """A rerun into a finished run's directory writes its result files before run.json: stopped
    between (Ctrl-C, a full disk), the directory held the old run.json beside new scores, and
    rescore and report took them for one run (and rescore then removed the marker)."""
    from copyprobe.record import UNFINISHED
    from copyprobe.reports.sample import write_sample_run

    run_dir = write_sample_run(tmp_path / "run", failures=False)
    load_run(run_dir)  # a finished run reads
    (run_dir / UNFINISHED).write_text("detect")
    with pytest.raises(DataError, match="holds a run stopped while its files were written"):
        load_run(run_dir)
    assert main(["rescore", str(run_dir)]) == 2 and main(["report", str(run_dir)]) == 2
    assert (run_dir / UNFINISHED).exists()  # left for the rerun of the command, which resumes


def test_a_stopped_rescore_is_finished_by_the_next_rescore(tmp_path, monkeypatch):
    """A rescore rewrites only the derived files: stopped before its run.json, the next
    rescore finishes it (the model is not needed), and a report waits for it."""
    from copyprobe import files as files_module
    from copyprobe.record import UNFINISHED
    from copyprobe.reports.sample import write_sample_run

    run_dir = write_sample_run(tmp_path / "run", failures=False)
    real = files_module.write_json

    def stop_at_run_json(path, obj, mode=None):
        if str(path).endswith("run.json"):
            raise KeyboardInterrupt
        return real(path, obj, mode)

    monkeypatch.setattr("copyprobe.record.write_json", stop_at_run_json)
    with pytest.raises(KeyboardInterrupt):
        rescore(run_dir)
    monkeypatch.undo()
    assert (run_dir / UNFINISHED).read_text() == "rescore"
    with pytest.raises(DataError, match=f"a rescore of {run_dir} stopped while its files were written: run "
                                        f"copyprobe rescore {run_dir} again"):
        load_run(run_dir)
    assert main(["report", str(run_dir)]) == 2
    rescore(run_dir)
    assert not (run_dir / UNFINISHED).exists() and load_run(run_dir).record.kind == "detect"
