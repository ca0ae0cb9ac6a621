"""The real-exposure benchmark's tally (benchmarks/bench_audit_real.py) on a tiny hand-made
scores list, against an independent computation of the same tests, and its 7-word overlap
check. No model."""

from __future__ import annotations

import math
import random
import statistics
import sys
from pathlib import Path

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_audit_real as bench  # noqa: E402

VOCAB = ("the of and to in a is that it was for on are as with his they at be this from have or by one had not "
         "but what all were when we there can an your which their said if do will each about how up out them").split()
SUSPECT_LOSS = {"s1": [-1.0, -1.1, -0.9], "s2": [-2.6, -2.4, -2.5]}
CLEAN_LOSS = {"c1": [-2.9, -3.1, -3.0], "c2": [-2.7, -2.8, -2.9], "c3": [-3.2, -3.3, -3.1], "c4": [-2.5, -2.6, -2.4],
              "c5": [-3.0, -2.9, -2.8]}


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(60))


def _result() -> dict:
    rng = random.Random(0)
    passages = []
    for side, docs in (("suspect", SUSPECT_LOSS), ("clean", CLEAN_LOSS)):
        for doc, losses in docs.items():
            for j, loss in enumerate(losses):
                passages.append({"id": f"kjv:{side}:{doc}:{j}", "doc_id": f"kjv:{side}:{doc}", "kind": "kjv",
                                 "side": side, "text": _text(rng), "loss": loss, "reference": loss / 2})
    return {"model": "tiny", "methods": ["loss", "reference"], "kinds": {"kjv": bench.KINDS["kjv"]},
            "failed_scores": {"loss": 0, "reference": 0}, "passages": passages}


def _t_p(x: float, clean: list[float]) -> float:
    k = len(clean)
    return float(stats.t.sf((x - statistics.mean(clean)) / (statistics.stdev(clean) * math.sqrt(1 + 1 / k)), k - 1))


def test_the_tally_counts_what_an_independent_computation_of_the_tests_gives():
    settings = {"test": "t", "alpha": 0.01, "guard_test": "t"}
    table = bench.tally_results([_result()], settings)
    rows = {r["method"]: r for r in table["rows"]}
    assert set(rows) == {"default", "loss", "reference"}
    loss = rows["loss"]
    suspect = {d: statistics.mean(v) for d, v in SUSPECT_LOSS.items()}
    clean = {d: statistics.mean(v) for d, v in CLEAN_LOSS.items()}
    values = list(clean.values())
    p = {d: _t_p(x, values) for d, x in suspect.items()}
    assert p["s1"] < 0.01 < p["s2"]  # the data are made so: one suspect far above, one within the clean
    assert loss["found_unguarded"] == sum(q <= 0.01 for q in p.values()) == 1
    assert loss["found"] <= loss["found_unguarded"]
    assert loss["ranks"] == [1 + sum(c >= x for c in values) for x in suspect.values()] == [1, 2]
    assert loss["ranked_first"] == 1 and loss["median_rank"] == 1.5 and loss["of"] == 6  # s2 ties c4
    false_p = [_t_p(x, [c for d2, c in clean.items() if d2 != d]) for d, x in clean.items()]
    assert loss["false_unguarded"] == sum(q <= 0.01 for q in false_p) == 0
    assert loss["false_claims"] == 0 and loss["n_clean"] == 5 and loss["n_suspect"] == 2
    expected = stats.mannwhitneyu(list(suspect.values()), values, alternative="greater", method="exact").pvalue
    assert loss["collection_tested"] in (0, 2)  # the guard may leave suspects out of the group
    if loss["collection_tested"] == 2:
        assert math.isclose(loss["collection_p"], expected)
    # the default row is today's DEFAULT_LOGIT_METHOD (reference) through default_report
    same = ("found", "found_unguarded", "ranks", "false_claims", "false_unguarded", "collection")
    assert {k: rows["default"][k] for k in same} == {k: rows["reference"][k] for k in same}
    # the witness was asked about the group (it did not recognise it): the calibrated score at 1/5 of alpha
    assert math.isclose(rows["default"]["collection_p"], min(1.0, 5 * rows["reference"]["collection_p"]))
    assert f"| tiny | kjv | loss | {loss['found']}/2 (1) | 1.5 of 6 (1) | 0/5 (0) |" in bench.render(table)
    entry = bench.summary(table, "x.md")["methods"]["loss"][0]
    assert (entry["model"], entry["kind"], entry["found"], entry["of"], entry["false_claims"], entry["of_clean"]) == (
        "tiny", "kjv", loss["found"], 2, 0, 5)


def test_the_overlap_check_finds_a_shared_run_of_seven_words_ignoring_case_and_punctuation():
    source = "And it came to pass, in the days of the judges, that there was a famine."
    assert bench.shared_runs("now IT came to pass in the days of old", source) == {
        ("it", "came", "to", "pass", "in", "the", "days"), ("came", "to", "pass", "in", "the", "days", "of")}
    assert bench.shared_runs("it came to pass in the year", source) == set()  # six words shared, not seven
    assert bench.shared_runs("def glob_to_re(pattern):", "glob to re pattern") == set()
    assert bench.words("Don't __all__ = ['x']") == ["don", "t", "all", "x"]


def test_held_out_kinds_meet_the_same_clean_documents_with_other_suspects(tmp_path):
    """A held-out kind audits other chapters or modules than its main kind, against the main
    kind's clean documents, and the overlap check reads its own suspects' source."""
    assert bench.clean_sources("code_heldout") == bench.clean_sources("code")
    assert bench.clean_sources("kjv_heldout") == bench.clean_sources("kjv")
    assert not set(bench.STDLIB_HELDOUT_MODULES) & set(bench.STDLIB_MODULES)
    assert not {(b, c) for b, c, _ in bench.KJV_HELDOUT_CHAPTERS} & {(b, c) for b, c, _ in bench.KJV_CHAPTERS}
    heapq = (bench.stdlib_dir() / "heapq.py").read_text(encoding="utf-8")
    assert heapq in bench.source_text("code_heldout") and heapq not in bench.source_text("code")
    written = bench.code_suspects(tmp_path, bench.STDLIB_HELDOUT_MODULES)
    assert sorted(written) == sorted(bench.STDLIB_HELDOUT_MODULES)
    assert set(bench.MAIN_KINDS) < set(bench.KINDS) and "code_heldout" not in bench.MAIN_KINDS


def test_a_trial_level_or_share_changes_the_witness_for_the_process_and_refuses_nonsense(monkeypatch):
    import pytest

    from copyprobe.evaluation import witness

    monkeypatch.setattr(witness, "LEVEL", witness.LEVEL)
    monkeypatch.setattr(witness, "WITNESS_FACTORS", dict(witness.WITNESS_FACTORS))
    bench.try_witness(0.1, 0.5)
    assert witness.LEVEL == 0.1 and witness.path_factors(None) == {"calibrated": 2.0, "own": 2.0}
    for bad in ((0.0, None), (None, 1.0)):
        with pytest.raises(SystemExit, match="must be between 0 and 1"):
            bench.try_witness(*bad)
