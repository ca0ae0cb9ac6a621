"""ReCaLL, Con-ReCaLL, PAC, SaMIA, SURP, Tag&Tab and gradient norm through ``detect`` on
smollm2 (a few passages), and recall's KV-reused context against one plain forward pass
on a real model."""

from __future__ import annotations

import math

import pytest
import torch
from model_helpers import FAMOUS_AND_NONSENSE, model_fixture

import copyprobe
from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.data.example import Example

pytestmark = pytest.mark.model

SEVEN = ["recall", "con_recall", "pac", "samia", "surp", "tag_tab", "gradnorm"]


def test_seven_methods_run_through_detect(request, tmp_path):
    smollm2 = model_fixture(request)
    from copyprobe.freq import build_frequency_table

    corpus = ("The cat sat on the mat. It was a sunny day and the children played outside. "
              "Prices rose in the market while the council met to discuss the new road. ") * 20
    table = build_frequency_table(smollm2.tokenizer, [iter([corpus])], name="smollm2").save(tmp_path / "f.npz")
    # famous texts as members, nonsense as non-members, twice each (one of each is held out as a prefix)
    examples = [Example(id=f"{k}{i}", text=t, label=int(i < 3)) for k in "ab" for i, t in enumerate(FAMOUS_AND_NONSENSE)]
    params = {"recall": {"n_prefix": 1}, "con_recall": {"n_prefix": 1}, "pac": {"n_augment": 2},
              "samia": {"n_samples": 2, "max_tokens": 16}, "tag_tab": {"freq": str(table), "k": 3},
              "surp": {"max_entropy": 4.0}}
    result = copyprobe.detect(smollm2, examples, SEVEN, params=params, cache=False, n_bootstrap=0,
                              blind_baseline=False)
    for name in SEVEN:
        values = result.scores[name].dropna()
        assert len(values) >= len(examples) - 2, (name, result.run["failures"][:2])
        assert all(math.isfinite(v) for v in values)
    assert set(result.record.train_ids) == {"recall", "con_recall"}


def test_context_on_smollm2_matches_one_forward_pass(request):
    smollm2 = model_fixture(request)
    prefix = FAMOUS_AND_NONSENSE[3] + "\n\n"
    texts = FAMOUS_AND_NONSENSE[:3]
    answers = smollm2.answer([TokenLogprobsRequest(t, context=prefix) for t in texts])
    tokenizer = smollm2.tokenizer
    for text, answer in zip(texts, answers):
        # the prefix's tokens as context + text tokenized as one gives them (its closing blank
        # line is two newline tokens before a word, not the one token it is alone)
        text_ids = tokenizer(text, add_special_tokens=False).input_ids
        joined = tokenizer(prefix + text).input_ids
        assert joined[len(joined) - len(text_ids):] == text_ids
        context_ids = joined[:len(joined) - len(text_ids)]
        ids = context_ids + text_ids
        with torch.no_grad():
            logprobs = torch.log_softmax(smollm2.model(torch.tensor([ids])).logits[0].float(), -1)
        expected = [logprobs[p - 1, ids[p]].item() for p in range(len(context_ids), len(ids))]
        assert answer.logprobs == pytest.approx(expected, abs=1e-4)
