"""`copyprobe report` with input it cannot use: a file for the run directory, an --out in a
folder that does not exist, a run.json whose kind does not match the files beside it.
Each is one line, exit code 2, and no page written."""

from __future__ import annotations

import json
import shutil

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.reports.sample import write_sample_run


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("copyprobe: error: ")
    return err


def test_a_file_for_the_run_directory_is_said_as_such(tmp_path, capsys):
    scores = tmp_path / "scores.jsonl"
    scores.write_text('{"id": "a"}\n')
    assert main(["report", str(scores)]) == 2
    err = _one_line(capsys)
    assert f"{scores} is a file: a report is made from a run directory (the one with run.json)" in err
    assert "Not a directory" not in err
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    assert main(["report", str(run_dir / "run.json")]) == 2  # the record itself: its folder is named
    assert f"{run_dir / 'run.json'} is a file: a report is made from a run directory (the one with run.json); " \
           f"here that is {run_dir}" in _one_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "scores.jsonl"]
    assert not (run_dir / "report.html").exists()


def test_report_out_refuses_a_missing_folder(tmp_path, capsys):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    out = tmp_path / "a" / "b" / "c" / "report.html"
    assert main(["report", str(run_dir), "--out", str(out)]) == 2
    assert f"cannot write the report to {out}: folder {out.parent} does not exist" in _one_line(capsys)
    assert not (tmp_path / "a").exists() and not (run_dir / "report.html").exists()  # nothing made
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    assert main(["report", str(run_dir), "--out", str(blocker / "report.html")]) == 2
    assert f"folder {blocker} is a file, not a folder" in _one_line(capsys)
    assert blocker.read_text() == "mine"
    (tmp_path / "a").mkdir()  # an existing folder is written to
    assert main(["report", str(run_dir), "--out", str(tmp_path / "a" / "report.html")]) == 0
    assert (tmp_path / "a" / "report.html").is_file()


def test_report_out_refuses_a_pipe_and_a_device(tmp_path, capsys):
    """A report over /dev/null (as root) replaced the system's /dev/null with a file, and one
    over a named pipe waited forever for a writer: neither is a page to replace."""
    import os

    run_dir = write_sample_run(tmp_path / "run", failures=False)
    os.mkfifo(tmp_path / "pipe.html")
    assert main(["report", str(run_dir), "--out", str(tmp_path / "pipe.html")]) == 2
    assert "pipe.html: not a regular file but a named pipe: not replaced" in _one_line(capsys)
    assert main(["report", str(run_dir), "--out", os.devnull]) == 2
    assert f"cannot write the report to {os.devnull}: not a regular file but a device" in _one_line(capsys)
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A detect run, an audit run (sample runs with their kind written out) and a copying run."""
    from copyprobe.copying import CopyConfig
    from copyprobe.copying.runner import copying

    root = tmp_path_factory.mktemp("kinds")
    made = {}
    for kind, verdicts in (("detect", False), ("audit", True)):
        run_dir = write_sample_run(root / kind, failures=False, verdicts=verdicts)
        record = json.loads((run_dir / "run.json").read_text())
        record["kind"] = kind
        if kind == "audit":
            record["audit"] = {"method": "loss", "alpha": 0.01}
        (run_dir / "run.json").write_text(json.dumps(record))
        made[kind] = run_dir
    made["copying"] = root / "copying"
    copying(FakeBackend(generate_fn=lambda r: "text"), "kjv", CopyConfig(tasks=("literal",), limit=2, n_bootstrap=20),
            out=made["copying"], cache=False, command=["copyprobe", "copying"])
    return made


@pytest.mark.parametrize("run, kind, says", [
    ("detect", "copying", "says a copying run, but examples.jsonl beside it belongs to detect, audit or canary runs, "
                          "not copying runs"),
    ("detect", "canary", "says a canary run, but metrics.json beside it belongs to detect, audit or copying runs"),
    ("audit", "detect", "says a detect run, but verdicts.json beside it belongs to audit runs, not detect runs"),
    ("audit", "copying", "says a copying run, but verdicts.json beside it belongs to audit runs"),
    ("copying", "detect", "says a detect run, but results.jsonl beside it belongs to copying runs, not detect runs"),
    ("copying", "audit", "says an audit run, but results.jsonl beside it belongs to copying runs"),
    ("copying", "canary", "says a canary run, but results.jsonl beside it belongs to copying runs"),
])
def test_a_kind_that_does_not_match_the_files_is_refused(runs, tmp_path, capsys, run, kind, says):
    run_dir = tmp_path / "edited"
    shutil.copytree(runs[run], run_dir)
    assert main(["report", str(run_dir)]) == 0  # as written, it renders
    (run_dir / "report.html").unlink()
    capsys.readouterr()
    record = json.loads((run_dir / "run.json").read_text())
    record["kind"] = kind
    (run_dir / "run.json").write_text(json.dumps(record))
    assert main(["report", str(run_dir)]) == 2
    err = _one_line(capsys)
    assert f"{run_dir / 'run.json'} {says}" in err and "(was its kind edited?)" in err, err
    assert not (run_dir / "report.html").exists()


def test_a_section_of_another_kind_is_refused_when_the_files_agree(runs, tmp_path, capsys):
    # files alone cannot tell a detect run from an audit run without verdicts; the settings can
    run_dir = tmp_path / "edited"
    shutil.copytree(runs["audit"], run_dir)
    (run_dir / "verdicts.json").unlink()
    record = json.loads((run_dir / "run.json").read_text())
    record["kind"] = "detect"
    (run_dir / "run.json").write_text(json.dumps(record))
    assert main(["report", str(run_dir)]) == 2
    assert "says a detect run, but holds the 'audit' settings of an audit run" in _one_line(capsys)
    assert not (run_dir / "report.html").exists()
