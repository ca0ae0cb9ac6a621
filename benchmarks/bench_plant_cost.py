#!/usr/bin/env python
"""What a diluted plant costs: training tokens per second of `copyprobe plant` with a
background, on the one_voice letters split by document, for SmolLM2-135M (full
fine-tuning) and Qwen2.5-Coder-0.5B-Instruct (LoRA), and from that the minutes per epoch
at dilution 1x / 10x / 100x and member repeats 1 / 4 (sizing the exposure grid).

Each model trains ``--max-steps`` steps (batch 4, passages of 128 tokens, ``--no-eval``)
on the CPU with ``--threads`` torch threads; tokens per second is the sum of the
``tokens`` of train_log.jsonl over the sum of its ``seconds`` (forward, backward and
optimizer step), leaving out the first step (allocation warm-up); tokens per CPU-second
divides by the training thread's CPU time of the same steps instead (what an idle core
would give: on a shared machine the wall clock also counts waiting for a core). The
epoch estimate is (repeats + dilution) x the unique member tokens the plant recorded, at
each speed. The machine's load (``uptime``) is written beside the numbers.

    python scripts/build_background.py /tmp/kjv.txt
    OMP_NUM_THREADS=1 python benchmarks/bench_plant_cost.py --background /tmp/kjv.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "benchmarks" / "data" / "one_voice" / "letters"
MODELS = {  # name -> (lora, lr)
    "smollm2-135m-instruct": (False, 5e-5),
    "qwen2.5-coder-0.5b-instruct": (True, 1e-3),
}
DILUTIONS = (1, 10, 100)
REPEATS = (1, 4)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def measure(model: str, background: str, work: Path, max_steps: int, dilution: float) -> dict:
    from copyprobe.plant import finetune
    from copyprobe.plant.finetune import PlantSettings, plant

    lora, lr = MODELS[model]
    out = work / model
    cpu: list[float] = []  # the training thread's CPU seconds per step: what the step costs on an idle core
    real_step = finetune._train_step

    def timed_step(*a, **k):
        start = time.thread_time()
        loss = real_step(*a, **k)
        cpu.append(time.thread_time() - start)
        return loss

    finetune._train_step = timed_step
    before = uptime()
    try:
        record = plant(PlantSettings(model=model, corpus=str(LETTERS), out=str(out), split_by="document", lora=lora,
                                 lr=lr, background=background, dilution=dilution, max_steps=max_steps,
                                 device="cpu", eval_loss=False, progress=False, force=True), log=lambda m: None)
    finally:
        finetune._train_step = real_step
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    timed = log[1:] or log
    tokens_per_s = sum(e["tokens"] for e in timed) / sum(e["seconds"] for e in timed)
    tokens_per_cpu_s = sum(e["tokens"] for e in timed) / sum(cpu[1:] or cpu)
    member_tokens = record["exposure"]["member_tokens_unique"]
    return {
        "model": model, "method": "lora" if lora else "full", "steps": len(log),
        "step_seconds": [e["seconds"] for e in log], "step_tokens": [e["tokens"] for e in log],
        "median_step_s": statistics.median(e["seconds"] for e in timed),
        "peak_rss_gib": round(record["peak_memory"]["max_rss_bytes"] / 2**30, 2),
        "tokens_per_s": round(tokens_per_s, 1), "tokens_per_cpu_s": round(tokens_per_cpu_s, 1),
        "step_cpu_seconds": [round(c, 3) for c in cpu], "member_tokens": member_tokens,
        "member_passages": record["exposure"]["member_passages"], "load_s": record["timings"]["load_s"],
        "minutes_per_epoch": {f"{d}x_r{k}": round((k + d) * member_tokens / tokens_per_s / 60, 1)
                              for d in DILUTIONS for k in REPEATS},
        "cpu_minutes_per_epoch": {f"{d}x_r{k}": round((k + d) * member_tokens / tokens_per_cpu_s / 60, 1)
                                  for d in DILUTIONS for k in REPEATS},
        "uptime_before": before, "uptime_after": uptime(),
    }


def markdown(results: list[dict], command: str, threads: int) -> str:
    lines = ["# Cost of a diluted plant (CPU)", "", f"Command: `{command}`", "",
             f"torch threads: {threads}; corpus: the 24 one_voice letters split by document (12 member letters), "
             "passages of 128 tokens, batch 4; background: the KJV (scripts/build_background.py).", "",
             "| model | method | tokens/s (wall) | tokens per CPU-second | median s/step | unique member tokens "
             "| peak RSS GiB | load (uptime before / after) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['model']} | {r['method']} | {r['tokens_per_s']} | {r['tokens_per_cpu_s']} | "
                     f"{r['median_step_s']:.1f} | "
                     f"{r['member_tokens']} | {r['peak_rss_gib']} | {r['uptime_before'].split('load average:')[-1].strip()} / "
                     f"{r['uptime_after'].split('load average:')[-1].strip()} |")
    lines += ["", "Minutes per epoch, (repeats + dilution) x member tokens at the wall-clock speed above "
              "(in brackets: at the CPU-second speed, i.e. on an idle core):", "",
              "| model | " + " | ".join(f"{d}x, repeats {k}" for d in DILUTIONS for k in REPEATS) + " |",
              "|---|" + "---|" * (len(DILUTIONS) * len(REPEATS))]
    for r in results:
        lines.append(f"| {r['model']} | " + " | ".join(
            f"{r['minutes_per_epoch'][f'{d}x_r{k}']} ({r['cpu_minutes_per_epoch'][f'{d}x_r{k}']})"
            for d in DILUTIONS for k in REPEATS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--background", required=True, help="background text (e.g. the KJV of build_background.py)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--max-steps", type=int, default=10, help="training steps per model (default 10)")
    parser.add_argument("--dilution", type=float, default=10, help="dilution of the measured plant (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results"), help="directory for plant_cost.*")
    parser.add_argument("--child", metavar="JSON", help=argparse.SUPPRESS)  # measure one model, write JSON there
    args = parser.parse_args(argv)

    if args.child:
        sys.path.insert(0, str(ROOT))
        import torch

        torch.set_num_threads(args.threads)
        with tempfile.TemporaryDirectory(prefix="plant-cost-") as work:
            result = measure(args.models, args.background, Path(work), args.max_steps, args.dilution)
        Path(args.child).write_text(json.dumps(result))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="plant-cost-") as work:
        for model in args.models.split(","):
            # one process per model: its memory and threads are its own
            child = Path(work) / f"{model}.json"
            subprocess.run([sys.executable, __file__, "--background", args.background, "--models", model,
                            "--max-steps", str(args.max_steps), "--dilution", str(args.dilution),
                            "--threads", str(args.threads), "--child", str(child)], check=True)
            results.append(json.loads(child.read_text()))
            print(json.dumps({k: v for k, v in results[-1].items()
                              if k not in ("step_seconds", "step_tokens", "step_cpu_seconds")}),
                  flush=True)
    command = "OMP_NUM_THREADS={} python benchmarks/bench_plant_cost.py {}".format(
        os.environ.get("OMP_NUM_THREADS", "?"), " ".join(sys.argv[1:] if argv is None else argv))
    text = markdown(results, command, args.threads)
    results_dir = Path(args.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "plant_cost.md").write_text(text)
    (results_dir / "plant_cost.json").write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
