"""Token log-probs of a text after a context (ReCaLL's prefix): cache keys, the fake
backend, and the HF backend's shared-prefix KV cache against a plain forward pass over
context + text."""

from __future__ import annotations

import functools

import pytest
import torch
from model_helpers import make_tiny_backend

from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.errors import ConfigError

CONTEXT = "A passage the model never saw.\n\n"
TEXTS = ["hello world", "a much longer text that goes on and on for a while", "x", "another one here"]


def test_empty_context_keeps_the_old_cache_key():
    # the key every cached answer was stored under before the field existed
    import hashlib
    import json

    request = TokenLogprobsRequest("some text", stats=True)
    old_payload = {"kind": "token_logprobs", "text": "some text", "ngram": None, "stats": True}
    old_key = hashlib.sha256(json.dumps(old_payload, sort_keys=True, ensure_ascii=False,
                                        separators=(",", ":")).encode()).hexdigest()
    assert request.key() == old_key
    assert TokenLogprobsRequest("some text", stats=True, context="").key() == old_key
    with_context = TokenLogprobsRequest("some text", stats=True, context="prefix")
    assert with_context.key() != old_key
    assert with_context.key() != TokenLogprobsRequest("some text", stats=True, context="prefix2").key()


def test_fake_scores_every_word_after_the_context():
    fake = FakeBackend(member_texts=["alpha beta gamma"])
    plain, after = fake.answer([TokenLogprobsRequest("alpha beta gamma"),
                                TokenLogprobsRequest("alpha beta gamma", context="some prefix")])
    assert len(plain.logprobs) == 2 and len(after.logprobs) == 3
    assert after.tokens == ["alpha", "beta", "gamma"]
    assert after.logprobs[0] == fake._word_logprob("prefix", "alpha", fake.boost / 2)
    assert after.logprobs[1] <= plain.logprobs[0]  # members lose half their boost under a context


def reference_logprobs(backend, context: str, text: str) -> list[float]:
    """One forward pass of the model over context + text, no cache, no batching; the
    context's tokens are those of context + text tokenized as one, where the text's own
    tokens end them (else, a text that merges into the context's end, the context's own)."""
    text_ids = backend.tokenizer(text, add_special_tokens=False).input_ids
    joined = backend.tokenizer(context + text).input_ids
    if text_ids and joined[len(joined) - len(text_ids):] == text_ids:
        context_ids = joined[:len(joined) - len(text_ids)]
    else:
        context_ids = backend.tokenizer(context).input_ids
    with torch.no_grad():
        logits = backend.model(torch.tensor([context_ids + text_ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, -1)
    return [logprobs[len(context_ids) + j - 1, token].item() for j, token in enumerate(text_ids)]


@pytest.mark.parametrize("kind", ["llama", "gemma2"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_hf_context_matches_one_forward_pass(kind, batch_size):
    backend = make_tiny_backend(kind, batch_size=batch_size)
    requests = [TokenLogprobsRequest(t, context=CONTEXT) for t in TEXTS]
    requests.append(TokenLogprobsRequest(TEXTS[0], context="Another context. "))
    answers = backend.answer(requests + [TokenLogprobsRequest(TEXTS[1])])
    for request, answer in zip(requests, answers):
        expected = reference_logprobs(backend, request.context, request.text)
        assert answer.token_ids == backend.tokenizer(request.text, add_special_tokens=False).input_ids
        assert answer.logprobs == pytest.approx(expected, abs=2e-6)
        assert answer.mu is not None and len(answer.mu) == len(expected)  # stats ride along
    plain = answers[-1]
    assert len(plain.logprobs) == len(plain.token_ids) - 1  # the plain request is unchanged


def test_hf_tokenizes_texts_in_batches_and_each_context_once(monkeypatch):
    from copyprobe.backends.hf import scoring

    calls = []

    def counted(tokenizer, texts, add_special_tokens=True):
        calls.append((list(texts), add_special_tokens))
        return real(tokenizer, texts, add_special_tokens)

    real = scoring.batch_token_ids
    monkeypatch.setattr(scoring, "batch_token_ids", counted)
    backend = make_tiny_backend("llama", batch_size=3)
    requests = [TokenLogprobsRequest(t, context=c) for c in (CONTEXT, "Another context. ") for t in TEXTS]
    requests += [TokenLogprobsRequest("", context=CONTEXT), TokenLogprobsRequest(TEXTS[2])]
    answers = backend.answer(requests)
    # each distinct text once, though each comes after two contexts
    assert calls == [([TEXTS[2]], True), ([*TEXTS, ""], False), ([CONTEXT, "Another context. "], True),
                     ([CONTEXT + "x", "Another context. x"], True)]  # each context's end as before a word
    for request, answer in zip(requests[:-1], answers):
        expected = reference_logprobs(backend, request.context, request.text)
        assert answer.logprobs == pytest.approx(expected, abs=2e-6)
    assert answers[-2].token_ids == [] and answers[-2].logprobs == []
    first, again = answers[0].token_ids, answers[len(TEXTS)].token_ids  # one text after each context
    assert first == again and first is not again


@pytest.mark.model
def test_a_text_after_a_blank_line_is_read_as_in_one_text(smollm2):
    # SmolLM2 (GPT-2's rules) tokenizes "...\n\n" alone as one token, but "...\n\nThe" as
    # two newlines and "The": the text after ReCaLL's prefix is scored as it is when the
    # two are one text (the tokens a plain pass over context + text gives it)
    context, text = "The ship sailed at dawn.\n\n", "The harbour was quiet and grey."
    tokenizer = smollm2.tokenizer
    alone = tokenizer(context, add_special_tokens=False).input_ids
    joined = tokenizer(context + text, add_special_tokens=False).input_ids
    text_ids = tokenizer(text, add_special_tokens=False).input_ids
    assert joined[:len(alone)] != alone and joined[len(joined) - len(text_ids):] == text_ids  # the case at hand
    after, whole = smollm2.answer([TokenLogprobsRequest(text, context=context), TokenLogprobsRequest(context + text)])
    assert after.token_ids == text_ids
    assert after.logprobs == pytest.approx(list(whole.logprobs)[-len(text_ids):], abs=1e-4)


@pytest.mark.parametrize("kind", ["llama", "gemma2"])
def test_hf_contexts_of_one_request_each_run_in_one_batch(kind):
    # every text after a context of its own: as windows over context + text they share
    # forward passes (on a KV cache each would cost two passes of one row)
    backend = make_tiny_backend(kind, batch_size=8)
    decoder = backend._decoder
    rows = []

    @functools.wraps(decoder.forward)  # its signature: the KV cache's keyword
    def counting(*args, **kwargs):
        rows.append(kwargs["input_ids"].shape[0])
        return decoder(*args, **kwargs)

    backend._decoder = counting
    requests = [TokenLogprobsRequest(text, context=f"Context {i}: {text[:4]}. ") for i, text in enumerate(TEXTS)]
    answers = backend.answer(requests + [TokenLogprobsRequest(TEXTS[0])])
    assert rows == [len(TEXTS) + 1]  # the plain text joins the same batch
    for request, answer in zip(requests, answers):
        assert answer.logprobs == pytest.approx(reference_logprobs(backend, request.context, request.text), abs=2e-6)


def test_hf_context_longer_than_max_length_uses_windows():
    length = 48
    backend = make_tiny_backend("llama", max_length=length)
    text = TEXTS[1]
    answer = backend.answer([TokenLogprobsRequest(text, context=CONTEXT)])[0]
    context_ids = backend.tokenizer(CONTEXT).input_ids
    full = context_ids + backend.tokenizer(text, add_special_tokens=False).input_ids
    assert len(full) > length
    expected = reference_logprobs(backend, CONTEXT, text)
    assert len(answer.logprobs) == len(expected)
    fits = length - len(context_ids)  # tokens in the first window see the whole context
    assert answer.logprobs[:fits] == pytest.approx(expected[:fits], abs=2e-6)
    # the next token is scored by the second sliding window over context + text:
    # <s> then full[stride:], so full position `length` sits at window position length - stride + 1
    stride = length // 2
    window = [0] + full[stride:stride + length - 1]
    with torch.no_grad():
        logprobs = torch.log_softmax(backend.model(torch.tensor([window])).logits[0].float(), -1)
    assert answer.logprobs[fits] == pytest.approx(logprobs[length - stride, full[length]].item(), abs=2e-6)


def test_hf_context_rejects_ngram_and_oversized_context():
    backend = make_tiny_backend("llama", max_length=30)
    with pytest.raises(ConfigError, match="context and ngram"):
        backend.answer([TokenLogprobsRequest("abc", context="x", ngram=2)])
    with pytest.raises(ConfigError, match="shorter than max length"):
        backend.answer([TokenLogprobsRequest("abc", context="y" * 40)])


def test_a_backend_without_the_context_capability_refuses_before_work():
    from copyprobe.backends.base import CONTEXT_LOGPROBS
    from copyprobe.errors import CapabilityError

    assert TokenLogprobsRequest("t", context="c").capabilities() == {"token_logprobs", CONTEXT_LOGPROBS}
    assert TokenLogprobsRequest("t").capabilities() == {"token_logprobs"}
    fake = FakeBackend(capabilities=["token_logprobs"])
    with pytest.raises(CapabilityError, match=CONTEXT_LOGPROBS):
        fake.answer([TokenLogprobsRequest("a b", context="c")])
    assert fake.calls == {}
