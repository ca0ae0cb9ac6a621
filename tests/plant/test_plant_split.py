"""Seeded member / non-member split."""

from __future__ import annotations

import pytest

from copyprobe.errors import ConfigError, DataError
from copyprobe.plant.split import split_documents, split_passages


def test_split_is_reproducible_disjoint_and_complete():
    items = list(range(100))
    m1, n1 = split_passages(items, 0.5, seed=7)
    m2, n2 = split_passages(items, 0.5, seed=7)
    assert (m1, n1) == (m2, n2)
    assert set(m1).isdisjoint(n1)
    assert sorted(m1 + n1) == items
    assert len(m1) == 50 and m1 == sorted(m1) and n1 == sorted(n1)
    m3, _ = split_passages(items, 0.5, seed=8)
    assert m3 != m1


def test_split_is_pinned_across_machines():
    # recorded from random.Random(0).shuffle (stable across Python versions): a change here
    # would silently change every existing plant
    assert split_passages(list(range(10)), 0.5, seed=0) == ([1, 3, 5, 7, 8], [0, 2, 4, 6, 9])


@pytest.mark.parametrize("fraction,expected", [(0.25, 2), (0.3, 2), (0.75, 6), (0.9, 7)])
def test_split_fraction(fraction, expected):
    members, nonmembers = split_passages(list(range(8)), fraction, seed=1)
    assert len(members) == expected and len(nonmembers) == 8 - expected


def test_split_too_small_corpus():
    with pytest.raises(DataError, match="corpus too small to split: 3 passage"):
        split_passages([1, 2, 3], 0.5)
    with pytest.raises(DataError, match="both must be non-empty"):
        split_passages([1, 2, 3, 4], 0.1)  # round(0.4) = 0 members
    with pytest.raises(DataError, match="both must be non-empty"):
        split_passages([1, 2, 3, 4], 0.9)  # round(3.6) = 4 members, no non-members


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 1.5])
def test_split_bad_fraction(fraction):
    with pytest.raises(ConfigError):
        split_passages(list(range(10)), fraction)


def test_split_documents_keeps_documents_whole():
    docs = ["a", "a", "b", "c", "c", "c", "d", None, None]
    members, nonmembers = split_documents(docs, 0.5, seed=3)
    assert sorted(members + nonmembers) == list(range(9)) and set(members).isdisjoint(nonmembers)
    for doc in "abcd":
        where = {i in members for i, d in enumerate(docs) if d == doc}
        assert len(where) == 1  # all passages of a document on one side
    assert split_documents(docs, 0.5, seed=3) == (members, nonmembers)
    # 6 units (4 documents + 2 undocumented passages): 3 of them are members
    units = {docs[i] if docs[i] is not None else i for i in members}
    assert len(units) == 3


def test_split_documents_needs_two_documents():
    with pytest.raises(DataError, match="by document: 1 document"):
        split_documents(["a"] * 6, 0.5)
