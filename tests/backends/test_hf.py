"""HFBackend against independent computations from ``model(input_ids).logits``.

Real models (``@pytest.mark.model``) check tokenizer behaviour and numerics at scale;
the tiny random models (conftest) cover the same paths in milliseconds, including a
tokenizer that adds BOS and a model with final-logit soft-capping.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from model_helpers import make_byte_tokenizer, make_tiny_backend, make_tiny_model

from copyprobe.backends.base import (
    GENERATE,
    TOKEN_LOGPROBS,
    ChoiceLogprobsRequest,
    GenerateRequest,
    TokenLogprobsRequest,
)
from copyprobe.backends.hf import HFBackend, resolve_device, resolve_dtype
from copyprobe.errors import BackendError, CapabilityError, ConfigError

TEXTS = [
    "Hi",
    "The quick brown fox jumps over the lazy dog, and then it runs away into the forest. " * 6,
    "Die Katze schläft auf dem Sofa, während es draußen regnet. 猫はソファで寝ています。 🐈",
    "def add(a, b):\n    return a + b\n\n\nprint(add(2, 3))  # 5\n",
    "x",
    "",
]

def texts_for(name: str) -> list[str]:
    # gemma's 262k vocabulary makes each position ~5x dearer than smollm2's: shorter long text
    return [t[:200] for t in TEXTS] if name == "gemma" else TEXTS


BACKENDS = [
    "tiny_llama",
    "tiny_gemma2",
    pytest.param("smollm2", marks=pytest.mark.model),
    pytest.param("gemma", marks=pytest.mark.model),
]


def direct(backend: HFBackend, ids: list[int]) -> dict[str, list]:
    """Scores of ids[1:] from one plain forward pass (Min-K%++ definitions, in float64)."""
    with torch.inference_mode():
        logits = backend.model(torch.tensor([ids])).logits[0, :-1].float()
    logp = torch.log_softmax(logits.double(), dim=-1)
    prob = logp.exp()
    target = torch.tensor(ids[1:]).unsqueeze(1)
    mu = (prob * logp).sum(-1)
    sigma = ((prob * logp**2).sum(-1) - mu**2).sqrt()
    rank = 1 + (logits > logits.gather(1, target)).sum(-1)
    return {"logprobs": logp.gather(1, target).squeeze(1).tolist(), "mu": mu.tolist(),
            "sigma": sigma.tolist(), "rank": rank.tolist()}


def assert_close(actual, expected, tol=1e-4):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert abs(a - e) <= tol, (a, e)


def assert_same_scores(a, b, tol=1e-4):
    assert a.token_ids == b.token_ids
    for name in ("logprobs", "mu", "sigma"):
        assert_close(getattr(a, name), getattr(b, name), tol)
    assert a.rank == b.rank


def last_logprobs(backend: HFBackend, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return torch.log_softmax(backend.model(torch.tensor([ids])).logits[0, -1].double(), dim=-1)


# -- token log-probs --------------------------------------------------------------------


@pytest.mark.parametrize("name", BACKENDS)
def test_scores_match_a_direct_forward_pass(request, name):
    backend = request.getfixturevalue(name)
    # texts that fit one window (the tiny models have a 128-token context)
    texts = [t for t in texts_for(name)[1:4] + [TEXTS[1][:100]]
             if len(backend.tokenizer(t).input_ids) <= backend.max_length]
    assert len(texts) >= 3
    answers = backend.answer([TokenLogprobsRequest(t) for t in texts])
    for text, answer in zip(texts, answers):
        ids = backend.tokenizer(text).input_ids
        assert answer.token_ids == ids
        assert answer.tokens == backend.tokenizer.convert_ids_to_tokens(ids)  # aligned with token_ids
        expected = direct(backend, ids)
        assert len(answer.logprobs) == len(ids) - 1
        assert_close(answer.logprobs, expected["logprobs"])
        assert_close(answer.mu, expected["mu"])
        assert_close(answer.sigma, expected["sigma"])
        assert answer.rank == expected["rank"]


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gemma2"])
def test_the_gpu_layout_of_the_statistics_matches_a_direct_pass(request, name, monkeypatch):
    # what a CUDA device runs (aligned vocabulary blocks, the targets' logits one dot
    # product a row), here on the CPU with blocks small enough that every row spans
    # several of them and several row chunks make a batch
    from copyprobe.backends.hf import scoring

    monkeypatch.setattr(scoring, "gpu_layout", lambda device: True)
    monkeypatch.setattr(scoring, "GPU_BLOCK_ALIGN", 16)
    monkeypatch.setitem(scoring.SCORE_BLOCKS, "cuda", (7, 7 * 50))  # 48-wide blocks of 7 rows
    backend = request.getfixturevalue(name)
    texts = [t for t in TEXTS[1:4] + [TEXTS[1][:100]] if len(backend.tokenizer(t).input_ids) <= backend.max_length]
    for text, answer in zip(texts, backend.answer([TokenLogprobsRequest(t) for t in texts])):
        expected = direct(backend, backend.tokenizer(text).input_ids)
        assert_close(answer.logprobs, expected["logprobs"])
        assert_close(answer.mu, expected["mu"])
        assert_close(answer.sigma, expected["sigma"])
        assert answer.rank == expected["rank"]


def test_gpu_blocks_are_aligned_and_cover_the_vocabulary(monkeypatch):
    from copyprobe.backends.hf import scoring

    widths = []
    real_linear = torch.nn.functional.linear

    def linear(rows, weight, bias=None):
        widths.append(weight.shape[0])
        return real_linear(rows, weight, bias)

    monkeypatch.setattr(torch.nn.functional, "linear", linear)
    monkeypatch.setattr(scoring, "gpu_layout", lambda device: True)
    vocab, rows = 5000, 333
    monkeypatch.setitem(scoring.SCORE_BLOCKS, "cuda", (4096, rows * 1001))  # 1,001 logits a row: 768 aligned
    head = torch.nn.Linear(8, vocab, bias=False)
    hidden = torch.randn(rows, 8)
    targets = torch.randint(0, vocab, (rows,))
    scoring.score_stats(hidden, targets, head)
    assert widths == [768] * 6 + [vocab - 6 * 768]


def test_the_mask_built_for_a_gpu_is_the_one_transformers_builds(tiny_llama):
    from transformers.masking_utils import create_causal_mask

    from copyprobe.backends.hf.backend import causal_padding_mask

    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    embeds = torch.zeros(3, 5, tiny_llama.model.config.hidden_size)
    # the cache argument by position: its name changed within transformers 5
    theirs = create_causal_mask(tiny_llama.model.config, embeds, mask, None, position_ids=torch.arange(5)[None])
    ours = causal_padding_mask(mask)
    assert ours.dtype == torch.bool and ours.shape == (3, 1, 5, 5)
    assert torch.equal(ours, theirs.expand(3, 1, 5, 5))


def test_answers_with_the_mask_built_here_are_those_of_transformers_mask(tiny_llama, monkeypatch):
    # on a CUDA device the backend passes its own 4D mask (no host wait in transformers'
    # mask checks); on the CPU that path gives the same answers, bit for bit
    from copyprobe.backends.hf.backend import plain_causal_sdpa

    assert plain_causal_sdpa(tiny_llama.model.config)
    texts = [TEXTS[1][:120], TEXTS[2], TEXTS[3], "Hi there"]  # different lengths: padded batches
    plain = tiny_llama.answer([TokenLogprobsRequest(t) for t in texts])
    monkeypatch.setattr(tiny_llama, "_mask_built_here", True)
    built = tiny_llama.answer([TokenLogprobsRequest(t) for t in texts])
    assert [a.to_json() for a in built] == [a.to_json() for a in plain]


def test_no_mask_is_built_for_sliding_window_or_eager_attention(tiny_gemma2):
    from copyprobe.backends.hf.backend import plain_causal_sdpa

    config = tiny_gemma2.model.config
    assert not plain_causal_sdpa(config)
    sdpa = config.__class__(**{**config.to_dict(), "sliding_window": None})
    sdpa._attn_implementation = "sdpa"
    assert not plain_causal_sdpa(sdpa)  # its layer types still alternate sliding and full attention


@pytest.mark.parametrize("name", BACKENDS)
def test_batched_equals_unbatched(request, name):
    backend = request.getfixturevalue(name)
    requests = [TokenLogprobsRequest(t) for t in texts_for(name)]
    batched = backend.answer(requests)
    for req, answer in zip(requests, batched):
        assert_same_scores(answer, backend.answer([req])[0])


@pytest.mark.model
def test_alignment_and_special_tokens(smollm2, gemma):
    # smollm2 adds nothing in front of a text; gemma adds <bos>, which is context only
    hello_smol = smollm2.answer([TokenLogprobsRequest("Hello world")])[0]
    assert hello_smol.token_ids == smollm2.tokenizer("Hello world", add_special_tokens=False).input_ids
    hello_gemma = gemma.answer([TokenLogprobsRequest("Hello world")])[0]
    assert hello_gemma.token_ids[0] == gemma.tokenizer.bos_token_id
    assert len(hello_gemma.logprobs) == len(hello_gemma.token_ids) - 1
    # the first score is log p(first word | <bos>)
    first = last_logprobs(gemma, hello_gemma.token_ids[:1])[hello_gemma.token_ids[1]].item()
    assert abs(hello_gemma.logprobs[0] - first) < 1e-4


@pytest.mark.parametrize("name", ["tiny_llama", pytest.param("smollm2", marks=pytest.mark.model)])
def test_fewer_than_two_tokens_gives_empty_lists(request, name):
    backend = request.getfixturevalue(name)
    calls = []
    for text in ("", "x"):
        ids = backend.tokenizer(text).input_ids
        if len(ids) >= 2:
            continue
        answer = backend.answer([TokenLogprobsRequest(text)], progress=calls.append)[0]
        assert answer.token_ids == ids and answer.logprobs == [] and answer.mu == [] and answer.rank == []
    assert sum(calls) >= 1


def test_requests_without_stats_share_the_pass_that_gives_them(tiny_llama):
    # the statistics cost nothing once the logits exist, so the backend answers a request
    # without them as one with them (Backend.canonical): both kinds of method share one pass
    plain, full = tiny_llama.answer([TokenLogprobsRequest("abc", stats=False), TokenLogprobsRequest("abc", stats=True)])
    assert plain.token_ids == full.token_ids and plain.mu is not None and len(plain.logprobs) == 3
    assert_same_scores(plain, full)


def test_the_arrays_an_answer_keeps_equal_its_lists(tiny_llama):
    # the methods and the cache read these arrays instead of converting the lists again
    long = "the arrays kept beside the lists " * 20
    small = HFBackend(tiny_llama.model, tiny_llama.tokenizer, device="cpu", dtype="float32", max_length=32)
    answers = small.answer([TokenLogprobsRequest("abcdef", stats=True), TokenLogprobsRequest(long, stats=True),
                            TokenLogprobsRequest("abcdef", ngram=2, stats=True)])
    for answer in answers:
        kept = answer.__dict__["_arrays"]
        assert set(kept) == {"logprobs", "mu", "sigma", "rank"}
        for name, array in kept.items():
            assert array.tolist() == getattr(answer, name) and not array.flags.writeable
            assert array.dtype == ("int64" if name == "rank" else "float64")
            assert answer.array(name) is array


def test_progress_counts_every_request_once(tiny_llama):
    calls = []
    requests = [TokenLogprobsRequest("a" * k) for k in range(0, 300, 25)] + [TokenLogprobsRequest("abcdef", ngram=2)]
    small = HFBackend(tiny_llama.model, tiny_llama.tokenizer, device="cpu", dtype="float32",
                      batch_size=2, max_length=32)
    small.answer(requests, progress=calls.append)
    assert sum(calls) == len(requests) and len(calls) > 1


# -- sliding windows --------------------------------------------------------------------


def expected_window_start(position: int, length: int, n_lead: int) -> int:
    """Documented rule: window k >= 1 covers text positions [k*S, k*S + L - n_lead), and a
    token past the first window is scored by the earliest window that holds it."""
    stride = length // 2
    k = 1
    while not (k * stride <= position < k * stride + length - n_lead):
        k += 1
    return k * stride


@pytest.mark.parametrize("name", ["tiny_llama", pytest.param("smollm2", marks=pytest.mark.model)])
def test_sliding_window_scores_every_token_once_with_documented_context(request, name):
    full = request.getfixturevalue(name)
    length = 16
    windowed = HFBackend(full.model, full.tokenizer, device="cpu", dtype="float32", batch_size=3,
                         max_length=length)
    text = TEXTS[1] if name == "smollm2" else "Sliding windows over a long byte string!" * 2
    ids = full.tokenizer(text).input_ids
    assert len(ids) > 3 * length
    answer = windowed.answer([TokenLogprobsRequest(text)])[0]
    assert len(answer.logprobs) == len(ids) - 1
    assert all(math.isfinite(v) for v in answer.logprobs + answer.mu + answer.sigma)
    # the first window is the text's own start: same scores as with the whole context
    reference = full.answer([TokenLogprobsRequest(text)])[0]
    assert_close(answer.logprobs[:length - 1], reference.logprobs[:length - 1])
    assert answer.rank[:length - 1] == reference.rank[:length - 1]
    # later tokens: their window's leading tokens + the text from the window start
    lead = windowed.lead_ids
    # window boundaries plus a spread of other positions (one forward pass each)
    positions = range(length, len(ids)) if name.startswith("tiny") else sorted(
        {length, length + 1, len(ids) - 1} | {p for p in range(length, len(ids)) if p % (length // 2) in (0, 7)})
    for position in positions:
        start = expected_window_start(position, length, len(lead))
        assert position - start >= length - length // 2 - len(lead)  # enough context kept
        context = lead + ids[start:position]
        assert len(context) < length
        value = last_logprobs(full, context)[ids[position]].item()
        assert abs(answer.logprobs[position - 1] - value) < 1e-4, position
    # windowed requests batch like any other
    twice = windowed.answer([TokenLogprobsRequest(text), TokenLogprobsRequest("short")])
    assert_same_scores(twice[0], answer)


# -- n-gram contexts ----------------------------------------------------------------------


@pytest.mark.parametrize("name, n", [("tiny_llama", 3), ("tiny_gemma2", 1),
                                     pytest.param("smollm2", 4, marks=pytest.mark.model),
                                     pytest.param("gemma", 2, marks=pytest.mark.model)])
def test_ngram_scores_match_direct_short_contexts(request, name, n):
    backend = request.getfixturevalue(name)
    text = TEXTS[3] if name in ("smollm2", "gemma") else "n-gram contexts, n-gram contexts!"
    answer = backend.answer([TokenLogprobsRequest(text, ngram=n)])[0]
    ids = answer.token_ids
    assert ids == backend.tokenizer(text).input_ids
    lead = backend.lead_ids
    full = direct(backend, ids)
    assert len(answer.logprobs) == len(ids) - 1
    positions = range(1, len(ids)) if name.startswith("tiny") else list(range(1, len(lead) + n + 2)) + [len(ids) - 1]
    for position in positions:
        if position - len(lead) < n:  # fewer than n text predecessors: full-prefix value
            assert abs(answer.logprobs[position - 1] - full["logprobs"][position - 1]) < 1e-4
            continue
        logp = last_logprobs(backend, lead + ids[position - n:position])
        assert abs(answer.logprobs[position - 1] - logp[ids[position]].item()) < 1e-4, position
        prob = logp.exp()
        mu = (prob * logp).sum().item()
        assert abs(answer.mu[position - 1] - mu) < 1e-4
        assert answer.rank[position - 1] == 1 + int((logp > logp[ids[position]]).sum())


def test_ngram_contexts_are_deduplicated_and_batch_independent(tiny_llama, monkeypatch):
    windows, contexts = [], []
    original_hidden, original_states = tiny_llama._hidden, tiny_llama._context_states

    def counting_hidden(input_ids, attention_mask=None):
        windows.append(tuple(input_ids.shape))
        return original_hidden(input_ids, attention_mask)

    def counting_states(keys):
        contexts.extend(keys)
        return original_states(keys)

    monkeypatch.setattr(tiny_llama, "_hidden", counting_hidden)
    monkeypatch.setattr(tiny_llama, "_context_states", counting_states)
    text = "abcabcabcabc"  # 12 byte tokens after <s>; contexts of n=2 repeat every 3
    alone = tiny_llama.answer([TokenLogprobsRequest(text, ngram=2, stats=True)])[0]
    ids = alone.token_ids
    # one full-prefix window "<s>ab" for the first two tokens, then the distinct contexts
    # "<s>ab", "<s>bc", "<s>ca" once each (10 without de-duplication)
    assert windows == [(1, 3)]
    assert sorted(contexts) == sorted({(ids[0], *ids[p - 2:p]) for p in range(3, len(ids))}) and len(contexts) == 3
    windows.clear()
    contexts.clear()
    together = tiny_llama.answer([TokenLogprobsRequest(text, ngram=2, stats=True),
                                  TokenLogprobsRequest(text + "ab", ngram=2, stats=True),
                                  TokenLogprobsRequest(text, ngram=2, stats=False)])
    assert len(contexts) == 3  # 32 without de-duplication
    assert_same_scores(together[0], alone)
    assert together[2].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert together[1].logprobs[:len(alone.logprobs)] == pytest.approx(alone.logprobs, abs=1e-5)


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_gemma2"])
def test_context_states_compute_each_shared_prefix_once(request, name, monkeypatch):
    backend = request.getfixturevalue(name)
    tokens_run = []
    decoder = backend._decoder

    @functools.wraps(decoder.forward)  # its signature: the KV cache's keyword
    def counting(*args, **kwargs):
        tokens_run.append(kwargs["input_ids"].numel())
        return decoder(*args, **kwargs)

    monkeypatch.setattr(backend, "_decoder", counting)
    keys = [(1, 7, 8, 9), (1, 7, 8, 10), (1, 7, 11, 9), (1, 12, 8, 9), (1, 7, 8, 9)]
    states = backend._context_states(keys)
    # prefix tree: (1) -> (1,7) (1,12) -> (1,7,8) (1,7,11) (1,12,8) -> 4 distinct leaves
    assert tokens_run == [1, 2, 3, 4]
    with torch.inference_mode():
        for key, state in zip(keys, states):
            alone = backend._hidden(torch.tensor([key]))[0, -1]
            assert torch.allclose(state, alone, atol=1e-5)


def test_bad_ngram_is_a_config_error(tiny_llama):
    with pytest.raises(ConfigError, match="ngram"):
        tiny_llama.answer([TokenLogprobsRequest("abc", ngram=0)])


# -- generation ---------------------------------------------------------------------------

PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea, there lived", "1, 2, 3,"]


@pytest.mark.model
def test_greedy_is_deterministic_and_batch_independent(smollm2):
    requests = [GenerateRequest(prompt=p, max_tokens=10) for p in PROMPTS]
    batched = smollm2.answer(requests)
    again = smollm2.answer(requests)
    assert batched == again
    for req, generation in zip(requests, batched):
        alone = smollm2.answer([req])[0]
        assert alone.text == generation.text
        assert generation.prompt_tokens == len(smollm2.tokenizer(req.prompt).input_ids)
        assert generation.finish_reason in ("stop", "length")
        if generation.finish_reason == "length":
            assert generation.completion_tokens == 10
    # greedy = the argmax continuation, checked token by token for one prompt
    ids = smollm2.tokenizer(PROMPTS[0]).input_ids
    for _ in range(5):
        ids.append(int(last_logprobs(smollm2, ids).argmax()))
    expected = smollm2.tokenizer.decode(ids[-5:], skip_special_tokens=True)
    assert batched[0].text.startswith(expected)


@pytest.mark.model
def test_seeded_sampling_is_reproducible_regardless_of_batch(smollm2):
    sample = GenerateRequest(prompt="Once upon a time", temperature=1.0, seed=7, max_tokens=12)
    first = smollm2.answer([sample])[0]
    mixed = smollm2.answer([GenerateRequest(prompt="Hello", temperature=0.8, seed=1, max_tokens=5), sample,
                            GenerateRequest(prompt="1, 2,", max_tokens=4)])
    assert mixed[1] == first
    other = smollm2.answer([GenerateRequest(prompt="Once upon a time", temperature=1.0, seed=8, max_tokens=12)])[0]
    assert other.text != first.text


def test_sampled_requests_share_a_batch_without_changing_their_samples(tiny_llama):
    requests = [GenerateRequest(prompt=p, temperature=1.0, seed=seed, max_tokens=8)
                for p, seed in (("abc", 1), ("hello there", 2), ("abc", 3), ("xyz", 1))]
    together = tiny_llama.answer(requests)
    for request, answer in zip(requests, together):
        assert tiny_llama.answer([request])[0] == answer
    assert together[0] != together[2]  # same prompt, other seed (8 random-model tokens)


@pytest.mark.parametrize("name", ["tiny_llama", pytest.param("smollm2", marks=pytest.mark.model)])
def test_one_token_greedy_requests_match_generate(request, name, monkeypatch):
    backend = request.getfixturevalue(name)
    text = "The quick brown fox jumps over the lazy dog near the river bank"
    cuts = [i for i, ch in enumerate(text) if ch == " "]
    prompts = [text[:i] for i in cuts] + ["Something else entirely", "The quick"]
    for settings in ({"top_logprobs": 5}, {"top_logprobs": 0, "repetition_penalty": 1.3}):
        requests = [GenerateRequest(prompt=p, max_tokens=1, **settings) for p in prompts]
        passes = []
        hidden = backend._hidden
        monkeypatch.setattr(backend, "_hidden", lambda ids, mask=None: passes.append(ids.shape[0]) or hidden(ids, mask))
        fast = backend.answer(requests)
        monkeypatch.setattr(backend, "_hidden", hidden)
        assert sum(passes) == 2  # the text's prefixes ride on one pass, the other prompt on another
        for req, answer in zip(requests, fast):
            slow = backend._generate([backend._prompt_ids(req.prompt, None, backend.chat)], req)[0]
            assert answer.text == slow.text and answer.finish_reason == slow.finish_reason
            assert answer.prompt_tokens == slow.prompt_tokens and answer.completion_tokens == 1
            if settings["top_logprobs"]:
                assert list(answer.top_logprobs[0]) == list(slow.top_logprobs[0])
                for piece, value in slow.top_logprobs[0].items():
                    assert abs(answer.top_logprobs[0][piece] - value) < 1e-4


def test_seeded_sampler_follows_temperature_and_nucleus():
    from copyprobe.backends.hf import _SeededSampler

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    counts = torch.zeros(4)
    for seed in range(4000):
        out = _SeededSampler([seed], 1.0, 1.0, "cpu")(None, logits)
        assert (out == 0).sum() == 1 and torch.isinf(out).sum() == 3
        counts[int(out.argmax())] += 1
    assert torch.allclose(counts / counts.sum(), torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.03)
    # top_p = 0.7: the nucleus is {0, 1} (0.5 < 0.7 <= 0.8), renormalised to 5/8, 3/8
    kept = torch.zeros(4)
    for seed in range(2000):
        kept[int(_SeededSampler([seed], 1.0, 0.7, "cpu")(None, logits).argmax())] += 1
    assert kept[2] == kept[3] == 0 and abs(kept[0] / kept.sum() - 0.625) < 0.04
    # top_k = 2 keeps {0, 1} renormalised to 5/8, 3/8; with top_k = 3 and top_p = 0.8 the
    # top-3 masses (0.526, 0.316, 0.158) leave token 2 outside the nucleus (0.842 >= 0.8)
    for top_k, top_p in ((2, 1.0), (3, 0.8)):
        kept = torch.zeros(4)
        for seed in range(2000):
            kept[int(_SeededSampler([seed], 1.0, top_p, "cpu", top_k=top_k)(None, logits).argmax())] += 1
        assert kept[2] == kept[3] == 0 and abs(kept[0] / kept.sum() - 0.625) < 0.04
    # a low temperature concentrates on the likeliest token
    cold = sum(int(_SeededSampler([s], 0.05, 1.0, "cpu")(None, logits).argmax()) == 0 for s in range(200))
    assert cold == 200
    # rows draw from their own generators: a row's pick ignores its neighbours
    pair = _SeededSampler([11, 12], 1.0, 1.0, "cpu")(None, logits.repeat(2, 1)).argmax(1)
    assert int(pair[0]) == int(_SeededSampler([11], 1.0, 1.0, "cpu")(None, logits).argmax())


@pytest.mark.model
def test_stop_strings_truncate_at_first_occurrence(smollm2):
    prompt = PROMPTS[1]
    free = smollm2.answer([GenerateRequest(prompt=prompt, max_tokens=24)])[0]
    stop = free.text.strip()[4:6]
    assert stop.strip(), free.text
    cut = free.text.find(stop)
    stopped = smollm2.answer([GenerateRequest(prompt=prompt, max_tokens=24, stop=("\u2603never", stop))])[0]
    assert stopped.text == free.text[:cut]
    assert stopped.finish_reason == "stop"
    assert stopped.completion_tokens < free.completion_tokens


@pytest.mark.model
def test_top_logprobs_and_chat_messages(smollm2):
    generation = smollm2.answer([GenerateRequest(prompt=PROMPTS[0], max_tokens=3, top_logprobs=3)])[0]
    assert len(generation.top_logprobs) == generation.completion_tokens
    assert all(1 <= len(step) <= 3 for step in generation.top_logprobs)
    best = last_logprobs(smollm2, smollm2.tokenizer(PROMPTS[0]).input_ids).max().item()
    assert abs(max(generation.top_logprobs[0].values()) - best) < 1e-4
    messages = (("user", "What is 2 + 2?"),)
    chat = smollm2.answer([GenerateRequest(messages=messages, max_tokens=8)])[0]
    template = smollm2.tokenizer.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}],
                                                     add_generation_prompt=True, tokenize=False)
    assert chat.prompt_tokens == len(smollm2.tokenizer(template, add_special_tokens=False).input_ids)


@pytest.mark.model
def test_logits_processors_apply_and_change_the_fingerprint(smollm2):
    plain = smollm2.answer([GenerateRequest(prompt=PROMPTS[0], max_tokens=1)])[0]
    banned = smollm2.tokenizer(plain.text, add_special_tokens=False).input_ids[0]

    def ban(input_ids, scores):
        scores[:, banned] = -math.inf
        return scores

    filtered = HFBackend(smollm2.model, smollm2.tokenizer, device="cpu", dtype="float32",
                         logits_processors=[ban], fingerprint_extra="ban:test")
    other = filtered.answer([GenerateRequest(prompt=PROMPTS[0], max_tokens=1)])[0]
    assert other.text != plain.text
    assert filtered.fingerprint != HFBackend(smollm2.model, smollm2.tokenizer, device="cpu",
                                             dtype="float32").fingerprint


def test_tiny_generation_without_chat_template(tiny_llama):
    # the byte tokenizer has no chat template: a role-prefixed transcript is used
    answer = tiny_llama.answer([GenerateRequest(messages=(("user", "hi"),), max_tokens=4)])[0]
    assert answer.prompt_tokens == len(tiny_llama.tokenizer("user: hi\nassistant:").input_ids)
    assert answer.completion_tokens <= 4


# -- multiple choice ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiny_llama", pytest.param("smollm2", marks=pytest.mark.model),
                                  pytest.param("gemma", marks=pytest.mark.model)])
def test_choice_logprobs_match_direct(request, name):
    backend = request.getfixturevalue(name)
    prompts = ["Question: Which is a fruit?\nA) stone\nB) apple\nC) car\nD) cloud\nAnswer:", "Pick one letter:"]
    requests = [ChoiceLogprobsRequest(prompt=p, choices=("A", "B", "C", "D")) for p in prompts]
    answers = backend.answer(requests)
    for req, answer in zip(requests, answers):
        logp = last_logprobs(backend, backend.tokenizer(req.prompt).input_ids)
        for choice in req.choices:
            candidates = [backend.tokenizer(form, add_special_tokens=False).input_ids[0]
                          for form in (choice, " " + choice)]
            expected = max(logp[c].item() for c in candidates)
            assert abs(answer.logprobs[choice] - expected) < 1e-4
        assert answer.logprobs == pytest.approx(backend.answer([req])[0].logprobs, abs=1e-4)


def test_choice_logprobs_batched_path_equals_prefix_tree_path(tiny_llama):
    # CPU answers through the prefix tree; the batched path is what GPUs use
    prompts = [tiny_llama._prompt_ids(p, None, use_chat=False) for p in
               ["Answer: A B", "Answer: A C", "Answer:", "Something else entirely", "Answer: A B"]]
    columns = sorted({t for c in "ABCD" for t in tiny_llama._choice_token_ids(c)})
    from copyprobe.backends.prefix_tree import shared_prefix_logprobs

    counted = []
    batched = tiny_llama._batched_next_logprobs(prompts, columns, counted.append)
    tree = shared_prefix_logprobs(tiny_llama.model, prompts, columns)
    assert sum(counted) == len(prompts)
    for a, b in zip(batched, tree):
        assert a == pytest.approx(b, abs=1e-4)


# -- capabilities, errors, identity -------------------------------------------------------


def test_missing_capability_fails_before_any_work(monkeypatch):
    backend = make_tiny_backend()
    backend.capabilities = frozenset({TOKEN_LOGPROBS})

    def no_work(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setattr(backend, "_hidden", no_work)
    monkeypatch.setattr(backend.model, "generate", no_work)
    with pytest.raises(CapabilityError, match=GENERATE):
        backend.answer([GenerateRequest(prompt="x")])
    with pytest.raises(CapabilityError, match="distribution_stats"):
        backend.answer([TokenLogprobsRequest("abc", stats=True)])


def test_out_of_memory_asks_for_a_smaller_batch(monkeypatch):
    # generation is batched by count; token log-probs retry in halves (test_batching.py)
    backend = make_tiny_backend(batch_size=8)

    def oom(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(backend, "_hidden", oom)
    with pytest.raises(BackendError, match="at batch size 8: lower the batch size") as info:
        backend.answer([GenerateRequest(prompt="abc", max_tokens=1)])
    assert "\n" not in str(info.value)
    auto = make_tiny_backend()
    monkeypatch.setattr(auto, "_hidden", oom)
    with pytest.raises(BackendError, match=r"at 8 sequences per batch \(batch size auto\): give a smaller batch size \(batch_size\), e.g. 4$"):
        auto.answer([GenerateRequest(prompt="abc", max_tokens=1)])
    with pytest.raises(BackendError, match="for a single text of 4 tokens") as info:
        auto.answer([TokenLogprobsRequest("abc")])


def test_fingerprint_covers_weights_and_settings_but_not_batch_or_device():
    model, tokenizer = make_tiny_model(), make_byte_tokenizer()
    base = HFBackend(model, tokenizer, device="cpu", dtype="float32", batch_size=2)
    assert HFBackend(model, tokenizer, device="auto", dtype="float32", batch_size=7).fingerprint == base.fingerprint
    assert HFBackend(model, tokenizer, device="cpu", dtype="float32", max_length=64).fingerprint != base.fingerprint
    assert HFBackend(model, tokenizer, device="cpu", dtype="float32", fingerprint_extra="x").fingerprint != base.fingerprint
    assert HFBackend(model, tokenizer, device="cpu", dtype="float32", chat=True).fingerprint != base.fingerprint
    assert HFBackend(make_tiny_model(seed=1), tokenizer, device="cpu", dtype="float32").fingerprint != base.fingerprint
    half = HFBackend(make_tiny_model(), tokenizer, device="cpu", dtype="bfloat16")
    assert half.fingerprint != base.fingerprint
    info = half.info()
    assert info["dtype"] == "bfloat16" and info["device"] == "cpu"
    assert info["vocab_size"] == 259 and info["max_length"] == 128
    assert info["n_params"] == sum(p.numel() for p in half.model.parameters())


def test_device_and_dtype_resolution():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    with pytest.raises(ConfigError, match="dtype"):
        resolve_dtype("float8", "cpu")
    with pytest.raises(ConfigError, match="device"):
        resolve_device("gpu0")
    with pytest.raises(ConfigError, match="max length"):
        make_tiny_backend(max_length=4096)
    with pytest.raises(ConfigError, match="batch size"):
        make_tiny_backend(batch_size=0)



@pytest.mark.model
def test_empty_generation_prompt_is_a_backend_error(smollm2):
    # smollm2 adds no BOS, so an empty prompt has no tokens at all
    with pytest.raises(BackendError, match="empty generation prompt"):
        smollm2.answer([GenerateRequest(prompt="", max_tokens=2)])


def test_top_logprobs_keep_the_leading_space_of_sentencepiece_tokens():
    # a Llama-style tokenizer: "▁" marks a space and the decoder strips the first space of
    # a text, so decoding "▁cat" alone gives "cat"; top log-probs must read " cat"
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["the", "cat", "sat", "on", "mat", "a"]
    vocab = {"<s>": 0, "</s>": 1, "<pad>": 2, "<unk>": 3}
    for piece in [f"\u2581{w}" for w in words] + words + [","]:
        vocab[piece] = len(vocab)
    while len(vocab) < 259:  # the tiny model's vocabulary
        vocab[f"\u2581w{len(vocab)}"] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    core.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                      decoders.Strip(" ", 1, 0)])
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>", unk_token="<unk>")
    assert tokenizer.decode([vocab["\u2581cat"]]) == "cat"  # what a plain decode gives
    backend = HFBackend(make_tiny_model("llama"), tokenizer, spec="tiny-sentencepiece", device="cpu",
                        dtype="float32")
    for prompt in ("the cat", "the cat sat on"):
        answer = backend.answer([GenerateRequest(prompt=prompt, max_tokens=1, top_logprobs=259)])[0]
        candidates = answer.top_logprobs[0]
        assert len(candidates) == 259  # all distinct texts
        assert {" cat", " the", "cat", "the", " w100", ",", "</s>"} <= set(candidates)
        assert not any("\u2581" in piece for piece in candidates)
        # the same numbers as the token log-probs of prompt + " cat"
        ids = tokenizer(prompt).input_ids
        row = last_logprobs(backend, ids)
        assert candidates[" cat"] == pytest.approx(row[vocab["\u2581cat"]].item(), abs=1e-5)
        assert candidates["cat"] == pytest.approx(row[vocab["cat"]].item(), abs=1e-5)


# -- token strings only when read (issue 41) -------------------------------------------------


def test_token_strings_are_looked_up_only_when_read(tiny_llama, monkeypatch):
    calls = []
    real = tiny_llama.tokenizer.convert_ids_to_tokens
    monkeypatch.setattr(tiny_llama.tokenizer, "convert_ids_to_tokens", lambda ids: calls.append(ids) or real(ids))
    texts = [t for t in TEXTS[1:4] if len(tiny_llama.tokenizer(t).input_ids) >= 2]
    answers = tiny_llama.answer([TokenLogprobsRequest(t, stats=True) for t in texts])
    assert calls == []  # scoring looked up no token string
    assert [len(a.tokens) for a in answers] == [len(a.token_ids) for a in answers]  # lengths cost none
    assert calls == []
    for answer in answers:
        assert list(answer.tokens) == real(answer.token_ids)
        assert answer.tokens[1:] == real(answer.token_ids)[1:]
    assert len(calls) == len(answers)  # one look-up per answer read, all of its tokens at once
    for answer in answers:
        list(answer.tokens)
    assert len(calls) == len(answers)  # kept


def test_token_strings_come_back_from_the_cache(tiny_llama, tmp_path):
    import json
    import sqlite3

    from copyprobe.backends.cache import CachedBackend, ResponseCache

    text = TEXTS[3]
    first = CachedBackend(tiny_llama, ResponseCache(tmp_path / "c.sqlite")).answer([TokenLogprobsRequest(text)])[0]
    from copyprobe.backends.base import TokenLogprobs
    from copyprobe.backends.cache import _decode

    stored = json.loads(sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT response FROM responses")
                        .fetchone()[0])
    assert stored["tokens"] is None  # not stored, made when read
    assert _decode(TokenLogprobs, stored).token_ids == first.token_ids
    cached = CachedBackend(tiny_llama, ResponseCache(tmp_path / "c.sqlite"))
    again = cached.answer([TokenLogprobsRequest(text)])[0]
    assert cached.hits == 1
    assert again == first
    assert again.tokens == tiny_llama.tokenizer.convert_ids_to_tokens(first.token_ids)


def test_per_token_lists_are_made_only_when_read_and_equal_the_arrays(tiny_llama, tmp_path, monkeypatch):
    import json
    import sqlite3

    import numpy as np

    from copyprobe.backends.base import TokenLogprobs, Values
    from copyprobe.backends.cache import CachedBackend, ResponseCache, _decode
    from copyprobe.data.example import Example
    from copyprobe.registry import make_method

    made = []
    real_init = Values.__init__

    def counting(self, array):
        real_init(self, array)
        made.append(self)

    monkeypatch.setattr(Values, "__init__", counting)
    texts = [t for t in TEXTS[1:4] if len(tiny_llama.tokenizer(t).input_ids) >= 2]
    cache = ResponseCache(tmp_path / "c.sqlite")
    answers = CachedBackend(tiny_llama, cache).answer([TokenLogprobsRequest(t, stats=True) for t in texts])
    for name in ("loss", "min_k_pp", "slope"):  # the methods read arrays
        for text, answer in zip(texts, answers):
            make_method(name).score(Example(id="x", text=text), [answer])
    cache.close()  # (the backend is the module's: left open)
    assert len(made) == 4 * len(answers) and all(v._made is None for v in made)  # no list made, nor by the cache
    stored = [json.loads(row[0]) for row in sqlite3.connect(tmp_path / "c.sqlite").execute(
        "SELECT response FROM responses")]
    assert all(set(entry["logprobs"]) == {"f8"} for entry in stored)  # the arrays' bytes
    for answer in answers:
        for name in ("logprobs", "mu", "sigma", "rank"):
            values = getattr(answer, name)
            array = answer.array(name)
            assert isinstance(values, Values) and len(values) == len(array) > 0
            assert values == array.tolist() and array.tolist() == values  # either side
            assert list(values) == array.tolist() and values[1:3] == array.tolist()[1:3]
            assert type(values[0]) is (int if name == "rank" else float)
            as_array = np.asarray(values)  # the backend's array, not a copy, and read-only
            assert np.shares_memory(as_array, array) and not as_array.flags.writeable
        assert answer.logprobs + answer.mu == answer.array("logprobs").tolist() + answer.array("mu").tolist()
        data = answer.to_json()
        assert isinstance(data["logprobs"], list) and json.loads(json.dumps(data))["rank"] == list(answer.rank)
    assert {_decode(TokenLogprobs, entry).token_ids[0] for entry in stored} == {a.token_ids[0] for a in answers}
    again = CachedBackend(tiny_llama, ResponseCache(tmp_path / "c.sqlite"))
    del made[:]
    read = again.answer([TokenLogprobsRequest(t, stats=True) for t in texts])
    assert again.hits == len(texts) and len(made) == 4 * len(texts)  # read back as arrays too
    for text, answer in zip(texts, read):
        for name in ("loss", "min_k_pp", "slope"):
            make_method(name).score(Example(id="x", text=text), [answer])
        for name in ("logprobs", "mu", "sigma", "rank"):  # the methods' arrays are the ones read, not copies
            assert np.shares_memory(answer.array(name), np.asarray(getattr(answer, name)))
    assert all(v._made is None for v in made)
    assert read == answers


def test_padded_batches_score_like_single_texts_with_windows(tiny_llama):
    """Texts of many lengths, one longer than the window (sliding windows whose first
    scored position is past 1), in one padded batch: each equals its own direct pass."""
    backend = HFBackend(tiny_llama.model, tiny_llama.tokenizer, device="cpu", dtype="float32", batch_size=8,
                        max_length=24)
    texts = [TEXTS[1][:150], TEXTS[1][:40], TEXTS[3], TEXTS[2][:30]]
    answers = backend.answer([TokenLogprobsRequest(t, stats=True) for t in texts])
    for text, answer in zip(texts, answers):
        ids = backend.tokenizer(text).input_ids
        assert answer.token_ids == ids
        if len(ids) <= 24:
            expected = direct(backend, ids)
            assert_close(answer.logprobs, expected["logprobs"])
            assert_close(answer.mu, expected["mu"])
            assert_close(answer.sigma, expected["sigma"])
            assert answer.rank == expected["rank"]
        assert all(isinstance(r, int) for r in answer.rank) and all(isinstance(v, float) for v in answer.logprobs)
        single = backend.answer([TokenLogprobsRequest(text, stats=True)])[0]
        assert_same_scores(answer, single, tol=1e-5)
    assert len(backend.tokenizer(texts[0]).input_ids) > 24  # the windows were exercised
