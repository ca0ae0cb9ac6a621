"""SaMIA (ROUGE of sampled continuations against the true second half) on scripted
samples: values computed by hand, the seeded sample requests, the bigram/zlib variant."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from model_helpers import score_texts

from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.registry import make_method


def test_samia_matches_rouge_recall():
    text = "a b c d e f g h"
    outputs = iter(["e f x y", "e e e e", "q r s t"])
    backend = FakeBackend(generate_fn=lambda request: next(outputs))
    scores, result = score_texts(backend, "samia", {"n_samples": 3}, texts=[text])
    # reference e f g h; ROUGE-1 recall with multiset clipping: 2/4, 1/4, 0/4
    assert scores["0"] == pytest.approx(np.mean([0.5, 0.25, 0.0]))
    assert result.rows[0]["details"]["samia"]["rouge"] == [0.5, 0.25, 0.0]


def test_samia_asks_seeded_samples_of_the_first_half():
    method = make_method("samia", n_samples=3, seed=5)
    requests = method.requests(Example(id="x", text="one two three four five six seven"))
    assert [r.prompt for r in requests] == ["one two three"] * 3
    assert [r.seed for r in requests] == [5, 6, 7] and all(r.temperature == 1.0 for r in requests)
    assert all(r.top_k == 50 for r in requests)  # the paper's top-k sampling
    assert make_method("samia", top_k=0).requests(Example(id="x", text="one two"))[0].top_k == 0
    assert all(r.cacheable() for r in requests)
    with pytest.raises(RowError):
        method.requests(Example(id="y", text="single"))


def test_samia_bigram_and_zlib():
    import zlib

    text = "the cat sat on the mat the end"
    backend = FakeBackend(generate_fn=lambda request: "the mat the dog and more words")
    scores, _ = score_texts(backend, "samia", {"n_samples": 1, "n": 2, "zlib": True}, texts=[text])
    candidate = "the mat the dog and more words"  # the whole continuation, as the authors' zlib
    # reference "the mat the end": bigrams (the mat) (mat the) (the end); candidate shares 2
    assert scores["0"] == pytest.approx(2 / 3 * len(zlib.compress(candidate.encode())))


def test_samia_candidate_is_the_whole_continuation():
    # The authors' rule: overlap with the whole continuation / reference length. A
    # continuation that reaches the true words late still counts them all.
    text = "a b c d e f g h"
    outputs = iter(["x y e f g h", "e f g h e f g h", "x y z w"])
    backend = FakeBackend(generate_fn=lambda request: next(outputs))
    scores, result = score_texts(backend, "samia", {"n_samples": 3}, texts=[text])
    reference = Counter("e f g h".split())
    expected = [sum((Counter(o.split()) & reference).values()) / 4
                for o in ["x y e f g h", "e f g h e f g h", "x y z w"]]
    assert expected == [1.0, 1.0, 0.0]
    assert result.rows[0]["details"]["samia"]["rouge"] == expected
    assert scores["0"] == pytest.approx(2 / 3)
