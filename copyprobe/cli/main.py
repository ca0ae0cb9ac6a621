"""`copyprobe` command line. Thin: parses, calls the public API, prints.

Each subcommand lives in ``copyprobe/cli/commands/<name>.py`` and is found
automatically, so a new command is one new file: ``HELP`` (one line), ``DESCRIPTION``
(optional), ``add_arguments(parser)`` and ``run(args) -> exit code``. A command with
sub-actions may instead define ``register(subparsers)`` and build its parser itself.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from copyprobe.errors import CopyprobeError


def build_parser() -> argparse.ArgumentParser:
    from copyprobe._version import __version__
    import copyprobe.cli.commands as commands

    parser = argparse.ArgumentParser(
        prog="copyprobe",
        description="Was a language model trained on this text, and how much of it does it reproduce?",
    )
    parser.add_argument("--version", action="version", version=f"copyprobe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"copyprobe.cli.commands.{info.name}")
        if hasattr(module, "register"):  # a command that builds its own parser (e.g. sub-actions)
            module.register(sub)
            continue
        parser_ = sub.add_parser(info.name.replace("_", "-"), help=module.HELP,
                                 description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(parser_)
        parser_.set_defaults(func=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)  # a usage error: argparse prints it and exits 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except CopyprobeError as exc:
        print(f"copyprobe: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "copyprobe: interrupted; finished work is in the cache — run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except MemoryError:
        print("copyprobe: error: out of memory; try a smaller --batch-size", file=sys.stderr)
        return 2
    return int(code or 0)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
