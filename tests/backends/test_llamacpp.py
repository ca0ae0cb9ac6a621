"""LlamaCppBackend: agreement with the HF backend on the same GGUF, sliding windows,
refusals. The shared contract is in test_contract.py."""

from __future__ import annotations

import sys

import pytest

from copyprobe.backends.base import GenerateRequest, TokenLogprobsRequest
from copyprobe.backends.hf.scoring import WORD_AFTER
from copyprobe.errors import BackendError, CapabilityError, ConfigError

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install 'copyprobe[llamacpp]'")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "In the beginning God created the heaven and the earth. And the earth was without form, and void.",
    "def add(a, b):\n    return a + b\n",
]


def differences(a, b, texts):
    """Max and mean |difference| of log p, mu, sigma over all scored tokens, and the
    fraction of positions where one backend ranks the actual token first and the other not
    (ranks further down move with tiny differences among near-equal logits)."""
    diffs = {"logprobs": [], "mu": [], "sigma": []}
    ranks = firsts = 0
    for x, y in zip(a.answer([TokenLogprobsRequest(t, stats=True) for t in texts]),
                    b.answer([TokenLogprobsRequest(t, stats=True) for t in texts])):
        assert x.token_ids == y.token_ids
        for name in diffs:
            diffs[name] += [abs(u - v) for u, v in zip(getattr(x, name), getattr(y, name))]
        ranks += sum((r == 1) != (s == 1) for r, s in zip(x.rank, y.rank))
        firsts += sum(r == 1 or s == 1 for r, s in zip(x.rank, y.rank))
    n = len(diffs["logprobs"])
    return {name: (max(v), sum(v) / n) for name, v in diffs.items()}, ranks / max(firsts, 1)


def test_float32_gguf_scores_like_transformers(llamacpp_tiny, hf_tiny_gguf):
    # same float32 weights: only the order of floating-point operations differs
    stats, rank_changes = differences(llamacpp_tiny, hf_tiny_gguf, TEXTS)
    for name, (largest, _) in stats.items():
        assert largest < 1e-3, name
    assert rank_changes == 0
    prompt = "Q: the capital of France?\nA:"
    a, b = (backend.answer([GenerateRequest(prompt=prompt, max_tokens=12)])[0]
            for backend in (llamacpp_tiny, hf_tiny_gguf))
    assert a.text == b.text and a.completion_tokens == b.completion_tokens


def test_token_strings_are_vocabulary_entries(llamacpp_tiny, hf_tiny_gguf):
    text = "the cat"
    ours = llamacpp_tiny.answer([TokenLogprobsRequest(text)])[0]
    assert ours.tokens == hf_tiny_gguf.tokenizer.convert_ids_to_tokens(ours.token_ids)


def test_sliding_windows_score_each_token_once_with_the_documented_context(tiny_gguf):
    from copyprobe.backends.specs import load_backend

    # no " t" (the tiny tokenizer's one merge) and no BOS (this GGUF does not ask for one):
    # token j is character j
    long_text = "a big dog ran by a pub and a cat sat on a mat; " * 4  # > 64 byte tokens
    full = load_backend(f"llamacpp:{tiny_gguf}", chunk=7)
    short = load_backend(f"llamacpp:{tiny_gguf}", max_length=24, chunk=5)
    try:
        a = full.answer([TokenLogprobsRequest(long_text[:60])])[0]
        b = short.answer([TokenLogprobsRequest(long_text[:60])])[0]
        assert a.token_ids == b.token_ids and len(b.logprobs) == len(b.token_ids) - 1
        # the first window is the text's own start: its 23 scores are full-context scores
        assert b.logprobs[:23] == pytest.approx(a.logprobs[:23], abs=1e-4)
        # window 1 starts at text position 12 (stride 12): its first scored token (position
        # 24) sees tokens 12..23, as in a text starting there
        assert short.lead_ids == []
        ids = b.token_ids
        window = short.answer([TokenLogprobsRequest(long_text[12:36])])[0]
        assert window.token_ids == ids[12:36]
        assert b.logprobs[23] == pytest.approx(window.logprobs[11], abs=1e-4)
        longest = short.answer([TokenLogprobsRequest(long_text)])[0]  # many windows
        assert len(longest.logprobs) == len(longest.token_ids) - 1
    finally:
        full.close()
        short.close()


def test_ngram_requests_are_refused_before_any_work(llamacpp_tiny, monkeypatch):
    calls = []
    monkeypatch.setattr(llamacpp_tiny, "_decode", lambda *a, **k: calls.append(a))
    with pytest.raises(CapabilityError, match="ngram_logprobs"):
        llamacpp_tiny.answer([TokenLogprobsRequest("a b c"), TokenLogprobsRequest("a b c", ngram=2)])
    assert calls == []


def test_fingerprint_covers_file_and_settings_not_batch(tiny_gguf, tmp_path):
    from copyprobe.backends.llamacpp import LlamaCppBackend

    base = LlamaCppBackend(tiny_gguf)
    same = LlamaCppBackend(tiny_gguf, batch_size=3, chunk=5)
    shorter = LlamaCppBackend(tiny_gguf, max_length=32)
    exact = LlamaCppBackend(tiny_gguf, kv_type="f32")
    copy = tmp_path / "copy.gguf"
    data = bytearray(open(tiny_gguf, "rb").read())
    data[-1] ^= 1  # one weight bit
    copy.write_bytes(bytes(data))
    other = LlamaCppBackend(copy)
    try:
        assert base.fingerprint == same.fingerprint
        assert len({base.fingerprint, shorter.fingerprint, other.fingerprint, exact.fingerprint}) == 4
        assert base.info()["backend"] == "llamacpp"
    finally:
        for backend in (base, same, shorter, other, exact):
            backend.close()


def test_errors_are_one_line(tiny_gguf, tmp_path, monkeypatch):
    from copyprobe.backends.llamacpp import LlamaCppBackend
    from copyprobe.backends.specs import load_backend

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 64)
    for spec, error in [(f"llamacpp:{tmp_path / 'missing.gguf'}", "not found"),
                        (f"llamacpp:{bad}", "bad header"), ("llamacpp:", "needs a GGUF file")]:
        with pytest.raises((BackendError, ConfigError), match=error) as info:
            load_backend(spec)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="exceeds the model's context"):
        LlamaCppBackend(tiny_gguf, max_length=100_000)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(BackendError, match=r"copyprobe\[llamacpp\]"):
        LlamaCppBackend(tiny_gguf)


def test_prompt_past_the_context_is_a_backend_error(llamacpp_tiny):
    with pytest.raises(BackendError, match="exceeds"):
        llamacpp_tiny.answer([GenerateRequest(prompt="x" * 60, max_tokens=10)])


@pytest.mark.model
def test_quantized_smollm2_agrees_with_its_dequantized_transformers_copy(llamacpp_smollm2, smollm2):
    # llama.cpp multiplies by the Q4_1 blocks with 8-bit activations; transformers by the
    # de-quantized float32 weights: differences are the activations' rounding
    stats, rank_changes = differences(llamacpp_smollm2, smollm2, TEXTS)
    print("smollm2 llama.cpp vs HF (max, mean):", stats, "rank changes", rank_changes)
    assert stats["logprobs"][1] < 0.1 and stats["logprobs"][0] < 1.0
    assert rank_changes < 0.25  # measured 0.29 over all ranks, see benchmarks/results/llamacpp.md


@pytest.mark.model
def test_recall_runs_on_quantized_smollm2_like_on_transformers(llamacpp_smollm2, smollm2):
    import copyprobe
    from copyprobe.data.example import Example

    # context requests agree with HF's within the quantization's noise, and recall (the
    # ratio of the two log-likelihoods) moves little
    prefix = TEXTS[1] + "\n\n"  # a boundary both tokenizations split alike (the scores of a text
    # after a context tokenized apart from it can differ by ~1 nat from one tokenized with it)
    requests = [TokenLogprobsRequest(t, context=prefix) for t in (TEXTS[0], TEXTS[2])]
    for ours, theirs in zip(llamacpp_smollm2.answer(requests), smollm2.answer(requests)):
        assert ours.token_ids == theirs.token_ids
        mean = sum(abs(a - b) for a, b in zip(ours.logprobs, theirs.logprobs)) / len(ours.logprobs)
        assert mean < 0.15  # measured 0.099 and 0.043; plain texts 0.06-0.08
    examples = [Example(id=str(i), text=t, label=int(i < 2)) for i, t in enumerate(TEXTS * 2)]
    scores = [copyprobe.detect(backend, examples, ["recall"], params={"recall": {"n_prefix": 1}}, cache=False,
                               n_bootstrap=0, blind_baseline=False).scores["recall"] for backend in
              (llamacpp_smollm2, smollm2)]
    assert scores[0].notna().all()  # the prefix row is scored too, and left out of the metrics
    assert (scores[0] - scores[1]).abs().max() < 0.05


def test_prompts_sharing_prefixes_answer_as_they_do_alone(llamacpp_tiny):
    from copyprobe.backends.base import ChoiceLogprobsRequest

    # prompts are run in sorted order and reuse the KV cache of the shared prefix
    prompts = ["Q: a b c d?\nA:", "Q: a b d c?\nA:", "Q: a c b d?\nA:", "Q: b a c d?\nA:"]
    choices = [ChoiceLogprobsRequest(prompt=p, choices=("A", "B")) for p in prompts]
    together = llamacpp_tiny.answer(list(reversed(choices)))[::-1]
    gens = [GenerateRequest(prompt=p, max_tokens=5) for p in prompts]
    gens_together = llamacpp_tiny.answer(list(reversed(gens)))[::-1]
    for request, gen, answer, generated in zip(choices, gens, together, gens_together):
        llamacpp_tiny._kv = []  # alone: from an empty cache
        alone = llamacpp_tiny.answer([request])[0]
        assert answer.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        llamacpp_tiny._kv = []
        assert llamacpp_tiny.answer([gen])[0].text == generated.text


def _fresh(backend):
    """Forget the KV cache and the last scored text: the next request decodes from scratch."""
    backend._kv = []
    backend._scored = None


@pytest.mark.model
@pytest.mark.bigmodel
def test_qwen_samples_and_choices_do_not_depend_on_the_prompts_before_them(llamacpp_qwen):
    from copyprobe.backends.base import ChoiceLogprobsRequest

    # a long shared prefix, cut at lengths that are not multiples of the kernels' tiles:
    # resuming there moved Qwen's Q4_K logits and changed seeded samples
    letter = ("Dear Edvin, the wind came through on Tuesday night with no manners at all. I had tied the "
              "Tern to the jetty with every rope I own and two I borrowed from Sundqvist without asking. ")
    prompts = [letter + tail for tail in ("By midnight", "By morning the lake", "In the morning", "Then")]
    gens = [GenerateRequest(prompt=p, max_tokens=12, temperature=1.0, seed=3) for p in prompts]
    choices = [ChoiceLogprobsRequest(prompt=p, choices=("the", "a")) for p in prompts]
    _fresh(llamacpp_qwen)
    together = llamacpp_qwen.answer(gens)
    chosen = llamacpp_qwen.answer(choices)
    for gen, choice, sampled, picked in zip(gens, choices, together, chosen):
        _fresh(llamacpp_qwen)
        assert llamacpp_qwen.answer([gen])[0].text == sampled.text
        _fresh(llamacpp_qwen)
        assert llamacpp_qwen.answer([choice])[0].logprobs == picked.logprobs


@pytest.mark.parametrize("backend_name", [
    "llamacpp_tiny",
    pytest.param("llamacpp_smollm2", marks=pytest.mark.model),
    # Qwen's Q4_K kernels are where a misaligned resume changes the numbers
    pytest.param("llamacpp_qwen", marks=[pytest.mark.model, pytest.mark.bigmodel]),
])
def test_texts_sharing_prefixes_score_as_they_do_alone(backend_name, request):
    backend = request.getfixturevalue(backend_name)
    # VeilProbe's leave-one-word-out texts, a text that is a prefix of another, a duplicate
    text = "The ferry left at nine; the lake was flat as a plate."  # one window of the tiny model
    if backend.max_length > 256:  # real models: long enough for resumes at multiples of 32
        text = " ".join([text, "Mother said the ice would hold until March, and Edvin laughed at her,",
                         "but by the second week the boats were out again and the post came by water."] * 2)
    words = text.split(" ")
    texts = [text] + [" ".join(words[:i] + words[i + 1:]) for i in range(len(words))]
    texts += [" ".join(words[:5]), text, "Another text entirely, sharing nothing."]
    requests = [TokenLogprobsRequest(t, stats=True) for t in texts]
    _fresh(backend)
    before = dict(backend.counters)
    together = backend.answer(list(reversed(requests)))[::-1]
    decoded = backend.counters["decoded_tokens"] - before["decoded_tokens"]
    total = sum(len(backend.tokenize(t)) for t in texts)
    # the removed-word texts share everything before the removed word: much is reused
    assert decoded < 0.8 * total
    # SmolLM2 decodes each text alone at ~7 ms a token on two cores: of the removed-word
    # texts, every third and each whose tokens leave the full text's within one token of a
    # resume boundary (where an off-by-one would show); all the other texts. The tiny model
    # and Qwen (whose kernels a misaligned resume changes): every text.
    unit = 32 if backend.chunk % 32 == 0 else backend.chunk
    full_ids = backend.tokenize(text)

    def near_a_boundary(ids):
        shared = next((k for k, (a, b) in enumerate(zip(ids, full_ids)) if a != b), min(len(ids), len(full_ids)))
        return shared % unit in (unit - 1, 0, 1)

    removed_words = range(1, len(words) + 1)
    checked = [i for i in range(len(texts))
               if backend_name != "llamacpp_smollm2" or i not in removed_words or i % 3 == 0
               or near_a_boundary(backend.tokenize(texts[i]))]
    for i in checked:
        _fresh(backend)
        assert together[i] == backend.answer([requests[i]])[0]  # the same numbers, bit for bit


def test_sampler_applies_temperature_top_k_and_nucleus():
    import numpy as np

    from copyprobe.backends.llamacpp import _sample

    scores = np.log(np.array([0.5, 0.3, 0.15, 0.05]))

    def frequencies(**settings):
        rng = np.random.default_rng(0)
        counts = np.bincount([_sample(scores, rng=rng, **settings) for _ in range(4000)], minlength=4)
        return counts / counts.sum()

    assert np.allclose(frequencies(temperature=1.0, top_p=1.0), [0.5, 0.3, 0.15, 0.05], atol=0.03)
    # top-k 2 and (top-k 3, nucleus 0.8) both leave {0, 1} at 5/8, 3/8 (see the HF sampler's test)
    for top_k, top_p in ((2, 1.0), (3, 0.8)):
        assert np.allclose(frequencies(temperature=1.0, top_p=top_p, top_k=top_k), [0.625, 0.375, 0, 0], atol=0.03)
    assert np.allclose(frequencies(temperature=1.0, top_p=1.0, top_k=10), [0.5, 0.3, 0.15, 0.05], atol=0.03)


def test_context_requests_score_the_text_after_the_context(tiny_gguf, hf_tiny_gguf):
    from copyprobe.backends.specs import load_backend

    # token j is character j here (see above), so context + text tokenizes as the two
    # side by side and the plain scores of context + text are an independent route
    contexts = ["a cat sat on a mat. ", "by a pub; "]
    texts = ["a big dog ran by", "a pub and a cat", "ran by a dog"]
    requests = [TokenLogprobsRequest(texts[0], stats=True)] + [
        TokenLogprobsRequest(text, stats=True, context=context) for text in texts for context in contexts]
    full = load_backend(f"llamacpp:{tiny_gguf}", chunk=5, kv_type="f32")
    short = load_backend(f"llamacpp:{tiny_gguf}", max_length=24, chunk=5, kv_type="f32")  # windows
    try:
        decoded, tokenized = [], []
        set_batch, tokenize = full._batch.set_batch, full.tokenize
        full._batch.set_batch = lambda part, **kw: decoded.append(len(part)) or set_batch(part, **kw)
        full.tokenize = lambda text, *a, **kw: tokenized.append(text) or tokenize(text, *a, **kw)
        answers = full.answer(requests)
        full._batch.set_batch, full.tokenize = set_batch, tokenize
        # each text once, each context twice (alone, and before a word) in one call
        assert sorted(tokenized) == sorted([r.text for r in requests]
                                           + [c + s for c in contexts for s in ("", WORD_AFTER)])
        # each context is decoded once, then each of its texts with the context's tokens from
        # the last multiple of the chunk (5; the resume alignment) before its last token on
        resumed = {c: len(c) - (len(c) - 1) // 5 * 5 for c in contexts}
        bound = len(texts[0]) + sum(map(len, contexts)) + sum(len(r.text) + resumed[r.context] for r in requests[1:])
        assert sum(decoded) <= bound
        for backend, got in ((full, answers), (short, short.answer(requests))):
            for request, answer in zip(requests[1:], got[1:]):
                plain = backend.answer([TokenLogprobsRequest(request.context + request.text, stats=True)])[0]
                n = len(request.text)
                assert answer.token_ids == plain.token_ids[-n:]
                for name in ("logprobs", "mu", "sigma"):
                    assert getattr(answer, name) == pytest.approx(getattr(plain, name)[-n:], abs=1e-4), name
                assert answer.rank == plain.rank[-n:]
        for ours, theirs in zip(answers, hf_tiny_gguf.answer(requests)):
            assert ours.token_ids == theirs.token_ids
            assert ours.logprobs == pytest.approx(theirs.logprobs, abs=1e-3)
        with pytest.raises(ConfigError, match="the context has"):
            short.answer([TokenLogprobsRequest("a dog", context="a cat sat on a mat by a pub")])
    finally:
        full.close()
        short.close()


def test_top_logprobs_read_as_the_transformers_backend_reads_them(llamacpp_tiny, hf_tiny_gguf):
    # every one of the 260 tokens: the same texts (" t" with its space, special tokens by
    # name, a lone byte of a longer character as U+FFFD) with the same log-probs
    request = GenerateRequest(prompt="the cat sat", max_tokens=1, top_logprobs=300)  # more than the vocabulary
    ours, theirs = (backend.answer([request])[0].top_logprobs[0] for backend in (llamacpp_tiny, hf_tiny_gguf))
    assert set(ours) == set(theirs)
    assert {" t", " ", "t", "<s>", "</s>", "\ufffd"} <= set(ours) and "" not in ours
    assert not any("\u0120" in piece for piece in ours)  # "Ġ", the vocabulary's mark of a space byte
    assert max(abs(ours[piece] - theirs[piece]) for piece in ours) < 1e-3


@pytest.mark.parametrize("backend_name", [
    "llamacpp_tiny",
    pytest.param("llamacpp_smollm2", marks=pytest.mark.model),
])
def test_top_k_tokens_after_each_word_of_a_passage_reuse_the_cache(backend_name, request):
    # topk_loss's requests: one greedy token with top log-probs after each word of a text
    backend = request.getfixturevalue(backend_name)
    text = "The ferry left at nine; the lake was flat."  # one window of the tiny model
    if backend.max_length > 256:
        text = " ".join([text, "Mother said the ice would hold until March, and Edvin laughed at her,",
                         "but by the second week the boats were out again and the post came by water."] * 3)
    cuts = [i for i in range(1, len(text)) if text[i] == " " and text[i - 1] != " "]
    requests = [GenerateRequest(prompt=text[:cut], max_tokens=1, top_logprobs=5) for cut in cuts]
    prompts = sorted(backend.tokenize(r.prompt) for r in requests)
    unit = 32 if backend.chunk % 32 == 0 else backend.chunk
    # the rule: each prompt resumes at the last multiple of the unit at or below the prefix
    # it shares with the prompt before it in sorted order, and decodes its last token anyway
    expected, previous = 0, []
    for ids in prompts:
        shared = 0
        while shared < min(len(previous), len(ids) - 1) and previous[shared] == ids[shared]:
            shared += 1
        expected += len(ids) - shared // unit * unit
        previous = ids
    _fresh(backend)
    before = backend.counters["decoded_tokens"]
    together = backend.answer(list(reversed(requests)))[::-1]
    decoded = backend.counters["decoded_tokens"] - before
    assert decoded == expected
    total = sum(map(len, prompts))
    assert decoded < (0.6 if backend.max_length > 256 else 0.9) * total
    # SmolLM2 decodes each prompt alone at ~7 ms a token on two cores: every third one (the
    # count above checks every prompt's resume); the tiny model and Qwen: every one
    step = 3 if backend_name == "llamacpp_smollm2" else 1
    for r, answer in list(zip(requests, together))[::step]:
        _fresh(backend)
        alone = backend.answer([r])[0]
        # what a decode from scratch gives: the same token, its log-prob within 0.1 and the
        # other candidates' within 0.3 (the quantized SmolLM2 differs between a resumed and a
        # fresh decode, other batch shapes in its kernels: 0.045 on a likely token, 0.14 on
        # one at -9); the tiny float32 model bit for bit
        assert alone.text == answer.text and alone.finish_reason == answer.finish_reason
        tolerance = 0.0 if backend.max_length <= 256 else 0.3
        for mine, theirs in zip(alone.top_logprobs, answer.top_logprobs):
            shared = set(mine) & set(theirs)
            assert len(shared) >= len(mine) - 1  # the 5th candidate may swap with the 6th
            best = max(mine, key=mine.get)
            assert abs(mine[best] - theirs[best]) <= tolerance / 3
            assert all(abs(mine[t] - theirs[t]) <= tolerance for t in shared), (r.prompt[-40:], mine, theirs)
