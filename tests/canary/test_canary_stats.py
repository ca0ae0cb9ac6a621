"""Exact canary statistics against brute-force enumeration of the null."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from copyprobe.canary import stats
from copyprobe.errors import DataError


def test_rank_counts_ties_and_failures_against_the_published():
    assert stats.rank_of_published(5.0, [1.0, 2.0, 3.0]) == 1
    assert stats.rank_of_published(2.0, [1.0, 2.0, 3.0]) == 3  # tie with 2.0 counts against
    assert stats.rank_of_published(2.0, [1.0, None, float("nan")]) == 3
    assert stats.canary_p_value(2.0, [1.0, 2.0, 3.0]) == (3, 0.75)
    with pytest.raises(DataError):
        stats.rank_of_published(None, [1.0])


@pytest.mark.parametrize("scores", [
    [0.3, 0.1, 0.7, 0.5, 0.9],          # no ties: exactly uniform
    [1.0, 1.0, 2.0, 2.0, 2.0, 3.0],     # ties: conservative
    [4.0, 4.0, 4.0, 4.0],               # all tied
])
def test_single_canary_p_value_is_valid_by_enumerating_the_published_choice(scores):
    # the null: the model's scores are fixed, the published index is uniform
    n = len(scores)
    ps = []
    for published in range(n):
        held = [s for j, s in enumerate(scores) if j != published]
        ps.append(Fraction(stats.canary_p_value(scores[published], held)[0], n))
    for a in sorted(set(ps)):
        assert Fraction(sum(p <= a for p in ps), n) <= a
    if len(set(scores)) == n:  # no ties: P(p <= k/n) = k/n exactly
        assert sorted(ps) == [Fraction(k, n) for k in range(1, n + 1)]


@pytest.mark.parametrize("sizes", [[3], [2, 3], [4, 4, 2], [5, 1, 3, 2]])
def test_sum_of_ranks_counts_and_p_values_match_enumeration(sizes):
    tuples = list(itertools.product(*[range(1, n + 1) for n in sizes]))
    counts = stats.sum_of_ranks_counts(sizes)
    for s in range(len(counts)):
        assert counts[s] == sum(sum(t) == s for t in tuples)
    assert sum(counts) == math.prod(sizes)
    for ranks in tuples:
        expected = Fraction(sum(sum(t) <= sum(ranks) for t in tuples), len(tuples))
        assert stats.sum_of_ranks_p_value(list(ranks), sizes, exact=True) == expected


@pytest.mark.parametrize("sizes", [[1, 1], [4, 4], [3, 3, 3], [2, 2, 2, 2, 2], [5, 5, 5, 5]])
def test_kits_of_equal_canaries_match_enumeration(sizes):
    """Equal canaries (every kit's) take the closed form, not the convolution."""
    tuples = list(itertools.product(*[range(1, n + 1) for n in sizes]))
    for ranks in tuples:
        expected = Fraction(sum(sum(t) <= sum(ranks) for t in tuples), len(tuples))
        assert stats.sum_of_ranks_p_value(list(ranks), sizes, exact=True) == expected


def test_the_closed_form_equals_the_convolution_on_large_kits():
    """40 canaries of 60 candidates: every sum's count up to the middle and past it (the
    convolution is the independent computation here: enumeration would take 60^40 tuples)."""
    sizes = [60] * 40
    cumulative = list(itertools.accumulate(stats.sum_of_ranks_counts(sizes)))
    for s in [0, 39, 40, 41, 100, 777, 1219, 1220, 1221, 1500, 2399, 2400, 2401]:
        assert stats._tuples_up_to(sizes, s) == (cumulative[min(s, len(cumulative) - 1)] if s >= 0 else 0)
    ranks = [31] * 20 + [30] * 20  # the middle: the sum 1220 is half of 40 x 61
    assert stats.sum_of_ranks_p_value(ranks, sizes, exact=True) == Fraction(cumulative[1220], 60 ** 40)


@pytest.mark.parametrize("sizes", [[3], [2, 3], [4, 4, 2], [5, 1, 3, 2]])
def test_min_p_matches_enumeration(sizes):
    tuples = list(itertools.product(*[range(1, n + 1) for n in sizes]))
    for ranks in tuples:
        m = min(Fraction(r, n) for r, n in zip(ranks, sizes))
        expected = Fraction(sum(min(Fraction(r, n) for r, n in zip(t, sizes)) <= m for t in tuples), len(tuples))
        assert stats.min_p_value(list(ranks), sizes, exact=True) == expected


def test_combined_tests_are_valid_at_every_level():
    sizes = [4, 3, 5]
    tuples = list(itertools.product(*[range(1, n + 1) for n in sizes]))
    for name in ("sum_of_ranks_p", "min_p_p"):
        ps = [stats.combine(list(t), sizes)[name] for t in tuples]
        for a in sorted(set(ps)):
            assert sum(p <= a + 1e-12 for p in ps) / len(ps) <= a + 1e-12


def test_one_canary_combined_equals_its_own_p_value():
    out = stats.combine([7], [100])
    assert out["sum_of_ranks_p"] == pytest.approx(0.07)
    assert out["min_p_p"] == pytest.approx(0.07)


def test_bad_ranks_are_data_errors():
    with pytest.raises(DataError):
        stats.rank_p_value(0, 5)
    with pytest.raises(DataError):
        stats.sum_of_ranks_p_value([6], [5])
    with pytest.raises(DataError):
        stats.sum_of_ranks_p_value([], [])


def test_large_kits_are_fast_enough_to_be_exact():
    # 20 canaries of 1000 candidates: integers, no overflow, p of all-top ranks = 1/1000^20
    p = stats.sum_of_ranks_p_value([1] * 20, [1000] * 20, exact=True)
    assert p == Fraction(1, 1000 ** 20)


def test_a_nan_score_counts_as_unscored_and_not_as_a_tie_in_the_summary():
    """canary_p_value counts a NaN held-out score against the canary (as a tie); the summary's
    counts say it is unscored, so most held-out candidates unscored gives 'cannot tell'."""
    from copyprobe.canary.kit import draw_kit, kit_from_manifest
    from copyprobe.canary.scoring import canary_summary
    from copyprobe.evaluation.vocabulary import CANNOT_TELL

    doc = "The harbour was quiet that winter. Ships stayed in port and the nets dried on the walls."
    kit = kit_from_manifest(draw_kit(doc, "doc.txt", n_candidates=6, seed="nan", n_words=4)[1])
    (canary,) = kit.canaries
    held = [j for j in range(6) if j != canary.published]
    scores = {canary.published: -1.0, held[0]: -2.0, held[1]: float("nan"), held[2]: float("nan"),
              held[3]: float("nan"), held[4]: None}
    rows = [{"id": f"c{canary.index}:{j}", "loss": scores[j]} for j in range(6)]
    summary = canary_summary(kit, rows, "loss", 0.05)
    counts = summary["canaries"][0]
    assert counts["n_unscored"] == 4 and counts["n_ties"] == 0
    assert summary["verdict"] == CANNOT_TELL  # 4 of 5 held-out candidates unscored


def test_the_counts_up_to_a_sum_are_the_full_counts_cut_there():
    sizes = [7, 3, 9, 4]
    full = stats.sum_of_ranks_counts(sizes)
    for upto in range(0, len(full) + 3):
        assert stats.sum_of_ranks_counts(sizes, upto) == full[:upto + 1]


def test_a_p_value_too_small_for_a_float_is_its_upper_bound_not_zero():
    # 200 canaries all ranked first among 100: p = 1 / 100^200 = 1e-400, below any float
    exact = stats.sum_of_ranks_p_value([1] * 200, [100] * 200, exact=True)
    assert exact == Fraction(1, 100 ** 200)
    p = stats.combine([1] * 200, [100] * 200)["sum_of_ranks_p"]
    assert 0 < p == stats.SMALLEST_P and exact < p  # conservative: the test stays valid
    assert stats.sum_of_ranks_p_value([100] * 200, [100] * 200) == 1.0
