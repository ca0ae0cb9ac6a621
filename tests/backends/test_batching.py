"""Batches by memory (copyprobe/backends/hf/batching.py): the batch setting, how work is cut
into batches, the out-of-memory retry (with identical scores), the GPU budget from free
memory (CUDA mocked), and what the run record keeps."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from model_helpers import make_byte_tokenizer, make_tiny_backend, make_tiny_model

from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.backends.cache import CHUNK_BATCHES, CachedBackend, ResponseCache
from copyprobe.backends.hf import HFBackend
from copyprobe.backends.hf.batching import (
    CPU_TOKEN_BUDGET,
    GPU_MAX_TOKENS,
    GPU_MEMORY_SHARE,
    Batcher,
    activation_bytes_per_token,
    check_batch_size,
    cuda_token_budget,
    is_out_of_memory,
)
from copyprobe.backends.hf.scoring import STATS, ArrayBuffer, StackedScores, flat_rows
from copyprobe.errors import BackendError, ConfigError
from copyprobe.session import Session

# equal lengths (26 byte tokens + <s>), so longest-first sorting keeps their order
SAME_LENGTH = [f"passage number {i:02d} of ten" for i in range(10)]
MIXED = ["a short one", "a somewhat longer text than that", "mid length text", "x" * 40, "tiny",
         "another text of middling size", "q" * 17, "the last one, longish as well"]


def rows_of(call_kwargs) -> int:
    return int(call_kwargs["input_ids"].shape[0])


def failing_above(backend: HFBackend, rows: int, seen: list[int]):
    """Replace the decoder by one that raises torch.OutOfMemoryError for more than ``rows`` rows."""
    real = backend._decoder

    @functools.wraps(real.forward)  # its signature: the KV cache's keyword
    def decoder(*args, **kwargs):
        seen.append(rows_of(kwargs))
        if rows_of(kwargs) > rows:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {rows_of(kwargs)} GiB")
        return real(*args, **kwargs)

    backend._decoder = decoder
    return backend


def fields_of(answers):
    return [(a.token_ids, a.logprobs, a.mu, a.sigma, a.rank) for a in answers]


# -- the setting ----------------------------------------------------------------------


def test_batch_setting_is_auto_or_a_positive_integer():
    assert check_batch_size("auto") == "auto"
    assert check_batch_size(1) == 1 and check_batch_size(64) == 64
    for bad in (0, -2, 1.5, "8", "big", True, None):
        with pytest.raises(ConfigError, match="batch size must be 'auto' or an integer >= 1"):
            check_batch_size(bad)
    with pytest.raises(ConfigError, match="batch size"):
        make_tiny_backend(batch_size=0)
    with pytest.raises(ConfigError, match="batch size"):
        Session(make_tiny_backend(), cache=False, batch_size="many")


def test_auto_is_the_default_and_the_record_keeps_setting_and_budget():
    backend = make_tiny_backend()
    assert backend.batch_setting == "auto"
    assert backend.info()["batch"] == {"setting": "auto", "sequences": 8, "token_budget": CPU_TOKEN_BUDGET}
    fixed = make_tiny_backend(batch_size=5)
    assert fixed.info()["batch"] == {"setting": 5, "sequences": 5}
    model = fixed.model
    assert fixed.info()["weights_bytes"] == sum(p.numel() * p.element_size() for p in model.parameters())


def test_batch_setting_changes_neither_fingerprint_nor_cache_keys(tmp_path):
    model, tokenizer = make_tiny_model(), make_byte_tokenizer()
    auto = HFBackend(model, tokenizer, device="cpu", dtype="float32")
    fixed = HFBackend(model, tokenizer, device="cpu", dtype="float32", batch_size=3)
    assert auto.fingerprint == fixed.fingerprint
    cache = ResponseCache(tmp_path / "c.sqlite")
    first = CachedBackend(fixed, cache).answer([TokenLogprobsRequest(t) for t in MIXED])
    again = CachedBackend(auto, cache)
    assert again.answer([TokenLogprobsRequest(t) for t in MIXED]) == first
    assert again.hits == len(MIXED) and again.misses == 0


def test_the_cache_hands_over_about_chunk_batches_of_work():
    assert CachedBackend(make_tiny_backend(batch_size=3), None).chunk_size == 3 * CHUNK_BATCHES
    auto = CachedBackend(make_tiny_backend(), None)
    assert auto.chunk_size == CPU_TOKEN_BUDGET // 256 * CHUNK_BATCHES


# -- cutting work into batches ------------------------------------------------------------


def test_batches_by_count_and_by_padded_tokens():
    widths = [10, 9, 9, 5, 4, 4, 4, 1]
    by_count = Batcher(count=3, tokens=None)
    assert by_count.next_batch(widths, 0, int) == [10, 9, 9]
    assert by_count.next_batch(widths, 6, int) == [4, 1]
    by_tokens = Batcher(count=None, tokens=20)
    assert by_tokens.next_batch(widths, 0, int) == [10, 9]  # 2 rows x width 10
    assert by_tokens.next_batch(widths, 3, int) == [5, 4, 4, 4]  # 4 x 5 = 20 padded tokens
    assert Batcher(count=None, tokens=5).next_batch(widths, 0, int) == [10]  # wider than the budget: alone
    assert Batcher(count=2, tokens=100).next_batch(widths, 3, int) == [5, 4]


def test_more_items_join_the_last_batch_of_the_items_until_there_are_none():
    events = []

    def forward(batch):
        events.append(("forward", batch))
        return len(batch)

    def store(batch, handle):
        assert handle == len(batch)
        events.append(("store", batch))

    def parts(*given):
        left = [list(part) for part in given]

        def more():
            events.append(("more",))
            return left.pop(0) if left else []
        return more

    Batcher(count=2, tokens=None).run([5, 4, 3], int, forward, store, parts([3, 1], [2]))
    # asked for when the items left make one batch, before the batch before is stored (on a
    # GPU it runs while that batch does); what is left joins the new items, sorted, so the
    # batch at the boundary is full; asked again until it gives none
    assert events == [("forward", [5, 4]), ("more",), ("forward", [3, 3]), ("store", [5, 4]), ("more",),
                      ("more",), ("forward", [2, 1]), ("store", [3, 3]), ("store", [2, 1])]
    events.clear()
    Batcher(count=2, tokens=None).run([], int, forward, store, parts([1]))
    assert events == [("more",), ("more",), ("forward", [1]), ("store", [1])]
    events.clear()
    Batcher(count=2, tokens=None).run([7], int, forward, store, parts())
    assert events == [("more",), ("forward", [7]), ("store", [7])]
    events.clear()
    Batcher(count=None, tokens=9).run([4, 4, 1], int, forward, store, parts([3, 2]))
    assert events == [("forward", [4, 4]), ("more",), ("more",), ("forward", [3, 2, 1]), ("store", [4, 4]),
                      ("store", [3, 2, 1])]
    events.clear()

    def failing():
        raise RuntimeError("tokenizer broke")

    with pytest.raises(RuntimeError, match="tokenizer broke"):
        Batcher(count=2, tokens=None).run([5, 4, 3], int, forward, store, failing)
    assert events == [("forward", [5, 4]), ("store", [5, 4])]  # what finished is kept


def test_auto_batches_fill_the_token_budget(monkeypatch):
    backend = make_tiny_backend()
    seen: list[tuple[int, int]] = []
    real = backend._decoder

    @functools.wraps(real.forward)  # its signature: the KV cache's keyword
    def decoder(*args, **kwargs):
        seen.append(tuple(kwargs["input_ids"].shape))
        return real(*args, **kwargs)

    backend._decoder = decoder
    backend._text_batches().tokens = 100
    backend.answer([TokenLogprobsRequest(t) for t in MIXED])
    assert sum(rows for rows, _ in seen) == len(MIXED)
    assert all(rows * width <= 100 or rows == 1 for rows, width in seen)
    # longest first: a batch is full when one more row of its width would pass the budget
    widths = sorted((len(backend.tokenizer(t).input_ids) for t in MIXED), reverse=True)
    start = 0
    for rows, width in seen:
        assert width == widths[start]
        assert start + rows == len(widths) or (rows + 1) * width > 100
        start += rows


# -- out of memory ------------------------------------------------------------------------


def test_out_of_memory_batch_is_retried_in_halves_with_identical_scores(capsys):
    requests = [TokenLogprobsRequest(t) for t in SAME_LENGTH]
    expected = make_tiny_backend(batch_size=2).answer(requests)
    seen: list[int] = []
    backend = failing_above(make_tiny_backend(batch_size=8), 2, seen)
    answers = backend.answer(requests)
    assert fields_of(answers) == fields_of(expected)  # bit for bit, not within a tolerance
    # 8 fails, its first half of 4 fails too; from then on every batch has 2 texts
    assert seen == [8, 4, 2, 2, 2, 2, 2]
    err = capsys.readouterr().err
    assert err.count("out of memory") == 1 and "at most 4 texts per batch (was 8 texts)" in err
    record = backend.info()["batch"]
    chosen = record.pop("chosen")
    assert record == {"setting": 8, "sequences": 8, "shrunk_after_out_of_memory": True, "texts_per_batch": 2}
    assert chosen["batches"] == 5 and chosen["most_texts"] == 2 and chosen["texts_per_batch"] == 2.0
    seen.clear()
    backend.answer(requests[:4])  # later calls keep the smaller batches
    assert seen == [2, 2]


def test_out_of_memory_under_auto_shrinks_the_token_budget(capsys):
    requests = [TokenLogprobsRequest(t) for t in SAME_LENGTH]
    width = len(make_byte_tokenizer()(SAME_LENGTH[0]).input_ids)
    expected = make_tiny_backend(batch_size=2).answer(requests)
    seen: list[int] = []
    backend = failing_above(make_tiny_backend(), 2, seen)
    backend._text_batches().tokens = 8 * width  # eight texts per batch
    assert fields_of(backend.answer(requests)) == fields_of(expected)
    assert backend.info()["batch"]["token_budget"] == 2 * width
    assert "out of memory on cpu at 8 texts" in capsys.readouterr().err


def test_out_of_memory_with_a_context_is_retried_too():
    requests = [TokenLogprobsRequest(t, context="Once upon a time") for t in SAME_LENGTH]
    expected = make_tiny_backend(batch_size=3).answer(requests)
    seen: list[int] = []
    answers = failing_above(make_tiny_backend(batch_size=6), 3, seen).answer(requests)
    assert fields_of(answers) == fields_of(expected)
    assert seen[0] == 1 and 6 in seen  # the context alone, then the batch that failed


def test_a_single_text_that_does_not_fit_is_a_one_line_error():
    backend = failing_above(make_tiny_backend(), 0, [])
    with pytest.raises(BackendError, match="out of memory on cpu for a single text of 4 tokens") as info:
        backend.answer([TokenLogprobsRequest("abc")])
    assert "\n" not in str(info.value)


def test_other_errors_are_not_retried():
    backend = make_tiny_backend(batch_size=4)
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("shape mismatch")

    backend._decoder = broken
    with pytest.raises(RuntimeError, match="shape mismatch"):
        backend.answer([TokenLogprobsRequest(t) for t in SAME_LENGTH])
    assert len(calls) == 1


def test_out_of_memory_errors_are_recognised():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 GB"))
    assert not is_out_of_memory(RuntimeError("expected scalar type Float"))
    assert not is_out_of_memory(ValueError("out of memory"))


# -- GPU budget (CUDA mocked) ---------------------------------------------------------------


def test_gpu_budget_comes_from_free_memory(monkeypatch):
    config = make_tiny_model().config  # hidden 32, intermediate 64
    per_token = activation_bytes_per_token(config, 2, 128)
    assert per_token == 2 * (2 * (10 * 32 + 4 * 64) + 4 * 2 * 32 + 4 * 128)
    free = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 << 30))
    reserved = 100 << 20
    assert cuda_token_budget("cuda:0", config, 2, 128, reserved) == \
        min(GPU_MAX_TOKENS, int((free * GPU_MEMORY_SHARE - reserved) // per_token))
    free = 100 << 20  # its usable share is below the reserve: one full window still runs (and may be retried)
    assert cuda_token_budget("cuda", config, 2, 128, reserved) == 128
    free = 80 << 30
    assert cuda_token_budget("cuda", config, 2, 128, reserved) == GPU_MAX_TOKENS


def test_auto_on_a_gpu_reads_free_memory_at_first_use(monkeypatch):
    backend = make_tiny_backend()
    backend.device = "cuda:0"  # only the budget is computed: no tensor goes to the device here
    calls = []

    def mem_get_info(device=None):
        calls.append(str(device))
        return (2 << 30, 80 << 30)

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    budget = backend._text_batches().tokens
    assert calls == ["cuda:0"]
    per_token = activation_bytes_per_token(backend.model.config, 4, backend.max_length)
    assert 0 < budget <= GPU_MAX_TOKENS and budget <= (2 << 30) * GPU_MEMORY_SHARE / per_token
    assert backend._text_batches().tokens == budget and len(calls) == 1  # kept


def test_queued_scores_wait_for_the_device_before_reading(monkeypatch):
    events = []

    class FakeEvent:
        def record(self):
            events.append("record")

        def synchronize(self):
            events.append("synchronize")

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    scores = {"logprobs": torch.tensor([-1.5, -0.25], dtype=torch.float64), "mu": torch.tensor([-2.0, -1.0]),
              "sigma": torch.tensor([0.5, 0.25], dtype=torch.float64), "rank": torch.tensor([3, 1])}
    queued = StackedScores(scores, "cuda:0")
    assert events == ["record"]
    arrays = queued.arrays()  # one [4, N] copy, read after the device is done
    assert events == ["record", "synchronize"]
    assert {name: values.tolist() for name, values in arrays.items()} == {
        "logprobs": [-1.5, -0.25], "mu": [-2.0, -1.0], "sigma": [0.5, 0.25], "rank": [3.0, 1.0]}
    assert StackedScores(scores, "cpu").arrays()["rank"].tolist() == [3.0, 1.0]
    assert arrays["rank"].dtype == np.int64 and arrays["logprobs"].dtype == np.float64


def test_a_whole_window_keeps_views_of_its_batch_and_a_split_one_fills_its_own_arrays():
    batch = StackedScores({"logprobs": torch.tensor([-1.5, -0.25, -3.0]), "mu": torch.tensor([-2.0, -1.0, -4.0]),
                           "sigma": torch.tensor([0.5, 0.25, 1.0]), "rank": torch.tensor([3, 1, 7])}, "cpu").arrays()
    whole = ArrayBuffer(3)
    whole.put(0, batch, 0, 3)
    arrays = whole.arrays()
    assert all(np.shares_memory(arrays[name], batch[name]) for name in STATS)  # nothing copied, rank neither
    assert arrays["rank"].dtype == np.int64 and arrays["rank"].tolist() == [3, 1, 7]
    split = ArrayBuffer(3)
    split.put(1, batch, 0, 2)
    split.put(0, batch, 2, 1)
    arrays = split.arrays()
    assert arrays["rank"].dtype == np.int64 and arrays["rank"].tolist() == [7, 3, 1]
    assert arrays["logprobs"].tolist() == [-3.0, -1.5, -0.25]
    floats = ArrayBuffer(2)  # scores whose ranks came as floats still give int64 ranks
    floats.put(0, {**batch, "rank": np.array([2.0, 5.0, 9.0])}, 1, 2)
    assert floats.arrays()["rank"].dtype == np.int64 and floats.arrays()["rank"].tolist() == [5, 9]


def test_flat_rows_are_the_hidden_states_at_flat_positions():
    hidden = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    positions = torch.tensor([0, 1, 4, 6, 14, 9])
    expected = hidden.reshape(-1, 4)[positions]  # what advanced indexing gives
    assert torch.equal(flat_rows(hidden, positions), expected)
    assert torch.equal(flat_rows(hidden, positions)[3], hidden[1, 1])
    assert flat_rows(hidden, torch.tensor([], dtype=torch.int64)).shape == (0, 4)


# -- answers handed over as they finish ----------------------------------------------------


def test_each_answer_is_handed_over_once_as_it_finishes():
    backend = make_tiny_backend(batch_size=2)
    requests = [TokenLogprobsRequest(t) for t in MIXED] + [TokenLogprobsRequest(""),
                                                          TokenLogprobsRequest(MIXED[1], ngram=2)]
    handed: list[tuple[int, object]] = []
    answers = backend.answer(requests, on_result=lambda i, answer: handed.append((i, answer)))
    assert sorted(i for i, _ in handed) == list(range(len(requests)))
    assert all(answers[i] is answer for i, answer in handed)
    assert handed[0][0] == len(MIXED)  # the empty text first, before any batch ran
    assert answers == make_tiny_backend(batch_size=2).answer(requests)


def test_answers_finished_before_a_failure_are_committed(tmp_path):
    backend = make_tiny_backend(batch_size=2)
    real = backend._decoder
    calls = []

    @functools.wraps(real.forward)  # its signature: the KV cache's keyword
    def fails_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("device lost")
        return real(*args, **kwargs)

    backend._decoder = fails_third
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [TokenLogprobsRequest(t) for t in SAME_LENGTH]
    with pytest.raises(RuntimeError, match="device lost"):
        CachedBackend(backend, cache).answer(requests)
    assert cache.count() == 4  # two batches of two finished and were kept
    backend._decoder = real
    again = CachedBackend(backend, cache)
    assert again.answer(requests) == make_tiny_backend(batch_size=2).answer(requests)
    assert (again.hits, again.misses) == (4, 6)


def test_run_record_says_what_batch_auto_chose(tmp_path):
    import json

    import copyprobe

    backend = make_tiny_backend()  # batch size auto: a budget of padded tokens
    texts = [f"{'word ' * (3 + i % 9)}number {i}" for i in range(40)]
    widths = sorted((len(ids) for ids in backend.tokenizer(texts).input_ids), reverse=True)
    backend._text_batches().tokens = 4 * widths[0]  # about four texts per batch
    copyprobe.detect(backend, texts, ["loss"], cache=False, blind_baseline=False, out=tmp_path / "run")
    batch = json.loads((tmp_path / "run" / "run.json").read_text())["model"]["batch"]
    assert batch["setting"] == "auto" and batch["token_budget"] == 4 * widths[0]
    chosen = batch["chosen"]
    # length-sorted texts cut by the budget: replay the cut independently
    expected, start = [], 0
    while start < len(widths):
        n = max(1, (4 * widths[0]) // widths[start])
        expected.append(min(n, len(widths) - start))
        start += expected[-1]
    assert chosen == {"batches": len(expected), "texts_per_batch": round(len(widths) / len(expected), 1),
                      "most_texts": max(expected),
                      "most_padded_tokens": max(n * widths[sum(expected[:k])] for k, n in enumerate(expected))}
