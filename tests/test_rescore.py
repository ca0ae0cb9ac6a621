"""Run directories written by an earlier copyprobe (tests/fixtures/saved_runs, written by
scripts/golden_runs.py on main at 77c4de1) still load, and rescore to identical files
with no model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from copyprobe.record import load_run
from copyprobe.rescore import rescore

SAVED = Path(__file__).parent / "fixtures" / "saved_runs"
DERIVED = ("metrics.json", "verdicts.json", "canary.json")


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """Rescoring must never load a model: any attempt fails the test."""
    def refuse(spec, **options):
        raise AssertionError(f"rescore tried to load model {spec}")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", refuse)


@pytest.mark.parametrize("name", ["detect", "audit", "copying"])
def test_saved_run_rescores_to_identical_files(tmp_path, name):
    run_dir = tmp_path / name
    shutil.copytree(SAVED / name, run_dir)
    before = load_run(run_dir)
    assert before.record.kind == name
    rescore(run_dir)
    for file in DERIVED:
        if (SAVED / name / file).exists():
            assert _json(run_dir / file) == _json(SAVED / name / file), file
    after = _json(run_dir / "run.json")
    assert after == _json(SAVED / name / "run.json")
    for file in ("scores.jsonl", "results.jsonl", "examples.jsonl"):
        if (SAVED / name / file).exists():
            assert (run_dir / file).read_bytes() == (SAVED / name / file).read_bytes()


def test_rescore_with_fewer_resamples_changes_only_the_intervals(tmp_path):
    run_dir = tmp_path / "detect"
    shutil.copytree(SAVED / "detect", run_dir)
    rescore(run_dir, n_bootstrap=10)
    old, new = _json(SAVED / "detect" / "metrics.json"), _json(run_dir / "metrics.json")
    assert _json(run_dir / "run.json")["bootstrap"]["n"] == 10
    for name, block in old["passage"].items():
        assert new["passage"][name]["auc"] == block["auc"]  # the AUC itself needs no resampling


def test_saved_canary_run_rescores_from_its_kit(tmp_path):
    """canary.json is derived again from the scores and the kit (which candidate was
    published is in the kit only); a kit moved since the test is given as an input."""
    run_dir = tmp_path / "canary"
    shutil.copytree(SAVED / "canary", run_dir)
    (run_dir / "canary.json").unlink()
    rescore(run_dir, inputs={"kit": SAVED / "canary-kit"})
    assert _json(run_dir / "canary.json") == _json(SAVED / "canary" / "canary.json")
    assert _json(run_dir / "run.json") == _json(SAVED / "canary" / "run.json")


def test_canary_rescore_refuses_another_kit(tmp_path):
    from copyprobe.cli.main import main
    from copyprobe.errors import DataError

    kit = tmp_path / "kit"
    document = SAVED / "canary-kit" / "publish" / "book.txt"
    assert main(["canary", "make", "--doc", str(document), "--out", str(kit), "--n-candidates", "30",
                 "--n-canaries", "2", "--style", "words", "--seed", "another"]) == 0
    run_dir = tmp_path / "canary"
    shutil.copytree(SAVED / "canary", run_dir)
    with pytest.raises(DataError, match="is not the kit this run was tested with"):
        rescore(run_dir, inputs={"kit": kit})


def test_rescore_of_a_missing_kit_is_one_line(tmp_path, capsys):
    from copyprobe.cli.main import main

    run_dir = tmp_path / "canary"
    shutil.copytree(SAVED / "canary", run_dir)
    code = main(["rescore", str(run_dir), "--kit", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nowhere" in err


def test_rescore_of_a_run_whose_kit_moved_asks_for_its_new_place(tmp_path, capsys):
    from copyprobe.cli.main import main
    from copyprobe.errors import DataSettingError

    run_dir = tmp_path / "canary"
    shutil.copytree(SAVED / "canary", run_dir)
    record = _json(run_dir / "run.json")
    record["canary"]["kit"] = str(tmp_path / "kit-moved-away")
    (run_dir / "run.json").write_text(json.dumps(record))
    with pytest.raises(DataSettingError, match="^kit is needed: the kit this run was tested with is no longer at"):
        rescore(run_dir)
    assert main(["rescore", str(run_dir)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"copyprobe rescore: error: argument --kit: is needed: the kit this run was tested with is no longer at "
        f"{tmp_path / 'kit-moved-away'}; give the directory it was moved to (see copyprobe rescore --help)")
    rescore(run_dir, inputs={"kit": SAVED / "canary-kit"})  # its new place given: recomputed
    again, saved = _json(run_dir / "canary.json"), _json(SAVED / "canary" / "canary.json")
    assert again["kit"].pop("kit") == str(tmp_path / "kit-moved-away")  # the recorded place, as run.json says
    saved["kit"].pop("kit")
    assert again == saved


def _rescore_edited(tmp_path, capsys, name, edit, *options):
    """Rescore a copy of the saved run ``name`` whose run.json ``edit`` changed: (exit code, stderr)."""
    from copyprobe.cli.main import main

    run_dir = tmp_path / name
    shutil.copytree(SAVED / name, run_dir)
    record = _json(run_dir / "run.json")
    edit(record)
    (run_dir / "run.json").write_text(json.dumps(record))
    code = main(["rescore", str(run_dir), *options])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("edit, field", [
    (lambda run: run["canary"].update(kit=["a", "list"]), "canary.kit"),
    (lambda run: run["canary"].pop("alpha"), "alpha"),
    (lambda run: run["canary"].pop("manifest_checksum"), "manifest_checksum"),
    (lambda run: run["canary"].update(alpha=5), "'canary.alpha' must be"),  # was a verdict at alpha 5
    (lambda run: run["canary"].update(method="bogus"), "has no 'bogus' scores"),
])
def test_hand_edited_canary_record_is_one_line(tmp_path, capsys, edit, field):
    code, err = _rescore_edited(tmp_path, capsys, "canary", edit, "--kit", str(SAVED / "canary-kit"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and field.split(".")[-1] in err


def test_canary_scores_missing_a_candidate_is_one_line(tmp_path, capsys):
    from copyprobe.cli.main import main

    run_dir = tmp_path / "canary"
    shutil.copytree(SAVED / "canary", run_dir)
    lines = (run_dir / "scores.jsonl").read_text().splitlines()
    (run_dir / "scores.jsonl").write_text("\n".join(lines[1:]) + "\n")
    code = main(["rescore", str(run_dir), "--kit", str(SAVED / "canary-kit")])
    err = capsys.readouterr().err
    # the run's reader finds it before the canary's own check ("no row for candidate c0:0")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no row for 1 of" in err and "'c0:0'" in err


@pytest.mark.parametrize("edit, expected", [
    (lambda run: run["audit"].update(test="welch"), "'audit.test' must be one of"),
    (lambda run: run["audit"].update(alpha=2), "'audit.alpha' must be"),  # every verdict became evidence
    (lambda run: run["audit"].update(alpha=0), "'audit.alpha' must be"),
    (lambda run: run["audit"].update(published=2020), "'audit.published' must be"),  # was a TypeError
    (lambda run: run["audit"].update(published="2020-13"), "'audit.published' must be a date"),
    (lambda run: run["audit"].update(method="bogus"), "has no 'bogus' scores"),  # was 'cannot tell' everywhere
    (lambda run: run["audit"].update(passage_words="128"), "'audit.passage_words' must be a whole number"),
    (lambda run: run["audit"].update(passage_words=0), "'audit.passage_words' must be a whole number"),
])
def test_hand_edited_audit_settings_are_refused_in_one_line(tmp_path, capsys, edit, expected):
    code, err = _rescore_edited(tmp_path, capsys, "audit", edit)
    assert code == 2 and len(err.strip().splitlines()) == 1 and expected in err, err
    assert _json(tmp_path / "audit" / "verdicts.json") == _json(SAVED / "audit" / "verdicts.json")  # nothing rewritten


@pytest.mark.parametrize("edit, expected", [
    # no row with a document: detect's metrics accept that, an audit cannot (it was an AttributeError)
    (lambda i, row: row.pop("doc_id"), "line 1: 'doc_id' is missing"),
    (lambda i, row: row.update(label=2) if i == 3 else None, "line 4: 'label' must be one of 0, 1, got 2"),
])
def test_hand_edited_audit_scores_are_refused_in_one_line(tmp_path, capsys, edit, expected):
    from copyprobe.cli.main import main

    run_dir = tmp_path / "audit"
    shutil.copytree(SAVED / "audit", run_dir)
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        edit(i, row)
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["rescore", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and expected in err, err
    assert _json(run_dir / "verdicts.json") == _json(SAVED / "audit" / "verdicts.json")  # nothing rewritten


@pytest.mark.parametrize("name, option, expected", [
    ("detect", ["--kit", "/nonexistent"], "argument --kit: does not apply: "),  # was accepted and ignored
    ("audit", ["--kit", str(SAVED / "canary-kit")], "argument --kit: does not apply: "),
    ("canary", ["--bootstrap", "5", "--kit", str(SAVED / "canary-kit")], "argument --bootstrap: does not apply: "),
])
def test_an_option_that_does_not_apply_to_the_run_is_refused_by_its_flag(tmp_path, capsys, name, option, expected):
    from copyprobe.cli.main import main

    run_dir = tmp_path / name
    shutil.copytree(SAVED / name, run_dir)
    code = main(["rescore", str(run_dir), *option])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("copyprobe rescore: error: " + expected), err


def test_a_publication_date_with_spaces_is_read_as_the_command_line_reads_it(tmp_path, capsys):
    """check_published accepts " 1611 " (it strips); derive must read the same date (it was
    handed the raw string and failed an assertion in could_have_seen)."""
    code, err = _rescore_edited(tmp_path, capsys, "audit", lambda run: run["audit"].update(published=" 1611 "))
    assert code == 0, err
    assert _json(tmp_path / "audit" / "verdicts.json")["published"] == "1611"


@pytest.mark.parametrize("name, kind, says", [
    ("detect", "copying", "says a copying run, but examples.jsonl beside it belongs to detect, audit or canary runs, "
                          "not copying runs"),
    ("audit", "detect", "says a detect run, but verdicts.json beside it belongs to audit runs, not detect runs"),
    ("copying", "detect", "says a detect run, but results.jsonl beside it belongs to copying runs, not detect runs"),
    ("canary", "audit", "says an audit run, but canary.json beside it belongs to canary runs, not audit runs"),
])
def test_a_relabelled_run_is_refused_in_one_line(tmp_path, capsys, name, kind, says):
    """A hand-edited kind would have rescore derive what no run computed (a copying run's
    results recomputed as detect metrics): refused as the report refuses it, nothing rewritten."""
    code, err = _rescore_edited(tmp_path, capsys, name, lambda run: run.update(kind=kind))
    run_json = tmp_path / name / "run.json"
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{run_json} {says}" in err and "(was its kind edited?)" in err, err
    for file in DERIVED:
        if (SAVED / name / file).exists():
            assert _json(tmp_path / name / file) == _json(SAVED / name / file), file


def test_files_of_two_runs_mixed_are_refused(tmp_path, capsys):
    from copyprobe.cli.main import main

    run_dir = tmp_path / "detect"
    shutil.copytree(SAVED / "detect", run_dir)
    shutil.copy(SAVED / "copying" / "results.jsonl", run_dir / "results.jsonl")
    assert main(["rescore", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "results.jsonl beside it belongs to copying runs" in err, err


def test_the_settings_of_another_kind_are_refused_when_the_files_agree(tmp_path, capsys):
    # an audit without verdicts.json has a detect run's files; its 'audit' section still tells
    from copyprobe.cli.main import main

    run_dir = tmp_path / "audit"
    shutil.copytree(SAVED / "audit", run_dir)
    (run_dir / "verdicts.json").unlink()
    record = _json(run_dir / "run.json")
    record["kind"] = "detect"
    (run_dir / "run.json").write_text(json.dumps(record))
    assert main(["rescore", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "but holds the 'audit' settings of an audit run" in err, err


@pytest.mark.parametrize("name, options", [
    ("detect", []), ("audit", []), ("copying", []), ("canary", ["--kit", str(SAVED / "canary-kit")]),
])
def test_a_run_of_the_kind_it_says_still_rescores(tmp_path, capsys, name, options):
    from copyprobe.cli.main import main

    run_dir = tmp_path / name
    shutil.copytree(SAVED / name, run_dir)
    assert main(["rescore", str(run_dir), *options]) == 0, capsys.readouterr().err
    assert f"rescored {run_dir}" in capsys.readouterr().out


@pytest.mark.parametrize("words, first, never", [
    (128, "passages of at most 128 words)", False),  # the battery's own row at the audit's length
    (200, "passages of at most 128 words)", True),  # the nearest, and the audit's length named
    (None, "passages of at most 64 words)", False),  # not known: the length audited on most models
])
def test_a_rescored_audit_quotes_the_null_battery_at_its_recorded_passage_length(tmp_path, capsys, words, first,
                                                                                 never):
    """run.json's audit.passage_words reaches the evidence clause of verdicts.json (the
    saved audit at the battery's test, alpha and guard, where it has evidence verdicts)."""
    from copyprobe.evaluation.validity import null_records

    assert {64, 128} <= set(null_records("loss"))  # the shipped table this test reads
    code, err = _rescore_edited(tmp_path, capsys, "audit", lambda run: run["audit"].update(
        test="t", alpha=0.01, guard_test="t", passage_words=words))
    assert code == 0, err
    report = _json(tmp_path / "audit" / "verdicts.json")
    assert any(r["verdict"] == "evidence" for r in report["documents"])
    said = report["evidence_null_battery"]
    assert said.split(" audits with loss ")[0].rstrip(",").endswith(first), said
    assert ("this audit's length" in said) == never
