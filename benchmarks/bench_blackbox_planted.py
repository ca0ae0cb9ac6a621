"""Black-box methods on a planted model, where membership is known (issue 28).

Runs each method over passages of a plant made with ``copyprobe plant --split-by document``
(members = letters the model was fine-tuned on) and reports, per method, beside the blind
baseline on the same passages: passage AUC with 95% bootstrap CIs (passages resampled, and
whole documents resampled), TPR at 1% and 5% FPR, document-level AUC (mean score of a
document's passages) with a bootstrap CI over documents, and cost (seconds and model calls
per passage). Each method runs on its own, so its time is its own; ``--cache`` makes a re-run
free (use a fresh cache file to measure cost).

The data is any file ``copyprobe detect`` reads; the committed
``benchmarks/data/one_voice/decop_paraphrases.csv`` (BookTection layout: ``decop`` takes its
options from there, no paraphrasing model) holds 2 passages per letter with the labels of
the plant ``--seed 0``. ``--docs N`` keeps the first N documents of each label (a subset for
the slow methods). ``--tag`` names the model in the table (e.g. "epoch 3").

    python benchmarks/bench_blackbox_planted.py --model llamacpp:runs/gguf/epoch3-q8_0.gguf \\
        --tag "epoch 3" --methods prefix_probe,name_cloze,decop,samia --threads 1

Results of several invocations are merged into ``--out`` (JSON) by (tag, method, params,
passages) and the Markdown next to it is rewritten from all of them (a "## Findings"
section written by hand survives).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.files import read_json, write_json  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_blackbox import (append_dump, labelled_values, parse_params, score_method,  # noqa: E402
                            write_keeping_findings)

DEFAULT_DATA = ROOT / "benchmarks/data/one_voice/decop_paraphrases.csv"


def load_examples(path: str, docs: int | None):
    import copyprobe

    examples = list(copyprobe.load_dataset(path).examples)
    if docs:
        keep: set = set()
        for label in (1, 0):
            names = list(dict.fromkeys(e.doc_id for e in examples if e.label == label))
            keep |= set(names[:docs])
        examples = [e for e in examples if e.doc_id in keep]
    return examples


def metrics(labels: list[int], values: list[float], groups: list) -> dict:
    """Passage AUC (CIs over passages and over documents), TPR at low FPR, document AUC."""
    from copyprobe.evaluation.metrics import bootstrap_ci, roc_auc, tpr_at_fpr

    out: dict = {"n": len(values)}
    if len(set(labels)) < 2:
        return out
    ci = bootstrap_ci(labels, values, roc_auc, n_resamples=2000, seed=0)
    gci = bootstrap_ci(labels, values, roc_auc, groups=groups, n_resamples=2000, seed=0)
    out.update(auc=roc_auc(labels, values), ci_passages=[ci.low, ci.high], ci_documents=[gci.low, gci.high],
               tpr_1=tpr_at_fpr(labels, values, 0.01), tpr_5=tpr_at_fpr(labels, values, 0.05))
    by_doc: dict = {}
    for y, v, g in zip(labels, values, groups):
        by_doc.setdefault(g, (y, []))[1].append(v)
    dl = [y for y, _ in by_doc.values()]
    dv = [float(np.mean(v)) for _, v in by_doc.values()]
    if len(set(dl)) == 2:
        dci = bootstrap_ci(dl, dv, roc_auc, n_resamples=2000, seed=0)
        out.update(doc_auc=roc_auc(dl, dv), doc_ci=[dci.low, dci.high], n_docs=len(dl))
    out["mean_member"] = float(np.mean([v for v, y in zip(values, labels) if y == 1]))
    out["mean_nonmember"] = float(np.mean([v for v, y in zip(values, labels) if y == 0]))
    return out


def blind(examples) -> dict:
    from copyprobe.evaluation.blind import blind_baseline

    b = blind_baseline([e.text for e in examples], [e.label for e in examples],
                       groups=[e.doc_id for e in examples], seed=0)
    return {"auc": b.get("auc"), "ci": [b.get("auc_low"), b.get("auc_high")], "signal": b.get("signal")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model spec of the planted (or base) model")
    parser.add_argument("--tag", required=True, help="name of the model in the table, e.g. 'epoch 3'")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--methods", default="prefix_probe,name_cloze,decop,samia")
    parser.add_argument("--param", action="append", default=[], help="method.key=value")
    parser.add_argument("--docs", type=int, default=None, help="first N documents per label (a subset)")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--cache", default="/tmp/copyprobe_bench_planted.sqlite")
    parser.add_argument("--note", default="", help="a note stored with the result")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/blackbox_planted.json"))
    parser.add_argument("--dump", default=None, help="append every scored row (with details) to this JSONL")
    parser.add_argument("--train-split", default="document", choices=("passage", "document"),
                        help="how a learning method (veilprobe) picks its training rows; by document (the "
                             "default here) no letter is both trained on and evaluated")
    args = parser.parse_args()

    from copyprobe.backends.specs import load_backend
    from copyprobe.session import Session

    examples = load_examples(args.data, args.docs)
    baseline = blind(examples)
    params = parse_params(args.param)
    options = {"n_threads": args.threads} if args.model.startswith("llamacpp:") else {}
    start = time.perf_counter()
    backend = load_backend(args.model, device="cpu", max_length=args.max_length, **options)
    load_s = time.perf_counter() - start
    session = Session(backend, cache=args.cache)
    command = "python benchmarks/bench_blackbox_planted.py " + shlex.join(sys.argv[1:])
    results = []
    for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
        scored = score_method(examples, name, dict(params.get(name, {})), session, args.train_split)
        rows, trained_on, seconds, stats = scored.rows, scored.trained_on, scored.seconds, scored.stats
        for variant_params, value_of in scored.variants:
            labels, values, groups, failures = labelled_values(rows, name, value_of, trained_on)
            result = {"tag": args.tag, "model": args.model, "method": name, "params": variant_params,
                      "passages": len(rows) - len(trained_on), "trained_on": len(trained_on),
                      **({"train_split": args.train_split} if trained_on else {}),
                      **metrics(labels, values, groups), "failures": dict(failures), "blind": baseline,
                      "model_calls": stats.by_model_kind, "seconds": round(seconds, 1),
                      "seconds_per_passage": round(seconds / len(examples), 2), "load_s": round(load_s, 1),
                      "threads": getattr(backend, "n_threads", None), "note": args.note, "command": command,
                      "data": os.path.relpath(args.data, ROOT),
                      "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared)"}
            results.append(result)
            print(json.dumps({k: result.get(k) for k in ("tag", "method", "params", "n", "auc", "ci_documents",
                                                         "doc_auc", "tpr_5", "seconds_per_passage")}), flush=True)
        write_results(Path(args.out), results)
        if args.dump:
            append_dump(args.dump, rows, tag=args.tag, method=name)
    session.close()
    backend.close()
    return 0


def _ci(pair) -> str:
    if not pair or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in pair):
        return "n/a"
    return f"[{pair[0]:.2f}, {pair[1]:.2f}]"


def _num(value, fmt="{:.3f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def write_results(out: Path, new: list[dict]) -> None:
    old = read_json(out, required=False) or {"results": []}
    key = lambda r: (r["tag"], r["method"], json.dumps(r["params"], sort_keys=True), r["passages"])  # noqa: E731
    merged = {key(r): r for r in old["results"]}
    merged.update({key(r): r for r in new})
    data = {"results": sorted(merged.values(), key=lambda r: (r["method"], r["tag"], -r["passages"]))}
    write_json(out, data)
    lines = ["# Black-box methods on a planted model (issue 28)", "",
             "Generated by benchmarks/bench_blackbox_planted.py (the table; the findings below are",
             "written by hand). Members: letters the model was fine-tuned on (known truth).",
             "AUC: passage level, 95% percentile bootstrap CIs (2000 resamples) over passages and over",
             "documents; doc AUC: mean score per letter, CI over letters; blind: the model-free",
             "baseline (copyprobe.evaluation.blind) on the same passages.", "",
             "| model | method | params | n | AUC | CI passages | CI documents | TPR@1% | TPR@5% | doc AUC "
             "[CI] | blind AUC [CI] | failures | s/passage | calls |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items()) or "defaults"
        fails = "; ".join(f"{n}x {reason}" for reason, n in r["failures"].items()) or "0"
        calls = ", ".join(f"{k} {v}" for k, v in r["model_calls"].items())
        doc = f"{_num(r.get('doc_auc'))} {_ci(r.get('doc_ci'))}" if r.get("doc_auc") is not None else "n/a"
        b = r["blind"]
        lines.append(f"| {r['tag']} | {r['method']} | {params} | {r.get('n', 0)}/{r['passages']} | "
                     f"{_num(r.get('auc'))} | {_ci(r.get('ci_passages'))} | {_ci(r.get('ci_documents'))} | "
                     f"{_num(r.get('tpr_1'), '{:.2f}')} | {_num(r.get('tpr_5'), '{:.2f}')} | {doc} | "
                     f"{_num(b.get('auc'))} {_ci(b.get('ci'))} | {fails} | {r['seconds_per_passage']} | {calls} |")
    lines += ["", "Commands (models: see the findings for how each GGUF was made):", ""]
    for command in sorted({r["command"] for r in data["results"]}):
        lines.append(f"    {command}")
    notes = [r for r in data["results"] if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {r['method']} ({r['tag']}): {r['note']}" for r in notes]
    write_keeping_findings(out.with_suffix(".md"), lines)


if __name__ == "__main__":
    raise SystemExit(main())
