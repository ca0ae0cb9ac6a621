"""Background text for diluted planting: text trained on together with the members,
never labelled, so the members are a small part of what the model sees (as a real book
is a small part of a pre-training set).

* :func:`load_background` reads it like a corpus (books cut into passages of
  ``passage_tokens``; data-file rows kept whole when they fit, else cut the same way),
  keeps each text once, and drops every passage that overlaps the corpus: one that
  holds part of a run of :data:`OVERLAP_WORDS` words that is also in the corpus (both
  read as running text, so passage boundaries do not hide a run), or (shorter than that)
  equals a corpus passage, after lower-casing and dropping punctuation. Training on such
  a passage would train on a non-member, or give a member extra exposure.
* :func:`select_background` takes passages in a seeded order until their tokens reach a
  target (``dilution`` x the members' tokens), so one background serves every dilution
  and a smaller dilution's passages are a prefix of a larger one's.
* :func:`epoch_order` is the order of one epoch: every member ``repeats`` times and
  every background passage once, shuffled with a seed per epoch (so a resumed run draws
  the same batches), copies of a member moved apart so that no batch holds one twice
  when that is possible.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from copyprobe.backends.hf.loading import sha256_file
from copyprobe.errors import DataError
from copyprobe.plant.corpus import CorpusText, CountTokens, Passage, corpus_files, cut_corpus, cut_passages, read_corpus

OVERLAP_WORDS = 13  # a run this long shared by chance between unrelated texts is very rare
TOKENIZE_CHUNK = 256  # passages tokenized per call while selecting

_WORD = re.compile(r"\w+")


@dataclass
class Background:
    path: str
    passages: list[Passage]  # kept: read, de-duplicated, not overlapping the corpus; reading order
    source_of: list[int]  # index into sources, per kept passage
    sources: list[dict]  # path, sha256 of the file, n_passages_read (distinct within the file)
    sha256: str  # of the texts read (before the overlap check, which the corpus decides)
    n_duplicates: int  # texts read twice, kept once
    n_overlap: int  # passages dropped because they overlap the corpus
    skipped: list[dict] = field(default_factory=list)  # entries of the folder that could not be read


def _cut_long_rows(passages: list[Passage], passage_tokens: int, count_tokens: CountTokens) -> list[Passage]:
    """Data-file rows longer than ``passage_tokens`` cut like books; cut passages and rows
    that fit stay as they are."""
    out: list[Passage] = []
    for p in passages:
        if p.n_tokens is not None or sum(max(1, count_tokens(" " + w)) for w in p.text.split()) <= passage_tokens:
            out.append(p)
        else:
            out.extend(cut_passages(p.text, passage_tokens, count_tokens, doc_id=p.id))
    return out


def normalised_words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def overlapping(texts: Sequence[str], corpus_texts: Sequence[str], n: int = OVERLAP_WORDS,
                running: bool = True) -> list[bool]:
    """Per text: does it hold a word of a run of ``n`` normalised words that also occurs in
    the corpus, or (shorter than ``n`` words) have the same normalised words as a corpus
    text? With ``running``, both lists are read as running text (each text continues the
    one before: a background cut into pieces), so a run is found across passage
    boundaries, and every passage holding part of it counts. Without, each text is read
    on its own: passages drawn at random from a corpus (a plant's members) do not continue
    one another, and a run across two of them is in no passage."""
    corpus_lists = [normalised_words(text) for text in corpus_texts]
    text_lists = [normalised_words(text) for text in texts]
    corpus = [[w for ws in corpus_lists for w in ws]] if running else corpus_lists
    runs = {tuple(words[i:i + n]) for words in corpus for i in range(len(words) - n + 1)}
    whole = {tuple(ws) for ws in corpus_lists if len(ws) < n}
    flags = [len(ws) < n and tuple(ws) in whole for ws in text_lists]
    # (words, the text each word belongs to): one stream of every text, or each text alone
    streams = ([([w for ws in text_lists for w in ws], [k for k, ws in enumerate(text_lists) for _ in ws])]
               if running else [(ws, [k] * len(ws)) for k, ws in enumerate(text_lists)])
    for words, owner in streams:
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) in runs:
                for k in set(owner[i:i + n]):
                    flags[k] = True
    return flags


@dataclass
class BackgroundText:
    """A background read but not yet cut (:func:`read_background`): every file as read,
    with its sha256."""

    path: str | Path
    files: list[tuple[CorpusText, str]]  # (the file read, its sha256)
    skipped: list[dict] = field(default_factory=list)


def read_background(path: str | Path, *, text_column: str | None = None) -> BackgroundText:
    """Every file of the background read (no tokenizer needed); a DataError when it is
    missing, a directory holds nothing to read, or a file cannot be read or parsed."""
    root = Path(path).expanduser()
    if not root.exists():
        raise DataError(f"background not found: {path}")
    files, skipped = corpus_files(root, path) if root.is_dir() else ([root], [])
    if not files:
        raise DataError(f"background directory {path} holds no .txt, .md, .epub or data files")
    return BackgroundText(path, [(read_corpus(f, text_column=text_column, what="background"), sha256_file(f))
                                 for f in files], skipped)


def cut_background(read: BackgroundText, passage_tokens: int, count_tokens: CountTokens,
                   corpus_texts: Sequence[str]) -> Background:
    """The passages of a background read with :func:`read_background` (see the module
    doc); a DataError when it yields no passage, or none that does not overlap the corpus."""
    path = read.path
    passages: list[Passage] = []
    source_of: list[int] = []
    sources: list[dict] = []
    digest = hashlib.sha256()
    seen: set[str] = set()
    n_duplicates = 0
    for n, (text, sha256) in enumerate(read.files):
        corpus = cut_corpus(text, passage_tokens, count_tokens)
        cut = _cut_long_rows(corpus.passages, passage_tokens, count_tokens)
        n_duplicates += corpus.n_duplicates
        sources.append({"path": str(text.path), "sha256": sha256, "n_passages_read": len(cut)})
        for p in cut:
            if p.text in seen:
                n_duplicates += 1
                continue
            seen.add(p.text)
            digest.update(p.text.encode() + b"\x1e")
            passages.append(p)
            source_of.append(n)
    if not passages:
        raise DataError(f"background {path} yields no passages (each book needs at least {max(1, passage_tokens // 2)} "
                        f"tokens of text at passage_tokens {passage_tokens})")
    flags = overlapping([p.text for p in passages], corpus_texts)
    kept = [i for i, bad in enumerate(flags) if not bad]
    if not kept:
        raise DataError(f"every passage of the background {path} overlaps the corpus ({len(passages)} passages share "
                        f"a run of {OVERLAP_WORDS} words with a corpus passage); use text that is not the corpus")
    return Background(str(path), [passages[i] for i in kept], [source_of[i] for i in kept], sources,
                      digest.hexdigest(), n_duplicates, len(passages) - len(kept), read.skipped)


def load_background(path: str | Path, passage_tokens: int, count_tokens: CountTokens, corpus_texts: Sequence[str],
                    *, text_column: str | None = None) -> Background:
    """The background's passages (see the module doc); a DataError when it is missing or
    yields no passage. :func:`read_background` and :func:`cut_background` are its two
    steps (plant reads before the tokenizer loads)."""
    return cut_background(read_background(path, text_column=text_column), passage_tokens, count_tokens, corpus_texts)


def selection_order(n: int, seed: int) -> list[int]:
    """The seeded order in which background passages are taken."""
    order = list(range(n))
    random.Random(f"plant-background:{seed}").shuffle(order)
    return order


def select_background(texts: Sequence[str], seed: int, tokenize: Callable[[list[str]], list[list[int]]],
                      target_tokens: float | None) -> tuple[list[int], list[list[int]]]:
    """(indices into ``texts``, their token ids), in the seeded order: the shortest prefix
    whose tokens reach ``target_tokens``, or every text when it is None. Stops tokenizing
    once the target is reached. When the whole background falls short, returns all of it
    (the caller compares the sum with the target)."""
    order = selection_order(len(texts), seed)
    chosen: list[int] = []
    ids: list[list[int]] = []
    total = 0
    for start in range(0, len(order), TOKENIZE_CHUNK):
        chunk = order[start:start + TOKENIZE_CHUNK]
        for i, seq in zip(chunk, tokenize([texts[i] for i in chunk])):
            if target_tokens is not None and total >= target_tokens:
                return chosen, ids
            chosen.append(i)
            ids.append(seq)
            total += len(seq)
    return chosen, ids


def epoch_order(members: Sequence[int], background: Sequence[int], repeats: int, batch_size: int, seed: int,
                epoch: int) -> list[int]:
    """Indices trained on in epoch ``epoch``, in order (see the module doc). With one copy
    and no background this is the members shuffled exactly as plant always did."""
    order = list(members) * repeats + list(background)
    random.Random(f"plant:{seed}:{epoch}").shuffle(order)
    if repeats > 1:
        _spread_copies(order, batch_size, random.Random(f"plant-spread:{seed}:{epoch}"))
    return order


def _spread_copies(order: list[int], batch_size: int, rng: random.Random) -> None:
    """Swap copies that share a batch with items of other batches (in place), as long as
    a swap exists that puts no item twice into either batch."""
    n = len(order)
    contents = [Counter(order[b:b + batch_size]) for b in range(0, n, batch_size)]
    for pos in range(n):
        here, item = pos // batch_size, order[pos]
        if contents[here][item] < 2:
            continue
        start = rng.randrange(n)
        for step in range(n):
            other = (start + step) % n
            there, swap = other // batch_size, order[other]
            if there == here or contents[there][item] or contents[here][swap]:
                continue
            order[pos], order[other] = swap, item
            contents[here][item] -= 1
            contents[here][swap] += 1
            contents[there][swap] -= 1
            contents[there][item] += 1
            break
