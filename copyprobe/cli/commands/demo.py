"""copyprobe demo: the whole pipeline offline, on bundled famous vs freshly written passages."""

from __future__ import annotations

import argparse
from pathlib import Path

from copyprobe.cli._common import add_model_options, run_detect, split_names

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
    names = split_names(args.methods)
    print(f"copyprobe demo: {args.model} on {demo_data_path().name} (24 famous vs 24 fresh passages)")
    return run_detect(args, demo_data_path(), names)
