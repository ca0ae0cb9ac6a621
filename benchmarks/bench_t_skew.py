"""The prediction t test under skewed nulls, and the witness's path to the target's own
score (2026-12-02, after a statistics review). Synthetic scores, no model.

    python benchmarks/bench_t_skew.py --draws 3000 --out benchmarks/results/t_skew.json

Two parts, each through the audit's own verdict code (``audit_verdicts``; every
document gets the same text, so the style guard has nothing to find and the counts are
the test's):

* **level**: one suspect and k clean documents of M passages, all from one null: passage
  scores lognormal (skew that shrinks as M grows), or a lognormal document effect plus
  normal passage noise (skew that does not); normal as the control. Counted: `evidence`
  at alpha 0.01, and what it would be if a Shapiro-Wilk note on the clean scores
  withheld the claim.
* **witness**: the calibrated score ``reference`` = target - reference log-likelihood,
  where a per-document "easiness" e (what makes a text easy for any model) moves both
  models' scores alike and cancels in the difference; e lognormal (sigma) or normal.
  Audited as `copyprobe audit` audits (the reference model as witness), without the
  witness, and on `loss` alone. Counted: `evidence`, how many went through `loss` (the
  witness recognised the suspect), and how many claims the normality check of the
  target's own scores (`test.normality_own`, binding on that path) withheld: the t test on
  `loss` at its share of alpha, computed here, would have claimed them had the check been
  a note only (`check_as_a_note`: the audit before 2026-12-02).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = "the river stone house light road water field wind boat door hill morning bread window garden"
CONTEXT = {"model": "reference", "could_have_seen": True, "basis": "simulated"}


def rows_of(target: np.ndarray, reference: np.ndarray) -> tuple[list[dict], dict[str, str]]:
    """Scores rows of an audit: document 0 the suspect; [documents, passages] arrays of
    the target's and the reference model's log-likelihoods."""
    rows, texts = [], {}
    for d in range(target.shape[0]):
        doc = "suspect:s" if d == 0 else f"clean:c{d}"
        for j in range(target.shape[1]):
            pid = f"{doc}:{j}"
            t, r = float(target[d, j]), float(reference[d, j])
            rows.append({"id": pid, "doc_id": doc, "label": int(d == 0), "loss": t, "reference": t - r,
                         "details": {"reference": {"target": t, "reference": r}}})
            texts[pid] = TEXT
    return rows, texts


def level(kind: str, k: int, m: int, draws: int, seed: int) -> dict:
    from copyprobe.evaluation.verdicts import audit_verdicts

    rng = np.random.default_rng(seed)
    claims = gated = noted = 0
    for _ in range(draws):
        if kind == "passage lognormal":
            scores = rng.lognormal(0, 1, (k + 1, m))
        elif kind == "document lognormal":
            scores = rng.lognormal(0, 1, (k + 1, 1)) + rng.standard_normal((k + 1, m))
        else:
            scores = rng.standard_normal((k + 1, 1)) + rng.standard_normal((k + 1, m))
        rows, texts = rows_of(scores, np.zeros_like(scores))
        report = audit_verdicts(rows, "loss", {}, 0.01, texts, test="t", guard_test="t")
        claim = report["documents"][0]["verdict"] == "evidence"
        note = "note" in (report["test"].get("normality") or {})
        claims += claim
        noted += note
        gated += claim and not note
    return {"part": "level", "null": kind, "k": k, "passages": m, "draws": draws, "evidence": claims / draws,
            "evidence_if_the_note_withheld": gated / draws, "note_shown": noted / draws}


def witness(sigma: float, k: int, draws: int, seed: int, m: int = 3, spread: float = 0.3) -> dict:
    from copyprobe.evaluation.verdicts import audit_verdicts

    rng = np.random.default_rng(seed)
    from copyprobe.evaluation.verdicts import t_p
    from copyprobe.evaluation.witness import WITNESS_FACTORS

    counts = {"with_witness": 0, "check_as_a_note": 0, "without_witness": 0, "loss_alone": 0, "through_loss": 0,
              "withheld_by_the_check": 0}
    for _ in range(draws):
        easy = rng.lognormal(0, sigma, k + 1) if sigma > 0 else rng.standard_normal(k + 1)
        target = (easy + spread * rng.standard_normal(k + 1))[:, None] + spread * rng.standard_normal((k + 1, m))
        reference = (easy + spread * rng.standard_normal(k + 1))[:, None] + spread * rng.standard_normal((k + 1, m))
        rows, texts = rows_of(target, reference)
        asked = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t", witness_context=CONTEXT)
        row = asked["documents"][0]
        claim = row["verdict"] == "evidence"
        counts["with_witness"] += claim
        counts["through_loss"] += claim and row.get("tested_on") == "loss"
        withheld = row.get("tested_on") == "loss" and "note" in (asked["test"].get("normality_own") or {})
        if withheld:  # what the t test on loss would have said had the check been a note only
            means = target.mean(axis=1)
            withheld = WITNESS_FACTORS["own"] * t_p(float(means[0]), [float(v) for v in means[1:]]) <= 0.01
            counts["withheld_by_the_check"] += withheld
        counts["check_as_a_note"] += claim or withheld
        counts["without_witness"] += audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                                                    use_witness=False)["documents"][0]["verdict"] == "evidence"
        counts["loss_alone"] += audit_verdicts(rows, "loss", {}, 0.01, texts, test="t",
                                               guard_test="t")["documents"][0]["verdict"] == "evidence"
    return {"part": "witness", "easiness": f"lognormal sigma {sigma:g}" if sigma > 0 else "normal", "k": k,
            "passages": m, "draws": draws, **{c: (v / draws if c in ("with_witness", "check_as_a_note", "without_witness", "loss_alone")
                                                   else v) for c, v in counts.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import copyprobe.evaluation.guard as guard

    # one text for every document: no style to find, and the guard's TF-IDF is skipped (it would
    # find every distance zero; the verdict logic is otherwise the audit's)
    guard.style_distances = lambda texts: np.zeros((len(texts), len(texts)))
    started, rows = time.perf_counter(), []
    cells = [("normal", 19, 3), ("passage lognormal", 19, 1), ("passage lognormal", 19, 3),
             ("passage lognormal", 19, 64), ("passage lognormal", 5, 3), ("document lognormal", 19, 3),
             ("document lognormal", 5, 3)]
    for i, (kind, k, m) in enumerate(cells):
        rows.append(level(kind, k, m, args.draws, args.seed + i))
        print(json.dumps(rows[-1]), f"{time.perf_counter() - started:.0f} s", flush=True)
    for i, (sigma, k) in enumerate([(0.0, 19), (0.5, 19), (1.0, 19), (1.0, 5)]):
        rows.append(witness(sigma, k, args.draws, args.seed + 100 + i))
        print(json.dumps(rows[-1]), f"{time.perf_counter() - started:.0f} s", flush=True)
    Path(args.out).write_text(json.dumps({"command": ["python", *sys.argv], "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
