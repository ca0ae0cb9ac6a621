"""PAC (polarized augment calibration) against the formula computed from plain forward
passes of the tiny model, and its seeded word-swap augmentations."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import SHORT_TEXTS, forward, make_tiny_backend, score_texts

from copyprobe.methods.pac import augmentations


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def test_pac_matches_formula(tiny):
    params = {"n_augment": 3, "alpha": 0.2, "k_min": 0.3, "k_max": 0.1, "seed": 7}
    scores, _ = score_texts(tiny, "pac", params)

    def distance(text):
        values = np.sort(forward(tiny, text)[1])
        return (values[::-1][:max(1, int(len(values) * 0.1))].mean()
                - values[:max(1, int(len(values) * 0.3))].mean())

    for i, text in enumerate(SHORT_TEXTS):
        copies = augmentations(text, 3, 0.2, 7)
        expected = np.mean([distance(c) for c in copies]) - distance(text)
        assert scores[str(i)] == pytest.approx(expected, abs=1e-6)


def test_pac_augmentations_swap_words_and_are_seeded():
    text = "one two three four five six seven eight nine ten"
    copies = augmentations(text, 4, 0.3, 0)
    assert copies == augmentations(text, 4, 0.3, 0) != augmentations(text, 4, 0.3, 1)
    for copy in copies:
        assert sorted(copy.split(" ")) == sorted(text.split(" ")) and copy != text  # a permutation
        # 3 swaps change at most 6 positions
        assert sum(a != b for a, b in zip(copy.split(" "), text.split(" "))) <= 6
