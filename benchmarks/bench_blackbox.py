"""Black-box methods on an offline model that can follow their prompts (issue 18).

Runs each method over the demo's famous (label 1) vs fresh (label 0) passages
(copyprobe/demo/demo.jsonl: 16 documents, 3 passages each) on one model and reports, per
method: passage AUC with a 95% bootstrap CI over passages, the same CI with passages of
one document resampled together (the honest one: passages of a document are not
independent), failures with their reasons, model calls (unique requests by kind) and
seconds per passage. Each method runs on its own so its time is its own; a response
cache (``--cache``) makes a re-run free.

    flock /work/heavy.lock python benchmarks/bench_blackbox.py \
        --model llamacpp:qwen2.5-coder-0.5b-instruct --methods prefix_probe,name_cloze \
        --per-doc 3 --threads 2 --out benchmarks/results/blackbox.json

``--param method.key=value`` sets a method parameter (repeatable). Results of several
invocations are merged into the ``--out`` JSON by (model, method, params) and the Markdown
table next to it is rewritten from all of them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.data.example import Example  # noqa: E402
from copyprobe.files import read_json, write_json, atomic_write  # noqa: E402
from copyprobe.drive import DriveStats  # noqa: E402
from copyprobe.scoring import build_methods, score_examples  # noqa: E402


def demo_examples(per_doc: int, docs: int | None) -> list[Example]:
    rows = [json.loads(line) for line in (ROOT / "copyprobe/demo/demo.jsonl").read_text().splitlines() if line]
    by_doc: dict[str, list[dict]] = {}
    for row in rows:
        by_doc.setdefault(row["doc_id"], []).append(row)
    chosen = []
    for label in (1, 0):
        names = [d for d, r in by_doc.items() if r[0]["label"] == label]
        chosen += names[:docs] if docs else names
    out = []
    for doc in chosen:
        for row in by_doc[doc][:per_doc]:
            out.append(Example(id=row["id"], text=row["text"], label=row["label"], doc_id=row["doc_id"]))
    return out


def parse_params(items: list[str]) -> dict[str, dict]:
    """`method.key=value` -> {method: {key: value typed by the parameter's declaration}}."""
    from copyprobe.registry import convert_param, method_class

    params: dict[str, dict] = {}
    for item in items:
        key, _, value = item.partition("=")
        method, _, name = key.partition(".")
        params.setdefault(method, {})[name] = convert_param(method_class(method), name, value)
    return params


def ci_text(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) or math.isnan(high) else f"[{low:.3f}, {high:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llamacpp:qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--methods", default="prefix_probe,name_cloze")
    parser.add_argument("--param", action="append", default=[], help="method.key=value")
    parser.add_argument("--per-doc", type=int, default=3, help="passages per document (of 3)")
    parser.add_argument("--docs", type=int, default=None, help="documents per label (of 8)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--cache", default="/tmp/copyprobe_bench_blackbox.sqlite")
    parser.add_argument("--label", default="", help="a note stored with the result (e.g. why these params)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/blackbox.json"))
    parser.add_argument("--dump", default=None, help="write every scored row (with details) to this JSONL")
    parser.add_argument("--calibrate", type=int, default=0,
                        help="decop logit mode: also score with DE-COP calibration offsets (Algorithm 1) "
                             "from this many fresh passages that are NOT in the evaluated set")
    args = parser.parse_args()

    from copyprobe.backends.specs import load_backend
    from copyprobe.session import Session

    examples = demo_examples(args.per_doc, args.docs)
    params = parse_params(args.param)
    options = {"n_threads": args.threads} if args.model.startswith("llamacpp:") else {}
    start = time.perf_counter()
    backend = load_backend(args.model, device="cpu", max_length=args.max_length, **options)
    load_s = time.perf_counter() - start
    session = Session(backend, cache=args.cache)
    command = "python benchmarks/bench_blackbox.py " + " ".join(sys.argv[1:])
    results = []
    steps = []
    for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
        steps.append((name, dict(params.get(name, {}))))
        if name == "decop" and args.calibrate and \
                build_methods([name], {name: dict(params.get(name, {}))})[0].mode == "logit":
            steps.append(("decop", {**params.get(name, {}), "calibration": "from-clean-set"}))
    for name, method_params in steps:
        if method_params.get("calibration") == "from-clean-set":
            offsets, calib_ids = calibrate_decop(examples, method_params, session, args)
            method_params = {**method_params, "calibration": ",".join(f"{k}:{v:.4f}" for k, v in offsets.items())}
            note = f"calibration offsets from {len(calib_ids)} unscored fresh passages: {', '.join(calib_ids)}"
        else:
            note = ""
        scored = score_method(examples, name, method_params, session)
        rows, trained_on, seconds, stats = scored.rows, scored.trained_on, scored.seconds, scored.stats
        for variant_params, value_of in scored.variants:
            result = summarize_rows(rows, name, value_of, trained_on)
            result.update({"model": args.model, "method": name, "params": variant_params,
                           "label": " ".join(x for x in (args.label, note) if x),
                           "model_calls": stats.by_model_kind, "requests_unique": stats.requests_unique,
                           "seconds": round(seconds, 1), "seconds_per_passage": round(seconds / len(examples), 2),
                           "load_s": round(load_s, 1), "threads": getattr(backend, "n_threads", None),
                           "command": command, "machine": f"{platform.machine()}, {os.cpu_count()} cpus (shared)"})
            results.append(result)
            print(json.dumps({k: result[k] for k in ("method", "params", "auc", "ci_passages", "ci_documents",
                                                      "failures", "model_calls", "seconds_per_passage")}), flush=True)
        write_results(Path(args.out), results)
        if args.dump:
            append_dump(args.dump, rows, method=name)
    session.close()
    backend.close()
    return 0


@dataclass
class Scored:
    """One method scored over the examples: its rows, the rows it trained on (evaluated on
    the others), cost, and each (params, value of a row) to report."""

    rows: list[dict]
    trained_on: set
    seconds: float
    stats: DriveStats
    variants: list[tuple[dict, Callable[[dict], Any]]]


def score_method(examples, name: str, method_params: dict, session, train_split_by: str = "passage") -> Scored:
    method = build_methods([name], {name: dict(method_params)} if method_params else None)[0]
    method = method.resolve(session.target_spec)  # 'auto' reference models
    stats = DriveStats()
    t0 = time.perf_counter()
    rows, train_ids = score_examples(examples, [method], session.backend_for, stats=stats,
                                     train_split_by=train_split_by)
    seconds = time.perf_counter() - t0
    variants: list = [(method_params, lambda row: row.get(name))]
    if name == "prefix_probe":
        # every similarity is in the details: report all three from the same generations
        for other in ("token_sort", "rouge_l", "lcs"):
            if other != method.similarity:
                variants.append(({**method_params, "similarity": other},
                                 lambda row, key=other: None if row.get(name) is None
                                 else row["details"][name][key]))
    return Scored(rows, set(train_ids.get(name, ())), seconds, stats, variants)


def labelled_values(rows, name, value_of, trained_on) -> tuple[list, list, list, Counter]:
    """Labels, scores and documents of the scored rows a method did not train on, and the
    failure reasons of the others."""
    labels, values, groups = [], [], []
    failures: Counter[str] = Counter()
    for row in rows:
        if row["id"] in trained_on:
            continue
        value = value_of(row)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            failures[str(row.get("errors", {}).get(name, "no score"))[:160]] += 1
            continue
        labels.append(row["label"])
        values.append(float(value))
        groups.append(row["doc_id"])
    return labels, values, groups, failures


def append_dump(path: str, rows: list[dict], **tags) -> None:
    """Every scored row (with its details) appended to a JSONL file, tagged."""
    with open(path, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({**tags, **row}, default=str) + "\n")


def summarize_rows(rows, name, value_of, trained_on) -> dict:
    from copyprobe.evaluation.metrics import bootstrap_ci, roc_auc

    labels, values, groups, failures = labelled_values(rows, name, value_of, trained_on)
    auc = ci = gci = None
    if len(set(labels)) == 2:
        auc = roc_auc(labels, values)
        ci = bootstrap_ci(labels, values, roc_auc, n_resamples=2000, seed=0)
        gci = bootstrap_ci(labels, values, roc_auc, groups=groups, n_resamples=2000, seed=0)
    member = [v for v, y in zip(values, labels) if y == 1]
    fresh = [v for v, y in zip(values, labels) if y == 0]
    return {
        "passages": len(rows) - len(trained_on), "trained_on": len(trained_on), "scored": len(values),
        "auc": auc,
        "ci_passages": None if ci is None else [ci.low, ci.high],
        "ci_documents": None if gci is None else [gci.low, gci.high],
        "mean_member": sum(member) / len(member) if member else None,
        "mean_fresh": sum(fresh) / len(fresh) if fresh else None,
        "failures": dict(failures),
    }


def calibrate_decop(examples, method_params, session, args):
    """DE-COP Algorithm 1 on a clean set: fresh passages of the demo that are not scored."""
    from copyprobe.methods.decop import calibration_offsets

    used = {e.id for e in examples}
    rows = [json.loads(line) for line in (ROOT / "copyprobe/demo/demo.jsonl").read_text().splitlines() if line]
    clean = [Example(id=r["id"], text=r["text"], label=0, doc_id=r["doc_id"])
             for r in rows if r["label"] == 0 and r["id"] not in used]
    # one passage per document first, so the offsets average over as many documents as possible
    clean.sort(key=lambda e: (int(e.id.rsplit("-", 1)[-1]) if e.id.rsplit("-", 1)[-1].isdigit() else 0, e.id))
    clean = clean[:args.calibrate]
    plain = {k: v for k, v in method_params.items() if k != "calibration"}
    method = build_methods(["decop"], {"decop": plain})[0].resolve(session.target_spec)
    scored, _ = score_examples(clean, [method], session.backend_for, stats=DriveStats())
    probs, docs = [], []
    for row in scored:
        details = (row.get("details") or {}).get("decop") or {}
        if "letter_probs" in details:
            probs.append(details["letter_probs"])
            docs.append(row["doc_id"])
    if not probs:
        raise SystemExit("calibration: no clean passage got letter probabilities")
    return calibration_offsets(probs, docs), [r["id"] for r in scored if (r.get("details") or {}).get("decop")]


def write_results(out: Path, new: list[dict]) -> None:
    old = read_json(out, required=False) or {"results": []}
    key = lambda r: (r["model"], r["method"], json.dumps(r["params"], sort_keys=True), r.get("passages"))  # noqa: E731
    merged = {key(r): r for r in old["results"]}
    merged.update({key(r): r for r in new})
    data = {"results": sorted(merged.values(), key=lambda r: (r["model"], r["method"]))}
    write_json(out, data)
    lines = ["# Black-box methods on an offline instruction model (issue 18)", "",
             "Demo data: famous (label 1) vs fresh (label 0) passages of copyprobe/demo/demo.jsonl.",
             "CI: 95% percentile bootstrap (2000 resamples) over passages, and over documents",
             "(passages of one document drawn together). Calls: unique requests reaching the model.", "",
             "| model | method | params | n | AUC | 95% CI passages | 95% CI documents | failures | calls | s/passage |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items()) or "defaults"
        fails = "; ".join(f"{n}x {reason}" for reason, n in r["failures"].items()) or "0"
        calls = ", ".join(f"{k} {v}" for k, v in r["model_calls"].items())
        auc = "n/a" if r["auc"] is None else f"{r['auc']:.3f}"
        cp = ci_text(*r["ci_passages"]) if r["ci_passages"] else "n/a"
        cd = ci_text(*r["ci_documents"]) if r["ci_documents"] else "n/a"
        lines.append(f"| {r['model']} | {r['method']} | {params} | {r['scored']}/{r['passages']} | {auc} | {cp} "
                     f"| {cd} | {fails} | {calls} | {r['seconds_per_passage']} |")
    lines += ["", "Commands:", ""]
    for command in sorted({r["command"] for r in data["results"]}):
        lines.append(f"    flock /work/heavy.lock {command}")
    notes = [r for r in data["results"] if r.get("label")]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {r['method']} ({r['model']}): {r['label']}" for r in notes]
    write_keeping_findings(out.with_suffix(".md"), lines)


def write_keeping_findings(md: Path, lines: list[str]) -> None:
    """Write the generated part of a results page; a hand-written "## Findings" section of
    the page there survives re-runs."""
    kept = ""
    if md.exists() and "\n## Findings" in md.read_text():
        kept = "\n" + md.read_text()[md.read_text().index("\n## Findings") + 1:]
    atomic_write(md, "\n".join(lines) + "\n" + kept)


if __name__ == "__main__":
    raise SystemExit(main())
