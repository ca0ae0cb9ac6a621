"""Many token sequences that share prefixes, each shared prefix run through the model once
with a reused KV cache. Two walks of the prefix tree, for two shapes of work:

* :func:`shared_prefix_logprobs`, depth first, one sequence at a time (DE-COP's 24
  orderings of one passage; cropping the cache back at each branch point);
* :func:`context_states`, level by level, all sequences of one length in one batch (the
  n-gram contexts of token log-probs; re-indexing the cache rows at each level).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any


def _cache_keyword(model: Any) -> str:
    """The forward's keyword for a KV cache: ``cache`` where the forward names it
    (transformers 5.x, which deprecates ``past_key_values`` and removes it in 5.40; a
    keyword the forward no longer knows could be passed on and ignored, scoring each text
    as if nothing came before it), ``past_key_values`` in earlier versions. ``model`` is a
    module (its class's ``forward`` is read, once per class: the prefix walks run the model
    once per node) or any callable."""
    forward = getattr(type(model), "forward", None)
    return _keyword_of_forward(forward) if forward is not None else _keyword_in(model)


def _keyword_in(function: Callable[..., Any]) -> str:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a forward without a signature: the keyword every version knows
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


_keyword_of_forward = functools.lru_cache(maxsize=None)(_keyword_in)  # a class's forward: read once


def run_with_cache(model: Any, cache: Any, **inputs: Any) -> tuple[Any, Any]:
    """``model(**inputs)`` on top of the KV ``cache`` (None: a new one), with
    ``use_cache=True``: (its output, the extended cache), under the keyword and output field
    of the installed transformers (:func:`_cache_keyword`)."""
    keyword = _cache_keyword(model)
    out = model(**inputs, **{keyword: cache}, use_cache=True)
    extended = getattr(out, "cache", None) if keyword == "cache" else None
    return out, extended if extended is not None else out.past_key_values


def shared_prefix_logprobs(model: Any, sequences: Sequence[Sequence[int]], targets: Sequence[int],
                           progress: Callable[[int], Any] | None = None) -> list[list[float]]:
    """Next-token log-probs of ``targets`` after each token sequence, running every shared
    prefix through ``model`` (a Hugging Face causal LM) only once.

    The 24 DE-COP orderings of a passage share the header, 4 distinct first options and
    12 distinct first pairs, so a depth-first walk over the token trie with one KV cache
    (cropped back to the branch point after each child) processes about 45% fewer tokens
    than one forward pass per prompt, and needs no decoding step. Sequences may be any
    mix of passages: whatever they share is shared.

    On CPU this is how :class:`~copyprobe.backends.hf.HFBackend` answers
    ``ChoiceLogprobsRequest`` (benchmarks/bench_decop.py times it against the authors'
    one-``generate``-per-ordering loop). On a GPU, batching the prompts wins instead.
    """
    import torch
    from transformers import DynamicCache

    seqs = [list(s) for s in sequences]
    if any(len(s) == 0 for s in seqs):
        raise ValueError("empty token sequence")
    target_idx = torch.tensor(list(targets), dtype=torch.long)
    results: list[list[float] | None] = [None] * len(seqs)
    device = next(model.parameters()).device

    def common_length(indices: list[int], start: int) -> int:
        first = seqs[indices[0]]
        n = len(first) - start
        for i in indices[1:]:
            other = seqs[i]
            n = min(n, len(other) - start)
            k = 0
            while k < n and other[start + k] == first[start + k]:
                k += 1
            n = k
        return n

    def walk(indices: list[int], start: int, cache: Any, last_logits: Any) -> None:
        n = common_length(indices, start)
        if n > 0:
            segment = torch.tensor([seqs[indices[0]][start : start + n]], dtype=torch.long, device=device)
            try:  # only the last position's logits are needed (skips most of the LM head)
                out, cache = run_with_cache(model, cache, input_ids=segment, logits_to_keep=1)
            except TypeError:  # transformers < 4.50
                out, cache = run_with_cache(model, cache, input_ids=segment)
            last_logits = out.logits[0, -1].float()
        end = start + n
        finished = [i for i in indices if len(seqs[i]) == end]
        if finished:
            # normalised in float64, as the token log-probs are: a float32 log-sum-exp over
            # Gemma's 262,144 logits was off by 1e-4 in every choice
            logprobs = torch.log_softmax(last_logits.double(), dim=-1)[target_idx.to(last_logits.device)].tolist()
            for i in finished:
                results[i] = logprobs
            if progress:
                progress(len(finished))
        children: dict[int, list[int]] = {}
        for i in indices:
            if len(seqs[i]) > end:
                children.setdefault(seqs[i][end], []).append(i)
        for group in children.values():
            walk(group, end, cache, last_logits)
            extra = cache.get_seq_length() - end
            if extra > 0:
                cache.crop(-extra)  # a negative value removes that many tokens (transformers 4.x and 5)

    with torch.inference_mode():
        groups: dict[int, list[int]] = {}
        for i, s in enumerate(seqs):
            groups.setdefault(s[0], []).append(i)
        for group in groups.values():
            walk(group, 0, DynamicCache(), None)
    return results  # type: ignore[return-value]


def context_states(decoder: Any, keys: Sequence[Sequence[int]], device: Any):
    """Last-position hidden states of equal-length token sequences from ``decoder`` (the
    model's base, without LM head), computing each distinct prefix once: level k runs one
    token for every distinct k-token prefix, on top of a KV cache whose rows are
    re-indexed from the parents of level k - 1.

    The n-gram contexts of a text overlap in most of their prefixes (over 200 KJV
    passages of 128 tokens, 5-gram contexts need 62% of the tokens of running each
    context on its own), and a causal model's state at a position depends on that
    position's prefix only, so this is exact.
    """
    import torch

    keys = [tuple(key) for key in keys]
    width = len(keys[0])
    index: dict[tuple[int, ...], int] = {}
    cache = hidden = None
    for level in range(1, width + 1):
        parents, tokens, index_here = [], [], {}
        for key in keys:
            prefix = key[:level]
            if prefix not in index_here:
                index_here[prefix] = len(tokens)
                tokens.append(prefix[-1])
                parents.append(index.get(prefix[:-1], 0))
        input_ids = torch.tensor(tokens, device=device).unsqueeze(1)
        if cache is not None:
            cache.reorder_cache(torch.tensor(parents, device=device))
        out, cache = run_with_cache(decoder, cache, input_ids=input_ids)
        hidden = out.last_hidden_state[:, -1]
        index = index_here
    return hidden[torch.tensor([index[key] for key in keys], device=device)]
