"""copyprobe copying: how much of a protected text does the model reproduce (CopyBench)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from copyprobe.cli._common import (
    add_model_options,
    add_run_options,
    add_settings,
    cache_setting,
    check_batch_size,
    setting_values,
)
from copyprobe.progress import progress_bars
from copyprobe.errors import ConfigError, DataError
from copyprobe.params import COUNT, Real, option_type

# defaults of the options read here (not declared settings): an option that differs from
# its default was given, and is refused where it would have no effect (_refuse_unused)
JUDGE, FLUENCY_JUDGE, PREFIX_WORDS, REFERENCE_WORDS = "embedding", "target", 200, 50


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
    parser.add_argument("--judge", default=JUDGE, help="event judge: 'embedding' (offline, default), 'target', or a model spec answered with the Fig. 8 prompt")
    parser.add_argument("--embedding-threshold", type=option_type(Real(-1, 1), "--embedding-threshold"), default=None, help="cosine threshold of the embedding judge (default: the calibrated one)")
    parser.add_argument("--fluency-judge", default=FLUENCY_JUDGE, help="fluency judge: 'target' (default: the evaluated model) or a model spec")
    add_settings(parser, SETTINGS, ("templates",))
    parser.add_argument("--chat", action="store_true", help=SETTINGS["chat"].help)
    add_settings(parser, SETTINGS, ("literal_threshold", "event_threshold", "character_threshold", "repetition_penalty",
                                    "literal_max_tokens", "nonliteral_max_tokens", "limit", "sample_seed"))
    parser.add_argument("--demos", help="JSON file {task: [{input, output}, ...]} of few-shot demonstrations")
    add_settings(parser, MEMFREE_SETTINGS)
    parser.add_argument("--prefix-words", type=option_type(COUNT, "--prefix-words"), default=PREFIX_WORDS, help=f"book input: words of each prefix (default {PREFIX_WORDS})")
    parser.add_argument("--reference-words", type=option_type(COUNT, "--reference-words"), default=REFERENCE_WORDS, help=f"book input: words of each reference (default {REFERENCE_WORDS})")
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
    """The CopyConfig of the options: CopyConfig checks the settings (once), options that
    would have no effect are refused, then the judges are made."""
    from copyprobe.copying.common import GenConfig
    from copyprobe.copying.fluency import FluencyJudge
    from copyprobe.copying.nonliteral import make_judge
    from copyprobe.copying.runner import SETTINGS, CopyConfig

    gen = ("mitigation", "chat", "repetition_penalty")
    values = setting_values(args, SETTINGS)
    # each task makes its own GenConfig with its own token limit (runner.build_runs), so
    # --literal-tokens is checked once, by CopyConfig, under its own name
    config = CopyConfig(
        gen=GenConfig(**{k: values[k] for k in gen}),
        **{k: v for k, v in values.items() if k not in gen},
        demos=_demos(args.demos),
    )
    _refuse_unused(args, config)
    if "nonliteral" in config.tasks:
        config.judge = make_judge(args.judge, args.embedding_threshold)
    config.fluency_judge = FluencyJudge(None if args.fluency_judge in ("target", "") else args.fluency_judge)
    return config


def _is_book(data: str) -> bool:
    """Whether --data is read as a book (copyprobe.copying.data.load_copyset's rule)."""
    from copyprobe.data.books import BOOK_SUFFIXES

    return Path(data).suffix.lower() in BOOK_SUFFIXES and not Path(data).is_dir()


def _refuse_unused(args: argparse.Namespace, config: Any) -> None:
    """An option given (different from its default) that this run would not use is a
    mistake to report, not a value to drop: the user believes it shaped the results."""
    from copyprobe.copying.runner import MEMFREE_SETTINGS, SETTINGS

    given = list(args.tasks)
    twice = next((t for i, t in enumerate(given) if t in given[:i]), None)
    if twice is not None:
        raise ConfigError(f"--tasks names {twice} twice: the second has no effect; give each task once")
    tasks = config.tasks
    shown_tasks = ",".join(tasks)

    def without(task: str) -> str:
        return f"{task} is not among --tasks ({shown_tasks})"

    literal, nonliteral = "literal" in tasks, "nonliteral" in tasks
    no_literal = None if literal else f"the baseline scores literal copying, and {without('literal')}"

    def baseline(what: str) -> str | None:
        return f"{what} only for the baseline, and --no-baseline turns it off" if not args.baseline else no_literal

    default = SETTINGS.default
    # option -> (whether it was given, why it has no effect here or None); first match is said
    scoped = {
        "--threshold": (args.literal_threshold != default("literal_threshold"), None if literal else without("literal")),
        "--literal-tokens": (args.literal_max_tokens != default("literal_max_tokens"),
                             None if literal else without("literal")),
        "--prefix-words": (args.prefix_words != PREFIX_WORDS, _book_only(args, literal, without)),
        "--reference-words": (args.reference_words != REFERENCE_WORDS, _book_only(args, literal, without)),
        "--no-baseline": (not args.baseline, no_literal),
        "--sample-seed": (args.sample_seed != default("sample_seed"),
                          None if args.limit is not None else "it draws the items --limit keeps, and --limit is not given"),
        "--clean": (args.clean is not None, baseline("the clean text is read")),
        # 0 asks for no resamples, which a run without the baseline draws anyway
        "--bootstrap": (args.n_bootstrap not in (default("n_bootstrap"), 0), baseline("the resamples are drawn")),
        "--templates": (tuple(args.templates) != default("templates"),
                        None if literal or nonliteral else "templates are the prompts of literal and nonliteral, "
                                                           f"and neither is among --tasks ({shown_tasks})"),
        "--judge": (args.judge not in ("", JUDGE), None if nonliteral else without("nonliteral")),
        "--embedding-threshold": (args.embedding_threshold is not None,
                                  without("nonliteral") if not nonliteral else
                                  None if args.judge in ("", JUDGE) else f"--judge is {args.judge}, not {JUDGE}"),
        "--event-threshold": (args.event_threshold != default("event_threshold"),
                              None if nonliteral else without("nonliteral")),
        "--character-threshold": (args.character_threshold != default("character_threshold"),
                                  None if nonliteral else without("nonliteral")),
        "--story-tokens": (args.nonliteral_max_tokens != default("nonliteral_max_tokens"),
                           None if nonliteral else without("nonliteral")),
        "--fluency-judge": (args.fluency_judge not in ("", FLUENCY_JUDGE),  # "" means the default
                            None if "fluency" in tasks else without("fluency")),
        **{flag: (getattr(args, name) != MEMFREE_SETTINGS.default(name),
                  None if config.gen.mitigation == "memfree" else
                  f"it sets MemFree decoding, and --mitigation is {config.gen.mitigation}")
           for flag, name in (("--memfree-n", "memfree_n"), ("--memfree-index", "memfree_index"))},
    }
    for flag, (was_given, why) in scoped.items():
        if was_given and why is not None:
            raise ConfigError(f"{flag} has no effect: {why}")
    unused = [task for task in config.demos if task not in tasks]
    if unused:
        raise ConfigError(f"--demos {args.demos} has {unused[0]} demonstrations, which have no effect: "
                          f"{without(unused[0])}")


def _book_only(args: argparse.Namespace, literal: bool, without: Any) -> str | None:
    """Why --prefix-words / --reference-words would not be used, or None."""
    if not _is_book(args.data):
        return f"it cuts a book into items, and --data {args.data} is not a book file"
    return None if literal else f"a book gives literal items only, and {without('literal')}"


def run(args: argparse.Namespace) -> int:
    from copyprobe.copying.runner import copying

    config = build_config(args)  # bad options fail before any loading
    check_batch_size(args.batch_size)
    # the output directory is copying()'s to make (first of all, before the data is read): made
    # here, outside it, it would be left behind empty by a run refused on its data
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
    from copyprobe.cli._common import copying_exit_code

    return copying_exit_code(result["rows"])


def print_summary(metrics: dict, run: dict) -> None:
    from copyprobe.copying.summary import summary_lines

    print("\n".join(summary_lines(metrics, run)))
