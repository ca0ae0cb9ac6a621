"""llama.cpp token log-probs: prefix reuse, and why a resume must be aligned (issue 28).

Three measurements on one passage of the planted letters (default: the first of
``benchmarks/data/one_voice/planted_passages.jsonl``), printed as JSON lines:

1. ``reuse``: the passage and its leave-one-word-out texts (VeilProbe's attribution
   requests) answered together (sorted, sharing prefixes) and each alone from an empty
   cache: tokens decoded, seconds, how many answers are bit-identical, the largest
   log-prob difference. Once with resumes aligned to 32 tokens (the backend's rule) and
   once resuming wherever the shared prefix ends (``--unaligned``, for comparison).
2. ``chunks``: the passage decoded from scratch with 128, 64, 48, 32, 16, 8, 4 and 1
   tokens per decode call, compared with 128.
3. ``resume``: the passage decoded from scratch, then again resuming at position r (the
   first r tokens from the KV cache), for several r; which positions differ.

    python benchmarks/bench_logprob_reuse.py --model llamacpp:qwen2.5-coder-0.5b-instruct --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.backends.base import TokenLogprobsRequest  # noqa: E402
from copyprobe.backends.hf.scoring import ScoreBuffer, Window  # noqa: E402
from copyprobe.backends.specs import load_backend  # noqa: E402


def fresh(backend) -> None:
    backend._kv, backend._scored = [], None


def reuse(backend, text: str, aligned: bool) -> dict:
    if not aligned:  # resume wherever the prefix ends: what the backend did before alignment
        backend._aligned = lambda n: n
    words = text.split(" ")
    texts = [text] + [" ".join(words[:i] + words[i + 1:]) for i in range(len(words))]
    requests = [TokenLogprobsRequest(t) for t in texts]
    fresh(backend)
    decoded0 = backend.counters["decoded_tokens"]
    t0 = time.perf_counter()
    together = backend.answer(requests)
    together_s = time.perf_counter() - t0
    decoded = backend.counters["decoded_tokens"] - decoded0
    alone = []
    t0 = time.perf_counter()
    for request in requests:
        fresh(backend)
        alone.append(backend.answer([request])[0])
    alone_s = time.perf_counter() - t0
    if not aligned:
        del backend._aligned
    return {"measure": "reuse", "aligned": aligned, "texts": len(texts),
            "decoded_together": decoded, "tokens_alone": sum(len(a.token_ids) for a in alone),
            "seconds_together": round(together_s, 1), "seconds_alone": round(alone_s, 1),
            "identical_answers": sum(a == b for a, b in zip(together, alone)),
            "max_logprob_difference": max(max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs))
                                          for a, b in zip(together, alone))}


def scores(backend, ids, reuse_tokens: int = 0) -> tuple[int, list[float]]:
    buffer = ScoreBuffer(len(ids) - 1)
    start = backend._score_window(Window(ids, 1, 0), buffer, reuse=reuse_tokens)
    return start, buffer.values["logprobs"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llamacpp:qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--data", default=str(ROOT / "benchmarks/data/one_voice/planted_passages.jsonl"))
    parser.add_argument("--row", type=int, default=0, help="which passage of the data file")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    text = rows[args.row]["text"]

    backend = load_backend(args.model, n_threads=args.threads)
    for aligned in (True, False):
        print(json.dumps({"model": args.model, **reuse(backend, text, aligned)}), flush=True)
    ids = backend.tokenize(text)
    backend.close()

    reference = None
    for chunk in (128, 64, 48, 32, 16, 8, 4, 1):
        sized = load_backend(args.model, n_threads=args.threads, chunk=chunk)
        fresh(sized)
        values = scores(sized, ids)[1]
        sized.close()
        reference = reference or values
        print(json.dumps({"measure": "chunks", "tokens_per_call": chunk, "identical_to_128": values == reference,
                          "max_difference": max(abs(x - y) for x, y in zip(values, reference))}), flush=True)

    backend = load_backend(args.model, n_threads=args.threads)
    backend._aligned = lambda n: n  # resume exactly at r, as the backend did before alignment
    fresh(backend)
    full = scores(backend, ids)[1]
    for r in (1, 5, 8, 16, 24, 32, 40, 64, 96, 100, 120):
        if r >= len(ids) - 1:
            continue
        fresh(backend)
        scores(backend, ids)  # the cache now holds the passage
        start, values = scores(backend, ids, reuse_tokens=r)
        differ = [p for p in range(start, len(ids) - 1) if values[p] != full[p]]
        print(json.dumps({"measure": "resume", "resume_at": start, "positions_differing": differ}), flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
