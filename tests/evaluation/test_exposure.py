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
    assert "weakest exposure tested" not in clause  # weaker exposures were tested (and found nothing)


def test_each_model_gets_its_own_exposures_and_the_audit_design_is_named():
    qwen = [{"model": "Qwen-0.5B", "training": "lora", "exposures": 1, "dilution": 1.0105, "found": 11, "of": 12},
            {"model": "Qwen-0.5B", "training": "lora", "exposures": 3, "dilution": 0, "found": 12, "of": 12}]
    table = {**TABLE, "audit": {"clean_documents": 6, "alpha": 0.01}, "methods": {"reference": ROWS + qwen}}
    clause = rules_out("reference", table)
    assert "each document against 6 clean ones at alpha 0.01" in clause
    parts = clause.split(" found ", 1)[1].split("; ")
    smol = [p for p in parts if "SmolLM2" in p]
    assert len(parts) == 2 and len(smol) == 1 and smol[0].startswith("on SmolLM2-135M, 7 of 12") and "Qwen" not in smol[0]
    # Qwen's weakest exposure found 11 of 12: nothing weaker was tried, and the clause says so
    assert "on Qwen-0.5B, 11 of 12 documents seen once among 1x as much other text (the weakest exposure tested)" in parts


def test_no_clause_for_a_method_the_benchmark_did_not_run():
    assert rules_out("zlib", TABLE) is None
    assert rules_out("reference", {}) is None
