"""What a 'no evidence' verdict rules out: the clause built from the exposure benchmark's
summary names the weakest exposure where planted documents were found and the strongest
below it where none were."""

from __future__ import annotations

from copyprobe.evaluation.exposure import describe, rules_out, strength

ROWS = [
    {"model": "SmolLM2-135M", "training": "full", "exposures": 3, "dilution": 0, "found": 10, "of": 12},
    {"model": "SmolLM2-135M", "training": "full", "exposures": 1, "dilution": 0, "found": 7, "of": 12},
    {"model": "SmolLM2-135M", "training": "full", "exposures": 1, "dilution": 10, "found": 2, "of": 12},
    {"model": "SmolLM2-135M", "training": "full", "exposures": 1, "dilution": 100, "found": 0, "of": 12},
    {"model": "SmolLM2-135M", "training": "full", "exposures": 4, "dilution": 100, "found": 0, "of": 12},
]
TABLE = {"source": "benchmarks/results/audit_exposure.md", "methods": {"reference": ROWS}}


def test_exposures_are_ordered_from_strongest_to_weakest():
    order = sorted(ROWS, key=strength, reverse=True)
    # more showings, less other text: 4 showings among 100x rank between 1 among 10x and 1 among 100x
    assert [(r["exposures"], r["dilution"]) for r in order] == [(3, 0), (1, 0), (1, 10), (4, 100), (1, 100)]
    assert describe(ROWS[2]) == "seen once among 10x as much other text"
    assert describe(ROWS[0]) == "seen 3 times with no other text"


def test_clause_names_where_documents_were_found_and_where_none_were():
    clause = rules_out("reference", TABLE)
    assert clause.startswith("on planted models")
    assert "7 of 12 documents seen once with no other text" in clause  # weakest where at least half were found
    assert "2 of 12 documents seen once among 10x as much other text" in clause  # weakest where any were
    # the strongest exposure weaker than the last one found at which none were found
    assert "0 of 12 documents seen 4 times among 100x as much other text" in clause
    assert clause.count("SmolLM2-135M") == 1  # one model: named once
    assert clause.index("7 of 12") < clause.index("2 of 12") < clause.index("0 of 12")


def test_no_clause_for_a_method_the_benchmark_did_not_run():
    assert rules_out("zlib", TABLE) is None
    assert rules_out("reference", {}) is None
