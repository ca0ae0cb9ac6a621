"""The report page of a `canary test` run: verdict (shared vocabulary), exact and
combined p-values, and a rank plot per canary (the published candidate among the
held-out ones). Everything comes from the run directory; no model, no kit needed."""

from __future__ import annotations

import math
import os
from typing import Any

from copyprobe.errors import DataError
from copyprobe.evaluation.vocabulary import EVIDENCE, NO_EVIDENCE, normalise_verdict
from copyprobe.reports.templating import environment, verdict_css

_SCORE_ID = "c{index}:{j}"


def _fmt_p(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "—"
    return f"{v:.3g}" if v >= 1e-3 else f"{v:.2e}"


def candidate_scores(canary: dict, scores: list[dict]) -> dict[int, list[float | None]]:
    """Canary index -> every candidate's score, by candidate number (rows ``c<k>:<j>``)."""
    method = canary.get("method")
    out: dict[int, list[float | None]] = {}
    by_id = {str(r.get("id")): r for r in scores}
    for c in canary.get("canaries", []):
        k, n = int(c["index"]), int(c["n_candidates"])
        values = []
        for j in range(n):
            v = by_id.get(_SCORE_ID.format(index=k, j=j), {}).get(method)
            values.append(float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None)
        out[k] = values
    return out


def rank_plot(values: list[float | None], published_score: float | None, rank: int, title: str) -> str:
    """Scores of all candidates sorted best first; the published one in red at its rank."""
    from copyprobe.reports.plots import MEMBER_COLOR, NEUTRAL_COLOR, _figure, _to_data_uri

    fig = _figure(6.4, 2.8)
    ax = fig.add_subplot()
    scored = sorted((v for v in values if v is not None), reverse=True)
    ax.scatter(range(1, len(scored) + 1), scored, s=10, color=NEUTRAL_COLOR, label="held-out candidates")
    if published_score is not None:
        ax.scatter([rank], [published_score], s=60, color=MEMBER_COLOR, zorder=3,
                   label=f"published canary (rank {rank} of {len(values)})")
    ax.set_xlabel("rank among all candidates (1 = most likely seen)")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.2)
    return _to_data_uri(fig)


def build_context(run_dir: str | os.PathLike) -> dict[str, Any]:
    from copyprobe.record import load_run

    run = load_run(run_dir)
    canary = run.canary
    if not isinstance(canary, dict) or not isinstance(canary.get("canaries"), list):
        raise DataError(f"{run.dir / 'canary.json'} is not a canary test result")
    values = candidate_scores(canary, run.scores or [])
    rows = []
    for c in canary["canaries"]:
        k = int(c["index"])
        rows.append({
            "index": k, "rank": c.get("rank"), "n": c.get("n_candidates"), "repeat": c.get("repeat"),
            "p": _fmt_p(c.get("p_value")), "ties": c.get("n_ties"), "unscored": c.get("n_unscored"),
            "plot": rank_plot(values.get(k, []), c.get("published_score"), int(c.get("rank", 1)),
                              f"canary {k}: {canary.get('method')} scores of its {c.get('n_candidates')} candidates"),
        })
    combined = canary.get("combined") or {}
    if "reason" in canary:
        word, explanation = normalise_verdict(canary.get("verdict")), canary.get("explanation") or ""
    else:  # canary.json from before the shared vocabulary: the sentence was under "verdict"
        word = EVIDENCE if canary.get("significant") else NO_EVIDENCE
        explanation = str(canary.get("verdict") or "")
    model = run.record.model
    return {
        "title": "copyprobe canary report",
        "model_name": (model.get("spec") if isinstance(model, dict) else model) or "?",
        "created": run.record.created or "—",
        "run_dir": str(run.dir),
        "method": canary.get("method", "?"), "alpha": canary.get("alpha"),
        "verdict": word, "verdict_css": verdict_css(word),
        "reason": canary.get("reason") or "", "explanation": explanation,
        "p": _fmt_p(canary.get("p_value")), "test": canary.get("test"),
        "rows": rows,
        "combined": {"sum": combined.get("sum_of_ranks"), "p": _fmt_p(combined.get("sum_of_ranks_p")),
                     "min_p": _fmt_p(combined.get("min_p")), "min_p_p": _fmt_p(combined.get("min_p_p"))}
        if len(rows) > 1 else None,
        "kit": canary.get("kit") or {},
    }


def render(run_dir: str | os.PathLike) -> str:
    return environment().get_template("canary.html.j2").render(**build_context(run_dir))


__all__ = ["build_context", "candidate_scores", "rank_plot", "render"]
