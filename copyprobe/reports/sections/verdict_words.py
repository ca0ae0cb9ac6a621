"""What the sections of both verdicts.json formats share: a verdict's CSS class, the
counts per verdict, rank standings, the cap on plots."""

from __future__ import annotations

from typing import Any

from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE, VERDICTS, normalise_verdict, ordinal

MAX_VERDICT_PLOTS = 60  # documents shown with plot and sentence; suspect ones first
VERDICT_CSS = {EVIDENCE: "evidence", NO_EVIDENCE: "no-evidence", CANNOT_TELL: "cannot-tell"}


def verdict_class(verdict: Any) -> str:
    """CSS class of a verdict written by any version (old words read as today's)."""
    return VERDICT_CSS[normalise_verdict(verdict)]


def counts(docs: list[dict]) -> dict[str, int]:
    return {VERDICT_CSS[w]: sum(d["verdict"] == w for d in docs) for w in VERDICTS}


def standing_text(part: Any) -> str:
    """'9th of 25' for a rank/of pair (a document row or a guard standing)."""
    rank = part.get("rank") if isinstance(part, dict) else None
    if isinstance(rank, bool) or not isinstance(rank, int):  # true is no rank, though an int
        return "—"
    return f"{ordinal(rank)} of {part.get('of', '?')}"


def short_title(text: str, width: int = 50) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plotted_first(docs: list[dict]) -> list[dict]:
    """The documents that get a plot: those with evidence first, then the file's order."""
    return sorted(docs, key=lambda d: d["verdict"] != EVIDENCE)[:MAX_VERDICT_PLOTS]


__all__ = ["MAX_VERDICT_PLOTS", "VERDICT_CSS", "counts", "plotted_first", "short_title", "standing_text",
           "verdict_class"]
