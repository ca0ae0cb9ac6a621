"""SURP, Tag&Tab, PAC, SaMIA and gradient norm against independent, unbatched
computations of the papers' formulas (the tiny model's plain ``model(ids).logits`` and
autograd), plus their edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from model_helpers import make_tiny_backend

import copyprobe
from copyprobe.backends.base import GRAD_NORM, GenerateRequest, Generation, GradNormRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import CapabilityError, ConfigError, RowError
from copyprobe.freq import FrequencyTable
from copyprobe.methods.pac import augmentations
from copyprobe.methods.tag_tab import STOP_WORDS
from copyprobe.registry import make_method
from copyprobe.session import Session

TEXTS = ["The cat sat on the mat and looked at the rain outside.",
         "Seven reluctant spreadsheets negotiated quietly with a purple umbrella.",
         "In the beginning was the word, and the word was with God."]


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def forward(backend, text):
    """(token ids, log-prob of each scored token, full log-softmax rows) from one forward pass."""
    ids = backend.tokenizer(text).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(backend.model(torch.tensor([ids])).logits[0].double(), -1)
    values = np.array([logprobs[p - 1, ids[p]].item() for p in range(1, len(ids))])
    return ids, values, logprobs[:-1]


def detect(backend, name, params=None, texts=TEXTS):
    examples = [Example(id=str(i), text=t) for i, t in enumerate(texts)]
    result = copyprobe.detect(Session(backend, cache=False), examples, [name],
                              params={name: params} if params else None, n_bootstrap=0, blind_baseline=False)
    return dict(zip(result.scores["id"], result.scores[name])), result


def test_surp_matches_formula(tiny):
    # the tiny random model is unsure everywhere (entropies 4.8-5.3 nats of at most 5.56)
    params = {"k": 0.3, "max_entropy": 5.17}
    scores, _ = detect(tiny, "surp", params)
    for i, text in enumerate(TEXTS):
        _, values, rows = forward(tiny, text)
        entropy = -(rows.exp() * rows).sum(-1).numpy()  # from the full distribution
        threshold = np.quantile(values, 0.3)
        chosen = [v for v, h in zip(values, entropy) if h < 5.17 and v <= threshold]
        assert len(chosen) < sum(v <= threshold for v in values), "the entropy condition must matter"
        assert chosen, "the test needs surprising tokens"
        assert scores[str(i)] == pytest.approx(np.mean(chosen), abs=1e-6)


def test_surp_without_surprising_tokens_fails_the_row(tiny):
    scores, result = detect(tiny, "surp", {"max_entropy": 1e-9})
    assert all(v is None or math.isnan(v) for v in scores.values())
    assert "no surprising token" in str(result.run["failures"][0])


def test_pac_matches_formula(tiny):
    params = {"n_augment": 3, "alpha": 0.2, "k_min": 0.3, "k_max": 0.1, "seed": 7}
    scores, _ = detect(tiny, "pac", params)

    def distance(text):
        values = np.sort(forward(tiny, text)[1])
        return (values[::-1][:max(1, int(len(values) * 0.1))].mean()
                - values[:max(1, int(len(values) * 0.3))].mean())

    for i, text in enumerate(TEXTS):
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


def build_table(backend, corpus_texts, path):
    counts = np.zeros(len(backend.tokenizer), dtype=np.int64)
    for text in corpus_texts:
        for token in backend.tokenizer(text, add_special_tokens=False).input_ids:
            counts[token] += 1
    return str(FrequencyTable(counts=counts, name="tiny", vocab_hash="h").save(path))


def test_tag_tab_matches_formula(tiny, tmp_path):
    table_path = build_table(tiny, ["the the the cat sat on a mat " * 20, "rain word god seven"], tmp_path / "f.npz")
    scores, result = detect(tiny, "tag_tab", {"freq": table_path, "k": 3})
    for i, text in enumerate(TEXTS):
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


def test_samia_matches_rouge_recall():
    text = "a b c d e f g h"
    outputs = iter(["e f x y", "e e e e", "q r s t"])
    backend = FakeBackend(generate_fn=lambda request: next(outputs))
    scores, result = detect(backend, "samia", {"n_samples": 3}, texts=[text])
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
    scores, _ = detect(backend, "samia", {"n_samples": 1, "n": 2, "zlib": True}, texts=[text])
    candidate = "the mat the dog".split()
    # reference "the mat the end": bigrams (the mat) (mat the) (the end); candidate shares 2
    assert scores["0"] == pytest.approx(2 / 3 * len(zlib.compress(" ".join(candidate).encode())))


def test_gradnorm_matches_autograd(tiny):
    for norm in ("mean_tensor", "global"):
        scores, _ = detect(tiny, "gradnorm", {"norm": norm}, texts=TEXTS[:2])
        for i, text in enumerate(TEXTS[:2]):
            model = tiny.model
            model.zero_grad(set_to_none=True)
            ids = torch.tensor([tiny.tokenizer(text).input_ids])
            with torch.enable_grad():
                loss = model(input_ids=ids, labels=ids).loss  # transformers' own shifted loss
                grads = torch.autograd.grad(loss, [p for p in model.parameters()])
            norms = [g.norm().item() for g in grads]
            expected = np.mean(norms) if norm == "mean_tensor" else math.sqrt(sum(n * n for n in norms))
            assert scores[str(i)] == pytest.approx(-expected, rel=1e-5)
    assert all(p.grad is None for p in tiny.model.parameters()), "gradients are cleared"


def test_gradnorm_is_refused_by_backends_without_the_capability():
    backend = FakeBackend(capabilities=["token_logprobs", "generate"])
    with pytest.raises(CapabilityError, match=GRAD_NORM):
        detect(backend, "gradnorm")
    assert backend.calls == {}, "refused before any work"
    assert GradNormRequest("x").capabilities() == {GRAD_NORM}


def test_fake_backend_answers_each_kind_it_declares():
    fake = FakeBackend(generate_fn=lambda r: "ok")
    assert fake.answer([GenerateRequest(prompt="hi")])[0] == Generation(
        text="ok", finish_reason="stop", prompt_tokens=1, completion_tokens=1)
    answer = fake.answer([GradNormRequest("a b c")])[0]
    assert answer.mean_tensor_norm > 0 and answer == fake.answer([GradNormRequest("a b c")])[0]
