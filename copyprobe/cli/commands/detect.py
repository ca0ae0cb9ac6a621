"""copyprobe detect: score passages for training-data membership."""

from __future__ import annotations

import argparse

from copyprobe.cli._common import (
    add_model_options,
    add_passage_option,
    add_run_options,
    add_scoring_options,
    add_settings,
    check_batch_size,
    parse_params,
    progress_bars,
    run_options,
    say_few_resamples,
    setting_values,
    show_detect,
    split_names,
)
from copyprobe.detect import SETTINGS

DEFAULT_METHODS = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference"


HELP = "score passages for training-data membership with one or more methods"
DESCRIPTION = (
    "Score every passage of a data file with the given methods; with labels "
    "(1 = member, 0 = non-member) also compute AUC, TPR at low FPR and bootstrap CIs."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec: smollm2-135m-instruct, gemma-3-270m, hf:DIR, gguf:FILE, openai:MODEL@URL")
    parser.add_argument("--data", required=True, help="JSONL, CSV, Parquet, a saved Hugging Face dataset, a book file (.txt/.md/.epub/.pdf/.docx/.html) or source file (.py/.js/.c/...) or a directory of them, or a dataset name NAME[:SPLIT] (copyprobe datasets)")
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated method names (default {DEFAULT_METHODS})")
    parser.add_argument("--text-column", help="column holding the passage (default: found by name)")
    parser.add_argument("--label-column", help="column holding 1 = member / 0 = non-member")
    parser.add_argument("--doc-column", help="column holding the document id")
    parser.add_argument("--id-column", help="column holding the passage id")
    parser.add_argument("--split", help="split of a saved Hugging Face DatasetDict")
    add_passage_option(parser)
    add_scoring_options(parser, SETTINGS)
    add_settings(parser, SETTINGS, ("limit", "train_split"))
    add_run_options(parser)
    add_model_options(parser)


def run(args: argparse.Namespace) -> int:
    from copyprobe.detect import detect

    names = split_names(args.methods)
    check_batch_size(args.batch_size)
    with progress_bars(not args.no_progress) as progress:
        # detect checks the methods and their parameters (once) before it reads the data or loads the model
        result = detect(args.model, args.data, names, params=parse_params(args.param, names), read_options={
            "text_column": args.text_column, "label_column": args.label_column, "doc_column": args.doc_column,
            "id_column": args.id_column, "split": args.split, "passage_words": args.passage_words},
            **run_options(args, progress), **setting_values(args, SETTINGS))
    code = show_detect(args, result, names)
    say_few_resamples(args.n_bootstrap, result.metrics)
    return code
