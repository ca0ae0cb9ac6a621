"""A warm detect with every answer already in the response cache (issue 41): the 5 logit
methods on bench_gpu.py's ``micro`` random Llama (CPU), once to fill the cache, then
``--repeats`` times reading it. What is left is the cache's reads, decoding the answers,
the driver, the methods and derive: a re-run with the same texts, or more methods, pays it.

    python benchmarks/bench_cache_hits.py                     # this checkout
    python benchmarks/bench_cache_hits.py --root /tmp/old     # another commit's copyprobe (a worktree)

Prints each call's seconds and the least per 1,000 passages; ``--json`` adds a block under
``--label`` to a results file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# this checkout's (the script's directory): before --root's checkout comes first on the path
from timed_cli import add_block, add_checkout_option, code_version, use_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout_option(parser)
    parser.add_argument("--passages", default="wikimia")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="results file to add this run's block to")
    parser.add_argument("--label", default=None, help="the block's name in --json (default: the commit)")
    args = parser.parse_args()
    use_checkout(args.root)
    import bench_gpu as B  # noqa: E402 - the chosen checkout's
    import torch

    import copyprobe

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        directory = B.random_model_dir("micro", torch.float32, Path(tmp))
        backend = B.make_backend(f"hf:{directory}", "cpu", "float32", 32)
        examples = B.load_texts(args.passages)
        cache = str(Path(tmp) / "cache.sqlite")
        B.detect_pass(backend, examples, cache, B.LOGIT_METHODS)  # every answer into the cache
        seconds = [B.detect_pass(backend, examples, cache, B.LOGIT_METHODS)[0].wall for _ in range(args.repeats)]
    commit = code_version(Path(copyprobe.__file__).resolve().parents[1])
    per_1000 = min(seconds) / len(examples) * 1e6
    print(f"copyprobe {commit} ({copyprobe.__file__}), {len(examples)} passages, every answer cached: "
          f"detect {', '.join(f'{s:.3f}' for s in seconds)} s; least {per_1000:.1f} ms per 1,000 passages")
    if args.json:
        add_block(Path(args.json), args.label or commit, {
            "commit": commit, "passages": len(examples), "seconds": seconds, "least_ms_per_1000": round(per_1000, 1),
            "machine": B.machine("cpu"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": ["python", "benchmarks/bench_cache_hits.py", *sys.argv[1:]]})


if __name__ == "__main__":
    main()
