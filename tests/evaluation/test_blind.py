"""Blind baseline guard: fires on a shifted member/non-member split, quiet on a random one."""

from __future__ import annotations

import json
import math
import random
import textwrap

import numpy as np
import pytest

from copyprobe.errors import ConfigError, DataError
from copyprobe.evaluation.blind import (
    BLIND_AUC_THRESHOLD,
    blind_baseline,
    blind_warning,
    date_features,
    text_features,
    within_fold_auc,
)

SUBJECTS = ["the captain", "a merchant", "the old sailor", "my neighbour", "the clerk", "a widow",
            "the engineer", "our teacher", "the farmer", "a stranger"]
VERBS = ["walked to", "wrote about", "looked at", "spoke of", "returned from", "thought of",
         "dreamed of", "argued over", "laughed at", "waited for"]
OBJECTS = ["the harbour", "the market", "a letter", "the river", "the station", "a garden",
           "the church", "the hill", "a small house", "the bridge"]
TAILS = ["before dinner.", "in the rain.", "with some care.", "for a long time.", "at dawn.",
         "without a word.", "once more.", "after the storm.", "in silence.", "by the window."]

OLD_TOPIC = ["the whaling ship", "the steam engine", "the telegraph office", "the horse carriage",
             "the gas lamps", "the parliament of the queen"]
NEW_TOPIC = ["the smartphone app", "the cloud server", "the electric scooter", "the streaming service",
             "the social media feed", "the video call"]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"


def passage(rng: random.Random, k: int = 4) -> str:
    return " ".join(sentence(rng) for _ in range(k))


def shifted_dataset(n_per_class: int = 60, seed: int = 1) -> tuple[list[str], list[int]]:
    """Members: 1800s texts about steam and whaling; non-members: 2024 texts about apps."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n_per_class):
        texts.append(f"In {rng.choice(MONTHS)} {rng.randint(1820, 1889)}, {passage(rng, 2)} "
                     f"Everyone spoke of {rng.choice(OLD_TOPIC)}. {passage(rng, 1)}")
        labels.append(1)
        texts.append(f"In {rng.choice(MONTHS)} 2024, {passage(rng, 2)} "
                     f"Everyone spoke of {rng.choice(NEW_TOPIC)}. {passage(rng, 1)}")
        labels.append(0)
    return texts, labels


def homogeneous_dataset(n: int = 120, seed: int = 2) -> tuple[list[str], list[int]]:
    """One pool of shuffled sentences; labels assigned by a random split."""
    rng = random.Random(seed)
    texts = [passage(rng, 4) for _ in range(n)]
    labels = [1] * (n // 2) + [0] * (n - n // 2)
    rng.shuffle(labels)
    return texts, labels


def test_warning_fires_on_shifted_dataset():
    texts, labels = shifted_dataset()
    result = blind_baseline(texts, labels, seed=0)
    assert result["auc"] >= 0.95
    assert result["auc_low"] is not None and result["auc_low"] <= result["auc"] <= result["auc_high"]
    assert result["n"] == 120 and result["n_members"] == 60 and result["n_nonmembers"] == 60
    assert result["folds"] == 5 and result["grouped"] is False
    assert "TF-IDF" in result["features"]
    assert set(result["components"]) == {"char_ngrams", "words", "dates", "length_date"}
    assert result["signal"] is True and result["no_signal"] is None
    # the years and topic words alone give it away
    assert result["components"]["length_date"] >= 0.9
    assert result["warning"] is not None and "WARNING" in result["warning"]
    # with a best method below it, the warning says so
    message = blind_warning(result["auc"], 0.8)
    assert message is not None and "best method (0.80)" in message


def test_quiet_on_random_split_of_homogeneous_corpus():
    texts, labels = homogeneous_dataset()
    result = blind_baseline(texts, labels, seed=0)
    assert result["auc"] < BLIND_AUC_THRESHOLD
    assert abs(result["auc"] - 0.5) < 0.15
    assert result["warning"] is None
    assert result["signal"] is False and result["no_signal"].startswith("no signal")
    # a method that carries real signal keeps the warning quiet
    assert blind_warning(result["auc"], 0.75) is None


def test_grouped_folds_keep_documents_together():
    # every document's passages are near-duplicates: without groups the classifier would
    # recognise documents it saw in training; with groups it cannot
    rng = random.Random(3)
    texts, labels, groups = [], [], []
    for d in range(40):
        base = passage(rng, 5)
        label = d % 2
        for p in range(5):
            texts.append(base + f" Part {p}.")
            labels.append(label)
            groups.append(f"doc{d}")
    ungrouped = blind_baseline(texts, labels, seed=0)
    grouped = blind_baseline(texts, labels, groups=groups, seed=0)
    assert grouped["grouped"] is True
    assert ungrouped["auc"] > 0.8  # recognises documents seen in other folds
    assert ungrouped["warning"] is not None
    assert grouped["auc"] < BLIND_AUC_THRESHOLD
    assert grouped["auc_low"] < 0.5 < grouped["auc_high"]  # documents resampled: a wide interval
    assert grouped["warning"] is None


def test_blind_warning_rules():
    assert blind_warning(None, 0.9) is None
    assert blind_warning(float("nan"), 0.9) is None
    assert blind_warning(0.69, None) is None
    assert blind_warning(0.70, None) is not None  # at the threshold
    assert blind_warning(0.60, 0.65) is None
    above = blind_warning(0.60, 0.55)
    assert above is not None and "0.55" in above and "0.60" in above
    assert "\n" not in blind_warning(0.9, 0.95)


def test_too_few_examples_is_skipped_not_crashed():
    result = blind_baseline(["a b c", "d e f", "g h i"], [1, 0, 0])
    assert result["auc"] is None and "skipped" in result and result["warning"] is None


@pytest.mark.parametrize(
    "texts,labels,kwargs,error",
    [
        (["a", "b"], [1], {}, DataError),
        (["a", "b"], [1, 2], {}, DataError),
        (["a", None], [1, 0], {}, DataError),
        (["a", "b"], [1, 0], {"groups": ["x"]}, DataError),
        (["a", "b"], [1, 0], {"folds": 1}, ConfigError),
        (["a", "b"], [1, 0], {"max_texts": 2}, ConfigError),
    ],
)
def test_bad_input_raises_copyprobe_errors(texts, labels, kwargs, error):
    with pytest.raises(error) as info:
        blind_baseline(texts, labels, **kwargs)
    assert "\n" not in str(info.value)


def test_text_features_counts_date_tokens():
    feats = text_features(["On 3 May 1999 and in 2024 we met; see 2020-01-05.", "In 1851 nothing."])
    names = ["log_chars", "log_words", "mean_word_len", "digit_frac", "upper_frac", "punct_frac",
             "years_1900_2099", "years_1000_1899", "month_names", "numeric_dates"]
    row0, row1 = dict(zip(names, feats[0])), dict(zip(names, feats[1]))
    assert row0["years_1900_2099"] == 3 and row0["month_names"] == 1 and row0["numeric_dates"] == 1
    assert row1["years_1000_1899"] == 1 and row1["years_1900_2099"] == 0
    assert math.isclose(row1["log_chars"], np.log1p(len("In 1851 nothing.")))


def test_large_inputs_are_subsampled_by_whole_documents():
    from copyprobe.evaluation.blind import _subsample

    texts, labels = shifted_dataset(n_per_class=60)
    groups = [f"doc{i // 3}" for i in range(len(texts))]  # 40 documents of 3 passages
    result = blind_baseline(texts, labels, groups=groups, max_texts=60, n_bootstrap=200)
    assert result["n"] == 60 and result["n_total"] == 120
    assert result["auc"] > 0.9 and result["warning"] is not None
    keep = _subsample(len(texts), np.asarray(groups, dtype=object), 50, seed=0)
    kept_groups = {groups[i] for i in keep}
    assert len(keep) <= 50 and len(keep) == 3 * len(kept_groups)  # no document split
    assert blind_baseline(texts, labels, max_texts=None, n_bootstrap=200)["n"] == 120


def test_date_feature_is_the_latest_year_against_each_cutoff():
    rows = date_features(["Held on February 18, 2023, in Seoul; first run in 1998.",
                          "Population 1,500,000 and ratio 3.2014; no year here.",
                          "From 1851 to 1999."], cutoffs=(1900, 2000, 2020, 2024))
    # [mentions a year, latest >= 1900, >= 2000, >= 2020, >= 2024]
    assert rows.tolist() == [[1, 1, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 0, 0, 0]]


def test_within_fold_auc_counts_only_pairs_in_the_same_fold():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 60)
    s = rng.normal(size=60).round(1)  # ties included
    folds = rng.integers(0, 4, 60)
    concordant, pairs = 0.0, 0
    for i in range(60):
        for j in range(60):
            if y[i] == 1 and y[j] == 0 and folds[i] == folds[j]:
                pairs += 1
                concordant += 1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0
    assert within_fold_auc(y, s, folds) == pytest.approx(concordant / pairs)
    # a score that only shifts between folds does not move it (pooling would)
    shifted = s + 10 * folds
    assert within_fold_auc(y, shifted, folds) == pytest.approx(concordant / pairs)
    # resample weights: row 0 counted three times equals the data with row 0 repeated
    counts = np.ones((1, 60), dtype=np.int64)
    counts[0, 0] = 3
    rep = np.r_[0, 0, np.arange(60)]
    assert within_fold_auc(y, s, folds, counts, np.arange(60))[0] == pytest.approx(
        within_fold_auc(y[rep], s[rep], folds[rep]))


def unbalanced_null(seed: int) -> tuple[list[str], list[int], list[str]]:
    """117 members in 12 documents and 10 non-members in 4, all drawn from one pool."""
    rng = random.Random(seed)
    texts, labels, groups = [], [], []
    for d, n in enumerate([13, 12, 11, 10, 10, 10, 9, 9, 9, 8, 8, 8]):
        for _ in range(n):
            texts.append(passage(rng, 4))
            labels.append(1)
            groups.append(f"m{d}")
    for d, n in enumerate([4, 3, 2, 1]):
        for _ in range(n):
            texts.append(passage(rng, 4))
            labels.append(0)
            groups.append(f"n{d}")
    return texts, labels, groups


def test_unbalanced_grouped_data_without_signal_reports_no_signal():
    # issue 17: 117 members / 10 non-members gave a blind AUC of 0.14 through pooled grouped CV
    for seed in range(4):
        texts, labels, groups = unbalanced_null(seed)
        result = blind_baseline(texts, labels, groups=groups, seed=seed, n_bootstrap=200)
        assert result["grouped"] and result["n_members"] == 117 and result["n_nonmembers"] == 10
        assert result["signal"] is False and result["no_signal"].startswith("no signal")
        assert result["warning"] is None
        assert "same test fold" in result["validation"]


def test_bundled_wikimia_is_separable_without_a_model():
    import copyprobe

    ds = copyprobe.load_dataset("wikimia:64")
    result = blind_baseline([e.text for e in ds.examples], [e.label for e in ds.examples], n_bootstrap=200)
    # Das, Zhang & Tramer 2024: 0.99 on WikiMIA; the date feature alone nearly gets there
    assert result["auc"] >= 0.9 and result["auc_low"] >= 0.9
    assert result["components"]["dates"] >= 0.9
    assert result["signal"] is True and "WARNING" in result["warning"]


def test_report_context_carries_the_no_signal_reason():
    from copyprobe.reports.sections.blind_baseline import blind_context

    texts, labels, groups = unbalanced_null(0)
    blind = blind_baseline(texts, labels, groups=groups, n_bootstrap=200)
    context = blind_context({"blind_baseline": blind}, [])
    assert context["no_signal"] == blind["no_signal"] and context["no_signal"].startswith("no signal")
    assert "same test fold" in context["validation"] and context["warning"] is None


# -- the same baseline, computed faster and once per data set (issue 34) ----------------

TRICKY = ["a", "ab cd\tef\n\ngh", "x\u00a0y  z", "é\u0301 ü ß ẞ İstanbul", "I", "\x00 nul\x00in", "😀 emoji 😀x",
          "Déjà vu — “quoted” text's", "word word word", "A-b_c d.e 1999 2024", "ſ ﬁ Ⅻ ²³", "new\nline\ttab  two"]


@pytest.mark.parametrize("block", [512, 7])  # texts counted together: one block, and several
def test_ngram_counts_equal_scikit_learns_vectorizers(monkeypatch, block):
    from sklearn.feature_extraction.text import CountVectorizer

    from copyprobe.evaluation import blind

    monkeypatch.setattr(blind, "_TEXTS_PER_BLOCK", block)
    texts = TRICKY + shifted_dataset(20)[0]
    chars, words = blind.ngram_counts(texts)
    for ours, vectorizer in ((chars, CountVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=False)),
                             (words, CountVectorizer(analyzer="word", ngram_range=(1, 2),
                                                     token_pattern=r"(?u)\b\w+\b"))):
        theirs = vectorizer.fit_transform(texts)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        assert (ours != theirs).nnz == 0


def test_fold_tfidf_equals_a_vectorizer_fitted_on_the_training_texts(monkeypatch):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from copyprobe.evaluation import blind

    texts = shifted_dataset(30)[0] + TRICKY
    train, test = np.arange(0, len(texts), 3), np.setdiff1d(np.arange(len(texts)), np.arange(0, len(texts), 3))
    chars, _ = blind.ngram_counts(texts)
    for limit in (100_000, 50):  # 50: the most frequent terms of the training part are kept, as max_features does
        monkeypatch.setattr(blind, "MAX_FEATURES", limit)
        ours_train, ours_test = blind._fold_tfidf(chars, train, test)
        vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, max_features=limit,
                                     lowercase=False)
        theirs_train = vectorizer.fit_transform([texts[i] for i in train])
        theirs_test = vectorizer.transform([texts[i] for i in test])
        assert ours_train.shape == theirs_train.shape and ours_test.shape == theirs_test.shape
        assert abs(ours_train - theirs_train).max() < 1e-12 and abs(ours_test - theirs_test).max() < 1e-12


def _per_fold_vectorizers(texts, meta, dates, y, splits, seed):
    """The baseline as it was before issue 34: the vectorizers fitted on each fold's texts."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from copyprobe.evaluation.blind import KINDS

    scores = {kind: np.full(len(y), np.nan) for kind in KINDS}
    for train, test in splits:
        chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, max_features=100_000,
                                lowercase=False)
        words = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True, max_features=100_000,
                                token_pattern=r"(?u)\b\w+\b")
        tr, te = [texts[i] for i in train], [texts[i] for i in test]
        c_tr, c_te, w_tr, w_te = chars.fit_transform(tr), chars.transform(te), words.fit_transform(tr), words.transform(te)
        scaler = StandardScaler().fit(meta[train])
        for kind, (x_tr, x_te) in {
            "combined": (sparse.hstack([c_tr, w_tr, dates[train]]).tocsr(), sparse.hstack([c_te, w_te, dates[test]]).tocsr()),
            "char_ngrams": (c_tr, c_te), "words": (w_tr, w_te), "dates": (dates[train], dates[test]),
            "length_date": (scaler.transform(meta[train]), scaler.transform(meta[test])),
        }.items():
            model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed).fit(x_tr, y[train])
            scores[kind][test] = model.decision_function(x_te)
    return scores


@pytest.mark.parametrize("data", ["shifted", "unbalanced"])
def test_result_equals_the_per_fold_vectorizers(monkeypatch, data):
    from copyprobe.evaluation import blind

    if data == "shifted":
        texts, labels = shifted_dataset(40)
        groups = None
    else:
        texts, labels, groups = unbalanced_null(1)
    fast = blind_baseline(texts, labels, groups=groups, n_bootstrap=300)
    monkeypatch.setattr(blind, "_out_of_fold", _per_fold_vectorizers)
    slow = blind_baseline(texts, labels, groups=groups, n_bootstrap=300)
    assert fast == slow


def test_cached_baseline_is_reused_and_recomputed_when_the_data_changes(tmp_path, monkeypatch):
    from copyprobe.evaluation import blind

    texts, labels = shifted_dataset(20)
    computed = []
    real = blind.blind_baseline

    def counting(*args, **kwargs):
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(blind, "blind_baseline", counting)
    first = blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=tmp_path)
    again = blind.cached_blind_baseline(list(texts), list(labels), None, 0, cache_dir=tmp_path)
    assert len(computed) == 1 and again == first == real(texts, labels, seed=0)
    assert len(list((tmp_path / "blind").glob("*.json"))) == 1
    flipped = [1 - labels[0]] + labels[1:]
    for changed in ((texts[:-1] + [texts[-1] + "!"], labels, None, 0), (texts, flipped, None, 0),
                    (texts, labels, [f"d{i // 2}" for i in range(len(texts))], 0), (texts, labels, None, 1)):
        blind.cached_blind_baseline(*changed, cache_dir=tmp_path)
    assert len(computed) == 5
    # a damaged or foreign cache file is recomputed and replaced, never trusted
    path = next((tmp_path / "blind").glob(f"{blind.baseline_key(texts, labels, None, 0)}.json"))
    path.write_text("{not json")
    assert blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=tmp_path) == first and len(computed) == 6
    # an unwritable cache directory costs a recomputation, not the run
    (tmp_path / "file").write_text("")
    assert blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=tmp_path / "file") == first


def test_prefetch_is_taken_by_the_next_call_and_its_errors_reach_the_caller(tmp_path):
    from copyprobe.evaluation import blind

    texts, labels = shifted_dataset(15)
    future = blind.prefetch(texts, labels, None, 0, cache_dir=tmp_path)
    assert blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=tmp_path) == future.result()
    # taken: no longer running (other tests' prefetches that were never taken may remain)
    assert all(running is not future for running in blind._RUNNING.values())
    bad = blind.prefetch(texts, [2] * len(texts), None, 0, cache_dir=tmp_path)
    with pytest.raises(DataError, match="labels must be 0 or 1"):
        blind.cached_blind_baseline(texts, [2] * len(texts), None, 0, cache_dir=tmp_path)
    assert isinstance(bad.exception(), DataError)


def test_detect_and_rescore_compute_the_baseline_once(tmp_path, monkeypatch):
    """detect starts the baseline before scoring; rescore of the run, and a second run on
    the same data, read it back; the metrics equal those of a run with no cache at all."""
    import shutil

    import copyprobe
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.evaluation import blind
    from copyprobe.rescore import rescore

    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    texts, labels = shifted_dataset(20)
    examples = [copyprobe.Example(id=str(i), text=t, label=y) for i, (t, y) in enumerate(zip(texts, labels))]
    fitted = []
    real = blind.blind_baseline
    monkeypatch.setattr(blind, "blind_baseline", lambda *a, **k: fitted.append(1) or real(*a, **k))
    run = copyprobe.detect(FakeBackend(), examples, ["loss"], out=tmp_path / "run", cache=False, n_bootstrap=50)
    assert len(fitted) == 1
    rescore(tmp_path / "run")
    copyprobe.detect(FakeBackend(), examples, ["zlib"], cache=False, n_bootstrap=50)
    assert len(fitted) == 1
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == run.metrics
    shutil.rmtree(tmp_path / "cache")
    monkeypatch.setattr(blind, "prefetch", lambda *a, **k: pytest.fail("prefetch called"))
    from copyprobe.detect import ScoringCollection

    monkeypatch.setattr(ScoringCollection, "begin", lambda self: None)
    uncached = copyprobe.detect(FakeBackend(), examples, ["loss"], cache=False, n_bootstrap=50)
    assert len(fitted) == 2 and uncached.metrics == run.metrics


def test_a_prefetch_running_at_exit_stops_at_its_next_step_and_stores_nothing(tmp_path, monkeypatch):
    """finish_prefetches (run at exit) stops a running prefetch between steps and waits
    for it; afterwards the baseline of the same data is computed as if nothing happened."""
    import threading

    from copyprobe.evaluation import blind

    texts, labels = shifted_dataset(20)
    entered = threading.Event()
    real = blind.text_features

    def slow_features(batch):  # a step that lasts until the program asks the baseline to stop
        entered.set()
        assert blind._STOP.wait(60), "finish_prefetches never asked the prefetch to stop"
        return real(batch)

    monkeypatch.setattr(blind, "text_features", slow_features)
    future = blind.prefetch(texts, labels, None, 0, cache_dir=tmp_path)
    assert entered.wait(60)
    blind.finish_prefetches()
    assert future.done() and isinstance(future.exception(), blind.PrefetchStopped)
    assert not blind._STOP.is_set()  # cleared: later baselines run
    assert not list(tmp_path.glob("blind/*.json"))
    monkeypatch.setattr(blind, "text_features", real)
    assert blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=tmp_path) == blind_baseline(texts, labels)
    blind.finish_prefetches()  # nothing running: returns at once


# A program that exits while the baseline's prefetch is inside C++ code that releases the
# GIL (scipy's FFT stands in for scikit-learn's fit): Python (<=3.13) ends a daemon thread
# that wakes during finalization with pthread_exit, which C++ turns into an abort.
_EXITING_PROGRAM = textwrap.dedent("""
    import sys, threading
    import numpy as np, scipy.fft
    from copyprobe.evaluation import blind
    sys.path.insert(0, {tests!r})
    from test_blind import shifted_dataset

    x = np.random.default_rng(0).random(1 << 21)
    inside = threading.Event()
    stop = getattr(blind, "_STOP", threading.Event())
    real = blind.text_features

    def native_features(batch):
        inside.set()
        while not stop.is_set():
            scipy.fft.fft(x)
        return real(batch)

    blind.text_features = native_features
    texts, labels = shifted_dataset(20)
    blind.prefetch(texts, labels, None, 0, cache_dir={cache!r})
    inside.wait(60)
    sys.exit(0)
""")


def test_a_program_that_exits_during_a_prefetch_exits_cleanly(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("scipy")
    program = _EXITING_PROGRAM.format(tests=str(Path(__file__).parent), cache=str(tmp_path))
    for _ in range(3):  # before finish_prefetches its first try aborted (exit -6)
        proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "terminate called" not in proc.stderr and proc.stderr == "", proc.stderr
    assert not list(tmp_path.glob("blind/*.json"))  # stopped, so nothing half-done was stored


@pytest.mark.parametrize("texts", [
    ["😀 😃", "😄 😁", "😆 😀", "😃 😄", "!! ??", "?? !!"],  # no word in any text: scikit-learn's empty vocabulary
    ["😀 😀", "😃", "😄", "😆", "a b", "c d"],  # words in some folds' texts only: a fold's training part has none
])
def test_texts_without_words_give_a_result_not_an_error(texts):
    result = blind_baseline(texts, [1, 0] * 3, n_bootstrap=50)
    assert result["auc"] is not None and 0 <= result["auc"] <= 1
    assert result["signal"] is False and result["warning"] is None


def test_a_handful_of_texts_claims_no_signal_without_an_interval():
    """4 one-word rows separate perfectly on 2 test pairs; no interval can be drawn, so no
    signal is claimed (it said 'WARNING: ... separates members from non-members')."""
    result = blind_baseline(["word", "other", "third", "fourth"], [1, 0, 1, 0], n_bootstrap=200)
    assert result["auc"] == 1.0 and result["auc_low"] is None
    assert result["signal"] is False and result["warning"] is None
    assert result["no_signal"].startswith("no signal claimed: the within-fold AUC 1.00 rests on too few texts")
    # no resamples asked: the point estimate is all there is, as before
    assert blind_baseline(["word", "other", "third", "fourth"], [1, 0, 1, 0], n_bootstrap=0)["signal"] is True
