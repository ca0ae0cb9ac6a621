"""Gradient norm against autograd on the tiny model, and its refusal by backends that
cannot compute gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from model_helpers import SHORT_TEXTS, make_tiny_backend, score_texts

from copyprobe.backends.base import GRAD_NORM, GradNormRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.errors import CapabilityError


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_backend("llama", batch_size=2)


def test_gradnorm_matches_autograd(tiny):
    for norm in ("mean_tensor", "global"):
        scores, _ = score_texts(tiny, "gradnorm", {"norm": norm}, texts=SHORT_TEXTS[:2])
        for i, text in enumerate(SHORT_TEXTS[:2]):
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
        score_texts(backend, "gradnorm")
    assert backend.calls == {}, "refused before any work"
    assert GradNormRequest("x").capabilities() == {GRAD_NORM}
