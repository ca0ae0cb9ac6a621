"""copyprobe methods: list every registered method, its parameters and the access it needs."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("methods", help="list the available methods and their parameters")
    parser.add_argument("--json", action="store_true", help="print as JSON")
    parser.set_defaults(func=run)


def describe() -> list[dict]:
    from copyprobe.registry import method_class, method_names

    rows = []
    for name in method_names():
        cls = method_class(name)
        rows.append(
            {
                "name": name,
                "access": cls.access,
                "trains": bool(cls.trains),
                "summary": cls.summary,
                "params": {
                    key: {"default": default, "help": cls.param_help.get(key, "")}
                    for key, default in cls.param_defaults().items()
                },
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    rows = describe()
    if args.json:
        import json

        print(json.dumps(rows, indent=2, default=str))
        return 0
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    console.print("[bold]copyprobe methods[/bold] (every score: higher = more likely a member)\n")
    for row in rows:
        console.print(f"[bold cyan]{row['name']}[/bold cyan]  [dim]{escape(row['access'])}[/dim]")
        console.print(f"  {escape(row['summary'])}")
        if row["trains"]:
            console.print("  [yellow]trains on labelled rows; they are excluded from its metrics[/yellow]")
        for key, value in row["params"].items():
            helptext = f"  [dim]{escape(value['help'])}[/dim]" if value["help"] else ""
            console.print(f"    {row['name']}.{key} = {escape(repr(value['default']))}{helptext}")
        console.print()
    return 0
