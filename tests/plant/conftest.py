"""The tiny model and book of the plant tests (plant_helpers.py builds them)."""

from __future__ import annotations

import random

import pytest
from plant_helpers import WORDS, make_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    make_tiny_model(root / "model")
    rng = random.Random(1)
    book = root / "book.txt"
    book.write_text(" ".join(rng.choice(WORDS) for _ in range(16 * 12)))  # 12 passages of 16 tokens
    return root
