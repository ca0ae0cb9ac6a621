"""What a big response cache costs a run's start (issue 41): the default cache is one file
that every run adds to (a publisher's hundred books are GBs), and opening it ran SQLite's
``quick_check`` of every page before the model loaded.

A filler cache of ``--size-mb`` (entries shaped like token log-prob answers, under another
model's fingerprint) is built once; then, ``--repeats`` times in turn, a detect of
``--passages`` WikiMIA passages with the 5 logit methods on ``--model`` (loaded each time,
as a CLI run does) whose answers are all in the cache already, once with a small cache and
once with the big one: the difference is what the cache's size costs. Then the same with
passages no cache holds (each text prefixed with a word of its own per run), so that the
run writes its answers. ``--cold`` drops the page cache before each detect (as root: the
cache file and the model come from the disk). Also timed alone: opening the big cache and
its first lookup.

    python benchmarks/bench_cache_open.py                     # this checkout
    python benchmarks/bench_cache_open.py --root /tmp/old     # another commit's copyprobe (a worktree)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

# this checkout's (the script's directory): before --root's checkout comes first on the path
from timed_cli import add_block, add_checkout_option, code_version, use_checkout


def filler_cache(path: Path, size_mb: float, tokens: int = 300) -> int:
    """A cache file in copyprobe's schema 1 of about ``size_mb`` MB; returns its entries."""
    import numpy as np

    rng = np.random.default_rng(0)
    blob = lambda: base64.b64encode(rng.random(tokens).tobytes()).decode()  # noqa: E731
    entry = json.dumps({"token_ids": {"i8": blob()}, "logprobs": {"f8": blob()}, "mu": {"f8": blob()},
                        "sigma": {"f8": blob()}, "rank": {"i8": blob()}, "tokens": None})
    count = max(1, int(size_mb * 1e6 / (len(entry) + 200)))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE responses (fingerprint TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,"
               " response TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (fingerprint, kind, key))")
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for start in range(0, count, 2000):
        db.execute("BEGIN")
        db.executemany("INSERT INTO responses VALUES ('bench-filler', 'token_logprobs', ?, ?, 0)",
                       [(f"{i:064x}", entry) for i in range(start, min(count, start + 2000))])
        db.execute("COMMIT")
    db.close()
    return count


def drop_page_cache() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout_option(parser)
    parser.add_argument("--size-mb", type=float, default=1000.0, help="the big cache's size")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--passages", type=int, default=64, help="WikiMIA passages per detect")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="drop the page cache before each detect (root)")
    parser.add_argument("--dir", default=None, help="where the caches go (kept; default a temporary directory)")
    parser.add_argument("--json", default=None, help="results file to add this run's block to")
    parser.add_argument("--label", default=None, help="the block's name in --json (default: the commit)")
    args = parser.parse_args()
    use_checkout(args.root)
    import bench_gpu as B  # noqa: E402 - the chosen checkout's

    import copyprobe
    from copyprobe.backends.cache import ResponseCache

    if args.cold and not drop_page_cache():
        sys.exit("--cold: cannot write /proc/sys/vm/drop_caches (run as root)")
    examples = B.load_texts("wikimia")[: args.passages]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.dir or tmp)
        where.mkdir(parents=True, exist_ok=True)
        big, small = where / f"big_{args.size_mb:g}mb.sqlite", where / "small.sqlite"
        if not big.exists():
            start = time.perf_counter()
            entries = filler_cache(big, args.size_mb)
            print(f"filler cache: {entries} entries, {big.stat().st_size / 1e6:.0f} MB, "
                  f"{time.perf_counter() - start:.1f} s to write")
        size_mb = big.stat().st_size / 1e6
        for path in (small, big):  # the passages' answers into both (not timed)
            copyprobe.detect(args.model, examples, B.LOGIT_METHODS, cache=str(path), device="cpu")
        runs: dict[str, list[dict]] = {"small": [], "big": [], "small, misses": [], "big, misses": []}
        nonce = os.urandom(4).hex()  # new texts for every run of this script
        for repeat in range(args.repeats):
            for name, path in (("small", small), ("big", big), ("small, misses", small), ("big, misses", big)):
                texts = examples if "misses" not in name else [
                    f"{nonce}{repeat}{name[0]} {example.text}" for example in examples]
                if args.cold:
                    drop_page_cache()
                start = time.perf_counter()
                result = copyprobe.detect(args.model, texts, B.LOGIT_METHODS, cache=str(path), device="cpu")
                wall = time.perf_counter() - start
                timings = result.record.timings
                wanted = len(examples) if "misses" in name else 0
                assert result.record.cache["misses"] == wanted, (name, result.record.cache)
                runs[name].append({"wall_s": round(wall, 3), "load_s": timings["load_s"],
                                   "score_s": timings["score_s"]})
                print(f"repeat {repeat + 1} {name:13s} cache: detect {wall:.3f} s (load {timings['load_s']:.3f}, "
                      f"score {timings['score_s']:.3f})")
        alone = []
        for _ in range(args.repeats):
            if args.cold:
                drop_page_cache()
            start = time.perf_counter()
            cache = ResponseCache(big)
            opened = time.perf_counter() - start
            cache.get_many("bench-filler", "token_logprobs", ["0" * 64])
            alone.append({"open_s": round(opened, 4), "open_and_first_lookup_s": round(time.perf_counter() - start, 4)})
            cache.close()
    least = {name: min(r["wall_s"] for r in rows) for name, rows in runs.items()}
    commit = code_version(Path(copyprobe.__file__).resolve().parents[1])
    print(f"copyprobe {commit} ({copyprobe.__file__}), {args.model}, {len(examples)} passages, "
          f"{'cold' if args.cold else 'warm'} page cache, big cache {size_mb:.0f} MB")
    for kind in ("", ", misses"):
        print(f"least detect{kind or ', hits'}: small cache {least['small' + kind]:.3f} s, big cache "
              f"{least['big' + kind]:.3f} s, difference {least['big' + kind] - least['small' + kind]:+.3f} s")
    print("big cache alone: open " + ", ".join(f"{a['open_s']:.3f}" for a in alone) + " s; open + first lookup "
          + ", ".join(f"{a['open_and_first_lookup_s']:.3f}" for a in alone) + " s")
    if args.json:
        add_block(Path(args.json), args.label or commit, {
            "commit": commit, "model": args.model, "passages": len(examples), "big_cache_mb": round(size_mb),
            "page_cache": "cold" if args.cold else "warm", "detect": runs, "least_wall_s": least,
            "difference_s": {("misses" if kind else "hits"): round(least["big" + kind] - least["small" + kind], 3)
                             for kind in ("", ", misses")},
            "big_cache_alone": alone,
            "machine": B.machine("cpu"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": ["python", "benchmarks/bench_cache_open.py", *sys.argv[1:]]})


if __name__ == "__main__":
    main()
