"""How long does `import copyprobe` take? (target: under 0.5 s on the 2-core CPU machine)

Runs a fresh interpreter per measurement (so nothing is already imported) and prints the
median of --repeat runs next to a bare `python -c pass`.

    python benchmarks/bench_import.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    bare = statistics.median(timed("pass") for _ in range(args.repeat))
    full = statistics.median(timed("import copyprobe") for _ in range(args.repeat))
    print(f"python -c pass:              {bare:.3f} s")
    print(f"python -c 'import copyprobe': {full:.3f} s  ({full - bare:.3f} s for copyprobe itself)")
    print(f"target < 0.5 s: {'met' if full < 0.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
