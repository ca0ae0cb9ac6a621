"""How fast are the bootstrap confidence intervals? (moved here from the unit tests:
speed targets live in benchmarks, not in timed tests)

Target (the bound the unit test used to assert): 1000 resamples of 3000 passages,
passage-level plus document-level (600 documents of 5 passages), under 1.5 CPU seconds
together. Printed beside them: scikit-learn's roc_auc_score called once per resample.

    python benchmarks/bench_metrics.py [--n 3000] [--resamples 1000] [--large 200000] [--keep-whole]

With ``--large N`` it also bootstraps N passages (1,000 resamples) and prints the peak
memory that took beyond what the process held before: a draw of more than 16 million
cells (resamples x passages) is made and used a chunk at a time: about 150 MiB for 200,000
passages, where the whole draw (``--keep-whole``) took 4.6 GB.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def main() -> None:
    from sklearn.metrics import roc_auc_score

    from copyprobe.evaluation.metrics import bootstrap_ci, roc_auc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--large", type=int, default=0, metavar="N", help="also N passages: CPU time and peak memory")
    parser.add_argument("--keep-whole", action="store_true",
                        help="keep the whole draw, however large (what every draw did before chunking)")
    args = parser.parse_args()
    if args.keep_whole:
        from copyprobe.evaluation import metrics

        metrics._KEEP_CELLS = 1 << 62
    rng = np.random.default_rng(9)
    y = rng.integers(0, 2, args.n)
    s = rng.normal(size=args.n) + 0.8 * y
    groups = np.arange(args.n) // 5
    bootstrap_ci(y, s, n_resamples=10)  # warm-up: imports, allocations

    def timed(fn) -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start

    passage = timed(lambda: bootstrap_ci(y, s, roc_auc, n_resamples=args.resamples, seed=1))
    document = timed(lambda: bootstrap_ci(y, s, roc_auc, groups=groups, n_resamples=args.resamples, seed=1))

    def per_resample_sklearn() -> None:
        draw = np.random.default_rng(1)
        for _ in range(args.resamples):
            idx = draw.integers(0, args.n, args.n)
            if len(set(y[idx].tolist())) == 2:
                roc_auc_score(y[idx], s[idx])

    naive = timed(per_resample_sklearn)
    print(f"bootstrap of {args.n} passages, {args.resamples} resamples (process CPU seconds):")
    print(f"  passage level             {passage:7.3f} s")
    print(f"  document level (n/5 docs) {document:7.3f} s")
    print(f"  sklearn per resample      {naive:7.3f} s   = {naive / max(passage, 1e-9):.1f}x the passage-level path")
    total = passage + document
    print(f"  target: both under 1.5 s: {'met' if total < 1.5 else 'MISSED'} ({total:.3f} s)")
    if args.large:
        big_y = rng.integers(0, 2, args.large)
        big_s = rng.normal(size=args.large) + 0.8 * big_y
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        seconds = timed(lambda: bootstrap_ci(big_y, big_s, roc_auc, n_resamples=1000, seed=1))
        extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        print(f"bootstrap of {args.large:,} passages, 1000 resamples: {seconds:.1f} CPU s, "
              f"peak memory +{extra:,.0f} MiB beyond the process's before")


if __name__ == "__main__":
    main()
