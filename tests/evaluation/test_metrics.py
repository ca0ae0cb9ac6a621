import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from copyprobe.errors import ConfigError, DataError
from copyprobe.evaluation import (
    aggregate_documents,
    bootstrap_ci,
    evaluate,
    precision_recall_fbeta,
    roc_auc,
    tpr_at_fpr,
    tprs_at_fprs,
)


def pairwise_auc(labels, scores):
    """AUC as the fraction of (member, non-member) pairs ordered correctly, ties half."""
    pos = [s for y, s in zip(labels, scores) if y == 1]
    neg = [s for y, s in zip(labels, scores) if y == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def brute_tpr_at_fpr(labels, scores, target):
    """Try every threshold "score >= t" (and "nothing"); best TPR whose FPR <= target."""
    y = np.asarray(labels)
    s = np.asarray(scores)
    best = 0.0
    for t in list(np.unique(s)) + [np.inf]:
        flagged = s >= t
        fpr = (flagged & (y == 0)).sum() / (y == 0).sum()
        tpr = (flagged & (y == 1)).sum() / (y == 1).sum()
        if fpr <= target:
            best = max(best, tpr)
    return best


def _data(n=300, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + 0.8 * y
    return y, (np.round(s, 1) if ties else s)


# -- AUC and TPR@FPR ---------------------------------------------------------------------

@pytest.mark.parametrize("ties", [True, False])
def test_roc_auc_matches_pairwise_count(ties):
    y, s = _data(ties=ties)
    assert roc_auc(y, s) == pytest.approx(pairwise_auc(y, s), abs=1e-12)


def test_roc_auc_direction_and_errors():
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert roc_auc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    with pytest.raises(DataError, match="only label 1"):
        roc_auc([1, 1], [0.1, 0.2])
    with pytest.raises(DataError, match="labels must be 0 or 1, got 2"):
        roc_auc([0, 2], [0.1, 0.2])
    with pytest.raises(DataError, match="NaN at position 1"):
        roc_auc([0, 1], [0.1, float("nan")])


@pytest.mark.parametrize("value", [math.inf, -math.inf])
@pytest.mark.parametrize("call", [
    lambda y, s: roc_auc(y, s),
    lambda y, s: tpr_at_fpr(y, s, 0.05),
    lambda y, s: bootstrap_ci(y, s, n_resamples=10),
    lambda y, s: bootstrap_ci(y, s, n_resamples=10, groups=["a", "b", "c", "d"]),
])
def test_every_metric_refuses_an_infinite_score_alike(call, value):
    with pytest.raises(DataError, match="infinite value at position 2"):
        call([0, 1, 0, 1], [0.1, 0.4, value, 0.3])


def test_tpr_at_fpr_hand_built():
    # 10 non-members: one scores 0.9, the rest at most 0.5
    neg = [0.9, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1]
    # 10 members: two above 0.9, three more between 0.5 and 0.9
    pos = [0.95, 0.92, 0.85, 0.8, 0.6, 0.48, 0.42, 0.32, 0.05, 0.01]
    y = [0] * 10 + [1] * 10
    s = neg + pos
    assert tpr_at_fpr(y, s, 0.0) == pytest.approx(0.2)  # only 0.95, 0.92 before any negative
    assert tpr_at_fpr(y, s, 0.05) == pytest.approx(0.2)  # one negative is already 10 %
    assert tpr_at_fpr(y, s, 0.1) == pytest.approx(0.5)  # admit the 0.9 negative: up to 0.6
    assert tpr_at_fpr(y, s, 0.2) == pytest.approx(0.6)  # 0.5 negative too: adds 0.48
    assert tpr_at_fpr(y, s, 1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("target", [0.0, 0.01, 0.05, 0.1, 0.33])
def test_tpr_at_fpr_matches_threshold_sweep(target):
    y, s = _data(n=400, seed=3)
    assert tpr_at_fpr(y, s, target) == pytest.approx(brute_tpr_at_fpr(y, s, target))


def test_tpr_at_fpr_rejects_bad_fpr():
    with pytest.raises(ConfigError, match="fpr must lie in"):
        tpr_at_fpr([0, 1], [0, 1], 1.5)
    with pytest.raises(ConfigError, match="fpr must lie in"):
        tprs_at_fprs([0, 1], [0, 1], (0.01, -0.1))


@pytest.mark.parametrize("seed", range(8))
def test_roc_auc_is_sklearns_roc_auc_score_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    y = rng.integers(0, 2, n)
    y[:2] = (0, 1)
    s = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8) + 0.3 * y
    for scores in (s, np.round(s, 1), np.round(s).astype(int), -np.abs(s)):
        assert roc_auc(y, scores) == roc_auc_score(y, scores)
        assert roc_auc(list(y), list(scores)) == roc_auc_score(y, scores)


def test_tprs_at_fprs_reads_each_as_tpr_at_fpr_does():
    y, s = _data(n=500, seed=5)
    targets = (0.0, 0.01, 0.05, 0.3, 1.0)
    assert tprs_at_fprs(y, s, targets) == [tpr_at_fpr(y, s, f) for f in targets]
    assert tprs_at_fprs(y, s, targets) == [pytest.approx(brute_tpr_at_fpr(y, s, f)) for f in targets]


# -- bootstrap --------------------------------------------------------------------------

def _recorder():
    calls = []

    def metric(labels, scores):
        calls.append((labels.copy(), scores.copy()))
        return roc_auc_score(labels, scores)

    return metric, calls


def test_fast_auc_path_equals_sklearn_per_resample():
    y, s = _data(n=250, seed=1)
    slow, calls = _recorder()
    fast_ci = bootstrap_ci(y, s, roc_auc, n_resamples=150, seed=7)
    slow_ci = bootstrap_ci(y, s, slow, n_resamples=150, seed=7)
    assert len(calls) == 150 - slow_ci.n_degenerate
    assert fast_ci.low == pytest.approx(slow_ci.low, abs=1e-12)
    assert fast_ci.high == pytest.approx(slow_ci.high, abs=1e-12)
    # percentile bounds of the values the metric returned
    values = [roc_auc_score(a, b) for a, b in calls]
    assert (slow_ci.low, slow_ci.high) == pytest.approx(tuple(np.quantile(values, [0.025, 0.975])))


def test_fast_auc_path_equals_sklearn_with_groups():
    y, s = _data(n=200, seed=2)
    groups = np.repeat(np.arange(40), 5)
    y = np.repeat(np.random.default_rng(0).integers(0, 2, 40), 5)
    slow, _ = _recorder()
    fast_ci = bootstrap_ci(y, s, roc_auc, groups=groups, n_resamples=200, seed=3)
    slow_ci = bootstrap_ci(y, s, slow, groups=groups, n_resamples=200, seed=3)
    assert (fast_ci.low, fast_ci.high) == pytest.approx((slow_ci.low, slow_ci.high), abs=1e-12)


def test_weighted_auc_counts_in_int32_and_int64_alike_and_equals_weighted_sklearn(monkeypatch):
    from copyprobe.evaluation import metrics

    rng = np.random.default_rng(8)
    n, n_groups = 300, 60
    y = rng.integers(0, 2, n)
    s = np.round(rng.normal(size=n), 1)  # many tied scores, within and across classes
    codes = rng.integers(0, n_groups, n)
    counts = metrics._draw_counts(rng, n_groups, 40)
    assert metrics._count_dtype(counts, int(y.sum()), int((1 - y).sum())) is np.int32
    small = metrics._weighted_auc(y, s, counts.astype(np.int32), codes)
    monkeypatch.setattr(metrics, "_count_dtype", lambda *args: np.int64)
    wide = metrics._weighted_auc(y, s, counts, codes)
    assert np.array_equal(small, wide)  # bit for bit: whole numbers are exact in both
    for b in range(len(counts)):
        weights = counts[b, codes]
        kept = weights > 0
        assert small[b] == pytest.approx(roc_auc_score(y[kept], s[kept], sample_weight=weights[kept]), abs=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_weighted_auc_is_the_same_for_either_memory_order_and_in_chunks(monkeypatch, tied):
    """Tied scores (within and across classes) and untied ones, whose two reads of the
    negatives' sums are one."""
    from copyprobe.evaluation import metrics

    rng = np.random.default_rng(9)
    n, n_groups = 240, 50
    y = rng.integers(0, 2, n)
    s = np.round(rng.normal(size=n), 1) if tied else rng.normal(size=n)
    codes = rng.integers(0, n_groups, n)
    state = rng.bit_generator.state
    counts = metrics._draw_counts(rng, n_groups, 30)
    assert counts.flags.f_contiguous and counts.shape == (30, n_groups)  # a group's counts together
    rng.bit_generator.state = state  # the same draws, counted resample by resample
    draws = rng.integers(0, n_groups, size=(30, n_groups))
    assert np.array_equal(counts, [np.bincount(row, minlength=n_groups) for row in draws])
    by_rows = np.ascontiguousarray(counts)
    whole = metrics._weighted_auc(y, s, counts, codes)
    assert np.array_equal(whole, metrics._weighted_auc(y, s, by_rows, codes))
    monkeypatch.setattr(metrics, "_CHUNK_CELLS", 7 * n)  # 7 resamples at a time, the last chunk short
    assert np.array_equal(whole, metrics._weighted_auc(y, s, counts, codes))
    assert np.array_equal(whole, metrics._weighted_auc(y, s, by_rows, codes))
    for row_by_row in (1, 10**9):  # prefix sums added row by row, and by np.cumsum
        monkeypatch.setattr(metrics, "_ROW_BY_ROW", row_by_row)
        assert np.array_equal(whole, metrics._weighted_auc(y, s, counts, codes))
    for b in (0, 13, 29):
        weights = counts[b, codes]
        kept = weights > 0
        assert whole[b] == pytest.approx(roc_auc_score(y[kept], s[kept], sample_weight=weights[kept]), abs=1e-12)


@pytest.mark.parametrize("groups", [False, True])
def test_a_draw_too_large_to_keep_is_used_in_chunks_with_the_same_intervals(monkeypatch, groups):
    from copyprobe.evaluation import metrics

    rng = np.random.default_rng(12)
    n = 400
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + 0.4 * y
    g = np.arange(n) // 4 if groups else None
    whole_draw = metrics._seeded_counts(5, n // 4 if groups else n, 90)

    def intervals():
        return (metrics.bootstrap_ci(y, s, groups=g, n_resamples=90, seed=5),
                metrics.bootstrap_ci(y, s, average_precision_score, groups=g, n_resamples=30, seed=5))

    kept = intervals()
    monkeypatch.setattr(metrics, "_KEEP_CELLS", 0)
    monkeypatch.setattr(metrics, "_CHUNK_CELLS", 7 * n + 3)  # 7 resamples at a time, the last chunk short
    chunks = list(metrics._counts_in_chunks(5, n // 4 if groups else n, 90))
    assert len(chunks) > 1 and np.array_equal(np.concatenate(chunks), whole_draw)
    assert intervals() == kept


def test_weighted_auc_counts_in_int64_where_int32_could_overflow():
    from copyprobe.evaluation.metrics import _count_dtype

    counts = np.array([[0, 3, 9]])
    assert _count_dtype(counts, 825, 825) is np.int32  # WikiMIA's size
    # 2 * (9 * 3000) * (9 * 3000) = 1.46e9 fits; 2 * (9 * 4000)^2 = 2.6e9 does not
    assert _count_dtype(counts, 3000, 3000) is np.int32
    assert _count_dtype(counts, 4000, 4000) is np.int64


def test_grouped_bootstrap_draws_whole_groups():
    n_groups, size = 12, 4
    groups = [f"doc{g}" for g in range(n_groups) for _ in range(size)]
    y = np.array([g % 2 for g in range(n_groups) for _ in range(size)])
    s = np.arange(n_groups * size, dtype=float)  # distinct scores identify the rows
    metric, calls = _recorder()
    bootstrap_ci(y, s, metric, groups=groups, n_resamples=200, seed=0)
    assert len(calls) > 150
    for _, scores in calls:
        times = Counter(scores.tolist())
        drawn = 0
        for g in range(n_groups):
            k = {times.get(float(g * size + i), 0) for i in range(size)}
            assert len(k) == 1  # all passages of a document come together, or none
            drawn += k.pop()
        assert drawn == n_groups  # as many documents as there are, with replacement
    # and without groups rows are drawn one by one: some document gets split
    metric, calls = _recorder()
    bootstrap_ci(y, s, metric, n_resamples=50, seed=0)
    split = 0
    for _, scores in calls:
        times = Counter(scores.tolist())
        assert sum(times.values()) == len(s)
        split += any(len({times.get(float(g * size + i), 0) for i in range(size)}) > 1
                     for g in range(n_groups))
    assert split == len(calls)


def test_grouped_interval_is_wider_for_clustered_passages():
    # 30 documents of 10 identical passages: only 30 independent units, not 300
    rng = np.random.default_rng(5)
    doc_label = rng.integers(0, 2, 30)
    doc_score = rng.normal(size=30) + doc_label
    y, s = np.repeat(doc_label, 10), np.repeat(doc_score, 10)
    groups = np.repeat(np.arange(30), 10)
    grouped = bootstrap_ci(y, s, groups=groups, seed=1)
    flat = bootstrap_ci(y, s, seed=1)
    assert grouped.high - grouped.low > 2 * (flat.high - flat.low)
    # the grouped interval equals the one computed on the documents themselves
    per_doc = bootstrap_ci(doc_label, doc_score, seed=1)
    assert (grouped.low, grouped.high) == pytest.approx((per_doc.low, per_doc.high), abs=0.02)


def test_bootstrap_degenerate_resamples_give_nan():
    # one member among 30: about a third of the resamples miss it
    y = [1] + [0] * 30
    s = np.linspace(0, 1, 31)
    ci = bootstrap_ci(y, s, n_resamples=500, seed=0)
    assert math.isnan(ci.low) and math.isnan(ci.high) and not ci.ok
    expected = 500 * (30 / 31) ** 31
    assert abs(ci.n_degenerate - expected) < 5 * math.sqrt(expected)


def test_bootstrap_counts_a_few_degenerate_resamples():
    y = [1] * 4 + [0] * 60
    s = np.r_[np.linspace(0.5, 1, 4), np.linspace(0, 0.9, 60)]
    ci = bootstrap_ci(y, s, n_resamples=1000, seed=0, max_degenerate_fraction=0.5)
    assert ci.ok and 0 < ci.n_degenerate < 100  # P(no member) = (60/64)^64 ~ 1.6 %
    assert ci.low <= roc_auc(y, s) <= ci.high


def test_bootstrap_is_seeded():
    y, s = _data()
    assert bootstrap_ci(y, s, seed=4) == bootstrap_ci(y, s, seed=4)
    assert bootstrap_ci(y, s, seed=4) != bootstrap_ci(y, s, seed=5)


def test_bootstrap_interval_grows_with_confidence():
    y, s = _data()
    narrow = bootstrap_ci(y, s, confidence=0.5)
    wide = bootstrap_ci(y, s, confidence=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_bootstrap_argument_errors():
    with pytest.raises(ConfigError, match="n_resamples"):
        bootstrap_ci([0, 1], [0, 1], n_resamples=0)
    with pytest.raises(ConfigError, match="confidence"):
        bootstrap_ci([0, 1], [0, 1], confidence=95)


# -- documents --------------------------------------------------------------------------

def _doc_frame():
    return pd.DataFrame({
        "id": list("abcdefg"),
        "doc_id": ["A", "A", "A", "B", "B", "C", "C"],
        "label": [1, 1, 1, 0, 0, 1, 1],
        "m": [1.0, 2.0, 6.0, 4.0, np.nan, np.nan, np.nan],
    })


@pytest.mark.parametrize("how,a,b", [("mean", 3.0, 4.0), ("median", 2.0, 4.0),
                                     ("max", 6.0, 4.0)])
def test_aggregate_documents(how, a, b):
    out = aggregate_documents(_doc_frame(), ["m"], how=how)
    assert out["doc_id"].tolist() == ["A", "B", "C"]
    assert out["label"].tolist() == [1, 0, 1]
    assert out["n_passages"].tolist() == [3, 2, 2]
    assert out["m"].tolist()[:2] == [a, b]
    assert math.isnan(out["m"].tolist()[2])  # no passage of C has a score


def test_aggregate_documents_label_disagreement():
    frame = _doc_frame()
    frame.loc[1, "label"] = 0
    with pytest.raises(DataError, match=r"document 'A' has passages with different labels "
                                        r"\(0, 1\)"):
        aggregate_documents(frame, ["m"])


def test_aggregate_documents_errors():
    with pytest.raises(ConfigError, match="how must be"):
        aggregate_documents(_doc_frame(), ["m"], how="sum")
    with pytest.raises(DataError, match="'zz' not in the scores"):
        aggregate_documents(_doc_frame(), ["zz"])


# -- evaluate ----------------------------------------------------------------------------

KEYS = {"auc", "auc_low", "auc_high", "tpr_at_1pct_fpr", "tpr_at_5pct_fpr", "n"}


def _scores_frame(n_docs=40, per_doc=5, seed=0):
    rng = np.random.default_rng(seed)
    doc_label = rng.integers(0, 2, n_docs)
    doc_label[:2] = [0, 1]
    y = np.repeat(doc_label, per_doc)
    n = len(y)
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(n)],
        "doc_id": np.repeat([f"d{i}" for i in range(n_docs)], per_doc),
        "label": y,
        "good": rng.normal(size=n) + 1.5 * y,
        "noise": rng.normal(size=n),
    })


def test_evaluate_passage_and_document_values():
    frame = _scores_frame()
    out = evaluate(frame, ["good", "noise"], n_bootstrap=200, seed=1)
    assert set(out) == {"passage", "document", "notes"}
    assert out["notes"] == []
    for level in ("passage", "document"):
        assert set(out[level]) == {"good", "noise"}
        for m in ("good", "noise"):
            assert set(out[level][m]) == KEYS
    p = out["passage"]["good"]
    assert p["auc"] == pytest.approx(pairwise_auc(frame["label"], frame["good"]))
    assert p["tpr_at_5pct_fpr"] == pytest.approx(
        brute_tpr_at_fpr(frame["label"], frame["good"], 0.05))
    assert p["n"] == len(frame)
    # passage intervals resample documents
    ci = bootstrap_ci(frame["label"], frame["good"], groups=frame["doc_id"], n_resamples=200,
                      seed=1)
    assert (p["auc_low"], p["auc_high"]) == (ci.low, ci.high)
    d = out["document"]["good"]
    means = frame.groupby("doc_id").agg(label=("label", "first"), s=("good", "mean"))
    assert d["auc"] == pytest.approx(pairwise_auc(means["label"], means["s"]))
    assert d["n"] == 40
    assert d["auc_low"] < d["auc"] < d["auc_high"]
    assert out["passage"]["good"]["auc"] > 0.8 > out["passage"]["noise"]["auc"]
    json.dumps(out, allow_nan=False)


def test_evaluate_without_documents():
    frame = _scores_frame().drop(columns="doc_id")
    out = evaluate(frame, ["good"], n_bootstrap=100)
    assert set(out) == {"passage", "notes"}
    ci = bootstrap_ci(frame["label"], frame["good"], n_resamples=100)
    assert (out["passage"]["good"]["auc_low"], out["passage"]["good"]["auc_high"]) == \
        (ci.low, ci.high)


def test_evaluate_leaves_out_missing_scores_and_excluded_rows():
    frame = _scores_frame()
    frame["good"] = frame["good"].astype(object)
    frame.loc[[3, 7, 11], "good"] = None
    frame.loc[[4], "good"] = np.nan
    train = {"p0", "p1", "p2", "p20"}
    out = evaluate(frame, ["good", "noise"], n_bootstrap=50, exclude={"good": train})
    kept = frame[frame["good"].notna() & ~frame["id"].isin(train)]
    assert out["passage"]["good"]["n"] == len(frame) - 8
    assert out["passage"]["good"]["auc"] == pytest.approx(
        pairwise_auc(kept["label"], kept["good"].astype(float)))
    assert out["passage"]["noise"]["n"] == len(frame)  # other methods keep every row
    assert "good: 4 of 200 passages have no score and are left out" in out["notes"]
    assert "good: 4 training rows left out" in out["notes"]
    # documents average the passages that remain
    means = kept.assign(good=kept["good"].astype(float)).groupby("doc_id").agg(
        label=("label", "first"), s=("good", "mean"))
    assert out["document"]["good"]["auc"] == pytest.approx(
        pairwise_auc(means["label"], means["s"]))


def test_evaluate_single_class():
    frame = _scores_frame()
    frame["label"] = 1
    out = evaluate(frame, ["good"], n_bootstrap=10)
    assert out["passage"] == {} and out["document"] == {}
    assert any("passage level: all 200 passages have label 1" in n for n in out["notes"])
    assert any("document level: all 40 documents have label 1" in n for n in out["notes"])


def test_evaluate_single_class_after_leaving_rows_out():
    frame = _scores_frame().drop(columns="doc_id")
    frame.loc[frame["label"] == 0, "good"] = np.nan
    out = evaluate(frame, ["good", "noise"], n_bootstrap=10)
    assert "good" not in out["passage"] and "noise" in out["passage"]
    assert any(n.startswith("good: the ") and "one class" in n for n in out["notes"])


def test_evaluate_degenerate_bootstrap_gives_null_bounds():
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "doc_id": ["x", "x", "y", "y"],
                          "label": [1, 1, 0, 0], "m": [0.9, 0.8, 0.1, 0.2]})
    out = evaluate(frame, ["m"], n_bootstrap=100)
    # two documents: half the resamples draw the same one twice
    assert out["passage"]["m"]["auc"] == 1.0
    assert out["passage"]["m"]["auc_low"] is None and out["passage"]["m"]["auc_high"] is None
    assert any("no confidence interval" in n for n in out["notes"])
    json.dumps(out, allow_nan=False)


def test_a_label_held_by_one_document_gives_one_note_and_no_resampling(monkeypatch):
    """An audit of one book against clean books: every resample holding both labels holds
    that book, about a third hold none of it, so the interval was always refused, with a
    note on skipped resamples for each method and level."""
    from copyprobe.evaluation import metrics

    frame = _scores_frame()
    one = frame[(frame["label"] == 0) | (frame["doc_id"] == frame.loc[frame["label"] == 1, "doc_id"].iloc[0])]
    monkeypatch.setattr(metrics, "bootstrap_ci", lambda *a, **k: pytest.fail("resampled"))
    out = evaluate(one, ["good", "noise"], n_bootstrap=200)
    assert out["notes"] == ["no confidence intervals: only 1 document has label 1 (member; suspect, in an audit); "
                            "the bootstrap resamples whole documents and needs at least 2 with each label"]
    for level in ("passage", "document"):
        for m in ("good", "noise"):
            assert out[level][m]["auc_low"] is None and out[level][m]["auc_high"] is None
    assert out["passage"]["good"]["auc"] == pytest.approx(roc_auc_score(one["label"], one["good"]))
    assert out["document"]["good"]["n"] == one["doc_id"].nunique()

    rows = one.drop(columns="doc_id")  # no documents: a single row with a label
    lone = rows[rows["label"] == 0].assign(label=lambda f: [1] + [0] * (len(f) - 1))
    out = evaluate(lone, ["good"], n_bootstrap=200)
    assert out["notes"] == ["no confidence intervals: only 1 passage has label 1 (member; suspect, in an audit); "
                            "the bootstrap resamples whole passages and needs at least 2 with each label"]
    assert evaluate(one, ["good"], n_bootstrap=0)["notes"] == []  # nothing asked, nothing said


def test_evaluate_without_labels():
    frame = _scores_frame().drop(columns="label")
    assert evaluate(frame, ["good"]) == {"passage": {}, "document": {},
                                         "notes": ["no labels; metrics skipped"]}


def test_evaluate_errors():
    frame = _scores_frame()
    with pytest.raises(DataError, match="no score column for method"):
        evaluate(frame, ["missing"])
    bad = frame.astype({"label": object})
    bad.loc[5, "label"] = None
    with pytest.raises(DataError, match="1 of 200 rows have no label"):
        evaluate(bad, ["good"])
    bad = frame.copy()
    bad.loc[0, "label"] = 1 - bad.loc[0, "label"]
    with pytest.raises(DataError, match="document 'd0' has passages with different labels"):
        evaluate(bad, ["good"])


# -- decisions ---------------------------------------------------------------------------

@pytest.mark.parametrize("beta", [0.1, 1.0, 2.0])
def test_precision_recall_fbeta(beta):
    rng = np.random.default_rng(int(beta * 10))
    y = rng.integers(0, 2, 200)
    d = np.where(rng.random(200) < 0.7, y, 1 - y)
    tp = int(((d == 1) & (y == 1)).sum())
    fp = int(((d == 1) & (y == 0)).sum())
    fn = int(((d == 0) & (y == 1)).sum())
    p, r = tp / (tp + fp), tp / (tp + fn)
    f = (1 + beta**2) * p * r / (beta**2 * p + r)
    got = precision_recall_fbeta(y, d, beta=beta)
    assert got == pytest.approx((p, r, f))
    assert got.precision == pytest.approx(p) and got.fbeta == pytest.approx(f)


def test_precision_recall_fbeta_edge_cases():
    assert precision_recall_fbeta([1, 0, 1], [0, 0, 0]) == (0.0, 0.0, 0.0)
    with pytest.raises(DataError, match="decisions must be 0 or 1"):
        precision_recall_fbeta([1, 0], [1, 2])
    with pytest.raises(ConfigError, match="beta must be positive"):
        precision_recall_fbeta([1, 0], [1, 0], beta=0)


def test_bootstrap_of_a_single_group_has_no_interval():
    # the group holds both classes, so each resample has an AUC, always the same one
    y, s = [0, 1, 0, 1], [0.0, 1.0, 2.0, 3.0]
    assert roc_auc(y, s) == 0.75
    ci = bootstrap_ci(y, s, groups=["doc"] * 4, n_resamples=50)
    assert not ci.ok and ci.n_degenerate == 50
    assert not bootstrap_ci([1], [0.5], n_resamples=5).ok  # one row, no groups
    assert bootstrap_ci(y, s, groups=["a", "a", "b", "b"], n_resamples=200, seed=0).n_degenerate < 200


def test_bootstrap_single_class_input_is_all_degenerate():
    ci = bootstrap_ci([1, 1, 1], [0.1, 0.2, 0.3], n_resamples=20)
    assert not ci.ok and ci.n_degenerate == 20


def test_evaluate_in_threads_equals_one_method_at_a_time(monkeypatch):
    from copyprobe.evaluation import metrics

    frame = _scores_frame()
    rng = np.random.default_rng(5)
    for name in ("a", "b", "c"):
        frame[name] = rng.normal(size=len(frame)) + 0.3 * frame["label"]
    frame["b"] = frame["b"].astype(object)
    frame.loc[[2, 9], "b"] = None  # notes from one method among the others'
    methods = ["good", "a", "b", "noise", "c"]
    pools = []

    class Counted(metrics.ThreadPoolExecutor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            pools.append(self._max_workers)

    monkeypatch.setattr(metrics, "ThreadPoolExecutor", Counted)
    monkeypatch.setattr(metrics.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(metrics, "THREADED_CELLS", len(frame) * 200 + 1)  # one row short: no threads
    serial = evaluate(frame, methods, n_bootstrap=200, seed=3, exclude={"c": {"p1"}})
    assert pools == []
    monkeypatch.setattr(metrics, "THREADED_CELLS", len(frame) * 200)
    metrics._seeded_counts.cache_clear()
    threaded = evaluate(frame, methods, n_bootstrap=200, seed=3, exclude={"c": {"p1"}})
    assert pools == [4]
    assert json.dumps(threaded) == json.dumps(serial)  # values, keys in order, notes in order
    assert threaded["notes"] == ["b: 2 of 200 passages have no score and are left out", "c: 1 training rows left out"]


def test_the_shared_bootstrap_draw_is_the_seeded_draw_and_read_only():
    from copyprobe.evaluation.metrics import _draw_counts, _seeded_counts

    counts = _seeded_counts(11, 50, 30)
    assert np.array_equal(counts, _draw_counts(np.random.default_rng(11), 50, 30))
    assert (counts.sum(axis=1) == 50).all() and _seeded_counts(11, 50, 30) is counts
    with pytest.raises(ValueError):
        counts[0, 0] = 7
