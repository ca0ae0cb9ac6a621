"""Canary kits: the random process, the marked document, the private manifest, bad kits."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from copyprobe.canary.generate import COMMON_WORDS, Drbg, candidates, seed_bytes
from copyprobe.canary.kit import MANIFEST, insert, load_kit, make_kit
from copyprobe.errors import ConfigError, DataError

DOC = ("It was a bright cold day in April. The clocks were striking thirteen! Winston hurried home.\n\n"
       "A new paragraph begins here. It has two sentences. And a third one, at the end.\n")


@pytest.fixture
def doc(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text(DOC, encoding="utf-8")
    return path


def test_drbg_is_deterministic_per_seed_and_uniform():
    a, b = Drbg(b"seed"), Drbg(b"seed")
    assert [a.randbelow(1000) for _ in range(50)] == [b.randbelow(1000) for _ in range(50)]
    assert Drbg(b"other").bytes(32) != Drbg(b"seed").bytes(32)
    rng = Drbg(b"uniform")
    counts = Counter(rng.randbelow(6) for _ in range(60000))
    from scipy.stats import chisquare

    assert set(counts) == set(range(6))
    assert chisquare([counts[i] for i in range(6)]).pvalue > 1e-4
    assert sorted(rng.sample(10, 10)) == list(range(10))


def test_seed_is_hashed_and_a_missing_seed_comes_from_the_os():
    assert seed_bytes(7) == seed_bytes("7")
    raw, rec = seed_bytes(None)
    assert len(raw) == 32 and rec == "hex:" + raw.hex()
    assert seed_bytes(rec)[0] == raw


@pytest.mark.parametrize("style", ["sentences", "words", "trap"])
def test_candidates_are_distinct_and_in_style(style):
    cands = candidates(Drbg(b"x"), style, 200)
    assert len(set(cands)) == 200
    if style != "sentences":
        words = [c.rstrip(".").lower().split() for c in cands]
        assert {len(w) for w in words} == {12 if style == "words" else 25}
        assert all(w in COMMON_WORDS for ws in words for w in ws)


def test_insert_records_offsets_of_every_copy():
    marked, where = insert("Ab. Cd. Ef.", [(4, 0, "X y."), (8, 1, "Z."), (4, 0, "X y.")])
    for index, pos in where:
        assert marked[pos:pos + len("X y." if index == 0 else "Z.")] == ("X y." if index == 0 else "Z.")
    assert marked.replace("X y. ", "").replace("Z. ", "") == "Ab. Cd. Ef."


def test_make_kit_writes_marked_document_and_private_manifest(doc, tmp_path):
    kit = make_kit(doc, tmp_path / "kit", n_candidates=10, style="sentences", repeat=2, seed="s", n_canaries=2)
    marked = kit.document.read_text()
    assert kit.document == tmp_path / "kit" / "publish" / "book.txt"
    manifest = json.loads((tmp_path / "kit" / MANIFEST).read_text())
    assert "PRIVATE" in manifest["warning"] and manifest["seed"] == "s"
    assert manifest["source"]["sha256"] != manifest["document"]["sha256"]
    for canary in kit.canaries:
        assert len(canary.candidates) == 10 and len(canary.positions) == 2
        assert marked.count(canary.text) == 2
        for pos in canary.positions:
            assert marked[pos:pos + len(canary.text)] == canary.text
        for j, other in enumerate(canary.candidates):  # held-out candidates are not published
            if j != canary.published:
                assert other not in marked
    # removing the canaries gives back the original words
    stripped = marked
    for canary in kit.canaries:
        stripped = stripped.replace(canary.text, "")
    assert stripped.split() == DOC.split()
    # same seed, same draws
    again = make_kit(doc, tmp_path / "kit2", n_candidates=10, style="sentences", repeat=2, seed="s", n_canaries=2)
    assert [c.to_json() for c in again.canaries] == [c.to_json() for c in kit.canaries]
    assert again.document.read_text() == marked


def test_one_seed_for_two_documents_draws_two_unrelated_kits(doc, tmp_path):
    # a publisher who marks every book with one secret seed must not publish one canary in
    # all of them: a model trained on one book would "find" it in every other
    other = tmp_path / "other.txt"
    other.write_text(DOC.replace("Winston", "Julia"), encoding="utf-8")
    first = make_kit(doc, tmp_path / "a", n_candidates=50, seed="one secret for all books")
    second = make_kit(other, tmp_path / "b", n_candidates=50, seed="one secret for all books")
    assert not set(first.canaries[0].candidates) & set(second.canaries[0].candidates)
    assert "source document's sha256" in first.manifest["rng"]
    # the same seed and document draw the same kit again (the manifest's seed reproduces it)
    again = make_kit(doc, tmp_path / "c", n_candidates=50, seed="one secret for all books")
    assert [c.to_json() for c in again.canaries] == [c.to_json() for c in first.canaries]
    # unbound (the benchmark's committed draws), the two documents share their candidates
    from copyprobe.canary.kit import draw_kit

    shared = [draw_kit(text, "d.txt", n_candidates=50, seed="s", bind_to_document=False)[1]["canaries"][0]
              for text in (DOC, other.read_text())]
    assert shared[0]["candidates"] == shared[1]["candidates"]


def test_a_style_with_too_few_texts_for_the_candidates_is_refused_in_one_line(doc, tmp_path):
    with pytest.raises(ConfigError, match="could not draw 500 distinct words candidates of 1 word: the style has"):
        make_kit(doc, tmp_path / "k", n_candidates=500, style="words", n_words=1, seed="s")
    assert not (tmp_path / "k").exists()


def test_published_choice_is_uniform_over_seeds(doc, tmp_path):
    from scipy.stats import chisquare

    from copyprobe.canary.generate import Drbg as D

    # the kit draws the published index with randbelow(n) on each canary's own stream
    picks = Counter(D(b"%d" % i).child("canary:0").randbelow(5) for i in range(5000))
    assert chisquare([picks[i] for i in range(5)]).pvalue > 1e-4


def test_a_kit_is_never_overwritten(doc, tmp_path):
    make_kit(doc, tmp_path / "kit", n_candidates=3, seed=1)
    with pytest.raises(ConfigError, match="already holds a kit"):
        make_kit(doc, tmp_path / "kit", n_candidates=3, seed=1)


@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_kit_directory_is_refused_not_the_working_directory(doc, tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="output directory's path is empty"):
        make_kit(doc, out, n_candidates=3, seed=1)
    assert [p.name for p in tmp_path.iterdir()] == ["book.txt"]  # private/ and publish/ were written here before


@pytest.mark.parametrize("kwargs", [{"n_candidates": 1}, {"style": "poems"}, {"repeat": 0}, {"n_canaries": 0}])
def test_bad_make_settings(doc, tmp_path, kwargs):
    with pytest.raises(ConfigError):
        make_kit(doc, tmp_path / "kit", **kwargs)


def _break(kit_dir, how):
    manifest_path = kit_dir / MANIFEST
    if how == "missing manifest":
        manifest_path.unlink()
    elif how == "altered manifest":
        data = json.loads(manifest_path.read_text())
        data["canaries"][0]["published"] = (data["canaries"][0]["published"] + 1) % 5
        manifest_path.write_text(json.dumps(data))
    elif how == "not json":
        manifest_path.write_text("{")
    elif how == "document without canary":
        manifest = json.loads(manifest_path.read_text())
        (kit_dir / manifest["document"]["file"]).write_text(DOC)
    elif how == "missing document":
        manifest = json.loads(manifest_path.read_text())
        (kit_dir / manifest["document"]["file"]).unlink()
    elif how == "document re-saved in latin-1":
        manifest = json.loads(manifest_path.read_text())
        document = kit_dir / manifest["document"]["file"]
        document.write_bytes(document.read_text(encoding="utf-8").replace("April", "Avril é").encode("latin-1"))


@pytest.mark.parametrize("how,message", [
    ("missing manifest", "does not exist"),
    ("altered manifest", "altered"),
    ("not json", "not valid JSON"),
    ("document without canary", "not the document"),
    ("missing document", "missing"),
    ("document re-saved in latin-1", r"book.txt \(the marked document\) is not UTF-8 text"),  # named no file before
])
def test_bad_kits_are_one_data_error(doc, tmp_path, how, message):
    kit_dir = tmp_path / "kit"
    make_kit(doc, kit_dir, n_candidates=5, seed=2)
    _break(kit_dir, how)
    with pytest.raises(DataError, match=message):
        load_kit(kit_dir)


def test_another_copy_of_the_document_must_hold_the_canary(doc, tmp_path):
    kit = make_kit(doc, tmp_path / "kit", n_candidates=5, seed=2)
    copy = tmp_path / "copy.txt"
    copy.write_text("reformatted:\n" + kit.document.read_text().replace(kit.canaries[0].text, "Something else."))
    with pytest.raises(DataError, match="does not contain"):
        load_kit(tmp_path / "kit", copy)
    copy.write_text("front matter\n" + kit.document.read_text().upper())  # case changes are normalised away
    assert load_kit(tmp_path / "kit", copy).document == copy
