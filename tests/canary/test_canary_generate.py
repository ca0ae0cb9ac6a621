"""The `sentences` generator writes grammatical sentences: properties checked mechanically
over 1,000 generated kits, with rules written here independently of the generator."""

from __future__ import annotations

import re

import pytest

from copyprobe.canary.generate import ANIMALS, FIRST, LAST, MONTHS, OBJECTS, PLACE_ENDINGS, SYLLABLES
from copyprobe.canary.kit import draw_kit

N_KITS = 1000
N_CANDIDATES = 10
DOC = "The harbour was quiet that winter. Ships stayed in port and the nets dried on the walls.\n"

SINGULAR = {s for s, _ in OBJECTS} | {s for s, _ in ANIMALS}
PLURAL = {p for _, p in OBJECTS} | {p for _, p in ANIMALS}
COUNTED = PLURAL | {"miles", "times", "letters", "days", "of them"}
PLACE = re.compile(rf"(?:{'|'.join(SYLLABLES)}){{1,2}}(?:{'|'.join(PLACE_ENDINGS)})", re.I)
PROPER = set(FIRST) | set(LAST) | set(MONTHS)


def expected_article(word: str) -> str:
    w = word.lower()
    if w.startswith(("uni", "use", "one", "eu")):
        return "a"
    if w.startswith(("hour", "honest", "heir", "honour")):
        return "an"
    return "an" if w[0] in "aeiou" else "a"


def expected_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


@pytest.fixture(scope="module")
def sentences():
    out = []
    for i in range(N_KITS):
        _, manifest = draw_kit(DOC, "doc.txt", n_candidates=N_CANDIDATES, seed=f"grammar:{i}")
        out.extend(manifest["canaries"][0]["candidates"])
    assert len(out) == N_KITS * N_CANDIDATES
    return out


def test_plural_forms_are_regular():
    for singular, plural in list(OBJECTS) + list(ANIMALS):
        assert plural in (singular + "s", singular + "es")


def test_capital_first_and_one_final_full_stop(sentences):
    for s in sentences:
        assert s[0].isupper() and s.endswith(".") and not s.endswith("..")
        assert not re.search(r"[.!?]", s[:-1]), s
        assert s == s.strip() and "  " not in s and "~" not in s and "{" not in s


def test_articles_agree_with_the_next_word(sentences):
    n = 0
    for s in sentences:
        for art, word in re.findall(r"\b([Aa]n?) (\w+)", s):
            assert art.lower() == expected_article(word), s
            n += 1
    assert n > 1000  # the check ran on many articles, both forms
    assert any(" an " in s for s in sentences) and any(" a " in s for s in sentences)


def test_counts_take_plural_nouns_and_ordinals_their_suffix(sentences):
    for s in sentences:
        for number, rest in re.findall(r"\b(\d+) ([a-z][a-z ]*)", s):
            assert any(rest == c or rest.startswith(c + " ") for c in COUNTED), s
            assert int(number) >= 2
        for number, suffix in re.findall(r"\b(\d+)(st|nd|rd|th)\b", s):
            assert suffix == expected_suffix(int(number)), s


def test_subjects_agree_with_was_and_were(sentences):
    checked = 0
    for s in sentences:
        words = s.rstrip(".").split()
        if "was" not in words and "were" not in words:
            continue
        assert words[0] == "The", s
        subject = next(w for w in words[1:3] if w in SINGULAR | PLURAL)  # "The [colour] noun"
        if "was" in words:
            assert subject in SINGULAR and "were" not in words, s
        else:
            assert subject in PLURAL, s
        checked += 1
    assert checked > 100


def test_no_repeated_words_and_distinct_places(sentences):
    for s in sentences:
        words = re.findall(r"\w+", s.lower())
        assert all(a != b for a, b in zip(words, words[1:])), s
        trip = re.search(r"from (\w+) to (\w+)", s)
        if trip:
            assert trip.group(1) != trip.group(2)


def test_only_names_months_and_places_are_capitalised(sentences):
    for s in sentences:
        words = re.findall(r"[A-Za-z]+", s)
        for w in words[1:]:
            if w[0].isupper():
                assert w in PROPER or PLACE.fullmatch(w), (w, s)
            else:
                assert w.islower(), s
        names = re.findall(r"\b([A-Z][a-z]+) ([A-Z][a-z]+)\b", s)
        assert any(f in FIRST and last in LAST for f, last in names), s


def test_the_generator_has_room_for_large_kits(sentences):
    assert len(set(sentences)) > 0.999 * len(sentences)
    assert len({s.split()[0] for s in sentences}) > 20  # many openings, not one template


@pytest.mark.model
def test_smollm2_perplexity_does_not_single_out_the_published_candidate():
    """Rank of the published candidate by smollm2's loss among its siblings, over kits the
    model never saw: uniform (KS on the randomised ranks (rank - 1 + U) / n, which are
    exactly Uniform(0, 1) when the ranks are uniform on 1..n)."""
    import numpy as np
    from scipy import stats as sps

    from copyprobe.backends.specs import alias_path
    from copyprobe.canary.kit import kit_from_manifest
    from copyprobe.canary.scoring import canary_summary, kit_examples
    from copyprobe.errors import BackendError
    from copyprobe.scoring import build_methods, score_examples
    from copyprobe.session import Session

    try:
        alias_path("smollm2-135m-instruct")
    except BackendError as exc:
        pytest.skip(str(exc))
    kits = [kit_from_manifest(draw_kit(DOC, "doc.txt", n_candidates=10, seed=f"ppl:{i}")[1]) for i in range(150)]
    examples = [e for i, kit in enumerate(kits) for e in kit_examples(kit, prefix=f"k{i}:")]
    with Session("smollm2-135m-instruct", cache=False, device="cpu", dtype="float32") as session:
        rows, _ = score_examples(examples, build_methods(["loss"]), session.backend_for)
    ranks = np.array([canary_summary(kit, rows, "loss", 0.05, prefix=f"k{i}:")["canaries"][0]["rank"]
                      for i, kit in enumerate(kits)])
    u = np.random.default_rng(0).random(len(ranks))
    assert sps.kstest((ranks - 1 + u) / 10, "uniform").pvalue > 0.001
    assert sps.chisquare(np.bincount(ranks - 1, minlength=10)).pvalue > 0.001
