"""Which methods can test a canary kit: those that cannot are refused before any model
work, with one line that says why; coarse scores that tie the published canary with the
held-out candidates are read as 'cannot tell', not as 'no evidence'."""

from __future__ import annotations

from pathlib import Path

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.canary import stats
from copyprobe.canary.kit import draw_kit, kit_from_manifest
from copyprobe.canary.scoring import canary_summary, canary_test, check_method_can_score
from copyprobe.errors import ConfigError, DataError
from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE
from copyprobe.registry import method_class, method_names
from copyprobe.scoring import build_methods

DOC = ("The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to the "
       "wall, and the nets hung drying above the slipway. Nobody in the village expected the storm that came "
       "in the second week of February.\n")

# what a kit's candidates lack for each method the check refuses as it is set by default
# (the survey behind docs/canary.md, "Which methods can test a kit")
REFUSED = {
    "feature_agg": "learns from labelled passages",
    "veilprobe": "learns from labelled passages",
    "recall": "a kit's candidates have no labels; give it a prefix file instead",
    "con_recall": "a kit's candidates have no labels; give it prefix and member_prefix files instead",
    "prefix_probe": "needs more than prefix_tokens=32",
}
NEED_A_FREQUENCY_TABLE = {"dc_pdd", "tag_tab"}  # refused by their own check when the table is not given


def _kit(n_candidates: int = 10, n_canaries: int = 1, n_words: int = 4, seed: str = "methods", style: str = "words"):
    return kit_from_manifest(draw_kit(DOC, "doc.txt", n_candidates=n_candidates, style=style, seed=seed,
                                      n_canaries=n_canaries, n_words=n_words)[1])


def _disk_kit(tmp_path: Path, seed: str, held_words: dict[int, int] | None = None):
    """A kit of one canary of 10 four-word candidates on disk, with the first held-out
    candidates cut or padded to the given numbers of words (``{count: words}``): held-out
    candidates are not in the document, so the kit stays consistent (its checksum is
    recomputed). Returns (kit directory, published index, held-out indices)."""
    import json

    from copyprobe.canary.kit import MANIFEST, _checksum, make_kit

    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    kit = make_kit(doc, tmp_path / "kit", n_candidates=10, style="words", n_words=4, seed=seed)
    manifest = json.loads((kit.dir / MANIFEST).read_text())
    canary = manifest["canaries"][0]
    held = [j for j in range(10) if j != canary["published"]]
    for count, words in (held_words or {}).items():
        for j in held[:count]:
            text = canary["candidates"][j].rstrip(".").split()
            canary["candidates"][j] = " ".join((text + ["harbour"] * words)[:words]) + "."
    manifest["checksum"] = _checksum(manifest)
    (kit.dir / MANIFEST).write_text(json.dumps(manifest))
    return kit.dir, canary["published"], held


def _builtin_methods() -> list[str]:
    return [n for n in method_names() if method_class(n).__module__.startswith("copyprobe.methods.")]


@pytest.mark.parametrize("name", _builtin_methods())
def test_every_built_in_method_is_refused_or_accepted_as_the_survey_found(name):
    kit = _kit(style="sentences")
    if name in NEED_A_FREQUENCY_TABLE:
        with pytest.raises(ConfigError, match=f"{name}.freq"):
            build_methods([name])
        return
    (method,) = build_methods([name])
    if name in REFUSED:
        with pytest.raises(DataError) as exc:
            check_method_can_score(kit, method, seed=0)
        line = str(exc.value)
        assert f"method {name!r} cannot score" in line and REFUSED[name] in line and "\n" not in line
    else:
        check_method_can_score(kit, method, seed=0)  # can score short passages on their own


def test_a_refused_method_costs_no_model_work_and_no_run_directory(tmp_path):
    """prefix_probe continues the first 32 words of a passage: a 4-word candidate has none
    to compare. Before, every candidate was sent to the model and the test then failed on
    the published canary's missing score."""
    kit, _, _ = _disk_kit(tmp_path, "none")
    backend = FakeBackend(spec="never")
    with pytest.raises(DataError) as exc:
        canary_test(backend, kit, "prefix_probe", alpha=0.1, out=tmp_path / "run", cache=False)
    assert str(exc.value) == ("method 'prefix_probe' cannot score this kit's candidates, so nothing was scored: "
                              "prefix_probe: passage has 4 words, needs more than prefix_tokens=32")
    assert not backend.calls and not (tmp_path / "run").exists()


def test_a_published_canary_the_method_cannot_score_is_refused_before_the_model(tmp_path):
    """Every held-out candidate 8 words, the published one 4: at prefix_tokens=4 only the
    published one has nothing to compare, and the test would fail on it after scoring."""
    kit, _, _ = _disk_kit(tmp_path, "published", {9: 8})
    backend = FakeBackend(spec="never")
    with pytest.raises(DataError, match=r"^method 'prefix_probe' cannot score the published canary 0, so it cannot "
                                        r"be tested and nothing was scored: prefix_probe: passage has 4 words"):
        canary_test(backend, kit, "prefix_probe", params={"prefix_tokens": 4}, alpha=0.1, cache=False)
    assert not backend.calls


def test_a_test_fixed_at_cannot_tell_by_unscorable_candidates_is_refused_before_the_model(tmp_path):
    """6 of the 9 held-out candidates cut to 3 words, too short at prefix_tokens=3: more
    than half unscored makes the verdict 'cannot tell' whatever the model answers."""
    kit, _, _ = _disk_kit(tmp_path, "fixed", {6: 3})
    backend = FakeBackend(spec="never")
    with pytest.raises(DataError, match=r"^the answer is fixed before any scoring: method 'prefix_probe' cannot "
                                        r"score more than half of the 9 held-out candidates \(prefix_probe: "
                                        r"passage has 3 words"):
        canary_test(backend, kit, "prefix_probe", params={"prefix_tokens": 3}, alpha=0.1, cache=False)
    assert not backend.calls


def test_the_dry_run_stops_once_the_held_out_share_refused_is_settled(monkeypatch):
    """A kit of 3 canaries of 10 candidates, none refused: the 3 published canaries are
    tried, then held-out candidates only until even all the rest refused would be at most
    half of the 27 (14 tried). Before, all 30 first steps ran: 400,000 spaCy passes for
    name_cloze on a kit of 400 canaries of 1,000 candidates."""
    import copyprobe.canary.scoring as scoring

    kit = _kit(n_canaries=3)
    tried: list[str] = []
    real = scoring._first_step_refusal
    monkeypatch.setattr(scoring, "_first_step_refusal", lambda method, e: tried.append(e.id) or real(method, e))
    (method,) = build_methods(["loss"])
    check_method_can_score(kit, method, seed=0)
    published = [f"c{c.index}:{c.published}" for c in kit.canaries]
    assert tried[:3] == published and len(tried) == 3 + 14 and len(set(tried)) == len(tried)
    assert (27 - 13) * 2 > 27 >= (27 - 14) * 2  # 13 tried leave the rule open, 14 settle it


def test_the_prefix_error_survives_a_process_boundary():
    """Raised in a worker process and pickled back, it keeps the parameters (the default
    rebuild passed only the message: a TypeError)."""
    import pickle

    from copyprobe.errors import TooFewLabelledRows

    error = pickle.loads(pickle.dumps(TooFewLabelledRows("too few", ("prefix", "member_prefix"))))
    assert str(error) == "too few" and error.parameters == ("prefix", "member_prefix")


def test_con_recall_with_one_prefix_file_is_told_to_give_the_other(tmp_path):
    """The advice names the prefix still drawn from labelled rows: with the non-member
    prefix given, the member prefix (label-1 rows) is the one a kit cannot give."""
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("A short text the model never saw, about lighthouses and their keepers.\n")
    (method,) = build_methods(["con_recall"], {"con_recall": {"prefix": str(prefix)}})
    with pytest.raises(DataError) as exc:
        check_method_can_score(_kit(), method, seed=0)
    assert str(exc.value) == ("method 'con_recall' cannot score canaries as set: it draws labelled passages from "
                              "the data for its member_prefix, and a kit's candidates have no labels; give it a "
                              "member_prefix file instead")


def test_a_few_unscorable_held_out_candidates_are_scored_around_and_counted_against(tmp_path):
    """3 of 9 held-out candidates cut to 3 words, too short at prefix_tokens=3: the test
    runs, and they count against the canary (unscored), which can only make p larger."""
    from copyprobe.canary.kit import load_kit

    kit_dir, published, held = _disk_kit(tmp_path, "few", {3: 3})
    backend = FakeBackend(spec="saw", member_texts=[load_kit(kit_dir).canaries[0].text], boost=6.0)
    result = canary_test(backend, kit_dir, "prefix_probe", params={"prefix_tokens": 3}, alpha=0.1, cache=False)
    (counts,) = result.canary["canaries"]
    assert counts["n_unscored"] == 3
    scores = {row["id"]: row["prefix_probe"] for row in result.rows}
    assert [i for i, v in scores.items() if v is None] == [f"c0:{j}" for j in sorted(held[:3])]
    mine = scores[f"c0:{published}"]
    assert counts["rank"] == 1 + sum(v is None or v >= mine for i, v in scores.items() if i != f"c0:{published}")


def test_recall_with_a_prefix_file_scores_canaries(tmp_path):
    """Refused as set by default (it draws its prefix from labelled rows), ReCaLL runs
    with a prefix file: nothing in it is about the kit's lack of labels."""
    from copyprobe.canary.kit import make_kit

    prefix = tmp_path / "prefix.txt"
    prefix.write_text("A short text the model never saw, about lighthouses and their keepers.\n")
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    kit = make_kit(doc, tmp_path / "kit", n_candidates=10, style="words", seed="recall")
    result = canary_test(FakeBackend(spec="never"), kit.dir, "recall", params={"prefix": str(prefix)}, alpha=0.1,
                         cache=False)
    assert len(result.rows) == 10 and all(row["recall"] is not None for row in result.rows)


def test_a_published_canary_unscored_by_the_model_names_the_method_and_why():
    """What only the model's answers decide (SURP finds no surprising token in a short
    random text on the fake model) still fails after scoring, now saying which method and why."""
    kit = _kit()
    (canary,) = kit.canaries
    rows = [{"id": f"c0:{j}", "surp": -1.0 - j} for j in range(10)]
    rows[canary.published] = {"id": f"c0:{canary.published}", "surp": None,
                              "errors": {"surp": "no surprising token (none is both low-entropy and low-probability)"}}
    with pytest.raises(DataError) as exc:
        canary_summary(kit, rows, "surp", 0.05)
    assert str(exc.value) == ("the published canary 0 has no score by surp, so it cannot be tested: no surprising "
                              "token (none is both low-entropy and low-probability)")


# -- ties ------------------------------------------------------------------------------

def _rows(kit, scores_of):
    """Rows scoring candidate j of canary c ``scores_of(c, j)`` under method 'name_cloze'."""
    return [{"id": f"c{c.index}:{j}", "name_cloze": scores_of(c, j)} for c in kit.canaries
            for j in range(len(c.candidates))]


def test_a_published_canary_tied_with_every_held_out_one_is_cannot_tell():
    """0/1 scores, every candidate 0 (the model filled in none of the masked words): the
    canary ties with all 19 held-out candidates, rank 20 of 20, p = 1. Valid, but had it
    scored above them it would be rank 1, p = 0.05: the ties, not the model, decided."""
    kit = _kit(n_candidates=20)
    summary = canary_summary(kit, _rows(kit, lambda c, j: 0.0), "name_cloze", 0.05)
    (c,) = summary["canaries"]
    assert (c["rank"], c["n_ties"], summary["p_value"]) == (20, 19, 1.0)  # statistics unchanged
    assert stats.rank_p_value(c["rank"] - c["n_ties"], 20) <= 0.05
    assert summary["verdict"] == CANNOT_TELL and not summary["significant"]
    assert summary["reason"].startswith("19 of the 19 held-out candidates tie with the published canary by "
                                        "name_cloze, whose scores are too coarse to rank it")
    assert "not significant only because of ties: 19 of the 19 held-out candidates tie" in summary["explanation"]


def test_ties_that_did_not_decide_leave_no_evidence():
    """The canary scored 0 and 5 held-out candidates 1: even ranked above the 14 that tie
    with it, it would be 6th of 20 (p = 0.3): the model ranked it, and not high."""
    kit = _kit(n_candidates=20)
    (canary,) = kit.canaries
    ones = [j for j in range(20) if j != canary.published][:5]
    summary = canary_summary(kit, _rows(kit, lambda c, j: 1.0 if j in ones else 0.0), "name_cloze", 0.05)
    (c,) = summary["canaries"]
    assert (c["rank"], c["n_ties"]) == (20, 14) and stats.rank_p_value(20 - 14, 20) > 0.05
    assert summary["verdict"] == NO_EVIDENCE and "tie" not in summary["reason"] + summary["explanation"]


def test_ties_with_a_significant_canary_stay_evidence():
    kit = _kit(n_candidates=40)
    (canary,) = kit.canaries
    summary = canary_summary(kit, _rows(kit, lambda c, j: 1.0 if j in {canary.published, (canary.published + 1) % 40}
                                        else 0.0), "name_cloze", 0.05)
    assert summary["canaries"][0]["n_ties"] == 1 and summary["p_value"] == 2 / 40
    assert summary["verdict"] == EVIDENCE


def test_ties_decide_the_combined_test_of_several_canaries():
    """Two canaries of 20, each tied with 9 held-out candidates at the top (1.0) and the
    rest 0: ranks 10 and 10, sum-of-ranks p = P(S <= 20) = 190/400 (exact count); untied,
    ranks 1 and 1, p = 1/400 <= 0.05."""
    kit = _kit(n_candidates=20, n_canaries=2)
    top = {c.index: {c.published, *[j for j in range(20) if j != c.published][:9]} for c in kit.canaries}
    summary = canary_summary(kit, _rows(kit, lambda c, j: 1.0 if j in top[c.index] else 0.0), "name_cloze", 0.05)
    assert [c["rank"] for c in summary["canaries"]] == [10, 10]
    assert summary["p_value"] == pytest.approx(sum(1 for a in range(1, 21) for b in range(1, 21) if a + b <= 20) / 400)
    assert summary["verdict"] == CANNOT_TELL
    assert summary["reason"].startswith("18 of the 38 held-out candidates tie with the published canaries")


def test_rescore_reads_the_ties_the_same_way(tmp_path):
    """canary.json stays a function of the rows: the saved run, rescored, gives the same verdict."""
    from copyprobe.rescore import rescore

    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    from copyprobe.canary.kit import make_kit

    kit = make_kit(doc, tmp_path / "kit", n_candidates=20, style="words", seed="ties")
    result = canary_test(FakeBackend(spec="never"), kit.dir, "name_cloze", out=tmp_path / "run", cache=False)
    assert result.canary["verdict"] == CANNOT_TELL and result.canary["canaries"][0]["n_ties"] == 19
    again = rescore(Path(tmp_path / "run"))
    assert again.canary == result.canary


def test_a_few_ties_of_a_continuous_score_are_not_called_coarse():
    """100 candidates, distinct scores but 4 held-out ones equal to the published canary's,
    2 above it: rank 7, p = 0.07; untied it would be 0.03, yet the scores are not coarse, so
    the verdict stays 'no evidence' (a borderline result, not a method that cannot rank)."""
    kit = _kit(n_candidates=100, n_canaries=1)
    c = kit.canaries[0]
    others = [j for j in range(100) if j != c.published]
    above, tied = set(others[:2]), set(others[2:6])

    def score(canary, j):
        return 50.0 if j == c.published or j in tied else (60.0 + j if j in above else float(j) / 10)

    summary = canary_summary(kit, _rows(kit, score), "name_cloze", 0.05)  # the rows name it so
    assert summary["canaries"][0]["rank"] == 7 and summary["canaries"][0]["n_ties"] == 4
    assert summary["p_value"] == pytest.approx(0.07)
    assert summary["verdict"] == NO_EVIDENCE and "tie" not in summary["explanation"]
