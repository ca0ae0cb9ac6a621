"""DE-COP: paraphrase parsing and retries, the 24 orderings, answer parsing, scoring
arithmetic in both modes, calibration, BookTection rows, per-row failures."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from copyprobe.backends.base import ChoiceLogprobs, GenerateRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.decop import (
    DECOP,
    LETTERS,
    ORDERINGS,
    PARAPHRASE_PROMPT_LONG,
    PARAPHRASE_PROMPT_ONE,
    PARAPHRASE_PROMPT_SHORT,
    calibration_offsets,
    clean_rewrite,
    letter_probs,
    paraphrase_prompt,
    parse_calibration,
    parse_letter,
    parse_paraphrases,
    word_similarity,
)
from copyprobe.registry import make_method, method_class
from copyprobe.drive import Failure, drive

ORIGINAL = "The old lighthouse keeper climbed the stairs every night to light the lamp for the ships."


def paraphrases_of(text: str) -> list[str]:
    words = text.split()
    return [
        "Para one: " + " ".join(reversed(words)),
        "Para two: " + " ".join(w.upper() for w in words),
        "Para three: " + " ".join(words[1:] + words[:1]),
    ]


def paraphraser_answer(text: str) -> str:
    b, c, d = paraphrases_of(text)
    return f"Sure! Here are the paraphrases.\n\nExample B: {b}\n\nExample C: {c}\n\nExample D: {d}\n"


def passage_in(prompt: str) -> str:
    return prompt.rsplit("Example A: ", 1)[1].strip()


def options_in(messages) -> dict[str, str]:
    user = messages[-1][1]
    found = dict(re.findall(r"(?m)^([A-D])\. (.*)$", user))
    assert sorted(found) == list(LETTERS), user
    return found


def oracle(originals: set[str], wrong_first: int = 0):
    """A model that paraphrases well and always finds the verbatim option."""
    seen = Counter()

    def fn(request: GenerateRequest) -> str:
        content = request.messages[-1][1]
        if "Example A:" in content:
            text = passage_in(content)
            seen[text] += 1
            if seen[text] <= wrong_first:
                return "I cannot help with that."
            return paraphraser_answer(text)
        options = options_in(request.messages)
        letter = next(l for l, o in options.items() if o in originals)
        return f"{letter}"

    return fn


# -- parsing ------------------------------------------------------------------------------

def test_parse_paraphrases_plain_and_markdown():
    b, c, d = paraphrases_of(ORIGINAL)
    assert parse_paraphrases(paraphraser_answer(ORIGINAL), ORIGINAL) == (b, c, d)
    md = f"**Example B:** {b}\n\n**Example C:** {c}\n\n**Example D:** {d}\n\n—\nExample A: {ORIGINAL}"
    # the echoed "Example A" after the separator is not part of D
    assert parse_paraphrases(md, ORIGINAL) == (b, c, d)
    angle = f"<Example B>: {b}\n<Example C>: {c}\n<Example D>: {d}"
    assert parse_paraphrases(angle, ORIGINAL) == (b, c, d)


@pytest.mark.parametrize(
    "output, reason",
    [
        ("Example B: one\n\nExample C: two", "missing Example D"),
        ("no structure at all", "missing Example B, Example C, Example D"),
        (f"Example B: {ORIGINAL}\nExample C: two x\nExample D: three y", "repeats the original"),
        ("Example B: same\nExample C: same\nExample D: other", "not distinct"),
        ("Example B: <paraphrase 1>\nExample C: <paraphrase 2>\nExample D: <paraphrase 3>", "placeholders"),
    ],
)
def test_parse_paraphrases_rejects(output, reason):
    with pytest.raises(ValueError, match=reason):
        parse_paraphrases(output, ORIGINAL)


@pytest.mark.parametrize(
    "text, letter",
    [
        ("B", "B"), (" C.", "C"), ("(D)", "D"), ("'A'", "A"), ("Answer: C", "C"),
        ("The answer is B.", "B"), ("I think option D is verbatim", "D"),
        ("**B**", "B"), ("B. Harry was becoming frantic", "B"),
        ("", None), ("I don't know", None), ("A or B", "A"), ("Between C and D", None),
    ],
)
def test_parse_letter(text, letter):
    assert parse_letter(text) == letter


def test_prompt_choice_by_estimated_tokens():
    short = " ".join(["word"] * 98)  # 98 * 1.3 = 127.4 -> 128 tokens: B.1
    long = " ".join(["word"] * 99)  # 128.7 -> 129: B.2
    assert paraphrase_prompt(short) == PARAPHRASE_PROMPT_SHORT.format(ref_text=short)
    assert paraphrase_prompt(long) == PARAPHRASE_PROMPT_LONG.format(ref_text=long)
    assert paraphrase_prompt(long, short_tokens=200).startswith("Generate always 3 possible paraphrases")


# -- orderings ------------------------------------------------------------------------------

def test_24_orderings_cover_every_position():
    method = DECOP()
    orderings = method.orderings("ORIG", ["p1", "p2", "p3"])
    assert len(orderings) == 24 == len(set(o for o, _ in orderings)) == len(ORDERINGS)
    for options, correct in orderings:
        assert sorted(options) == sorted(["ORIG", "p1", "p2", "p3"])
        assert options[LETTERS.index(correct)] == "ORIG"
    # each option sits at each position exactly 6 times (the selection-bias balance)
    for position in range(4):
        assert Counter(o[position] for o, _ in orderings) == {"ORIG": 6, "p1": 6, "p2": 6, "p3": 6}


def test_mcq_prompt_uses_title_and_author():
    ex = Example(id="1", text=ORIGINAL, meta={"title": "The Lamp", "author": "A. Writer"})
    assert DECOP.question(ex) == "Question: Which of the following passages is verbatim from the \u201cThe Lamp\u201d by A. Writer?"
    assert "from your training data" in DECOP.question(Example(id="2", text=ORIGINAL))
    messages = DECOP.mcq_messages(DECOP.question(ex), ["w", "x", "y", "z"])
    assert messages[0][0] == "system" and "Output only the letter" in messages[0][1]
    assert messages[1][1].endswith("A. w\n\nB. x\n\nC. y\n\nD. z\n\nAnswer:")


# -- full runs (blackbox) -------------------------------------------------------------------

def run_one(method, example, target, others=None):
    method.validate()
    others = others or {}
    results = drive({example.id: method.run(example)}, lambda spec: target if spec is None else others[spec])
    return results[example.id]


def test_oracle_scores_one_and_records_answers():
    backend = FakeBackend(generate_fn=oracle({ORIGINAL}))
    score = run_one(DECOP(), Example(id="p", text=ORIGINAL), backend)
    assert score.value == 1.0
    assert score.details["n_correct"] == 24 and score.details["answers"] == score.details["correct"]
    assert score.details["paraphrases"] == paraphrases_of(ORIGINAL)
    assert backend.calls["generate"] == 1 + 24


def test_always_a_scores_a_quarter():
    # the verbatim option is at A in exactly 6 of the 24 orderings
    def fn(request):
        return paraphraser_answer(passage_in(request.messages[-1][1])) if "Example A:" in request.messages[-1][1] else "A"

    score = run_one(DECOP(), Example(id="p", text=ORIGINAL), FakeBackend(generate_fn=fn))
    assert score.value == pytest.approx(6 / 24)


def test_unparseable_answers_count_as_wrong_and_all_unparseable_fails_the_row():
    calls = Counter()

    def fn(request):
        content = request.messages[-1][1]
        if "Example A:" in content:
            return paraphraser_answer(passage_in(content))
        calls["mcq"] += 1
        return "A" if calls["mcq"] % 2 else "no idea"

    score = run_one(DECOP(), Example(id="p", text=ORIGINAL), FakeBackend(generate_fn=fn))
    # requests are answered in ordering order: odd ones say "A"; A is correct in orderings 0-5
    expected = sum(1 for i in range(24) if i % 2 == 0 and ORDERINGS[i].index(0) == 0)
    assert score.details["n_unanswered"] == 12
    assert score.value == pytest.approx(expected / 24)

    def silent(request):
        content = request.messages[-1][1]
        return paraphraser_answer(passage_in(content)) if "Example A:" in content else "hmm"

    result = run_one(DECOP(), Example(id="p", text=ORIGINAL), FakeBackend(generate_fn=silent))
    assert isinstance(result, Failure) and "no parseable letter" in result.reason


def test_paraphrase_retry_with_new_seed_then_success():
    backend = FakeBackend(generate_fn=oracle({ORIGINAL}, wrong_first=2))
    seeds = []
    original_fn = backend.generate_fn

    def spy(request):
        if "Example A:" in request.messages[-1][1]:
            seeds.append(request.seed)
            assert request.temperature == pytest.approx(0.1)
        return original_fn(request)

    backend.generate_fn = spy
    score = run_one(DECOP(seed=7), Example(id="p", text=ORIGINAL), backend)
    assert seeds == [7, 8, 9]
    assert score.value == 1.0 and score.details["paraphrase_attempts"] == 3


def test_paraphrase_failure_is_a_row_error_not_a_silent_drop():
    backend = FakeBackend(generate_fn=oracle({ORIGINAL}, wrong_first=10))
    result = run_one(DECOP(paraphrase_attempts=2), Example(id="p", text=ORIGINAL), backend)
    assert isinstance(result, Failure)
    assert "could not be parsed in 2 attempts" in result.reason and "missing Example B" in result.reason
    assert backend.calls["generate"] == 2


def test_paraphraser_is_another_model():
    target = FakeBackend(spec="target", generate_fn=oracle({ORIGINAL}))
    para = FakeBackend(spec="para", generate_fn=oracle({ORIGINAL}))
    method = DECOP(paraphraser="hf:para-model")
    assert method.models() == {"hf:para-model"}
    score = run_one(method, Example(id="p", text=ORIGINAL), target, {"hf:para-model": para})
    assert score.value == 1.0
    assert para.calls["generate"] == 1 and target.calls["generate"] == 24


def test_booktection_rows_used_as_they_are():
    b, c, d = paraphrases_of(ORIGINAL)
    meta = {"Example_A": b, "Example_B": c, "Example_C": ORIGINAL, "Example_D": d, "Answer": "C"}
    backend = FakeBackend(generate_fn=oracle({ORIGINAL}))
    score = run_one(DECOP(), Example(id="p", text="ignored here", meta=meta), backend)
    assert score.value == 1.0 and score.details["paraphrases_from"] == "data"
    assert sorted(score.details["paraphrases"]) == sorted([b, c, d])
    assert backend.calls["generate"] == 24  # no paraphrase request


def test_booktection_row_with_a_missing_option_fails_that_row():
    meta = {"Example_A": "x", "Example_B": "y", "Example_C": ORIGINAL, "Answer": "C"}
    backend = FakeBackend(generate_fn=oracle({ORIGINAL}))
    result = run_one(DECOP(), Example(id="p", text=ORIGINAL, meta=meta), backend)
    assert isinstance(result, Failure) and "Example_D" in result.reason
    assert backend.calls["generate"] == 0
    bad_answer = dict(meta, Example_D="z", Answer="E")
    result = run_one(DECOP(), Example(id="p", text=ORIGINAL, meta=bad_answer), backend)
    assert isinstance(result, Failure) and "Answer" in result.reason


# -- logit mode -----------------------------------------------------------------------------

class LetterBiasBackend(FakeBackend):
    """P(letter) = softmax(bias[letter] + boost * [option at letter is verbatim])."""

    def __init__(self, bias, boost, originals, drop=()):
        super().__init__(generate_fn=oracle(originals))
        self.bias, self.boost, self.originals, self.drop = bias, boost, originals, drop

    def _answer_choice_logprobs(self, requests, progress=None):
        out = []
        for r in requests:
            options = options_in(r.messages)
            logits = {l: self.bias[l] + (self.boost if options[l] in self.originals else 0.0) for l in LETTERS}
            norm = math.log(sum(math.exp(v) for v in logits.values()))
            out.append(ChoiceLogprobs({l: v - norm for l, v in logits.items() if l not in self.drop}))
            self.calls[r.kind] += 1
        return out


def probs_for(bias, boost, correct):
    logits = {l: bias[l] + (boost if l == correct else 0.0) for l in LETTERS}
    total = sum(math.exp(v) for v in logits.values())
    return {l: math.exp(v) / total for l, v in logits.items()}


def test_logit_mode_argmax_and_letter_probs():
    bias = {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    backend = LetterBiasBackend(bias, boost=0.5, originals={ORIGINAL})
    score = run_one(DECOP(mode="logit"), Example(id="p", text=ORIGINAL), backend)
    # A's bias (1.0) beats the verbatim boost (0.5) everywhere: always A -> 6/24
    assert score.value == pytest.approx(0.25)
    assert backend.calls["choice_logprobs"] == 24 and backend.calls["generate"] == 1
    expected = {l: 0.0 for l in LETTERS}
    for perm in ORDERINGS:
        p = probs_for(bias, 0.5, LETTERS[perm.index(0)])
        for l in LETTERS:
            expected[l] += p[l] / 24
    assert score.details["letter_probs"] == pytest.approx(expected)


def test_calibration_removes_the_letter_bias():
    bias = {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    clean_text = "A completely different passage about a fisherman and his small boat at dawn."
    clean_backend = LetterBiasBackend(bias, boost=0.5, originals={clean_text})
    clean = run_one(DECOP(mode="logit"), Example(id="c", text=clean_text), clean_backend)
    offsets = calibration_offsets([clean.details["letter_probs"]])
    assert sum(offsets.values()) == pytest.approx(0.0)  # probabilities sum to 1 on both sides
    assert offsets["A"] < 0 < offsets["B"]
    spec = ",".join(f"{l}:{v!r}" for l, v in offsets.items())
    method = make_method("decop", mode="logit", calibration=spec)
    backend = LetterBiasBackend(bias, boost=0.5, originals={ORIGINAL})
    score = run_one(method, Example(id="p", text=ORIGINAL), backend)
    # independent check: calibrated argmax per ordering
    n = 0
    for perm in ORDERINGS:
        correct = LETTERS[perm.index(0)]
        p = probs_for(bias, 0.5, correct)
        n += max(LETTERS, key=lambda l: p[l] + offsets[l]) == correct
    assert n == 24
    assert score.value == 1.0 and score.details["calibration"] == pytest.approx(offsets)


def test_missing_letters_get_zero_probability_and_none_at_all_fails():
    assert letter_probs(ChoiceLogprobs({"A": math.log(0.2), "C": math.log(0.6)})) == pytest.approx(
        {"A": 0.25, "B": 0.0, "C": 0.75, "D": 0.0}
    )
    assert letter_probs(ChoiceLogprobs({"X": -0.1})) is None
    backend = LetterBiasBackend({l: 0.0 for l in LETTERS}, 0.5, {ORIGINAL}, drop=LETTERS)
    result = run_one(DECOP(mode="logit"), Example(id="p", text=ORIGINAL), backend)
    assert isinstance(result, Failure) and "no log-prob for any of A-D" in result.reason


def test_calibration_offsets_average_documents_first():
    rows = [
        {"A": 0.4, "B": 0.2, "C": 0.2, "D": 0.2},
        {"A": 0.6, "B": 0.2, "C": 0.1, "D": 0.1},
        {"A": 0.1, "B": 0.3, "C": 0.3, "D": 0.3},
    ]
    offsets = calibration_offsets(rows, doc_ids=["x", "x", "y"])
    # doc x mean A = 0.5, doc y = 0.1 -> mean 0.3 -> delta -0.05 (not 0.25 - 1.1/3)
    assert offsets["A"] == pytest.approx(0.25 - 0.3)
    assert offsets["D"] == pytest.approx(0.25 - (0.15 + 0.3) / 2)


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        ("A:0.1,B:-0.1,C:0,D:0", {"A": 0.1, "B": -0.1, "C": 0.0, "D": 0.0}),
        ("0.1,-0.1,0,0", {"A": 0.1, "B": -0.1, "C": 0.0, "D": 0.0}),
        ((0.1, -0.1, 0, 0), {"A": 0.1, "B": -0.1, "C": 0.0, "D": 0.0}),
        ({"a": 1, "b": 2, "c": 3, "d": 4}, {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}),
    ],
)
def test_parse_calibration(value, expected):
    assert parse_calibration(value) == expected


@pytest.mark.parametrize(
    "params, message",
    [
        ({"mode": "grey"}, "mode must be"),
        ({"calibration": "0.1,0,0,0"}, "needs decop.mode=logit"),
        ({"mode": "logit", "calibration": "0.1,0,0"}, "4 offsets"),
        ({"mode": "logit", "calibration": "A:1,B:2,C:x,D:0"}, "must be numbers"),
        ({"paraphrase_attempts": 0}, "integer >= 1"),
        ({"score": "probability"}, "score=probability needs decop.mode=logit"),
        ({"paraphrase_style": "five"}, "paraphrase_style must be"),
        ({"max_similarity": 1.5}, "max_similarity"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ConfigError, match=message):
        make_method("decop", **params)


def test_registered_black_box():
    cls = method_class("decop")
    assert cls is DECOP and cls.access.startswith("black-box")
    assert set(DECOP.param_names()) >= {"mode", "paraphraser", "calibration"}


def test_empty_passage_fails_row():
    with pytest.raises(RowError):
        next(DECOP().run(Example(id="e", text="   ")))


def test_rotations_put_each_option_in_each_position_once():
    from copyprobe.registry import make_method

    method = make_method("decop", orderings_asked="rotations")
    pairs = method.orderings("orig", ("p1", "p2", "p3"))
    assert len(pairs) == 4
    for position in range(4):
        assert sorted(options[position] for options, _ in pairs) == sorted(["orig", "p1", "p2", "p3"])
    assert all(options["ABCD".index(answer)] == "orig" for options, answer in pairs)
    assert len(make_method("decop").orderings("orig", ("p1", "p2", "p3"))) == 24


# -- one rewrite per request ------------------------------------------------------------------

def rewriter(answers):
    """A paraphraser that gives the next of ``answers`` to each rewrite request (the
    passage itself for "COPY") and always finds the verbatim option."""
    queue = list(answers)
    asked = []

    def fn(request):
        content = request.messages[-1][1]
        if content.startswith("Rewrite this entire text"):
            asked.append((request.seed, request.temperature, request.max_tokens))
            answer = queue.pop(0)
            return ORIGINAL if answer == "COPY" else answer
        options = options_in(request.messages)
        return next(l for l, o in options.items() if o == ORIGINAL)

    return fn, asked


REWRITES = [
    "Each night the aged lighthouse keeper went up the stairs to kindle the lamp for the passing ships.",
    "Night after night, the elderly keeper of the lighthouse ascended the stairs to light a lamp so ships could see.",
    "Every night the old keeper made the climb up the lighthouse stairs and lit its lamp to guide the ships.",
]


def test_one_per_request_asks_three_and_reasks_copies_with_new_seeds():
    good = REWRITES
    fn, asked = rewriter(["COPY", good[0], "Rewritten text:\n" + good[0], "  \"" + good[1] + "\" ", good[2]])
    method = DECOP(paraphrase_style="one_per_request", seed=5)
    score = run_one(method, Example(id="p", text=ORIGINAL), FakeBackend(generate_fn=fn))
    assert score.value == 1.0
    # round 1: three requests (seeds 5, 6, 7): a copy of the passage, a rewrite, the same rewrite under a
    # label line; round 2: the two rejected ones again (seeds 8, 9)
    assert [seed for seed, _, _ in asked] == [5, 6, 7, 8, 9]
    assert score.details["paraphrases"] == good
    assert score.details["paraphrase_attempts"] == 5
    # the default temperature of this style, and a budget of 2x the estimated tokens + 32
    assert {t for _, t, _ in asked} == {0.7}
    assert {m for _, _, m in asked} == {2 * math.ceil(len(ORIGINAL.split()) * 1.3) + 32}
    request = method.paraphrase_request(ORIGINAL, 0)
    assert request.messages == (("user", PARAPHRASE_PROMPT_ONE.format(ref_text=ORIGINAL)),)


def test_one_per_request_fails_the_row_with_reasons_after_its_rounds():
    fn, asked = rewriter(["COPY"] * 6)
    result = run_one(DECOP(paraphrase_style="one_per_request", paraphrase_attempts=2),
                     Example(id="p", text=ORIGINAL), FakeBackend(generate_fn=fn))
    assert isinstance(result, Failure)
    assert "0 usable rewrites of 3 in 6 requests" in result.reason and "near copy of the passage" in result.reason
    assert len(asked) == 6


def test_one_per_request_reasks_rewrites_of_the_wrong_length_or_meaning():
    from copyprobe.methods.decop import content_recall, rewrite_problem

    padded = REWRITES[0] + " " + REWRITES[1]
    talk = "Sure, I can rewrite this text using different words for you while keeping its meaning intact, friend."
    assert rewrite_problem(ORIGINAL, padded, [], 0.9, 0.3).endswith("x the passage's length")
    assert content_recall(ORIGINAL, talk) < 0.3
    assert rewrite_problem(ORIGINAL, talk, [], 0.9, 0.3).startswith("keeps 0.")
    assert rewrite_problem(ORIGINAL, talk, [], 0.9, 0.0) == ""  # min_recall 0: only copies and lengths
    fn, asked = rewriter([padded, talk, REWRITES[0], REWRITES[1], REWRITES[2]])
    score = run_one(DECOP(paraphrase_style="one_per_request"), Example(id="p", text=ORIGINAL),
                    FakeBackend(generate_fn=fn))
    assert score.details["paraphrases"] == [REWRITES[0], REWRITES[1], REWRITES[2]] and len(asked) == 5


def test_clean_rewrite_and_word_similarity():
    assert clean_rewrite("Here is the rewrite:\nThe keeper climbed.\n") == "The keeper climbed."
    # a first line that is the text itself (no colon) is kept
    assert clean_rewrite("The keeper\nclimbed.") == "The keeper climbed."
    assert word_similarity("The keeper climbed", "the KEEPER climbed!") == 1.0
    # difflib's ratio over words: 2 * matches / total words
    assert word_similarity("a b c d", "a b x y") == pytest.approx(2 * 2 / 8)


def test_probability_score_is_the_mean_probability_of_the_verbatim_option():
    bias = {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    backend = LetterBiasBackend(bias, boost=0.5, originals={ORIGINAL})
    method = DECOP(mode="logit", score="probability", orderings_asked="rotations")
    score = run_one(method, Example(id="p", text=ORIGINAL), backend)
    expected = sum(probs_for(bias, 0.5, LETTERS[r.index(0)])[LETTERS[r.index(0)]] for r in
                   [tuple((i + k) % 4 for i in range(4)) for k in range(4)]) / 4
    assert score.value == pytest.approx(expected)
    # accuracy on the same answers is 0.25 (A always wins); the probability still sees the boost
    assert score.details["n_correct"] == 1 and score.value > 0.25


def test_probability_score_ignores_calibration_offsets_even_unbalanced_ones():
    # the `score` help says decop.calibration does not change it: offsets that do not sum
    # to 0 (hand-set) would move a calibrated probability, but the score reads the raw ones
    bias = {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    backend = LetterBiasBackend(bias, boost=0.5, originals={ORIGINAL})
    plain = run_one(DECOP(mode="logit", score="probability", orderings_asked="rotations"),
                    Example(id="p", text=ORIGINAL), backend)
    calibrated = run_one(DECOP(mode="logit", score="probability", orderings_asked="rotations",
                               calibration="A:-0.9,B:0.3,C:0.2,D:0.1"),
                         Example(id="p", text=ORIGINAL), backend)
    assert calibrated.details["answers"] != plain.details["answers"]  # the offsets do act on the argmax
    assert calibrated.value == plain.value
