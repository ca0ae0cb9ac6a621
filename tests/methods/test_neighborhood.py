"""Neighbourhood comparison: scoring arithmetic, neighbour construction, driven runs."""

from __future__ import annotations

import math

import pytest

from copyprobe.backends.base import Generation, TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import CapabilityError, ConfigError
from copyprobe.methods.base import Score
from copyprobe.methods.neighborhood import (
    apply_substitutes,
    choose_positions,
    first_word,
    neighbourhood_score,
    pick_candidate,
    replaceable_words,
    word_candidates,
)
from copyprobe.registry import make_method
from copyprobe.drive import DriveStats, Failure, drive
from model_helpers import FAMOUS_AND_NONSENSE, model_fixture




def ll(backend, text):
    """Mean token log-prob of ``text`` straight from the backend."""
    (resp,) = backend.answer([TokenLogprobsRequest(text, stats=False)])
    return sum(resp.logprobs) / len(resp.logprobs)


def run_all(method, texts, backend, stats=None, backends=None):
    runs = {t: method.run(Example(id=t, text=t)) for t in texts}
    route = backends or {}
    return drive(runs, backend_for=lambda spec: route.get(spec, backend), stats=stats)


def test_score_arithmetic_by_hand():
    # ll(text) = -2.0; neighbours -3.0 and -2.5 -> mean -2.75 -> score 0.75
    assert neighbourhood_score(-2.0, [-3.0, -2.5]) == pytest.approx(0.75)
    assert neighbourhood_score(-4.0, [-3.0]) == pytest.approx(-1.0)


def test_replaceable_words_skip_the_first_word_and_punctuation():
    text = "Hello, big world! It's 42."
    spans = replaceable_words(text)
    assert [text[a:b] for a, b in spans] == ["big", "world", "It's", "42"]


def test_apply_substitutes_keeps_spacing_case_and_counts_changes():
    text = "The Cat sat, quietly."
    spans = replaceable_words(text)  # Cat, sat, quietly
    new, changed = apply_substitutes(text, spans, ["dog", "SAT", None])
    assert new == "The Dog sat, quietly." and changed == 1  # "SAT" == "sat": unchanged


def test_first_word_of_a_generation():
    assert first_word(" river bank") == "river"
    assert first_word("\n don't go") == "don't"
    assert first_word(" ...") is None


def test_positions_are_seeded_and_differ_between_neighbours():
    text = "one two three four five six seven eight nine ten eleven"
    a = [choose_positions(text, 10, 0.2, seed=0, neighbour=j) for j in range(5)]
    b = [choose_positions(text, 10, 0.2, seed=0, neighbour=j) for j in range(5)]
    assert a == b and all(len(p) == 2 for p in a)
    assert len({tuple(p) for p in a}) > 1
    assert choose_positions(text, 10, 0.2, seed=1, neighbour=0) != a[0] or \
        choose_positions(text, 10, 0.2, seed=1, neighbour=1) != a[1]
    assert choose_positions(text, 3, 0.01, 0, 0).__len__() == 1  # at least one word


class TopFake(FakeBackend):
    """FakeBackend whose generations also carry top next-token alternatives."""

    def __init__(self, top, **kwargs):
        super().__init__(**kwargs)
        self.top = top  # {piece: logprob}
        self.seen = []

    def _answer_generate(self, requests, progress=None):
        self.seen.extend(requests)
        out = super()._answer_generate(requests, progress)
        return [Generation(text=g.text, top_logprobs=[dict(self.top)]) for g in out]


def test_top_candidates_filtering_by_hand():
    gen = Generation(text="", top_logprobs=[{" dog": -0.5, " cat": -1.0, "s": -2.0, " ,": -2.5, "dog": -3.0}])
    text = "the cat sat"
    # replacing "cat" (after a space): " dog" qualifies; " cat" is the original; "s", "dog"
    # lack the leading space; " ," is no word
    assert word_candidates(gen, text, (4, 7), "target") == [("dog", pytest.approx(math.exp(-0.5)))]
    glued = "(cat) sat"  # "cat" follows "(": only pieces without a leading space fit
    assert [w for w, _ in word_candidates(gen, glued, (1, 4), "target")] == ["s", "dog"]
    assert word_candidates(Generation(text="", top_logprobs=[{" cat": -1.0}]), text, (4, 7), "t") == []
    with pytest.raises(CapabilityError, match="neighborhood.proposals to sample"):
        word_candidates(Generation(text="x"), text, (4, 7), "target")


def test_pick_candidate_follows_probabilities_and_seeds():
    options = [("dog", 0.9), ("cow", 0.1)]
    picks = [pick_candidate(options, 0, j, 4) for j in range(400)]
    assert picks == [pick_candidate(options, 0, j, 4) for j in range(400)]
    assert 320 < picks.count("dog") < 390  # about 90 %
    assert pick_candidate([], 0, 0, 4) is None


def test_top_mode_shares_one_greedy_request_per_position():
    backend = TopFake({" zebra": -0.1, " yak": -2.0})
    text = "alpha beta gamma delta"
    method = make_method("neighborhood", n_neighbours=6, fraction=1.0)  # every word, every neighbour
    stats = DriveStats()
    result = run_all(method, [text], backend, stats=stats)[text]
    # 3 replaceable words -> 3 greedy one-token requests, shared by the 6 neighbours
    assert len(backend.seen) == 3 and backend.calls["generate"] == 3
    assert all(r.temperature == 0 and r.max_tokens == 1 and r.top_logprobs == 10 for r in backend.seen)
    assert [r.prompt for r in backend.seen] == ["alpha", "alpha beta", "alpha beta gamma"]
    # every neighbour is one of the 2^3 zebra/yak combinations; score = ll(text) - their mean
    spans = replaceable_words(text)
    lls = []
    for j in range(6):
        words = [pick_candidate([("zebra", math.exp(-0.1)), ("yak", math.exp(-2.0))], 0, j, a) for a, _ in spans]
        lls.append(ll(backend, apply_substitutes(text, spans, words)[0]))
    assert result.value == pytest.approx(ll(backend, text) - sum(lls) / 6)
    assert result.details["neighbours"] == 6 and stats.rounds == 2


def test_top_mode_members_outscore_non_members():
    members = [
        "the old lighthouse keeper climbed the spiral stairs every evening at dusk",
        "rain fell softly on the copper roofs of the sleeping harbour town",
    ]
    others = [
        "quarterly revenue figures exceeded analyst expectations across all regions",
        "engineers replaced one faulty valve before another pressure test resumed",
    ]
    top = {" stone": -1.0, " river": -1.2, " window": -1.5, " paper": -1.7, " garden": -2.0}
    backend = TopFake(top, member_texts=members, boost=6.0)
    results = run_all(make_method("neighborhood", fraction=0.3), members + others, backend)
    assert min(results[t].value for t in members) > max(results[t].value for t in others)


def test_full_replacement_scored_by_hand():
    """fraction=1 replaces every replaceable word, so every neighbour is the same
    text and the score is ll(text) - ll(that text)."""
    backend = FakeBackend(generate_fn=lambda r: " zebra crossing")
    method = make_method("neighborhood", n_neighbours=3, fraction=1.0, proposals="sample")
    text = "alpha beta gamma"
    stats = DriveStats()
    result = run_all(method, [text], backend, stats=stats)[text]
    assert isinstance(result, Score)
    expected = ll(backend, text) - ll(backend, "alpha zebra zebra")
    assert result.value == pytest.approx(expected)
    assert result.details["neighbours"] == 3 and result.details["words_replaced"] == 2
    assert stats.rounds == 2


def test_partial_replacement_requests_and_determinism():
    seen = []

    def propose(request):
        seen.append(request)
        return f" w{request.seed % 1000}"

    text = "the quick brown fox jumps over the lazy dog today"
    method = make_method("neighborhood", n_neighbours=4, fraction=0.25, seed=7, proposals="sample")
    first = run_all(method, [text], FakeBackend(generate_fn=propose))[text]
    requests = list(seen)
    # 9 replaceable words, round(0.25 * 9) = 2 per neighbour, 4 neighbours
    assert len(requests) == 8
    for r in requests:
        assert text.startswith(r.prompt) and r.prompt == r.prompt.rstrip()
        assert r.temperature == 1.0 and r.seed is not None and r.model is None and r.cacheable()
    assert len({r.seed for r in requests}) == 8
    seen.clear()
    again = run_all(method, [text], FakeBackend(generate_fn=propose))[text]
    assert again.value == pytest.approx(first.value) and seen == requests
    assert first.details["neighbours"] == 4 and first.details["words_replaced"] == 2


def test_neighbour_score_equals_hand_mean_over_built_neighbours():
    backend = FakeBackend(generate_fn=lambda r: " zz" + str(r.seed % 97))
    text = "a b c d e f"
    method = make_method("neighborhood", n_neighbours=5, fraction=0.4, seed=3, proposals="sample")
    result = run_all(method, [text], backend)[text]
    spans = replaceable_words(text)
    neighbour_lls = []
    for j in range(5):
        pos = choose_positions(text, len(spans), 0.4, 3, j)
        words = []
        for i in pos:
            from copyprobe.methods.neighborhood import substitute_seed
            words.append("zz" + str(substitute_seed(3, j, spans[i][0]) % 97))
        neighbour, _ = apply_substitutes(text, [spans[i] for i in pos], words)
        neighbour_lls.append(ll(backend, neighbour))
    expected = ll(backend, text) - sum(neighbour_lls) / len(neighbour_lls)
    assert result.value == pytest.approx(expected)


def test_members_outscore_non_members_on_fake_backend():
    members = [
        "the old lighthouse keeper climbed the spiral stairs every evening at dusk",
        "rain fell softly on the copper roofs of the sleeping harbour town",
        "she folded the letter twice and hid it beneath the loose floorboard",
    ]
    others = [
        "quarterly revenue figures exceeded analyst expectations across all regions",
        "a committee postponed its vote until our revised budget arrives",
        "engineers replaced one faulty valve before another pressure test resumed",
    ]
    vocab = ["stone", "river", "window", "paper", "garden", "engine", "silver", "market"]
    backend = FakeBackend(member_texts=members, boost=6.0,
                          generate_fn=lambda r: " " + vocab[r.seed % len(vocab)])
    method = make_method("neighborhood", n_neighbours=10, fraction=0.3, proposals="sample")
    results = run_all(method, members + others, backend)
    assert min(results[t].value for t in members) > max(results[t].value for t in others)


def test_separate_neighbour_model_gets_the_generations():
    target = FakeBackend(spec="target", generate_fn=lambda r: pytest.fail("target asked to generate"))
    proposer = FakeBackend(spec="proposer", generate_fn=lambda r: " other")
    method = make_method("neighborhood", n_neighbours=2, fraction=0.5, neighbour_model="hf:proposer", proposals="sample")
    assert method.models() == {"hf:proposer"}
    text = "x y z w"
    result = run_all(method, [text], target, backends={"hf:proposer": proposer})[text]
    assert isinstance(result, Score)
    assert proposer.calls["generate"] == 2 * 2 and proposer.calls["token_logprobs"] == 0
    assert target.calls["generate"] == 0


def test_rows_that_cannot_be_scored_fail_alone():
    backend = FakeBackend(generate_fn=lambda r: " same")
    method = make_method("neighborhood", n_neighbours=2, fraction=1.0, proposals="sample")
    results = run_all(method, ["single", "more same same", "a b c"], backend)
    assert isinstance(results["single"], Failure) and "no word" in results["single"].reason
    assert isinstance(results["more same same"], Failure) and "no neighbour" in results["more same same"].reason
    assert isinstance(results["a b c"], Score)


@pytest.mark.parametrize("params", [
    {"n_neighbours": 0}, {"fraction": 0}, {"fraction": 1.5}, {"temperature": 0},
    {"neighbour_model": ""}, {"max_new_tokens": 0}, {"seed": 1.5}, {"proposals": "bert"},
    {"candidates": 0},
])
def test_bad_parameters(params):
    with pytest.raises(ConfigError):
        make_method("neighborhood", **params)


@pytest.mark.model
def test_end_to_end_on_smollm2(request):
    smollm2 = model_fixture(request)
    texts = list(FAMOUS_AND_NONSENSE)
    method = make_method("neighborhood", n_neighbours=3, fraction=0.2)
    runs = {t: method.run(Example(id=str(i), text=t)) for i, t in enumerate(texts)}
    first = drive(runs, backend_for=lambda spec: smollm2)
    for t in texts:
        assert isinstance(first[t], Score), first[t]
        assert first[t].details["neighbours"] >= 1
    runs = {t: method.run(Example(id=str(i), text=t)) for i, t in enumerate(texts)}
    again = drive(runs, backend_for=lambda spec: smollm2)
    assert [again[t].value for t in texts] == pytest.approx([first[t].value for t in texts], abs=1e-4)
