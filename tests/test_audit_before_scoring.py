"""copyprobe.audit's checks before any scoring: the witness's share of alpha counted in
what the test can reach."""

from __future__ import annotations

import pytest

from copyprobe.audit import calibrated_path_note, check_answer_not_fixed, document_floor_note, witness_factors
from copyprobe.data.example import Example
from copyprobe.errors import DataError
from copyprobe.evaluation.witness import WITNESS_FACTORS


def docs(prefix: str, n: int, label: int) -> list[Example]:
    return [Example(id=f"{prefix}{i}", text="a passage", label=label, doc_id=f"{prefix}{i}") for i in range(n)]


def test_witness_factors_follow_the_method_the_reference_and_the_date():
    assert witness_factors("loss", None, "smollm2-135m-instruct", None) is None  # not calibrated
    assert witness_factors("reference", None, "smollm2-135m-instruct", None) == WITNESS_FACTORS
    # auto resolves to Gemma-3-270M for a SmolLM2 target; its data ends 2024-08
    assert witness_factors("reference", {"model": "auto"}, "smollm2-135m-instruct", "2025-06") is None
    assert witness_factors("reference", {"model": "gemma-3-270m"}, None, "2025-06") is None
    # auto with no target to resolve against: could have seen
    assert witness_factors("reference", None, None, "2025-06") == WITNESS_FACTORS
    # topk_reference's own path (topk_loss) is no valid test: nothing is multiplied
    assert witness_factors("topk_reference", None, "smollm2-135m-instruct", None) == {"calibrated": 1.0, "own": 1.0}


@pytest.mark.parametrize("alpha, k, refused_at_1, refused_with_witness", [
    (0.01, 99, False, True),   # 1/100 reaches 0.01, but 1.25/100 does not
    (0.01, 123, False, True),  # 1.25/124 = 0.01008
    (0.01, 124, False, False),  # 1.25/125 = 0.01
    (0.01, 98, True, True),
])
def test_the_rank_test_s_reach_counts_the_witness_s_smallest_factor(alpha, k, refused_at_1, refused_with_witness):
    suspect, clean = docs("s", 1, 1), docs("c", k, 0)
    for factors, refused in ((None, refused_at_1), (WITNESS_FACTORS, refused_with_witness)):
        if refused:
            with pytest.raises(DataError, match="the answer is fixed before any scoring"):
                check_answer_not_fixed("rank", alpha, suspect, clean, factors)
        else:
            check_answer_not_fixed("rank", alpha, suspect, clean, factors)


def test_a_group_reach_counts_the_factor_too():
    # 2 suspects and 3 clean: 1/C(5, 2) = 0.1 reaches alpha 0.1 alone, 0.125 with the witness
    check_answer_not_fixed("rank", 0.1, docs("s", 2, 1), docs("c", 3, 0))
    with pytest.raises(DataError, match="times 1.25"):
        check_answer_not_fixed("rank", 0.1, docs("s", 2, 1), docs("c", 3, 0), WITNESS_FACTORS)


def test_holm_s_floor_over_several_suspects_is_counted_before_scoring():
    """3 suspects, rank test, alpha 0.05: Holm's smallest adjusted p is 3/(k + 1), so a
    document can reach alpha from k = 59, not 19; below that only the group test can."""
    three = docs("s", 3, 1)
    assert document_floor_note("rank", 0.05, three, docs("c", 59, 0)) is None
    note = document_floor_note("rank", 0.05, three, docs("c", 19, 0))
    assert note is not None and "smallest Holm-adjusted p-value is 0.15" in note and "59 clean documents" in note
    assert document_floor_note("rank", 0.05, docs("s", 1, 1), docs("c", 19, 0)) is None  # one suspect: 1/20
    assert document_floor_note("t", 0.05, three, docs("c", 5, 0)) is None  # no smallest p
    check_answer_not_fixed("rank", 0.05, three, docs("c", 19, 0))  # the group test can still speak
    # one clean document: no group test (it needs 2), and 3/2 for a document: refused, with Holm's factor said,
    # and what the group verdict alone needs (1/C(3 + 3, 3) = 0.05)
    with pytest.raises(DataError, match="3 times that after Holm's adjustment over 3 suspects") as caught:
        check_answer_not_fixed("rank", 0.05, three, docs("c", 1, 0))
    assert "Give at least 59 clean documents (3 for the group verdict alone)" in str(caught.value)
    # the note holds for every document: a witness factor of 1.25 some suspects may not get is not counted
    assert document_floor_note("rank", 0.05, three, docs("c", 59, 0), WITNESS_FACTORS) is None


def test_the_calibrated_path_s_reach_is_noted_when_only_the_own_path_can_claim():
    clean = docs("c", 200, 0)
    note = calibrated_path_note("rank", 0.01, clean, WITNESS_FACTORS)
    assert note is not None and "alpha / 5" in note and "1/201" in note and "499 clean documents" in note
    assert calibrated_path_note("rank", 0.01, docs("c", 499, 0), WITNESS_FACTORS) is None
    assert calibrated_path_note("t", 0.01, clean, WITNESS_FACTORS) is None  # no smallest p
    assert calibrated_path_note("rank", 0.01, clean, None) is None
    assert calibrated_path_note("rank", 0.01, clean, {"calibrated": 1.0, "own": 1.0}) is None


def test_a_model_object_s_spec_resolves_the_reference_before_anything_is_charged(tmp_path, monkeypatch):
    """A backend object rather than a spec: its own spec resolves reference=auto (Gemma for
    SmolLM2, whose data ends 2024-08). With the text published after that, nothing is
    multiplied and rank 1/6 reaches alpha 0.2: the run goes on. Without the date the witness
    charges 1.25 (0.208): refused before any request."""
    from copyprobe.audit import audit
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    suspect = [Example(id=f"s{i}", text=f"the suspect passage number {i} of the book", doc_id="book")
               for i in range(2)]
    clean = [Example(id=f"c{k}", text=f"a clean passage {k} written for the audit", doc_id=f"c{k}")
             for k in range(5)]
    target = FakeBackend(spec="smollm2-135m-instruct")
    result = audit(target, suspect, clean, "reference", test="rank", alpha=0.2, published="2025-06",
                   out=tmp_path / "ran", n_bootstrap=0, cache=None)
    assert result.verdicts["test"]["n_clean_documents"] == 5 and "witness_factors" not in result.verdicts["test"]
    fresh = FakeBackend(spec="smollm2-135m-instruct")
    with pytest.raises(DataError, match="times 1.25"):
        audit(fresh, suspect, clean, "reference", test="rank", alpha=0.2, out=tmp_path / "refused",
              n_bootstrap=0, cache=None)
    assert sum(fresh.calls.values()) == 0 and not (tmp_path / "refused").exists()


def passages(doc: str, n: int, label: int) -> list[Example]:
    side = "suspect" if label else "clean"
    return [Example(id=f"{doc}-{i}", text=f"passage {i}", label=label, doc_id=f"{side}:{doc}") for i in range(n)]


def test_a_note_says_how_little_of_a_long_suspect_the_shortest_documents_let_the_test_read():
    """A 2,204-word book beside 150-word clean pieces was judged on 2 of its 20 passages,
    and nothing the audit printed said so (run.json's selection only)."""
    from copyprobe.audit import select_passages, unread_note

    suspect = passages("book", 20, 1) + passages("letter", 3, 1)
    clean = [e for k in range(6) for e in passages(f"c{k}", 2 + (k > 2), 0)]
    _, selection = select_passages(suspect + clean, 64)
    assert selection["passages_per_document"] == 2 and selection["set_by"] == ["c0", "c1", "c2"]
    note = unread_note(suspect, selection)
    assert note == ("the test reads 2 passages of each document (evenly spaced), as many as the shortest have "
                    "(c0, c1, c2), so most of book went unread (2 of its 20 passages read); clean documents as long "
                    "as the suspects let it read more")  # letter: 2 of 3 read, not most left out
    two = suspect + passages("saga", 9, 1)
    assert "most of 2 suspect documents went unread (book: 2 of 20; saga: 2 of 9)" in unread_note(
        two, select_passages(two + clean, 64)[1])
    # the cap, not the shortest documents, set how many: the user chose it
    assert unread_note(suspect, select_passages(suspect + clean, 1)[1]) is None
    # the suspect is the shortest: nothing of it is left out
    short = passages("short", 2, 1)
    assert unread_note(short, select_passages(short + clean, 64)[1]) is None
    # a short suspect beside a long one and long clean documents: longer clean documents would not help
    mixed = passages("note", 2, 1) + passages("book", 20, 1)
    long_clean = [e for k in range(6) for e in passages(f"c{k}", 20, 0)]
    assert unread_note(mixed, select_passages(mixed + long_clean, 64)[1]).endswith(
        "so most of book went unread (2 of its 20 passages read); audit the short suspect (note) apart from the "
        "long ones to read more of these")


def test_a_clean_file_read_as_one_document_is_said_to_be_one():
    """A clean JSONL whose document column the reader does not know is one document: the
    refusal says so, where it said only "there is 1"."""
    clean = [Example(id=f"c{i}", text="a passage", label=0, doc_id="clean:notes") for i in range(40)]
    with pytest.raises(DataError, match=r"the 40 clean passages are one document: so is a book, and a data file "
                                        r"without a document column, doc_id, doc, ID, \.\.\.\)"):
        check_answer_not_fixed("t", 0.05, docs("s", 1, 1), clean)
    with pytest.raises(DataError) as caught:  # several clean documents: nothing to add
        check_answer_not_fixed("t", 0.05, docs("s", 1, 1), docs("c", 2, 0))
    assert "one document" not in str(caught.value)
