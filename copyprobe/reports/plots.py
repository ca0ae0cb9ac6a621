"""Plots for the HTML report, as ``data:image/png;base64,...`` URIs (no file, no network).

Matplotlib is imported here only, and this module only when a report is written, so
``import copyprobe`` stays fast. Figures are drawn with the Agg canvas directly (no
pyplot, so no global state and no GUI backend).
"""

from __future__ import annotations

import base64
import io
import math
from typing import Sequence

import numpy as np

MEMBER_COLOR = "#c0392b"
NONMEMBER_COLOR = "#2471a3"
NEUTRAL_COLOR = "#566573"
SUSPECT_COLOR = MEMBER_COLOR  # the user's suspect document (not a known member)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _to_data_uri(fig) -> str:
    buffer = io.BytesIO()
    fig.tight_layout()
    # no "Software" tag: the PNG would otherwise carry matplotlib's web address
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _bins(values: Sequence[float]) -> np.ndarray | int:
    arr = np.asarray(values, dtype=float)
    n = int(min(30, max(8, 2 * math.sqrt(len(arr)))))
    if len(arr) == 0:
        return n
    lo, hi = float(arr.min()), float(arr.max())
    if lo == hi:
        return np.linspace(lo - 0.5, hi + 0.5, 3)
    return np.linspace(lo, hi, n + 1)


def _short(label: str, width: int = 40) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def roc_plot(curves: Sequence[dict], title: str = "ROC", positive: str = "members",
             negative: str = "non-members") -> str:
    """ROC curves: each ``{"label", "fpr", "tpr", "auc", "dashed"?}``; marks 1% and 5% FPR.
    ``positive``/``negative`` name the label-1 and label-0 rows on the axes."""
    fig = _figure(4.6, 4.0)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="#aaaaaa", linewidth=1, linestyle=":", label="chance")
    for fpr_mark in (0.01, 0.05):
        ax.axvline(fpr_mark, color="#dddddd", linewidth=0.8)
    for i, curve in enumerate(curves):
        auc = curve.get("auc")
        label = _short(str(curve["label"]))
        if auc is not None and math.isfinite(auc):
            label += f" (AUC {auc:.3f})"
        ax.plot(curve["fpr"], curve["tpr"], color=curve.get("color", PALETTE[i % len(PALETTE)]),
                linewidth=1.6, linestyle="--" if curve.get("dashed") else "-", label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(f"false positive rate ({negative} flagged)")
    ax.set_ylabel(f"true positive rate ({positive} found)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    ax.grid(alpha=0.2)
    return _to_data_uri(fig)


def distribution_plot(members: Sequence[float], nonmembers: Sequence[float],
                      unlabelled: Sequence[float] = (), title: str = "scores",
                      xlabel: str = "score (higher = more likely a member)",
                      names: tuple[str, str] = ("members", "non-members")) -> str:
    """Histograms of member and non-member scores (and of unlabelled ones, if any); ``names``
    label the two groups (an audit's are suspect and clean passages)."""
    fig = _figure(4.6, 4.0)
    ax = fig.add_subplot()
    everything = [*members, *nonmembers, *unlabelled]
    bins = _bins(everything)
    groups = [(nonmembers, names[1], NONMEMBER_COLOR), (members, names[0], MEMBER_COLOR),
              (unlabelled, "unlabelled", NEUTRAL_COLOR)]
    density = bool(len(members)) and bool(len(nonmembers))
    for values, name, color in groups:
        if len(values):
            ax.hist(values, bins=bins, alpha=0.55, color=color, density=density,
                    label=f"{name} (n={len(values)})", edgecolor="white", linewidth=0.4)
    if not everything:
        ax.text(0.5, 0.5, "no scores", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density" if density else "passages")
    ax.set_title(title, fontsize=10)
    if everything:
        ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.2)
    return _to_data_uri(fig)


def verdict_plot(suspect_score: float | None, clean_scores: Sequence[float], title: str,
                 rank: int | None = None, score_name: str | None = None) -> str:
    """A suspect document's score among the clean documents' scores, one dot per clean
    document: the comparison the audit's document-level test makes, on the score it was
    tested on (``score_name``, written on the axis).

    ``rank`` (1 = highest score) is written in the legend when given.
    """
    fig = _figure(7.2, 2.5)
    ax = fig.add_subplot()
    clean = np.asarray([s for s in clean_scores if s is not None and math.isfinite(s)], float)
    if len(clean):
        # deterministic jitter: only to keep equal scores from hiding each other
        ys = np.random.default_rng(0).uniform(-0.3, 0.3, len(clean))
        ax.scatter(clean, ys, color=NONMEMBER_COLOR, s=22, alpha=0.75, zorder=2,
                   label=f"clean documents (n={len(clean)})")
    if suspect_score is not None and math.isfinite(suspect_score):
        where = f", rank {rank} of {len(clean) + 1}" if rank is not None else ""
        ax.axvline(suspect_score, color=SUSPECT_COLOR, linewidth=1.2, zorder=1)
        ax.scatter([suspect_score], [0.0], color=SUSPECT_COLOR, marker="D", s=60, zorder=3,
                   label=f"this suspect document ({suspect_score:.3g}{where})")
    if not len(clean) and (suspect_score is None or not math.isfinite(suspect_score)):
        ax.text(0.5, 0.5, "no document score", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    by = f" by {score_name}" if score_name else ""
    ax.set_xlabel(f"document score{by}\n(mean passage score; higher = more like trained-on text)", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.2, axis="x")
    if len(clean) or suspect_score is not None:
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _to_data_uri(fig)


def passage_verdict_plot(passage_scores: Sequence[float], baseline_scores: Sequence[float] | None,
                 baseline_mean: float | None, baseline_std: float | None, title: str) -> str:
    """Older (format 1) verdicts: a suspect document's passage scores against the clean
    baseline's passages. With ``baseline_scores`` the baseline is a histogram; otherwise a
    normal curve from its mean and standard deviation.
    """
    fig = _figure(6.4, 2.6)
    ax = fig.add_subplot()
    passages = np.asarray([s for s in passage_scores if s is not None and math.isfinite(s)], float)
    ymax = 1.0
    if baseline_scores is not None and len(baseline_scores):
        base = np.asarray(baseline_scores, dtype=float)
        counts, _, _ = ax.hist(base, bins=_bins([*base, *passages]), density=True, alpha=0.5,
                               color=NONMEMBER_COLOR, label=f"clean baseline (n={len(base)})",
                               edgecolor="white", linewidth=0.4)
        ymax = float(max(counts.max(), 1e-9))
    elif baseline_mean is not None and baseline_std is not None and baseline_std > 0:
        lo = min(baseline_mean - 4 * baseline_std, *(passages.tolist() or [baseline_mean]))
        hi = max(baseline_mean + 4 * baseline_std, *(passages.tolist() or [baseline_mean]))
        xs = np.linspace(lo, hi, 200)
        ys = np.exp(-0.5 * ((xs - baseline_mean) / baseline_std) ** 2) / (baseline_std * math.sqrt(2 * math.pi))
        ax.fill_between(xs, ys, alpha=0.4, color=NONMEMBER_COLOR,
                        label="clean baseline (normal, from mean and sd)")
        ymax = float(ys.max())
    if baseline_mean is not None:
        ax.axvline(baseline_mean, color=NONMEMBER_COLOR, linewidth=1.2, linestyle="--",
                   label=f"baseline mean {baseline_mean:.3g}")
    if len(passages):
        jitter = np.random.default_rng(0).uniform(0.05, 0.25, len(passages)) * ymax
        ax.scatter(passages, jitter, color=MEMBER_COLOR, s=18, zorder=3,
                   label=f"this document's passages (n={len(passages)})")
        ax.axvline(float(passages.mean()), color=MEMBER_COLOR, linewidth=1.2,
                   label=f"document mean {passages.mean():.3g}")
    ax.set_xlabel("passage score (higher = more like trained-on text)")
    ax.set_yticks([])
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _to_data_uri(fig)
