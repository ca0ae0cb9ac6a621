import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import nonliteral as nl
from copyprobe.copying.common import GenConfig
from copyprobe.copying.data import NonLiteralItem
from copyprobe.copying.prompts import EVENT_JUDGE
from copyprobe.drive import Failure, drive


@pytest.mark.parametrize("text,names,expected", [
    ("Scout met Boo Radley at dusk.", ["Arthur", "Boo Radley"], True),  # alias
    ("Scout met Boo, Radley at dusk.", ["Boo Radley"], True),  # punctuation between the words is no boundary problem
    ("Jem's watch was broken.", ["Jem"], True),  # possessive
    ("O'Brien smiled.", ["O'Brien"], True),  # apostrophe inside the name
    ("O’Brien smiled.", ["O'Brien"], True),  # typographic apostrophe
    ("He ate a tomato.", ["Tom"], False),  # not a whole word
    ("Tom-tom drums", ["Tom"], True),  # hyphen splits words
    ("the prince arrived", ["Prince"], True),  # case-insensitive by default
    ("Radley Boo", ["Boo Radley"], False),  # order matters
    ("Atticus", ["Atticus Finch"], False),  # the whole alias is needed
    ("Úrsula Iguarán laughed", ["Úrsula"], True),  # non-ASCII letters are word characters
    ("", ["Scout"], False),
])
def test_has_name(text, names, expected):
    assert nl.has_name(text, names) is expected


def test_case_sensitive_option():
    assert nl.has_name("the prince arrived", ["Prince"], case_sensitive=True) is False
    assert nl.has_name("the Prince arrived", ["Prince"], case_sensitive=True) is True


def test_character_overlap_excludes_characters_named_in_the_prompt():
    chars = [["Scout", "Jean Louise"], ["Jem"], ["Atticus"], ["Boo", "Arthur Radley"], ["Calpurnia"]]
    prompt = "Atticus Finch agrees to defend Tom Robinson."
    story = "Jean Louise and Jem watched Atticus. Arthur Radley left gifts; Calpurnia cooked."
    got = nl.character_overlap(story, chars, prompt)
    assert got["characters_excluded"] == ["Atticus"]
    assert got["characters_found"] == ["Scout", "Jem", "Boo", "Calpurnia"]
    assert got["character_overlap"] == 4
    # a character whose alias (not primary name) is in the prompt is excluded too
    got = nl.character_overlap(story, chars, "Arthur Radley hides inside.")
    assert "Boo" in got["characters_excluded"] and "Boo" not in got["characters_found"]


def test_chunks_of_128_tokens_cover_the_text():
    words = [f"w{i}" for i in range(300)]
    text = " ".join(words[:150]) + ",\n" + " ".join(words[150:])
    chunks = nl.chunk_text(text, 128)
    assert len(chunks) == 3  # 301 tokens (300 words + a comma)
    assert [len(nl._TOKEN.findall(c)) for c in chunks] == [128, 128, 45]
    assert " ".join(chunks).replace(",", " ,").split() == text.replace("\n", " ").replace(",", " ,").split()
    assert nl.chunk_text("") == []


@pytest.mark.parametrize("answer,verdict", [
    ("attributable", True), ("Attributable.", True), ("not attributable", False),
    ("Not Attributable", False), ("The claim is attributable to the reference.", True),
    ("not_attributable", False), ("yes", None), ("", None), ("unattributable", None),
])
def test_backend_judge_parse(answer, verdict):
    assert nl.BackendJudge.parse(answer) is verdict


EVENTS = ("A king orders a census.", "A child is born in a stable.", "Shepherds see angels.",
          "Wise men follow a star.", "The family flees to Egypt.", "The king orders a massacre.")
CHARS = (("Joseph",), ("Mary",), ("Herod", "king Herod"), ("Jesus", "the child"))


def _judge_fn(decide):
    def gen(req):
        p = req.prompt
        if p.startswith("### Instruction:\nPlease solely verify"):
            claim = p.split("Claim: ", 1)[1].split("\n\nReference: ", 1)[0]
            return decide(claim)
        return "Mary and Joseph went to Bethlehem where the child was born, and Herod raged."
    return gen


def test_run_nonliteral_counts_events_and_characters_with_a_backend_judge():
    item = NonLiteralItem("x", "t", "Joseph travels to Bethlehem.", EVENTS, CHARS)
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable" if c in EVENTS[:5] else "not attributable"))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None), max_tokens=50)}, lambda s: fb)["x"]
    assert res["event_overlap"] == 5 and res["event_copied"] is True
    assert res["characters_excluded"] == ["Joseph"]
    assert res["characters_found"] == ["Mary", "Herod", "Jesus"]  # "the child" alias counts for Jesus
    assert res["character_overlap"] == 3 and res["character_copied"] is True
    # the Fig. 8 prompt, one request per (event, chunk)
    assert fb.calls["generate"] == 1 + len(EVENTS) * res["n_chunks"]


def test_unparseable_judgements_are_reported_not_guessed():
    item = NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS)
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable" if c == EVENTS[0] else "maybe?"))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None))}, lambda s: fb)["x"]
    assert res["event_overlap"] is None and res["event_copied"] is None
    assert res["event_error"] == "5 event judgement(s) could not be parsed"
    assert res["events_found"] == [EVENTS[0]]
    assert res["character_overlap"] == 3  # characters are still scored
    # enough events already supported: the decision stands, the exact count does not
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "maybe" if c == EVENTS[5] else "attributable"))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None))}, lambda s: fb)["x"]
    assert res["event_copied"] is True and res["event_overlap"] is None and res["event_overlap_at_least"] == 5


def test_empty_story_is_a_per_item_error():
    item = NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS)
    fb = FakeBackend(generate_fn=lambda r: "Completion:   ")
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None))}, lambda s: fb)["x"]
    assert isinstance(res, Failure) and res.reason == "empty generation"


def test_event_judge_prompt_is_figure_8():
    assert nl.BackendJudge("judge-model").request("E", "S").prompt == (
        "### Instruction:\nPlease solely verify whether the reference can support the claim. "
        "Options: 'attributable' or 'not attributable'.\n### Input:\nClaim: E\n\nReference: S\n\n### Output:")
    assert nl.BackendJudge("judge-model").request("E", "S").model == "judge-model"
    assert "{event}" in EVENT_JUDGE and "{story}" in EVENT_JUDGE


def test_make_judge():
    assert isinstance(nl.make_judge("embedding"), nl.EmbeddingJudge)
    assert nl.make_judge("target").model is None
    assert nl.make_judge("hf:/x").model == "hf:/x"
    assert nl.make_judge(None, 0.3).threshold == 0.3
