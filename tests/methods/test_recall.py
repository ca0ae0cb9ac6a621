"""ReCaLL and Con-ReCall against an independent, unbatched computation of the papers'
formulas on a tiny model, and their held-out prefix rows."""

from __future__ import annotations

import pytest
import torch
from model_helpers import make_tiny_backend

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.methods.recall import join_prefix
from copyprobe.registry import make_method
from copyprobe.session import Session

TEXTS = ["The cat sat on the mat and looked at the rain.",
         "Seven reluctant spreadsheets negotiated quietly.",
         "In the beginning was the word.",
         "Quarterly widget audits find mislabeled crates."]


def mean_ll(model, tokenizer, context: str | None, text: str) -> float:
    """Mean log-prob of text's tokens, after the context's tokens (all of the text's
    tokens) or alone (all but the first), from one plain forward pass."""
    text_ids = tokenizer(text, add_special_tokens=context is None).input_ids
    context_ids = tokenizer(context).input_ids if context is not None else []
    ids = context_ids + text_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    first = len(context_ids) if context is not None else 1
    values = [logprobs[p - 1, ids[p]].item() for p in range(first, len(ids))]
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=3)


def detect_scores(backend, name, params, examples):
    session = Session(backend, cache=False)
    result = copyprobe.detect(session, examples, [name], params={name: params}, n_bootstrap=0,
                              blind_baseline=False)
    return result, dict(zip(result.scores["id"], result.scores[name]))


def test_recall_matches_the_formula(tiny, tmp_path):
    prefix_file = tmp_path / "prefix.txt"
    prefix_file.write_text("  Non-member passage one.\nAnd two.  \n", encoding="utf-8")
    examples = [Example(id=str(i), text=t) for i, t in enumerate(TEXTS)]
    _, scores = detect_scores(tiny, "recall", {"prefix": str(prefix_file)}, examples)
    prefix = "Non-member passage one.\nAnd two.\n\n"
    for example in examples:
        expected = (mean_ll(tiny.model, tiny.tokenizer, prefix, example.text)
                    / mean_ll(tiny.model, tiny.tokenizer, None, example.text))
        assert scores[example.id] == pytest.approx(expected, abs=1e-6)


def test_con_recall_matches_the_formula_with_drawn_prefixes(tiny):
    examples = [Example(id=f"r{i}", text=f"{t[:24]} {i}.", label=i % 2) for i, t in enumerate(TEXTS * 2)]
    result, scores = detect_scores(tiny, "con_recall", {"n_prefix": 2, "gamma": 0.3}, examples)
    held = result.record.train_ids["con_recall"]
    by_id = {e.id: e for e in examples}
    assert sorted(by_id[i].label for i in held) == [0, 0, 1, 1]
    # the prefixes are the held-out rows' texts in row order, joined by blank lines
    non = join_prefix([e.text for e in examples if e.id in held and e.label == 0])
    mem = join_prefix([e.text for e in examples if e.id in held and e.label == 1])
    for example in examples:
        plain = mean_ll(tiny.model, tiny.tokenizer, None, example.text)
        expected = (mean_ll(tiny.model, tiny.tokenizer, non, example.text)
                    - 0.3 * mean_ll(tiny.model, tiny.tokenizer, mem, example.text)) / plain
        assert scores[example.id] == pytest.approx(expected, abs=1e-6)


def labelled(n: int = 12) -> list[Example]:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    return [Example(id=f"e{i}", text=" ".join(words[i:] + words[:i]), label=int(i < n // 2)) for i in range(n)]


def test_recall_holds_out_seeded_non_members_and_leaves_them_out_of_metrics():
    examples = labelled()
    backend = FakeBackend(member_texts=[e.text for e in examples if e.label == 1])
    runs = {}
    for seed in (0, 0, 1):
        session = Session(backend, cache=False)
        result = copyprobe.detect(session, examples, ["recall", "loss"], params={"recall": {"n_prefix": 3}},
                                  n_bootstrap=0, blind_baseline=False, seed=seed)
        runs.setdefault(seed, []).append(result)
    held = runs[0][0].record.train_ids["recall"]
    assert len(held) == 3 and all(e.label == 0 for e in examples if e.id in held)
    assert runs[0][1].record.train_ids["recall"] == held, "same seed, same prefix"
    assert runs[1][0].record.train_ids["recall"] != held, "the seed draws the prefix"
    assert "loss" not in runs[0][0].record.train_ids
    metrics = runs[0][0].metrics["passage"]
    assert metrics["recall"]["n"] == len(examples) - 3
    assert metrics["loss"]["n"] == len(examples)


def test_recall_needs_enough_non_members_or_a_file():
    examples = labelled(6)
    session = Session(FakeBackend(), cache=False)
    with pytest.raises(DataError, match="needs at least one more"):
        copyprobe.detect(session, examples, ["recall"], params={"recall": {"n_prefix": 3}}, n_bootstrap=0)
    method = make_method("recall")
    with pytest.raises(ConfigError, match="prefix"):
        next(method.run(examples[0]))  # no hold_out and no file: says how to give one
    with pytest.raises(ConfigError, match="cannot read"):
        make_method("recall", prefix="/surely/not/a/file").hold_out(examples, 0)


def test_recall_on_fake_ranks_members_higher():
    # the fake lowers members' log-probs more under a context (see FakeBackend)
    examples = labelled(16)
    backend = FakeBackend(member_texts=[e.text for e in examples if e.label == 1 and e.id != "e0"])
    session = Session(backend, cache=False)
    result = copyprobe.detect(session, examples, ["recall"], params={"recall": {"n_prefix": 2}}, n_bootstrap=0,
                              blind_baseline=False)
    assert result.metrics["passage"]["recall"]["auc"] > 0.5
