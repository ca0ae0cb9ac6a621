"""Random member / non-member split of passages, reproducible from a seed.

``split_passages`` splits passages (the default of ``copyprobe plant``: a book then has
both members and non-members); ``split_documents`` splits whole documents, so every
passage of a book shares its label.
"""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

from copyprobe.errors import DataError, SettingError

T = TypeVar("T")

MIN_PASSAGES = 4


def n_members_for(n: int, member_fraction: float) -> int:
    return int(round(n * member_fraction))


def split_passages(items: Sequence[T], member_fraction: float = 0.5, seed: int = 0) -> tuple[list[int], list[int]]:
    """Indices of members and non-members, each in corpus order.

    The same items, fraction and seed give the same split on every machine (Python's
    ``random.Random(seed)`` shuffle). Raises DataError when the corpus is too small for
    both classes to be non-empty.
    """
    if not 0.0 < member_fraction < 1.0:
        raise SettingError("member_fraction", f"must be between 0 and 1 (exclusive), got {member_fraction}")
    n = len(items)
    if n < MIN_PASSAGES:
        raise DataError(f"corpus too small to split: {n} passage(s), need at least {MIN_PASSAGES}")
    k = n_members_for(n, member_fraction)
    if k < 1 or k > n - 1:
        raise DataError(
            f"corpus too small to split: {n} passages with member_fraction {member_fraction} "
            f"gives {k} members and {n - k} non-members; both must be non-empty"
        )
    order = list(range(n))
    random.Random(seed).shuffle(order)
    members = sorted(order[:k])
    nonmembers = sorted(order[k:])
    return members, nonmembers


def split_documents(doc_ids: Sequence[str | None], member_fraction: float = 0.5,
                    seed: int = 0) -> tuple[list[int], list[int]]:
    """Indices of members and non-members when whole documents are split: every passage
    of a document gets the same label. Passages without a document count as their own."""
    if not 0.0 < member_fraction < 1.0:
        raise SettingError("member_fraction", f"must be between 0 and 1 (exclusive), got {member_fraction}")
    n = len(doc_ids)
    if n < MIN_PASSAGES:
        raise DataError(f"corpus too small to split: {n} passage(s), need at least {MIN_PASSAGES}")
    keys = [d if d is not None else f"\x00{i}" for i, d in enumerate(doc_ids)]
    docs = list(dict.fromkeys(keys))
    k = n_members_for(len(docs), member_fraction)
    if k < 1 or k > len(docs) - 1:
        raise DataError(
            f"corpus too small to split by document: {len(docs)} document(s) with member_fraction "
            f"{member_fraction} gives {k} member and {len(docs) - k} non-member documents; both must be non-empty"
        )
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    member_docs = {docs[i] for i in order[:k]}
    members = [i for i, key in enumerate(keys) if key in member_docs]
    nonmembers = [i for i, key in enumerate(keys) if key not in member_docs]
    return members, nonmembers
