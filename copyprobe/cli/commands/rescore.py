"""`copyprobe rescore RUN_DIR`: recompute metrics, verdicts, blind baseline and report
from a saved run, with no model loaded and no model call."""

from __future__ import annotations

import argparse

from copyprobe.params import BOOTSTRAP_COUNT, option_type


HELP = "recompute metrics, verdicts, canary.json and report from a run directory (no model is loaded)"
DESCRIPTION = (
    "Recompute metrics.json (AUC, TPR at low FPR, bootstrap CIs, blind baseline), "
    "verdicts.json (audit runs), the copying metrics or canary.json (canary tests, with their kit) "
    "from the run directory alone."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory written by detect, audit, demo, copying or canary test")
    parser.add_argument("--bootstrap", type=option_type(BOOTSTRAP_COUNT, "--bootstrap"), default=None,
                        help="bootstrap resamples (default: the number the run used)")
    parser.add_argument("--report", action="store_true", help="also write report.html (detect and audit runs)")
    parser.add_argument("--kit", default=None,
                        help="canary runs: the kit directory, when it moved since the test (default: the recorded one)")
    # the library names these settings (errors.SettingError); main() words them as these options
    parser.set_defaults(_setting_flags={"n_bootstrap": "--bootstrap", "kit": "--kit"})


def run(args: argparse.Namespace) -> int:
    from copyprobe.cli._common import print_metrics, say_few_resamples
    from copyprobe.rescore import rescore

    loaded = rescore(args.run_dir, n_bootstrap=args.bootstrap, inputs={"kit": args.kit} if args.kit else None)
    if loaded.record.kind in ("detect", "audit"):
        names = list(loaded.record.methods)
        print_metrics(loaded.metrics, loaded.scores_frame(), names, (loaded.metrics or {}).get("notes", []))
        if loaded.record.kind == "detect":
            say_few_resamples((loaded.record.bootstrap or {}).get("n"), loaded.metrics)
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(loaded.dir)}")
    print(f"rescored {loaded.dir}")
    return 0
