"""copyprobe cache: what the response cache holds, and forgetting part of it."""

from __future__ import annotations

import argparse
import time
from typing import Any

from copyprobe.params import Real, option_type

HELP = "show what the response cache holds, per model and request kind, or forget part of it"
DESCRIPTION = (
    "Show the response cache file, its size and, per model fingerprint (a run's run.json gives its "
    "model's as model.fingerprint) and request kind, the entries, their size and when they were written. "
    "--forget-model and --forget-older-than delete entries (a run computes them again when it needs them) "
    "and compact the file. Every run adds to the cache: about 4.7 KB per passage and model for the five "
    "logit methods."
)
MIN_PREFIX = 8  # characters of a fingerprint that name it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="FILE", help="response cache file (default: user cache dir)")
    parser.add_argument("--forget-model", metavar="FINGERPRINT",
                        help=f"delete the entries of this model: its fingerprint, or its first {MIN_PREFIX} or "
                             "more characters")
    parser.add_argument("--forget-older-than", metavar="DAYS", type=option_type(Real(0), "--forget-older-than"),
                        help="delete the entries written more than DAYS days ago (with --forget-model: of that "
                             "model only)")
    parser.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from copyprobe.backends.cache import ResponseCache, default_cache_path
    from copyprobe.errors import ConfigError

    path = Path(args.cache) if args.cache else default_cache_path()
    if not path.exists():  # nothing to show, and no empty file made to show it
        if args.forget_model is not None or args.forget_older_than is not None:
            raise ConfigError(f"no cache file at {path}: nothing to forget")
        _print({"path": str(path), "exists": False}, args.json)
        return 0
    cache = ResponseCache(path)
    try:
        forgotten = None
        if args.forget_model is not None or args.forget_older_than is not None:
            fingerprint = None if args.forget_model is None else _fingerprint(args.forget_model, cache.fingerprints())
            before = None if args.forget_older_than is None else time.time() - args.forget_older_than * 86400
            forgotten = {"entries": cache.forget(fingerprint=fingerprint, written_before=before),
                         "compacted": cache.compact()}
        contents = cache.contents()  # what is left
    finally:
        cache.close()
    report: dict[str, Any] = {"path": str(path), "exists": True, "bytes_on_disk": _on_disk(path),
                              "entries": sum(row["entries"] for row in contents), "contents": contents}
    if forgotten is not None:
        report["forgotten"] = forgotten
    _print(report, args.json)
    return 0


def _fingerprint(given: str, known: list[str]) -> str:
    """The one fingerprint of ``known`` (the cache's) that ``given`` is, or starts."""
    from copyprobe.errors import ConfigError

    if given in known:
        return given
    if len(given) < MIN_PREFIX:
        raise ConfigError(f"--forget-model {given!r}: give the model's fingerprint or at least its first "
                          f"{MIN_PREFIX} characters (run.json's model.fingerprint)")
    matches = [fingerprint for fingerprint in known if fingerprint.startswith(given)]
    if not matches:
        raise ConfigError(f"--forget-model {given!r}: no model's fingerprint in this cache starts so; "
                          "`copyprobe cache` lists them")
    if len(matches) > 1:
        raise ConfigError(f"--forget-model {given!r}: the fingerprints of {len(matches)} models start so "
                          f"({', '.join(m[:16] for m in matches)}); give more of it")
    return matches[0]


def _on_disk(path) -> int:
    """The file and its write-ahead log."""
    from pathlib import Path

    return sum(part.stat().st_size for part in (Path(path), Path(f"{path}-wal")) if part.exists())


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        import json

        print(json.dumps(report, indent=2))
        return
    if not report["exists"]:
        print(f"no cache file at {report['path']} (nothing cached yet)")
        return
    forgotten = report.get("forgotten")
    if forgotten is not None:
        print(f"forgot {forgotten['entries']} entries" + ("" if forgotten["compacted"] else
              "; the file is not compacted yet (another process has it open): its freed space is reused by "
              "later runs"))
    print(f"{report['path']}: {report['entries']} entries, {report['bytes_on_disk'] / 1e6:.1f} MB on disk")
    if not report["contents"]:
        return
    # plain columns: a fingerprint is printed whole, to be given to --forget-model
    header = ("model fingerprint", "kind", "entries", "MB", "first written", "last written")
    day = lambda t: time.strftime("%Y-%m-%d", time.localtime(t))  # noqa: E731
    rows = [(row["fingerprint"], row["kind"], str(row["entries"]), f"{row['bytes'] / 1e6:.1f}", day(row["first"]),
             day(row["last"])) for row in report["contents"]]
    widths = [max(len(cells[i]) for cells in (header, *rows)) for i in range(len(header))]
    for cells in (header, *rows):
        print("  ".join(cell.rjust(width) if i in (2, 3) else cell.ljust(width)
                        for i, (cell, width) in enumerate(zip(cells, widths))).rstrip())
