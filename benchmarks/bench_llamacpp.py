"""HF (transformers, de-quantized float32) vs llama.cpp (quantized, in process) on the same
GGUF file: load time, scoring tokens/s, generation tokens/s, and how far apart the scores
are (the quantized matmuls' and the f16 KV cache's rounding).

Scoring: token log-probs with mu/sigma/rank of the first ``--passages`` demo passages.
Generation: greedy continuations of ``--gen-prompts`` demo passage starts, ``--gen-tokens``
tokens each (an end-of-text token may stop one early; tokens/s counts what was generated).
Both backends get the same number of threads. No response cache.

    flock /work/heavy.lock python benchmarks/bench_llamacpp.py \
        --model qwen2.5-coder-0.5b-instruct --threads 2 --out benchmarks/results/llamacpp.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.backends.base import GenerateRequest, TokenLogprobsRequest  # noqa: E402
from copyprobe.files import atomic_write, read_json, write_json  # noqa: E402


def demo_texts() -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "copyprobe/demo/demo.jsonl").read_text().splitlines() if line]
    return [row["text"] for row in rows]


def measure(backend, texts, prompts, gen_tokens):
    t0 = time.perf_counter()
    scored = backend.answer([TokenLogprobsRequest(t, stats=True) for t in texts])
    score_s = time.perf_counter() - t0
    tokens = sum(len(s.token_ids) for s in scored)
    t0 = time.perf_counter()
    gens = backend.answer([GenerateRequest(prompt=p, max_tokens=gen_tokens) for p in prompts])
    gen_s = time.perf_counter() - t0
    generated = sum(g.completion_tokens or 0 for g in gens)
    return scored, gens, {"score_tokens": tokens, "score_s": round(score_s, 2),
                          "score_tok_per_s": round(tokens / score_s, 1),
                          "gen_tokens": generated, "gen_s": round(gen_s, 2),
                          "gen_tok_per_s": round(generated / gen_s, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="alias or GGUF file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passages", type=int, default=6)
    parser.add_argument("--gen-prompts", type=int, default=2)
    parser.add_argument("--gen-tokens", type=int, default=32)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/llamacpp.json"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from copyprobe.backends.specs import load_backend

    texts = demo_texts()[:args.passages]
    prompts = [" ".join(t.split()[:24]) for t in demo_texts()[-args.gen_prompts:]]
    spec = args.model if args.model.endswith(".gguf") is False else f"gguf:{args.model}"
    results = {}
    outputs = {}
    for name, load in [
        ("llamacpp", lambda: load_backend(f"llamacpp:{args.model}", n_threads=args.threads)),
        ("hf", lambda: load_backend(spec, device="cpu", dtype="float32", batch_size=4)),
    ]:
        t0 = time.perf_counter()
        backend = load()
        load_s = time.perf_counter() - t0
        scored, gens, numbers = measure(backend, texts, prompts, args.gen_tokens)
        numbers["load_s"] = round(load_s, 1)
        results[name] = numbers
        outputs[name] = (scored, gens)
        print(name, json.dumps(numbers), flush=True)
        backend.close()
        del backend

    diffs = {"logprobs": [], "mu": [], "sigma": []}
    top1_agree = top1_total = 0
    for a, b in zip(outputs["llamacpp"][0], outputs["hf"][0]):
        assert a.token_ids == b.token_ids, "the two backends tokenized a passage differently"
        for key in diffs:
            diffs[key] += [abs(x - y) for x, y in zip(getattr(a, key), getattr(b, key))]
        for ra, rb in zip(a.rank, b.rank):
            if ra == 1 or rb == 1:
                top1_total += 1
                top1_agree += ra == rb
    agreement = {key: {"max": round(max(v), 4), "mean": round(sum(v) / len(v), 4)} for key, v in diffs.items()}
    agreement["positions"] = len(diffs["logprobs"])
    agreement["rank1_agreement"] = round(top1_agree / max(top1_total, 1), 3)
    agreement["same_greedy_text"] = [x.text == y.text for x, y in zip(outputs["llamacpp"][1], outputs["hf"][1])]
    ratio = {"score": round(results["llamacpp"]["score_tok_per_s"] / results["hf"]["score_tok_per_s"], 2),
             "generate": round(results["llamacpp"]["gen_tok_per_s"] / results["hf"]["gen_tok_per_s"], 2)}
    command = "python benchmarks/bench_llamacpp.py " + " ".join(sys.argv[1:])
    record = {"model": args.model, "threads": args.threads, "results": results, "speedup_llamacpp_over_hf": ratio,
              "agreement": agreement, "command": command,
              "machine": f"{platform.machine()}, {os.cpu_count()} cpus shared with other jobs"}
    print(json.dumps({"speedup": ratio, "agreement": agreement}), flush=True)
    out = Path(args.out)
    old = read_json(out, required=False) or {"runs": []}
    runs = [r for r in old["runs"] if (r["model"], r["threads"]) != (args.model, args.threads)] + [record]
    write_json(out, {"runs": runs})
    lines = ["# llama.cpp vs transformers on the same GGUF (issue 18)", "",
             "Scoring: token log-probs + mu/sigma/rank of demo passages; generation: greedy, no cache.",
             "HF runs the de-quantized float32 weights; llama.cpp the Q4_K_M/Q4_1 blocks with an f16 KV cache.", "",
             "| model | threads | backend | load s | score tok/s | generate tok/s |", "|---|---|---|---|---|---|"]
    for r in runs:
        for name in ("llamacpp", "hf"):
            n = r["results"][name]
            lines.append(f"| {r['model']} | {r['threads']} | {name} | {n['load_s']} | {n['score_tok_per_s']} "
                         f"| {n['gen_tok_per_s']} |")
    lines += ["", "| model | llama.cpp/HF scoring | llama.cpp/HF generation | log p abs diff max / mean "
              "| mu diff max / mean | rank-1 agreement | same greedy text |", "|---|---|---|---|---|---|---|"]
    for r in runs:
        a = r["agreement"]
        lines.append(f"| {r['model']} | {r['speedup_llamacpp_over_hf']['score']}x "
                     f"| {r['speedup_llamacpp_over_hf']['generate']}x "
                     f"| {a['logprobs']['max']} / {a['logprobs']['mean']} | {a['mu']['max']} / {a['mu']['mean']} "
                     f"| {a['rank1_agreement']} | {a['same_greedy_text']} |")
    lines += ["", "Commands (machine: " + record["machine"] + "):", ""]
    lines += [f"    flock /work/heavy.lock {r['command']}" for r in runs]
    atomic_write(out.with_suffix(".md"), "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
