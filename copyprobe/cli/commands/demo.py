"""copyprobe demo: the whole pipeline offline, on bundled famous vs freshly written passages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from copyprobe.cli._common import add_model_options, api_options, cache_setting, print_metrics, progress_bars, split_names

DEMO_METHODS = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference"


def demo_data_path() -> Path:
    return Path(__file__).resolve().parents[2] / "demo" / "demo.jsonl"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="run offline on bundled data: famous public-domain passages vs freshly written ones",
        description="Scores 24 famous public-domain passages (scripture, founding documents, novel "
        "openings, Shakespeare; label 1) against 24 passages written for copyprobe in the same "
        "styles (label 0) with the bundled SmolLM2-135M model, and prints AUC with CIs per method.",
    )
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default smollm2-135m-instruct)")
    parser.add_argument("--methods", default=DEMO_METHODS, help=f"comma-separated methods (default {DEMO_METHODS})")
    parser.add_argument("--out", default="runs/demo", help="run directory (default runs/demo)")
    parser.add_argument("--report", action="store_true", help="also write report.html into the run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_model_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from copyprobe.detect import detect

    names = split_names(args.methods)
    print(f"copyprobe demo: {args.model} on {demo_data_path().name} (24 famous vs 24 fresh passages)")
    with progress_bars(not args.no_progress) as progress:
        result = detect(
            args.model,
            demo_data_path(),
            names,
            out=args.out,
            cache=cache_setting(args),
            batch_size=args.batch_size,
            device=args.device,
            dtype=args.dtype,
            progress=progress,
            command=["copyprobe", *sys.argv[1:]],
            api_options=api_options(args),
        )
    print_metrics(result.metrics, result.scores, names, result.notes)
    if args.report:
        from copyprobe.cli.commands.detect import write_report

        write_report(result.out)
    print(f"run written to {result.out}")
    return 0
