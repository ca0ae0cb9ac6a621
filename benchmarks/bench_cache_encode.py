"""What the response cache costs the thread that queues the device's work, per answer
(issue 41): a token log-prob answer turned into its stored text (``packed`` then
``ResponseCache.encode``; ``entry_text``, the same text, where the checkout has it), a
request's cache key (``Request.key``), and a cache hit's stored text read back as an answer
(``read back``), in milliseconds per 1,000 answers. No model: answers
of random values, as long as WikiMIA's passages (103 scored tokens on average with SmolLM2's
tokenizer), holding their arrays as the HF backend's do.

    python benchmarks/bench_cache_encode.py             # least and median of 40 repeats
    git worktree add /tmp/before COMMIT                 # another commit's copyprobe:
    python benchmarks/bench_cache_encode.py --root /tmp/before

Run two commits one after the other, several times: on a shared machine the median moves
by half between runs, the least much less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def answers(count: int, tokens: int, seed: int = 0) -> list:
    from copyprobe.backends.base import TokenLogprobs

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        arrays = {name: rng.normal(size=tokens) for name in ("logprobs", "mu", "sigma")}
        arrays["rank"] = rng.integers(1, 1000, tokens)
        arrays["token_ids"] = rng.integers(0, 49152, tokens + 1)
        answer = TokenLogprobs(**{name: array.tolist() for name, array in arrays.items()}, tokens=None)
        out.append(answer.keep_arrays(arrays) if hasattr(answer, "keep_arrays") else answer)
    return out


def timed(function, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1650)
    parser.add_argument("--tokens", type=int, default=103)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose copyprobe is timed")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.root).resolve()))
    from copyprobe.backends.base import TokenLogprobsRequest
    from copyprobe.backends import cache
    from copyprobe.backends.cache import ResponseCache, packed

    import copyprobe
    print(f"copyprobe from {Path(copyprobe.__file__).parent}")
    batch = answers(args.answers, args.tokens)
    requests = [TokenLogprobsRequest(text=f"passage {i}", stats=True) for i in range(args.answers)]
    stages = {
        "packed": lambda: [packed(a) for a in batch],
        "packed + encode": lambda: [ResponseCache.encode(packed(a)) for a in batch],
        "request keys": lambda: [r.key() for r in requests],
    }
    if hasattr(cache, "entry_text"):  # the writer's stored text since 2026-11-29 (the same text)
        stages["entry text"] = lambda: [cache.entry_text(a) for a in batch]
    # a cache hit: the stored text read back as an answer (what get_many's JSON and
    # _decode do with each entry the SQLite query returned)
    stored = [ResponseCache.encode(packed(a)) for a in batch]
    answer_type = type(batch[0])
    stages["read back"] = lambda: [cache._decode(answer_type, json.loads(text)) for text in stored]
    per = 1000 / args.answers
    print(f"{args.answers} answers of {args.tokens} tokens, {args.repeats} repeats; ms per 1,000 answers")
    for name, function in stages.items():
        function()  # warm-up
        times = timed(function, args.repeats)
        print(f"  {name:16s} least {min(times) * 1000 * per:7.1f}   median {statistics.median(times) * 1000 * per:7.1f}")


if __name__ == "__main__":
    main()
