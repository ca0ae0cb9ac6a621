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


def test_a_variant_gets_its_own_rows_and_an_unbenchmarked_one_the_defaults_said_so():
    rouge = [{"model": "Qwen-0.5B", "training": "lora", "exposures": 3, "dilution": 0, "found": 9, "of": 12,
              "params": {"similarity": "rouge_l"}}]
    plain = [{"model": "Qwen-0.5B", "training": "lora", "exposures": 3, "dilution": 0, "found": 3, "of": 12,
              "params": {}}]
    table = {**TABLE, "methods": {"prefix_probe": plain + rouge}}
    clause = rules_out("prefix_probe", table, params={"similarity": "rouge_l"})
    assert "audits with prefix_probe (similarity=rouge_l) found on Qwen-0.5B, 9 of 12" in clause
    assert "3 of 12" not in clause
    default = rules_out("prefix_probe", table)
    assert "audits with prefix_probe found on Qwen-0.5B, 3 of 12" in default and "9 of 12" not in default
    other = rules_out("prefix_probe", table, params={"similarity": "lcs"})
    assert "with its default parameters; this audit used similarity=lcs, which was not benchmarked" in other
    assert "3 of 12" in other
    # a setting never benchmarked reads the closest one that was, and says which
    only_rouge = {**TABLE, "methods": {"prefix_probe": rouge}}
    assert ("audits with prefix_probe (with similarity=rouge_l; this audit used n=2, which was not benchmarked) "
            "found on Qwen-0.5B, 9 of 12") in rules_out("prefix_probe", only_rouge, params={"n": 2})
    assert ("(with similarity=rouge_l; this audit used the defaults, which were not benchmarked)"
            in rules_out("prefix_probe", only_rouge))
    lcs = [{**rouge[0], "found": 1, "params": {"similarity": "lcs", "n": 2}}]
    both = {**TABLE, "methods": {"prefix_probe": plain + rouge + lcs}}
    # one parameter away from rouge_l, two from lcs+n=2 and from the defaults: rouge_l's rows
    near = rules_out("prefix_probe", both, params={"similarity": "rouge_l", "n": 3})
    assert "(with similarity=rouge_l; this audit used n=3, similarity=rouge_l, which was not benchmarked)" in near
    assert "9 of 12" in near and "1 of 12" not in near and "3 of 12" not in near
    # equally far from the defaults and from a variant: the defaults
    assert "(with its default parameters;" in rules_out("prefix_probe", both, params={"similarity": "token_sort"})


def test_an_audit_reason_reads_the_rows_of_the_parameters_it_ran_with():
    import random

    from copyprobe.audit import non_default_params
    from copyprobe.evaluation.verdicts import audit_verdicts

    assert non_default_params("prefix_probe", {"similarity": "rouge_l", "prefix_tokens": 32}) == {"similarity": "rouge_l"}
    assert non_default_params("no_such_method", {"x": 1}) == {"x": 1}
    # a reference model left at auto is recorded resolved: still the default setting
    assert non_default_params("reference", {"model": "gemma-3-270m"}) == {}
    assert non_default_params("topk_reference", {"model": "gemma-3-270m", "k": 5}) == {"k": 5}
    assert non_default_params("reference", {"model": "gemma-3-270m"}, target_spec="smollm2-135m-instruct") == {}
    # another reference model than auto's is a variant the benchmark did not run
    assert non_default_params("reference", {"model": "qwen2.5-coder-0.5b-instruct"},
                              target_spec="smollm2-135m-instruct") == {"model": "qwen2.5-coder-0.5b-instruct"}
    assert "with its default parameters" not in rules_out("reference", params=non_default_params(
        "reference", {"model": "gemma-3-270m"}))
    rng = random.Random(0)
    words = "the a lamp keeper night ship stair light sea rock wind boat".split()
    rows, texts = [], {}
    for d, doc in enumerate(["suspect"] + [f"clean{k}" for k in range(6)]):
        for i in range(3):
            pid = f"{doc}-{i}"
            # the suspect sits in the middle of the clean documents: no evidence
            value = 0.5 + 0.01 * rng.random() if doc == "suspect" else 0.1 * d + 0.01 * rng.random()
            rows.append({"id": pid, "doc_id": doc, "label": int(doc == "suspect"), "prefix_probe": value})
            texts[pid] = " ".join(rng.choice(words) for _ in range(40))
    params = {"similarity": "rouge_l"}
    report = audit_verdicts(rows, "prefix_probe", {}, 0.01, texts, test="t", guard_test="t", method_params=params)
    (doc,) = report["documents"]
    assert doc["verdict"] == "no evidence"
    # said once for the audit, not in each document's reason
    assert rules_out("prefix_probe", params=params) in report["no_evidence_rules_out"]
    assert "on planted models" not in doc["reason"]
    assert "prefix_probe (similarity=rouge_l)" in report["no_evidence_rules_out"]


def test_the_real_exposure_clause_reads_its_rows_per_model_and_kind():
    from copyprobe.evaluation.exposure import no_evidence_clause, real_rules_out

    table = {"source": "benchmarks/results/audit_real.md",
             "kinds": {"kjv": {"short": "King James chapters"}, "code": {"short": "standard-library modules"}},
             "methods": {"reference": [
                 {"model": "smollm2-135m-instruct", "kind": "kjv", "found": 4, "of": 10},
                 {"model": "smollm2-135m-instruct", "kind": "code", "found": 0, "of": 10},
                 {"model": "gemma-3-270m", "kind": "kjv", "found": 3, "of": 10}]}}
    clause = real_rules_out("reference", table)
    assert clause.startswith("on texts the bundled models surely trained on, as they ship "
                             "(benchmarks/results/audit_real.md")
    assert ("on gemma-3-270m, 3 of 10 King James chapters; on smollm2-135m-instruct, 4 of 10 King James "
            "chapters, 0 of 10 standard-library modules") in clause
    assert real_rules_out("zlib", table) is None
    assert real_rules_out("reference", table, params={"model": "x"}) is None  # another setting was not run
    # the shipped tables: the planted promise is kept out when the reference knows a suspect
    knows = {"run": True, "recognised": ["ruth"], "could_have_seen": True}
    assert "on planted models" not in no_evidence_clause("reference", witness=knows)
    assert "on planted models" in no_evidence_clause("reference", witness={**knows, "could_have_seen": False})
