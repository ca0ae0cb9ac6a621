import json

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import nonliteral as nl
from copyprobe.copying.common import GenConfig
from copyprobe.copying.data import CopySet, NonLiteralItem, load_copyset
from copyprobe.copying.prompts import EVENT_JUDGE
from copyprobe.copying.runner import CopyConfig, run_copying
from copyprobe.drive import Failure, drive
from copyprobe.errors import ConfigError, RowError


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
    ("not_attributable", False), ("yes", None), ("", None),
    # negated forms are not attributable (the release counts only an answer equal to "attributable")
    ("unattributable", False), ("Non-attributable", False), ("non attributable", False),
    ("Nonattributable.", False), ("not-attributable", False), ("It isn't attributable.", False),
    ("misattributable", None),  # no verdict word
    # the prompt's options echoed: only what follows "Answer:" is the answer
    ("Options: 'attributable' or 'not attributable'. Answer: not attributable", False),
    ("Options: 'attributable' or 'not attributable'. Answer: attributable", True),
    ("Options: 'attributable' or 'not attributable'.", None),  # both, no answer: unreadable
    ("Answer:\nNot attributable", False),
    # a negation a few words before the verdict word, in its sentence
    ("It is not directly attributable to the passage.", False), ("The event is not fully attributable.", False),
    ("It cannot be called attributable.", False), ("Not in the story. It is attributable.", True),
])
def test_backend_judge_parse(answer, verdict):
    assert nl.BackendJudge.parse(answer) is verdict


@pytest.mark.parametrize("reply,verdict", [(" attributable", True), (" not attributable", False), ("", None)])
def test_a_judge_that_echoes_the_prompt_is_read_after_its_output_line(reply, verdict):
    # the Fig. 8 prompt names both options and ends with "### Output:"; a model that
    # repeats it before answering is read from that line on
    prompt = nl.BackendJudge(None).request(EVENTS[0], "Mary and Joseph went to Bethlehem.").prompt
    assert prompt.rstrip().endswith("### Output:")
    assert nl.BackendJudge.parse(prompt + reply) is verdict


def test_negated_answers_do_not_count_events():
    item = NonLiteralItem("x", "t", "Joseph travels to Bethlehem.", EVENTS, CHARS)
    answers = {EVENTS[0]: "attributable", EVENTS[1]: "Non-attributable", EVENTS[2]: "unattributable",
               EVENTS[3]: "Options: 'attributable' or 'not attributable'. Answer: not attributable"}
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: answers.get(c, "not attributable")))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None))}, lambda s: fb)["x"]
    assert res["events_found"] == [EVENTS[0]] and res["event_overlap"] == 1 and res["event_copied"] is False


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


class _BrokenJudge:
    """A judge that fails on every item, as a row error (the driver's kind)."""

    def describe(self):
        return {"judge": "broken"}

    def judge(self, events, chunks):
        raise RowError("the judge's answer was cut off")
        yield  # a generator


def test_a_failing_judge_leaves_the_character_score():
    item = NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS)
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable"))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), _BrokenJudge())}, lambda s: fb)["x"]
    assert not isinstance(res, Failure)
    assert res["character_overlap"] == 3 and res["character_copied"] is True
    assert res["characters_found"] == ["Mary", "Herod", "Jesus"]
    assert res["event_overlap"] is None and res["event_copied"] is None
    assert res["event_error"] == "the event judge failed: the judge's answer was cut off"


def test_a_failing_judge_counts_in_the_character_rate_not_in_the_errors():
    data = CopySet(nonliteral=[NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS),
                               NonLiteralItem("y", "t", "Mary and Joseph travel.", EVENTS, CHARS)])
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable"))
    config = CopyConfig(tasks=("nonliteral",), judge=_BrokenJudge(), nonliteral_max_tokens=50)
    rows, metrics = run_copying(data, lambda s: fb, config)
    assert [r["error"] for r in rows] == [None, None]
    block = metrics["nonliteral"]
    assert block["n"] == 2 and block["n_errors"] == 0
    assert block["character_rate"] == 0.5  # x names Mary, Herod, the child; y's beginning names Mary and Joseph
    assert block["event_rate"] is None and block["n_event_undetermined"] == 2
    assert block["event_rate_bounds"] == [0.0, 1.0]  # nothing determined: anything from none to all


def test_the_event_rate_has_bounds_for_its_undetermined_items():
    from copyprobe.copying.runner import _nonliteral_block
    from copyprobe.copying.summary import summary_lines

    # 2 copied, 3 not, 3 undetermined (each below the threshold, where unreadable answers decide)
    rows = ([{"event_copied": True, "event_overlap": 6, "character_overlap": 1}] * 2
            + [{"event_copied": False, "event_overlap": 1, "character_overlap": 0}] * 3
            + [{"event_copied": None, "event_overlap": None, "character_overlap": 0}] * 3)
    block = _nonliteral_block(rows, CopyConfig(tasks=("nonliteral",)))
    assert block["event_rate"] == pytest.approx(2 / 5)  # the determined ones: leans high
    assert block["event_rate_bounds"] == pytest.approx([2 / 8, 5 / 8]) and block["n_event_undetermined"] == 3
    lines = summary_lines({"nonliteral": {**block, "n": 8, "n_errors": 0}}, {})
    assert any("3 item(s) undetermined" in line and "25.0% to 62.5%" in line for line in lines)


def test_a_judge_whose_requests_fail_leaves_the_character_score():
    # the judge's server answers each of its requests with a failure (HTTP 500 after the
    # retries): the driver raises it in the run, which keeps the story's character score
    from copyprobe.backends.base import RequestFailed

    class JudgeDown(FakeBackend):
        def _answer_generate(self, requests, progress=None, on_result=None):
            return [RequestFailed("HTTP 500 after 5 retries") if r.prompt.startswith("### Instruction:")
                    else super(JudgeDown, self)._answer_generate([r])[0] for r in requests]

    item = NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS)
    fb = JudgeDown(generate_fn=_judge_fn(lambda c: "attributable"))
    res = drive({"x": nl.run_nonliteral(item, GenConfig(), nl.BackendJudge(None), max_tokens=50)}, lambda s: fb)["x"]
    assert not isinstance(res, Failure)
    assert res["character_overlap"] == 3 and res["event_overlap"] is None
    assert res["event_error"] == "the event judge failed: request failed: HTTP 500 after 5 retries"


def test_an_embedding_model_that_cannot_load_stops_the_run(tmp_path):
    pytest.importorskip("sentence_transformers")
    (tmp_path / "config.json").write_text("{}")  # a directory, but no model in it
    item = NonLiteralItem("x", "t", "Joseph travels.", EVENTS, CHARS)
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable"))
    judge = nl.EmbeddingJudge(model_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"^cannot load the embedding model in .+: "):
        drive({"x": nl.run_nonliteral(item, GenConfig(), judge)}, lambda s: fb)


def test_an_item_without_characters_is_scored_zero_of_zero(tmp_path):
    rows = [{"id": "n0", "title": "herzog", "input": "Joseph travels.", "reference_events": str(list(EVENTS)),
             "reference_characters": "[]"},  # as 4 of the released items
            {"id": "n1", "title": "t", "input": "Joseph travels.", "reference_events": list(EVENTS),
             "reference_characters": [list(c) for c in CHARS]}]
    path = tmp_path / "data.nonliteral.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    data = load_copyset(path)
    assert data.errors == [] and data.nonliteral[0].reference_characters == ()
    fb = FakeBackend(generate_fn=_judge_fn(lambda c: "attributable" if c in EVENTS[:5] else "not attributable"))
    out, metrics = run_copying(data, lambda s: fb, CopyConfig(tasks=("nonliteral",), judge=nl.BackendJudge(None)))
    empty = out[0]
    assert empty["error"] is None and empty["event_overlap"] == 5 and empty["event_copied"] is True
    assert empty["character_overlap"] == 0 and empty["n_reference_characters"] == 0
    assert empty["character_copied"] is False
    # in the character rate as not copied, as the released summary counts it
    block = metrics["nonliteral"]
    assert block["n"] == 2 and block["n_errors"] == 0
    assert block["character_rate"] == 0.5 and block["event_rate"] == 1.0


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
