import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import qa
from copyprobe.copying.common import GenConfig
from copyprobe.copying.data import QAItem
from copyprobe.drive import Failure, drive


@pytest.mark.parametrize("raw,normalized", [
    ("The Cat", "cat"),
    ("  a  dog,   an apple! ", "dog apple"),
    ("Theatre of the absurd", "theatre of absurd"),  # 'the' only as a whole word
    ("$1,000,000", "1000000"),
    ("U.S.A.", "usa"),
    ("An", ""),
    ("the sorcerer's stone", "sorcerers stone"),
])
def test_squad_normalisation(raw, normalized):
    assert qa.normalize_answer(raw) == normalized


@pytest.mark.parametrize("pred,gold,f1", [
    ("the cat sat", "a cat sat down", 2 * 1 * (2 / 3) / (1 + 2 / 3)),  # P=1, R=2/3 -> 0.8
    ("Albus Dumbledore", "Dumbledore", 2 * 0.5 * 1 / 1.5),  # P=1/2, R=1 -> 2/3
    ("the sorcerer's stone", "the sorcerers stone", 1.0),
    ("red red blue", "red blue blue", 2 * (2 / 3) * (2 / 3) / (4 / 3)),  # multiset overlap 2
    ("nothing", "something", 0.0),
    ("the", "a", 0.0),  # both normalise to empty: no common token
])
def test_token_f1_hand_cases(pred, gold, f1):
    assert qa.f1_score(pred, gold) == pytest.approx(f1)


def test_exact_match_and_best_over_answers():
    assert qa.exact_match("The Stone.", "stone") == 1.0
    assert qa.exact_match("a stone", "stones") == 0.0
    assert qa.best_over(qa.f1_score, "five stones", ["five", "5"]) == pytest.approx(2 / 3)


@pytest.mark.parametrize("text,answer,ok", [
    (" [Output_Start] his little daughter [Output_End]", "his little daughter", True),
    ("[Output_Start]five[Output_End] and more text [Output_Start] six [Output_End]", "five", True),
    (" [Output_Start] five smooth stones\nQuestion: next", "five smooth stones", False),  # stopped before the end mark
    ("five stones\nQuestion: what", "five stones", False),
    ("", "", False),
])
def test_parse_answer(text, answer, ok):
    assert qa.parse_answer(text) == (answer, ok)


def test_run_qa_scores_and_errors():
    items = {"a": QAItem("a", "t", "Who?", ("his little daughter",)),
             "b": QAItem("b", "t", "How many?", ("five",)),
             "c": QAItem("c", "t", "Empty?", ("x",)),
             "d": QAItem("d", "t", "Marks only?", ("x",))}
    answers = {"Who?": " [Output_Start] His daughter [Output_End]", "How many?": "Five.",
               "Empty?": "  ", "Marks only?": "[Output_Start]  [Output_End]"}

    def gen(req):
        q = req.prompt.rsplit("Question: ", 1)[1].split("\n")[0]
        return answers[q]

    fb = FakeBackend(generate_fn=gen)
    res = drive({k: qa.run_qa(v, GenConfig()) for k, v in items.items()}, lambda s: fb)
    assert res["a"]["f1"] == pytest.approx(qa.f1_score("His daughter", "his little daughter"))
    assert res["a"]["exact_match"] == 0.0 and res["a"]["format_ok"] is True
    assert res["b"]["exact_match"] == 1.0 and res["b"]["format_ok"] is False
    assert isinstance(res["c"], Failure) and res["c"].reason == "empty generation"
    assert isinstance(res["d"], Failure) and "empty answer" in res["d"].reason


def test_qa_prompt_is_figure_7():
    p = qa.qa_prompt(QAItem("a", "t", "Who?", ("x",)), demos=[("Q1?", "A1")])
    assert p.startswith("You will be provided with examples of questions and answers.")
    assert '"[Output_Start] {answer} [Output_End]"' in p
    assert "Question: Q1?\nAnswer: [Output_Start] A1 [Output_End]" in p
    assert p.endswith("Question: Who?\nAnswer:")
