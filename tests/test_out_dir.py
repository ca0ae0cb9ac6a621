"""A run's output directory: the same command again reuses it; anything else in it is never overwritten."""

import json
import re
from pathlib import Path

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.readers import load_dataset
from copyprobe.errors import ConfigError


@pytest.fixture
def demo():
    from copyprobe.cli.commands.demo import demo_data_path

    return load_dataset(demo_data_path())


def detect_into(out, demo, tmp_path):
    backend = FakeBackend(member_texts=[e.text for e in demo.examples if e.label == 1])
    return copyprobe.detect(backend, demo, ["loss"], out=out, cache=tmp_path / "c.sqlite")


def test_the_same_command_again_reuses_its_directory(tmp_path, demo):
    detect_into(tmp_path / "run", demo, tmp_path)
    first = (tmp_path / "run" / "scores.jsonl").read_text()
    detect_into(tmp_path / "run", demo, tmp_path)
    assert (tmp_path / "run" / "scores.jsonl").read_text() == first


def test_a_run_whose_writing_failed_is_resumed(tmp_path, demo, monkeypatch):
    import copyprobe.record as record

    real = record.write_json

    def full_disk_at_run_json(path, content):  # run.json is written last
        if Path(path).name == "run.json":
            raise OSError(28, "No space left on device")
        return real(path, content)

    monkeypatch.setattr(record, "write_json", full_disk_at_run_json)
    with pytest.raises(OSError):
        detect_into(tmp_path / "run", demo, tmp_path)
    monkeypatch.setattr(record, "write_json", real)
    assert (tmp_path / "run" / "scores.jsonl").is_file() and not (tmp_path / "run" / "run.json").exists()
    detect_into(tmp_path / "run", demo, tmp_path)  # the same command again: its files are replaced
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["examples.jsonl", "metrics.json", "run.json",
                                                                   "scores.jsonl"]  # the marker is gone


@pytest.mark.parametrize("name", ["scores.jsonl", "examples.jsonl", "metrics.json", "verdicts.json", "report.html"])
def test_files_a_run_would_write_without_run_json_are_not_overwritten(tmp_path, demo, name):
    out = tmp_path / "run"
    out.mkdir()
    (out / name).write_text("mine")  # a user's file, or a run whose writing failed: no run.json says which
    backend = FakeBackend(member_texts=[])
    with pytest.raises(ConfigError, match=f"^{re.escape(str(out))} holds {name} but no run.json .*a detect run would overwrite it"):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0  # refused before any model work
    assert [p.name for p in out.iterdir()] == [name] and (out / name).read_text() == "mine"


@pytest.mark.parametrize("kind, name", [("audit", "scores.jsonl"), ("copying", "results.jsonl"),
                                        ("canary", "canary.json"), ("detect", "examples.jsonl")])
def test_every_kind_refuses_its_files_without_run_json(tmp_path, kind, name):
    from copyprobe.record import prepare_out_dir

    (tmp_path / name).write_text("mine")
    with pytest.raises(ConfigError, match=f"holds {name} but no run.json"):
        prepare_out_dir(tmp_path, kind, "fake")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_out_dir(empty, kind, "fake") == empty  # an empty directory is used
    assert prepare_out_dir(tmp_path / "new", kind, "fake").is_dir()  # a new path is made


def test_a_directory_of_other_files_is_fine(tmp_path, demo):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    detect_into(tmp_path / "run", demo, tmp_path)
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("files, expected", [
    ({"run.json": {"kind": "copying", "command": ["copyprobe", "copying"]}}, "holds a copying run"),
    ({"run.json": {"name": "another tool's record"}}, "not a copyprobe run record"),
    ({"run.json": "{not json"}, "not valid JSON"),
    ({"run.json": [1, 2]}, "not a copyprobe run record"),
])
def test_files_of_another_run_or_tool_are_not_overwritten(tmp_path, demo, files, expected):
    out = tmp_path / "run"
    out.mkdir()
    for name, content in files.items():
        (out / name).write_text(content if isinstance(content, str) else json.dumps(content))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    backend = FakeBackend(member_texts=[])
    with pytest.raises(ConfigError, match=expected):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0  # refused before any model work
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_the_cli_says_it_in_one_line(tmp_path, demo, capsys):
    from copyprobe.cli.main import main

    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "audit", "command": []}))
    code = main(["detect", "--model", "fake", "--data", "demo", "--methods", "loss", "--out", str(out), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "holds an audit run" in err[0]
    (out / "run.json").unlink()
    (out / "scores.jsonl").write_text("mine")
    code = main(["detect", "--model", "fake", "--data", "demo", "--methods", "loss", "--out", str(out), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds scores.jsonl but no run.json" in err[0]


@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_output_directory_is_refused_not_taken_for_the_working_directory(tmp_path, demo, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    backend = FakeBackend()
    with pytest.raises(ConfigError, match="output directory is empty"):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0 and list(tmp_path.iterdir()) == []
