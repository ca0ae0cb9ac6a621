"""Token log-probs of the HF backend: sliding windows, n-gram contexts, and the streaming
pass that reads log p, mu, sigma and rank of every position off the LM head.

Token alignment follows :mod:`copyprobe.backends.base`: logits at position i score token
i+1, so a text of T tokens yields T-1 scored tokens.

**Leading special tokens.** Some tokenizers put special tokens in front of every text
(Gemma adds ``<bos>``; SmolLM2 adds nothing). Windows that start inside a text (sliding
windows, n-gram contexts) get the same leading tokens, so the model always sees a text
start it was trained on.

**Sliding windows** for texts longer than ``max_length`` (L) tokens, stride S = L // 2.
Each token is scored once, by the earliest window that contains it, which is the one
giving it the most preceding context (as in the transformers perplexity-with-stride
guide)::

    tokens  b0 t1 t2 t3 t4 t5 t6 t7 t8 t9     (b0: leading special token, L = 6, S = 3)
    win 0   b0 t1 t2 t3 t4 t5                 scores t1..t5
    win 1   b0       t3 t4 t5 t6 t7           scores t6 t7  (t3..t5 are context only)
    win 2   b0                t6 t7 t8 t9     scores t8 t9

Window k >= 1 holds the leading tokens plus up to L - (number of leading tokens) text
tokens starting at text position k*S; every scored token has at least L - S tokens
before it in its window. Window 0 is the text's own start, so its scores equal the
full-context ones.

**N-gram scores** (``TokenLogprobsRequest.ngram = n``): a token with at least n text
tokens before it (leading special tokens do not count) is scored given only the leading
tokens and its n predecessors; earlier tokens get their full-prefix value (which is the
same thing with fewer predecessors), or are left out with ``ngram_drop_short`` (then the
text's T - n tokens that have n predecessors are scored, the Probability Slope notebook's
alignment). A prefix window that would score no token (one token, which happens for
n = 1 without a leading special token) is not planned at all. All such contexts have the same length, so they run
in large unpadded batches, identical contexts are computed once, contexts that share a
prefix compute it once (:func:`copyprobe.backends.prefix_tree.context_states`), and the
LM head is applied to the last position only.

**Where new work fits.** Answering a request is planning, then running: a text becomes
:class:`Window` jobs (token ids, the first window position that is scored, the offset to
text positions) and n-gram contexts; :meth:`TokenLogprobsMixin._run_windows` runs the
jobs in length-sorted batches through the backend's one right-padded forward pass
(``_padded_hidden``) and :func:`score_rows`.

**Contexts** (``TokenLogprobsRequest.context``, ReCaLL's prefix): the context is
tokenized with the leading special tokens, the text without, and every text token is
scored. Texts that fit in ``max_length`` after a context that several requests share are
grouped by context: the context runs once with a KV cache, each batch of texts extends a
copy of it (right-padded, masked), and the context's last hidden state scores each text's
first token (:meth:`TokenLogprobsMixin._run_prefixed`). A context of one request alone,
or a text too long for that, becomes windows over context + text whose context positions
are not scored, batched with all other windows.

A new per-position statistic of the next-token distribution is one more accumulator in
:func:`score_rows` and one more name in :data:`STATS`; Shannon entropy needs none, as it
equals ``-mu`` (:func:`copyprobe.backends.base.entropies`).
"""

from __future__ import annotations

import functools
import math
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest, TokenStrings, Values
from copyprobe.backends.hf.batching import Batcher
from copyprobe.errors import ConfigError

# Token statistics: (rows per chunk, logits per vocabulary block). On CPU a block of
# 2**19 float32 logits (2 MiB) stays in cache while the statistics read it; on a GPU fewer,
# larger blocks keep kernel launches from dominating. Peak extra memory: two blocks.
SCORE_BLOCKS = {"cpu": (256, 2**19), "cuda": (4096, 2**25)}
# On a GPU a block's vocabulary width is a multiple of this: the block's logits are the
# output rows of a matrix product, and rows of an odd width (2**25 // 3,301 rows = 10,167)
# are unaligned for the tensor-core kernels, which cuBLAS then leaves for an sm75-era
# fallback (1.1 ms a call instead of 0.1-0.3 ms, seen in issue 41's H100 profile).
GPU_BLOCK_ALIGN = 256
# Cap on n-gram contexts per forward pass; they are short, so this is cheap.
MAX_NGRAM_BATCH = 2048

# What score_rows returns per scored position, and the value of a slot not yet filled.
STATS = {"logprobs": math.nan, "mu": math.nan, "sigma": math.nan, "rank": 0}
# Plain texts tokenized before the first batch of a call when there are many (see
# later_texts); the rest are tokenized on a thread, LATER_CHUNK at a time, while batches run.
FIRST_TEXTS = 64
LATER_CHUNK = 256


def soft_cap(logits, softcap: float | None):
    """Gemma-2 style final-logit soft-capping (monotone, so ranks are unchanged)."""
    import torch

    if softcap:
        return torch.tanh(logits / softcap) * softcap
    return logits


def score_rows(hidden, targets, head, softcap: float | None = None) -> dict[str, Any]:
    """Log-prob, mu, sigma and rank (the :data:`STATS`) of ``targets`` [N] given hidden
    rows [N, H] and the LM head (a linear layer), as CPU tensors of N values each (see
    :func:`score_stats`)."""
    return {name: values.cpu() for name, values in score_stats(hidden, targets, head, softcap).items()}


def score_stats(hidden, targets, head, softcap: float | None = None) -> dict[str, Any]:
    """:func:`score_rows` on the device of ``hidden``, without waiting for it: nothing here
    copies a value to the host, so a GPU runs the whole computation queued.

    The LM head runs one vocabulary block at a time, so each block of logits is used while
    it is still in cache and no [N, V] tensor is ever built. On CPU this makes the
    statistics nearly free: measured on smollm2's head, 1.00x the time of the bare
    head product, against 2.8x for softmax over whole rows (benchmarks/bench_single_pass.py
    for the end-to-end number). With y = l - l_target, each block b leaves per row its
    maximum m_b of y and, relative to it, z_b = sum exp(y - m_b), a_b = sum exp(y - m_b)
    (y - m_b) and q_b = sum exp(y - m_b) (y - m_b)^2, plus its count of logits above the
    target's. The blocks are combined once per chunk of rows, in float64: with M = max_b
    m_b and r_b = exp(m_b - M), Z = sum_b r_b z_b, S1 = sum_b r_b (a_b + m_b z_b) and
    S2 = sum_b r_b (q_b + 2 m_b a_b + m_b^2 z_b) are the sums of exp(y - M), times 1, y
    and y^2. Then log p(target) = -(M + log Z), mu = S1/Z + log p(target), and sigma^2 =
    S2/Z - (S1/Z)^2 (the variance of log p equals the variance of y). A block takes about
    a dozen kernels on a GPU, its sums kept apart until the end: WikiMIA's batch of 3,300
    rows on SmolLM2's vocabulary takes 118 kernels where running sums updated after every
    block took 254 (benchmarks/bench_stats_ops.py; the values agree within 1e-6).
    """
    import torch
    import torch.nn.functional as F

    weight = head.weight
    bias = getattr(head, "bias", None)
    vocab_size = int(weight.shape[0])
    if hidden.shape[0] == 0:  # nothing to score (a batch of windows without scored tokens)
        empty = torch.zeros(0, dtype=torch.float64)
        return {"logprobs": empty, "mu": empty, "sigma": empty, "rank": torch.zeros(0, dtype=torch.long)}
    gpu = gpu_layout(hidden.device)
    rows_per_chunk, block_elements = SCORE_BLOCKS["cuda" if gpu else "cpu"]
    parts = []
    for start in range(0, hidden.shape[0], rows_per_chunk):
        rows = hidden[start:start + rows_per_chunk]
        target = targets[start:start + rows_per_chunk]
        n = rows.shape[0]
        target_logit = soft_cap(_target_logits(rows, weight, bias, target, gpu).float(), softcap).unsqueeze(1)
        width = max(1, block_elements // n)
        if gpu:
            width = max(GPU_BLOCK_ALIGN, width // GPU_BLOCK_ALIGN * GPU_BLOCK_ALIGN)
        # the block each row's target is in, and its column there
        target_block = target // width
        target_column = (target - target_block * width).unsqueeze(1)
        maxima, z, a, q, above, own = [], [], [], [], [], []
        for begin in range(0, vocab_size, width):
            end = min(begin + width, vocab_size)
            block = soft_cap(F.linear(rows, weight[begin:end], None if bias is None else bias[begin:end]).float(),
                             softcap)
            # the target's logit as its block computed it (other rows read any column here)
            own.append(block.gather(1, target_column if end - begin == width
                                    else target_column.clamp(max=end - begin - 1)))
            above.append((block > target_logit).sum(-1))
            block.sub_(target_logit)  # y
            block_max = block.amax(-1, keepdim=True)
            block.sub_(block_max)  # y - m_b <= 0: exp cannot overflow
            weights = block.exp()
            z.append(weights.sum(-1))
            weights.mul_(block)
            a.append(weights.sum(-1))
            weights.mul_(block)
            q.append(weights.sum(-1))
            maxima.append(block_max)
            del block, weights
        m = torch.cat(maxima, dim=1).double()
        z_b, a_b, q_b = (torch.stack(values, dim=1).double() for values in (z, a, q))
        top = m.amax(1, keepdim=True)
        r = (m - top).exp()
        rz, ra = r * z_b, r * a_b
        m_rz = m * rz
        z_sum = rz.sum(1)
        mean_y = (ra + m_rz).sum(1) / z_sum
        y2_mean = (r * q_b + m * (2 * ra + m_rz)).sum(1) / z_sum
        log_norm = top.squeeze(1) + z_sum.log()
        sigma = (y2_mean - mean_y.square()).clamp_min(0).sqrt()
        # never count the target as above itself: its own block's logit can differ from the
        # one computed alone in the last bit (not on the CPU, where they share a kernel)
        own_logit = torch.cat(own, dim=1).gather(1, target_block.unsqueeze(1)).squeeze(1)
        rank = torch.stack(above, dim=1).sum(1) - (own_logit > target_logit.squeeze(1)).long() + 1
        parts.append({"logprobs": -log_norm, "mu": mean_y - log_norm, "sigma": sigma, "rank": rank})
    if len(parts) == 1:
        return parts[0]
    return {name: torch.cat([part[name] for part in parts]) for name in STATS}


def gpu_layout(device) -> bool:
    """Whether :func:`score_stats` lays its work out for a GPU on ``device`` (large aligned
    blocks, one dot product a row for the targets) rather than for the CPU's cache; a
    function so that tests can run the GPU layout on the CPU."""
    return getattr(device, "type", str(device)) != "cpu"


def _target_logits(rows, weight, bias, target, gpu: bool):
    """The logit of each row's target token [N], in the head's dtype.

    On the CPU from the same kernel and reduction length as the blocks of
    :func:`score_stats` (the diagonal of rows x weight[target]), so the rank comparison
    matches a full logits tensor bitwise. Elsewhere one dot product a row (a batched
    product of 1 x H by H x 1, accumulated in float32 as the blocks' are): the N x N
    product computes N^2 logits to keep N, and its output rows are unaligned for odd N
    (see :data:`GPU_BLOCK_ALIGN`); a last-bit difference from the block's own value is
    harmless, as the rank never counts the target itself (see there)."""
    import torch
    import torch.nn.functional as F

    picked = weight[target]
    if not gpu:
        return F.linear(rows, picked, None if bias is None else bias[target]).diagonal()
    logits = torch.bmm(rows.unsqueeze(1), picked.unsqueeze(2)).view(-1)
    return logits if bias is None else logits + bias[target]


class StackedScores:
    """The :data:`STATS` of one batch stacked into one float64 tensor [4, N] (ranks are
    integers far below 2**53, so exact), copied to the host in **one** copy: on a GPU queued
    behind the kernels that compute it (into pinned memory), and :meth:`arrays` waits for
    it, so the next batch can be queued before this one is read. One copy a batch instead
    of one per statistic; the values reach the rows as numpy arrays, not Python lists."""

    def __init__(self, scores: dict[str, Any], device: str):
        import torch

        stacked = torch.stack([scores[name].double() for name in STATS])
        if str(device).startswith("cuda"):
            self.host = stacked.to("cpu", non_blocking=True)
            self.ready = torch.cuda.Event()
            self.ready.record()
        else:
            self.host = stacked
            self.ready = None

    def arrays(self) -> dict[str, Any]:
        """name -> numpy array of the batch's N values (float64; ``rank`` int64)."""
        if self.ready is not None:
            self.ready.synchronize()
        values = self.host.numpy()
        out = {name: values[k] for k, name in enumerate(STATS)}
        out["rank"] = out["rank"].astype("int64")  # once a batch, not once an answer
        return out


def padded_arrays(sequences: Sequence[Sequence[int]], pad_id: int):
    """(ids, mask): token lists right-padded with ``pad_id`` into one int64 array [B, W]
    and a boolean mask of the real tokens, built in numpy (one tensor a batch later, not
    one per row)."""
    import itertools

    import numpy as np

    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    mask = np.arange(int(lengths.max())) < lengths[:, None]
    ids = np.full(mask.shape, pad_id, dtype=np.int64)
    ids[mask] = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum()))
    return ids, mask


def flat_rows(hidden, positions):
    """The hidden states [B, W, H] at flat positions (row-major over B x W) ``positions`` (a
    1-D int64 tensor on hidden's device), as [len(positions), H]: ``index_select``, the
    same values as indexing with ``positions`` in a quarter of its time on CPU (one batch of
    3,400 positions: 17 against 86 us at hidden size 32, 320 against 1,226 at 576)."""
    import torch

    return torch.index_select(hidden.reshape(-1, hidden.shape[-1]), 0, positions)


class Window(NamedTuple):
    """Token ids run in one forward pass; positions ``first`` and later are scored, and
    window position j is text position j + ``offset``."""

    ids: list[int]
    first: int
    offset: int


def windows(ids: list[int], lead: list[int], length: int) -> list[Window]:
    """Split a token list into windows of at most ``length`` tokens; see the drawing in
    the module docstring."""
    if len(ids) <= length:
        return [Window(ids, 1, 0)]
    stride = length // 2
    out = [Window(ids[:length], 1, 0)]
    scored_to = length  # text positions < scored_to have a score
    begin = stride
    while scored_to < len(ids):
        end = min(begin + length - len(lead), len(ids))
        offset = begin - len(lead)
        out.append(Window(lead + ids[begin:end], scored_to - offset, offset))
        scored_to = end
        begin += stride
    return out


# a character that starts a word: a context's end is tokenized as it is before one
WORD_AFTER = "x"


def context_before_word(alone: list[int], followed: list[int], decode: Callable[[list[int]], str]) -> list[int]:
    """A context's token ids as the tokenizer splits it before a text that starts with a
    word, from ``alone`` (the context tokenized on its own) and ``followed`` (context +
    :data:`WORD_AFTER`). On its own a context's trailing whitespace can become a token that
    the same context never ends with before a word: GPT-2's rules (SmolLM2, Qwen) read
    "end.\n\n" as ``end . ĊĊ`` but "end.\n\nThe" as ``end . Ċ Ċ The``, so a text scored
    after the first (ReCaLL's prefix ends in a blank line) followed a token pair that no
    text gives, and its first tokens were read as unlikely. The split of ``followed`` is
    taken when its last token is the probe's alone and the tokens before it decode to the
    context; else (a context ending inside a word, a tokenizer that splits alike) ``alone``."""
    if followed[:len(alone)] == alone:
        return alone
    if len(followed) >= 2 and decode(followed[-1:]) == WORD_AFTER and decode(followed[:-1]) == decode(alone):
        return followed[:-1]
    return alone


def check_context(context_ids: list[int], context: str, max_length: int, n_text: int) -> None:
    """Refuse a context without tokens, or one too long to leave room for a text of
    ``n_text`` > 0 tokens (a text without tokens has nothing to score)."""
    if not context_ids:
        raise ConfigError(f"context {context[:40]!r} has no tokens")
    if n_text and len(context_ids) >= max_length - 1:
        raise ConfigError(f"the context has {len(context_ids)} tokens: it must be shorter than max length "
                          f"{max_length} - 1 to leave room for the text")


def context_windows(context_ids: list[int], ids: list[int], lead_ids: list[int], length: int) -> list[Window]:
    """Sliding windows over context + text that score only the text's tokens: full
    position p is text slot p - len(context_ids) (:meth:`ScoreBuffer.put` places window
    position first + offset at slot first + offset - 1)."""
    n_context = len(context_ids)
    full = context_ids + ids
    lead = full[:len(lead_ids)] if full[:len(lead_ids)] == lead_ids else []
    return [Window(w.ids, max(w.first, n_context - w.offset), w.offset - n_context + 1)
            for w in windows(full, lead, length)]


class Completion:
    """Counts outstanding work units per request; reports finished requests to progress,
    and each finished request to ``on_finished(index)``."""

    def __init__(self, progress: Callable[[int], Any] | None,
                 on_finished: Callable[[int], Any] | None = None):
        self.progress = progress
        self.on_finished = on_finished
        self.left: dict[int, int] = {}
        self.finished = 0

    def add(self, index: int, units: int = 1) -> None:
        self.left[index] = self.left.get(index, 0) + units

    def done(self, index: int, units: int = 1) -> None:
        self.left[index] -= units
        if self.left[index] == 0:
            self.finished += 1
            if self.on_finished is not None:
                self.on_finished(index)

    def flush(self) -> None:
        if self.progress and self.finished:
            self.progress(self.finished)
        self.finished = 0

    def finish_empty(self, indices: list[int]) -> None:
        """Requests with nothing to score: finished before any work."""
        self.finished += len(indices)
        if self.on_finished is not None:
            for index in indices:
                self.on_finished(index)
        self.flush()


class ScoreBuffer:
    """One request's :data:`STATS` lists, filled window by window, in text order."""

    def __init__(self, size: int):
        self.values = {name: [empty] * size for name, empty in STATS.items()}
        self.filled = [False] * size

    def put(self, slot: int, scores: dict[str, list], row: int, count: int = 1) -> None:
        """Slots ``slot`` onwards get ``count`` values of the score lists from ``row`` on."""
        assert slot + count <= len(self.filled), "token outside the text"
        assert not any(self.filled[slot:slot + count]), "token scored twice"
        self.filled[slot:slot + count] = [True] * count
        for name, values in scores.items():
            self.values[name][slot:slot + count] = values[row:row + count]

    def complete(self) -> bool:
        return all(self.filled)


class ArrayBuffer:
    """:class:`ScoreBuffer` over numpy arrays (the HF backend's; float64, ``rank`` int64): a
    window's values are copied in with one slice assignment per statistic, and the answer's lists are
    made once, from :meth:`arrays`, when the request is complete. A request scored whole
    by one window (most passages) keeps views of its batch's arrays and allocates nothing."""

    def __init__(self, size: int):
        self.size = size
        self.values: dict[str, Any] | None = None
        self.filled: Any = None
        self.whole = False  # one put filled every slot (values are views)

    def _allocate(self) -> None:
        import numpy as np

        self.values = {name: np.full(self.size, empty, dtype=np.int64 if name == "rank" else np.float64)
                       for name, empty in STATS.items()}
        self.filled = np.zeros(self.size, dtype=bool)

    def put(self, slot: int, scores: dict[str, Any], row: int, count: int = 1) -> None:
        """Slots ``slot`` onwards get ``count`` values of the score arrays from ``row`` on."""
        assert slot + count <= self.size, "token outside the text"
        assert not (self.whole and count), "token scored twice"
        if self.values is None and slot == 0 and count == self.size:
            self.values = {name: values[row:row + count] for name, values in scores.items()}
            self.whole = True
            return
        if self.values is None:
            self._allocate()
        assert not self.filled[slot:slot + count].any(), "token scored twice"
        self.filled[slot:slot + count] = True
        for name, values in scores.items():
            self.values[name][slot:slot + count] = values[row:row + count]

    def put_at(self, slots, scores: dict[str, Any], rows) -> None:
        """Slots ``slots`` (an int array) get the score arrays' values at ``rows``."""
        assert not self.whole or not len(slots), "token scored twice"
        if self.values is None:
            self._allocate()
        assert len(slots) == 0 or int(slots.max()) < self.size, "token outside the text"
        assert not self.filled[slots].any() and len(set(slots.tolist())) == len(slots), "token scored twice"
        self.filled[slots] = True
        for name, values in scores.items():
            self.values[name][slots] = values[rows]

    def complete(self) -> bool:
        return self.whole or self.size == 0 or (self.filled is not None and bool(self.filled.all()))

    def arrays(self) -> dict[str, Any] | None:
        """The statistics as arrays (float64; ``rank`` int64), or None when nothing was scored."""
        if self.values is None:
            return None
        # int64 already from StackedScores and _allocate: then no copy is made
        return {**self.values, "rank": self.values["rank"].astype("int64", copy=False)}


def check_ngrams(requests: Sequence[TokenLogprobsRequest], longest: int) -> None:
    """A ConfigError for a request whose n-gram settings cannot be answered, before any
    work: ``ngram`` must be an integer in [1, ``longest``], ``ngram_drop_short`` needs it,
    and a request with a context cannot have it."""
    for request in requests:
        if request.ngram_drop_short and request.ngram is None:
            raise ConfigError("ngram_drop_short needs an ngram")
        if request.ngram is None:
            continue
        if request.context:
            raise ConfigError("a token log-probs request cannot have both a context and ngram")
        if isinstance(request.ngram, bool) or not isinstance(request.ngram, int) or not 1 <= request.ngram <= longest:
            raise ConfigError(f"ngram must be an integer in [1, {longest}], got {request.ngram!r}")


def later_texts(requests: Sequence[TokenLogprobsRequest]) -> list[int]:
    """The plain requests (no context, no n-gram) that can be tokenized while others run:
    all but the :data:`FIRST_TEXTS` longest texts, by characters, longest first, when
    there are more than twice as many; else none. The first batches, the longest, then
    start once the tokenizer has read those texts alone: before, the device waited for
    every text (WikiMIA's 1,650 passages on 2 cores: 57-80 of the 86-123 ms per 1,000
    passages from detect's start to its first forward pass, bench_stages.py)."""
    plain = [i for i, request in enumerate(requests) if not request.context and request.ngram is None]
    if len(plain) <= 2 * FIRST_TEXTS:
        return []
    plain.sort(key=lambda i: len(requests[i].text), reverse=True)
    return plain[FIRST_TEXTS:]


def batch_token_ids(tokenizer: Any, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=...).input_ids``, each a list. A transformers fast tokenizer whose call
    is transformers' own and whose Rust tokenizer is set as that call sets it (no
    truncation, no padding, special tokens in the text read as ``split_special_tokens``
    says) is asked through its Rust tokenizer's batch call without offsets: that call's
    own ids, without its conversion of every text's encoding into dicts of lists, which
    runs on one core where the Rust part runs on all (WikiMIA on 2 cores, outside detect:
    117-120 ms per 1,000 passages through the call, 85-92 through the Rust one; inside
    detect, where the garbage collector is held back, bench_stages.py resolves no
    difference). Any other tokenizer is called as it is."""
    if not texts:  # transformers' call fails on an empty batch
        return []
    rust = _plain_rust_tokenizer(tokenizer)
    if rust is None:
        # the option only where it is not the default: a tokenizer without it still works for plain texts
        options = {} if add_special_tokens else {"add_special_tokens": False}
        return [list(ids) for ids in tokenizer(texts, **options).input_ids]
    encode = getattr(rust, "encode_batch_fast", None) or rust.encode_batch
    return [encoding.ids for encoding in encode(texts, add_special_tokens=add_special_tokens)]


def _plain_rust_tokenizer(tokenizer: Any) -> Any:
    """The Rust tokenizer behind ``tokenizer`` when calling it on a list of texts comes to
    the Rust tokenizer's ``encode_batch`` of those texts as they are (see
    :func:`batch_token_ids`), else None."""
    try:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # transformers before 5: its own path is kept
        return None
    kind = type(tokenizer)
    if not (isinstance(tokenizer, TokenizersBackend) and kind.__call__ is TokenizersBackend.__call__
            and kind._encode_plus is TokenizersBackend._encode_plus
            and not hasattr(tokenizer, "_switch_to_input_mode")):
        return None
    rust = getattr(tokenizer, "_tokenizer", None)
    if (rust is None or rust.truncation is not None or rust.padding is not None
            or rust.encode_special_tokens != bool(getattr(tokenizer, "split_special_tokens", False))):
        return None
    return rust


class TokenLogprobsMixin:
    """``TokenLogprobsRequest`` answers for :class:`~copyprobe.backends.hf.HFBackend`, from
    its tokenizer, ``max_length``, ``lead_ids``, ``device``, batches (``_text_batches``,
    a :class:`~copyprobe.backends.hf.batching.Batcher`), LM head (``_head``, ``_softcap``)
    and forward passes (``_padded_hidden``, ``_decoder``)."""

    def _answer_token_logprobs(self, requests: list[TokenLogprobsRequest], progress=None, on_result=None):
        """See the module docstring for windows and n-gram contexts. Each answer is made,
        and given to ``on_result(index, answer)``, as soon as its last token is scored: on
        a GPU that happens while the next batch runs (see :mod:`.batching`), so the
        caller's work on it (the response cache encodes it) overlaps the device's.

        Many plain texts (no context, no n-gram) are not all tokenized before the first
        batch: the longest (by characters) are, and the rest on a thread, in chunks of
        :data:`LATER_CHUNK` by length, while batches run (:func:`later_texts`); each chunk
        is planned when the windows before it are down to one batch (``more``, see
        :meth:`Batcher.run`)."""
        answers: list[TokenLogprobs | None] = [None] * len(requests)

        def finish(index: int) -> None:
            answers[index] = self._token_answer(requests[index], token_ids[index], results[index])
            if on_result is not None:
                on_result(index, answers[index])

        check_ngrams(requests, self.max_length - len(self.lead_ids) - 1)
        tracker = Completion(progress, finish)
        later = later_texts(requests) if _plain_rust_tokenizer(self.tokenizer) is not None else []
        first = sorted(set(range(len(requests))) - set(later))
        token_ids: list[list[int] | None] = [None] * len(requests)
        first_ids, context_ids = self._request_token_ids(requests, first)
        for index, ids in first_ids.items():
            token_ids[index] = ids
        tokenizing: deque[tuple[list[int], Any]] = deque()  # (requests, their ids to come)
        if later:  # the Rust tokenizer's call releases the GIL: it runs beside the batches
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copyprobe-tokenize")
            for start in range(0, len(later), LATER_CHUNK):
                chunk = later[start:start + LATER_CHUNK]
                tokenizing.append((chunk, pool.submit(self._request_token_ids, requests, chunk)))
            pool.shutdown(wait=False)  # the thread ends with its last chunk
        results: list[ArrayBuffer | None] = [None] * len(requests)
        jobs: list[tuple[int, Window]] = []  # (request, window)
        contexts: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}  # ids -> [(request, slot, target)]
        prefixed: dict[tuple[int, ...], list[int]] = {}  # context ids -> requests run on its KV cache
        uses = Counter(request.context for request in requests if request.context)
        plan = functools.partial(self._plan, requests, token_ids, context_ids, uses, results, contexts, prefixed,
                                 tracker)

        def more() -> list[tuple[int, Window]]:
            """The windows of the next chunk of texts tokenized on the thread with any."""
            planned: list[tuple[int, Window]] = []
            while tokenizing and not planned:
                chunk, future = tokenizing.popleft()
                for index, ids in future.result()[0].items():
                    token_ids[index] = ids
                plan(chunk, planned)
            return planned

        try:
            plan(first, jobs)  # (a context too long for the model is an error here, before any work)
            with self._guard():
                self._run_prefixed(prefixed, token_ids, results, tracker)
                self._run_windows(jobs, results, tracker, more if later else None)
                self._run_contexts(contexts, results, tracker)
        finally:
            for _chunk, future in tokenizing:  # a call that failed drops the chunks not begun
                future.cancel()

        assert all(answer is not None for answer in answers), "every request must finish"
        return answers

    def _plan(self, requests: list[TokenLogprobsRequest], token_ids: list, context_ids: dict[str, list[int]],
              uses: Counter, results: list, contexts: dict, prefixed: dict, tracker: Completion,
              indices: list[int], jobs: list[tuple[int, Window]]) -> None:
        """The work of the requests at ``indices`` (tokenized): windows into ``jobs``, n-gram
        contexts, texts after a shared context; those with nothing to score are finished."""
        n_lead = len(self.lead_ids)
        empty: list[int] = []
        for index in indices:
            request, ids = requests[index], token_ids[index]
            if request.context:
                ids = self._plan_context(index, request, context_ids[request.context], uses[request.context] > 1,
                                         token_ids, results, prefixed, jobs, tracker)
                if ids is None:
                    empty.append(index)
                continue
            results[index] = ArrayBuffer(max(len(ids) - 1, 0))
            lead = ids[:n_lead] if ids[:n_lead] == self.lead_ids else []
            first_ngram = len(lead) + (request.ngram or 0)  # first position with n text predecessors
            if request.ngram_drop_short:
                results[index] = ArrayBuffer(max(len(ids) - first_ngram, 0))
            if len(ids) < 2 or not results[index].size:
                empty.append(index)
                continue
            if request.ngram is None:
                planned = windows(ids, lead, self.max_length)
            else:
                # full-prefix values for the tokens with fewer than n text predecessors
                # (none with ngram_drop_short); a one-token prefix scores nothing
                short = [] if request.ngram_drop_short else ids[:min(len(ids), first_ngram)]
                planned = windows(short, lead, self.max_length) if len(short) >= 2 else []
                # slot of position p: p - 1, or p - first_ngram when short tokens are left out
                shift = first_ngram if request.ngram_drop_short else 1
                for position in range(first_ngram, len(ids)):
                    key = tuple(lead) + tuple(ids[position - request.ngram:position])
                    contexts.setdefault(key, []).append((index, position - shift, ids[position]))
                    tracker.add(index)
            for window in planned:
                jobs.append((index, window))
                tracker.add(index)
        tracker.finish_empty(empty)

    def _request_token_ids(self, requests: list[TokenLogprobsRequest], indices: Sequence[int] | None = None,
                           ) -> tuple[dict[int, list[int]], dict[str, list[int]]]:
        """(index -> text ids of the requests at ``indices``, all by default; each
        distinct context's ids), in three batch calls of the tokenizer: texts
        without a context with the leading special tokens, texts after a context without
        them (the context has them), and each context once however many requests share it
        (ReCaLL's prefix is every text's). Each distinct text is tokenized once a call
        (con_recall asks for every text after two contexts). A call a text and a context
        cost recall and con_recall 6.6 ms a WikiMIA passage on 2 cores (bench_stages.py),
        more than the micro model's forward passes (5.2)."""
        chosen = range(len(requests)) if indices is None else indices
        plain = [i for i in chosen if not requests[i].context]
        after = [i for i in chosen if requests[i].context]
        token_ids: dict[int, list[int]] = {}
        for part, special in ((plain, True), (after, False)):
            texts = list(dict.fromkeys(requests[i].text for i in part))
            by_text = dict(zip(texts, batch_token_ids(self.tokenizer, texts, add_special_tokens=special)))
            given: set[str] = set()
            for i in part:
                text = requests[i].text
                # a text asked for again gets its own copy: the lists become answers' token_ids
                token_ids[i] = list(by_text[text]) if text in given else by_text[text]
                given.add(text)
        contexts = list(dict.fromkeys(requests[i].context for i in after))
        alone = batch_token_ids(self.tokenizer, contexts)
        followed = batch_token_ids(self.tokenizer, [context + WORD_AFTER for context in contexts])
        return token_ids, {context: context_before_word(a, f, self.tokenizer.decode)
                           for context, a, f in zip(contexts, alone, followed)}

    def _token_answer(self, request: TokenLogprobsRequest, ids: list[int], result: ArrayBuffer) -> TokenLogprobs:
        assert result.complete(), "every token must be scored exactly once"
        arrays = result.arrays()
        if arrays is not None:  # read-only, the answer's lists made of them only when read as lists
            for array in arrays.values():
                array.setflags(write=False)
        values = ({name: Values(array) for name, array in arrays.items()} if arrays is not None
                  else {name: [] for name in STATS})
        answer = TokenLogprobs(
            token_ids=ids,
            logprobs=values["logprobs"],
            mu=values["mu"] if request.stats else None,
            sigma=values["sigma"] if request.stats else None,
            rank=values["rank"] if request.stats else None,
            # token strings let word-level methods (info_probe, veilprobe) map tokens to
            # words; looked up only when one reads them (none of the logit methods does)
            tokens=self._token_strings(ids),
        )
        if arrays is not None:  # the arrays themselves, for the methods and the cache
            kept = ("logprobs", "mu", "sigma", "rank") if request.stats else ("logprobs",)
            answer.keep_arrays({name: arrays[name] for name in kept})
        return answer

    def _token_strings(self, ids: list[int]) -> TokenStrings:
        return TokenStrings(ids, self.tokenizer.convert_ids_to_tokens)

    def _plan_context(self, index: int, request: TokenLogprobsRequest, context_ids: list[int], shared: bool,
                      token_ids: list[list[int]], results: list[ArrayBuffer], prefixed: dict, jobs: list,
                      tracker: Completion):
        """Plan a request with a context: every text token is scored after the context's
        tokens. Texts that fit in ``max_length`` with a context other requests share join
        ``prefixed`` (the context's KV cache is computed once per batch of requests and
        extended by each text); the others become windows over context + text whose context
        positions are not scored, one window where they fit, run in batches with every other
        window: a context of one request alone would cost two forward passes of one row
        (200 passages each after a context of its own: 333 s on one CPU thread with
        SmolLM2-135M, 2.48x a bare pass; as windows 239 s, 1.79x; ``bench_recall.py
        --own-contexts``).
        ``token_ids[index]`` holds the text's ids without leading special tokens. Returns
        them, or None when there are none."""
        ids = token_ids[index]  # (check_ngrams turned away a context with an n-gram)
        results[index] = ArrayBuffer(len(ids))
        check_context(context_ids, request.context, self.max_length, len(ids))
        if not ids:
            return None
        tracker.add(index)
        if shared and len(context_ids) + len(ids) <= self.max_length:
            prefixed.setdefault(tuple(context_ids), []).append(index)
            return ids
        planned = context_windows(context_ids, ids, self.lead_ids, self.max_length)
        tracker.add(index, len(planned) - 1)
        jobs.extend((index, window) for window in planned)
        return ids

    def _run_prefixed(self, prefixed: dict[tuple[int, ...], list[int]], token_ids: list[list[int]],
                      results: list[ArrayBuffer], tracker: Completion) -> None:
        """Texts after a shared context: the context runs once (per call) with a KV cache,
        each batch of texts extends a copy of it, and the context's last hidden state
        scores every text's first token. A batch's padded tokens count the context too."""
        import copy

        import numpy as np
        import torch

        from copyprobe.backends.prefix_tree import run_with_cache

        for context, indices in prefixed.items():
            out, context_cache = run_with_cache(self._decoder, None, input_ids=torch.tensor([context], device=self.device))
            context_last = out.last_hidden_state[0, -1:]
            del out
            indices = sorted(indices, key=lambda i: len(token_ids[i]), reverse=True)

            def forward(batch: list[int], context=context, context_cache=context_cache, context_last=context_last):
                # input and mask built in numpy, one tensor each a batch (not one per row)
                ids, text_mask = padded_arrays([token_ids[i] for i in batch], self.pad_id)
                mask = np.concatenate([np.ones((len(batch), len(context)), dtype=np.int64), text_mask], axis=1)
                cache = copy.deepcopy(context_cache)
                if len(batch) > 1:
                    cache.batch_repeat_interleave(len(batch))
                hidden = run_with_cache(self._decoder, cache, input_ids=self._device_tensor(ids),
                                        attention_mask=self._device_tensor(mask))[0].last_hidden_state
                # text position j is scored by hidden state j - 1 of its row, position 0 by the
                # context's last state: the real positions in row-major order, as store reads them
                scored = np.flatnonzero(text_mask)
                firsts = np.flatnonzero(scored % ids.shape[1] == 0)
                source = scored - 1
                source[firsts] = scored[firsts]  # any row of the batch; overwritten just below
                rows = flat_rows(hidden, self._device_tensor(source))
                rows[self._device_tensor(firsts)] = context_last
                return self._queue_scores(rows, self._device_tensor(ids.reshape(-1)[scored]))

            def store(batch: list[int], queued: StackedScores) -> None:
                scores = queued.arrays()
                cursor = 0
                for i in batch:
                    results[i].put(0, scores, cursor, len(token_ids[i]))
                    cursor += len(token_ids[i])
                    tracker.done(i)
                tracker.flush()

            self._text_batches().run(indices, lambda i, n=len(context): n + len(token_ids[i]), forward, store)

    def _queue_scores(self, rows, targets) -> StackedScores:
        """The statistics of hidden ``rows`` for ``targets`` (a device tensor, or a list),
        queued on their way to the host."""
        import torch

        if not isinstance(targets, torch.Tensor):
            targets = torch.tensor(targets, device=self.device)
        return StackedScores(score_stats(rows, targets, self._head, self._softcap), self.device)

    def _device_tensor(self, array):
        """A CPU numpy array on the model's device (no copy on the CPU). On a GPU through
        pinned memory, so the copy is queued behind the device's work instead of staged
        from pageable memory while the host waits."""
        import torch

        tensor = torch.from_numpy(array)
        if self.device == "cpu":
            return tensor
        if str(self.device).startswith("cuda"):
            tensor = tensor.pin_memory()
        return tensor.to(self.device, non_blocking=True)

    def _run_windows(self, jobs: Sequence[tuple[int, Window]], results: list[ArrayBuffer],
                     tracker: Completion, more: Callable[[], list[tuple[int, Window]]] | None = None) -> None:
        """Run the windows ``jobs`` in length-sorted batches, and those ``more()`` gives
        as they run out (see :meth:`Batcher.run`)."""
        import numpy as np

        def width(job: tuple[int, Window]) -> int:
            return len(job[1].ids)

        jobs = sorted(jobs, key=width, reverse=True)

        def forward(batch: list[tuple[int, Window]]) -> StackedScores:
            ids, mask = padded_arrays([window.ids for _, window in batch], self.pad_id)
            hidden = self._hidden(self._device_tensor(ids), self._device_tensor(mask.astype(np.int64)))
            # logits at position j-1 score the token at position j: the scored positions
            # j >= first of every row, in row-major order (row by row, as the windows come)
            firsts = np.fromiter((window.first for _, window in batch), dtype=np.int64, count=len(batch))
            scored = np.flatnonzero(mask & (np.arange(ids.shape[1]) >= firsts[:, None]))
            rows = flat_rows(hidden, self._device_tensor(scored - 1))
            return self._queue_scores(rows, self._device_tensor(ids.reshape(-1)[scored]))

        def store(batch: list[tuple[int, Window]], queued: StackedScores) -> None:
            scores = queued.arrays()
            cursor = 0
            for index, window in batch:
                # window position j is text position j + offset, whose score sits at j + offset - 1
                span = len(window.ids) - window.first
                results[index].put(window.first + window.offset - 1, scores, cursor, span)
                cursor += span
                tracker.done(index)
            tracker.flush()

        self._text_batches().run(jobs, width, forward, store, more)

    def _run_contexts(self, contexts: dict[tuple[int, ...], list[tuple[int, int, int]]],
                      results: list[ArrayBuffer], tracker: Completion) -> None:
        import torch

        if not contexts:
            return
        by_width: dict[int, list] = {}
        for item in contexts.items():  # requests may ask for different n
            by_width.setdefault(len(item[0]), []).append(item)

        def forward(batch: list) -> StackedScores:
            last = self._context_states([key for key, _ in batch])
            rows, targets = [], []
            for row, (_, users) in enumerate(batch):
                for _index, _slot, target in users:
                    rows.append(row)
                    targets.append(target)
            return self._queue_scores(last[torch.tensor(rows, device=self.device)], targets)

        def store(batch: list, queued: StackedScores) -> None:
            import numpy as np

            scores = queued.arrays()
            by_request: dict[int, tuple[list[int], list[int]]] = {}
            k = 0
            for _, users in batch:
                for index, slot, _target in users:
                    slots, rows = by_request.setdefault(index, ([], []))
                    slots.append(slot)
                    rows.append(k)
                    k += 1
            for index, (slots, rows) in by_request.items():
                results[index].put_at(np.asarray(slots, dtype=np.int64), scores, np.asarray(rows, dtype=np.int64))
                tracker.done(index, len(slots))
            tracker.flush()

        for group in by_width.values():
            group.sort(key=lambda item: item[0])  # contexts that share a prefix sit together
            self._ngram_batches().run(group, lambda item: len(item[0]), forward, store)

    def _ngram_batches(self) -> Batcher:
        """Batches of n-gram contexts (:data:`MAX_NGRAM_BATCH` at most), kept smaller after
        an out-of-memory error."""
        if getattr(self, "_ngram_batcher", None) is None:
            self._ngram_batcher = Batcher(count=MAX_NGRAM_BATCH, tokens=None, device=self.device, what="contexts")
        return self._ngram_batcher

    def _context_states(self, keys: list[tuple[int, ...]]):
        """Last-position hidden states of equal-length contexts, shared prefixes once."""
        from copyprobe.backends.prefix_tree import context_states

        return context_states(self._decoder, keys, self.device)
