"""Exact p-values for canary audits.

Before publication the author draws ``n`` candidate canaries from one random process and
publishes one of them, chosen uniformly at random. If the model never saw the document,
nothing about the model depends on which candidate was published, so the published
canary's rank among the ``n`` candidates (by any score computed on the model) is uniform
on 1..n, whatever the model and whatever the score. That is the whole guarantee; it needs
no clean baseline and no assumption about the score's distribution.

Rank convention: higher score = more likely seen. ``rank = 1 + #{held-out candidates
whose score >= the published one's}``, so rank 1 is the top, and a tie counts against
the published canary (conservative: with ties the rank can only grow, so
``P(p <= a) <= a`` still holds). A held-out candidate the method could not score counts
as tied (also conservative). The p-value is ``rank / n``.

Several canaries (independent draws, each with its own candidates) are combined exactly:

* **sum of ranks**: ``S = sum(rank_i)``; under the null the ranks are independent and
  uniform on 1..n_i, and ``P(S_null <= s)`` is counted exactly (integer arithmetic, no
  approximation: a closed form when the canaries have equal numbers of candidates, as a
  kit's do, else a convolution). Ties make each rank stochastically larger, so the test
  stays valid.
* **min-p (Tippett)**: ``P(min_i p_i <= m) = 1 - prod_i (1 - floor(m n_i) / n_i)``,
  exact for the discrete p-values.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable, Sequence

from copyprobe.errors import DataError


def rank_of_published(published: float | None, held_out: Iterable[float | None]) -> int:
    """1 + number of held-out scores >= ``published`` (None / NaN held-out count as ties)."""
    if published is None or not math.isfinite(published):
        raise DataError("the published canary has no score: it cannot be tested")
    rank = 1
    for value in held_out:
        if value is None or not math.isfinite(value) or value >= published:
            rank += 1
    return rank


def rank_p_value(rank: int, n: int) -> float:
    """P(rank <= observed) when the rank is uniform on 1..n: ``rank / n``."""
    _check_rank(rank, n)
    return rank / n


def canary_p_value(published: float | None, held_out: Sequence[float | None]) -> tuple[int, float]:
    """(rank, exact p-value) of one canary from its published and held-out scores."""
    n = len(held_out) + 1
    rank = rank_of_published(published, held_out)
    return rank, rank_p_value(rank, n)


def _check_rank(rank: int, n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise DataError(f"number of candidates must be a positive integer, got {n!r}")
    if not isinstance(rank, int) or not 1 <= rank <= n:
        raise DataError(f"rank must be an integer in 1..{n}, got {rank!r}")


def sum_of_ranks_counts(sizes: Sequence[int], upto: int | None = None) -> list[int]:
    """counts[s] = number of rank tuples (r_i in 1..n_i) with sum s (index 0 = sum 0);
    with ``upto``, only the sums up to it (what a lower tail needs: each step's counts past
    it feed only larger sums)."""
    counts = [1]  # the empty sum
    for n in sizes:
        if not isinstance(n, int) or n < 1:
            raise DataError(f"number of candidates must be a positive integer, got {n!r}")
        # new[s] = sum_{r=1..n} counts[s - r]: a sliding window over prefix sums
        prefix = [0]
        for c in counts:
            prefix.append(prefix[-1] + c)
        length = len(counts) + n if upto is None else min(len(counts) + n, upto + 1)
        new = [0] * length
        for s in range(1, length):
            hi = min(s - 1, len(counts) - 1)
            lo = max(s - n, 0)
            if lo <= hi:
                new[s] = prefix[hi + 1] - prefix[lo]
        counts = new
    return counts


def sum_of_ranks_p_value(ranks: Sequence[int], sizes: Sequence[int], *, exact: bool = False) -> float | Fraction:
    """Exact P(sum of independent uniform ranks <= observed sum). ``exact=True`` gives a Fraction."""
    if len(ranks) != len(sizes) or not ranks:
        raise DataError("give one rank per canary (and at least one canary)")
    for r, n in zip(ranks, sizes):
        _check_rank(r, n)
    total = math.prod(sizes)
    observed = sum(ranks)
    # each rank r and n + 1 - r are alike under the null, so the sum is symmetric about
    # half of M = sum(n_i + 1): P(S > s) = P(S < M - s). Counting the smaller tail only
    # (up to M / 2, and just up to K for the smallest p a kit can give, asked before
    # scoring) makes that check and extreme results immediate
    mirror = sum(n + 1 for n in sizes) - observed - 1  # P(S <= s) = 1 - P(S <= mirror)
    if observed <= mirror:
        p = Fraction(_tuples_up_to(sizes, observed), total)
    else:
        p = 1 - Fraction(_tuples_up_to(sizes, mirror), total)
    return p if exact else as_float(p)


def _tuples_up_to(sizes: Sequence[int], s: int) -> int:
    """The number of rank tuples (r_i in 1..n_i) whose sum is at most ``s``.

    A kit's canaries all have the same number of candidates n, and then the count has a
    closed form, by inclusion-exclusion over the ranks that exceed n (a stars-and-bars count
    of k ranks, less those with j of them above n): sum_j (-1)^j C(k, j) C(s - j n, k), in
    exact integers, k terms. The convolution it replaces took 86 s for a sum near the
    middle of 400 canaries of 1,000 candidates, the closed form 0.013 s
    (benchmarks/results/canary_stats.md); canaries of different sizes still take it."""
    k = len(sizes)
    n = sizes[0]
    if any(size != n for size in sizes):
        return sum(sum_of_ranks_counts(sizes, s))
    # x_i = r_i - 1 in 0..n-1, sum x_i <= s - k: C(m + k, k) tuples of non-negative x_i
    # sum to at most m; those with x_i >= n for j given i are the same count at m - j n
    m = s - k
    total = 0
    for j in range(min(k, m // n if m >= 0 else -1) + 1):
        term = math.comb(k, j) * math.comb(m - j * n + k, k)
        total += -term if j % 2 else term
    return total


# the smallest normal float: a p-value below it is written as it, an upper bound (so the
# test stays valid), never as 0.0, which a float of a far smaller Fraction would give
SMALLEST_P = 2.2250738585072014e-308


def as_float(p: Fraction) -> float:
    """``p`` as a float, rounded up to :data:`SMALLEST_P` where it would underflow."""
    return max(float(p), SMALLEST_P) if p > 0 else 0.0


def min_p_value(ranks: Sequence[int], sizes: Sequence[int], *, exact: bool = False) -> float | Fraction:
    """Exact P(min_i p_i <= observed min) for independent discrete uniform p_i = r_i / n_i."""
    if len(ranks) != len(sizes) or not ranks:
        raise DataError("give one rank per canary (and at least one canary)")
    for r, n in zip(ranks, sizes):
        _check_rank(r, n)
    m = min(Fraction(r, n) for r, n in zip(ranks, sizes))
    survive = Fraction(1)
    for n in sizes:
        survive *= Fraction(n - math.floor(m * n), n)
    p = 1 - survive
    return p if exact else as_float(p)


def combine(ranks: Sequence[int], sizes: Sequence[int]) -> dict[str, float | int]:
    """Both combined tests of several canaries, as written to canary.json."""
    return {
        "n_canaries": len(ranks),
        "sum_of_ranks": int(sum(ranks)),
        "sum_of_ranks_p": sum_of_ranks_p_value(ranks, sizes),
        "min_p": min(Fraction(r, n) for r, n in zip(ranks, sizes)).__float__(),
        "min_p_p": min_p_value(ranks, sizes),
    }


__all__ = ["canary_p_value", "combine", "min_p_value", "rank_of_published", "rank_p_value",
           "sum_of_ranks_counts", "sum_of_ranks_p_value"]
