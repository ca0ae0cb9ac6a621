"""CUDA float32 against CPU float32 (issue 41): the same random-weight model and texts scored on
both devices, every logit method's scores and the answers they come from compared.

    python benchmarks/bench_device_equality.py                      # needs a CUDA device
    python benchmarks/bench_device_equality.py --params 135M --passages 64

A random-weight Llama of ``--params`` size with SmolLM2's tokenizer (bench_gpu.py's, written
once and loaded twice), float32 on both devices, the 5 logit methods of bench_gpu.py without
the cache. Prints, per method, the largest absolute and relative difference of the scores,
and per statistic of the token answers (log p, mu, sigma) the largest absolute difference and
how many ranks differ; the issue's bar is 1e-5 on every method's score. Writes
``benchmarks/results/device_equality.json`` (``--json``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu as B  # noqa: E402

BAR = 1e-5


def answers(backend, texts: list[str]) -> list:
    from copyprobe.backends.base import TokenLogprobsRequest

    return backend.answer([TokenLogprobsRequest(text, stats=True) for text in texts])


def compare(args) -> dict:
    import numpy as np
    import torch

    import copyprobe

    with tempfile.TemporaryDirectory() as tmp:
        directory = B.random_model_dir(args.params, torch.float32, Path(tmp))
        examples = B.load_texts(args.passages)
        texts = [e.text for e in examples]
        scores, tokens = {}, {}
        for device in ("cpu", args.device):
            backend = B.make_backend(f"hf:{directory}", device, "float32", args.batch_size)
            result = copyprobe.detect(backend, examples, B.LOGIT_METHODS, cache=False, blind_baseline=False)
            scores[device] = result.scores
            tokens[device] = answers(backend, texts)
            del backend
    cpu, gpu = scores["cpu"], scores[args.device]
    methods = {}
    for name in B.LOGIT_METHODS:
        a, b = cpu[name].to_numpy(dtype=float), gpu[name].to_numpy(dtype=float)
        diff = np.abs(a - b)
        methods[name] = {"max_abs": float(diff.max()), "max_rel": float((diff / np.maximum(np.abs(a), 1e-12)).max()),
                         "within_bar": bool(diff.max() <= BAR)}
    stats = {}
    for name in ("logprobs", "mu", "sigma"):
        diffs = [np.abs(np.asarray(getattr(x, name)) - np.asarray(getattr(y, name))).max(initial=0.0)
                 for x, y in zip(tokens["cpu"], tokens[args.device])]
        stats[name] = {"max_abs": float(max(diffs))}
    ranks = [(np.asarray(x.rank) != np.asarray(y.rank)).sum() for x, y in zip(tokens["cpu"], tokens[args.device])]
    total = sum(len(x.rank) for x in tokens["cpu"])
    stats["rank"] = {"differ": int(sum(ranks)), "of": int(total)}
    return {"methods": methods, "token_stats": stats, "passages": len(texts), "params": args.params,
            "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32), "bar": BAR,
            "machine": B.machine(args.device), "command": ["python", "benchmarks/bench_device_equality.py", *sys.argv[1:]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="135M", choices=sorted(B.PRESETS))
    parser.add_argument("--passages", default="64")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cuda", help="the device compared with the CPU")
    parser.add_argument("--tokenizer", help="the random model's tokenizer, a model spec (as bench_gpu.py's)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "device_equality.json"))
    args = parser.parse_args()
    if args.tokenizer:
        import os

        os.environ["BENCH_TOKENIZER"] = args.tokenizer
    report = compare(args)
    from copyprobe.files import write_json

    write_json(Path(args.json), report)
    gpu = report["machine"].get("gpu", args.device)
    print(f"random-weight Llama {args.params}, float32, {report['passages']} passages: CPU against {gpu} "
          f"(TF32 matmul {'on' if report['tf32_matmul'] else 'off'})")
    for name, row in report["methods"].items():
        print(f"  {name:9s} max |diff| {row['max_abs']:.2e}  max rel {row['max_rel']:.2e}  "
              f"{'within' if row['within_bar'] else 'OVER'} {BAR:g}")
    for name, row in report["token_stats"].items():
        print(f"  token {name:8s} " + ", ".join(f"{k} {v:.2e}" if isinstance(v, float) else f"{k} {v}"
                                                for k, v in row.items()))
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
