"""Guarantee (a) of issue 16: a model that never saw a kit gives uniform p-values.

1000 kits, each drawn with its own seed, are scored through the normal runner with a
fake model that saw none of them. The p-values are discrete (steps of 1/n), so a perfect
tool gives P(p <= k/n) = k/n exactly; the KS statistic against Uniform(0, 1) then
differs from a continuous one by at most 1/n, and the test allows for it.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from copyprobe.backends.fake import FakeBackend
from copyprobe.canary.kit import draw_kit, kit_from_manifest
from copyprobe.canary.scoring import canary_summary, kit_examples
from copyprobe.scoring import build_methods, score_examples
from copyprobe.session import Session

DOC = ("The harbour was quiet that winter. Ships stayed in port and the nets dried on the walls. "
       "Nobody expected the storm. It came in the night and took the old pier with it.")
N_KITS = 1000
ALPHA = 0.05


def _kits(n_kits, n_candidates, n_canaries, style="words", n_words=4):
    # short word candidates keep 100,000 candidates within seconds on the fake model; the
    # guarantee does not depend on the style (the power test below uses sentences)
    return [kit_from_manifest(draw_kit(DOC, "doc.txt", n_candidates=n_candidates, style=style,
                                       seed=f"guarantee:{i}", n_canaries=n_canaries,
                                       n_words=n_words if style != "sentences" else None)[1])
            for i in range(n_kits)]


def _summaries(kits, backend, method="loss"):
    examples = [e for i, kit in enumerate(kits) for e in kit_examples(kit, prefix=f"k{i}:")]
    methods = build_methods([method])
    with Session(backend, cache=False) as session:
        rows, _ = score_examples(examples, methods, session.backend_for)
    # each kit's own rows: canary_summary indexes the rows it is given, and all of them
    # (tens of thousands) for each of 1,000 kits made this take most of a minute
    by_kit: dict[str, list] = {}
    for row in rows:
        by_kit.setdefault(row["id"].split(":", 1)[0], []).append(row)
    return [canary_summary(kit, by_kit[f"k{i}"], method, ALPHA, prefix=f"k{i}:") for i, kit in enumerate(kits)]


def _binomial_ok(rejections, n, alpha=ALPHA):
    # two-sided exact binomial test at 0.001: the seeded draw is fixed, this is a sanity band
    return sps.binomtest(rejections, n, alpha).pvalue > 0.001


@pytest.fixture(scope="module")
def null_single():
    return _summaries(_kits(N_KITS, 50, 1), FakeBackend(spec="never-saw-it"))


def test_single_canary_p_values_are_uniform_under_the_null(null_single):
    ps = [s["p_value"] for s in null_single]
    ks = sps.kstest(ps, "uniform")
    # discreteness adds at most 1/n = 0.02 to the KS distance; 1000 samples: critical D(0.01) = 0.051
    assert ks.statistic < 0.051 + 0.02, ks
    ranks = [s["canaries"][0]["rank"] for s in null_single]
    counts = [sum(5 * k < r <= 5 * (k + 1) for r in ranks) for k in range(10)]
    assert sps.chisquare(counts).pvalue > 0.001, counts  # ranks uniform on 1..50, by deciles
    rejections = sum(s["significant"] for s in null_single)
    assert _binomial_ok(rejections, N_KITS), rejections
    assert not any(s["canaries"][0]["n_ties"] for s in null_single)


def test_combined_test_is_uniform_under_the_null():
    summaries = _summaries(_kits(N_KITS, 20, 2), FakeBackend(spec="never-saw-these"))
    combined = [s["combined"]["sum_of_ranks_p"] for s in summaries]
    # sum of 2 ranks of 20: 39 values, steps of at most 0.05 (at the median)
    assert sps.kstest(combined, "uniform").statistic < 0.051 + 0.05
    assert _binomial_ok(sum(p <= ALPHA for p in combined), N_KITS)
    tippett = [s["combined"]["min_p_p"] for s in summaries]
    # a valid test never rejects more often than its level, up to noise, at any level (Tippett's
    # smallest p here is 1 - (19/20)^2 = 0.0975, so it is conservative at 0.05)
    for ps in (combined, tippett):
        for level in (0.01, 0.05, 0.1, 0.25, 0.5):
            rate = sum(p <= level for p in ps) / N_KITS
            assert rate <= level + 3 * math.sqrt(level * (1 - level) / N_KITS), (level, rate)


def _saw_each(kits):
    # one model per kit that saw that kit's marked document (its words get higher log-probs)
    return [_summaries([kit], FakeBackend(spec=f"saw-{i}", member_texts=[kit.canaries[0].text]))[0]
            for i, kit in enumerate(kits)]


def test_a_model_that_saw_the_document_is_found():
    summaries = _saw_each(_kits(40, 100, 1, n_words=12))
    assert sum(s["significant"] for s in summaries) >= 30  # 2 expected by chance
    assert all("at most p = " in s["explanation"] for s in summaries)
    # sentences share their template words, which this word-level fake boosts for every
    # candidate, so it finds them less often, but still far above chance
    summaries = _saw_each(_kits(40, 100, 1, style="sentences"))
    assert sps.binomtest(sum(s["significant"] for s in summaries), 40, ALPHA, alternative="greater").pvalue < 0.001
