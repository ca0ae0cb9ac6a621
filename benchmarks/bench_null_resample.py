"""How often the audit claims training on never-seen documents, audit by random audit: the
null battery's saved passage scores, resampled within one style (2026-12-02).

The null battery (audit_validity.md) runs 108 fixed audits a model; 0 false claims of 108
still allows a rate up to 2.7% (95% upper bound), and its audits mix styles, where the
style guard, not the test, does the work. Here every audit draws one suspect and k clean
documents at random from **one style** (the battery's never-seen drafts: modern narrative,
description, dialogue, legal, verse, archaic pastiche, encyclopedic), so the documents are
exchangeable and the only thing left to break the t test's level is the shape of the
scores across documents, which the t test takes for normal (a review's simulations:
skewed nulls give 2-6% below 0.01). No model is loaded: the scores are the battery files'.

    python benchmarks/bench_null_resample.py --battery benchmarks/results/audit_battery.json \\
        --battery benchmarks/results/audit_battery_gemma-3-270m.json ... --out FILE.json

For each battery file, score (`reference`: with the reference model as witness, as `audit`
runs it; `loss`), k and style: ``--draws`` audits, each a seeded random suspect and k clean
documents of that style, at the audit's defaults (t test, t guard). Counted: audits whose
suspect's p-value is at most alpha (the test alone, before the guard) at 0.01 and 0.05,
and `evidence` verdicts at 0.01. The audits reuse the same ~150 documents, so they are not
independent: the intervals printed (Wilson, 95%) treat them as if they were and are too
narrow; the per-style rates show how much rests on a few documents.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

STYLES = ("archaic", "modern", "description", "dialogue", "legal", "verse", "encyclopedic")
ALPHAS = (0.01, 0.05)


def wilson(hits: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def style_docs(rows: list[dict]) -> dict[str, list[str]]:
    """The battery's own documents of each style (not its short and joined versions)."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        doc = r["doc_id"]
        style = doc.rsplit("-", 1)[0]
        if ":" not in doc and style in STYLES:
            out[style].add(doc)
    return {s: sorted(d) for s, d in out.items()}


def resample(battery: dict, texts: dict[str, str], methods: list[str], ks: list[int], draws: int,
             seed: int) -> list[dict]:
    from copyprobe.evaluation.verdicts import audit_verdicts
    from copyprobe.evaluation.witness import CALIBRATED, with_halves

    pools = style_docs(battery["scores"])
    out = []
    for method in methods:
        rows = with_halves(battery["scores"], method) if method in CALIBRATED else battery["scores"]
        by_doc: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            by_doc[r["doc_id"]].append(r)
        for k in ks:
            for style, docs in pools.items():
                if len(docs) < k + 1:
                    continue
                rng = random.Random(f"{seed}:{battery['model']}:{method}:{k}:{style}")
                counts = {"audits": 0, **{f"p<={a}": 0 for a in ALPHAS}, "evidence@0.01": 0}
                for _ in range(draws):
                    chosen = rng.sample(docs, k + 1)
                    subset = [{**r, "label": label, "doc_id": f"{'suspect' if label else 'clean'}:{d}"}
                              for label, group in ((1, chosen[:1]), (0, chosen[1:])) for d in group
                              for r in by_doc[d]]
                    report = audit_verdicts(subset, method, {}, ALPHAS[0], texts, test="t", guard_test="t")
                    (doc,) = report["documents"]
                    counts["audits"] += 1
                    p = doc.get("p_adjusted")
                    for a in ALPHAS:
                        counts[f"p<={a}"] += p is not None and p <= a
                    counts["evidence@0.01"] += doc["verdict"] == "evidence"
                out.append({"model": battery["model"], "passage_words": battery.get("passage_words"),
                            "method": method, "k": k, "style": style, **counts})
    return out


def table(rows: list[dict]) -> str:
    pooled: dict[tuple, dict] = {}
    for r in rows:
        key = (r["model"], r["method"], r["k"])
        acc = pooled.setdefault(key, {"audits": 0, "p<=0.01": 0, "p<=0.05": 0, "evidence@0.01": 0, "worst": []})
        for c in ("audits", "p<=0.01", "p<=0.05", "evidence@0.01"):
            acc[c] += r[c]
        acc["worst"].append((r["p<=0.01"] / r["audits"], r["style"]))
    lines = ["| model | score | k | audits | p <= 0.01 (95% CI) | p <= 0.05 (95% CI) | evidence at 0.01 | worst style at 0.01 |",
             "|---|---|---|---|---|---|---|---|"]
    for (model, method, k), a in pooled.items():
        n = a["audits"]
        cells = []
        for c in ("p<=0.01", "p<=0.05"):
            low, high = wilson(a[c], n)
            cells.append(f"{a[c] / n:.2%} ({low:.2%}-{high:.2%})")
        rate, style = max(a["worst"])
        lines.append(f"| {model} | {'default (reference + witness)' if method == 'reference' else method} | {k} | "
                     f"{n} | {cells[0]} | {cells[1]} | {a['evidence@0.01'] / n:.2%} | {style} {rate:.1%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battery", action="append", required=True, help="a battery JSON with passage scores")
    parser.add_argument("--methods", default="reference,loss")
    parser.add_argument("--k", default="5,10,19", help="clean documents an audit draws")
    parser.add_argument("--draws", type=int, default=100, help="audits per style, score and k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import bench_audit_validity as validity

    results = []
    for path in args.battery:
        battery = json.loads(Path(path).read_text())
        texts = {e.id: e.text for e in validity.load_battery(battery.get("passage_words") or 64)}
        results += resample(battery, texts, [m for m in args.methods.split(",") if m],
                            [int(k) for k in args.k.split(",")], args.draws, args.seed)
        print(f"{path}: done", file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps({"command": ["python", *sys.argv], "draws": args.draws,
                                          "seed": args.seed, "rows": results}, indent=1) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
