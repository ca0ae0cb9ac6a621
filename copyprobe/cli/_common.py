"""Pieces shared by subcommands: common options, --param parsing, progress bars, tables."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from copyprobe.errors import ConfigError
from copyprobe.params import Device, comma_items, option_type, shown
from copyprobe.progress import progress_bars


def add_run_options(parser: argparse.ArgumentParser, *, out_default: str | None = None, report: bool = True) -> None:
    """--out (the run directory), --report and --no-progress, as every scoring command has them."""
    if out_default is None:
        parser.add_argument("--out", required=True, help="run directory to write")
    else:
        parser.add_argument("--out", default=out_default, help=f"run directory (default {out_default})")
    if report:
        parser.add_argument("--report", action="store_true", help="also write report.html into the run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


# a setting whose option is not "--" + its name with dashes
FLAGS = {"n_bootstrap": "--bootstrap", "literal_threshold": "--threshold", "literal_max_tokens": "--literal-tokens",
         "nonliteral_max_tokens": "--story-tokens"}


def flag_of(setting: str) -> str:
    return FLAGS.get(setting, "--" + setting.replace("_", "-"))


def add_settings(parser: argparse.ArgumentParser, settings: Any, names: tuple[str, ...] | None = None,
                 defaults: dict[str, Any] | None = None) -> None:
    """One option per declared setting of a run kind (``names``: only these), read from
    the declaration: its name, default and help. The option only reads the string; the
    library checks the value (once) and names the setting, which :func:`copyprobe.cli.main`
    turns back into this option's name. ``args.<setting name>`` holds the value."""
    from copyprobe.params import OneOf, parse_type

    flags = dict(parser.get_default("_setting_flags") or {})
    for setting in settings:
        if names is not None and setting.name not in names:
            continue
        flag = flag_of(setting.name)
        default = (defaults or {}).get(setting.name, setting.default)
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        parser.add_argument(flag, dest=setting.name, type=parse_type(setting.constraint, flag), default=default,
                            metavar=("{" + ",".join(setting.constraint.choices) + "}"
                                     if isinstance(setting.constraint, OneOf)
                                     else "N" if setting.name == "limit" else setting.name.upper()),
                            help=f"{setting.help} (default {shown})".replace("%", "%%"))  # argparse formats help with %
        flags[setting.name] = flag
    parser.set_defaults(_setting_flags=flags, _prog=parser.prog)


def setting_values(args: argparse.Namespace, settings: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The values of the settings the command line read, as the library's keywords."""
    return {s.name: getattr(args, s.name) for s in settings
            if (names is None or s.name in names) and hasattr(args, s.name)}


def add_scoring_options(parser: argparse.ArgumentParser, settings: Any, *, bootstrap: int | None = None) -> None:
    """--param, and the run kind's seed and bootstrap settings."""
    parser.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="method parameter, repeatable")
    add_settings(parser, settings, ("seed", "n_bootstrap"))


def add_model_options(parser: argparse.ArgumentParser) -> None:
    from copyprobe.params import COUNT, REQUEST_TIMEOUT

    parser.add_argument("--batch-size", type=batch_size_option, default="auto", metavar="auto|N",
                        help="auto: batches by memory (padded tokens per forward pass, from the free "
                             "memory on a GPU); N: texts per forward pass (default auto)")
    parser.add_argument("--device", type=option_type(Device(), "--device"), default="auto",
                        help="auto | cpu | cuda | cuda:N, a device present here (default auto)")
    parser.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    parser.add_argument("--api-key-env", metavar="NAME",
                        help="openai: models: environment variable holding the API key (default OPENAI_API_KEY)")
    parser.add_argument("--concurrency", type=option_type(COUNT, "--concurrency"), default=None,
                        help="openai: models: requests in flight at once (default 8)")
    parser.add_argument("--request-timeout", type=option_type(REQUEST_TIMEOUT, "--request-timeout"), default=None,
                        metavar="SECONDS",
                        help="openai: models: the longest wait for one answer before it is retried (up to 5 "
                             "retries); default 120")
    # the library names these settings (errors.SettingError); main() words them as these options
    flags = dict(parser.get_default("_setting_flags") or {})
    flags.update(device="--device", dtype="--dtype", batch_size="--batch-size", api_key_env="--api-key-env",
                 concurrency="--concurrency", timeout="--request-timeout")
    parser.set_defaults(_setting_flags=flags, _prog=parser.prog)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cache", metavar="FILE", help="response cache file (default: user cache dir)")
    group.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")


def add_passage_option(parser: argparse.ArgumentParser) -> None:
    """--passage-words: how book files (.txt/.md/.epub/.pdf/.docx/.html) and source files are cut into passages."""
    from copyprobe.params import COUNT

    parser.add_argument("--passage-words", type=option_type(COUNT, "--passage-words"), default=None,
                        help="book and source files: most words of a passage (default 128; docs/input-files.md)")


def cache_setting(args: argparse.Namespace) -> Any:
    if args.no_cache:
        return False
    return args.cache or True


def api_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of OpenAI-compatible models, as given (None: not given). The backend
    that uses them checks them (:func:`copyprobe.backends.specs.check_model_options`), so
    an option the model would ignore is refused, not dropped."""
    options: dict[str, Any] = {}
    if args.api_key_env is not None:  # '' is a mistake to report, not "use the default"
        options["api_key_env"] = args.api_key_env
    if args.concurrency is not None:
        if args.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
        options["concurrency"] = args.concurrency
    if getattr(args, "request_timeout", None) is not None:
        options["timeout"] = args.request_timeout
    return options


def batch_size_option(raw: str) -> int | str:
    """``--batch-size``: ``auto`` or an integer >= 1 (a usage error otherwise)."""
    text = raw.strip().lower()
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {shown(raw)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {value}")
    return value


def check_batch_size(value: int | str) -> int | str:
    if value != "auto" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"--batch-size must be auto or an integer >= 1, got {value!r}")
    return value


def parse_params(items: list[str] | None, methods: list[str], option: str = "--methods") -> dict[str, dict[str, Any]]:
    """`METHOD.NAME=VALUE` strings -> {method: {name: typed value}}: read only; the method
    checks its values when it is made (:func:`copyprobe.registry.make_method`), once."""
    from copyprobe.registry import convert_param, method_class

    params: dict[str, dict[str, Any]] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        method, dot, name = key.strip().partition(".")
        if not sep or not dot or not method or not name:
            raise ConfigError(f"bad --param {shown(item)}: expected METHOD.NAME=VALUE, e.g. min_k.k=0.1")
        if method not in methods:
            raise ConfigError(f"--param {item!r} names method {method!r}, but {option} is {methods[0]}"
                              if option == "--method" and len(methods) == 1 else
                              f"--param {item!r} names method {method!r}, which is not in {option}")
        cls = method_class(method)
        value = convert_param(cls, name, raw)
        given = params.setdefault(method, {})
        if name in given and given[name] != value:  # the last one winning would hide a typo
            raise ConfigError(f"--param {method}.{name} is given twice, as {given[name]!r} and {value!r}: "
                              "give it once")
        given[name] = value
    return params


def run_options(args: argparse.Namespace, progress: Any) -> dict[str, Any]:
    """The keywords every scoring run takes from the common options (model, run directory, cache)."""
    return {"out": args.out, "cache": cache_setting(args), "batch_size": args.batch_size, "device": args.device,
            "dtype": args.dtype, "progress": progress, "command": ["copyprobe", *sys.argv[1:]],
            "api_options": api_options(args)}


def run_detect(args: argparse.Namespace, data: Any, methods: list[Any], explain: Any = None, **options: Any) -> int:
    """`demo`'s detect run: score with progress bars, then :func:`show_detect`. ``methods``:
    names or built Method objects; ``explain(result)``: lines printed after the table;
    ``options``: more keywords of :func:`copyprobe.detect`."""
    from copyprobe.detect import SETTINGS, detect

    with progress_bars(not args.no_progress) as progress:
        result = detect(args.model, data, methods, **run_options(args, progress),
                        **setting_values(args, SETTINGS), **options)
    code = show_detect(args, result, [m if isinstance(m, str) else m.name for m in methods])
    for line in explain(result) if explain else []:
        print(line)
    return code


def show_detect(args: argparse.Namespace, result: Any, names: list[str]) -> int:
    """Print the metrics table, write the report when asked, and say where the run is."""
    print_metrics(result.metrics, result.scores, names, result.notes)
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(result.out)}")
    print(f"run written to {result.out}")
    return scored_exit_code(result.rows, names)


def say_few_resamples(n_bootstrap: int | None, metrics: Any) -> None:
    """One console note when a detect run's intervals rest on fewer resamples than detect's
    default (not recorded: run.json's bootstrap.n says it, and rescore may change it)."""
    from copyprobe.detect import SETTINGS as DETECT_SETTINGS

    default = DETECT_SETTINGS.default("n_bootstrap")
    if metrics and n_bootstrap is not None and 0 < n_bootstrap < default:
        print(f"note: the 95% intervals rest on {n_bootstrap} bootstrap resample(s): their ends move with the seed "
              f"(the default is {default:,})")


def scored_exit_code(rows: Any, names: list[str]) -> int:
    """The exit code of a scoring run, by :func:`copyprobe.detect.unscored` (the one rule):
    a method that scored nothing -> one error line naming the cause, exit 2; a method that
    scored some passages -> one warning line each (how many failed and why), exit 0. The
    run is written either way, and a rerun asks again only for the failed requests."""
    from copyprobe.detect import unscored

    return unscored_exit_code(unscored(rows, names))


def copying_exit_code(rows: list[dict]) -> int:
    """detect's rule per part of a copying run (the book's literal items, the clean
    baseline, the non-literal items and their event judgements, the QA items, the fluency
    judgements): a part that scored nothing -> one error line, exit 2; some -> one warning
    each, exit 0. The run is written either way. (`copying` and `demo` both end with it.)"""
    from copyprobe.copying.summary import unscored

    return unscored_exit_code(unscored(rows))


def unscored_exit_code(missing: list[Any]) -> int:
    """Warnings for the methods (or parts of a run) that scored some rows, and the error
    line for the first that scored none (exit 2): :class:`copyprobe.detect.Unscored` each."""
    for item in missing:
        if not item.nothing:
            print(f"copyprobe: warning: {' '.join(item.line().split())}", file=sys.stderr)
    empty = [item for item in missing if item.nothing]
    if not empty:
        return 0
    others = f" (and {', '.join(item.method for item in empty[1:])} too)" if len(empty) > 1 else ""
    print(f"copyprobe: error: {' '.join(empty[0].line().split())}{others}; the run is written (every "
          f"reason in its {empty[0].where}; a rerun asks again only for what failed)", file=sys.stderr)
    return 2


def split_names(text: str) -> list[str]:
    try:
        names = comma_items(text)
    except ValueError as e:
        raise ConfigError(f"--methods {shown(text)}: {e}") from None
    if not names:
        raise ConfigError("--methods is empty (run `copyprobe methods` to list them)")
    return names


def print_metrics(metrics: dict[str, Any] | None, scores, method_names: list[str], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if metrics:
        for level in ("passage", "document"):
            block = metrics.get(level) or {}
            if not block:
                continue
            table = Table(title=f"{level}-level membership detection")
            for column in ("method", "AUC", "95% CI", "TPR@1%FPR", "TPR@5%FPR", "n"):
                table.add_column(column, justify="left" if column == "method" else "right")
            for name in method_names:
                m = block.get(name)
                if not m:
                    continue
                table.add_row(
                    name,
                    _fmt(m.get("auc")),
                    f"[{_fmt(m.get('auc_low'))}, {_fmt(m.get('auc_high'))}]",
                    _fmt(m.get("tpr_at_1pct_fpr")),
                    _fmt(m.get("tpr_at_5pct_fpr")),
                    str(m.get("n", "")),
                )
            blind = metrics.get("blind_baseline") if level == "passage" else None
            if blind and blind.get("auc") is not None:
                table.add_row(
                    "[dim]blind baseline (no model)[/dim]",
                    _fmt(blind.get("auc")),
                    f"[{_fmt(blind.get('auc_low'))}, {_fmt(blind.get('auc_high'))}]",
                    "", "", str(blind.get("n", "")),
                )
            console.print(table)
        blind = metrics.get("blind_baseline") or {}
        if blind.get("warning"):
            console.print(f"[bold red]WARNING:[/bold red] {blind['warning'].removeprefix('WARNING: ')}")
        elif blind.get("no_signal"):
            console.print(f"[dim]blind baseline: {blind['no_signal']}[/dim]")
    else:
        table = Table(title="scores (first rows)")
        table.add_column("id")
        for name in method_names:
            table.add_column(name, justify="right")
        for _, row in scores.head(10).iterrows():
            table.add_row(str(row["id"]), *(_fmt(row.get(n)) for n in method_names))
        console.print(table)
    warning = (metrics or {}).get("blind_baseline", {}).get("warning")
    for note in notes:
        if note != warning:  # already printed in red above
            console.print(f"note: {note}")


def _fmt(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(number):
        return "–"
    return f"{number:.3f}"

