"""copyprobe audit: was the model trained on these documents? One verdict per suspect
document against clean documents (docs/audit.md).
Thin: the work is :func:`copyprobe.audit.audit`, the rule :mod:`copyprobe.evaluation.verdicts`.
Output: the ``detect`` run directory plus ``verdicts.json``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from copyprobe.audit import SETTINGS
from copyprobe.cli._common import (
    add_model_options,
    add_passage_option,
    add_run_options,
    add_scoring_options,
    add_settings,
    api_options,
    cache_setting,
    check_batch_size,
    parse_params,
    setting_values,
)
from copyprobe.progress import progress_bars


HELP = "was the model trained on these documents? evidence / no evidence / cannot tell, per document"
DESCRIPTION = (
    "Score suspect and clean documents with one method and test, per suspect document, whether it "
    "scores above the clean documents (the document is the unit: an exact rank test, or a t test), with a "
    "model-free guard that withholds any claim a difference of style or length can explain. "
    "See docs/audit.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec (e.g. openai:MODEL@URL, smollm2-135m-instruct)")
    parser.add_argument("--suspect", required=True,
                        help="the documents to audit: a book (txt, md, epub, pdf, docx, html) or source file "
                             "(py, js, c, ...), a directory of them, or a JSONL/CSV of passages with a document column")
    parser.add_argument("--clean", required=True,
                        help="documents you are sure the model never saw, in the same genre and style (same forms)")
    add_settings(parser, SETTINGS, ("method", "alpha", "test", "guard_test", "passages_per_document", "published"))
    parser.add_argument("--text-column", help="column holding the passage (default: found by name)")
    parser.add_argument("--doc-column", help="column holding the document id")
    add_passage_option(parser)
    add_settings(parser, SETTINGS, ("limit",))
    add_scoring_options(parser, SETTINGS)
    add_run_options(parser)
    add_model_options(parser)


def run(args: argparse.Namespace) -> int:
    from copyprobe.audit import audit

    check_batch_size(args.batch_size)
    from copyprobe.registry import method_names

    # with --method auto the parameters name the method they are for; the one chosen uses its own
    params = parse_params(args.param, method_names() if args.method == "auto" else [args.method], "--method")
    with progress_bars(not args.no_progress) as progress:
        result = audit(
            args.model, args.suspect, args.clean,
            params=params if args.method == "auto" else params.get(args.method),
            out=args.out,
            read_options={"text_column": args.text_column, "doc_column": args.doc_column,
                          "passage_words": args.passage_words},
            cache=cache_setting(args), batch_size=args.batch_size, device=args.device, dtype=args.dtype,
            progress=progress, command=["copyprobe", *sys.argv[1:]],
            api_options=api_options(args), **setting_values(args, SETTINGS),
        )
    _print(result.verdicts)
    for note in result.detect.notes:  # which method auto chose, what the null battery says of it
        print(f"note: {note}")
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(result.out)}")
    print(f"run written to {result.out}")
    from copyprobe.cli._common import scored_exit_code

    return scored_exit_code(result.detect.rows, [result.verdicts["method"]])


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2e}" if 0 < abs(x) < 1e-3 else f"{x:.{digits}f}"
    return str(x)


def _standing(part: Any) -> str:
    return f"{part['rank']}/{part['of']}" if isinstance(part, dict) else "-"


def _raw_baseline(report: dict[str, Any]) -> str:
    """'; on loss: mean -3.9, sd 0.2' where a document was tested on the target's own score: its
    score in the table is on that scale, not the method's."""
    from copyprobe.evaluation.verdicts import raw_baseline

    raw = raw_baseline(report)
    return f"; on {raw['method']}: mean {_fmt(raw['mean'])}, sd {_fmt(raw['sd'])}" if raw else ""


def _print(report: dict[str, Any]) -> None:
    print(report["summary"])
    test = report["test"]
    base = report["baseline"]
    print(f"method {report['method']}, {test['name']} test over documents, alpha {report['alpha']}; "
          f"{test['n_clean_documents']} clean documents (mean score {_fmt(base['mean'])}, sd {_fmt(base['sd'])}"
          f"{_raw_baseline(report)}), "
          f"{test['passages_per_document']} passages per document; smallest attainable p "
          f"{_fmt(test['min_p']) if test['min_p'] else 'none (parametric test)'}"
          + (" after Holm's adjustment over the suspects" if test["min_p"] and test.get("multiple_testing") else "")
          + (f"; the p of a document the reference model was asked about is multiplied by "
             f"{test['witness_factors']['calibrated']:g} on {report['method']}, "
             f"{test['witness_factors']['own']:g} on the target's own score (the witness chose its test)"
             if test.get("witness_factors") else ""))
    if test.get("p_from") == "rank":
        print(f"p-values from the rank test: {test['tied_clean_documents']} clean documents share their score with "
              f"another (a score with few possible values), which a normal model cannot give")
    print(f"assumes: {test['assumptions']}")
    for key in ("normality", "normality_own"):
        if (test.get(key) or {}).get("note"):
            print(f"note: {test[key]['note']}")
    header = f"{'document':<28} {'score':>8} {'rank':>7} {'p':>9} {'style':>7} {'length':>7}  verdict"
    print(header)
    print("-" * len(header))
    for row in report["documents"]:
        rank = f"{row['rank']}/{row['of']}" if row.get("rank") else "-"
        note = f" ({row['note']})" if row.get("note") else ""  # runs before the note: none
        print(f"{row['doc_id'][:28]:<28} {_fmt(row['score']):>8} {rank:>7} {_fmt(row['p_adjusted']):>9} "
              f"{_standing(row['style']):>7} {_standing(row['length']):>7}  {row['verdict']}{note}")
    if len(report["documents"]) > 1 and "shared" not in report:
        for row in report["documents"]:  # a run before the shared words: its full sentences
            print(f"- {row['sentence']}")
    for part in report.get("shared") or []:  # said once for the audit
        print(f"{part['title']}: {part['text']}")
    collection = report.get("collection")
    if collection:
        tested = collection.get("n_tested", collection["n_suspect"])  # runs before 0.1: every suspect
        group = f"{tested} of {collection['n_suspect']}" if tested != collection["n_suspect"] else str(tested)
        print(f"as a group ({group} suspect vs {collection['n_clean']} clean documents): "
              f"{collection['verdict']}: {collection['reason']}")
