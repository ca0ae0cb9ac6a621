"""A model directory's first load (its weights' hash not yet remembered): copyprobe's
``load_backend`` (model, tokenizer, weights fingerprint) against ``from_pretrained`` plus
the tokenizer, each in a fresh process with an empty ``COPYPROBE_CACHE_DIR``, alternating.
``--tree DIR`` adds the same load from another checkout (the code before a change).

    python benchmarks/bench_first_load.py --params 135M --repeats 3 --tree /tmp/before

Prints JSON: every run's (wall s, CPU s) and the best of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(tree: str, what: str, directory: str) -> None:
    sys.path.insert(0, tree)
    import torch
    import transformers  # noqa: F401 - imports are not what is measured

    import copyprobe.backends.specs

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    wall, cpu = time.perf_counter(), time.process_time()
    if what == "copyprobe":
        backend = copyprobe.backends.specs.load_backend(f"hf:{directory}", device="cpu", dtype="float32")
        _ = backend.fingerprint
    else:
        AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
        AutoTokenizer.from_pretrained(directory)
    print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="135M")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree", help="another checkout whose load_backend is timed too")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch

    import bench_gpu as B

    directory = B.random_model_dir(args.params, torch.float32, Path(tempfile.mkdtemp()))
    variants = [("this tree", str(ROOT), "copyprobe"), ("from_pretrained", str(ROOT), "hf")]
    if args.tree:
        variants.insert(0, ("other tree", args.tree, "copyprobe"))
    runs: dict[str, list] = {name: [] for name, _, _ in variants}
    for _ in range(args.repeats):
        for name, tree, what in variants:
            env = dict(os.environ, COPYPROBE_CACHE_DIR=tempfile.mkdtemp(), PYTHONPATH=tree)
            out = subprocess.run([sys.executable, __file__, "--child", tree, what, str(directory)], env=env,
                                 capture_output=True, text=True, check=True)
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(name, runs[name][-1], file=sys.stderr, flush=True)
    print(json.dumps({"params": args.params, "dir_bytes": sum(f.stat().st_size for f in directory.iterdir()),
                      "loadavg": os.getloadavg(), "runs_wall_cpu_s": runs,
                      "best_wall": {k: min(r[0] for r in v) for k, v in runs.items()},
                      "best_cpu": {k: min(r[1] for r in v) for k, v in runs.items()}}))


if __name__ == "__main__":
    main()
