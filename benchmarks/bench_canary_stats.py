"""How long the exact sum-of-ranks p-value of a canary test takes, closed form against
the convolution it replaced for kits of equal canaries, at the worst place (a sum near
the middle) and at an extreme one. The two must give the same Fraction.

    python benchmarks/bench_canary_stats.py [--kits 100x100,400x1000]

Prints one line per kit (canaries x candidates): seconds of each, and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from math import prod
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from copyprobe.canary import stats  # noqa: E402


def convolution_p(ranks: list[int], sizes: list[int]) -> Fraction:
    """P(S <= observed) by counting every sum up to it (what 0.2.2 replaced for equal sizes)."""
    observed = sum(ranks)
    mirror = sum(n + 1 for n in sizes) - observed - 1
    if observed <= mirror:
        return Fraction(sum(stats.sum_of_ranks_counts(sizes, observed)), prod(sizes))
    return 1 - Fraction(sum(stats.sum_of_ranks_counts(sizes, mirror)), prod(sizes))


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kits", default="20x100,100x100,100x1000,400x1000",
                        help="comma list of CANARIESxCANDIDATES")
    args = parser.parse_args(argv)
    print("kit (canaries x candidates) | ranks | convolution s | closed form s | ratio")
    for kit in args.kits.split(","):
        k, n = (int(x) for x in kit.lower().split("x"))
        sizes = [n] * k
        middle = [(n + 1) // 2] * k
        top = [1] * (k // 2) + [2] * (k - k // 2)
        for label, ranks in (("middle", middle), ("near the top", top)):
            slow, expected = timed(convolution_p, ranks, sizes)
            fast, got = timed(lambda r, s: stats.sum_of_ranks_p_value(r, s, exact=True), ranks, sizes)
            if got != expected:
                raise SystemExit(f"{kit} {label}: the closed form differs from the convolution")
            print(f"{kit} | {label} | {slow:.4f} | {fast:.4f} | {slow / max(fast, 1e-9):.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
