"""Each deterministic score against the formula of its authors' published code, written
out here from the paper / repository (never by calling copyprobe), on fixed token
log-probabilities. Tolerance 1e-6.

Sources (docs/methods.md has the lines): Min-K%++ run.py and run_ref.py
(zjysteven/mink-plus-plus), Min-K% src/run.py (swj0419/detect-pretrain-code), DC-PDD
com_det_sco.py (zhang-wei-chao/DC-PDD), and the Probability Slope notebook as described
in issue 29 (sklearn LinearRegression through token log-probabilities).
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from copyprobe.backends.base import TokenLogprobs
from copyprobe.data.example import Example
from copyprobe.freq import FrequencyTable
from copyprobe.registry import make_method

TOL = 1e-6
TEXT = "The Quick Brown Fox Jumps Over The Lazy Dog, said Mr. Smith in London."
EX = Example(id="x", text=TEXT)

# fixed per-token values of a text of T = 14 tokens without a leading special token:
# FULL[i] = log p(token i | tokens 0..i-1) for i = 1..13; NGRAM[n][i] = log p(token i |
# tokens i-n..i-1) for i = n..13 (token n's n-gram context is its whole prefix)
T = 14
FULL = {i: v for i, v in enumerate(np.random.default_rng(29).uniform(-7.0, -0.05, size=T), start=0) if i >= 1}
NGRAM = {}
for _n in range(1, 6):
    _rng = np.random.default_rng(100 + _n)
    NGRAM[_n] = {i: (FULL[i] if i == _n else FULL[i] - _rng.uniform(0.0, 3.0) + 1.0) for i in range(_n, T)}
IDS = [5, 17, 5, 23, 42, 17, 99, 5, 8, 23, 61, 4, 8, 77]
MU = np.random.default_rng(7).uniform(-6.0, -1.0, size=T - 1)
SIGMA = np.random.default_rng(8).uniform(0.5, 3.0, size=T - 1)


def response(values, ids=IDS, mu=None, sigma=None):
    return TokenLogprobs(token_ids=list(ids), logprobs=[float(v) for v in values],
                         mu=None if mu is None else list(mu), sigma=None if sigma is None else list(sigma))


FULL_RESPONSE = response([FULL[i] for i in range(1, T)], mu=MU, sigma=SIGMA)


# --- Min-K%++ run.py / run_ref.py, Min-K% src/run.py ------------------------------------
def official_ll(values):
    return float(np.mean(values))  # ll = -loss.item(), loss = mean NLL of tokens 1..T-1


def test_loss():
    assert make_method("loss").score(EX, [FULL_RESPONSE]) == pytest.approx(official_ll(FULL_RESPONSE.logprobs),
                                                                            abs=TOL)


def test_zlib():
    expected = official_ll(FULL_RESPONSE.logprobs) / len(zlib.compress(bytes(TEXT, "utf-8")))
    assert make_method("zlib").score(EX, [FULL_RESPONSE]) == pytest.approx(expected, abs=TOL)


def test_lowercase_is_the_official_value_not_only_its_ranking():
    lower = response(np.array(FULL_RESPONSE.logprobs) * 1.3 - 0.4)
    ll, ll_lowercase = official_ll(FULL_RESPONSE.logprobs), official_ll(lower.logprobs)
    expected = ll_lowercase / ll  # Min-K%++ run_ref.py: scores['lowercase']
    # Min-K% src/run.py stores -(log ppl_lower / log ppl) and ranks by its negative
    min_k_repo = -(np.log(np.exp(-ll_lowercase)) / np.log(np.exp(-ll)))
    assert expected == pytest.approx(-min_k_repo)
    assert make_method("lowercase").score(EX, [FULL_RESPONSE, lower]) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("ratio", [0.1, 0.2, 0.5, 1.0])
def test_min_k(ratio):
    values = np.array(FULL_RESPONSE.logprobs)
    k_length = int(len(values) * ratio)
    expected = np.mean(np.sort(values)[:k_length])
    assert make_method("min_k", k=ratio).score(EX, [FULL_RESPONSE]) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("ratio", [0.1, 0.2, 0.5, 1.0])
def test_min_k_pp(ratio):
    token_log_probs = np.array(FULL_RESPONSE.logprobs)
    variance = SIGMA**2  # run.py's `sigma` is E[log p^2] - mu^2, a variance: it divides by sigma.sqrt()
    mink_plus = (token_log_probs - MU) / np.sqrt(variance)
    k_length = int(len(mink_plus) * ratio)
    expected = np.mean(np.sort(mink_plus)[:k_length])
    assert make_method("min_k_pp", k=ratio).score(EX, [FULL_RESPONSE]) == pytest.approx(expected, abs=TOL)


def test_reference():
    ref = response(np.array(FULL_RESPONSE.logprobs) - 0.7 + np.linspace(0, 1, T - 1))
    expected = official_ll(FULL_RESPONSE.logprobs) - official_ll(ref.logprobs)  # run_ref.py: ll - ll_ref
    method = make_method("reference", model="other")
    assert method.score(EX, [FULL_RESPONSE, ref]).value == pytest.approx(expected, abs=TOL)


# --- DC-PDD com_det_sco.py ---------------------------------------------------------------
def test_dc_pdd(tmp_path):
    vocab = 128
    counts = np.random.default_rng(3).integers(0, 1000, size=vocab)
    path = tmp_path / "freq.npz"
    FrequencyTable(counts=counts.astype(np.int64), name="t", vocab_hash="h").save(path)
    a = 0.01
    # com_det_sco.py: the smoothed distribution, first occurrences of the scored ids
    # (com_pro_dis.py keeps input_ids[0][1:]), ce = p * log(1 / f) clipped at a, -mean(ce)
    fre_dis_smo = (counts + 1) / (sum(counts) + len(counts))
    input_ids = IDS[1:]
    probs = np.exp(np.array(FULL_RESPONSE.logprobs))
    indexes, current_ids = [], []
    for i, input_id in enumerate(input_ids):
        if input_id not in current_ids:
            indexes.append(i)
            current_ids.append(input_id)
    ce = probs[indexes] * np.log(1 / fre_dis_smo[np.array(input_ids)[indexes]])
    ce[ce > a] = a
    official = -np.mean(ce)  # "larger for non-member"; its evaluation ranks by the negative
    got = make_method("dc_pdd", freq=str(path), a=a).score(EX, [FULL_RESPONSE])
    assert got.value == pytest.approx(-official, abs=TOL)
    assert 0 < (ce < a).sum() < len(ce)  # the fixed input exercises the clip and the terms


# --- Probability Slope --------------------------------------------------------------------
def notebook_slope(values, normalize):
    """The notebook: sklearn LinearRegression through the values over their position;
    mean: slope - mean, zscore: (slope - mean) / std of the same values."""
    values = np.asarray(values, dtype=np.float64)
    slope = LinearRegression().fit(np.arange(len(values)).reshape(-1, 1), values).coef_[0]
    if normalize == "mean":
        return slope - np.mean(values)
    if normalize == "zscore":
        return (slope - np.mean(values)) / np.std(values)
    return slope


def notebook_values(n, space):
    """Token log-probabilities (or probabilities) of the T - n tokens that have their
    n-token context, minus the n-gram value (n >= 1)."""
    to = (lambda v: v) if space == "log" else np.exp
    if n == 0:
        return [to(FULL[i]) for i in range(1, T)]
    return [to(FULL[i]) - to(NGRAM[n][i]) for i in range(n, T)]


def slope_responses(n, lead):
    """What a backend answers: with a leading special token (lead = 1) every text token
    is scored, so the full list has one more entry at the front; the n-gram answer holds
    the T - n tokens with n predecessors either way."""
    full_values = ([-9.5] if lead else []) + [FULL[i] for i in range(1, T)]
    own = response(full_values, ids=[2] * lead + IDS)
    if n == 0:
        return [own]
    return [own, response([NGRAM[n][i] for i in range(n, T)], ids=[2] * lead + IDS)]


SETTINGS = list(itertools.product(range(6), ("none", "mean", "zscore")))


@pytest.mark.parametrize("lead", [0, 1])
@pytest.mark.parametrize("n,normalize", SETTINGS)
def test_slope_notebook_all_18_settings(n, normalize, lead):
    method = make_method("slope", ngram=n, normalize=normalize)
    assert method.variant == "notebook"
    if lead and n == 0:  # the score after a leading token is a real token's: keep it
        values = [-9.5] + notebook_values(0, "log")
    else:
        values = notebook_values(n, "log")
    expected = notebook_slope(values, normalize)
    assert method.score(EX, slope_responses(n, lead)) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("n,normalize", SETTINGS)
def test_slope_probability_all_18_settings(n, normalize):
    method = make_method("slope", ngram=n, normalize=normalize, variant="probability")
    expected = notebook_slope(notebook_values(n, "prob"), normalize)
    assert method.score(EX, slope_responses(n, 0)) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("n,normalize", SETTINGS)
def test_slope_legacy_all_18_settings(n, normalize):
    """copyprobe before issue 29: probabilities over all T - 1 scored tokens (the n-gram
    answer gives the first ones their full-prefix value), slope / |mean|, slope / std."""
    probs = np.exp([FULL[i] for i in range(1, T)])
    ngram_answer = [FULL[i] if i < n else NGRAM[n][i] for i in range(1, T)] if n else None
    values = probs - np.exp(ngram_answer) if n else probs
    slope = np.polyfit(np.arange(len(values)), values, 1)[0]
    expected = {"none": slope, "mean": slope / abs(values.mean()), "zscore": slope / values.std()}[normalize]
    responses = [response([FULL[i] for i in range(1, T)])] + ([response(ngram_answer)] if n else [])
    method = make_method("slope", ngram=n, normalize=normalize, variant="legacy")
    assert method.score(EX, responses) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("variant,drop", [("notebook", True), ("probability", True), ("legacy", False)])
def test_slope_requests_name_their_alignment(variant, drop):
    own, local = make_method("slope", ngram=3, variant=variant).requests(EX)
    assert (own.ngram, local.ngram, local.ngram_drop_short) == (None, 3, drop)
    assert make_method("slope", variant=variant).requests(EX) == [own]
