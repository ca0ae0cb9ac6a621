"""Audit verdicts: the document is the unit of evidence, the model-free guard withholds a
claim on a difference of style, p-values are uniform when suspect and clean documents are
exchangeable, and too few clean documents give "cannot tell"."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from copyprobe.evaluation import guard as guard_mod
from copyprobe.evaluation.verdicts import audit_verdicts, evenly_spaced, holm, rank_p, t_p, verdicts
from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE, normalise_verdict

BATTERY = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "audit_battery"
WORDS = ("the a of and to in was he she it that with for as on at by from river stone house light road water "
         "field wind boat door hill morning bread window garden evening").split()


def random_doc(rng: random.Random, n_passages: int = 3, words: int = 40) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n_passages)]


def build(docs: dict[str, tuple[int, list[str], list[float | None]]]):
    """docs: name -> (label, passages, scores) as the maps verdicts() takes."""
    scores, doc_of, labels, texts = {}, {}, {}, {}
    for name, (label, passages, values) in docs.items():
        prefix = "suspect" if label else "clean"
        for j, (text, value) in enumerate(zip(passages, values)):
            i = f"{prefix}:{name}:{j}"
            scores[i], doc_of[i], labels[i], texts[i] = value, f"{prefix}:{name}", label, text
    return scores, doc_of, labels, texts


def test_rank_and_t_p_values_against_their_definitions():
    clean = [0.3, 1.2, -0.4, 0.8, 0.1, 0.5]
    assert rank_p(2.0, clean) == pytest.approx(1 / 7)
    assert rank_p(0.5, clean) == pytest.approx(4 / 7)  # the suspect itself + the clean 0.5, 0.8, 1.2
    x = 2.0
    m, s, k = np.mean(clean), np.std(clean, ddof=1), len(clean)
    expected = stats.t.sf((x - m) / (s * math.sqrt(1 + 1 / k)), df=k - 1)
    assert t_p(x, clean) == pytest.approx(expected, rel=1e-12)


def test_holm_matches_the_step_down_rule():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, 1*0.04, running max
    expected = {3: 0.02, 0: 0.03, 2: 0.06, 1: 0.06}
    got = holm(p)
    for i, v in expected.items():
        assert got[i] == pytest.approx(v)


def test_evenly_spaced_indices():
    assert evenly_spaced(10, 3) == [0, 4, 9] or evenly_spaced(10, 3) == [0, 5, 9]
    assert evenly_spaced(5, 5) == [0, 1, 2, 3, 4]
    assert len(set(evenly_spaced(7, 6))) == 6


def test_document_score_uses_equal_passages_and_ignores_pooled_passage_count():
    """A suspect with 30 passages is not stronger evidence than one with 3: the test is
    over documents, each represented by the same number of passages."""
    rng = random.Random(0)
    docs = {f"c{i}": (0, random_doc(rng), [0.1 * i, 0.1 * i + 0.05, 0.1 * i - 0.05]) for i in range(9)}
    docs["book"] = (1, random_doc(rng, 30), [2.0] * 30)
    report = verdicts(*build(docs)[:3], alpha=0.05, texts=build(docs)[3], method="loss")
    row = report["documents"][0]
    assert report["test"]["passages_per_document"] == 3 and row["n_used"] == 3
    assert row["p"] == pytest.approx(1 / 10)  # the best a rank test can do with 9 clean documents
    assert row["verdict"] == CANNOT_TELL and "at least 19 documents" in row["reason"]


def test_one_vs_one_is_cannot_tell_with_what_to_supply():
    rng = random.Random(1)
    docs = {"draft": (0, random_doc(rng), [0.0, 0.1, 0.0]), "pastiche": (1, random_doc(rng), [3.0, 3.0, 3.0])}
    scores, doc_of, labels, texts = build(docs)
    for test in ("rank", "t"):
        report = verdicts(scores, doc_of, labels, 0.01, texts, test=test, method="loss")
        row = report["documents"][0]
        assert row["verdict"] == CANNOT_TELL, test
        assert "give at least" in row["reason"] or "needs at least" in row["reason"]
        assert report["summary"].startswith("Cannot tell whether the model was trained on pastiche")


def _battery(style: str, n: int) -> list[str]:
    return [(BATTERY / style / f"{style}-{i:02d}.txt").read_text() for i in range(1, n + 1)]


def _paragraph_passages(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()][:2]


def test_guard_withholds_a_claim_on_a_pure_style_difference():
    """A King James pastiche nobody trained on, scored far above 24 modern drafts (as a
    model's likelihood does for a familiar style): the test alone would claim it; the
    guard sees that the style alone sets it apart and says cannot tell."""
    docs = {f"modern{i}": (0, _paragraph_passages(t), [0.01 * i, 0.01 * i])
            for i, t in enumerate(_battery("modern", 24))}
    docs["pastiche"] = (1, _paragraph_passages(_battery("archaic", 1)[0]), [5.0, 5.0])
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.05, texts, method="loss")
    row = report["documents"][0]
    assert row["p"] == pytest.approx(1 / 25) and row["p"] <= 0.05  # the test alone would claim
    assert row["style"]["rank"] == 1  # farther from the drafts than any draft is from the others
    assert row["verdict"] == CANNOT_TELL and "style" in row["reason"]
    assert "same genre and style" in row["reason"]


def test_guard_lets_through_a_document_of_the_clean_documents_style():
    """The same extreme score on a modern draft among modern drafts is evidence, unless it
    happens to be the odd one out in style; pick the draft whose style is most typical."""
    texts_all = _battery("modern", 24)
    passages = {f"m{i}": _paragraph_passages(t) for i, t in enumerate(texts_all)}
    names = list(passages)
    standing = {}
    for name in names:
        others = [o for o in names if o != name]
        standing[name] = guard_mod.guard(passages, [name], others)[name]["style"].rank
    typical = sorted(names, key=lambda n: standing[n])[len(names) // 2]
    docs = {n: (1 if n == typical else 0, passages[n], [5.0, 5.0] if n == typical else [0.01 * k, 0.0])
            for k, n in enumerate(names)}
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.05, texts, method="loss")
    row = report["documents"][0]
    assert row["verdict"] == EVIDENCE, row["reason"]
    assert row["style"]["rank"] > 1 and "by style alone it ranks" in row["reason"]
    assert report["summary"].startswith("Evidence that the model was trained on")


def test_p_values_are_uniform_when_suspect_and_clean_are_exchangeable():
    """Documents of one kind, scores with a document effect and passage noise: the
    suspect is any one of them. t p-values are uniform (KS); the rank p-value is at most
    j/(k+1) with probability j/(k+1); 'evidence' comes no more often than alpha."""
    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    t_values, rank_hits, claims, trials = [], 0, 0, 300
    for _ in range(trials):
        effects = nrng.normal(0, 1, 20)
        docs = {}
        for d in range(20):
            values = list(effects[d] + nrng.normal(0, 0.5, 3))
            docs[f"d{d}"] = (1 if d == 0 else 0, random_doc(rng, 3, 20), values)
        scores, doc_of, labels, texts = build(docs)
        rep_t = verdicts(scores, doc_of, labels, 0.05, texts, test="t", method="s")
        rep_r = verdicts(scores, doc_of, labels, 0.05, texts, test="rank", method="s")
        t_values.append(rep_t["documents"][0]["p"])
        rank_hits += rep_r["documents"][0]["p"] <= 4 / 20 + 1e-12
        claims += rep_t["documents"][0]["verdict"] == EVIDENCE
    assert stats.kstest(t_values, "uniform").pvalue > 0.01
    # P(rank p <= 4/20) = 4/20 = 0.2: 300 trials, a 99.9% binomial band
    assert stats.binom.ppf(0.0005, trials, 0.2) <= rank_hits <= stats.binom.ppf(0.9995, trials, 0.2)
    assert claims <= stats.binom.ppf(0.999, trials, 0.05)


def test_failed_passages_and_unscored_documents():
    rng = random.Random(3)
    docs = {f"c{i}": (0, random_doc(rng), [0.1 * i, 0.0, 0.1]) for i in range(5)}
    docs["broken"] = (1, random_doc(rng), [None, None, float("nan")])
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.05, texts, method="decop")
    row = report["documents"][0]
    assert row["verdict"] == CANNOT_TELL and row["n_failed"] == 3 and "could be scored" in row["reason"]


def test_several_suspects_get_holm_and_a_collection_verdict():
    rng = random.Random(5)
    docs = {f"c{i}": (0, random_doc(rng), [0.1 * i] * 3) for i in range(30)}
    for j in range(3):
        docs[f"s{j}"] = (1, random_doc(rng), [9.0 + j] * 3)
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.05, texts, method="loss")
    rows = report["documents"]
    assert all(r["p"] == pytest.approx(1 / 31) for r in rows)
    assert sorted(r["p_adjusted"] for r in rows) == pytest.approx([3 / 31] * 3)  # Holm: 3p, 2p, p -> running max
    # 3/31 > 0.05 after adjustment whatever the scores: no document could get evidence, so
    # "cannot tell" with what would do (was "no evidence", as if these scores had decided it)
    assert all(r["verdict"] == CANNOT_TELL for r in rows)
    assert all("smallest Holm-adjusted p-value a document can get is 0.0968" in r["reason"] for r in rows)
    assert all("give at least 59 documents" in r["reason"] for r in rows)  # 3/(59 + 1) = 0.05
    assert report["test"]["min_p"] == pytest.approx(3 / 31) and report["test"]["clean_needed"] == 59
    coll = report["collection"]
    # the suspects whose own guard trips are left out of the group; the others are tested
    group = [f"s{j}" for j in range(3) if f"s{j}" not in coll["style_outliers"]]
    assert coll["n_tested"] == len(group) and coll["n_suspect"] == 3
    expected = stats.mannwhitneyu([docs[s][2][0] for s in group], [docs[f"c{i}"][2][0] for i in range(30)],
                                  alternative="greater", method="exact").pvalue
    assert coll["p"] == pytest.approx(expected)
    assert coll["verdict"] in (EVIDENCE, CANNOT_TELL) and coll["p"] <= 0.05


def test_collection_leaves_out_style_outliers_and_tests_the_rest():
    """A suspect in another style is left out of the group by its text alone; the rest,
    like the clean documents in style, make the group claim."""
    rng = random.Random(11)
    archaic = "thou thee hath unto verily behold wherefore shalt art doth saith lo yea".split()
    docs = {f"c{i}": (0, random_doc(rng), [0.1 * (i % 7)] * 3) for i in range(20)}
    for j in range(6):
        docs[f"s{j}"] = (1, random_doc(rng), [5.0] * 3)
    docs["odd"] = (1, [" ".join(rng.choice(archaic) for _ in range(40)) for _ in range(3)], [9.0] * 3)
    scores, doc_of, labels, texts = build(docs)
    coll = verdicts(scores, doc_of, labels, 0.01, texts, method="loss", test="t", guard_test="t")["collection"]
    assert "odd" in coll["style_outliers"] and coll["n_tested"] == 7 - len(coll["style_outliers"])
    group = [f"s{j}" for j in range(6) if f"s{j}" not in coll["style_outliers"]]
    expected = stats.mannwhitneyu([5.0] * len(group), [docs[f"c{i}"][2][0] for i in range(20)],
                                  alternative="greater", method="exact").pvalue
    assert coll["p"] == pytest.approx(expected) and coll["verdict"] == EVIDENCE
    assert "left out of the group" in coll["reason"] and "odd" in coll["reason"]


def test_audit_verdicts_leaves_out_training_rows_and_keeps_order():
    rows = []
    texts = {}
    rng = random.Random(9)
    for d in range(6):
        for j in range(2):
            i = f"clean:c{d}:{j}"
            rows.append({"id": i, "doc_id": f"clean:c{d}", "label": 0, "loss": float(d)})
            texts[i] = " ".join(rng.choice(WORDS) for _ in range(30))
    for j in range(3):
        i = f"suspect:s:{j}"
        rows.append({"id": i, "doc_id": "suspect:s", "label": 1, "loss": 100.0 if j == 0 else -1.0})
        texts[i] = " ".join(rng.choice(WORDS) for _ in range(30))
    report = audit_verdicts(rows, "loss", {"loss": ["suspect:s:0"]}, 0.05, texts)
    row = report["documents"][0]
    assert row["n_passages"] == 2 and row["score"] == pytest.approx(-1.0)


@pytest.mark.parametrize("old,new", [("seen", EVIDENCE), ("inconclusive", CANNOT_TELL), ("not detected", NO_EVIDENCE),
                                     ("untested", CANNOT_TELL), ("member", EVIDENCE), ("evidence", EVIDENCE)])
def test_old_verdict_words_map_to_the_vocabulary(old, new):
    assert normalise_verdict(old) == new


def test_one_suspect_in_another_style_cannot_carry_the_collection_claim():
    """Three suspects; one of them is a King James pastiche scoring above all 21 modern
    drafts. It is left out of the group by its text alone, so the group claim rests on the
    two modern suspects: none when they score like the clean drafts, a claim naming the
    pastiche as left out when they score above them."""
    modern = _battery("modern", 24)
    for drafts_score, expected in ((0.1, NO_EVIDENCE), (4.0, EVIDENCE)):
        docs = {f"modern{i}": (0, _paragraph_passages(t), [0.01 * i, 0.01 * i]) for i, t in enumerate(modern[:21])}
        docs["pastiche"] = (1, _paragraph_passages(_battery("archaic", 1)[0]), [5.0, 5.0])
        for j, t in enumerate(modern[21:23]):
            docs[f"draft{j}"] = (1, _paragraph_passages(t), [drafts_score, drafts_score])
        scores, doc_of, labels, texts = build(docs)
        coll = verdicts(scores, doc_of, labels, 0.05, texts, method="loss")["collection"]
        assert coll["style_outliers"] == ["pastiche"] and coll["n_tested"] == 2
        assert coll["verdict"] == expected and "pastiche" in coll["reason"]


def test_passages_to_read_takes_the_shortest_document_and_the_cap():
    from copyprobe.evaluation.verdicts import passages_to_read

    chosen = passages_to_read({"long": 700, "short": 3, "mid": 10}, cap=64)
    assert {d: len(v) for d, v in chosen.items()} == {"long": 3, "short": 3, "mid": 3}
    assert chosen["long"] == evenly_spaced(700, 3) and chosen["short"] == [0, 1, 2]
    capped = passages_to_read({"a": 700, "b": 200}, cap=64)
    assert [len(v) for v in capped.values()] == [64, 64] and capped["a"] == evenly_spaced(700, 64)
    assert [len(v) for v in passages_to_read({"a": 700, "b": 200}, cap=None).values()] == [200, 200]


def test_a_first_ranked_document_is_said_to_be_above_every_clean_one():
    """The sentence says what happened: above all 6 clean documents, not significant with
    6 of them, and how many clean documents the same standing would need."""
    rng = random.Random(2)
    clean = [0.3, 1.2, -0.4, 0.8, 0.1, 0.5]
    docs = {f"c{i}": (0, random_doc(rng), [v] * 3) for i, v in enumerate(clean)}
    docs["s"] = (1, random_doc(rng), [2.2] * 3)
    scores, doc_of, labels, texts = build(docs)
    row = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss")["documents"][0]
    z = (2.2 - np.mean(clean)) / np.std(clean, ddof=1)
    needed = next(n for n in range(7, 1000) if stats.t.sf(z / math.sqrt(1 + 1 / n), n - 1) <= 0.01)
    assert row["verdict"] == NO_EVIDENCE and row["rank"] == 1 and 0.01 < row["p"] < 0.05
    assert "above all 6 clean documents" in row["reason"] and "within the range" not in row["reason"]
    assert f"significant with at least {needed} clean documents" in row["reason"]


def test_a_standing_no_clean_set_can_make_significant_says_so():
    rng = random.Random(4)
    clean = [0.3, 1.2, -0.4, 0.8, 0.1, 0.5]
    docs = {f"c{i}": (0, random_doc(rng), [v] * 3) for i, v in enumerate(clean)}
    docs["s"] = (1, random_doc(rng), [0.9] * 3)
    scores, doc_of, labels, texts = build(docs)
    row = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss")["documents"][0]
    assert row["verdict"] == NO_EVIDENCE and row["rank"] == 2
    assert "within the range of the clean documents" in row["reason"] and "1 of the 6 clean documents scores" in row["reason"]
    assert "no number of clean documents would make this standing significant" in row["reason"]
    z = (0.9 - np.mean(clean)) / np.std(clean, ddof=1)
    assert f"it is {z:.2f} standard deviations of the clean documents above their mean" in row["reason"]
    # a suspect below the clean documents is said to be below them, not "-1.90 ... above"
    docs["s"] = (1, docs["s"][1], [-1.5] * 3)
    scores, doc_of, labels, texts = build(docs)
    row = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss")["documents"][0]
    z = (-1.5 - np.mean(clean)) / np.std(clean, ddof=1)
    assert z < 0 and f"it is {-z:.2f} standard deviations of the clean documents below their mean" in row["reason"]
    assert "-" not in row["reason"].split("it is ")[1].split(" standard")[0]


def test_t_guard_measures_how_far_a_suspect_stands_out():
    """Farther than every clean document by a hair: the rank guard withholds the claim (its
    smallest p, 1/7, is above the guard level), the t guard does not; far off in style, both do."""
    from copyprobe.evaluation.guard import rank_standing

    clean = [0.50, 0.52, 0.48, 0.51, 0.49, 0.50]
    near, far = rank_standing(0.5205, clean, "t"), rank_standing(0.9, clean, "t")
    assert near.rank == far.rank == 1 and near.test == "t"
    assert near.p_value == pytest.approx(stats.t.sf((0.5205 - np.mean(clean)) / (np.std(clean, ddof=1) * math.sqrt(7 / 6)), 5))
    assert rank_standing(0.5205, clean).p_value == pytest.approx(1 / 7)
    from copyprobe.evaluation.verdicts import _guard_trips
    assert _guard_trips(rank_standing(0.5205, clean), 0.001) and not _guard_trips(near, 0.001)
    assert _guard_trips(far, 0.001)


def test_t_guard_ignores_passage_lengths_within_ten_percent():
    """Letters cut to one token budget differ by a few percent in words per passage: the t
    guard's length part stays quiet (material False) however they rank; a 25% difference
    counts. The rank guard keeps its earlier rule."""
    rng = random.Random(21)
    def doc(words):
        return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(3)]
    lengths = [40, 41, 39, 40, 42, 40]
    for suspect_words, material in ((43, False), (52, True)):
        docs = {f"c{i}": (0, doc(w), [0.0 + 0.01 * i] * 3) for i, w in enumerate(lengths)}
        docs["s"] = (1, doc(suspect_words), [5.0] * 3)
        scores, doc_of, labels, texts = build(docs)
        row = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss", guard_test="t")["documents"][0]
        assert row["length"]["rank"] == 1 and row["length"].get("material", True) is material
        if not material:
            assert row["verdict"] == EVIDENCE and "within 10% of the clean documents' length" in row["reason"]
        else:
            assert row["verdict"] == CANNOT_TELL and "passage length" in row["reason"]
        rank_row = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss", guard_test="rank")
        assert rank_row["documents"][0]["verdict"] == CANNOT_TELL  # rank 1 of 7 by length: withheld


def test_tied_clean_scores_get_the_rank_test_not_the_t_test():
    """DE-COP on a model that answers by position scores every clean passage 0.25 (or 0 on
    a few): the t test either has no scale (p = 0 for anything above) or a tiny one (on the
    null battery it claimed a never-seen article at 0.5 against clean 0.25s and 0s); tied
    clean scores get the exact rank test, and with 6 clean documents that cannot claim."""
    assert t_p(0.5, [0.25] * 6) == pytest.approx(1 / 7)
    assert t_p(0.25, [0.25] * 6) == pytest.approx(1.0)
    clean = [0.25] * 20 + [0.0] * 4
    assert prediction_t_p_of(0.5, clean) < 0.01  # what the t test said: a claim
    assert t_p(0.5, clean) == pytest.approx(1 / 25)
    rng = random.Random(5)
    docs = {f"c{i}": (0, random_doc(rng, 1), [0.25 if i else 0.0]) for i in range(6)}
    docs["s"] = (1, random_doc(rng, 1), [0.5])
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="decop")
    row = report["documents"][0]
    assert row["p"] == pytest.approx(1 / 7) and row["verdict"] == CANNOT_TELL
    assert "5 of the 6 clean documents share their score" in row["reason"] and "exact rank test" in row["reason"]
    assert report["test"]["p_from"] == "rank" and report["test"]["tied_clean_documents"] == 5
    assert report["test"]["name"] == "t" and report["test"]["min_p"] == pytest.approx(1 / 7)


def test_the_switch_to_the_rank_test_is_the_pools_so_the_rank_p_stays_exact(monkeypatch):
    """Which test a document gets is decided from the pool (clean scores and the suspect's),
    so it is the same whichever document of the pool is the suspect, and under the null
    the rank p is exact given the switch (the pool's multiset fixes the switch; the
    suspect's place in it stays uniform). Decided from the clean scores alone, pool
    (0, 0, 0, 1) gave a suspect at 1 the rank test (clean 0, 0, 0) and one at 0 the t test
    (clean 0, 0, 1)."""
    # the rank test answers -1 here, so t_p says which test it took (a t p can equal a rank p)
    monkeypatch.setattr("copyprobe.evaluation.verdicts.rank_p", lambda x, clean: -1.0)

    def by_rank(pool):  # which members t_p gives the rank test
        return [t_p(pool[i], pool[:i] + pool[i + 1:]) == -1.0 for i in range(len(pool))]

    assert by_rank([0.0, 0.0, 0.0, 1.0]) == [True] * 4
    rng = random.Random(11)
    both = set()
    for _ in range(300):
        pool = [rng.choice([0.0, 0.25, 0.5]) if rng.random() < 0.6 else round(rng.random(), 3)
                for _ in range(rng.randint(3, 9))]
        choice = set(by_rank(pool))
        assert len(choice) == 1, pool
        both |= choice
    assert both == {True, False}  # the draws reached both tests


@pytest.mark.parametrize("clean, suspect, expected", [
    ([1.0, 1.0, 2.0, 2.0], 3.0, "t"),  # clean scores alone: few values; with the suspect: 3 of 5, the t test
    ([1.0, 1.0, 2.0], 2.0, "rank"),  # clean scores alone: 2 of 3, the t test; with the suspect: 2 of 4, rank
])
def test_the_test_section_says_the_test_the_suspects_got(clean, suspect, expected):
    """The report's test section (p_from, min_p, assumptions) follows the test each suspect
    got from its pool, not what the clean scores alone would choose (they said rank with a t
    p below their stated smallest p)."""
    rng = random.Random(2)
    docs = {f"c{i}": (0, random_doc(rng, 1), [v]) for i, v in enumerate(clean)}
    docs["s"] = (1, random_doc(rng, 1), [suspect])
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.2, texts, test="t", method="loss")
    row, section = report["documents"][0], report["test"]
    pool = [*clean, suspect]
    assert row["p"] == pytest.approx(rank_p(suspect, clean) if expected == "rank" else prediction_t_p_of(suspect, clean))
    assert row.get("p_from", "t") == expected and section.get("p_from", "t") == expected
    assert section["min_p"] == pytest.approx(1 / len(pool) if expected == "rank" else 0.0)


def prediction_t_p_of(x, clean):
    from copyprobe.evaluation.stats import prediction_t_p

    return prediction_t_p(x, clean)


def test_guard_rank_is_uniform_when_the_suspect_is_like_the_clean_documents():
    """Every document's distance is its mean distance to the other k of the pool, so the
    suspect is farthest with chance 1/(k + 1). Measured on the clean documents' distances
    to each other alone, it was farthest about 1 time in 6 with k = 6, not 1 in 7."""
    rng = np.random.default_rng(11)
    k, trials, first = 6, 20_000, 0
    for _ in range(trials):
        points = rng.normal(size=(k + 1, 2))
        distances = np.linalg.norm(points[:, None] - points[None, :], axis=-1)
        first += guard_mod.standings(distances, 0, list(range(1, k + 1))).rank == 1
    se = math.sqrt((1 / (k + 1)) * (1 - 1 / (k + 1)) / trials)
    assert abs(first / trials - 1 / (k + 1)) < 4 * se


def test_decisive_count_of_clean_documents_is_the_fewest_that_reach_alpha():
    from copyprobe.evaluation.verdicts import _decisive

    def fewest(z, k, alpha):  # the definition, one n at a time
        return next(n for n in range(k + 1, 100_001) if stats.t.sf(z / math.sqrt(1 + 1 / n), n - 1) <= alpha)

    for z, k, alpha in ((3.0, 3, 0.01), (2.5, 5, 0.01), (1.8, 4, 0.05)):
        assert f"at least {fewest(z, k, alpha)} clean documents" in _decisive("t", z, k, alpha)
    assert "at least 93857 clean documents" in _decisive("t", 2.3264, 5, 0.01)  # one n at a time: 35 s
    # three suspects tested together: the count is at Holm's level alpha/3 (enough whatever the others score)
    said = _decisive("t", 3.0, 3, 0.05, 3)
    assert f"at least {fewest(3.0, 3, 0.05 / 3)} clean documents" in said
    assert "at alpha/3, enough whatever the other 2 suspects score" in said
    assert fewest(3.0, 3, 0.05 / 3) > fewest(3.0, 3, 0.05)
    # "never" only where alpha itself is out of reach: Holm's adjusted p of a document can be its
    # own p (the others far smaller), so 1.8 sd (one-sided 0.036) is not "never" at 0.05
    assert _decisive("t", 1.8, 10, 0.05, 3) is None
    assert _decisive("t", 1.6, 10, 0.05, 3).startswith("no number of clean documents")
    assert "would be significant with at least" in _decisive("t", 2.33, 5, 0.01)
    assert _decisive("t", 2.3, 5, 0.01).startswith("no number of clean documents")


@pytest.mark.parametrize("n_clean, n_suspects, reachable", [(59, 3, True), (58, 3, False), (19, 1, True),
                                                             (18, 1, False), (39, 2, True), (38, 2, False)])
def test_the_rank_test_needs_n_over_alpha_clean_documents_for_n_suspects(n_clean, n_suspects, reachable):
    """Holm's smallest adjusted p is n/(k + 1): the verdict says "cannot tell" exactly where no
    score could reach alpha, and the suspects above every clean document reach it otherwise."""
    from copyprobe.evaluation.verdicts import clean_needed, smallest_adjusted_p

    assert (smallest_adjusted_p("rank", n_clean, n_suspects) <= 0.05) is reachable
    assert (clean_needed("rank", 0.05, n_suspects) <= n_clean) is reachable
    rng = random.Random(11)
    docs = {f"c{i}": (0, random_doc(rng), [0.01 * i] * 2) for i in range(n_clean)}
    for j in range(n_suspects):
        docs[f"s{j}"] = (1, random_doc(rng), [50.0 + j] * 2)
    scores, doc_of, labels, texts = build(docs)
    report = verdicts(scores, doc_of, labels, 0.05, texts, method="loss")
    for row in report["documents"]:
        if reachable:  # every p_adjusted at most alpha; the guard may still withhold on style
            assert row["p_adjusted"] <= 0.05 and "Holm-adjusted p-value a document can get" not in row["reason"]
        else:
            assert row["verdict"] == CANNOT_TELL and row["p_adjusted"] > 0.05
            assert f"give at least {clean_needed('rank', 0.05, n_suspects)} documents" in row["reason"]


def test_the_t_test_s_normality_is_checked_on_the_clean_scores():
    """Shapiro-Wilk on the clean document scores: it flags a skewed null (which makes the t
    test's p-values too small) far more often than a normal one, and only the t test asks."""
    from scipy import stats as st

    from copyprobe.evaluation.verdicts import NORMALITY_LEVEL, normality

    rng = np.random.default_rng(4)
    flagged = {"normal": 0, "lognormal": 0}
    for _ in range(400):
        for name, draw in (("normal", rng.normal(size=19)), ("lognormal", rng.lognormal(size=19))):
            shape = normality(list(draw), 0.01)
            assert shape["p"] == pytest.approx(st.shapiro(draw).pvalue)
            assert ("note" in shape) is (shape["p"] < NORMALITY_LEVEL)
            flagged[name] += "note" in shape
    assert flagged["normal"] / 400 < 0.1 and flagged["lognormal"] / 400 > 0.6
    assert normality([1.0, 1.0, 1.0], 0.01) is None and normality([1.0, 2.0], 0.01) is None
    assert normality([1e308, -1e308, 0.0], 0.01) is None  # the statistic overflows: NaN, no p to show
    note = normality(list(rng.lognormal(size=30) ** 3), 0.01, n_suspects=2)["note"]
    assert "do not look normal" in note and "at least 199 clean documents" in note  # 2/0.01 - 1
    # in the verdicts: the t test's block carries it, the rank test's not
    docs = {f"c{i}": (0, [f"clean text {i} " * 5], [float(v)]) for i, v in enumerate(rng.lognormal(size=25) ** 3)}
    docs["s"] = (1, ["suspect text " * 5], [1.0])
    scores, doc_of, labels, texts = build(docs)
    by_t = verdicts(scores, doc_of, labels, 0.01, texts, test="t", method="loss")
    assert by_t["test"]["normality"]["p"] < NORMALITY_LEVEL and "note" in by_t["test"]["normality"]
    assert "normality" not in verdicts(scores, doc_of, labels, 0.01, texts, test="rank", method="loss")["test"]
