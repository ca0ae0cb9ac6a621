"""copyprobe datasets: the named benchmark datasets `--data NAME[:SPLIT]` accepts."""

from __future__ import annotations

import argparse

HELP = "list the named benchmark datasets (--data NAME[:SPLIT])"
DESCRIPTION = (
    "List the datasets --data accepts by name: size, license, source, what 'member' means "
    "and for which models, known caveats, and where the non-bundled ones are read from."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from copyprobe.data.datasets import DATA_DIR_ENV, data_dir, describe

    rows = describe()
    if args.json:
        import json

        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    console.print("[bold]copyprobe datasets[/bold] (use as --data NAME[:SPLIT]; "
                  f"non-bundled data is read from ${DATA_DIR_ENV} = {escape(str(data_dir()))})\n")
    for row in rows:
        console.print(f"[bold cyan]{escape(row['name'])}[/bold cyan]  [dim]for copyprobe {row['command']}[/dim]")
        for key in ("size", "license", "source", "member", "caveats"):
            console.print(f"  {key}: {escape(row[key])}")
        console.print()
    return 0
