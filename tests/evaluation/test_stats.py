import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from copyprobe.evaluation import mann_whitney_greater, welch_t_greater

SUSPECT = [0.81, 0.74, 0.9, 0.66, 0.85, 0.77, 0.95]
CLEAN = [0.52, 0.61, 0.7, 0.48, 0.58]


def manual_welch(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return t, stats.t.sf(t, df)


def exact_u_pvalue(a, b):
    """P(U >= U_observed) over every split of the pooled values (no ties)."""
    def u(x, y):
        return sum((xi > yi) + 0.5 * (xi == yi) for xi in x for yi in y)

    pooled = list(a) + list(b)
    observed = u(a, b)
    hits = total = 0
    for chosen in combinations(range(len(pooled)), len(a)):
        x = [pooled[i] for i in chosen]
        y = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        hits += u(x, y) >= observed - 1e-12
        total += 1
    return observed, hits / total


def test_welch_matches_formula():
    res = welch_t_greater(SUSPECT, CLEAN)
    t, p = manual_welch(SUSPECT, CLEAN)
    assert res.statistic == pytest.approx(t)
    assert res.p_value == pytest.approx(p)
    assert (res.n_suspect, res.n_clean, res.reason, res.ok) == (7, 5, None, True)
    assert res.p_value < 0.01


def test_welch_is_one_sided():
    res = welch_t_greater(CLEAN, SUSPECT)
    t, p = manual_welch(CLEAN, SUSPECT)
    assert t < 0 and res.p_value == pytest.approx(p) and res.p_value > 0.99


def test_mann_whitney_matches_exact_enumeration():
    res = mann_whitney_greater(SUSPECT[:5], CLEAN[:4])
    u, p = exact_u_pvalue(SUSPECT[:5], CLEAN[:4])
    assert res.statistic == pytest.approx(u)
    assert res.p_value == pytest.approx(p)
    mixed = [0.6, 0.5, 0.72, 0.4]
    res = mann_whitney_greater(mixed, CLEAN[:4])
    u, p = exact_u_pvalue(mixed, CLEAN[:4])
    assert (res.statistic, res.p_value) == pytest.approx((u, p))


@pytest.mark.parametrize("test", [welch_t_greater, mann_whitney_greater])
@pytest.mark.parametrize("suspect,clean", [([1.0], [0.1, 0.2]), ([1.0, 2.0], []),
                                           ([], []), ([1.0, float("nan")], [0.1, 0.2])])
def test_too_few_scores_give_nan_and_reason(test, suspect, clean):
    res = test(suspect, clean)
    assert math.isnan(res.statistic) and math.isnan(res.p_value) and not res.ok
    assert "needs at least 2 scores per group" in res.reason
    assert res.n_suspect == sum(not math.isnan(x) for x in suspect)
    assert res.n_clean == len(clean)


@pytest.mark.parametrize("test", [welch_t_greater, mann_whitney_greater])
def test_missing_scores_are_dropped(test):
    with_nan = test(SUSPECT + [float("nan")], [float("nan")] + CLEAN)
    assert with_nan == test(SUSPECT, CLEAN)
    assert (with_nan.n_suspect, with_nan.n_clean) == (7, 5)


def test_welch_zero_variance():
    res = welch_t_greater([1.0, 1.0], [0.5, 0.5])
    assert math.isnan(res.p_value) and "zero variance" in res.reason
    # one constant group is fine: the other carries the variance
    res = welch_t_greater([1.0, 1.0, 1.0], [0.2, 0.4, 0.3])
    t, p = manual_welch([1.0, 1.0, 1.0], [0.2, 0.4, 0.3])
    assert res.ok and res.p_value == pytest.approx(p)


def _tied_brute_p(suspect, clean):
    """P(mid-rank sum of m of the pooled scores drawn without replacement >= the suspects'),
    by enumerating every choice."""
    pooled = np.array(list(suspect) + list(clean), dtype=float)
    ranks = stats.rankdata(pooled)
    observed = ranks[:len(suspect)].sum()
    sums = [ranks[list(pick)].sum() for pick in combinations(range(len(pooled)), len(suspect))]
    return float(np.mean([s >= observed - 1e-9 for s in sums]))


def test_exact_mann_whitney_counts_ties_as_the_permutation_distribution_does():
    from copyprobe.evaluation.stats import exact_mann_whitney_p

    # scipy 1.17's exact method reads tied U against the no-ties table: 0.0092 here
    suspect, clean = [0.5, 0.5], [0.5, 0.5] + [0.25] * 18 + [0.0] * 8
    assert exact_mann_whitney_p(suspect, clean) == pytest.approx(6 / 435, rel=1e-12)
    assert _tied_brute_p(suspect, clean) == pytest.approx(6 / 435)
    rng = np.random.default_rng(5)
    for _ in range(120):  # quarters, as DE-COP scores are, in small groups
        m, k = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        s, c = list(rng.integers(0, 4, m) / 4), list(rng.integers(0, 4, k) / 4)
        assert exact_mann_whitney_p(s, c) == pytest.approx(_tied_brute_p(s, c), rel=1e-9, abs=1e-12), (s, c)
    s, c = list(rng.normal(size=3)), list(rng.normal(size=6))  # no ties: scipy's exact p
    assert exact_mann_whitney_p(s, c) == pytest.approx(
        stats.mannwhitneyu(s, c, alternative="greater", method="exact").pvalue)


def test_exact_mann_whitney_falls_back_to_a_valid_permutation_estimate():
    from copyprobe.evaluation.stats import exact_mann_whitney_p

    s, c = [0.5] * 5 + [0.25] * 3, [0.25] * 60 + [0.0] * 60 + [0.5] * 12
    exact = exact_mann_whitney_p(s, c)
    estimate = exact_mann_whitney_p(s, c, max_work=1, resamples=20_000)
    assert estimate >= 1 / 20_001  # (1 + hits) / (1 + resamples): never 0
    # the estimate is a binomial share around the exact p (plus the +1)
    assert abs(estimate - exact) <= 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_001
