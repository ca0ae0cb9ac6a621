"""Tag&Tab (log-probs of the rarest keywords) against the formula computed from a plain
forward pass and a frequency table built in the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import SHORT_TEXTS, forward, make_tiny_backend, score_texts

from copyprobe.errors import ConfigError
from copyprobe.freq import FrequencyTable
from copyprobe.methods.tag_tab import STOP_WORDS
from copyprobe.registry import make_method


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def build_table(backend, corpus_texts, path):
    counts = np.zeros(len(backend.tokenizer), dtype=np.int64)
    for text in corpus_texts:
        for token in backend.tokenizer(text, add_special_tokens=False).input_ids:
            counts[token] += 1
    return str(FrequencyTable(counts=counts, name="tiny", vocab_hash="h").save(path))


def test_tag_tab_matches_formula(tiny, tmp_path):
    table_path = build_table(tiny, ["the the the cat sat on a mat " * 20, "rain word god seven"], tmp_path / "f.npz")
    scores, result = score_texts(tiny, "tag_tab", {"freq": table_path, "k": 3})
    for i, text in enumerate(SHORT_TEXTS):
        ids, values, _ = forward(tiny, text)
        # byte-level tokenizer: token p (p >= 1) is byte p-1 of the text
        total = sum(len(tiny.tokenizer(t, add_special_tokens=False).input_ids)
                    for t in ["the the the cat sat on a mat " * 20, "rain word god seven"])
        freq = {}
        for t in ["the the the cat sat on a mat " * 20, "rain word god seven"]:
            for token in tiny.tokenizer(t, add_special_tokens=False).input_ids:
                freq[token] = freq.get(token, 0) + 1
        words, position = [], 0
        for raw in text.split(" "):
            core = raw.strip(".,")
            start = text.index(core, position)
            position = start + len(core)
            if core.lower() in STOP_WORDS:
                continue
            positions = list(range(start + 1, start + 1 + len(core.encode())))  # token indices
            info = sum(-math.log((freq.get(ids[p], 0) + 1) / (total + len(tiny.tokenizer))) for p in positions)
            words.append((info, start, positions, core))
        chosen = sorted(sorted(words, key=lambda w: (-w[0], w[1]))[:3], key=lambda w: w[1])
        expected = np.mean([values[p - 1] for w in chosen for p in w[2]])
        assert scores[str(i)] == pytest.approx(expected, abs=1e-6)
        assert result.rows[i]["details"]["tag_tab"]["keywords"] == [w[3] for w in chosen]


def test_tag_tab_needs_a_table():
    with pytest.raises(ConfigError, match="tag_tab.freq"):
        make_method("tag_tab").validate()
