"""What does ReCaLL's prefix cost? (issue 15)

Target: scoring 200 passages after the ReCaLL prefix costs at most 1.3x a bare forward
pass over the same passages, because the prefix is computed once (one KV cache per
batch of texts) and not once per text. Measured variants, on the same passages:

* ``bare forward pass``: the passages alone, length-sorted right-padded batches, logits
  only (as benchmarks/bench_single_pass.py);
* ``after the prefix (KV reuse)``: the backend answering one TokenLogprobsRequest with
  ``context`` = the prefix per passage: LL(x | P), the request ReCaLL adds to the plain
  one that loss, zlib, Min-K% ... already share (the target);
* ``recall through detect`` (with ``--detect``): the whole method, both requests
  (LL(x | P) and LL(x)), run alone through ``detect`` with no cache: about one bare pass
  more than the line above, since LL(x) is the plain pass;
* ``prefix per text (no reuse)``: the bare forward pass over prefix + passage for each
  passage, what an implementation without KV reuse does; timed on ``--naive`` passages
  and scaled to all of them.

Each variant runs ``--repeats`` times, alternating, and the fastest run is kept.

    python benchmarks/bench_recall.py [--passages 200] [--tokens 128] [--prefix-passages 5]
        [--batch-size 8] [--repeats 1] [--naive 20] [--detect] [--json benchmarks/results/recall.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_single_pass import bare_forward, passages  # noqa: E402

from copyprobe.files import write_json  # noqa: E402


def after_prefix(backend, texts: list[str], prefix: str) -> float:
    from copyprobe.backends.base import TokenLogprobsRequest

    start = time.perf_counter()
    backend.answer([TokenLogprobsRequest(t, context=prefix) for t in texts])
    return time.perf_counter() - start


def recall_detect(backend, texts: list[str], prefix_file: str) -> float:
    import copyprobe

    start = time.perf_counter()
    result = copyprobe.detect(backend, texts, ["recall"], params={"recall": {"prefix": prefix_file}},
                              cache=False, blind_baseline=False)
    elapsed = time.perf_counter() - start
    if result.scores["recall"].isna().any():
        raise SystemExit("some passages failed to score")
    return elapsed


def prefix_per_text(backend, texts: list[str], prefix: str, batch_size: int) -> float:
    return bare_forward(backend, [prefix + t for t in texts], batch_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prefix-passages", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--naive", type=int, default=20, help="passages timed for the no-reuse variant")
    parser.add_argument("--detect", action="store_true", help="also time the whole method through detect")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    import torch

    from copyprobe.backends.specs import load_backend
    from copyprobe.methods.recall import join_prefix

    backend = load_backend(args.model, batch_size=args.batch_size, device=args.device)
    pool = passages(backend.tokenizer, args.passages + args.prefix_passages, args.tokens)
    # the prefix: passages that are not scored (as recall's held-out non-members)
    prefix, texts = join_prefix(pool[:args.prefix_passages]), pool[args.prefix_passages:]
    prefix_tokens = len(backend.tokenizer(prefix).input_ids)
    with tempfile.TemporaryDirectory() as tmp:
        prefix_file = str(Path(tmp) / "prefix.txt")
        Path(prefix_file).write_text(prefix, encoding="utf-8")
        naive = texts[:args.naive]
        variants = {
            "bare forward pass": lambda: bare_forward(backend, texts, args.batch_size),
            "after the prefix (KV reuse)": lambda: after_prefix(backend, texts, prefix),
            "prefix per text (no reuse)": lambda: prefix_per_text(backend, naive, prefix, args.batch_size)
            * len(texts) / len(naive),
        }
        if args.detect:
            variants["recall through detect"] = lambda: recall_detect(backend, texts, prefix_file)
        bare_forward(backend, texts[: args.batch_size * 2], args.batch_size)  # warm-up
        best = {name: float("inf") for name in variants}
        for _ in range(args.repeats):
            for name, run in variants.items():
                best[name] = min(best[name], run())
                print(f"  ... {name}: {best[name]:.2f} s", flush=True)
    base = best["bare forward pass"]
    target = {"after the prefix (KV reuse)": 1.3}
    report = {
        "model": args.model,
        "device": str(backend.model.device),
        "torch_threads": torch.get_num_threads(),
        "passages": len(texts),
        "tokens_per_passage": args.tokens,
        "prefix_passages": args.prefix_passages,
        "prefix_tokens": prefix_tokens,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "naive_passages_timed": len(naive),
        "seconds": {k: round(v, 3) for k, v in best.items()},
        "ratio_to_bare": {k: round(v / base, 3) for k, v in best.items()},
        "targets": target,
    }
    print(f"{len(texts)} passages x {args.tokens} tokens after a {prefix_tokens}-token prefix, {args.model} on "
          f"{report['device']}, batch {args.batch_size}, {torch.get_num_threads()} threads")
    for name, seconds in best.items():
        goal = target.get(name)
        verdict = "" if goal is None else f"  (target <= {goal}x: {'met' if seconds / base <= goal else 'MISSED'})"
        print(f"  {name:30s} {seconds:8.2f} s   {seconds / base:5.2f}x{verdict}")
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    main()
