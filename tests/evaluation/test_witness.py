"""The reference model as a witness: a suspect the reference model itself recognises is
tested on the target's own likelihood; a reference that cannot have seen the text is
trusted unasked; 'no evidence' quotes the planted rows only where they hold; one
coincidental tie keeps the t test."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from copyprobe.evaluation import witness as witness_mod
from copyprobe.evaluation.verdicts import audit_verdicts, few_values, t_p
from copyprobe.evaluation.vocabulary import EVIDENCE, NO_EVIDENCE

WORDS = "the a lamp keeper night ship stair light sea rock wind boat".split()


def rows_for(suspect_target: float, suspect_own: float, n_clean: int = 8, seed: int = 0):
    """Scores rows of a reference audit: one suspect and ``n_clean`` clean documents of one
    style, three passages each, with both halves of the calibrated score in the details."""
    rng = random.Random(seed)
    rows, texts = [], {}
    for d, doc in enumerate(["suspect:book"] + [f"clean:c{k}" for k in range(n_clean)]):
        for i in range(3):
            pid = f"{doc}-{i}"
            if d == 0:
                t, r = suspect_target + 0.01 * i, suspect_own + 0.01 * i
            else:
                t, r = -3.5 + 0.05 * d + 0.01 * rng.random(), -3.4 + 0.04 * d + 0.01 * rng.random()
            rows.append({"id": pid, "doc_id": doc, "label": int(d == 0), "reference": t - r, "loss": t,
                         "details": {"reference": {"target": t, "reference": r}}})
            texts[pid] = " ".join(rng.choice(WORDS) for _ in range(40))
    return rows, texts


def as_topk(rows):
    """The same rows as a topk_reference audit's (its raw half topk_loss)."""
    return [{**{k: v for k, v in r.items() if k not in ("reference", "loss", "details")},
             "topk_reference": r["reference"], "topk_loss": r["loss"],
             "details": {"topk_reference": r["details"]["reference"]}} for r in rows]


def doc_means(rows, key):
    out = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(r["details"]["reference"][key])
    return {d: sum(v) / len(v) for d, v in out.items()}


def test_a_suspect_the_reference_knows_is_tested_on_the_target_s_own_likelihood():
    """Both models know the text (the target a little less): the calibrated score ranks it
    last, the target's own likelihood first. The witness p is the audit's t test on the
    reference's own document means, computed here independently."""
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-1.5)
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                            witness_context={"model": "gemma-3-270m", "could_have_seen": True, "basis": "b"})
    row = report["documents"][0]
    own = doc_means(rows, "reference")
    clean_own = [v for d, v in own.items() if d.startswith("clean")]
    assert row["witness"]["p"] == pytest.approx(t_p(own["suspect:book"], clean_own))
    assert row["witness"]["recognises"] and row["tested_on"] == "loss"
    target = doc_means(rows, "target")
    clean_target = [v for d, v in target.items() if d.startswith("clean")]
    assert row["score"] == pytest.approx(target["suspect:book"])
    # the witness chose the test: its p is times 1.25 (the target's own score at 4/5 of alpha)
    assert row["p"] == pytest.approx(1.25 * t_p(target["suspect:book"], clean_target))
    assert row["verdict"] == EVIDENCE and row["rank"] == 1
    assert "itself recognises book" in row["reason"] and "on loss" in row["line"]
    assert "times 1.25 for the witness's choice of test" in row["reason"]
    assert report["witness"]["switched"] == ["book"] and report["witness"]["p_multiplied"] == ["book"]
    assert report["test"]["witness_factors"] == {"calibrated": 5, "own": 1.25}
    # without the witness the calibrated score ranks it last: the exposure turned upside down
    plain = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t", use_witness=False)
    assert plain["documents"][0]["verdict"] == NO_EVIDENCE and plain["documents"][0]["rank"] == 9


def test_the_witness_asks_by_the_t_test_in_a_rank_audit_too():
    """With the rank test and 8 clean documents the smallest rank p is 1/9, above the level
    0.05: asked by the audit's test, the witness could never recognise a text. It asks by
    the t test (computed here independently), and the suspect goes to loss."""
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-1.5)
    report = audit_verdicts(rows, "reference", {}, 0.2, texts, test="rank", guard_test="t")
    row = report["documents"][0]
    own = doc_means(rows, "reference")
    clean_own = [v for d, v in own.items() if d.startswith("clean")]
    assert row["witness"]["p"] == pytest.approx(t_p(own["suspect:book"], clean_own)) and row["witness"]["p"] < 1 / 9
    assert row["witness"]["recognises"] and row["tested_on"] == "loss"
    # the suspect's own test is still the audit's: the rank test on loss, times 1.25
    assert row["p"] == pytest.approx(1.25 * 1 / 9)


def test_a_reference_that_does_not_know_the_suspect_keeps_the_calibrated_score():
    # a planted document: the target knows it, the reference finds it as hard as the clean texts
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-3.2)
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t")
    row = report["documents"][0]
    assert not row["witness"]["recognises"] and row["witness"]["p"] > witness_mod.LEVEL
    assert "tested_on" not in row and row["verdict"] == EVIDENCE
    calibrated = {d: doc_means(rows, "target")[d] - doc_means(rows, "reference")[d] for d in doc_means(rows, "target")}
    assert row["score"] == pytest.approx(calibrated["suspect:book"])
    assert report["witness"]["recognised"] == []
    # asked, even though it did not switch: the calibrated path is one of two too, at 1/5 of alpha
    clean_cal = [v for d, v in calibrated.items() if d.startswith("clean")]
    assert row["p"] == pytest.approx(5 * t_p(calibrated["suspect:book"], clean_cal))


def test_a_reference_that_cannot_have_seen_the_text_is_trusted_unasked():
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-1.5)
    basis = "its training data ends 2024-08; the text was published 2025-06"
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                            witness_context={"model": "gemma-3-270m", "could_have_seen": False, "basis": basis})
    row = report["documents"][0]
    assert "tested_on" not in row and row["witness"]["could_have_seen"] is False
    # not asked, so one test and nothing multiplied
    calibrated = {d: doc_means(rows, "target")[d] - doc_means(rows, "reference")[d] for d in doc_means(rows, "target")}
    clean_cal = [v for d, v in calibrated.items() if d.startswith("clean")]
    assert row["p"] == pytest.approx(t_p(calibrated["suspect:book"], clean_cal))
    assert report["witness"]["p_multiplied"] == [] and "witness_factors" not in report["test"]
    assert "cannot have seen book" in row["reason"]
    assert report["shared"][0]["text"].startswith("the reference model (gemma-3-270m) cannot have seen")
    # the planted rows hold: the reference never saw the text, as in the plants
    assert report["no_evidence_rules_out"] is None or "do not apply" not in report["no_evidence_rules_out"]


def test_no_evidence_never_quotes_the_planted_rows_when_the_reference_knows_a_suspect():
    from copyprobe.evaluation.exposure import no_evidence_clause

    rows, texts = rows_for(suspect_target=-3.3, suspect_own=-1.5)  # the reference knows it, the target not
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t")
    assert report["documents"][0]["verdict"] == NO_EVIDENCE
    clause = report["no_evidence_rules_out"]
    assert "on planted models" not in clause and "do not apply here" in clause
    assert [s["title"] for s in report["shared"]][-1] == "what no evidence rules out"
    assert "on planted models" not in report["documents"][0]["reason"]
    # a method with no reference: the planted rows are quoted as they are
    assert "on planted models" in no_evidence_clause("loss")
    nobody = {"run": True, "recognised": [], "could_have_seen": None}
    assert "on planted models" in no_evidence_clause("reference", witness=nobody)


def test_the_group_is_compared_on_the_target_s_own_likelihood_when_the_reference_knows_it():
    rows_a, texts = rows_for(suspect_target=-2.0, suspect_own=-1.5)
    rows_b, texts_b = rows_for(suspect_target=-2.1, suspect_own=-1.6, seed=1)
    second = [{**r, "id": "b" + r["id"], "doc_id": "suspect:book2"} for r in rows_b if r["doc_id"] == "suspect:book"]
    texts.update({"b" + k: v for k, v in texts_b.items()})
    report = audit_verdicts(rows_a + second, "reference", {}, 0.01, texts, test="t", guard_test="t")
    collection = report["collection"]
    assert collection["tested_on"] == "loss" and report["witness"]["group"]["switched"]
    own = doc_means(rows_a + second, "target")
    suspects = [own["suspect:book"], own["suspect:book2"]]
    clean = [v for d, v in own.items() if d.startswith("clean")]
    expected = stats.mannwhitneyu(suspects, clean, alternative="greater", method="exact").pvalue
    assert collection["p"] == pytest.approx(1.25 * expected)  # the witness chose the target's own score
    assert collection["min_p"] == pytest.approx(1.25 / math.comb(2 + 8, 2))
    assert "times 1.25 for the witness's choice of score" in collection["reason"]


def test_halves_are_rebuilt_from_saved_columns():
    rows = [{"id": "a", "loss": -2.0, "reference": 0.5}, {"id": "b", "loss": None, "reference": 0.1}]
    filled = witness_mod.with_halves(rows, "reference")
    assert filled[0]["details"]["reference"] == {"target": -2.0, "reference": -2.5}
    assert "details" not in filled[1]
    assert witness_mod.from_rows(filled, "reference").own == {"a": -2.5}
    assert witness_mod.from_rows(filled, "loss") is None


def test_one_coincidental_tie_keeps_the_t_test_and_few_values_go_to_the_rank_test():
    rng = random.Random(3)
    clean = [round(rng.uniform(0.1, 0.4), 4) for _ in range(16)] + [0.1875, 0.1875]
    assert not few_values(clean)
    assert t_p(0.9, clean) < 1 / 19  # the t test's p, below what the rank test can give
    quarters = [0.25] * 20 + [0.0] * 3
    assert few_values(quarters) and t_p(0.5, quarters) == pytest.approx(1 / 24)
    assert few_values([0.25, 0.25]) and not few_values([0.25, 0.25, 0.3])


def test_publication_dates_against_training_cutoffs():
    from copyprobe.backends.cutoffs import check_published, could_have_seen, training_cutoff
    from copyprobe.errors import ConfigError

    assert training_cutoff("gemma-3-270m").month == "2024-08" and training_cutoff("gemma-3-270m").stated
    assert training_cutoff("llamacpp:smollm2-135m-instruct").month == "2024-10"
    assert could_have_seen("gemma-3-270m", "1611")[0] is True
    assert could_have_seen("gemma-3-270m", "2024-08")[0] is True
    assert could_have_seen("gemma-3-270m", "2024")[0] is True  # a year containing the cutoff: could have
    seen, why = could_have_seen("gemma-3-270m", "2024-09-02")
    assert seen is False and "2024-08" in why and "model card" in why
    assert could_have_seen("hf:./my-model", "2025")[0] is None
    assert could_have_seen("gemma-3-270m", None)[0] is None
    for bad in ("June 2025", "2025-13", "25-01-01", "2025-06-32", "2025-02-29", "2025-04-31", "0000", "0000-06"):  # year 0 was a traceback
        with pytest.raises(ConfigError, match="^published must be a date"):
            check_published(bad)
    assert check_published(" 2025-06 ") == "2025-06"
    assert check_published("2024-02-29") == "2024-02-29"  # a leap day
    import datetime

    today = datetime.datetime.now(datetime.timezone.utc).date()
    assert check_published(today.isoformat()) == today.isoformat()
    for future in (str(today.year + 1), (today + datetime.timedelta(days=1)).isoformat(), "3000"):
        with pytest.raises(ConfigError, match=r"^published is '.*', after today"):  # 3000 was accepted
            check_published(future)


def test_a_raw_score_that_fails_the_null_battery_gives_cannot_tell_not_a_claim():
    """topk_reference's raw half, topk_loss, claimed training on never-seen documents by
    itself (the shipped null battery): a suspect the reference knows gets no verdict from it."""
    from copyprobe.evaluation.validity import null_record
    from copyprobe.evaluation.vocabulary import CANNOT_TELL

    assert null_record("topk_loss")["false_claims"] > 0
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-1.5)
    topk = as_topk(rows)
    report = audit_verdicts(topk, "topk_reference", {}, 0.01, texts, test="t", guard_test="t")
    row = report["documents"][0]
    assert row["witness"]["recognises"] and row["tested_on"] == "topk_loss"
    assert row["verdict"] == CANNOT_TELL and row["p"] is None
    assert "topk_loss alone is no valid test" in row["reason"] and "null battery" in row["reason"]
    assert "no valid test is left" in report["shared"][0]["text"]


def test_with_no_valid_own_score_the_calibrated_path_keeps_all_of_alpha():
    """topk_reference's own path (topk_loss) never claims: a suspect the reference does not
    recognise is tested on the calibrated score at alpha, not at a fifth of it (its p was
    multiplied by 5 for a share the other path could never use). reference, whose own path
    (loss) is a valid test, still pays 5 on the same scores."""
    rows, texts = rows_for(suspect_target=-2.0, suspect_own=-3.2)
    topk = as_topk(rows)
    report = audit_verdicts(topk, "topk_reference", {}, 0.01, texts, test="t", guard_test="t")
    row = report["documents"][0]
    assert not row["witness"]["recognises"] and "tested_on" not in row
    calibrated = {d: doc_means(rows, "target")[d] - doc_means(rows, "reference")[d] for d in doc_means(rows, "target")}
    clean_cal = [v for d, v in calibrated.items() if d.startswith("clean")]
    expected = t_p(calibrated["suspect:book"], clean_cal)
    assert row["p"] == pytest.approx(expected)
    assert report["witness"]["p_multiplied"] == [] and "witness_factors" not in report["test"]
    assert "no p-value is multiplied" in report["witness"]["rule"] and "times" not in row["reason"]
    paid = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t")
    assert paid["documents"][0]["p"] == pytest.approx(min(1.0, 5 * expected))


def test_the_witness_keeps_the_false_claim_rate_at_alpha_on_texts_no_model_saw():
    """No model saw any document; what makes a text easy moves both models' scores alike
    (target = ease + noise, reference = ease + other noise). Each of the witness's two tests
    has size alpha, but picking between them by the reference's scores made 0.09 of
    never-seen suspects 'evidence' at alpha 0.05 (k = 10; 76 of these 800); with each test at
    its share of alpha (the calibrated score's 1/5, the target's own 4/5: weighted
    Bonferroni) it is at most alpha (42 of 800; 42 too with halves)."""
    from copyprobe.evaluation.verdicts import verdicts
    from copyprobe.evaluation.witness import Witness

    rng = np.random.default_rng(1)
    k, trials, alpha, claims = 10, 800, 0.05, 0
    ids = [f"p{i}" for i in range(k + 1)]
    docs = {ids[0]: "suspect:s", **{ids[i]: f"clean:c{i}" for i in range(1, k + 1)}}
    labels = {ids[0]: 1, **{ids[i]: 0 for i in range(1, k + 1)}}
    texts = {i: "the keeper lit the lamp at dusk" for i in ids}  # one style: the guard stays quiet
    for _ in range(trials):
        ease = rng.normal(size=k + 1)
        target, reference = ease + 0.1 * rng.normal(size=k + 1), ease + 0.1 * rng.normal(size=k + 1)
        scores = {i: float(t - r) for i, t, r in zip(ids, target, reference)}
        witness = Witness("reference", dict(zip(ids, map(float, reference))), dict(zip(ids, map(float, target))))
        report = verdicts(scores, docs, labels, alpha, texts, test="t", method="reference", guard_test="t",
                          witness=witness)
        claims += report["documents"][0]["verdict"] == EVIDENCE
    assert claims <= stats.binom.ppf(0.995, trials, alpha)


def test_the_normality_check_reads_the_scores_a_switched_suspect_was_tested_on(capsys):
    """Easiness shared by both models and skewed across documents cancels in the
    calibrated score but stays in the target's own: the calibrated clean scores look
    normal, the loss scores the switched suspect is tested on do not, and the note must
    say so (a review's simulation: 97% of such false claims went through loss, where the
    check, run on the calibrated scores, showed 6 of 147)."""
    rng = random.Random(5)
    quantiles = stats.norm.ppf((np.arange(1, 20) - 0.5) / 19)  # the calibrated scores: exactly normal-looking
    easiness = np.exp(1.5 * stats.norm.ppf((np.arange(1, 20) - 0.5) / 19)[rng.sample(range(19), 19)])
    rows, texts = [], {}
    docs = [("suspect:book", -1.0 + 30.0, -1.0 + 30.0)] + [
        (f"clean:c{k}", -3.0 + easiness[k] + 0.2 * quantiles[k], -3.0 + easiness[k]) for k in range(19)]
    for doc, t, r in docs:
        pid = f"{doc}-0"
        rows.append({"id": pid, "doc_id": doc, "label": int(doc.startswith("suspect")), "reference": t - r, "loss": t,
                     "details": {"reference": {"target": t, "reference": r}}})
        texts[pid] = " ".join(rng.choice(WORDS) for _ in range(40))
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                            witness_context={"model": "gemma-3-270m", "could_have_seen": True, "basis": "b"})
    assert report["witness"]["switched"] == ["book"]
    calibrated = [r["reference"] for r in rows if r["label"] == 0]
    own = [r["loss"] for r in rows if r["label"] == 0]
    assert report["test"]["normality"]["p"] == pytest.approx(stats.shapiro(calibrated).pvalue)
    assert "note" not in report["test"]["normality"]
    shape = report["test"]["normality_own"]
    assert shape["p"] == pytest.approx(stats.shapiro(own).pvalue) and shape["p"] < 0.05
    assert shape["method"] == "loss" and shape["documents"] == ["book"]
    assert shape["note"].startswith("the clean documents' loss scores, which book was tested on (the reference "
                                    "model knows it), do not look normal")
    assert "so it gets `cannot tell`" in shape["note"] and "at least 124 clean documents" in shape["note"]
    # the check binds there: loss alone ranks the suspect first, far above every clean document,
    # but a skewed null makes such a p-value untrustworthy, so it gets none
    row = report["documents"][0]
    assert row["rank"] == 1 and row["tested_on"] == "loss"
    assert row["verdict"] == "cannot tell" and row["p"] is None
    assert "the clean documents' loss scores do not look normal (Shapiro-Wilk p = " in row["reason"]
    # the same clean loss scores made normal: the suspect is tested on loss and claimed
    normal = [dict(r) for r in rows]
    for r, q in zip(normal[1:], quantiles):
        r["details"] = {"reference": {"target": -3.0 + q, "reference": -3.2 + 0.2 * q}}
        r["loss"], r["reference"] = -3.0 + q, 0.2 + 0.8 * q
    fine = audit_verdicts(normal, "reference", {}, 0.01, texts, test="t", guard_test="t",
                          witness_context={"model": "gemma-3-270m", "could_have_seen": True, "basis": "b"})
    assert "note" not in fine["test"]["normality_own"] and fine["documents"][0]["verdict"] == "evidence"
    from copyprobe.cli.commands.audit import _print

    _print(report)
    assert f"note: {shape['note']}" in capsys.readouterr().out
    # a suspect the reference does not know is tested on the calibrated score: no check of loss
    rows[0]["details"]["reference"]["reference"] = -3.0
    rows[0]["reference"] = rows[0]["loss"] + 3.0
    plain = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                           witness_context={"model": "gemma-3-270m", "could_have_seen": True, "basis": "b"})
    assert not (plain.get("witness") or {}).get("switched") and "normality_own" not in plain["test"]
