"""copyprobe audit: document verdicts against a clean baseline (DE-COP section 5.1).
Thin: the work is :func:`copyprobe.audit.audit`, the rule :mod:`copyprobe.evaluation.verdicts`.
Output: the ``detect`` run directory plus ``verdicts.json``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from copyprobe.cli._common import (
    add_model_options,
    add_run_options,
    add_scoring_options,
    api_options,
    cache_setting,
    check_batch_size,
    parse_params,
    progress_bars,
)
from copyprobe.params import Real, option_type


HELP = "per-document verdicts: suspect documents vs a clean baseline"
DESCRIPTION = (
    "Score a suspect and a clean set with one method and test, per suspect "
    "document, whether its passage scores exceed the clean baseline (one-sided Welch t-test "
    "and Mann-Whitney U)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec (e.g. openai:MODEL@URL, smollm2-135m-instruct)")
    parser.add_argument("--suspect", required=True, help="data file of the documents to audit")
    parser.add_argument("--clean", required=True, help="data file of documents known not to be in training")
    parser.add_argument("--method", default="decop", help="method name (default decop)")
    parser.add_argument("--alpha", type=option_type(Real(0, 1, low_open=True, high_open=True), "--alpha"), default=0.01, help="significance level (default 0.01)")
    parser.add_argument("--text-column", help="column holding the passage (default: found by name)")
    parser.add_argument("--doc-column", help="column holding the document id")
    add_scoring_options(parser, bootstrap=200)
    add_run_options(parser)
    add_model_options(parser)


def run(args: argparse.Namespace) -> int:
    from copyprobe.audit import audit

    check_batch_size(args.batch_size)
    params = parse_params(args.param, [args.method])
    with progress_bars(not args.no_progress) as progress:
        result = audit(
            args.model, args.suspect, args.clean, args.method, params=params.get(args.method),
            alpha=args.alpha, out=args.out, n_bootstrap=args.bootstrap,
            read_options={"text_column": args.text_column, "doc_column": args.doc_column},
            cache=cache_setting(args), batch_size=args.batch_size, device=args.device, dtype=args.dtype,
            seed=args.seed, progress=progress, command=["copyprobe", *sys.argv[1:]],
            api_options=api_options(args),
        )
    _print(result.verdicts)
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(result.out)}")
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
