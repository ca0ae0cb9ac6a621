"""A copying run's run.json edited by hand: rescore and report refuse an out-of-range
setting in one line that names run.json and the key (never an option of the command that
reads the run, which the user did not give)."""

from __future__ import annotations

import json
import shutil

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.copying import CopyConfig
from copyprobe.copying.runner import copying
from copyprobe.errors import DataError
from copyprobe.rescore import rescore


@pytest.fixture(scope="module")
def copying_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("copying") / "run"
    cfg = CopyConfig(tasks=("literal", "qa"), limit=2, literal_max_tokens=20, n_bootstrap=50)
    copying(FakeBackend(generate_fn=lambda r: "In the beginning God created the heaven"), "kjv", cfg, out=out,
            cache=False, command=["copyprobe", "copying"])
    return out


def _edited(run, tmp_path, key, value):
    run_dir = tmp_path / "edited"
    shutil.copytree(run, run_dir)
    record = json.loads((run_dir / "run.json").read_text())
    record["copying"][key] = value
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


EDITS = [
    ("literal_threshold", 5, "'copying.literal_threshold' must be a number in [0, 1], got 5"),
    ("event_threshold", -1, "'copying.event_threshold' must be an integer >= 0, got -1"),
    ("templates", [7], "'copying.templates' has template index 7 out of range"),
    ("tasks", ["fluency"], "'copying.tasks' is only fluency"),
    ("limit", 0, "'copying.limit' must be an integer >= 1, got 0"),  # not "results.jsonl has 4 literal rows"
    ("sample_seed", -1, "'copying.sample_seed' must be an integer in [0, 4294967295], got -1"),
    ("n_bootstrap", -4, "'copying.n_bootstrap' must be an integer in [0, 10000], got -4"),
    ("baseline", "yes", "'copying.baseline' must be true or false, got 'yes'"),
]


@pytest.mark.parametrize("key, value, says", EDITS)
def test_rescore_names_run_json_and_the_key(copying_run, tmp_path, key, value, says):
    run_dir = _edited(copying_run, tmp_path, key, value)
    before = (run_dir / "metrics.json").read_bytes()
    with pytest.raises(DataError) as info:
        rescore(run_dir)
    assert str(info.value).startswith(f"{run_dir / 'run.json'}: {says}"), str(info.value)
    assert (run_dir / "metrics.json").read_bytes() == before  # nothing rewritten


@pytest.mark.parametrize("command", [["rescore"], ["report"]])
def test_the_command_line_names_run_json_not_an_option_it_was_not_given(copying_run, tmp_path, capsys, command):
    run_dir = _edited(copying_run, tmp_path, "n_bootstrap", -4)
    assert main([*command, str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{run_dir / 'run.json'}: 'copying.n_bootstrap' must be an integer in [0, 10000], got -4" in err
    assert "--bootstrap" not in err and len(err.strip().splitlines()) == 1
    assert not (run_dir / "report.html").exists()


def test_report_refuses_an_out_of_range_setting_as_rescore_does(copying_run, tmp_path, capsys):
    run_dir = _edited(copying_run, tmp_path, "literal_threshold", 5)
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{run_dir / 'run.json'}: 'copying.literal_threshold' must be a number in [0, 1], got 5" in err
    assert not (run_dir / "report.html").exists()
    assert main(["report", str(copying_run), "--out", str(tmp_path / "page.html")]) == 0  # the intact run renders
