"""Run records and the slope variants: a run.json written before `variant` existed reads
as the legacy variant that produced it, still rescores, and says so in the report; a
new record holds its variant."""

from __future__ import annotations

import json

import numpy as np

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.data.example import Example
from copyprobe.record import load_run
from copyprobe.registry import make_method
from copyprobe.rescore import rescore

ROWS = [{"id": f"p{i}", "text": " ".join(f"w{(i * 7 + j) % 40}" for j in range(20)), "label": i % 2}
        for i in range(16)]


def old_run(tmp_path):
    """A detect run as copyprobe wrote it before issue 29: slope computed the legacy way,
    its parameters without a `variant` key."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in ROWS if r["label"]])
    copyprobe.detect(fake, str(data), ["loss", "slope"], params={"slope": {"ngram": 2, "normalize": "mean",
                                                                           "variant": "legacy"}},
                     out=tmp_path / "run", cache=False, n_bootstrap=50, seed=1)
    run_json = tmp_path / "run" / "run.json"
    record = json.loads(run_json.read_text())
    del record["methods"]["slope"]["variant"]
    assert record["methods"]["slope"] == {"ngram": 2, "normalize": "mean"}
    run_json.write_text(json.dumps(record))
    return tmp_path / "run", fake


def test_old_record_reads_as_the_legacy_variant_and_rescores(tmp_path):
    run_dir, fake = old_run(tmp_path)
    metrics = (run_dir / "metrics.json").read_bytes()
    loaded = load_run(run_dir)
    params = loaded.record.methods["slope"]
    assert params == {"ngram": 2, "normalize": "mean", "variant": "legacy"}
    assert loaded.record.methods["loss"] == {}

    (run_dir / "metrics.json").unlink()
    rescore(run_dir)
    assert (run_dir / "metrics.json").read_bytes() == metrics

    # the recorded parameters rebuild the method that produced the column
    recorded = {str(row["id"]): row["slope"] for row in loaded.scores}
    method = make_method("slope", **params)
    current = make_method("slope", ngram=2, normalize="mean")
    for row in ROWS:
        example = Example(id=row["id"], text=row["text"])
        responses = fake.answer(method.requests(example))
        assert np.isclose(method.score(example, responses), recorded[row["id"]], rtol=1e-12)
        now = current.score(example, fake.answer(current.requests(example)))
        assert not np.isclose(now, recorded[row["id"]])  # the default is another variant


def test_report_of_an_old_run_names_the_legacy_variant(tmp_path):
    run_dir, _ = old_run(tmp_path)
    assert main(["rescore", str(run_dir), "--report"]) == 0
    assert "legacy" in (run_dir / "report.html").read_text()


def test_new_record_holds_the_variant(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    copyprobe.detect(FakeBackend(spec="fake"), str(data), ["slope"], out=tmp_path / "run", cache=False,
                     n_bootstrap=50)
    written = json.loads((tmp_path / "run" / "run.json").read_text())["methods"]["slope"]
    assert written == {"ngram": 0, "normalize": "none", "variant": "notebook"}
    assert load_run(tmp_path / "run").record.methods["slope"] == written


def test_unknown_method_in_an_old_record_is_kept_as_it_is(tmp_path):
    run_dir, _ = old_run(tmp_path)
    run_json = run_dir / "run.json"
    record = json.loads(run_json.read_text())
    record["methods"]["someone_elses_plugin"] = {"alpha": 1}
    run_json.write_text(json.dumps(record))
    # a method in the record has a column in scores.jsonl (the run-file loader insists)
    scores = run_dir / "scores.jsonl"
    rows = [json.loads(line) for line in scores.read_text().splitlines() if line.strip()]
    scores.write_text("".join(json.dumps({**r, "someone_elses_plugin": None}) + "\n" for r in rows))
    assert load_run(run_dir).record.methods["someone_elses_plugin"] == {"alpha": 1}
