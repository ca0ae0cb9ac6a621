import json
import re

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.copying import CopyConfig, GenConfig, compute_metrics, load_copyset, run_copying
from copyprobe.copying.nonliteral import BackendJudge
from copyprobe.copying.runner import copying
from copyprobe.errors import ConfigError


def _fake():
    kjv = load_copyset("kjv")
    refs = {i.input: i.reference for i in kjv.literal}

    def gen(req):
        p = req.prompt or req.messages[-1][1]
        if p.startswith("### Instruction:\nPlease solely verify"):
            return "attributable" if "ark" in p.split("Reference:")[1] else "not attributable"
        if p.startswith("You are a fair judge"):
            return "Feedback: fine. [RESULT] 3"
        if "Question:" in p:
            return " [Output_Start] gopher wood [Output_End]"
        for prefix, ref in refs.items():
            if prefix in p and prefix.startswith("In the beginning God"):
                return ref  # the model "copies" Genesis 1
        if "Continue the text" in p:
            return "Noah and Shem built an ark; Ham watched. The rain came and the ark floated."
        return "Something else entirely, with no relation to the source text at all."

    return FakeBackend(generate_fn=gen), kjv


def test_copying_run_writes_a_recomputable_record(tmp_path):
    fb, _ = _fake()
    cfg = CopyConfig(judge=BackendJudge(None), literal_max_tokens=60, nonliteral_max_tokens=60)
    result = copying(fb, "kjv", cfg, out=tmp_path / "run", cache=False, command=["copyprobe", "copying"])
    out = tmp_path / "run"
    run = json.loads((out / "run.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert len([r for r in rows if r.get("set") != "clean"]) == 8 + 12 + 12
    assert sum(r.get("set") == "clean" for r in rows) == 8  # the default baseline, matched in number
    assert run["copying"]["tasks"] == ["literal", "nonliteral", "qa", "fluency"]
    assert run["mitigation"]["name"] == "none" and run["data"]["counts"]["literal"] == 8
    assert metrics == json.loads(json.dumps(compute_metrics(rows, cfg)))  # recomputable from results.jsonl
    lit = metrics["literal"]
    assert lit["rate"] == pytest.approx(1 / 8) and lit["n"] == 8 and lit["n_errors"] == 0
    assert lit["fluency"] == {"mean": 3, "n": 8, "n_unparseable": 0}
    nl = metrics["nonliteral"]
    # every story names Noah, Shem, Ham: 3 characters in the Noah items (unless named in the beginning)
    noah = [r for r in rows if r["task"] == "nonliteral" and "Noah" in r["title"]]
    assert len(noah) == 2 and all(("Noah" in r["characters_excluded"]) != ("Noah" in r["characters_found"]) for r in noah)
    assert all({"Shem", "Ham"} <= set(r["characters_found"]) for r in noah)
    assert nl["n"] == 12 and nl["character_rate"] == pytest.approx(
        sum(r["character_overlap"] >= 3 for r in rows if r["task"] == "nonliteral") / 12)
    assert metrics["qa"]["exact_match"] == pytest.approx(1 / 12)  # only the ark question
    assert result["run"]["requests"]["unique"] <= result["run"]["requests"]["total"]


def test_system_prompt_mitigation_reaches_the_requests(tmp_path):
    seen = []
    fb = FakeBackend(generate_fn=lambda r: seen.append(r) or "text")
    cfg = CopyConfig(tasks=("literal",), gen=GenConfig(mitigation="system_prompt"))
    copying(fb, "kjv_incontext", cfg, cache=False)
    assert seen and all(r.prompt.startswith("You should be a responsible agent") for r in seen)


def test_memfree_needs_a_spec_and_a_local_model(tmp_path):
    fb, _ = _fake()
    with pytest.raises(ConfigError, match="model spec"):
        copying(fb, "kjv", CopyConfig(tasks=("literal",), gen=GenConfig(mitigation="memfree")), cache=False)
    with pytest.raises(ConfigError, match="local"):
        copying("openai:m@http://127.0.0.1:9", "kjv", CopyConfig(tasks=("literal",), gen=GenConfig(mitigation="memfree")), cache=False)


def test_bad_input_rows_are_reported_per_item(tmp_path):
    data = tmp_path / "d.json"
    data.write_text(json.dumps([{"id": "a", "input": "x " * 20, "reference": "y " * 50}, {"id": "b", "input": "x"}]))
    fb = FakeBackend(generate_fn=lambda r: "")
    res = copying(fb, data, CopyConfig(tasks=("literal",), baseline=False), cache=False, out=tmp_path / "o")
    errs = {r["id"]: r["error"] for r in res["rows"]}
    assert errs == {"a": "empty generation", "b": "bad input: missing field 'reference'"}
    assert res["metrics"]["literal"]["n"] == 0 and res["metrics"]["literal"]["rate"] is None
    assert {f["id"] for f in res["run"]["failures"]} == {"a", "b"}


def test_template_is_the_prompts_name_on_scored_and_failed_rows():
    from copyprobe.copying.runner import build_runs, result_rows
    from copyprobe.drive import Failure

    kjv = load_copyset("kjv")
    cfg = CopyConfig(tasks=("literal", "nonliteral", "qa"), templates=(0, 2), limit=2, judge=BackendJudge(None))
    runs, skeleton = build_runs(kjv, cfg)
    failed = next(key for key in skeleton if key[0] == "literal" and key[2] == 2)
    scored = {key: {"output": "x", "error": None, "f1": 0.0} for key in skeleton if key[0] == "qa"}
    rows = result_rows(kjv, cfg, skeleton, {failed: Failure("server said no"), **scored})
    names = {(r["task"], r["template"]) for r in rows if r["template"] is not None}
    assert names == {("literal", "literal.1"), ("literal", "literal.3"), ("nonliteral", "nonliteral.1"),
                     ("nonliteral", "nonliteral.3"), ("qa", "qa.1")}
    row = next(r for r in rows if r["id"] == failed[1] and r["error"] == "server said no")
    assert row["template"] == "literal.3"


def test_scored_literal_and_nonliteral_rows_carry_the_template_name(tmp_path):
    # the name comes from the runner's row skeleton only (the generators no longer set it)
    fb = FakeBackend(generate_fn=lambda r: "And God said, Let there be light: and there was light.")
    cfg = CopyConfig(tasks=("literal", "nonliteral"), templates=(0, 2), limit=2, baseline=False,
                     judge=BackendJudge(None))
    res = copying(fb, load_copyset("kjv"), cfg, cache=False, out=tmp_path / "o")
    scored = [r for r in res["rows"] if r["error"] is None]
    assert {(r["task"], r["template"]) for r in scored} == {
        ("literal", "literal.1"), ("literal", "literal.3"), ("nonliteral", "nonliteral.1"), ("nonliteral", "nonliteral.3")}
    written = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert [r["template"] for r in written] == [r["template"] for r in res["rows"]]


def test_rescore_refuses_results_that_lost_or_repeated_rows(tmp_path):
    from copyprobe.errors import DataError
    from copyprobe.rescore import rescore

    fb, _ = _fake()
    cfg = CopyConfig(tasks=("literal", "qa"), templates=(0, 1), limit=3, judge=BackendJudge(None))
    copying(fb, "kjv", cfg, out=tmp_path / "run", cache=False)
    results = tmp_path / "run" / "results.jsonl"
    lines = results.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    # 3 suspect literal items and the 3 clean ones they are matched with, in 2 templates; 3 QA items once
    assert [r["task"] for r in rows].count("literal") == (3 + 3) * 2 and [r["task"] for r in rows].count("qa") == 3
    rescore(tmp_path / "run")  # intact: recomputed
    for damaged, says in ((lines + lines[:1], "has two rows (lines 1 and 16)"),
                          (lines[:3] + lines[4:], "has 11 literal rows where run.json asked for 12"),
                          (lines[:-1], "has 2 qa rows where run.json asked for 3")):
        results.write_text("\n".join(damaged) + "\n")
        with pytest.raises(DataError, match=re.escape(says)):
            rescore(tmp_path / "run")


@pytest.mark.parametrize("argv,message", [
    (["--tasks", "literal,poems"], "unknown copying task(s) 'poems' (choose from"),
    (["--tasks", "a\nb"], "unknown copying task(s) 'a\\nb' (choose from"),  # one line, as repr shows it
    (["--tasks", "literal,\x1b[31mRED"], "unknown copying task(s) '\\x1b[31mRED' (choose from"),
    (["--tasks", "fluency"], "fluency grades the outputs"),
    (["--tasks", "literal,,qa"], "--tasks: an empty item between commas, got 'literal,,qa'"),
    (["--templates", "0,5"], "template index 5 out of range"),
    (["--data", "/nonexistent.json"], "does not exist"),
    (["--limit", "0"], "--limit: must be an integer >= 1, got 0"),
    (["--prefix-words", "0"], "--prefix-words: must be an integer >= 1, got 0"),
    (["--embedding-threshold", "nan"], "--embedding-threshold: must be a number in [-1, 1], got nan"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
    base = ["copying", "--model", "smollm2-135m-instruct", "--data", "kjv", "--out", str(tmp_path / "o")]
    for i in range(0, len(argv), 2):
        if argv[i] in base:
            base[base.index(argv[i]) + 1] = argv[i + 1]
        else:
            base += argv[i : i + 2]
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "\x1b" not in err


def test_a_failed_event_judge_is_in_partial_failures_and_an_old_run_without_them_derives(tmp_path):
    from copyprobe.backends.base import RequestFailed
    from copyprobe.copying.summary import summary_lines
    from copyprobe.engine import derive_run
    from copyprobe.kinds import KINDS
    from copyprobe.record import load_run

    kjv = load_copyset("kjv")
    down = set(kjv.nonliteral[2].reference_events)

    class JudgeDown(FakeBackend):  # the judge's requests about one story fail for good
        def _answer_generate(self, requests, progress=None, on_result=None):
            return [RequestFailed("HTTP 503") if (r.prompt or "").startswith("### Instruction:")
                    and r.prompt.split("Claim: ", 1)[1].split("\n\nReference: ", 1)[0] in down
                    else super(JudgeDown, self)._answer_generate([r])[0] for r in requests]

    fb = JudgeDown(generate_fn=lambda r: "not attributable" if r.prompt.startswith("### Instruction:")
                   else "Noah and Shem built an ark; Ham watched.")
    cfg = CopyConfig(tasks=("nonliteral",), judge=BackendJudge(None), nonliteral_max_tokens=60)
    res = copying(fb, kjv, cfg, out=tmp_path / "run", cache=False)
    judged = [r for r in res["rows"] if r.get("event_error")]
    assert judged and all(r["error"] is None and r["event_error"] == "the event judge failed: request failed: HTTP 503"
                          for r in judged)
    assert {r["id"] for r in judged} == {i.id for i in kjv.nonliteral if down & set(i.reference_events)}
    run_json = tmp_path / "run" / "run.json"
    record = json.loads(run_json.read_text())
    assert record["failures"] == []  # every item has a score: its characters
    assert record["partial_failures"] == [{"task": "nonliteral", "id": r["id"], "template": r["template"],
                                           "missing": "event score", "error": r["event_error"]} for r in judged]
    assert res["metrics"]["nonliteral"]["n_event_undetermined"] == len(judged)
    lines = summary_lines(res["metrics"], res["run"])
    assert f"  {len(judged)} item(s) kept their character score but the event judge failed (first reason: " \
           "request failed: HTTP 503): see partial_failures in run.json / event_error in results.jsonl" in lines
    # a run written before partial_failures existed: derived as before, and said nothing of
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(metrics["nonliteral"]["event_rate_bounds"]) == 2
    del record["partial_failures"]
    run_json.write_text(json.dumps(record))
    old = load_run(tmp_path / "run", derived=False)
    KINDS["copying"].check_recorded(old)
    assert json.loads(json.dumps(derive_run(KINDS["copying"], old).files["metrics.json"])) == metrics
    assert not any("event judge" in line for line in summary_lines(metrics, old.record.to_json()))
    # and through rescore, which reads metrics.json back (its shape had refused the bounds' list)
    from copyprobe.rescore import rescore

    assert rescore(tmp_path / "run").metrics == metrics


def test_sample_items_is_a_seeded_uniform_sample_in_data_order():
    from collections import Counter

    from copyprobe.copying.runner import sample_items

    items = [f"i{k}" for k in range(40)]
    a = sample_items(items, 10, seed=0)
    assert len(a) == 10 == len(set(a)) and a == [i for i in items if i in a]  # in data order
    assert a == sample_items(items, 10, seed=0) and a != items[:10]  # reproducible, not the first ten
    assert sample_items(items, 10, seed=1) != a
    assert set(a) <= set(sample_items(items, 25, seed=0))  # a larger limit keeps a smaller one's items
    assert sample_items(items, None, 3) == items and sample_items(items, 40, 3) == items == sample_items(items, 99, 3)
    # uniform: over 4,000 seeds each item is drawn about 10/40 of the time (binomial sd ~0.007)
    counts = Counter(i for seed in range(4000) for i in sample_items(items, 10, seed))
    assert set(counts) == set(items)
    assert all(abs(counts[i] / 4000 - 0.25) < 0.035 for i in items), counts


def test_limit_samples_the_items_of_every_task_and_the_baseline_is_matched(tmp_path):
    from copyprobe.copying.runner import sample_items
    from copyprobe.rescore import rescore

    kjv = load_copyset("kjv")
    fb, _ = _fake()
    # by default too (seed 0), a limit is not the first items; pinned, as Python keeps the
    # sequence of random() for a seed: a recorded seed names the same items in later versions
    rows, _ = run_copying(kjv, lambda spec: fb, CopyConfig(tasks=("qa",), limit=4))
    assert [r["id"] for r in rows] == ["kjv.qa.2", "kjv.qa.3", "kjv.qa.5", "kjv.qa.7"] != [i.id for i in kjv.qa[:4]]
    cfg = CopyConfig(tasks=("literal", "nonliteral", "qa"), limit=4, sample_seed=11, judge=BackendJudge(None),
                     nonliteral_max_tokens=60)
    res = copying(fb, kjv, cfg, out=tmp_path / "run", cache=False)
    for task in ("literal", "nonliteral", "qa"):
        every = [i.id for i in getattr(kjv, task)]
        ids = [r["id"] for r in res["rows"] if r["task"] == task and r.get("set") != "clean"]
        assert len(ids) == 4 and ids == [i for i in every if i in ids]  # in data order
        assert ids == [i.id for i in sample_items(getattr(kjv, task), 4, 11)]
    picked = {r["id"] for r in res["rows"]}
    assert not all(i.id in picked for i in kjv.qa[:4])  # not the first four
    assert sum(r.get("set") == "clean" for r in res["rows"]) == 4
    assert res["run"]["copying"]["sample_seed"] == 11 and res["run"]["copying"]["limit"] == 4
    # a run recorded before sample_seed existed (it kept the first items) still rescores
    # (literal and qa: a non-literal run's metrics.json is refused when read back, see above)
    cfg = CopyConfig(tasks=("literal", "qa"), limit=4, sample_seed=11, judge=BackendJudge(None))
    res = copying(fb, kjv, cfg, out=tmp_path / "lq", cache=False)
    run_json = tmp_path / "lq" / "run.json"
    record = json.loads(run_json.read_text())
    del record["copying"]["sample_seed"]
    run_json.write_text(json.dumps(record))
    assert rescore(tmp_path / "lq").metrics == json.loads(json.dumps(res["metrics"]))
