import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import CopyConfig, CopySet, LiteralItem, run_copying
from copyprobe.copying.fluency import FluencyJudge, parse_fluency
from copyprobe.copying.prompts import FLUENCY_JUDGE


@pytest.mark.parametrize("text,score", [
    ("Feedback: clear. [RESULT] 4", 4),
    ("Feedback: ok [RESULT]5", 5),
    ("[RESULT] (3)", 3),
    ("Feedback: x [RESULT] 2.0", 2),
    ("[RESULT] 1 ... on reflection [RESULT] 3", 3),  # the last mark counts
    ("Feedback: fine [RESULT] 6", None),  # out of range
    ("Feedback: fine [RESULT] 10", None),
    ("Feedback: fine [RESULT] (an integer number between 1 and 5)", None),
    ("Score: 4", None),  # no [RESULT] mark: not guessed
    ("", None),
])
def test_parse_fluency(text, score):
    assert parse_fluency(text) == score


def test_fluency_prompt_is_figure_9():
    req = FluencyJudge("judge").request("Some story.")
    assert req.model == "judge" and req.temperature == 0
    assert "###Response to evaluate:\nSome story.\n" in req.prompt
    assert "Evaluate whether the given text is well-written and grammatical." in req.prompt
    assert req.prompt.endswith("###Feedback:")
    assert [FLUENCY_JUDGE.count(f"Score {i}: ") for i in range(1, 6)] == [1] * 5


def test_unparseable_fluency_is_counted_not_scored():
    ref = " ".join(["word"] * 50)
    items = [LiteralItem(f"i{i}", "t", f"prefix {i} " * 20, ref) for i in range(3)]

    def gen(req):
        if req.prompt.startswith("You are a fair judge"):
            return "Feedback: good [RESULT] 5" if "alpha" in req.prompt else "I think it is fine."
        return "alpha text" if "prefix 0" in req.prompt else "beta text"

    fb = FakeBackend(generate_fn=gen)
    rows, metrics = run_copying(CopySet(literal=items), lambda s: fb, CopyConfig(tasks=("literal", "fluency")))
    by_id = {r["id"]: r for r in rows}
    assert by_id["i0"]["fluency"] == 5
    assert by_id["i1"]["fluency"] is None and "[RESULT]" in by_id["i1"]["fluency_error"]
    assert metrics["literal"]["fluency"] == {"mean": 5, "n": 1, "n_unparseable": 2}
    assert metrics["literal"]["n"] == 3  # copying scores stand when fluency cannot be read


def test_a_failed_fluency_judge_leaves_the_copying_scores_and_is_said(tmp_path, capsys):
    from copyprobe.backends.base import RequestFailed
    from copyprobe.cli._common import copying_exit_code as exit_code
    from copyprobe.copying.literal import literal_scores
    from copyprobe.copying.runner import copying
    from copyprobe.copying.summary import summary_lines

    ref = " ".join(["word"] * 50)
    items = [LiteralItem(f"i{i}", "t", f"prefix {i} " * 20, ref) for i in range(3)]

    class JudgeDown(FakeBackend):  # the judge's requests fail for good, except about item 0's text
        def _answer_generate(self, requests, progress=None, on_result=None):
            return [RequestFailed("HTTP 503") if r.prompt.startswith("You are a fair judge") and "alpha" not in r.prompt
                    else super(JudgeDown, self)._answer_generate([r])[0] for r in requests]

    fb = JudgeDown(generate_fn=lambda r: "Feedback: good [RESULT] 4" if r.prompt.startswith("You are a fair judge")
                   else ("alpha word word" if "prefix 0" in r.prompt else "beta word"))
    res = copying(fb, CopySet(literal=items), CopyConfig(tasks=("literal", "fluency"), baseline=False),
                  out=tmp_path / "run", cache=False)
    by_id = {r["id"]: r for r in res["rows"]}
    assert all(r["error"] is None for r in res["rows"])  # the failed judge did not fail the items
    assert by_id["i1"]["rouge_l"] == pytest.approx(literal_scores("beta word", ref)["rouge_l"]) and by_id["i1"]["rouge_l"] > 0 and by_id["i0"]["fluency"] == 4
    assert by_id["i1"]["fluency"] is None and by_id["i1"]["fluency_error"].startswith("the fluency judge failed: ")
    assert res["metrics"]["literal"]["n"] == 3
    assert res["metrics"]["literal"]["fluency"] == {"mean": 4, "n": 1, "n_unparseable": 0, "n_judge_failed": 2}
    assert [(f["id"], f["missing"]) for f in res["run"]["partial_failures"]] == [("i1", "fluency score"),
                                                                                 ("i2", "fluency score")]
    assert any(line.startswith("  2 item(s) kept their copying scores but the fluency judge failed")
               for line in summary_lines(res["metrics"], res["run"]))
    assert exit_code(res["rows"]) == 0  # some graded: a warning
    assert "copyprobe: warning: literal fluency: 2 of 3 items kept their copying scores" in capsys.readouterr().err
