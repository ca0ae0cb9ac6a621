"""copyprobe demo: the whole pipeline offline, on bundled famous vs freshly written passages."""

from __future__ import annotations

import argparse
from pathlib import Path

from copyprobe.cli._common import add_model_options, add_run_options, run_detect, split_names

DEMO_METHODS = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference"


def demo_data_path() -> Path:
    return Path(__file__).resolve().parents[2] / "demo" / "demo.jsonl"


HELP = "run offline on bundled data: famous public-domain passages vs freshly written ones"
DESCRIPTION = (
    "Scores 24 famous public-domain passages (scripture, founding documents, novel "
    "openings, Shakespeare; label 1) against 24 passages written for copyprobe in the same "
    "styles (label 0) with the bundled SmolLM2-135M model, and prints AUC with CIs per method."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default smollm2-135m-instruct)")
    parser.add_argument("--methods", default=DEMO_METHODS, help=f"comma-separated methods (default {DEMO_METHODS})")
    add_run_options(parser, out_default="runs/demo")
    add_model_options(parser)


def run(args: argparse.Namespace) -> int:
    names = split_names(args.methods)
    print(f"copyprobe demo: {args.model} on {demo_data_path().name} (24 famous vs 24 fresh passages)")
    return run_detect(args, demo_data_path(), names)
