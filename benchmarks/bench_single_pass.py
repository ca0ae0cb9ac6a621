"""How much do the single-pass methods cost over a bare forward pass?

Targets (issue 2): on >= 200 passages of ~128 tokens, the single-pass suite (loss, zlib,
min_k, min_k_pp, slope with n = 0) takes at most 1.15x the time of a bare batched forward
pass of the same model over the same texts; slope with 5-gram normalization at most 3x.

The bare pass uses the same batching as the backend (length-sorted, right-padded batches
of --batch-size) and only computes the logits. Each measurement is repeated and the
fastest kept, alternating the variants so background load hits them alike. No cache.

An exact n-gram score needs every distinct n-token context run through the whole model
on its own (the full-context pass cannot be reused: its states have seen the whole
prefix). The backend computes each shared prefix of those contexts once, so the work is
set by the prefix tree's size; the benchmark prints that size and the multiply-add floor
it implies, 1 + (tree tokens x body + scored tokens x head) / (text tokens x model),
with body = parameters outside the embeddings and LM head.

    python benchmarks/bench_single_pass.py [--passages 200] [--tokens 128] [--batch-size 8]
        [--threads 1 --clock cpu]   # on a busy machine: one thread, CPU seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from copyprobe.files import write_json


def kjv_text() -> str:
    if shutil.which("bible"):
        parts = []
        for book in ("Ge", "Ex", "Le", "Nu", "De", "Jos", "Jg", "Ru"):
            out = subprocess.run(["bible", "-f", f"{book}1:1-{book}10:99"], capture_output=True, text=True)
            parts.append(" ".join(line.split(" ", 1)[1] for line in out.stdout.splitlines() if " " in line))
        text = " ".join(parts)
        if len(text) > 100_000:
            return text
    demo = Path(__file__).resolve().parents[1] / "copyprobe" / "demo" / "demo.jsonl"
    return " ".join(json.loads(line)["text"] for line in demo.read_text().splitlines()) * 20


def passages(tokenizer, n: int, tokens: int) -> list[str]:
    ids = tokenizer(kjv_text(), add_special_tokens=False).input_ids
    out = []
    for start in range(0, len(ids) - tokens, tokens):
        out.append(tokenizer.decode(ids[start : start + tokens]))
        if len(out) == n:
            break
    if len(out) < n:
        raise SystemExit(f"only {len(out)} passages available")
    return out


class Clock:
    """Seconds of wall clock or of this process's CPU (``--clock cpu``: on a busy machine
    a one-thread run's CPU time measures its work; the wall clock also counts waiting)."""

    now = staticmethod(time.perf_counter)

    @classmethod
    def use(cls, kind: str) -> None:
        cls.now = staticmethod(time.process_time if kind == "cpu" else time.perf_counter)


def bare_forward(backend, texts: list[str], batch_size: int) -> float:
    import torch

    tokenizer, model = backend.tokenizer, backend.model
    encoded = sorted((tokenizer(t).input_ids for t in texts), key=len)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    start = Clock.now()
    with torch.inference_mode():
        for i in range(0, len(encoded), batch_size):
            batch = encoded[i : i + batch_size]
            width = max(map(len, batch))
            ids = torch.tensor([b + [pad] * (width - len(b)) for b in batch], device=model.device)
            mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch], device=model.device)
            model(input_ids=ids, attention_mask=mask).logits.float()
    return Clock.now() - start


def suite(backend, texts, methods, params=None) -> float:
    import copyprobe

    start = Clock.now()
    result = copyprobe.detect(backend, texts, methods, params=params, cache=False, blind_baseline=False)
    elapsed = Clock.now() - start
    failed = int(result.scores[methods].isna().any(axis=1).sum())
    if failed:
        raise SystemExit(f"{failed} passages failed to score")
    return elapsed


def ngram_floor(backend, texts: list[str], n: int) -> dict:
    """Size of the n-gram contexts' prefix tree and the multiply-add ratio it implies."""
    lead = list(backend.lead_ids)
    contexts, text_tokens, scored = set(), 0, 0
    for text in texts:
        ids = backend.tokenizer(text).input_ids
        text_tokens += len(ids)
        body_start = len(lead) if ids[: len(lead)] == lead else 0
        for position in range(body_start + n, len(ids)):
            contexts.add(tuple(ids[: body_start]) + tuple(ids[position - n : position]))
            scored += 1
    tree_tokens = sum(len({c[:k] for c in contexts}) for k in range(1, max(map(len, contexts)) + 1))
    head = backend.vocab_size * backend.model.config.get_text_config().hidden_size
    tables = {m.weight.data_ptr(): m.weight.numel()  # tied embeddings count once
              for m in (backend.model.get_input_embeddings(), backend.model.get_output_embeddings())}
    embeddings = sum(tables.values())
    body = sum(p.numel() for p in backend.model.parameters()) - embeddings
    floor = 1 + (tree_tokens * body + scored * head) / (text_tokens * (body + head))
    return {"n": n, "distinct_contexts": len(contexts), "scored_tokens": scored, "prefix_tree_tokens": tree_tokens,
            "flat_context_tokens": len(contexts) * (n + len(lead)), "body_params": body, "head_params": head,
            "multiply_add_floor": round(floor, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this process's CPU seconds (for a busy machine, with --threads 1)")
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    import torch

    from copyprobe.backends.specs import load_backend

    if args.threads:
        torch.set_num_threads(args.threads)
    Clock.use(args.clock)

    backend = load_backend(args.model, batch_size=args.batch_size, device=args.device)
    texts = passages(backend.tokenizer, args.passages, args.tokens)
    single = ["loss", "zlib", "min_k", "min_k_pp", "slope"]
    variants = {
        "bare forward pass": lambda: bare_forward(backend, texts, args.batch_size),
        "single-pass suite": lambda: suite(backend, texts, single),
        "slope, 5-gram normalization": lambda: suite(backend, texts, ["slope"], {"slope": {"ngram": 5}}),
    }
    bare_forward(backend, texts[: args.batch_size * 2], args.batch_size)  # warm-up
    best = {name: float("inf") for name in variants}
    for _ in range(args.repeats):
        for name, run in variants.items():
            best[name] = min(best[name], run())
    base = best["bare forward pass"]
    report = {
        "model": args.model,
        "device": str(backend.model.device),
        "torch_threads": torch.get_num_threads(),
        "clock": args.clock,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "passages": len(texts),
        "tokens_per_passage": args.tokens,
        "batch_size": args.batch_size,
        "seconds": {k: round(v, 3) for k, v in best.items()},
        "ratio_to_bare": {k: round(v / base, 3) for k, v in best.items()},
        "targets": {"single-pass suite": 1.15, "slope, 5-gram normalization": 3.0},
        "ngram": ngram_floor(backend, texts, 5),
    }
    print(f"{len(texts)} passages x {args.tokens} tokens, {args.model} on {report['device']}, batch {args.batch_size}")
    for name, seconds in best.items():
        target = report["targets"].get(name)
        verdict = "" if target is None else f"  (target <= {target}x: {'met' if seconds / base <= target else 'MISSED'})"
        print(f"  {name:30s} {seconds:8.2f} s   {seconds / base:5.2f}x{verdict}")
    g = report["ngram"]
    print(f"  5-gram: {g['distinct_contexts']} distinct contexts, prefix tree {g['prefix_tree_tokens']} tokens "
          f"({g['prefix_tree_tokens'] / g['flat_context_tokens']:.0%} of running each alone); multiply-add floor "
          f"of exact 5-gram slope {g['multiply_add_floor']}x (body {g['body_params'] / 1e6:.0f}M, head {g['head_params'] / 1e6:.0f}M parameters)")
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    main()
