"""Batches by memory: how many padded tokens one forward pass may take, and the loop that
cuts length-sorted work into such batches and retries a batch that ran out of memory.

``batch_size`` is ``"auto"`` (the default) or a fixed number of texts per forward pass.

* **auto**: a budget of padded tokens per forward pass (rows x the longest row). On a CUDA
  device it comes from the memory free after the weights were loaded and the model's
  activation bytes per token (:func:`activation_bytes_per_token`), capped at
  :data:`GPU_MAX_TOKENS`; on the CPU it is :data:`CPU_TOKEN_BUDGET`, the fastest budget
  measured on this project's machine (benchmarks/results/batch_budget_cpu.json).
* **a number N**: N texts per forward pass, as before; the token budget is unlimited.

The LM head never builds a batch x length x vocabulary logits tensor here: the scoring
pass streams it in blocks (:func:`copyprobe.backends.hf.scoring.score_rows`), whose peak
memory is fixed (two blocks, :data:`~copyprobe.backends.hf.scoring.SCORE_BLOCKS`) and is
set aside before the budget is computed.

**Out of memory.** :meth:`Batcher.run` catches an out-of-memory error of one batch, splits
that batch in halves and runs them (recursively, down to one text), keeping every batch
that already finished; the smaller limit is kept for the rest of the run, and said once
on stderr. Only a single text that does not fit is an error.

**Pipelining.** On a GPU the kernels of a batch are queued without waiting; ``store`` of
batch k (one copy of the batch's four statistics to the host, filling the answers' rows)
runs after the kernels of batch k + 1 are queued, so the device works while Python does.
:meth:`Batcher.chosen` says what the limits chose (batches, texts per batch, padded
tokens), which the HF backend writes into run.json's ``model.batch.chosen``.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from copyprobe.errors import BackendError, ConfigError

AUTO = "auto"
# Sequences per batch of generation and multiple-choice prompts under "auto", and the
# batch size of backends that batch by count only (llama.cpp): the old default.
DEFAULT_SEQUENCES = 8
# Padded tokens per forward pass on the CPU: the fastest of 1k-16k measured with
# SmolLM2-135M on WikiMIA (benchmarks/bench_gpu.py --budgets; results/batch_budget_cpu.json).
CPU_TOKEN_BUDGET = 4096
# A GPU is saturated long before this many tokens per pass; larger batches only delay the
# first results, make an out-of-memory retry costlier, and leave more of the host's work
# unhidden (the answers of a run's last batch are made after the device has finished).
# 65,536 made auto 1.14x the best fixed size on an H100; on an H200 16,384 took 1.54 s, as
# 8,192 did, against 1.64 s at 32,768 and 1.62 s for the best fixed size, 128 texts
# (benchmarks/results/gpu_cuda.md).
GPU_MAX_TOKENS = 16384
# Share of the free device memory the activations may take (the allocator fragments, and
# the estimate leaves out small temporaries).
GPU_MEMORY_SHARE = 0.6


def check_batch_size(value: Any) -> int | str:
    """``"auto"`` or an integer >= 1, else a ConfigError naming the setting."""
    if value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"batch size must be 'auto' or an integer >= 1, got {value!r}")
    return value


def sequences_per_batch(batch_size: int | str) -> int:
    """Texts per batch where work is batched by count (generation, multiple choice, llama.cpp)."""
    return DEFAULT_SEQUENCES if batch_size == AUTO else int(batch_size)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure (CUDA, MPS or CPU)."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:  # pragma: no cover - torch is there whenever a model is
        pass
    if isinstance(exc, RuntimeError):
        message = str(exc).lower()
        return "out of memory" in message or "can't allocate memory" in message
    return False


def activation_bytes_per_token(config: Any, dtype_bytes: int, max_length: int) -> int:
    """A generous estimate of the memory one token of a forward pass needs at its peak
    (inference, no gradients): the residual stream and its float32 norms, the attention
    projections with key/value heads expanded, the MLP's intermediate tensors, and one
    row of the causal mask; doubled for what the estimate leaves out."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0) or 4096)
    inner = int(getattr(text, "intermediate_size", 0) or getattr(text, "n_inner", 0) or 4 * hidden)
    per_token = dtype_bytes * (10 * hidden + 4 * inner) + 4 * 2 * hidden + 4 * max_length
    return 2 * per_token


def cuda_token_budget(device: str, config: Any, dtype_bytes: int, max_length: int,
                      reserved_bytes: int) -> int:
    """Padded tokens per forward pass that fit in the free memory of ``device``."""
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device))
    usable = free * GPU_MEMORY_SHARE - reserved_bytes
    tokens = int(usable // activation_bytes_per_token(config, dtype_bytes, max_length))
    return max(max_length, min(GPU_MAX_TOKENS, tokens))


def release_device_memory(device: str) -> None:
    """Free what the failed batch held (tensors caught in reference cycles too) and give
    the device's cached blocks back, so the retry can use them."""
    import gc

    gc.collect()
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


class Batcher:
    """Cuts width-sorted (longest first) work into batches of at most ``count`` items and
    ``tokens`` padded tokens (items x the first, widest, item), runs them, and retries a
    batch that runs out of memory in halves. The limits it lowers after an out-of-memory
    error stay lower for every later call."""

    def __init__(self, *, count: int | None, tokens: int | None, device: str = "cpu", what: str = "texts"):
        self.count = count
        self.tokens = tokens
        self.device = device
        self.what = what
        self.shrunk = False  # an out-of-memory error lowered the limits (said once)
        # what the limits chose, for the run record: batches run, items in them, the most
        # items and the most padded tokens (items x widest) in one batch
        self.batches = self.items = self.most_items = self.most_tokens = 0

    def describe(self) -> str:
        return f"{self.tokens} tokens" if self.tokens is not None else f"{self.count} {self.what}"

    def next_batch(self, items: Sequence[Any], start: int, width: Callable[[Any], int]) -> list[Any]:
        """The batch that starts at ``items[start]``: as many items as both limits allow, at least one."""
        end = len(items) if self.count is None else min(len(items), start + self.count)
        if self.tokens is not None:
            widest = max(1, width(items[start]))
            end = min(end, start + max(1, self.tokens // widest))
        return list(items[start:end])

    def run(self, items: Sequence[Any], width: Callable[[Any], int], forward: Callable[[list[Any]], Any],
            store: Callable[[list[Any], Any], None], more: Callable[[], Sequence[Any]] | None = None) -> None:
        """``forward(batch)`` queues a batch's work and returns a handle to its results;
        ``store(batch, handle)`` takes them (one batch later, see the module docstring).

        ``more()`` gives items that follow ``items`` (sorted by ``width`` among themselves,
        longest first), asked for each time the items left make one batch at most, until it
        gives none: the items left join them, sorted again, so no batch is cut short where
        one part ends. It runs before the batch before is stored: on a GPU, while that
        batch does."""
        halves: deque[list[Any]] = deque()  # parts of a batch that ran out of memory, to run first
        cursor = 0
        pending: tuple[list[Any], Any] | None = None
        while True:
            if halves:  # cut by the current limits, which may have shrunk since the split
                part = halves.popleft()
                batch = self.next_batch(part, 0, width)
                if len(batch) < len(part):
                    halves.appendleft(part[len(batch):])
            else:
                batch = self.next_batch(items, cursor, width) if cursor < len(items) else []
                if more is not None and cursor + len(batch) >= len(items):
                    try:
                        extra = more()
                    except BaseException:
                        if pending is not None:  # the batch before finished: keep its answers
                            store(*pending)
                        raise
                    if extra:
                        items, cursor = sorted([*items[cursor:], *extra], key=width, reverse=True), 0
                    else:
                        more = None
                    continue
                if not batch:
                    break
                cursor += len(batch)
            try:
                handle = forward(batch)
                failed = False
                self._count(batch, width)
            except BaseException as exc:  # only out-of-memory is handled, the rest re-raised
                if not is_out_of_memory(exc):
                    if pending is not None:  # the batch before finished: keep its answers
                        store(*pending)
                    raise
                if len(batch) == 1:
                    raise BackendError(f"out of memory on {self.device} for a single text of {width(batch[0])} "
                                       f"tokens: use a smaller max length or a device with more memory") from None
                failed = True  # retried below, once the error and its tensors are released
            if failed:
                release_device_memory(self.device)
                self._shrink(batch, width)
                half = len(batch) // 2
                halves.appendleft(batch[half:])
                halves.appendleft(batch[:half])
                continue
            if pending is not None:
                store(*pending)
            pending = (batch, handle)
        if pending is not None:
            store(*pending)

    def _count(self, batch: list[Any], width: Callable[[Any], int]) -> None:
        self.batches += 1
        self.items += len(batch)
        self.most_items = max(self.most_items, len(batch))
        self.most_tokens = max(self.most_tokens, len(batch) * max(1, width(batch[0])))

    def chosen(self) -> dict[str, Any]:
        """What the batches were so far (empty before the first): for run.json."""
        if not self.batches:
            return {}
        return {"batches": self.batches, f"{self.what}_per_batch": round(self.items / self.batches, 1),
                f"most_{self.what}": self.most_items, "most_padded_tokens": self.most_tokens}

    def _shrink(self, batch: list[Any], width: Callable[[Any], int]) -> None:
        before = self.describe()
        half = max(1, len(batch) // 2)
        if self.count is not None:
            self.count = min(self.count, half)
        if self.tokens is not None:
            self.tokens = min(self.tokens, half * max(1, width(batch[0])))
        if not self.shrunk:
            self.shrunk = True
            print(f"copyprobe: out of memory on {self.device} at {len(batch)} {self.what} "
                  f"({len(batch) * width(batch[0])} padded tokens); retrying in halves and continuing with at "
                  f"most {self.describe()} per batch (was {before})", file=sys.stderr)
