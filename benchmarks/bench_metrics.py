"""How fast are the bootstrap confidence intervals? (moved here from the unit tests:
speed targets live in benchmarks, not in timed tests)

Target (the bound the unit test used to assert): 1000 resamples of 3000 passages,
passage-level plus document-level (600 documents of 5 passages), under 1.5 CPU seconds
together. Printed beside them: scikit-learn's roc_auc_score called once per resample.

    python benchmarks/bench_metrics.py [--n 3000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    from sklearn.metrics import roc_auc_score

    from copyprobe.evaluation.metrics import bootstrap_ci, roc_auc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
