"""`copyprobe report RUN_DIR [--out FILE]`: one self-contained HTML page of a saved run."""

from __future__ import annotations

import argparse
import sys


HELP = "write a self-contained HTML report of a run directory (no model is loaded)"
DESCRIPTION = (
    "Write one HTML file (plots, tables, settings; no external files or network "
    "needed to view it) from a run directory written by detect, audit or demo."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory (with run.json and scores.jsonl)")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help="where to write the page, in a folder that exists (default: RUN_DIR/report.html)")


def run(args: argparse.Namespace) -> int:
    from copyprobe.reports.html import blind_warning_of, write_report

    from copyprobe.reports.pages import run_kind

    path = write_report(args.run_dir, args.out)
    # canary and copying runs have no membership scores, hence no blind baseline
    warning = None if run_kind(args.run_dir) in ("canary", "copying") else blind_warning_of(args.run_dir)
    if warning:
        print(f"copyprobe: {warning}", file=sys.stderr)
    print(path)
    return 0
