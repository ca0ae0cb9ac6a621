"""copyprobe copying: how much of a protected text does the model reproduce (CopyBench)."""

from __future__ import annotations

import argparse
import json
import sys

from copyprobe.cli._common import (
    add_model_options,
    add_run_options,
    add_settings,
    cache_setting,
    check_batch_size,
    progress_bars,
    setting_values,
)
from copyprobe.errors import DataError
from copyprobe.params import COUNT, Real, option_type


HELP = "literal / non-literal copying, fact recall and fluency (CopyBench), with mitigations"
DESCRIPTION = (
    "Evaluate how much of a protected text a model reproduces: literal copying "
    "(ROUGE-L of completions), non-literal copying (events and characters in 'original' "
    "stories), fact recall (closed-book QA) and fluency, optionally with MemFree decoding "
    "or the system-prompt self-reminder. Data: CopyBench JSON (literal / non-literal / QA "
    "layouts, a bundle, or a directory), a .txt/.epub book, or a built-in set (kjv, kjv_incontext)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec: smollm2-135m-instruct, gemma-3-270m, hf:DIR, gguf:FILE, openai:MODEL@URL")
    parser.add_argument("--data", required=True, help="copy-eval data: JSON/JSONL file, CopyBench data directory, a book (.txt, .md, .epub, .pdf, .docx, .html; docs/input-files.md), kjv / kjv_incontext, or copybench:literal|nonliteral|qa")
    from copyprobe.copying.runner import MEMFREE_SETTINGS, SETTINGS

    add_settings(parser, SETTINGS, ("tasks", "mitigation"))
    parser.add_argument("--judge", default="embedding", help="event judge: 'embedding' (offline, default), 'target', or a model spec answered with the Fig. 8 prompt")
    parser.add_argument("--embedding-threshold", type=option_type(Real(-1, 1), "--embedding-threshold"), default=None, help="cosine threshold of the embedding judge (default: the calibrated one)")
    parser.add_argument("--fluency-judge", default="target", help="fluency judge: 'target' (default: the evaluated model) or a model spec")
    add_settings(parser, SETTINGS, ("templates",))
    parser.add_argument("--chat", action="store_true", help=SETTINGS["chat"].help)
    add_settings(parser, SETTINGS, ("literal_threshold", "event_threshold", "character_threshold", "repetition_penalty",
                                    "literal_max_tokens", "nonliteral_max_tokens", "limit"))
    parser.add_argument("--demos", help="JSON file {task: [{input, output}, ...]} of few-shot demonstrations")
    add_settings(parser, MEMFREE_SETTINGS)
    parser.add_argument("--prefix-words", type=option_type(COUNT, "--prefix-words"), default=200, help="book input: words of each prefix (default 200)")
    parser.add_argument("--reference-words", type=option_type(COUNT, "--reference-words"), default=50, help="book input: words of each reference (default 50)")
    parser.add_argument("--clean", default=None,
                        help="baseline: text the model cannot have seen (.txt/.epub, or CopyBench literal JSON), "
                        "scored like the book; default: the clean prose shipped with copyprobe (docs/copying.md)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false", help="do not score the clean baseline")
    add_settings(parser, SETTINGS, ("n_bootstrap",))
    add_run_options(parser)
    add_model_options(parser)


def _demos(path: str | None) -> dict[str, list[tuple[str, str]]]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except OSError as exc:
        raise DataError(f"cannot read --demos {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise DataError(f"--demos {path} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise DataError("--demos must be a JSON object {task: [{input, output}, ...]}")
    out = {}
    for task, rows in raw.items():
        if task not in ("literal", "nonliteral", "qa") or not isinstance(rows, list):
            raise DataError(f"--demos: bad entry {task!r} (tasks literal, nonliteral, qa with lists)")
        pairs = []
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("input"), str) or not isinstance(row.get("output"), str):
                raise DataError(f"--demos: every {task} demonstration needs text 'input' and 'output'")
            pairs.append((row["input"], row["output"]))
        out[task] = pairs
    return out


def build_config(args: argparse.Namespace):
    """The CopyConfig of the options: CopyConfig checks the settings (once), then the judges are made."""
    from copyprobe.copying.common import GenConfig
    from copyprobe.copying.fluency import FluencyJudge
    from copyprobe.copying.nonliteral import make_judge
    from copyprobe.copying.runner import SETTINGS, CopyConfig

    gen = ("mitigation", "chat", "repetition_penalty")
    values = setting_values(args, SETTINGS)
    config = CopyConfig(
        gen=GenConfig(max_tokens=values["literal_max_tokens"], **{k: values[k] for k in gen}),
        **{k: v for k, v in values.items() if k not in gen},
        demos=_demos(args.demos),
    )
    if "nonliteral" in config.tasks:
        config.judge = make_judge(args.judge, args.embedding_threshold)
    config.fluency_judge = FluencyJudge(None if args.fluency_judge in ("target", "") else args.fluency_judge)
    return config


def run(args: argparse.Namespace) -> int:
    from copyprobe.copying.runner import copying
    from copyprobe.record import prepare_out_dir

    config = build_config(args)  # bad options fail before any loading
    check_batch_size(args.batch_size)
    prepare_out_dir(args.out, "copying", args.model)
    with progress_bars(not args.no_progress) as progress:
        result = copying(
            args.model, args.data, config, out=args.out, cache=cache_setting(args),
            batch_size=args.batch_size, device=args.device, dtype=args.dtype,
            memfree_n=args.memfree_n, memfree_index=args.memfree_index, progress=progress,
            command=["copyprobe", *sys.argv[1:]],
            book_options={"prefix_words": args.prefix_words, "reference_words": args.reference_words},
            clean=args.clean,
        )
    print_summary(result["metrics"], result["run"])
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(result['out'])}")
    print(f"run written to {result['out']}")
    return 0


def print_summary(metrics: dict, run: dict) -> None:
    from copyprobe.copying.summary import summary_lines

    print("\n".join(summary_lines(metrics, run)))
