"""Named datasets: bundled WikiMIA, DE-COP CSVs, CopyBench and MIMIR from the user's copy."""

import csv
import json
from pathlib import Path

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures" / "copyprobe_data"
SHARED_WIKIMIA = Path(__file__).resolve().parents[2] / "copyprobe" / "data" / "wikimia"


@pytest.fixture
def data_dir(monkeypatch):
    monkeypatch.setenv("COPYPROBE_DATA_DIR", str(FIXTURES))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return FIXTURES


@pytest.fixture
def empty_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("COPYPROBE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


@pytest.mark.parametrize("length,rows", [("32", 776), ("64", 542), ("128", 250), ("256", 82)])
def test_wikimia_lengths_load_by_name(length, rows):
    ds = copyprobe.load_dataset(f"wikimia:{length}")
    lines = [json.loads(x) for x in (SHARED_WIKIMIA / f"{length}.jsonl").read_text().splitlines() if x.strip()]
    assert len(ds) == rows == len(lines)
    assert [e.text for e in ds.examples] == [x["input"] for x in lines]
    assert [e.label for e in ds.examples] == [x["label"] for x in lines]
    assert ds.path == f"wikimia:{length}" and ds.has_labels


def test_wikimia_split_keyword_and_the_bundled_license():
    assert len(copyprobe.load_dataset("wikimia", split="128")) == 250
    assert "MIT License" in (SHARED_WIKIMIA / "LICENSE").read_text()


@pytest.mark.parametrize("spec,message", [
    ("wikimiaa:64", "nor a dataset name; datasets: wikimia:32|64|128|256, arxivtection, booktection"),
    ("wikimia:65", "wikimia has no split '65'"),
    ("wikimia", "wikimia needs a split"),
    ("mimir", "mimir needs a subset"),
    ("arxivtection:x", "arxivtection has no splits"),
])
def test_bad_names_are_one_line_errors(spec, message):
    with pytest.raises(DataError) as info:
        copyprobe.load_dataset(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_decop_csv_from_the_data_dir(data_dir):
    ds = copyprobe.load_dataset("arxivtection")
    with open(data_dir / "arxivtection.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(ds) == len(rows) == 12
    for ex, row in zip(ds.examples, rows):
        assert ex.text == row[f"Example_{row['Answer']}"]  # the verbatim option, wherever it sits
        assert {k: ex.meta[k] for k in ("Example_A", "Example_B", "Example_C", "Example_D", "Answer")} == \
            {k: row[k] for k in ("Example_A", "Example_B", "Example_C", "Example_D", "Answer")}
        assert ex.doc_id == row["ID"] and ex.label == int(row["Label"])
    assert {row["Answer"] for row in rows} == set("ABCD")


def test_decop_csv_by_path_gets_the_same_passages(data_dir):
    by_name = copyprobe.load_dataset("arxivtection")
    by_path = copyprobe.load_dataset(data_dir / "arxivtection.csv")
    assert [e.text for e in by_path.examples] == [e.text for e in by_name.examples]
    assert [e.meta for e in by_path.examples] == [e.meta for e in by_name.examples]


@pytest.mark.parametrize("name,hub", [("arxivtection", "avduarte333/arXivTection"),
                                      ("booktection", "avduarte333/BookTection")])
def test_missing_decop_data_names_the_file_and_the_hub_id(empty_dir, name, hub):
    with pytest.raises(DataError) as info:
        copyprobe.load_dataset(name)
    message = str(info.value)
    assert f"$COPYPROBE_DATA_DIR/{name}.csv" in message and hub in message and "network" in message


def test_copybench_for_copying(data_dir):
    from copyprobe.copying.data import load_copyset

    copyset = load_copyset("copybench:literal")
    rows = json.loads((data_dir / "copybench" / "data.literal.json").read_text())
    assert [i.id for i in copyset.literal] == [r["id"] for r in rows]
    assert [i.reference for i in copyset.literal] == [r["reference"] for r in rows]
    with pytest.raises(DataError, match="data.qa.json .*copy-bench.*COPYPROBE_DATA_DIR/copybench/data.qa.json"):
        load_copyset("copybench:qa")
    with pytest.raises(DataError, match="for `copyprobe copying`"):
        copyprobe.load_dataset("copybench:literal")


def test_mimir_member_and_nonmember_lists(data_dir):
    ds = copyprobe.load_dataset("mimir:arxiv")
    lines = [json.loads(x) for x in (data_dir / "mimir" / "arxiv" / "ngram_13_0.8.jsonl").read_text().splitlines()]
    members = [e.text for e in ds.examples if e.label == 1]
    nonmembers = [e.text for e in ds.examples if e.label == 0]
    assert members == [x["member"] for x in lines] and nonmembers == [x["nonmember"] for x in lines]
    with pytest.raises(DataError, match=r"mimir/github/ngram_7_0.2.jsonl"):
        copyprobe.load_dataset("mimir:github:ngram_7_0.2")


def test_datasets_command_lists_every_dataset(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rows]
    assert names == ["wikimia:32|64|128|256", "arxivtection", "booktection",
                     "copybench:literal|nonliteral|qa", "mimir:SUBSET[:SPLIT]"]
    for row in rows:
        assert all(row[k] for k in ("size", "license", "source", "member", "caveats"))
    assert main(["datasets"]) == 0
    assert "Das, Zhang & Tramer" in capsys.readouterr().out


@pytest.mark.parametrize("data,message", [
    ("wikimiaa:64", "datasets: wikimia:32|64|128|256"),
    ("booktection", "avduarte333/BookTection"),
])
def test_detect_cli_unknown_or_missing_dataset_exits_2(empty_dir, tmp_path, capsys, data, message):
    code = main(["detect", "--model", "fake", "--data", data, "--methods", "loss",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_decop_on_supplied_paraphrases_sends_no_generation(data_dir, tmp_path):
    ds = copyprobe.load_dataset("arxivtection")
    backend = FakeBackend()
    copyprobe.detect(backend, ds, ["decop"], params={"decop": {"mode": "logit"}},
                     out=tmp_path / "run", cache=False, n_bootstrap=0, blind_baseline=False)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    kinds = record["requests"]["by_model_kind"]
    assert not any(k.startswith("generate") for k in kinds) and backend.calls["generate"] == 0
    # 24 orderings per passage, each a distinct multiple-choice request
    assert kinds == {"choice_logprobs (target)": 24 * len(ds)}
    scores = [json.loads(x) for x in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert all(row["decop"] is not None for row in scores)


def test_copying_cli_missing_copybench_exits_2(empty_dir, tmp_path, capsys):
    code = main(["copying", "--model", "fake", "--data", "copybench:qa", "--out", str(tmp_path / "run"),
                 "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "data.qa.json" in err and len(err.strip().splitlines()) == 1


def test_detect_on_wikimia_warns_about_the_blind_baseline(tmp_path, monkeypatch, capsys):
    # the done-means check of issue 14 with a model-free backend (the real model: docs/benchmarks.md)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **kw: FakeBackend(spec=spec))
    out = tmp_path / "run"
    code = main(["detect", "--model", "smollm2-135m-instruct", "--data", "wikimia:64", "--methods", "loss,min_k",
                 "--out", str(out), "--no-cache", "--no-progress", "--bootstrap", "0", "--report"])
    printed = capsys.readouterr().out
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    blind = metrics["blind_baseline"]
    assert blind["auc"] >= 0.9 and blind["signal"] is True and blind["n"] == 542
    assert "WARNING" in printed and "without the model" in " ".join(printed.split())
    record = json.loads((out / "run.json").read_text())
    assert record["data"]["path"] == "wikimia:64"
    assert 'id="blind-warning"' in (out / "report.html").read_text()
