"""topk_loss against loss on the same passages: time, tokens, coverage, agreement, AUC.

WikiMIA passages (the first ``--per-label`` members and non-members of ``--data``), one
model, one thread. Per passage, ``loss`` (one token log-prob request) and ``topk_loss``
(one greedy one-token generation with top-k log-probs per word start) are answered by the
same backend with no response cache, one after the other, the order alternating between
passages so both see the same machine load. Printed and written as JSON: wall and CPU
seconds of each method and their ratio, for llama.cpp the tokens decoded against the sum
of the prompts' tokens (the KV cache reuse between a passage's prompts), coverage (share
of word starts whose first token was among the top k), Pearson and Spearman correlation
of the two scores, and the AUC of each.

    python benchmarks/bench_topk.py --model llamacpp:smollm2-135m-instruct --threads 1 \\
        --out benchmarks/results/topk_loss.json
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

from copyprobe.backends.specs import load_backend  # noqa: E402
from copyprobe.methods.base import Score  # noqa: E402
from copyprobe.registry import make_method  # noqa: E402
from copyprobe.scoring import load_examples  # noqa: E402


def passages(data: str, per_label: int):
    examples, _ = load_examples(data)
    chosen = [e for e in examples if e.label == 1][:per_label] + [e for e in examples if e.label == 0][:per_label]
    return sorted(chosen, key=lambda e: str(e.id))


def timed(backend, method, example) -> tuple[float | Score, float, float, dict]:
    """(score, wall s, CPU s, counters spent) of one method on one passage."""
    before = dict(getattr(backend, "counters", {}))
    wall, cpu = time.perf_counter(), time.process_time()
    responses = backend.answer(method.requests(example))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = getattr(backend, "counters", {})
    return method.score(example, responses), wall, cpu, {k: after[k] - before.get(k, 0) for k in after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llamacpp:smollm2-135m-instruct")
    parser.add_argument("--data", default="wikimia:64")
    parser.add_argument("--per-label", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--max-words", type=int, default=128)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numpy as np
    import torch
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    torch.set_num_threads(args.threads)
    options = {"n_threads": args.threads} if args.model.startswith("llamacpp:") else {
        "device": "cpu", "dtype": "float32"}
    backend = load_backend(args.model, **options)
    examples = passages(args.data, args.per_label)
    loss, topk = make_method("loss"), make_method("topk_loss", k=args.k, max_words=args.max_words)
    load_start = os.getloadavg()
    rows = []
    for i, example in enumerate(examples):
        order = (("loss", loss), ("topk_loss", topk)) if i % 2 == 0 else (("topk_loss", topk), ("loss", loss))
        row = {"id": example.id, "label": example.label, "words": len(example.text.split())}
        for name, method in order:
            score, wall, cpu, spent = timed(backend, method, example)
            row[name] = score.value if isinstance(score, Score) else float(score)
            row[f"{name}_wall_s"], row[f"{name}_cpu_s"] = wall, cpu
            if spent:
                row[f"{name}_tokens"] = spent
            if isinstance(score, Score):
                row["topk_details"] = score.details
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "topk_details"}), flush=True)

    def total(key):
        return float(sum(r[key] for r in rows))

    labels = [r["label"] for r in rows]
    a, b = np.array([r["loss"] for r in rows]), np.array([r["topk_loss"] for r in rows])
    details = [r["topk_details"] for r in rows]
    summary = {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "model": args.model, "threads": args.threads, "data": args.data, "passages": len(rows),
        "k": args.k, "max_words": args.max_words,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "loss_wall_s": total("loss_wall_s"), "topk_wall_s": total("topk_loss_wall_s"),
        "loss_cpu_s": total("loss_cpu_s"), "topk_cpu_s": total("topk_loss_cpu_s"),
        "requests": sum(d["requests"] for d in details),
        "prompt_words": sum(d["prompt_words"] for d in details),
        "coverage_mean": float(np.mean([d["coverage"] for d in details])),
        "coverage_min": float(min(d["coverage"] for d in details)),
        "coverage_all_positions": sum(d["in_top_k"] for d in details) / sum(d["positions"] for d in details),
        "pearson": float(np.corrcoef(a, b)[0, 1]), "spearman": float(spearmanr(a, b).statistic),
        "auc_loss": float(roc_auc_score(labels, a)), "auc_topk_loss": float(roc_auc_score(labels, b)),
    }
    summary["wall_ratio"] = summary["topk_wall_s"] / summary["loss_wall_s"]
    summary["cpu_ratio"] = summary["topk_cpu_s"] / summary["loss_cpu_s"]
    if all("topk_loss_tokens" in r for r in rows):
        spent = {k: sum(r["topk_loss_tokens"][k] for r in rows) for k in rows[0]["topk_loss_tokens"]}
        summary["topk_tokens"] = spent
        summary["loss_tokens"] = {k: sum(r["loss_tokens"][k] for r in rows) for k in rows[0]["loss_tokens"]}
        summary["topk_decoded_share_of_prompt_tokens"] = spent["decoded_tokens"] / spent["prompt_tokens"]
        summary["topk_decoded_per_request"] = spent["decoded_tokens"] / summary["requests"]
    if all("whitespace_only" in d for d in details):
        summary["whitespace_only"] = sum(d["whitespace_only"] for d in details)
    if all("prompt_tokens" in d for d in details):
        summary["prompt_tokens"] = sum(d["prompt_tokens"] for d in details)
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    backend.close()


if __name__ == "__main__":
    main()
