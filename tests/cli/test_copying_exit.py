"""`copyprobe copying`'s exit code, by detect's rule applied per part of the run: a part
(the book's literal items, the clean baseline, the non-literal items, their event
judgements, the QA items) that scored nothing -> one error line and exit 2; one that
scored some -> one warning line each and exit 0; the run is written either way."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from copyprobe.backends.base import RequestFailed
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.copying import load_copyset

KJV = load_copyset("kjv")
JUDGE = "### Instruction:\nPlease solely verify"


class _Fake(FakeBackend):
    """Answers with ``answer(prompt)``; a judge request whose claim is in ``down`` fails
    for good (as a server answering HTTP 500 after its retries)."""

    def __init__(self, answer, down=()):
        super().__init__(spec="fake-copy", generate_fn=lambda r: answer(r.prompt or r.messages[-1][1]))
        self.down = set(down)

    def _answer_generate(self, requests, progress=None, on_result=None):
        out = []
        for r in requests:
            prompt = r.prompt or ""
            claim = prompt.split("Claim: ", 1)[1].split("\n\nReference: ", 1)[0] if prompt.startswith(JUDGE) else None
            out.append(RequestFailed("HTTP 500 after 5 retries") if claim in self.down
                       else super()._answer_generate([r])[0])
        return out


def _answer(empty=lambda prompt: False):
    def answer(prompt):
        if empty(prompt):
            return ""
        if prompt.startswith(JUDGE):
            return "not attributable"
        if "Question:" in prompt:
            return " [Output_Start] gopher wood [Output_End]"
        return "Noah and Shem built an ark; Ham watched the rain."
    return answer


def _run(tmp_path, monkeypatch, capsys, fake, *extra):
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["copying", "--model", "fake-copy", "--data", "kjv", "--out", str(tmp_path / "run"), "--no-cache",
                 "--no-progress", *extra])
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    return code, out, err.splitlines(), rows, run


def _lines(err, kind):
    return [line for line in err if line.startswith(f"copyprobe: {kind}:")]


def test_a_run_where_everything_scored_exits_0_without_warnings(tmp_path, monkeypatch, capsys):
    code, _, err, rows, run = _run(tmp_path, monkeypatch, capsys, _Fake(_answer()), "--judge", "target")
    assert code == 0 and err == []
    assert all(r["error"] is None and not r.get("event_error") for r in rows)
    assert run["failures"] == [] and run["partial_failures"] == []


def test_a_task_that_scored_nothing_exits_2_naming_the_cause_and_the_run_is_written(tmp_path, monkeypatch, capsys):
    fake = _Fake(_answer(empty=lambda p: "Question:" in p))  # every QA answer empty
    code, out, err, rows, run = _run(tmp_path, monkeypatch, capsys, fake, "--tasks", "literal,qa")
    assert code == 2
    [line] = _lines(err, "error")
    n_qa = sum(r["task"] == "qa" for r in rows)
    assert n_qa == len(KJV.qa) == 12
    assert line.startswith(f"copyprobe: error: qa scored none of {n_qa} items: empty generation ({n_qa} of them); "
                           "the run is written")
    assert _lines(err, "warning") == [] and len(err) == 1 and "Traceback" not in "\n".join(err)
    # written in full: the scored literal task and every failure with its reason
    assert {(f["task"], f["error"]) for f in run["failures"]} == {("qa", "empty generation")}
    assert len(run["failures"]) == n_qa and f"run written to {tmp_path / 'run'}" in out
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["literal"]["n"] == len(KJV.literal)


def test_some_failed_items_give_one_warning_per_task_and_exit_0(tmp_path, monkeypatch, capsys):
    # two book items and one QA item get an empty answer; the clean baseline is answered
    literal_tails = {" ".join(i.input.split()[-20:]) for i in (KJV.literal[1], KJV.literal[4])}
    question = KJV.qa[3].input

    def empty(prompt):
        return any(tail in " ".join(prompt.split()) for tail in literal_tails) or question in prompt

    code, _, err, rows, run = _run(tmp_path, monkeypatch, capsys, _Fake(_answer(empty)), "--tasks", "literal,qa")
    assert code == 0, err
    counts = Counter((r["task"], r.get("set")) for r in rows)
    failed = Counter((r["task"], r.get("set")) for r in rows if r["error"])
    assert failed == {("literal", "suspect"): 2, ("qa", None): 1}  # counted from results.jsonl
    assert _lines(err, "error") == []
    assert sorted(_lines(err, "warning")) == sorted([
        f"copyprobe: warning: literal: 2 of {counts['literal', 'suspect']} items have no score: "
        "empty generation (2 of them)",
        f"copyprobe: warning: qa: 1 of {counts['qa', None]} items have no score: empty generation (1 of them)",
    ])


def test_a_clean_baseline_that_scored_nothing_is_its_own_part(tmp_path, monkeypatch, capsys):
    book = {" ".join(i.input.split()[-20:]) for i in KJV.literal}

    def empty(prompt):  # every literal prompt that is not the book's: the clean text's
        return "Question:" not in prompt and not any(tail in " ".join(prompt.split()) for tail in book)

    code, _, err, rows, _run_json = _run(tmp_path, monkeypatch, capsys, _Fake(_answer(empty)), "--tasks", "literal")
    clean = [r for r in rows if r.get("set") == "clean"]
    assert clean and all(r["error"] == "empty generation" for r in clean)
    assert all(r["error"] is None for r in rows if r.get("set") != "clean")
    assert code == 2
    [line] = _lines(err, "error")
    assert line.startswith(f"copyprobe: error: literal (clean baseline) scored none of {len(clean)} items: "
                           f"empty generation ({len(clean)} of them)")


def test_a_failed_event_judge_is_warned_of_and_listed_in_partial_failures(tmp_path, monkeypatch, capsys):
    down = set(KJV.nonliteral[0].reference_events)  # the judge fails on the first story's events
    judged_by_down = [i.id for i in KJV.nonliteral if down & set(i.reference_events)]  # its items (2 beginnings)
    code, out, err, rows, run = _run(tmp_path, monkeypatch, capsys, _Fake(_answer(), down=down),
                                     "--tasks", "nonliteral", "--judge", "target")
    assert code == 0, err
    hit = [r for r in rows if r.get("event_error", "").startswith("the event judge failed")]
    assert [r["id"] for r in hit] == judged_by_down and 0 < len(hit) < len(rows)
    assert all(r["error"] is None and r["character_overlap"] is not None for r in hit)  # character scores stand
    k, n = len(hit), len(rows)
    reason = "the event judge failed: request failed: HTTP 500 after 5 retries"
    assert _lines(err, "warning") == [
        f"copyprobe: warning: nonliteral events: {k} of {n} items kept their character score but have no event "
        f"score: {reason} ({k} of them)"]
    assert run["failures"] == []
    assert run["partial_failures"] == [{"task": "nonliteral", "id": i, "template": "nonliteral.1",
                                        "missing": "event score", "error": reason} for i in judged_by_down]
    said = (f"{k} item(s) kept their character score but the event judge failed (first reason: request failed: "
            "HTTP 500 after 5 retries)")
    assert said in out
    from copyprobe.reports.copying_page import render

    assert said in render(tmp_path / "run")  # the report page says it too (it said nothing)


def test_an_event_judge_that_failed_everywhere_exits_2(tmp_path, monkeypatch, capsys):
    events = {e for item in KJV.nonliteral for e in item.reference_events}
    code, _, err, rows, run = _run(tmp_path, monkeypatch, capsys, _Fake(_answer(), down=events), "--tasks",
                                   "nonliteral", "--judge", "target")
    assert code == 2
    assert all(r["error"] is None and r["character_overlap"] is not None for r in rows)
    [line] = _lines(err, "error")
    assert line.startswith(f"copyprobe: error: nonliteral events scored none of {len(rows)} items: the event judge "
                           "failed: request failed: HTTP 500 after 5 retries")
    assert len(run["partial_failures"]) == len(rows)


def test_templates_count_rows_not_items(tmp_path, monkeypatch, capsys):
    question = KJV.qa[0].input
    code, _, err, rows, _ = _run(tmp_path, monkeypatch, capsys,
                                 _Fake(_answer(lambda p: question in p or p.startswith("You will be given several"))),
                                 "--tasks", "literal,qa", "--templates", "0,1", "--no-baseline")
    # every literal row of template 1 (literal.2) fails, those of template 0 not
    lit = [r for r in rows if r["task"] == "literal"]
    failed = [r for r in lit if r["error"]]
    assert {r["template"] for r in failed} == {"literal.2"} and len(failed) == len(lit) / 2
    assert code == 0
    assert (f"copyprobe: warning: literal: {len(failed)} of {len(lit)} (item, template) rows have no score: "
            f"empty generation ({len(failed)} of them)") in err


@pytest.mark.parametrize("extra, says", [
    (["--sample-seed", "3"], "--sample-seed has no effect: it draws the items --limit keeps, and --limit is not "
                             "given"),
])
def test_a_sample_seed_without_a_limit_is_refused(tmp_path, monkeypatch, capsys, extra, says):
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: pytest.fail("loaded"))
    assert main(["copying", "--model", "fake-copy", "--data", "kjv", "--out", str(tmp_path / "run"), "--no-cache",
                 "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_limit_takes_a_seeded_random_sample_recorded_in_run_json(tmp_path, monkeypatch, capsys):
    from copyprobe.copying.runner import sample_items

    fake = _Fake(_answer())
    for seed in ("0", "7"):
        out = tmp_path / f"seed{seed}"
        monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
        assert main(["copying", "--model", "fake-copy", "--data", "kjv", "--tasks", "literal,qa", "--limit", "3",
                     "--sample-seed", seed, "--out", str(out), "--no-cache", "--no-progress"]) == 0
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert json.loads((out / "run.json").read_text())["copying"]["sample_seed"] == int(seed)
        for task, items in (("literal", KJV.literal), ("qa", KJV.qa)):
            ids = [r["id"] for r in rows if r["task"] == task and r.get("set") != "clean"]
            assert ids == [i.id for i in sample_items(items, 3, int(seed))]
            assert ids == [i.id for i in items if i.id in ids]  # in data order
    capsys.readouterr()


def test_a_fluency_judge_that_failed_everywhere_exits_2_and_the_scores_stand(capsys):
    from copyprobe.cli._common import copying_exit_code as exit_code

    rows = [{"task": "literal", "id": f"b{i}", "error": None, "rouge_l": 0.5, "fluency": None,
             "fluency_error": "the fluency judge failed: HTTP 500"} for i in range(3)]
    rows.append({"task": "literal", "id": "b3", "error": None, "rouge_l": 0.2, "fluency": None,
                 "fluency_error": "judgement has no '[RESULT] n' (n in 1-5)"})  # unreadable: not a failure
    assert exit_code(rows) == 0  # 3 of 4 graded items failed: a warning
    assert "copyprobe: warning: literal fluency: 3 of 4 items kept their copying scores" in capsys.readouterr().err
    assert exit_code(rows[:3]) == 2
    assert "copyprobe: error: literal fluency scored none of 3 items: the fluency judge failed: HTTP 500" \
        in capsys.readouterr().err
