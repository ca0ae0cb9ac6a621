"""Cost of the generation-heavy black-box probes (info_probe, veilprobe): where the time
goes, and batched vs one-at-a-time generation with the same outputs (issue 28, item 4).

Runs both probes together (one ``score_examples`` call, as ``copyprobe detect`` does) on
the first ``--passages`` demo passages (famous and fresh alternately), once per
``--batch`` size: 1 is llama.cpp's one-sequence-at-a-time loop (prefix KV reuse from the
previous prompt only), larger sizes its multi-sequence batches. Every backend is timed
per request kind; llama.cpp backends also count the tokens they decode and the ones they
take from the KV cache. Each generation's text is recorded, so the modes are compared
request by request (greedy and seeded sampled outputs must be identical).

    python benchmarks/bench_blackbox_speed.py --passages 40 --batch 1,8 --threads 2 \\
        --reference llamacpp:qwen2.5-coder-0.5b-instruct --out benchmarks/results/blackbox_speed.json

Issue 34's goal is the whole run within 1.3x of the target's own generation time
(``wall_over_target_generation``). A transformers reference (``--reference
smollm2-135m-instruct``, no ``llamacpp:``) runs at ``--reference-dtype`` in batches of
``--reference-batch-size`` texts: bfloat16 is how the proxy's token log-probs get cheap
on a CPU with AVX-512 BF16 (benchmarks/results/blackbox_speed.md). ``--threads`` sets
llama.cpp's and torch's threads; every request kind also records its process CPU time
(``cpu_s``), which a loaded machine inflates less than wall time.

No response cache: every run computes everything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_blackbox import parse_params  # noqa: E402

from copyprobe.data.example import Example  # noqa: E402
from copyprobe.errors import DataError  # noqa: E402
from copyprobe.drive import DriveStats  # noqa: E402
from copyprobe.scoring import build_methods, score_examples  # noqa: E402


def demo_examples(n: int) -> list[Example]:
    """``n`` demo passages, alternating famous and fresh so any prefix is balanced."""
    rows = [json.loads(line) for line in (ROOT / "copyprobe/demo/demo.jsonl").read_text().splitlines() if line]
    famous = [r for r in rows if r["label"] == 1]
    fresh = [r for r in rows if r["label"] == 0]
    mixed = [r for pair in zip(famous, fresh) for r in pair]
    return [Example(id=r["id"], text=r["text"], label=r["label"], doc_id=r["doc_id"]) for r in mixed[:n]]


class Meter:
    """Wraps a backend's ``answer``: seconds, requests and tokens per request kind, and
    every generation's text by request key."""

    def __init__(self, name: str, backend):
        self.name = name
        self.backend = backend
        self.kinds: dict[str, dict] = {}
        self.outputs: dict[str, str] = {}
        inner = backend.answer

        def answer(requests, progress=None, on_result=None):
            t0, c0 = time.perf_counter(), time.process_time()
            results = inner(requests, progress, on_result) if on_result else inner(requests, progress)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            kind = requests[0].kind if requests else "none"
            entry = self.kinds.setdefault(kind, {"calls": 0, "requests": 0, "seconds": 0.0, "cpu_s": 0.0,
                                                 "prompt_tokens": 0, "completion_tokens": 0, "scored_tokens": 0})
            entry["calls"] += 1
            entry["requests"] += len(requests)
            entry["seconds"] += seconds
            entry["cpu_s"] += cpu
            for request, result in zip(requests, results):
                if hasattr(result, "completion_tokens"):
                    entry["prompt_tokens"] += result.prompt_tokens or 0
                    entry["completion_tokens"] += result.completion_tokens or 0
                    self.outputs[repr(request.key())] = result.text
                elif hasattr(result, "token_ids"):
                    entry["scored_tokens"] += len(result.token_ids)
            return results

        backend.answer = answer

    def report(self) -> dict:
        out = {"kinds": {k: {**v, "seconds": round(v["seconds"], 2), "cpu_s": round(v["cpu_s"], 2)}
                         for k, v in self.kinds.items()}}
        counters = getattr(self.backend, "counters", None)
        if counters is not None:
            out["llamacpp"] = dict(counters)
        return out


def run_mode(args, batch: int, examples: list[Example], params: dict) -> dict:
    from copyprobe.backends.specs import load_backend
    from copyprobe.session import Session

    meters: dict[str, Meter] = {}

    def load(spec: str):
        options = {}
        if spec.startswith("llamacpp:"):  # llama.cpp batches generations only when asked
            options = {"parallel": batch, **({"n_threads": args.threads} if args.threads else {})}
        size = batch
        if not spec.startswith(("llamacpp:", "openai:")):  # a transformers reference: length-sorted batches
            options = {"dtype": args.reference_dtype}
            size = args.reference_batch_size
        backend = load_backend(spec, device="cpu", batch_size=size, max_length=args.max_length, **options)
        meters[spec] = Meter(spec, backend)
        return backend

    target = load(args.model)
    session = Session(target, cache=False, loader=load, batch_size=batch, device="cpu")
    methods = [m.resolve(session.target_spec) for m in build_methods(args.methods.split(","), params)]
    for method in methods:  # load the helper models before the clock starts
        for spec in sorted(method.models()):
            session.backend_for(spec)
    stats = DriveStats()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    note = ""
    try:
        rows, _ = score_examples(examples, methods, session.backend_for, stats=stats)
    except DataError as exc:  # too few passages to train veilprobe: the model calls are done
        rows, note = [], f"not scored: {exc}"
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    load1 = os.getloadavg()
    target_generation = meters[args.model].kinds.get("generate", {}).get("seconds", 0.0)
    outputs = {}
    for meter in meters.values():
        outputs.update({f"{meter.name}|{k}": v for k, v in meter.outputs.items()})
    failures = {m.name: [r.get("errors", {}).get(m.name, "")[:120] for r in rows if r.get(m.name) is None]
                for m in methods}
    session.close()
    for meter in meters.values():
        meter.backend.close()
    return {
        "batch": batch,
        "wall_s": round(wall, 1),
        "cpu_s": round((cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime), 1),
        "target_generation_s": round(target_generation, 1),
        # the goal (issue 34): the whole run within 1.3x of the target's own generation
        "wall_over_target_generation": round(wall / target_generation, 3) if target_generation else None,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in load1],
        "rounds": stats.rounds,
        "requests_unique": stats.by_model_kind,
        "models": {name: meter.report() for name, meter in meters.items()},
        "failures": failures,
        "note": note,
        "n_generations": len(outputs),
        "generations_sha256": hashlib.sha256(json.dumps(sorted(outputs.items())).encode()).hexdigest(),
        "_outputs": outputs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llamacpp:qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--reference", default=None,
                        help="reference/proxy/substituter model of both probes (default: the methods' auto)")
    parser.add_argument("--methods", default="info_probe,veilprobe")
    parser.add_argument("--param", action="append", default=[], help="method.key=value")
    parser.add_argument("--passages", type=int, default=4)
    parser.add_argument("--batch", default="1,8", help="comma list of batch sizes to run, in this order")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp and torch threads")
    parser.add_argument("--reference-dtype", default="auto",
                        help="dtype of a transformers reference model (e.g. bfloat16; llama.cpp ones ignore it)")
    parser.add_argument("--reference-batch-size", type=int, default=16,
                        help="texts per forward pass of a transformers reference model")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--out", default=None, help="write the JSON result here")
    args = parser.parse_args()

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    examples = demo_examples(args.passages)
    params = parse_params(args.param)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.reference:
        for name in names:
            params.setdefault(name, {}).setdefault("reference", args.reference)
    if "veilprobe" in names:
        # a trained method needs rows left to evaluate: train on half at most
        params.setdefault("veilprobe", {}).setdefault("n_train", max(4, min(50, len(examples) // 2)))
    modes = []
    for batch in [int(b) for b in args.batch.split(",")]:
        result = run_mode(args, batch, examples, params)
        modes.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "_outputs"}), flush=True)
    base = modes[0]["_outputs"]
    for mode in modes[1:]:
        other = mode["_outputs"]
        mode["same_generations_as_first"] = sum(1 for k in base if other.get(k) == base[k])
        mode["different_generations"] = [k[:160] for k in base if other.get(k) != base[k]][:10]
        mode["speedup_vs_first"] = round(modes[0]["wall_s"] / mode["wall_s"], 2) if mode["wall_s"] else None
        mode["cpu_ratio_vs_first"] = round(modes[0]["cpu_s"] / mode["cpu_s"], 2) if mode["cpu_s"] else None
        print(json.dumps({k: mode[k] for k in ("batch", "same_generations_as_first", "different_generations",
                                                "speedup_vs_first", "cpu_ratio_vs_first")}), flush=True)
    record = {
        "command": "python benchmarks/bench_blackbox_speed.py " + " ".join(sys.argv[1:]),
        "model": args.model, "methods": names, "params": params, "passages": [e.id for e in examples],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared)",
        "modes": [{k: v for k, v in m.items() if k != "_outputs"} for m in modes],
    }
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
