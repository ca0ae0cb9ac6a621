"""Likelihood methods against independent computations.

Unit part: hand-made TokenLogprobs with known answers. Model part: smollm2 scored
through copyprobe (batched, through the runner) against an unbatched re-implementation
of the formulas in the Min-K%++ authors' code, computed straight from the model's logits.
"""

import math
import zlib

import numpy as np
import pytest

from copyprobe.backends.base import TokenLogprobs
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.registry import make_method


def tl(logprobs, mu=None, sigma=None):
    return TokenLogprobs(token_ids=list(range(len(logprobs) + 1)), logprobs=logprobs, mu=mu, sigma=sigma)


EX = Example(id="x", text="Some text here")


def test_loss_is_mean_logprob():
    assert make_method("loss").score(EX, [tl([-1.0, -2.0, -3.0])]) == pytest.approx(-2.0)


def test_zlib_divides_by_compressed_length():
    expected = -2.0 / len(zlib.compress(EX.text.encode()))
    assert make_method("zlib").score(EX, [tl([-1.0, -3.0])]) == pytest.approx(expected)


def test_lowercase_is_lowercase_loglik_over_loglik():
    # ll -1.0 on the original, -4.0 on the lower-cased copy -> -4 / -1 (Min-K%++ run_ref.py)
    assert make_method("lowercase").score(EX, [tl([-1.0, -1.0]), tl([-4.0, -4.0])]) == pytest.approx(4.0)


def test_lowercase_of_a_text_with_zero_loss_is_a_row_error():
    with pytest.raises(RowError, match="zero loss"):
        make_method("lowercase").score(EX, [tl([0.0, 0.0]), tl([-4.0, -4.0])])


def test_min_k_averages_lowest_fraction_with_at_least_one():
    values = [-0.1, -5.0, -0.2, -3.0, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8]
    # k=0.2 of 10 tokens -> the 2 lowest: -5, -3
    assert make_method("min_k", k=0.2).score(EX, [tl(values)]) == pytest.approx(-4.0)
    # k=0.05 of 10 -> floor 0 -> at least one token
    assert make_method("min_k", k=0.05).score(EX, [tl(values)]) == pytest.approx(-5.0)
    assert make_method("min_k", k=1.0).score(EX, [tl(values)]) == pytest.approx(np.mean(values))


def test_min_k_pp_standardises_before_selecting():
    lps = [-1.0, -2.0, -3.0, -4.0]
    mu = [-1.0, -1.0, -5.0, -2.0]
    sigma = [1.0, 0.5, 2.0, 1.0]
    z = [(l - m) / s for l, m, s in zip(lps, mu, sigma)]  # 0, -2, 1, -2
    assert make_method("min_k_pp", k=0.5).score(EX, [tl(lps, mu, sigma)]) == pytest.approx(-2.0)
    assert make_method("min_k_pp", k=0.25).score(EX, [tl(lps, mu, sigma)]) == pytest.approx(min(z))


def test_min_k_pp_without_stats_is_a_row_error():
    with pytest.raises(RowError):
        make_method("min_k_pp").score(EX, [tl([-1.0, -2.0])])


def test_too_short_text_is_a_row_error():
    with pytest.raises(RowError, match="fewer than two tokens"):
        make_method("loss").score(EX, [tl([])])


@pytest.mark.parametrize("k", [0, -0.1, 1.5, "a", True])
def test_k_outside_unit_interval_rejected(k):
    for name in ("min_k", "min_k_pp"):
        with pytest.raises(ConfigError, match=r"\(0, 1\]"):
            make_method(name, k=k)


def test_slope_fits_log_probabilities_by_default():
    lps = [-3.0, -2.0, -2.5, -1.0, -0.5]
    expected = np.polyfit(np.arange(5), lps, 1)[0]
    assert make_method("slope").score(EX, [tl(lps)]) == pytest.approx(expected)
    assert make_method("slope", normalize="mean").score(EX, [tl(lps)]) == pytest.approx(expected - np.mean(lps))
    assert make_method("slope", normalize="zscore").score(EX, [tl(lps)]) == pytest.approx(
        (expected - np.mean(lps)) / np.std(lps))


def test_slope_is_scipy_linregress_bit_for_bit():
    # saved runs' slope scores came from scipy.stats.linregress: the faster fit must not move them
    from scipy import stats

    from copyprobe.methods.slope import fitted_slope

    rng = np.random.default_rng(7)
    samples = [rng.normal(size=int(rng.integers(2, 400))) * rng.uniform(0.01, 30) for _ in range(500)]
    samples += [np.array([1.0, 1.0]), np.array([-4.0, -4.0, -4.0]), np.array([0.0, 5e-324])]
    # longer than the lengths whose positions are kept, a strided view, far from zero
    from copyprobe.methods.slope import KEPT_POSITIONS
    samples += [rng.normal(size=KEPT_POSITIONS + 7), rng.normal(size=900)[::3], rng.normal(size=300) * 1e3 - 5e4]
    for values in samples:
        expected = float(stats.linregress(np.arange(len(values), dtype=np.float64), values).slope)
        assert fitted_slope(values) == expected
    assert np.isnan(fitted_slope(np.array([1.0, np.nan, 2.0])))
    single = rng.normal(size=50).astype(np.float32)  # summed in float64, as linregress does
    assert fitted_slope(single) == float(stats.linregress(np.arange(50, dtype=np.float64), single).slope)


def test_slope_ngram_fits_only_the_tokens_with_an_ngram_context():
    full = [-1.0, -0.5, -0.2, -0.1, -0.3]
    local = [-2.0, -2.5, -3.0]  # the n-gram answer for the last T - n = 3 tokens
    expected = np.polyfit(np.arange(3), np.array(full[2:]) - local, 1)[0]
    assert make_method("slope", ngram=2).score(EX, [tl(full), tl(local)]) == pytest.approx(expected)


def test_slope_ngram_text_too_short_is_a_row_error():
    with pytest.raises(RowError, match="two tokens with 3 tokens before them"):
        make_method("slope", ngram=3).score(EX, [tl([-1.0, -2.0, -3.0]), tl([-1.0])])


def test_slope_legacy_variant_is_the_old_probability_computation():
    lps = [-3.0, -2.0, -2.5, -1.0, -0.5]
    probs = np.exp(lps)
    expected = np.polyfit(np.arange(5), probs, 1)[0]
    legacy = {"variant": "legacy"}
    assert make_method("slope", **legacy).score(EX, [tl(lps)]) == pytest.approx(expected)
    assert make_method("slope", normalize="zscore", **legacy).score(EX, [tl(lps)]) == pytest.approx(
        expected / probs.std())
    assert make_method("slope", normalize="mean", **legacy).score(EX, [tl(lps)]) == pytest.approx(
        expected / probs.mean())


@pytest.mark.parametrize("params", [{"ngram": 6}, {"ngram": -1}, {"normalize": "max"}, {"variant": "paper"}])
def test_slope_bad_params(params):
    with pytest.raises(ConfigError):
        make_method("slope", **params)


def test_reference_subtracts_reference_loglik():
    method = make_method("reference", model="other")
    requests = method.requests(EX)
    assert [r.model for r in requests] == [None, "other"]
    score = method.score(EX, [tl([-1.0, -1.0]), tl([-3.0, -2.0])])
    assert score.value == pytest.approx(1.5)
    # both halves kept: the audit asks the reference model as a witness
    assert score.details == {"target": pytest.approx(-1.0), "reference": pytest.approx(-2.5)}


# --- against the model --------------------------------------------------------------

TEXTS = [
    "In the beginning God created the heaven and the earth.",
    "Hi.",
    "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller staatlichen Gewalt.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])",
    "私は猫が好きです。毎朝、公園を散歩します。",
    " ".join(["The quick brown fox jumps over the lazy dog while the band plays on."] * 12),
]


def reference_scores(model, tokenizer, text, k=0.2):
    """Unbatched re-implementation following the Min-K%++ authors' run.py."""
    import torch

    input_ids = torch.tensor(tokenizer(text).input_ids).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids).logits.float()
    input_ids = input_ids[0][1:].unsqueeze(-1)
    probs = torch.nn.functional.softmax(logits[0, :-1], dim=-1)
    log_probs = torch.nn.functional.log_softmax(logits[0, :-1], dim=-1)
    token_log_probs = log_probs.gather(dim=-1, index=input_ids).squeeze(-1)
    mu = (probs * log_probs).sum(-1)
    sigma = (probs * torch.square(log_probs)).sum(-1) - torch.square(mu)
    ll = token_log_probs.mean().item()
    scores = {"loss": ll, "zlib": ll / len(zlib.compress(bytes(text, "utf-8")))}
    k_length = max(1, int(len(token_log_probs) * k))
    scores["min_k"] = np.sort(token_log_probs.numpy())[:k_length].mean()
    mink_plus = (token_log_probs - mu) / sigma.sqrt()
    scores["min_k_pp"] = np.sort(mink_plus.numpy())[:k_length].mean()
    return scores


@pytest.mark.model
def test_scores_match_independent_reimplementation(smollm2):
    import copyprobe

    texts = [t for t in TEXTS if len(smollm2.tokenizer(t).input_ids) >= 2]
    result = copyprobe.detect(smollm2, texts, ["loss", "zlib", "min_k", "min_k_pp"], cache=False, blind_baseline=False)
    for i, text in enumerate(texts):
        expected = reference_scores(smollm2.model, smollm2.tokenizer, text)
        for name, value in expected.items():
            got = result.scores.loc[i, name]
            assert math.isclose(got, float(value), abs_tol=1e-3), (name, text[:30], got, value)
