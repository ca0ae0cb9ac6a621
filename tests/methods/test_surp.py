"""SURP (surprising tokens: low log-prob where the model is confident) against the
formula computed from one plain forward pass of the tiny model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import SHORT_TEXTS, forward, make_tiny_backend, score_texts

from copyprobe.backends.base import TokenLogprobs
from copyprobe.methods.surp import surprising


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def expected_surprising(values, entropy, k, max_entropy):
    """The SoK benchmark's rule: of the max(1, floor(k * T)) lowest log-probs of the text,
    those below the entropy threshold (as sorted positions)."""
    lowest = sorted(range(len(values)), key=lambda t: values[t])[:max(1, math.floor(k * len(values)))]
    return sorted(t for t in lowest if entropy[t] < max_entropy)


def test_surp_matches_formula(tiny):
    # the tiny random model is unsure everywhere (entropies 4.8-5.3 nats of at most 5.56)
    params = {"k": 0.3, "max_entropy": 5.17}
    scores, _ = score_texts(tiny, "surp", params)
    for i, text in enumerate(SHORT_TEXTS):
        _, values, rows = forward(tiny, text)
        entropy = -(rows.exp() * rows).sum(-1).numpy()  # from the full distribution
        chosen = expected_surprising(values, entropy, 0.3, 5.17)
        assert len(chosen) < math.floor(0.3 * len(values)), "the entropy condition must matter"
        assert chosen, "the test needs surprising tokens"
        assert scores[str(i)] == pytest.approx(np.mean(values[chosen]), abs=1e-6)


@pytest.mark.parametrize("n_tokens", [1, 3, 4, 7, 11, 16, 50, 101])
@pytest.mark.parametrize("k", [0.05, 0.1, 0.2, 0.3, 0.5, 1.0])
def test_surp_keeps_floor_k_t_lowest_tokens_then_filters_by_entropy(n_tokens, k):
    rng = np.random.default_rng(n_tokens)
    values = -rng.exponential(3.0, n_tokens)
    entropy = rng.uniform(0.0, 4.0, n_tokens)
    response = TokenLogprobs(token_ids=list(range(n_tokens + 1)), logprobs=list(values), mu=list(-entropy))
    mask = surprising(response, k, 2.0)
    assert np.flatnonzero(mask).tolist() == expected_surprising(values, entropy, k, 2.0)
    # without the entropy filter, exactly max(1, floor(k * T)) tokens
    assert surprising(response, k, np.inf).sum() == max(1, math.floor(k * n_tokens))


def test_surp_without_surprising_tokens_fails_the_row(tiny):
    scores, result = score_texts(tiny, "surp", {"max_entropy": 1e-9})
    assert all(v is None or math.isnan(v) for v in scores.values())
    assert "no surprising token" in str(result.run["failures"][0])
