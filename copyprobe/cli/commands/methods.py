"""copyprobe methods: list every registered method, its parameters and the access it needs."""

from __future__ import annotations

import argparse


HELP = "list the available methods and their parameters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print as JSON")


def describe() -> list[dict]:
    from copyprobe.registry import method_class, method_names

    rows = []
    for name in method_names():
        cls = method_class(name)
        helps = cls.param_help()
        constraints = cls.param_constraints()
        rows.append(
            {
                "name": name,
                "access": cls.access,
                "trains": bool(cls.trains),
                "summary": cls.summary,
                "module": cls.__module__,
                "params": {
                    key: {"default": default, "accepts": constraints[key].describe(), "help": helps.get(key, "")}
                    for key, default in cls.param_defaults().items()
                },
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    from copyprobe.registry import PLUGIN_ERRORS

    rows = describe()
    if args.json:
        import json

        print(json.dumps(rows, indent=2, default=str))
        return 0
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    console.print("[bold]copyprobe methods[/bold] (every score: higher = more likely a member, unless a parameter says otherwise)\n")
    for row in rows:
        console.print(f"[bold cyan]{row['name']}[/bold cyan]  [dim]{escape(row['access'])}[/dim]")
        console.print(f"  {escape(row['summary'])}")
        if row["trains"]:
            console.print("  [yellow]trains on labelled rows; they are excluded from its metrics[/yellow]")
        if not row["module"].startswith("copyprobe."):
            console.print(f"  [dim]from {escape(row['module'])} (entry point)[/dim]")
        for key, value in row["params"].items():
            helptext = f"  [dim]{escape(value['help'])}[/dim]" if value["help"] else ""
            console.print(f"    {row['name']}.{key} = {escape(repr(value['default']))}"
                          f"  [dim]({escape(value['accepts'])})[/dim]{helptext}")
        console.print()
    for name, reason in PLUGIN_ERRORS.items():
        console.print(f"[yellow]method plugin {escape(name)} could not be loaded: {escape(reason)}[/yellow]")
    return 0
