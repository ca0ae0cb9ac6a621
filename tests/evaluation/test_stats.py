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
