"""Operations per call of the LM head's statistics (issue 41): how many torch operations
``score_stats`` dispatches for one batch, each a kernel launch on a GPU (views launch none
and are counted apart), in both of its layouts (the GPU's large aligned blocks and the
CPU's cache-sized ones), and its time on this CPU against another commit's ``score_stats``
in the same process, alternating.

    python benchmarks/bench_stats_ops.py --root /tmp/old      # a worktree of the commit before
    python benchmarks/bench_stats_ops.py --root /tmp/old --json benchmarks/results/stats_ops.json

The batch is WikiMIA's at 32 texts: 3,300 scored rows against SmolLM2's 49,152-token
vocabulary; the hidden size is small (64, ``--hidden``) because the count does not depend on
it and the CPU's time should go to the statistics rather than to the head's product.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from timed_cli import code_version  # noqa: E402

# operations that make a view of a tensor or change its metadata: no kernel on a GPU
VIEWS = {"detach", "squeeze", "unsqueeze", "slice", "t", "view", "expand", "alias", "select", "as_strided",
         "_reshape_alias", "reshape", "permute", "transpose", "lift_fresh"}


def load_scoring(root: Path, name: str):
    """``copyprobe/backends/hf/scoring.py`` of the checkout at ``root``, as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, root / "copyprobe" / "backends" / "hf" / "scoring.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def counted(scoring, hidden, targets, head) -> dict[str, int]:
    """Operations one call dispatches: all of them, and those that are not views."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            self.names[name] = self.names.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with Count() as count:
        scoring.score_stats(hidden, targets, head)
    views = sum(n for name, n in count.names.items() if name in VIEWS)
    total = sum(count.names.values())
    return {"operations": total, "kernels (operations less views)": total - views}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="another checkout (a git worktree) whose score_stats to compare with")
    parser.add_argument("--rows", type=int, default=3300)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    head = torch.nn.Linear(args.hidden, args.vocab, bias=False)
    hidden = torch.randn(args.rows, args.hidden)
    targets = torch.randint(0, args.vocab, (args.rows,))
    versions = {code_version(ROOT): load_scoring(ROOT, "scoring_here")}
    if args.root:
        versions[code_version(Path(args.root))] = load_scoring(Path(args.root), "scoring_there")
    report = {"rows": args.rows, "vocab": args.vocab, "hidden": args.hidden, "threads": args.threads,
              "repeats": args.repeats, "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": ["python", "benchmarks/bench_stats_ops.py", *sys.argv[1:]], "layouts": {}}
    with torch.inference_mode():
        for layout in ("gpu", "cpu"):
            for scoring in versions.values():  # a CUDA device's layout, here on the CPU
                scoring.gpu_layout = lambda device, layout=layout: layout == "gpu"
            rows = {version: counted(scoring, hidden, targets, head) for version, scoring in versions.items()}
            seconds: dict[str, list[float]] = {version: [] for version in versions}
            for _ in range(args.repeats):  # alternating, so that the machine's load falls on both
                for version, scoring in versions.items():
                    start = time.perf_counter()
                    scoring.score_stats(hidden, targets, head)
                    seconds[version].append(time.perf_counter() - start)
            outputs = {version: scoring.score_stats(hidden, targets, head) for version, scoring in versions.items()}
            first = next(iter(outputs.values()))
            for version in versions:
                rows[version]["least ms"] = round(min(seconds[version]) * 1000, 1)
                rows[version]["largest difference from the first"] = {
                    name: float((outputs[version][name].double() - first[name].double()).abs().max())
                    for name in first}
            report["layouts"][layout] = rows
            for version, row in rows.items():
                print(f"{layout} layout, {version}: {row}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
