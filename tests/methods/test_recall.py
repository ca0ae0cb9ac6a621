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
    """Mean log-prob of text's tokens, after the context (all of the text's tokens, the
    two read as one text: context + text tokenized together) or alone (all but the
    first), from one plain forward pass."""
    text_ids = tokenizer(text, add_special_tokens=context is None).input_ids
    if context is None:
        context_ids = []
    else:
        joined = tokenizer(context + text).input_ids
        assert joined[len(joined) - len(text_ids):] == text_ids  # the text splits alike after the context
        context_ids = joined[:len(joined) - len(text_ids)]
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
    # the fake lowers members' log-probs more under a context (see FakeBackend); members'
    # and non-members' words differ, so only membership tells them apart (rotations of one
    # word list would make every word a member's)
    words = [f"w{i}" for i in range(40)]
    examples = [Example(id=f"e{i}", text=" ".join(words[i:i + 10]), label=int(i % 2 == 0)) for i in range(16)]
    examples = [Example(id=e.id, text=e.text if e.label else e.text.replace("w", "v"), label=e.label)
                for e in examples]
    backend = FakeBackend(member_texts=[e.text for e in examples if e.label == 1])
    session = Session(backend, cache=False)
    result = copyprobe.detect(session, examples, ["recall"], params={"recall": {"n_prefix": 2}}, n_bootstrap=0,
                              blind_baseline=False)
    assert result.metrics["passage"]["recall"]["auc"] > 0.5


def test_both_means_are_over_the_same_tokens_where_the_first_has_no_context():
    # the fake has no leading special token: alone, a text's first word is not scored;
    # after the prefix it is, and ReCaLL leaves it out so that LL(x | P) and LL(x) average
    # the same words (computed here from the fake's own per-word rule)
    examples = [Example(id=f"e{i}", text=f"alpha{i} beta gamma delta{i} epsilon", label=i % 2) for i in range(6)]
    backend = FakeBackend(member_texts=[e.text for e in examples if e.label == 1])
    result = copyprobe.detect(Session(backend, cache=False), examples, ["recall", "con_recall"],
                              params={"recall": {"n_prefix": 1}, "con_recall": {"n_prefix": 1, "gamma": 0.5}},
                              n_bootstrap=0, blind_baseline=False)
    scores = result.scores.set_index("id")

    def ll(text: str, boost) -> float:
        words = text.split()
        return sum(backend._word_logprob(a, b, boost) for a, b in zip(words, words[1:])) / (len(words) - 1)

    held = result.record.train_ids
    for example in examples:
        if example.id in held["recall"] or example.id in held["con_recall"]:
            continue
        plain, after = ll(example.text, None), ll(example.text, backend.boost / 2)
        assert scores.loc[example.id, "recall"] == pytest.approx(after / plain, abs=1e-12)
        assert scores.loc[example.id, "con_recall"] == pytest.approx((after - 0.5 * after) / plain, abs=1e-12)
