"""What an 'evidence' verdict says about its own false-claim rate: the null battery's
count for the method and settings used, that it has none, or nothing when
the audit's test, alpha or guard are not the battery's."""

from __future__ import annotations

import random

from copyprobe.evaluation.validity import false_claims, null_record, null_records
from copyprobe.evaluation.verdicts import verdicts
from copyprobe.evaluation.vocabulary import EVIDENCE

ROW = {"model": "smollm2", "documents": 108, "false_claims": 2, "cannot_tell": 30, "collections": 2,
       "collection_claims": 0, "scenarios": 15, "passages_per_document": None}
TABLE = {"source": "audit_validity.md", "audit": {"test": "t", "alpha": 0.01, "guard_test": "t"},
         "methods": {"samia": [{**ROW, "params": {"n_samples": 4}}],
                     "reference": [{**ROW, "params": {}, "false_claims": 0}],
                     "decop": [{**ROW, "params": {}, "false_claims": 0, "documents": 58, "passages_per_document": 1}]}}


def test_the_count_for_the_method_and_its_settings():
    assert null_record("samia", {"n_samples": "4"}, TABLE)["false_claims"] == 2  # "4" from the command line is 4
    assert null_record("samia", {}, TABLE) is None
    two = false_claims("samia", {"n_samples": 4}, table=TABLE)
    assert two == ("on 108 documents no model has seen (audit_validity.md, smollm2) audits with samia (n_samples=4) "
                   "claimed training on 2, where alpha = 0.01 allows about 1.1")
    none = false_claims("reference", table=TABLE)
    assert none.endswith("audits with reference claimed training on 0") and "allows" not in none
    assert "1 passage a document" in false_claims("decop", table=TABLE)
    assert false_claims("samia", {"n_samples": 4}, collection=True, table=TABLE).startswith("on 2 collections")


def test_untested_settings_say_so_and_other_test_settings_say_nothing():
    untested = false_claims("samia", table=TABLE)
    assert "how often samia claims training on documents no model has seen is not known" in untested
    assert false_claims("min_k", table=TABLE).startswith("how often min_k claims")
    assert false_claims("reference", alpha=0.05, table=TABLE) is None
    assert false_claims("reference", test="rank", table=TABLE) is None
    assert false_claims("reference", guard_test="rank", table=TABLE) is None
    assert false_claims("reference", table={}) is None


def test_an_evidence_verdict_quotes_the_shipped_battery_count():
    """A suspect far above 6 clean documents, at the audit's defaults: the reason ends with
    the shipped null battery's count for the method (read here from the table itself)."""
    rng = random.Random(0)
    words = "the a lamp keeper night ship stair light sea rock wind boat".split()
    passages = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(3)]  # one style for all
    scores, docs, labels, texts = {}, {}, {}, {}
    for d, (label, base) in enumerate([(1, 5.0)] + [(0, 0.1 * k) for k in range(6)]):
        for j in range(3):
            i = f"{d}:{j}"
            scores[i], docs[i], labels[i], texts[i] = base + 0.01 * j, f"doc{d}", label, passages[j]
    report = verdicts(scores, docs, labels, 0.01, texts, test="t", method="reference", guard_test="t")
    row = report["documents"][0]
    assert row["verdict"] == EVIDENCE, row["reason"]
    shipped = null_record("reference")
    assert shipped is not None
    # said once for the audit (every evidence verdict shares it), not in each reason
    counted = (f"claimed training in {shipped['false_claims']} of {shipped['documents']}" if shipped.get("by_model")
               else f"claimed training on {shipped['false_claims']}")  # summed over the models it ran on
    said = report["evidence_null_battery"]
    assert f"passages of at most {shipped['passage_words']} words), audits with reference {counted}" in said
    # the battery's other passage lengths follow, each with its own count
    for length, other in null_records("reference").items():
        if length != shipped["passage_words"]:
            assert f"; with passages of at most {length} words (" in said
            assert said.index(f"{length} words (") > said.index(counted)
    assert "no model has seen" not in row["reason"]
    # cut at the length of another battery row, the audit quotes that row first
    other = max(null_records("reference"))
    if other != shipped["passage_words"]:
        at_other = verdicts(scores, docs, labels, 0.01, texts, test="t", method="reference", guard_test="t",
                            passage_words=other)["evidence_null_battery"]
        assert at_other.split(" audits with ")[0].rstrip(",").endswith(f"passages of at most {other} words)")
    at_05 = verdicts(scores, docs, labels, 0.05, texts, test="t", method="reference", guard_test="t")
    assert at_05["evidence_null_battery"] is None


def test_a_collection_claim_quotes_the_battery_collection_count():
    rng = random.Random(1)
    words = "the a lamp keeper night ship stair light sea rock wind boat".split()
    passages = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(3)]
    scores, docs, labels, texts = {}, {}, {}, {}
    for d, (label, base) in enumerate([(1, 5.0), (1, 5.5), (1, 6.0)] + [(0, 0.1 * k) for k in range(8)]):
        for j in range(3):
            i = f"{d}:{j}"
            scores[i], docs[i], labels[i], texts[i] = base + 0.01 * j, f"doc{d}", label, passages[j]
    collection = verdicts(scores, docs, labels, 0.01, texts, test="t", method="topk_reference",
                          guard_test="t")["collection"]
    shipped = null_record("topk_reference")
    assert collection["verdict"] == EVIDENCE, collection["reason"]
    n = shipped["collection_claims"]  # 1 on SmolLM2: the factor 5 hid it for a day; no longer paid (path_factors)
    promised = f", where alpha = 0.01 allows about {0.01 * shipped['collections']:.2g}" if n else ""
    if shipped.get("by_model"):  # summed over the models it ran on, each model's count named
        each = ", ".join(f"{m['model']} {m['collection_claims']}" for m in shipped["by_model"])
        # the nearest length's clause (the one on most models, the audit's length unknown)
        # first; the other lengths' clauses follow it
        clause = f"claimed training in {n} of {shipped['collections']}" + (f" ({each})" if n else "") + promised
        reason = collection["reason"]
        other = reason.find("; with passages of at most")
        assert clause in reason and (other == -1 or reason.index(clause) < other)
    else:
        assert f"claimed training on {n}{promised}" in collection["reason"]


def test_a_caution_before_work_for_a_method_that_failed_or_never_ran():
    from copyprobe.evaluation.validity import caution

    assert caution("reference", table=TABLE) is None  # 0 false claims
    failed = caution("samia", {"n_samples": 4}, table=TABLE)
    assert failed.startswith("samia (n_samples=4) claimed training on 2 of 108 documents no model has seen")
    never = caution("min_k", table=TABLE)
    assert never.startswith("min_k has no count on the null battery") and "not known" in never
    collection = caution("reference", table={**TABLE, "methods": {"reference": [{**ROW, "params": {},
                                                                               "false_claims": 0,
                                                                               "collection_claims": 1}]}})
    assert "claimed training on 1 of 2 collections" in collection and "documents" not in collection.split(" no ")[0]
    assert caution("samia", {"n_samples": 4}, alpha=0.05, table=TABLE) is None
    # 1 of 108 at alpha 0.01 is the rate a valid test keeps (about 1.08 allowed): no caution
    one = {**TABLE, "methods": {"samia": [{**ROW, "params": {"n_samples": 4}, "false_claims": 1}]}}
    assert caution("samia", {"n_samples": 4}, table=one) is None
    assert "claimed training on 1, where alpha = 0.01 allows about 1.1" in false_claims("samia", {"n_samples": 4},
                                                                                       table=one)


def test_a_method_run_on_two_models_counts_every_audit_and_names_both():
    """The same 108 documents audited on a second model are 108 more audits, not 216
    documents: the counts are summed, the sentence says how many documents on which models
    and which model claimed, and a model claiming above alpha makes the method's caution
    even when the sum does not."""
    from copyprobe.evaluation.validity import caution

    second = {**ROW, "model": "gemma", "params": {}, "false_claims": 1, "cannot_tell": 12, "collection_claims": 1}
    table = {**TABLE, "methods": {**TABLE["methods"], "reference": [{**ROW, "params": {}, "false_claims": 0}, second],
                                  "loss": [{**ROW, "params": {}, "false_claims": 0},
                                           {**second, "false_claims": 0, "collection_claims": 0}]}}
    record = null_record("reference", {}, table)
    assert (record["documents"], record["false_claims"], record["cannot_tell"]) == (216, 1, 42)
    assert (record["collections"], record["collection_claims"]) == (4, 1)
    assert [m["model"] for m in record["by_model"]] == ["smollm2", "gemma"]
    assert false_claims("reference", table=table) == (
        "on 108 documents no model has seen (audit_validity.md, each audited on smollm2 and gemma), audits with "
        "reference claimed training in 1 of 216 (smollm2 0, gemma 1), where alpha = 0.01 allows about 2.2")
    assert false_claims("reference", collection=True, table=table).startswith(
        "on 2 collections no model has seen (audit_validity.md, each audited on smollm2 and gemma), audits with "
        "reference claimed training in 1 of 4 (smollm2 0, gemma 1)")
    assert false_claims("loss", table=table).endswith("audits with loss claimed training in 0 of 216")
    # 1 of 216 (and gemma's 1 of 108) is within what alpha 0.01 allows; 1 of 4 collections is not
    assert caution("reference", table=table).startswith(
        "reference claimed training on 1 of 4 audits of collections no model has seen")
    assert caution("loss", table=table) is None  # 0 on both models
    # 2 of 216 is within alpha, but 2 of smollm2's 108 is not: the caution says so
    one_model = {**table, "methods": {"reference": [{**ROW, "params": {}, "false_claims": 2},
                                                    {**second, "false_claims": 0, "collection_claims": 0}]}}
    assert caution("reference", table=one_model).startswith("reference claimed training on 2 of 216 audits of documents")
    trio = {**table, "methods": {"loss": table["methods"]["loss"] + [{**ROW, "model": "qwen", "params": {},
                                                                     "false_claims": 0, "collection_claims": 0}]}}
    assert "(audit_validity.md, each audited on smollm2, gemma and qwen), audits with loss claimed training in 0 of 324" \
        in false_claims("loss", table=trio)
    # models that audited different numbers of documents: each model's count, no 'each'
    uneven = {**table, "methods": {"loss": [{**ROW, "params": {}, "false_claims": 0},
                                            {**ROW, "model": "gemma", "params": {}, "false_claims": 0, "documents": 100,
                                             "passages_per_document": 3}]}}
    assert false_claims("loss", table=uneven) == (
        "on documents no model has seen (audit_validity.md, audited on smollm2 (108), gemma (100, 3 passages a "
        "document)), audits with loss claimed training in 0 of 208")
    # one model's row is what it was
    assert null_record("samia", {"n_samples": 4}, table) == {**ROW, "params": {"n_samples": 4}}


def test_a_score_with_any_false_claim_on_any_model_is_no_path_for_the_witness():
    """raw_unfit opens or closes a path of the witness's split test: any claim closes it,
    even one within what alpha allows (1 of 108 does not show a rate below alpha)."""
    from copyprobe.evaluation.verdicts import raw_unfit

    assert raw_unfit("never-benchmarked").endswith("is not known")
    for raw in ("loss", "zlib", "min_k_pp", "topk_loss", "reference"):
        # the shipped table, summed over the models it ran on, at every passage length
        records = null_records(raw)
        claimed = [r for r in records.values() if r["false_claims"] or r["collection_claims"]]
        said = raw_unfit(raw)
        assert (said is not None) == bool(claimed), (raw, said)
        if claimed and claimed[0]["false_claims"]:
            record = claimed[0]
            audits = "audits of " if record.get("by_model") else ""
            assert f"claimed training on {record['false_claims']} of {record['documents']} {audits}documents" in said


LENGTHS = {**TABLE, "methods": {
    "loss": [{**ROW, "params": {}, "false_claims": 0, "passage_words": 64},
             {**ROW, "model": "gemma", "params": {}, "false_claims": 0, "passage_words": 64},
             {**ROW, "params": {}, "false_claims": 3, "passage_words": 128}]}}


def test_each_passage_length_is_its_own_count_and_the_audit_quotes_its_own():
    """The same documents cut into 128-word passages are another test than at 64 words:
    an audit at 128 words quotes the 128-word count, one at another length the nearest
    (naming that it never ran at the audit's), one of passages given as they are the
    length audited on most models; the other lengths' counts follow."""
    from copyprobe.evaluation.validity import caution

    assert set(null_records("loss", table=LENGTHS)) == {64, 128}
    assert null_record("loss", table=LENGTHS, passage_words=128)["false_claims"] == 3
    assert null_record("loss", table=LENGTHS, passage_words=64)["documents"] == 216  # two models, summed
    assert null_record("loss", table=LENGTHS)["passage_words"] == 64  # not known: the most models
    assert null_record("loss", table=LENGTHS, passage_words=256)["passage_words"] == 128  # nearest
    assert null_record("loss", table=LENGTHS, passage_words=96)["passage_words"] == 64  # a tie: the shorter
    assert false_claims("loss", table=LENGTHS, passage_words=128) == (
        "on 108 documents no model has seen (audit_validity.md, smollm2, passages of at most 128 words) audits with "
        "loss claimed training on 3, where alpha = 0.01 allows about 1.1; with passages of at most 64 words "
        "(smollm2 and gemma), audits claimed training in 0 of 216")
    assert false_claims("loss", table=LENGTHS, passage_words=64) == (
        "on 108 documents no model has seen (audit_validity.md, each audited on smollm2 and gemma, passages of at "
        "most 64 words), audits with loss claimed training in 0 of 216; with passages of at most 128 words "
        "(smollm2), audits claimed training in 3 of 108, where alpha = 0.01 allows about 1.1")
    assert false_claims("loss", table=LENGTHS, passage_words=200).endswith(
        "; the battery was never run with passages of at most 200 words, this audit's length")
    assert "never run" not in false_claims("loss", table=LENGTHS)  # not known: nothing to compare
    # several models at another length, one of which claimed: each is named with its count
    two = {**LENGTHS, "methods": {"loss": LENGTHS["methods"]["loss"][:1] + [
        {**ROW, "model": "gemma", "params": {}, "false_claims": 1, "passage_words": 64},
        {**ROW, "params": {}, "false_claims": 0, "passage_words": 128}]}}
    assert false_claims("loss", table=two, passage_words=128).endswith(
        "; with passages of at most 64 words, audits claimed training in 1 of 216 (smollm2 0, gemma 1), where "
        "alpha = 0.01 allows about 2.2")
    # the caution says a count above alpha at any length, the audit's own first: 3 of 108 at
    # 128 words is above alpha, 0 of 216 at 64 is not
    said = ("loss claimed training on 3 of 108 documents no model has seen (passages of at most 128 words) on the "
            "null battery (audit_validity.md), at the alpha of this audit (0.01)")
    assert caution("loss", table=LENGTHS, passage_words=128).startswith(said)
    assert caution("loss", table=LENGTHS, passage_words=64).startswith(said)
    assert caution("loss", table=LENGTHS, passage_words=200).endswith(
        "; the battery was never run with passages of at most 200 words, this audit's length")
    clean = {**LENGTHS, "methods": {"loss": LENGTHS["methods"]["loss"][:2]}}
    assert caution("loss", table=clean, passage_words=128) is None  # 0 of 216 at 64 words, nothing at 128
    # a table written before lengths were recorded reads as it did
    assert false_claims("reference", table=TABLE, passage_words=128) == false_claims("reference", table=TABLE)


def test_a_claim_at_any_passage_length_closes_the_witness_s_own_path(monkeypatch):
    from copyprobe.evaluation import validity
    from copyprobe.evaluation.verdicts import raw_unfit

    monkeypatch.setattr(validity, "load_table", lambda path: LENGTHS)
    monkeypatch.setattr("copyprobe.evaluation.exposure.load_table", lambda path: LENGTHS)
    assert raw_unfit("loss") == ("on the null battery (audit_validity.md) loss claimed training on 3 of 108 "
                                 "documents no model has seen (passages of at most 128 words)")
    both = {**LENGTHS, "methods": {"loss": [{**LENGTHS["methods"]["loss"][0], "false_claims": 1},
                                            LENGTHS["methods"]["loss"][2]]}}
    monkeypatch.setattr(validity, "load_table", lambda path: both)
    assert raw_unfit("loss").endswith("claimed training on 1 of 108 documents no model has seen (passages of at "
                                      "most 64 words) and 3 of 108 documents no model has seen (passages of at "
                                      "most 128 words)")
