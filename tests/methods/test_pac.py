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


def _eda_swap_before(text, alpha, rng):
    """random_swap as it was before it split on any whitespace (single spaces, as EDA)."""
    words = text.split(" ")
    if len(words) < 2:
        return text
    for _ in range(max(1, int(alpha * len(words)))):
        i, j = rng.sample(range(len(words)), 2)
        words[i], words[j] = words[j], words[i]
    return " ".join(words)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("seed", [0, 7])
def test_pac_single_spaced_copies_are_unchanged(alpha, seed):
    import hashlib
    import random

    for text in SHORT_TEXTS + ["two words", "a b c d e f g h i j k l m n o p q r s t u v w x y z"]:
        expected = []
        for j in range(4):
            digest = hashlib.sha256(f"pac\x1f{seed}\x1f{j}\x1f{text}".encode()).hexdigest()
            expected.append(_eda_swap_before(text, alpha, random.Random(int(digest[:16], 16))))
        assert augmentations(text, 4, alpha, seed) == expected


def test_pac_swaps_words_separated_by_newlines_and_keeps_the_separators():
    import re

    text = "alpha\nbeta\n\ngamma\tdelta  epsilon\nzeta\n"
    copies = augmentations(text, 5, 0.3, 0)
    assert any(copy != text for copy in copies)
    for copy in copies:
        assert re.split(r"\S+", copy) == re.split(r"\S+", text)  # same whitespace, same places
        assert sorted(copy.split()) == sorted(text.split())


def test_pac_refuses_texts_with_nothing_to_swap():
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.errors import RowError

    with pytest.raises(RowError, match="fewer than 2 words to swap"):
        augmentations("我爱北京天安门。今天天气很好。", 5, 0.3, 0)
    with pytest.raises(RowError, match="copy equals the text"):
        augmentations("la la la la la", 5, 0.3, 0)
    texts = ["我爱北京天安门。今天天气很好。", "la la la la la", SHORT_TEXTS[0]]
    scores, result = score_texts(FakeBackend(), "pac", texts=texts)
    assert np.isnan(scores["0"]) and np.isnan(scores["1"]) and np.isfinite(scores["2"])
    reasons = {f["id"]: f["errors"]["pac"] for f in result.run["failures"]}
    assert "fewer than 2 words to swap" in reasons["0"] and "copy equals the text" in reasons["1"]
    assert set(reasons) == {"0", "1"}
