"""Background text for diluted planting, without a model: reading, overlap with the
corpus, seeded selection by tokens, and the order of an epoch."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import pytest

from copyprobe.errors import DataError
from copyprobe.plant.background import (
    epoch_order,
    load_background,
    overlapping,
    select_background,
    selection_order,
)
from copyprobe.plant.corpus import load_corpus, whitespace_count

VOCAB = [f"v{i}" for i in range(500)]


def random_words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


def test_background_book_is_cut_like_the_corpus_and_hashed(tmp_path):
    book = tmp_path / "bg.txt"
    book.write_text(" ".join(random_words(1, 100)))
    bg = load_background(book, 16, whitespace_count, corpus_texts=[])
    assert [p.text for p in bg.passages] == [p.text for p in load_corpus(book, 16).passages]
    assert len(bg.passages) == 6 and all(len(p.text.split()) == 16 for p in bg.passages)  # the 4-word tail dropped
    assert bg.sources == [{"path": str(book), "sha256": hashlib.sha256(book.read_bytes()).hexdigest(),
                           "n_passages_read": 6}]
    assert bg.source_of == [0] * 6 and bg.n_overlap == 0 and bg.n_duplicates == 0
    other = tmp_path / "other.txt"
    other.write_text(" ".join(random_words(1, 99)))  # one word less: same passages, same hash
    assert load_background(other, 16, whitespace_count, []).sha256 == bg.sha256
    other.write_text(" ".join(random_words(2, 100)))
    assert load_background(other, 16, whitespace_count, []).sha256 != bg.sha256


def test_data_file_rows_are_kept_when_they_fit_and_cut_when_longer(tmp_path):
    rows = [{"id": "short", "text": "a  b c"},  # kept as it is, spaces and all
            {"id": "long", "text": " ".join(random_words(3, 40))},  # 40 words: two passages of 16, tail of 8 kept
            {"id": "dup", "text": "a  b c"}]  # the same text again: kept once
    data = tmp_path / "bg.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bg = load_background(data, 16, whitespace_count, [])
    words = rows[1]["text"].split()
    assert [p.text for p in bg.passages] == ["a  b c", " ".join(words[:16]), " ".join(words[16:32]),
                                             " ".join(words[32:])]
    assert bg.n_duplicates == 1 and bg.sources[0]["n_passages_read"] == 4


def test_directory_background_records_every_file(tmp_path):
    root = tmp_path / "bg"
    root.mkdir()
    (root / "a.txt").write_text(" ".join(random_words(4, 32)))
    (root / "b.md").write_text(" ".join(random_words(5, 48)))
    bg = load_background(root, 16, whitespace_count, [])
    assert [s["path"] for s in bg.sources] == [str(root / "a.txt"), str(root / "b.md")]
    assert [s["n_passages_read"] for s in bg.sources] == [2, 3]
    assert bg.source_of == [0, 0, 1, 1, 1]


def test_passages_overlapping_the_corpus_are_dropped_and_counted(tmp_path):
    corpus = random_words(6, 64)
    corpus_texts = [" ".join(corpus[i:i + 16]) for i in range(0, 64, 16)]
    # the corpus inside other text, shifted by 5 words and re-cased with punctuation: no
    # background passage equals a corpus passage, nor shares 13 words in a row with any one
    # of them; passages 0-4 hold parts of the corpus's running text (4 holds its last 5 words)
    shifted = random_words(7, 5) + [w.upper() + "," for w in corpus] + random_words(8, 60)
    book = tmp_path / "bg.txt"
    book.write_text(" ".join(shifted))
    bg = load_background(book, 16, whitespace_count, corpus_texts)
    cut = [" ".join(shifted[i:i + 16]) for i in range(0, len(shifted) - 15, 16)]
    assert overlapping(cut, corpus_texts) == [True] * 5 + [False] * 3
    assert bg.n_overlap == 5 and [p.text for p in bg.passages] == cut[5:]
    assert not any("," in p.text for p in bg.passages)  # no word of the corpus's copy is left
    # 12 shared words are not an overlap; a short text equal to a short corpus passage is
    assert overlapping([" ".join(corpus[:12])], [" ".join(corpus)]) == [False]
    assert overlapping(["Hello, World!"], ["hello world"]) == [True]


def test_passages_read_on_their_own_share_no_run_across_two_of_them():
    """A plant's members are drawn at random: the end of one and the start of the next
    are not one text, and a non-member that happens to hold both halves shares no run of
    13 words with any member. Read as running text it did."""
    words = [f"w{k}" for k in range(40)]
    members = [" ".join(words[:20]), " ".join(words[20:])]
    straddles = " ".join(words[13:26])  # 7 words of the first member, 6 of the second
    inside = " ".join(["x", *words[3:16], "y"])
    assert overlapping([straddles, inside], members) == [True, True]
    assert overlapping([straddles, inside], members, running=False) == [False, True]
    # nor do two non-members that continue one another make a run between them
    assert overlapping([" ".join(words[:7]), " ".join(words[7:13])], members, running=False) == [False, False]
    assert overlapping([" ".join(words[:7]), " ".join(words[7:13])], members) == [True, True]
    short = " ".join(words[:5])  # a passage shorter than 13 words counts when a member is it, word for word
    assert overlapping([short], [short, *members], running=False) == [True]


def test_background_that_is_the_corpus_or_holds_nothing_is_refused(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(" ".join(random_words(9, 64)))
    corpus_texts = [p.text for p in load_corpus(book, 16).passages]
    with pytest.raises(DataError, match="every passage of the background .* overlaps the corpus"):
        load_background(book, 16, whitespace_count, corpus_texts)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("three words only")
    with pytest.raises(DataError, match="yields no passages"):
        load_background(tiny, 16, whitespace_count, [])
    with pytest.raises(DataError, match="background not found"):
        load_background(tmp_path / "missing.txt", 16, whitespace_count, [])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="background directory .* holds no"):
        load_background(tmp_path / "empty", 16, whitespace_count, [])


def test_selection_takes_just_enough_tokens_in_a_seeded_order():
    texts = [f"t{i}" for i in range(1000)]
    lengths = {t: 5 + i % 7 for i, t in enumerate(texts)}
    calls = []

    def tokenize(batch):
        calls.append(len(batch))
        return [[0] * lengths[t] for t in batch]

    order = selection_order(len(texts), seed=3)
    assert sorted(order) == list(range(1000)) and order != list(range(1000))
    assert order == selection_order(len(texts), seed=3) != selection_order(len(texts), seed=4)
    chosen, ids = select_background(texts, 3, tokenize, target_tokens=100.5)
    total = sum(map(len, ids))
    assert chosen == order[:len(chosen)]
    assert total >= 100.5 and total - len(ids[-1]) < 100.5  # the last passage was needed
    assert [len(x) for x in ids] == [lengths[texts[i]] for i in chosen]
    assert calls == [256]  # stops tokenizing once there
    # a larger dilution's passages start with a smaller one's
    bigger, _ = select_background(texts, 3, tokenize, target_tokens=3000)
    assert bigger[:len(chosen)] == chosen and len(bigger) > len(chosen)
    everything, _ = select_background(texts, 3, tokenize, target_tokens=None)
    assert everything == order
    short, short_ids = select_background(texts[:10], 3, tokenize, target_tokens=10**6)
    assert sorted(short) == list(range(10))  # all of it; the caller reports the shortfall


def test_epoch_order_repeats_members_and_keeps_copies_apart():
    members, background = list(range(0, 20, 2)), list(range(100, 130))
    order = epoch_order(members, background, repeats=4, batch_size=4, seed=0, epoch=0)
    counts = Counter(order)
    assert all(counts[m] == 4 for m in members) and all(counts[b] == 1 for b in background)
    assert len(order) == 70
    batches = [order[i:i + 4] for i in range(0, 70, 4)]
    assert all(len(set(b)) == len(b) for b in batches)
    assert order == epoch_order(members, background, 4, 4, 0, 0)  # seeded: a resumed run draws the same
    assert order != epoch_order(members, background, 4, 4, 0, 1)
    assert order != epoch_order(members, background, 4, 4, 1, 0)


def test_epoch_order_without_background_and_repeats_is_the_plain_member_shuffle():
    members = [0, 3, 4, 7, 9, 10]
    expected = list(members)
    random.Random("plant:5:2").shuffle(expected)  # how plant ordered an epoch before backgrounds
    assert epoch_order(members, [], 1, 2, seed=5, epoch=2) == expected


def test_copies_stay_together_only_when_nothing_else_fits():
    # one member 4 times in a batch of 4 and nothing else: no swap exists, nothing breaks
    assert epoch_order([7], [], 4, 4, 0, 0) == [7, 7, 7, 7]
    # two members 3 times, batch 3: each batch needs both members and one copy must share
    order = epoch_order([1, 2], [], 3, 3, 0, 0)
    assert sorted(order) == [1, 1, 1, 2, 2, 2]
