import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from copyprobe.copying.memfree import (
    BloomFilter,
    MemFreeLogitsProcessor,
    NgramIndex,
    _mix,
    _mix_np,
    extend_hash,
    prefix_hash,
)
from copyprobe.errors import ConfigError

VOCAB = 5


def _ngrams(seq, n):
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}


def _decode(proc, prompt, logits_rows, vocab):
    """Greedy decoding driven by the processor; stops when every token is rejected."""
    ids = list(prompt)
    for row in logits_rows:
        scores = torch.tensor([row], dtype=torch.float32)
        out = proc(torch.tensor([ids]), scores)
        if torch.isinf(out).all():
            break
        ids.append(int(out.argmax()))
    return ids


corpora = st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=0, max_size=30), min_size=0, max_size=4)


@settings(max_examples=150, deadline=None)
@given(corpus=corpora, n=st.integers(2, 4), kind=st.sampled_from(["set", "bloom"]),
       prompt=st.lists(st.integers(0, VOCAB - 1), min_size=0, max_size=6),
       logits=st.lists(st.lists(st.floats(-5, 5, allow_nan=False), min_size=VOCAB, max_size=VOCAB), min_size=1, max_size=25))
def test_never_emits_a_protected_ngram(corpus, n, kind, prompt, logits):
    index = NgramIndex(n=n, kind=kind, capacity=200)
    for seq in corpus:
        index.add(seq)
    protected = set().union(*[_ngrams(s, n) for s in corpus]) if corpus else set()
    proc = MemFreeLogitsProcessor(index)
    ids = _decode(proc, prompt, logits, VOCAB)
    # every n-gram that ends in a generated token is unprotected
    for end in range(len(prompt), len(ids)):
        if end - n + 1 >= 0:
            assert tuple(ids[end - n + 1 : end + 1]) not in protected
    # and every protected n-gram is known to the index (no false negatives)
    for g in protected:
        assert index.contains(g)


@settings(max_examples=100, deadline=None)
@given(corpus=corpora, n=st.integers(2, 4),
       prefix=st.lists(st.integers(0, VOCAB - 1), min_size=4, max_size=8),
       row=st.lists(st.floats(-5, 5, allow_nan=False), min_size=VOCAB, max_size=VOCAB))
def test_exact_set_blocks_exactly_the_protected_continuations(corpus, n, prefix, row):
    index = NgramIndex(n=n, kind="set")
    for seq in corpus:
        index.add(seq)
    protected = set().union(*[_ngrams(s, n) for s in corpus]) if corpus else set()
    proc = MemFreeLogitsProcessor(index)
    scores = torch.tensor([row])
    out = proc(torch.tensor([prefix]), scores.clone())
    ctx = tuple(prefix[len(prefix) - (n - 1):])
    for t in range(VOCAB):
        if ctx + (t,) in protected:
            assert out[0, t] == -float("inf")
        else:
            assert out[0, t] == scores[0, t]  # everything else untouched


def test_nothing_protected_leaves_scores_untouched():
    index = NgramIndex(n=3)
    proc = MemFreeLogitsProcessor(index)
    scores = torch.randn(2, 7)
    out = proc(torch.tensor([[1, 2, 3], [4, 5, 6]]), scores)
    assert out is scores  # the very tensor, unchanged
    index.add([1, 2])  # shorter than n: still nothing protected
    assert proc(torch.tensor([[1, 2, 3]]), scores[:1]) is scores[:1] or torch.equal(proc(torch.tensor([[1, 2, 3]]), scores[:1]), scores[:1])
    assert index.empty


def test_rows_are_filtered_independently():
    index = NgramIndex(n=3)
    index.add([1, 2, 3])
    proc = MemFreeLogitsProcessor(index)
    scores = torch.zeros(2, 5)
    out = proc(torch.tensor([[0, 1, 2], [0, 2, 1]]), scores)
    assert out[0, 3] == -float("inf") and torch.isfinite(out[0, [0, 1, 2, 4]]).all()
    assert torch.equal(out[1], scores[1])
    assert torch.equal(scores, torch.zeros(2, 5))  # input not modified in place
    assert proc.n_rejections == 1


def test_hashing_agrees_between_python_and_numpy():
    keys = np.array([0, 1, 12345, 2**63 + 5, 2**64 - 1], dtype=np.uint64)
    assert [int(x) for x in _mix_np(keys)] == [_mix(int(k)) for k in keys]
    assert extend_hash(prefix_hash([4, 5]), 6) == prefix_hash([4, 5, 6])


def test_bloom_filter_has_no_false_negatives_and_few_false_positives():
    bf = BloomFilter(capacity=2000, fp_rate=1e-3)
    rng = np.random.default_rng(0)
    members = rng.integers(0, 2**63, size=2000, dtype=np.int64).astype(np.uint64)
    bf.add(int(k) for k in members)
    assert bf.contains_many(members).all()
    others = rng.integers(0, 2**63, size=20000, dtype=np.int64).astype(np.uint64)
    assert bf.contains_many(others).mean() < 0.005


def test_bad_settings():
    with pytest.raises(ConfigError):
        NgramIndex(n=1)
    with pytest.raises(ConfigError):
        NgramIndex(kind="trie")
    with pytest.raises(ConfigError):
        MemFreeLogitsProcessor(None)


def test_deferred_processor_fingerprint_depends_on_texts_only():
    a = MemFreeLogitsProcessor.deferred(["one two three"], n=10)
    b = MemFreeLogitsProcessor.deferred(["one two three"], n=10)
    c = MemFreeLogitsProcessor.deferred(["one two four"], n=10)
    d = MemFreeLogitsProcessor.deferred(["one two three"], n=8)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert a.fingerprint() != d.fingerprint()
    with pytest.raises(RuntimeError):
        a(torch.tensor([[1] * 12]), torch.zeros(1, 3))


class _Spy:
    """Records the token ids it sees at every step (after MemFree in the list)."""

    def __init__(self):
        self.seen = []

    def __call__(self, input_ids, scores):
        self.seen.append(input_ids[0].tolist())
        return scores


def test_memfree_through_hf_backend(tiny_llama):
    """A tiny random model generates greedily; protect what it generated, ask again: the
    same request now yields no protected 6-gram (checked on the token ids the model saw),
    and the same model without the filter is unchanged."""
    from copyprobe.backends.base import GenerateRequest
    from copyprobe.backends.hf import HFBackend

    tok = tiny_llama.model, tiny_llama.tokenizer
    model, tok = tok
    prompt = "In the beginning God created"
    req = GenerateRequest(prompt=prompt, max_tokens=24, temperature=0.0)
    spy0 = _Spy()
    plain_backend = HFBackend(model, tok, spec="tiny-spy", device="cpu", dtype="float32", logits_processors=[spy0])
    plain = plain_backend.answer([req])[0].text
    assert plain == tiny_llama.answer([req])[0].text  # a pass-through processor changes nothing
    plain_ids = spy0.seen[-1]
    start = len(spy0.seen[0])
    generated = plain_ids[start:]
    assert len(generated) >= 6
    # protect the generated tokens themselves (as text decoded from them)
    proc = MemFreeLogitsProcessor(NgramIndex(n=6))
    proc.index.add(plain_ids)
    spy = _Spy()
    filtered = HFBackend(model, tok, spec="tiny-memfree", device="cpu", dtype="float32",
                         logits_processors=[proc, spy], fingerprint_extra=proc.fingerprint())
    assert filtered.fingerprint != tiny_llama.fingerprint
    out = filtered.answer([req])[0].text
    assert out != plain and proc.n_rejections >= 1
    ids = spy.seen[-1]
    prot = _ngrams(plain_ids, 6)
    assert not any(tuple(ids[e - 5 : e + 1]) in prot for e in range(start, len(ids)))


def test_memfree_backend_builds_a_filtered_backend_through_the_loader():
    """The path `copyprobe copying --mitigation memfree` takes: load with a deferred filter,
    bind it to the loaded tokenizer; the fingerprint changes with the protected texts."""
    from model_helpers import make_tiny_backend

    from copyprobe.copying.memfree import memfree_backend

    calls = []

    def loader(spec, **options):
        calls.append(options)
        return make_tiny_backend("llama", logits_processors=options["logits_processors"],
                                 fingerprint_extra=options["fingerprint_extra"])

    b1, p1 = memfree_backend("tiny", ["In the beginning God created the heaven"], n=4, loader=loader, batch_size=2)
    b2, p2 = memfree_backend("tiny", ["And the earth was without form"], n=4, loader=loader)
    assert calls[0]["batch_size"] == 2 and calls[0]["fingerprint_extra"] == p1.fingerprint()
    assert b1.logits_processors == [p1] and p1.index is not None and not p1.index.empty
    assert b1.fingerprint != b2.fingerprint
    ids = b1.tokenizer("In the beginning God created the heaven", add_special_tokens=False)["input_ids"]
    assert p1.index.contains(ids[:4]) and not p2.index.contains(ids[:4])
    with pytest.raises(ConfigError, match="local"):
        memfree_backend("openai:m@http://x", ["t"], loader=loader)
