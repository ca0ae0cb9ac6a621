"""Copying beside a baseline: the same literal-copying metrics on text the model cannot
have seen, and the difference with a bootstrap CI (docs/copying.md, "Baseline").

A model completing any 200-word prefix with 50 plausible words already shares some
words, in order, with the true continuation: ROUGE-L around 0.2 on text it never read.
So a protected book's ROUGE-L means something only beside the same number on unseen
text, cut the same way; and the conclusion rests on the copy rate (ROUGE-L at the
threshold), because the mean also measures how alike the two texts are (:func:`comparison`). The clean text is the user's (``--clean``: a .txt/.epub file, or
CopyBench literal JSON) or the default shipped in ``copyprobe/copying/data/clean/``
(prose written for copyprobe in 2026, CC0). A book's clean items are cut with the prefix
and reference lengths of the suspect items (their medians), windows starting every
reference length, and as many as there are suspect items (when the clean text has that
many).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from copyprobe.copying.data import CopySet, LiteralItem, literal_items_from_text
from copyprobe.data.sampling import sample_items
from copyprobe.errors import DataError

DEFAULT_CLEAN = Path(__file__).parent / "data" / "clean" / "fresh_prose.txt"
CLEAN_PREFIX = "clean:"
NOT_MORE = "no more copying than on unseen text"
MORE = "more copying than on unseen text"
COMPARED = (("mean_rouge_l", "rouge_l"), ("mean_lcs", "lcs"), ("rate", "copied"))


@dataclass(frozen=True)
class CleanItems:
    """The clean items matched to the suspect ones, and ``note``: why they are not matched
    in prefix length, or None."""

    items: list[LiteralItem]
    note: str | None


def clean_literal_items(clean: str | Path | CopySet | None, suspect: Sequence[LiteralItem],
                        limit: int | None = None, seed: int = 0) -> list[LiteralItem]:
    """Literal items of the clean text, matched to ``suspect`` in length and number."""
    return matched_clean_items(clean, suspect, limit, seed).items


def matched_clean_items(clean: str | Path | CopySet | None, suspect: Sequence[LiteralItem],
                        limit: int | None = None, seed: int = 0) -> CleanItems:
    """:func:`clean_literal_items` with the note of a prefix shortfall: the median prefix
    of the suspect items, which cuts a clean book, is also what the clean items are held
    against (one number, not two computations of it).

    A clean text with more items than wanted gives a seeded random sample of them
    (:func:`sample_items`, ``seed``), as the book's are sampled: its first windows are its
    front matter and first pages, unlike the book's sampled items."""
    from copyprobe.copying.data import load_copyset
    from copyprobe.data.books import read_book

    if not suspect:
        return CleanItems([], None)
    wanted = min(len(suspect), limit) if limit is not None else len(suspect)
    book_prefix = statistics.median(len(i.input.split()) for i in suspect)
    source = DEFAULT_CLEAN if clean is None else clean
    cut = not isinstance(source, CopySet) and Path(source).suffix.lower() in (".txt", ".epub", ".md")
    if isinstance(source, CopySet):
        items = list(source.literal)
    elif cut:  # a text: cut into items at the book's lengths
        prefix = max(1, round(book_prefix))
        reference = max(1, round(statistics.median(len(i.reference.split()) for i in suspect)))
        text = read_book(source)
        n_words = len(text.split())
        if n_words < prefix + reference:  # a short clean text: shorter prefixes, same references
            prefix = max(1, n_words - reference)
        items = literal_items_from_text(text, title=Path(source).stem, prefix_words=prefix,
                                        reference_words=reference, stride=reference)
    else:
        items = list(load_copyset(source).literal)
    if not items:
        raise DataError(f"the clean set {source} has no literal items to compare with")
    matched = [LiteralItem(id=CLEAN_PREFIX + i.id, title=i.title, input=i.input, reference=i.reference)
               for i in sample_items(items, wanted, seed)]
    return CleanItems(matched, _prefix_shortfall(book_prefix, matched, cut))


# how much shorter the clean prefixes' median may be before the baseline is called not
# matched: the book's own prefixes vary about their median, and a word or two less of
# context moves nothing (the demo's fresh passages, 41 words against 41.5, were noted)
PREFIX_SHORTFALL = 0.1


def _prefix_shortfall(book_prefix: float, clean: Sequence[LiteralItem], cut: bool = True) -> str | None:
    """A note when the clean items' prefixes are shorter than the book's by more than
    PREFIX_SHORTFALL (a clean text too short for one item at the book's lengths is cut
    with shorter prefixes, ``cut``; given items have the prefixes they have): a model
    given less context copies less, so the baseline is then not matched."""
    unseen = statistics.median(len(i.input.split()) for i in clean)
    if unseen >= book_prefix * (1 - PREFIX_SHORTFALL):
        return None
    words = f"{unseen:g} words against the book's {book_prefix:g}"
    if cut:
        return (f"the clean text is too short for the book's prefix length: its prefixes have {words}, so the "
                "baseline is not matched in prefix length (give a longer clean text)")
    return (f"the clean items' prefixes are shorter than the book's: they have {words} (median), so the baseline is "
            "not matched in prefix length (give clean items with prefixes as long as the book's)")


def longest_common_span(output: str, reference: str) -> tuple[int, str]:
    """(words, text) of the longest run of consecutive words of ``reference`` that the
    output reproduces word for word (case and punctuation ignored)."""
    def norm(w: str) -> str:
        return "".join(c for c in w.lower() if c.isalnum())

    out = [norm(w) for w in output.split()]
    ref_words = reference.split()
    ref = [norm(w) for w in ref_words]
    best, end = 0, 0
    prev = [0] * (len(out) + 1)
    for i in range(1, len(ref) + 1):
        cur = [0] * (len(out) + 1)
        for j in range(1, len(out) + 1):
            if ref[i - 1] and ref[i - 1] == out[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, end = cur[j], i
        prev = cur
    return best, " ".join(ref_words[end - best:end])


def difference(suspect: Sequence[float], clean: Sequence[float], n_bootstrap: int = 1000,
               seed: int = 0) -> dict[str, Any]:
    """Mean(suspect) - mean(clean) with a 95% percentile bootstrap CI (items resampled
    within each set); ``more`` when the whole CI is above 0."""
    from scipy import stats

    x, y = np.asarray(suspect, float), np.asarray(clean, float)
    out: dict[str, Any] = {"suspect": float(x.mean()) if len(x) else None,
                           "clean": float(y.mean()) if len(y) else None,
                           "difference": float(x.mean() - y.mean()) if len(x) and len(y) else None,
                           "ci_low": None, "ci_high": None, "n_suspect": len(x), "n_clean": len(y),
                           "n_bootstrap": n_bootstrap, "more": None}
    if len(x) < 2 or len(y) < 2 or n_bootstrap < 1:
        return out
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # no spread at all: the CI is the point
        out["ci_low"] = out["ci_high"] = out["difference"]
    else:
        res = stats.bootstrap((x, y), lambda a, b, axis=-1: a.mean(axis=axis) - b.mean(axis=axis),
                              n_resamples=n_bootstrap, method="percentile", vectorized=True,
                              random_state=np.random.default_rng(seed))
        out["ci_low"], out["ci_high"] = float(res.confidence_interval.low), float(res.confidence_interval.high)
    out["more"] = bool(out["ci_low"] > 0)
    return out


def per_item(rows: Sequence[dict], key: str, threshold: float) -> list[float]:
    """One value per item: the mean over its rows (one row per prompt template), so that
    the bootstrap resamples items, not templates (three templates of one item are not three
    independent items). ``key`` "copied": the share of its rows at or above ``threshold``."""
    by_item: dict[str, list[float]] = {}
    for row in rows:
        value = float(row["rouge_l"] >= threshold) if key == "copied" else float(row[key])
        by_item.setdefault(str(row["id"]), []).append(value)
    return [float(np.mean(values)) for values in by_item.values()]


def comparison(suspect_rows: list[dict], clean_rows: list[dict], threshold: float, n_bootstrap: int = 1000,
               seed: int = 0) -> dict[str, Any]:
    """The baseline block of metrics.json for literal copying.

    The conclusion rests on the copy rate (the share of items whose ROUGE-L reaches the
    threshold), CopyBench's measure (§4.2: "the proportion of cases above a threshold
    rather than the average score"), not on mean ROUGE-L. Mean ROUGE-L against unseen text
    also measures how alike the two texts are: a model that has read neither continues a
    repetitive or formulaic book (the KJV's "and the LORD spake unto Moses, saying") with
    more of its words than fresh prose, so a higher mean is said, not read as copying."""
    block = {metric: difference(per_item(suspect_rows, key, threshold), per_item(clean_rows, key, threshold),
                                n_bootstrap, seed)
             for metric, key in COMPARED}
    head = block["rate"]

    def said(d: dict[str, Any]) -> str:
        return f"difference {d['difference']:+.3f} (95% CI {d['ci_low']:+.3f} to {d['ci_high']:+.3f})"

    if head["more"] is None:
        sentence = "cannot tell: too few scored items in the book or in the clean baseline to compare"
    else:
        sentence = (f"{MORE if head['more'] else NOT_MORE}: {head['suspect']:.1%} of the book's items copied "
                    f"(ROUGE-L >= {threshold}) against {head['clean']:.1%} on unseen text, {said(head)}")
        mean = block["mean_rouge_l"]
        if not head["more"] and mean["more"]:
            sentence += (f"; mean ROUGE-L is higher than on unseen text ({mean['suspect']:.3f} against "
                         f"{mean['clean']:.3f}, {said(mean)}), which the book's style gives as well as "
                         "memorisation (a repetitive text is easier to continue), so it is not read as copying")
    return {"literal": block, "n_bootstrap": n_bootstrap, "seed": seed, "conclusion": sentence}


__all__ = ["CLEAN_PREFIX", "DEFAULT_CLEAN", "MORE", "NOT_MORE", "CleanItems", "clean_literal_items", "comparison",
           "difference", "longest_common_span", "matched_clean_items", "per_item"]
