"""How often do two rare process-level failures happen, with and without their fixes?

* ``cache``: N processes open the same NEW response cache at the same instant and write
  one entry each; a round fails when any process does not succeed. ``--old`` opens the
  cache the way copyprobe did before the SQLITE_BUSY retry (one attempt).
* ``parquet``: one process reads 20 empty Parquet files and exits; a run fails when the
  process aborts at exit (an Arrow thread-pool worker alive at exit, apache/arrow#34314).
  ``--reader`` picks how the files are read: ``threads`` (``pq.read_table`` with Arrow's
  default threads, the first code), ``scanner`` (``pq.read_table(use_threads=False,
  pre_buffer=False)``, the first fix: its dataset scanner still starts a pool worker) or
  ``copyprobe`` (``load_dataset`` as it is). ``--parallel`` runs that many processes at
  once. Also prints the threads each process had before the reads and after them.

Prints the failure count per variant; nothing is asserted (tests hold the guarantees).

    python benchmarks/bench_reliability_races.py cache --rounds 30 --procs 8 [--old]
    python benchmarks/bench_reliability_races.py parquet --runs 40 [--reader threads|scanner|copyprobe]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RACER = r"""
import sqlite3, sys, time
from copyprobe.backends import cache as cache_module
path, start, name, old = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
if old:  # one attempt, as before the retry
    cache_module.BUSY_WAIT_S = 0.0
while time.time() < start:
    pass
try:
    cache = cache_module.ResponseCache(path)
    cache.put_many("fp", "token_logprobs", [(name, {"token_ids": [1], "logprobs": []})])
    cache.close()
    print("ok")
except Exception as exc:
    print("FAIL", type(exc).__name__, str(exc)[:120])
"""

READER = r"""
import os, sys
reader = sys.argv[1]
import pyarrow as pa
import pyarrow.parquet as pq
from copyprobe.data.readers import load_dataset
from copyprobe.errors import CopyprobeError

def threads():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1

before = threads()
for path in sys.argv[2:]:
    if reader == "threads":
        pq.read_table(path).to_pylist()
    elif reader == "scanner":
        pq.read_table(pa.BufferReader(open(path, "rb").read()), use_threads=False, pre_buffer=False).to_pylist()
    else:
        try:
            load_dataset(path)
        except CopyprobeError:
            pass
print(before, threads())
"""


def bench_cache(rounds: int, procs: int, old: bool) -> None:
    folder = Path(tempfile.mkdtemp())
    failed = 0
    for i in range(rounds):
        path = folder / f"c{i}.sqlite"
        start = time.time() + 0.6 + 0.05 * procs
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(path), repr(start), f"p{k}", "1" if old else "0"],
                                   stdout=subprocess.PIPE, text=True) for k in range(procs)]
        outs = [r.communicate()[0].strip() for r in racers]
        bad = [o for o in outs if o != "ok"]
        if bad:
            failed += 1
            print(f"round {i}: {bad[0]}")
    print(f"cache race ({'old: one attempt' if old else 'retry on SQLITE_BUSY'}), {procs} processes: "
          f"{failed} of {rounds} rounds failed")


def bench_parquet(runs: int, reader: str, parallel: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(tempfile.mkdtemp())
    paths = []
    for i in range(20):
        pq.write_table(pa.table({"text": pa.array([], pa.string())}), folder / f"f{i}.parquet")
        paths.append(str(folder / f"f{i}.parquet"))
    aborted, left = 0, set()
    for start in range(0, runs, parallel):
        procs = [subprocess.Popen([sys.executable, "-c", READER, reader, *paths], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(min(parallel, runs - start))]
        for proc in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0:
                aborted += 1
            if out.strip():
                before, after = map(int, out.split())
                left.add(after - before)
    print(f"parquet exit (reader {reader}, {parallel} at once): {aborted} of {runs} processes aborted; "
          f"threads left by the reads: {', '.join(map(str, sorted(left))) or 'none printed'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("cache", "parquet"))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--old", action="store_true", help="cache: one attempt, as before the retry")
    parser.add_argument("--reader", choices=("threads", "scanner", "copyprobe"), default="copyprobe",
                        help="parquet: how the files are read (see the docstring)")
    parser.add_argument("--parallel", type=int, default=1, help="parquet: processes at once")
    args = parser.parse_args()
    if args.what == "cache":
        bench_cache(args.rounds, args.procs, args.old)
    else:
        bench_parquet(args.runs, args.reader, args.parallel)


if __name__ == "__main__":
    main()
