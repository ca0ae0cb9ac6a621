"""The response cache's cost in one warm ``detect`` (issue 41), this commit's CachedBackend
against another commit's, interleaved round by round in one process so that the machine's
drift hits both alike: the same backend (bench_gpu.py's random Llama on CPU, one torch
thread), the 5 logit methods, a fresh cache file per run, and a run without the cache.

    python benchmarks/bench_cache_ab.py --old b81b8c9 --rounds 10 --stand-in

``--stand-in``: bench_stages.py's stand-in for the LM head's statistics (the host's work
without the CPU's vocabulary pass, as a GPU would leave it). Prints seconds per variant
(least, median) and the paired difference old - new per round; ``--json`` keeps them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu as B  # noqa: E402
from timed_cli import code_version  # noqa: E402


def cache_module_of(commit: str, directory: Path):
    """copyprobe/backends/cache.py as it was at ``commit``, loaded as a module of its own."""
    source = subprocess.run(["git", "show", f"{commit}:copyprobe/backends/cache.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = directory / f"cache_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"cache_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the commit whose CachedBackend to compare with")
    parser.add_argument("--params", default="micro", choices=sorted(B.PRESETS))
    parser.add_argument("--passages", default="wikimia")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--stand-in", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    import copyprobe
    from copyprobe.backends import cache

    torch.set_num_threads(1)
    if args.stand_in:
        import bench_stages

        bench_stages.stand_in_statistics()
    methods = ("answer", "_answer_chunk")  # the path a run takes through the cache
    new = {name: getattr(cache.CachedBackend, name) for name in methods}
    results: dict[str, list[float]] = {"old": [], "new": [], "no cache": []}
    with tempfile.TemporaryDirectory() as tmp:
        old_module = cache_module_of(args.old, Path(tmp))
        old = {name: getattr(old_module.CachedBackend, name) for name in methods}
        directory = B.random_model_dir(args.params, torch.float32, Path(tmp))
        backend = B.make_backend(f"hf:{directory}", "cpu", "float32", args.batch_size)
        examples = B.load_texts(args.passages)
        B.detect_pass(backend, examples[:64], str(Path(tmp) / "warm.sqlite"))
        try:
            for round_ in range(args.rounds):
                for variant in results:
                    if variant == "no cache":
                        timer, _ = B.detect_pass(backend, examples, False)
                    else:
                        for name, function in (old if variant == "old" else new).items():
                            setattr(cache.CachedBackend, name, function)
                        timer, _ = B.detect_pass(backend, examples, str(Path(tmp) / f"{variant}-{round_}.sqlite"))
                    results[variant].append(timer.wall)
        finally:
            for name, function in new.items():
                setattr(cache.CachedBackend, name, function)
    commit = code_version(Path(copyprobe.__file__).resolve().parents[1])  # the copyprobe this run imported
    print(f"{len(examples)} passages, {args.params}, batch {args.batch_size}, {args.rounds} rounds; "
          f"old = {args.old}, new = {commit}; seconds per detect")
    for variant, values in results.items():
        print(f"  {variant:8s} least {min(values):.3f}  median {statistics.median(values):.3f}  "
              + " ".join(f"{v:.2f}" for v in values))
    paired = [o - n for o, n in zip(results["old"], results["new"])]
    print(f"  old - new per round: median {statistics.median(paired):+.3f}  " + " ".join(f"{v:+.2f}" for v in paired))
    if args.json:
        Path(args.json).write_text(json.dumps({"old": args.old, "new": commit, "passages": len(examples),
                                               "params": args.params, "stand_in": args.stand_in,
                                               "seconds": results, "command": sys.argv}, indent=1) + "\n")


if __name__ == "__main__":
    main()
