"""Prefix probing: split, similarities against independent computations, threshold."""

from __future__ import annotations

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.prefix_probe import lcs_words, similarities
from copyprobe.registry import make_method
from copyprobe.drive import Failure, drive

TEXT = " ".join(f"w{i}" for i in range(100))


def char_lcs(a: str, b: str) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def independent_token_sort(a: str, b: str) -> float:
    # token sort ratio: sort the (lower-cased) words, then 2*LCS/(len1+len2) on characters
    sa = " ".join(sorted(a.lower().split()))
    sb = " ".join(sorted(b.lower().split()))
    return 2 * char_lcs(sa, sb) / (len(sa) + len(sb))


def test_lcs_words():
    assert lcs_words(["a", "b", "c", "d", "e"], ["a", "x", "c", "y", "e"]) == 3
    assert lcs_words([], ["a"]) == 0
    assert lcs_words(["the", "cat", "sat"], ["sat", "the", "cat"]) == 2


def test_similarities_match_independent_values():
    ref = "the quick brown fox jumps over the lazy dog"
    cand = "the lazy brown dog jumps over a quick fox"
    sims = similarities(ref, cand)
    assert sims["token_sort"] == pytest.approx(independent_token_sort(ref, cand), abs=1e-9)
    lcs = lcs_words(ref.split(), cand.split())
    p, r = lcs / len(cand.split()), lcs / len(ref.split())
    assert sims["rouge_l"] == pytest.approx(2 * p * r / (p + r))
    assert sims["lcs"] == pytest.approx(lcs / 9) and sims["lcs_words"] == lcs
    same = similarities(ref, ref)
    assert same["token_sort"] == same["rouge_l"] == same["lcs"] == 1.0


def run(method, examples, backend):
    method.validate()
    return drive({e.id: method.run(e) for e in examples}, lambda spec: backend)


def test_prefix_and_suffix_of_k_words_and_threshold():
    prompts = []

    def fn(request):
        prompts.append(request.prompt)
        # continues correctly for 28 of the 32 suffix words, then wanders off
        return " " + " ".join(f"w{i}" for i in range(32, 60)) + " x y z q r s"

    results = run(make_method("prefix_probe", similarity="lcs"), [Example("t", TEXT)], FakeBackend(generate_fn=fn))
    score = results["t"]
    assert prompts == [" ".join(f"w{i}" for i in range(32))]
    assert score.details["suffix"] == " ".join(f"w{i}" for i in range(32, 64))
    assert len(score.details["completion"].split()) == 32  # cut to the suffix's length
    assert score.value == pytest.approx(28 / 32) and score.details["match"] is True  # 0.875 > 0.8
    strict = run(make_method("prefix_probe", similarity="lcs", threshold=0.9), [Example("t", TEXT)], FakeBackend(generate_fn=fn))
    assert strict["t"].value == pytest.approx(28 / 32) and strict["t"].details["match"] is False


def test_each_similarity_is_the_score():
    completion = " ".join(f"w{i}" for i in range(50, 100))
    backend = FakeBackend(generate_fn=lambda r: completion)
    for name in ("token_sort", "rouge_l", "lcs"):
        score = run(make_method("prefix_probe", prefix_tokens=50, similarity=name), [Example("t", TEXT)], backend)["t"]
        assert score.value == 1.0 and score.details[name] == 1.0 and score.details["match"] is True


def test_short_passage_and_chat_mode():
    backend = FakeBackend(generate_fn=lambda r: "w5 w6")
    results = run(make_method("prefix_probe", prefix_tokens=32), [Example("s", "only five words here now")], backend)
    assert isinstance(results["s"], Failure) and "needs more than prefix_tokens=32" in results["s"].reason
    seen = []
    backend = FakeBackend(generate_fn=lambda r: seen.append(r) or "w3 w4")
    results = run(make_method("prefix_probe", prefix_tokens=3, chat=True), [Example("c", "w0 w1 w2 w3 w4 w5")], backend)
    assert seen[0].messages[-1][1].endswith("w0 w1 w2") and seen[0].prompt is None
    # suffix "w3 w4 w5", completion "w3 w4": LCS 2 of 3 words
    assert results["c"].details["lcs"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("params", [{"prefix_tokens": 0}, {"similarity": "bleu"}, {"threshold": 1.5}])
def test_bad_parameters(params):
    with pytest.raises(ConfigError):
        make_method("prefix_probe", **params)


def test_several_probes_cut_every_stride_words_and_average():
    """probes=3, stride=16 on 100 words: cuts at 32, 48, 64 (each leaves 32 words); each
    prompt is everything before its cut; the score is the mean over the probes."""
    prompts = []

    def fn(request):
        prompts.append(request.prompt)
        cut = len(request.prompt.split())
        # right for the first 16 words after the cut at 32, all 32 at 48, none at 64
        right = {32: 16, 48: 32, 64: 0}[cut]
        return " " + " ".join([f"w{i}" for i in range(cut, cut + right)] + ["x"] * (32 - right))

    method = make_method("prefix_probe", similarity="lcs", probes=3, stride=16)
    score = run(method, [Example("t", TEXT)], FakeBackend(generate_fn=fn))["t"]
    assert sorted(len(p.split()) for p in prompts) == [32, 48, 64]
    assert all(p == " ".join(f"w{i}" for i in range(len(p.split()))) for p in prompts)
    assert [r["lcs"] for r in score.details["probes"]] == pytest.approx([16 / 32, 1.0, 0.0])
    assert score.value == pytest.approx((0.5 + 1.0 + 0.0) / 3)


def test_probes_stop_where_no_full_suffix_remains():
    method = make_method("prefix_probe", probes=10)  # stride = k = 32 on 100 words: cuts at 32, 64 only
    assert method.cuts(100) == [32, 64]
    assert make_method("prefix_probe", probes=3, stride=16).cuts(70) == [32]
    assert make_method("prefix_probe").cuts(40) == [32]  # a short suffix keeps the single probe


def test_reference_similarity_is_subtracted():
    """The reference model continues the same prompts; its similarity is subtracted, so a
    passage both models continue equally well scores 0."""
    def fn(request):
        right = 32 if request.model is None else 8
        return " " + " ".join([f"w{i}" for i in range(32, 32 + right)] + ["x"] * (32 - right))

    method = make_method("prefix_probe", similarity="lcs", reference="other-model")
    assert method.models() == {"other-model"}
    score = run(method, [Example("t", TEXT)], FakeBackend(generate_fn=fn))["t"]
    assert score.value == pytest.approx(1.0 - 8 / 32)
    assert score.details["probes"][0]["reference"]["lcs"] == pytest.approx(8 / 32)
    same = run(method, [Example("t", TEXT)], FakeBackend(generate_fn=lambda r: " " + " ".join(f"w{i}" for i in range(32, 64))))
    assert same["t"].value == pytest.approx(0.0)
