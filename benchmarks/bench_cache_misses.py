"""What writing a run's answers into the response cache costs a warm detect (issue 41):
the 5 logit methods on bench_gpu.py's ``micro`` random Llama (CPU) with bench_stages.py's
stand-in statistics, so that the forward pass costs little and the host's work shows, as
on a GPU. Each repeat runs the same detect twice, without the cache and with a new cache
file (every answer a miss, written by the cache's writer thread), in turn, so that both
see the same machine. The difference is what the cache costs the run: its lookups, and
what its writer thread takes from the thread that queues the device's work.

    python benchmarks/bench_cache_misses.py                     # this checkout
    python benchmarks/bench_cache_misses.py --root /tmp/old     # another commit's copyprobe (a worktree)

Prints the least and the median of each, and their differences, per 1,000 passages;
``--json`` adds a block under ``--label`` to a results file. On a shared machine the
medians move by tens of milliseconds between runs: run two commits in turn, several times.

Also the time from the detect call's start to its first forward pass (``before the first
forward``) and from the end of its last forward pass to the call's end (``after the last
forward``), least of the repeats: the host's work a GPU waits for, which the cache's
look-ups, last commit and close add to; they move far less between runs than the whole call.
And, per run with the cache, the file's close (``ResponseCache._close_now`` where the
checkout has it, else ``close``: SQLite's last checkpoint) and what the run waited at
``ResponseCache.close`` (the same time where the close is not begun on a thread), in ms
per run, least and median.
"""

from __future__ import annotations

import argparse
import statistics
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
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--json", default=None, help="results file to add this run's block to")
    parser.add_argument("--label", default=None, help="the block's name in --json (default: the commit)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    use_checkout(args.root)
    import bench_gpu as B  # noqa: E402 - the chosen checkout's
    import bench_stages
    import torch

    import copyprobe

    torch.set_num_threads(1)
    bench_stages.stand_in_statistics()
    from copyprobe.backends.hf.backend import HFBackend

    seconds: dict[str, list[float]] = {"no cache": [], "cache": []}
    before_first: dict[str, list[float]] = {"no cache": [], "cache": []}
    after_last: dict[str, list[float]] = {"no cache": [], "cache": []}
    first_forward: list[float] = []  # perf_counter at the first forward pass of the call
    last_forward: list[float] = [0.0]  # perf_counter at the end of the latest forward pass
    real_hidden = HFBackend._hidden

    def hidden(self, *args, **kwargs):
        if not first_forward:
            first_forward.append(time.perf_counter())
        try:
            return real_hidden(self, *args, **kwargs)
        finally:
            last_forward[0] = time.perf_counter()

    HFBackend._hidden = hidden
    from copyprobe.backends.cache import ResponseCache

    closing: dict[str, list[float]] = {"closing the file": [], "the run waited at close": []}
    this_run: dict[str, float] = {}

    def timed(real, name: str):
        def wrapper(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return real(self, *args, **kwargs)
            finally:
                this_run[name] = this_run.get(name, 0.0) + time.perf_counter() - start
        return wrapper

    ResponseCache.close = timed(ResponseCache.close, "the run waited at close")
    if hasattr(ResponseCache, "_close_now"):  # since b978a43; before, close is all of the file's close
        ResponseCache._close_now = timed(ResponseCache._close_now, "closing the file")
    with tempfile.TemporaryDirectory() as tmp:
        directory = B.random_model_dir("micro", torch.float32, Path(tmp))
        backend = B.make_backend(f"hf:{directory}", "cpu", "float32", 32)
        examples = B.load_texts(args.passages)

        def detect(cache, name: str | None = None) -> None:
            first_forward.clear()
            this_run.clear()
            start = time.perf_counter()
            wall = B.detect_pass(backend, examples, cache, B.LOGIT_METHODS)[0].wall
            end = time.perf_counter()
            if name is not None:
                seconds[name].append(wall)
                before_first[name].append(first_forward[0] - start)
                after_last[name].append(end - last_forward[0])
            if name == "cache":
                waited = this_run.get("the run waited at close", 0.0)
                closing["the run waited at close"].append(waited)
                closing["closing the file"].append(this_run.get("closing the file", waited))

        detect(False), detect(str(Path(tmp) / "warm-up.sqlite"))
        for i in range(args.repeats):
            detect(False, "no cache")
            detect(str(Path(tmp) / f"cache-{i}.sqlite"), "cache")
    commit = code_version(Path(copyprobe.__file__).resolve().parents[1])
    per = 1e6 / len(examples)  # seconds -> ms per 1,000 passages
    least = {name: min(values) * per for name, values in seconds.items()}
    median = {name: statistics.median(values) * per for name, values in seconds.items()}
    cost = {"least": least["cache"] - least["no cache"], "median": median["cache"] - median["no cache"]}
    first = {name: min(values) * per for name, values in before_first.items()}
    last = {name: min(values) * per for name, values in after_last.items()}
    print(f"copyprobe {commit} ({copyprobe.__file__}), {len(examples)} passages, {args.repeats} repeats; "
          "ms per 1,000 passages")
    for name in seconds:
        print(f"  {name:9s} least {least[name]:7.1f}   median {median[name]:7.1f}")
    print(f"  the cache costs: least {cost['least']:.1f}, median {cost['median']:.1f}")
    print(f"  before the first forward (least): no cache {first['no cache']:.1f}, cache {first['cache']:.1f}, "
          f"the cache adds {first['cache'] - first['no cache']:.1f}")
    print(f"  after the last forward (least): no cache {last['no cache']:.1f}, cache {last['cache']:.1f}, "
          f"the cache adds {last['cache'] - last['no cache']:.1f}")
    for name, values in closing.items():
        print(f"  {name} (ms a run): least {min(values) * 1000:.2f}, median {statistics.median(values) * 1000:.2f}")
    if args.json:
        add_block(Path(args.json), args.label or commit, {
            "commit": commit, "passages": len(examples), "seconds": seconds,
            "least_ms_per_1000": {k: round(v, 1) for k, v in least.items()},
            "median_ms_per_1000": {k: round(v, 1) for k, v in median.items()},
            "cache_cost_ms_per_1000": {k: round(v, 1) for k, v in cost.items()},
            "before_first_forward_s": before_first,
            "before_first_forward_least_ms_per_1000": {k: round(v, 1) for k, v in first.items()},
            "after_last_forward_s": after_last,
            "after_last_forward_least_ms_per_1000": {k: round(v, 1) for k, v in last.items()},
            "closing_s": closing,
            "machine": B.machine("cpu"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": ["python", "benchmarks/bench_cache_misses.py", *sys.argv[1:]]})


if __name__ == "__main__":
    main()
