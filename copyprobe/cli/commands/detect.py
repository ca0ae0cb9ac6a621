"""copyprobe detect: score passages for training-data membership."""

from __future__ import annotations

import argparse

from copyprobe.cli._common import (
    add_model_options,
    check_batch_size,
    parse_params,
    run_detect,
    split_names,
)
from copyprobe.errors import ConfigError

DEFAULT_METHODS = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "detect",
        help="score passages for training-data membership with one or more methods",
        description="Score every passage of a data file with the given methods; with labels "
        "(1 = member, 0 = non-member) also compute AUC, TPR at low FPR and bootstrap CIs.",
    )
    parser.add_argument("--model", required=True, help="model spec: smollm2-135m-instruct, gemma-3-270m, hf:DIR, gguf:FILE, openai:MODEL@URL")
    parser.add_argument("--data", required=True, help="JSONL, CSV, Parquet or a saved Hugging Face dataset")
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated method names (default {DEFAULT_METHODS})")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="method parameter, repeatable")
    parser.add_argument("--text-column", help="column holding the passage (default: found by name)")
    parser.add_argument("--label-column", help="column holding 1 = member / 0 = non-member")
    parser.add_argument("--doc-column", help="column holding the document id")
    parser.add_argument("--id-column", help="column holding the passage id")
    parser.add_argument("--split", help="split of a saved Hugging Face DatasetDict")
    parser.add_argument("--seed", type=int, default=0, help="seed for bootstrap and training splits (default 0)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs (default 1000)")
    parser.add_argument("--report", action="store_true", help="also write report.html into the run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_model_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from copyprobe.data.readers import load_dataset
    from copyprobe.record import prepare_out_dir
    from copyprobe.scoring import build_methods

    names = split_names(args.methods)
    params = parse_params(args.param, names)
    methods = build_methods(names, params)  # unknown methods and bad values fail before the data loads
    check_batch_size(args.batch_size)
    if args.bootstrap < 0:
        raise ConfigError(f"--bootstrap must be >= 0 (0 = no confidence intervals), got {args.bootstrap}")
    prepare_out_dir(args.out)
    dataset = load_dataset(
        args.data,
        text_column=args.text_column,
        label_column=args.label_column,
        doc_column=args.doc_column,
        id_column=args.id_column,
        split=args.split,
    )
    return run_detect(args, dataset, methods, seed=args.seed, n_bootstrap=args.bootstrap)

