"""slope on the bundled models: every n-gram order 0..5 and every normalisation, on a
batch of several texts, with a model that adds no leading special token (SmolLM2) and
one that adds <bos> (Gemma-3-270M).

Before issue 29, n = 1 on SmolLM2 crashed in the scoring path (each text's prefix window
held one token with nothing to score, and a batch made only of such windows reached
score_rows with 0 rows). The values are checked against a direct computation from the
model's logits, without padding (one unpadded batch of equal-length contexts per n): the full-prefix log-probability of each token, and
the log-probability given only the leading special tokens and its n predecessors.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import copyprobe
from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.registry import make_method

TEXTS = [
    "The lighthouse keeper wrote every evening.",
    "Seven red kites circled the quarry.",
    "A parcel arrived with no return address, only a pressed fern inside.",
    "Bread, cheese and apples.",
    "She counted the steps twice before she trusted the staircase.",
    "Wind.",
]
NORMALIZATIONS = ("none", "mean", "zscore")


def direct_logprobs(backend, text: str, n: int):
    """{position: log p} of every scored token: full prefix (n = 0) or the leading
    special tokens plus the n previous tokens (positions with n text predecessors only).
    The n-token contexts have one length, so they go as one unpadded batch (one pass a
    position took most of a minute: a pass of a few tokens costs a read of the weights)."""
    import torch

    ids = list(backend.tokenizer(text).input_ids)
    lead = ids[:len(backend.lead_ids)] if ids[:len(backend.lead_ids)] == backend.lead_ids else []
    with torch.no_grad():
        if n == 0:
            logits = backend.model(torch.tensor([ids])).logits[0].float()
            logp = torch.log_softmax(logits, -1)
            return {p: float(logp[p - 1, ids[p]]) for p in range(1, len(ids))}
        positions = list(range(len(lead) + n, len(ids)))
        if not positions:
            return {}
        contexts = torch.tensor([lead + ids[p - n:p] for p in positions])
        logits = backend.model(contexts, logits_to_keep=1).logits[:, -1].float()
        logp = torch.log_softmax(logits, -1)
    return {p: float(logp[row, ids[p]]) for row, p in enumerate(positions)}


def expected_score(full: dict, local: dict, n: int, normalize: str, variant: str) -> float:
    """The notebook's formula (variant 'notebook': log space, 'probability': p space) over
    the tokens with their n-token context."""
    positions = sorted(local) if n else sorted(full)
    to = (lambda v: v) if variant == "notebook" else math.exp
    values = np.array([to(full[p]) - to(local[p]) if n else to(full[p]) for p in positions])
    slope = np.polyfit(np.arange(len(values)), values, 1)[0]
    if normalize == "none":
        return slope
    if normalize == "mean":
        return slope - values.mean()
    return (slope - values.mean()) / values.std()


def check_model(backend) -> None:
    examples = [Example(id=str(i), text=t) for i, t in enumerate(TEXTS)]
    full_prefix = {e.text: direct_logprobs(backend, e.text, 0) for e in examples}
    for n in range(6):
        methods = {(v, z): make_method("slope", ngram=n, normalize=z, variant=v)
                   for v, z in itertools.product(("notebook", "probability", "legacy"), NORMALIZATIONS)}
        # every request of the batch at once, as the runner sends them
        requests = sorted({r for m in methods.values() for e in examples for r in m.requests(e)},
                          key=lambda r: (r.text, r.ngram or 0, r.ngram_drop_short))
        answers = dict(zip(requests, backend.answer(requests)))
        for example in examples:
            full = full_prefix[example.text]
            local = direct_logprobs(backend, example.text, n) if n else {}
            for (variant, normalize), method in methods.items():
                responses = [answers[r] for r in method.requests(example)]
                if variant == "legacy":
                    got_values = method.values(responses)
                    assert len(got_values) == len(full), (n, example.text)
                    continue
                if len(local if n else full) < 2:
                    with pytest.raises(RowError):
                        method.score(example, responses)
                    continue
                got = method.score(example, responses)
                want = expected_score(full, local, n, normalize, variant)
                # zscore divides by the std of as few as 2-3 values on the shortest texts, which
                # multiplies fp32 batch-vs-single noise (seen: 1.7e-3 relative on 3 tokens)
                rel = 1e-2 if normalize == "zscore" and len(local if n else full) < 5 else 1e-3
                assert math.isclose(got, want, rel_tol=rel, abs_tol=1e-4), (n, normalize, variant, example.text,
                                                                            got, want)


def check_detect(backend, cache) -> None:
    """The whole path (runner, batching, record) for every n, several texts at once; the
    cache makes the normalisations after the first of each n free."""
    # None: the default, as a user leaves it (first: the path that crashed before issue 29)
    for variant, n, normalize in itertools.product((None, "legacy"), range(6), NORMALIZATIONS):
        params = {"ngram": n, "normalize": normalize} | ({"variant": variant} if variant else {})
        result = copyprobe.detect(backend, TEXTS, ["slope"], params={"slope": params},
                                  cache=cache, blind_baseline=False)
        scored = result.scores["slope"].notna().sum()
        assert scored >= len(TEXTS) - 2, (n, normalize, variant, result.scores)


@pytest.mark.model
def test_slope_every_ngram_and_normalisation_smollm2(smollm2, tmp_path):
    assert smollm2.lead_ids == []  # the case that crashed: no leading special token
    check_detect(smollm2, tmp_path / "cache.sqlite")
    check_model(smollm2)


@pytest.mark.model
def test_slope_every_ngram_and_normalisation_gemma(gemma, tmp_path):
    assert gemma.lead_ids  # <bos>
    check_model(gemma)
    check_detect(gemma, tmp_path / "cache.sqlite")


@pytest.mark.model
def test_ngram_requests_of_one_token_prefixes_batch_without_error(smollm2):
    """The scoring path itself: n = 1 without a leading token plans no empty window, for
    batches made only of such requests, of any size."""
    for size in (1, 2, 4, 5, 9):
        texts = (TEXTS * 2)[:size]
        for drop in (False, True):
            extra = {"ngram_drop_short": True} if drop else {}
            answers = smollm2.answer([TokenLogprobsRequest(t, ngram=1, **extra) for t in texts])
            for text, answer in zip(texts, answers):
                ids = smollm2.tokenizer(text).input_ids
                assert len(answer.logprobs) == len(ids) - 1
                assert all(math.isfinite(v) for v in answer.logprobs)


def test_ngram_drop_short_answers_the_last_tokens_of_the_full_ngram_answer(tiny_llama):
    """Without a model file: the T - n tokens with an n-token context, the same values as
    the full answer's last T - n, for texts too short to have any."""
    texts = ["abcdefgh", "xyz", "a", "hello there"]
    for n in (1, 2, 3):
        full = tiny_llama.answer([TokenLogprobsRequest(t, ngram=n) for t in texts])
        short = tiny_llama.answer([TokenLogprobsRequest(t, ngram=n, ngram_drop_short=True) for t in texts])
        for text, whole, part in zip(texts, full, short):
            text_tokens = len(whole.token_ids) - len(tiny_llama.lead_ids)
            assert len(part.logprobs) == max(text_tokens - n, 0), (text, n)
            tail = whole.logprobs[len(whole.logprobs) - len(part.logprobs):]
            assert np.allclose(part.logprobs, tail, atol=1e-5)


def test_ngram_requests_that_keep_short_tokens_keep_their_old_cache_key():
    """Cached legacy n-gram answers stay valid; the new alignment is a different entry."""
    import hashlib
    import json

    old_payload = {"kind": "token_logprobs", "text": "some text", "ngram": 2, "stats": True}
    old_key = hashlib.sha256(json.dumps(old_payload, sort_keys=True, ensure_ascii=False,
                                        separators=(",", ":")).encode()).hexdigest()
    assert TokenLogprobsRequest("some text", ngram=2, stats=True).key() == old_key
    assert TokenLogprobsRequest("some text", ngram=2, stats=True, ngram_drop_short=True).key() != old_key
