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
  and scaled to all of them;
* ``a context of its own per text`` (with ``--own-contexts``): each passage after the
  passage before it, so no two requests share a context (any caller's per-text
  context; VeilProbe's blocks share theirs among up to 8 texts). Its floor is the bare pass over twice the
  tokens; since issue 41 these run as windows over context + passage, batched, where they
  ran as two forward passes of one row each.

Each variant runs ``--repeats`` times, alternating, and the fastest run is kept.

    python benchmarks/bench_recall.py [--passages 200] [--tokens 128] [--prefix-passages 5]
        [--batch-size 8] [--repeats 1] [--naive 20] [--detect] [--json benchmarks/results/recall.json]
        [--threads 1 --clock cpu]   # on a busy machine: one thread, CPU seconds
        [--own-contexts]            # also each passage after a context of its own

It also prints the multiply-add floor of the prefixed pass against the bare one
(:func:`multiply_add_floor`): the attention over the prefix is work no reuse removes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_single_pass import Clock, bare_forward, passages  # noqa: E402
from timed_cli import code_version  # noqa: E402

from copyprobe.files import write_json  # noqa: E402


def after_prefix(backend, texts: list[str], prefix: str) -> float:
    from copyprobe.backends.base import TokenLogprobsRequest

    start = Clock.now()
    backend.answer([TokenLogprobsRequest(t, context=prefix) for t in texts])
    return Clock.now() - start


def own_contexts(backend, texts: list[str]) -> float:
    """Each text after the one before it (the first after the last): no context shared."""
    from copyprobe.backends.base import TokenLogprobsRequest

    start = Clock.now()
    backend.answer([TokenLogprobsRequest(t, context=c) for c, t in zip(texts[-1:] + texts[:-1], texts)])
    return Clock.now() - start


def recall_detect(backend, texts: list[str], prefix_file: str) -> float:
    import copyprobe

    start = Clock.now()
    result = copyprobe.detect(backend, texts, ["recall"], params={"recall": {"prefix": prefix_file}},
                              cache=False, blind_baseline=False)
    elapsed = Clock.now() - start
    if result.scores["recall"].isna().any():
        raise SystemExit("some passages failed to score")
    return elapsed


def prefix_per_text(backend, texts: list[str], prefix: str, batch_size: int) -> float:
    return bare_forward(backend, [prefix + t for t in texts], batch_size)


def multiply_add_floor(backend, texts: list[str], prefix: str, batch_size: int) -> dict:
    """Multiply-adds of the prefixed pass over those of the bare pass, attention included.

    Per text token: the linear layers (body = parameters outside the embeddings and the LM
    head, plus the head) and, per layer, 2 x heads x head_dim per attended key. With a
    padding mask the attention kernel scores every key of the padded batch: the bare pass
    attends to the batch's width, the prefixed pass to the prefix plus that width. The
    prefix itself runs once per call (its own keys only)."""
    config = backend.model.config.get_text_config()
    heads, layers = config.num_attention_heads, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    head = backend.vocab_size * config.hidden_size
    tables = {m.weight.data_ptr(): m.weight.numel()
              for m in (backend.model.get_input_embeddings(), backend.model.get_output_embeddings())}
    body = sum(p.numel() for p in backend.model.parameters()) - sum(tables.values())
    per_key = layers * 2 * heads * head_dim
    n_prefix = len(backend.tokenizer(prefix).input_ids)
    lengths = sorted((len(backend.tokenizer(t, add_special_tokens=False).input_ids) for t in texts), reverse=True)
    bare = after = 0
    for start in range(0, len(lengths), batch_size):
        batch = lengths[start:start + batch_size]
        width = batch[0]
        for n in batch:
            bare += n * (body + head + per_key * width)
            after += n * (body + head + per_key * (n_prefix + width))
    after += n_prefix * body + per_key * n_prefix * (n_prefix + 1) // 2 + head
    return {"prefix_tokens": n_prefix, "body_params": body, "head_params": head,
            "attention_per_key": per_key, "multiply_add_floor": round(after / bare, 3)}


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
    parser.add_argument("--own-contexts", action="store_true",
                        help="also time each passage after a context of its own (no context shared)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this process's CPU seconds (for a busy machine, with --threads 1)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    import torch

    from copyprobe.backends.specs import load_backend
    from copyprobe.methods.recall import join_prefix

    if args.threads:
        torch.set_num_threads(args.threads)
    Clock.use(args.clock)

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
        if args.own_contexts:
            variants["a context of its own per text"] = lambda: own_contexts(backend, texts)
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
    import copyprobe

    code = Path(copyprobe.__file__).resolve().parents[1]  # PYTHONPATH=<a checkout> times another commit's code
    report = {
        "model": args.model,
        "copyprobe": {"path": str(code), "version": code_version(code)},
        "device": str(backend.model.device),
        "torch_threads": torch.get_num_threads(),
        "clock": args.clock,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
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
        "floor": multiply_add_floor(backend, texts, prefix, args.batch_size),
    }
    print(f"{len(texts)} passages x {args.tokens} tokens after a {prefix_tokens}-token prefix, {args.model} on "
          f"{report['device']}, batch {args.batch_size}, {torch.get_num_threads()} threads")
    for name, seconds in best.items():
        goal = target.get(name)
        verdict = "" if goal is None else f"  (target <= {goal}x: {'met' if seconds / base <= goal else 'MISSED'})"
        print(f"  {name:30s} {seconds:8.2f} s   {seconds / base:5.2f}x{verdict}")
    floor = report["floor"]
    print(f"  multiply-add floor of the prefixed pass: {floor['multiply_add_floor']}x (attention over the "
          f"{floor['prefix_tokens']}-token prefix; body {floor['body_params'] / 1e6:.0f}M, head "
          f"{floor['head_params'] / 1e6:.0f}M parameters)")
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    main()
