"""A seeded random sample of a list that keeps the list's order: what ``--limit`` keeps
of a data file (detect's passages, copying's items and clean windows)."""

from __future__ import annotations

import random
from typing import Any, Sequence


def sample_items(items: Sequence[Any], limit: int | None, seed: int = 0) -> list[Any]:
    """``limit`` of ``items`` drawn at random with ``seed``, in their order in ``items``
    (all of them when ``limit`` is None or not below their number).

    CopyBench samples its snippets at random (§3.2); the first items of a book are its
    first pages (front matter, one chapter), a file's first items may all be one book's,
    and a labelled file's may all have one label (the bundled demo lists its members first).
    Each item gets a key from ``random.Random(seed).random()``, whose sequence Python keeps
    the same across versions, and the ``limit`` smallest keys are kept: the same seed gives
    the same items, and a larger limit keeps the items of a smaller one."""
    if limit is None or limit >= len(items):
        return list(items)
    rng = random.Random(seed)
    keys = [rng.random() for _ in items]
    kept = sorted(range(len(items)), key=keys.__getitem__)[:limit]
    return [items[i] for i in sorted(kept)]


__all__ = ["sample_items"]
