"""copyprobe copying: how much of a protected text does the model reproduce (CopyBench)."""

from __future__ import annotations

import argparse
import json
import sys

from copyprobe.cli._common import (
    add_limit_option,
    add_model_options,
    add_run_options,
    cache_setting,
    check_batch_size,
    progress_bars,
)
from copyprobe.errors import ConfigError, DataError
from copyprobe.params import NON_NEGATIVE_INT, option_type


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
    parser.add_argument("--tasks", default="literal,nonliteral,qa,fluency", help="comma-separated: literal, nonliteral, qa, fluency (default all)")
    parser.add_argument("--mitigation", default="none", choices=["none", "memfree", "system_prompt"], help="inference-time mitigation (default none)")
    parser.add_argument("--judge", default="embedding", help="event judge: 'embedding' (offline, default), 'target', or a model spec answered with the Fig. 8 prompt")
    parser.add_argument("--embedding-threshold", type=float, default=None, help="cosine threshold of the embedding judge (default: the calibrated one)")
    parser.add_argument("--fluency-judge", default="target", help="fluency judge: 'target' (default: the evaluated model) or a model spec")
    parser.add_argument("--templates", default="0", help="prompt templates of Fig. 5/6 to use, comma-separated from 0,1,2 (default 0; the paper uses all three)")
    parser.add_argument("--chat", action="store_true", help="send prompts as chat messages (system reminder as system message)")
    parser.add_argument("--threshold", type=float, default=0.8, help="ROUGE-L threshold for literal copying (default 0.8)")
    parser.add_argument("--event-threshold", type=int, default=5, help="events for non-literal copying (default 5)")
    parser.add_argument("--character-threshold", type=int, default=3, help="characters for non-literal copying (default 3)")
    parser.add_argument("--repetition-penalty", type=float, default=1.1, help="repetition penalty of generations (default 1.1, as the paper)")
    parser.add_argument("--literal-tokens", type=int, default=100, help="max new tokens of literal completions (default 100)")
    parser.add_argument("--story-tokens", type=int, default=1024, help="max new tokens of stories (default 1024, as the paper)")
    add_limit_option(parser, "items of each task")
    parser.add_argument("--demos", help="JSON file {task: [{input, output}, ...]} of few-shot demonstrations")
    parser.add_argument("--memfree-n", type=int, default=10, help="MemFree n-gram length in tokens (default 10)")
    parser.add_argument("--memfree-index", default="set", choices=["set", "bloom"], help="MemFree n-gram index (default set)")
    parser.add_argument("--prefix-words", type=int, default=200, help="book input: words of each prefix (default 200)")
    parser.add_argument("--reference-words", type=int, default=50, help="book input: words of each reference (default 50)")
    parser.add_argument("--clean", default=None,
                        help="baseline: text the model cannot have seen (.txt/.epub, or CopyBench literal JSON), "
                        "scored like the book; default: the clean prose shipped with copyprobe (docs/copying.md)")
    parser.add_argument("--no-baseline", action="store_true", help="do not score the clean baseline")
    parser.add_argument("--bootstrap", type=option_type(NON_NEGATIVE_INT, "--bootstrap"), default=1000,
                        help="bootstrap resamples of the CI of the difference to the baseline (default 1000)")
    add_run_options(parser)
    add_model_options(parser)


def _templates(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise ConfigError(f"--templates must be indices 0, 1, 2 separated by commas, got {text!r}") from None
    if not values:
        raise ConfigError("--templates is empty")
    return values


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
    from copyprobe.copying.common import GenConfig
    from copyprobe.copying.fluency import FluencyJudge
    from copyprobe.copying.nonliteral import make_judge
    from copyprobe.copying.runner import CopyConfig, parse_tasks

    tasks = parse_tasks(args.tasks)
    if args.literal_tokens < 1 or args.story_tokens < 1:
        raise ConfigError("--literal-tokens and --story-tokens must be at least 1")
    if args.repetition_penalty <= 0:
        raise ConfigError("--repetition-penalty must be positive")
    if args.memfree_n < 2:
        raise ConfigError("--memfree-n must be at least 2")
    judge = make_judge(args.judge, args.embedding_threshold) if "nonliteral" in tasks else None
    fluency_judge = FluencyJudge(None if args.fluency_judge in ("target", "") else args.fluency_judge)
    return CopyConfig(
        tasks=tasks,
        gen=GenConfig(max_tokens=args.literal_tokens, repetition_penalty=args.repetition_penalty,
                      chat=args.chat, mitigation=args.mitigation),
        templates=_templates(args.templates),
        literal_max_tokens=args.literal_tokens,
        nonliteral_max_tokens=args.story_tokens,
        literal_threshold=args.threshold,
        event_threshold=args.event_threshold,
        character_threshold=args.character_threshold,
        judge=judge,
        fluency_judge=fluency_judge,
        demos=_demos(args.demos),
        limit=args.limit,
        baseline=not args.no_baseline,
        n_bootstrap=args.bootstrap,
    )


def run(args: argparse.Namespace) -> int:
    from copyprobe.copying.runner import copying
    from copyprobe.record import prepare_out_dir

    config = build_config(args)  # bad options fail before any loading
    check_batch_size(args.batch_size)
    prepare_out_dir(args.out)
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
