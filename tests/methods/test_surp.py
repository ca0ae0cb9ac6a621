"""SURP (surprising tokens: low log-prob where the model is confident) against the
formula computed from one plain forward pass of the tiny model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import SHORT_TEXTS, forward, make_tiny_backend, score_texts


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def test_surp_matches_formula(tiny):
    # the tiny random model is unsure everywhere (entropies 4.8-5.3 nats of at most 5.56)
    params = {"k": 0.3, "max_entropy": 5.17}
    scores, _ = score_texts(tiny, "surp", params)
    for i, text in enumerate(SHORT_TEXTS):
        _, values, rows = forward(tiny, text)
        entropy = -(rows.exp() * rows).sum(-1).numpy()  # from the full distribution
        threshold = np.quantile(values, 0.3)
        chosen = [v for v, h in zip(values, entropy) if h < 5.17 and v <= threshold]
        assert len(chosen) < sum(v <= threshold for v in values), "the entropy condition must matter"
        assert chosen, "the test needs surprising tokens"
        assert scores[str(i)] == pytest.approx(np.mean(chosen), abs=1e-6)


def test_surp_without_surprising_tokens_fails_the_row(tiny):
    scores, result = score_texts(tiny, "surp", {"max_entropy": 1e-9})
    assert all(v is None or math.isnan(v) for v in scores.values())
    assert "no surprising token" in str(result.run["failures"][0])
