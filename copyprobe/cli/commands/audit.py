"""copyprobe audit: document verdicts against a clean baseline (DE-COP section 5.1).

Every passage of the suspect and the clean file is scored with one method (the clean
passages get label 0 and the suspect ones label 1, so the run record also holds AUCs).
Each suspect document's passage scores are then compared with all clean passage scores
by a one-sided Welch t-test and a one-sided Mann-Whitney U test (suspect > clean). The
verdict is "seen" when both p-values are below ``--alpha``, "inconclusive" when one is,
"not detected" when neither is, and "untested" when a group is too small.

Rows without a document column form one document per file (named after the file).
Output: the ``detect`` run directory plus ``verdicts.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from copyprobe.cli._common import (
    add_model_options,
    api_options,
    cache_setting,
    check_batch_size,
    parse_params,
    progress_bars,
)
from copyprobe.errors import ConfigError, DataError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit",
        help="per-document verdicts: suspect documents vs a clean baseline",
        description="Score a suspect and a clean set with one method and test, per suspect "
        "document, whether its passage scores exceed the clean baseline (one-sided Welch t-test "
        "and Mann-Whitney U).",
    )
    parser.add_argument("--model", required=True, help="model spec (e.g. openai:MODEL@URL, smollm2-135m-instruct)")
    parser.add_argument("--suspect", required=True, help="data file of the documents to audit")
    parser.add_argument("--clean", required=True, help="data file of documents known not to be in training")
    parser.add_argument("--method", default="decop", help="method name (default decop)")
    parser.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="method parameter, repeatable")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--text-column", help="column holding the passage (default: found by name)")
    parser.add_argument("--doc-column", help="column holding the document id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples for AUC CIs (default 200)")
    parser.add_argument("--report", action="store_true", help="also write report.html into the run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_model_options(parser)
    parser.set_defaults(func=run)


def _load(path: str, role: str, label: int, args: argparse.Namespace):
    from copyprobe.data.readers import load_dataset

    dataset = load_dataset(path, text_column=args.text_column, doc_column=args.doc_column)
    if not dataset.examples:
        raise DataError(f"{role} file {path} has no passages")
    stem = Path(path).stem
    out = []
    for ex in dataset.examples:
        doc = ex.doc_id if ex.doc_id is not None else stem
        out.append(replace(ex, id=f"{role}:{ex.id}", label=label, doc_id=f"{role}:{doc}"))
    return out


def verdicts(scores: dict[str, float | None], docs: dict[str, str], labels: dict[str, int], alpha: float) -> dict[str, Any]:
    """Per suspect document: score, baseline, p-values, verdict (pure function of scores)."""
    from copyprobe.evaluation.stats import mann_whitney_greater, welch_t_greater

    clean = [v for i, v in scores.items() if labels[i] == 0 and v is not None and math.isfinite(v)]
    n = len(clean)
    mean = sum(clean) / n if n else math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in clean) / (n - 1)) if n > 1 else math.nan
    by_doc: dict[str, list[float]] = {}
    failed: dict[str, int] = {}
    for i, v in scores.items():
        if labels[i] != 1:
            continue
        if v is None or not math.isfinite(v):
            failed[docs[i]] = failed.get(docs[i], 0) + 1
            continue
        by_doc.setdefault(docs[i], []).append(v)
    rows = []
    for doc in sorted(set(by_doc) | set(failed)):
        values = by_doc.get(doc, [])
        welch = welch_t_greater(values, clean)
        mw = mann_whitney_greater(values, clean)
        ps = [welch.p_value, mw.p_value]
        if any(math.isnan(p) for p in ps):
            verdict = "untested"
        else:
            below = sum(p < alpha for p in ps)
            verdict = {2: "seen", 1: "inconclusive", 0: "not detected"}[below]
        rows.append({
            "doc_id": doc.split(":", 1)[1],
            "n_passages": len(values),
            "n_failed": failed.get(doc, 0),
            "score": sum(values) / len(values) if values else None,
            "welch_t": _num(welch.statistic),
            "welch_p": _num(welch.p_value),
            "mann_whitney_u": _num(mw.statistic),
            "mann_whitney_p": _num(mw.p_value),
            "verdict": verdict,
            "reason": welch.reason or mw.reason,
        })
    # Dataset level (Maini et al. 2024, "LLM dataset inference", with feature_agg): do the
    # suspect passages as a whole score higher than the clean ones?
    suspect_all = [v for values in by_doc.values() for v in values]
    welch_all = welch_t_greater(suspect_all, clean)
    mw_all = mann_whitney_greater(suspect_all, clean)
    dataset = {
        "n_suspect": len(suspect_all),
        "n_clean": n,
        "welch_t": _num(welch_all.statistic),
        "welch_p": _num(welch_all.p_value),
        "mann_whitney_p": _num(mw_all.p_value),
        "significant": bool(welch_all.ok and welch_all.p_value < alpha),
    }
    return {
        "alpha": alpha,
        "baseline": {"n_passages": n, "mean": _num(mean), "sd": _num(sd)},
        "dataset": dataset,
        "rule": "seen = Welch and Mann-Whitney one-sided p < alpha; inconclusive = one of them; not detected = neither",
        "documents": rows,
    }


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def run(args: argparse.Namespace) -> int:
    from copyprobe.detect import build_methods, detect
    from copyprobe.record import prepare_out_dir, write_json

    if not 0 < args.alpha < 1:
        raise ConfigError(f"--alpha must be in (0, 1), got {args.alpha}")
    check_batch_size(args.batch_size)
    params = parse_params(args.param, [args.method])
    build_methods([args.method], params)
    prepare_out_dir(args.out)
    examples = _load(args.suspect, "suspect", 1, args) + _load(args.clean, "clean", 0, args)
    with progress_bars(not args.no_progress) as progress:
        result = detect(
            args.model, examples, [args.method], params=params, out=args.out, cache=cache_setting(args),
            batch_size=args.batch_size, device=args.device, dtype=args.dtype, seed=args.seed,
            n_bootstrap=args.bootstrap, progress=progress, command=["copyprobe", *sys.argv[1:]],
            api_options=api_options(args),
        )
    frame = result.scores
    scores = {}
    for row in frame.to_dict("records"):
        value = row.get(args.method)
        scores[row["id"]] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    # rows a learning method (feature_agg, veilprobe) was fitted on are no evidence
    for ids in result.run.get("train_ids", {}).values():
        for train_id in ids:
            scores.pop(train_id, None)
    docs = {e.id: e.doc_id for e in examples}
    labels = {e.id: e.label for e in examples}
    report = verdicts(scores, docs, labels, args.alpha)
    report["method"] = args.method
    write_json(Path(result.out) / "verdicts.json", report)
    _print(report)
    if args.report:
        from copyprobe.cli.commands.detect import write_report

        write_report(result.out)
    print(f"run written to {result.out}")
    return 0


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2e}" if 0 < abs(x) < 1e-3 else f"{x:.{digits}f}"
    return str(x)


def _print(report: dict[str, Any]) -> None:
    base = report["baseline"]
    print(f"method {report['method']}, clean baseline: mean {_fmt(base['mean'])} sd {_fmt(base['sd'])} "
          f"over {base['n_passages']} passages; alpha {report['alpha']}")
    header = f"{'document':<32} {'n':>4} {'score':>7} {'Welch p':>10} {'M-W p':>10}  verdict"
    print(header)
    print("-" * len(header))
    for row in report["documents"]:
        print(f"{row['doc_id'][:32]:<32} {row['n_passages']:>4} {_fmt(row['score']):>7} "
              f"{_fmt(row['welch_p']):>10} {_fmt(row['mann_whitney_p']):>10}  {row['verdict']}")
    data = report.get("dataset")
    if data:
        print(f"dataset level: {data['n_suspect']} suspect vs {data['n_clean']} clean passages, "
              f"one-sided Welch p = {_fmt(data['welch_p'])}, Mann-Whitney p = {_fmt(data['mann_whitney_p'])}")
