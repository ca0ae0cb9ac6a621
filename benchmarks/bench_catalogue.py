"""A catalogue audit (issue 34, item 6): 200 suspect and 200 clean documents in one
``copyprobe audit``, timed with its peak memory; optionally killed part-way and run again
(the same command) to show the resume.

Documents: chapters of the KJV (Debian ``bible-kjv``, public domain), one file per chapter:
the suspect documents are the first ``--suspect-docs`` chapters from Genesis on, the clean
ones the first ``--clean-docs`` chapters from Matthew on (200 = Matthew .. 2 Timothy).
``--max-words`` keeps only each chapter's first verses up to that many words. The model
has surely seen the KJV, so the verdicts say nothing about validity: the run measures
cost. 200 clean documents make the rank test at alpha 0.01 possible (it needs 99).

Each run adds a row to ``--results`` (JSON list) and prints it; ``--label`` names it and
``--code`` is the source tree to run (default: this checkout), so a "before" row can run an
older tree: ``git archive COMMIT | tar -x -C /tmp/before``.

    python benchmarks/bench_catalogue.py --label before --code /tmp/before
    python benchmarks/bench_catalogue.py --label after --compare before
    python benchmarks/bench_catalogue.py --label after-killed --kill-after 600 --compare before
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kjv_books import NEW_TESTAMENT, OLD_TESTAMENT, chapters, write_document  # noqa: E402
from timed_cli import append_row, code_version, cold_cache_dir, run_timed  # noqa: E402


# traced Python memory (MB) when scoring starts and at its peak while drive runs (every
# chunk's drive, or the one drive of older code), printed at exit for timed_cli; python -c
# takes a program of several lines
TRACE_SCORING = """
import atexit, importlib, sys, tracemalloc
tracemalloc.start()
engine = importlib.import_module("copyprobe.engine")
untraced_drive, seen = engine.drive, {}
def traced_drive(*args, **kwargs):
    seen.setdefault("start", tracemalloc.get_traced_memory()[0])
    tracemalloc.reset_peak()
    try:
        return untraced_drive(*args, **kwargs)
    finally:
        seen["peak"] = max(seen.get("peak", 0), tracemalloc.get_traced_memory()[1])
engine.drive = traced_drive
atexit.register(lambda: print(f"BENCH scoring_start_mb {seen.get('start', 0) / 2**20:.1f}", file=sys.stderr))
atexit.register(lambda: print(f"BENCH scoring_peak_mb {seen.get('peak', 0) / 2**20:.1f}", file=sys.stderr))
"""


def write_catalogue(root: Path, n_suspect: int, n_clean: int, max_words: int | None) -> dict[str, int]:
    """One file per chapter under root/suspect and root/clean (rewritten when the settings
    change); the number of documents and words on each side."""
    stamp = root / "settings.json"
    settings = {"suspect": n_suspect, "clean": n_clean, "max_words": max_words}
    if stamp.exists() and json.loads(stamp.read_text()) .get("settings") == settings:
        return json.loads(stamp.read_text())["sizes"]
    shutil.rmtree(root, ignore_errors=True)
    sizes = {}
    for side, books, count in (("suspect", OLD_TESTAMENT, n_suspect), ("clean", NEW_TESTAMENT, n_clean)):
        words = 0
        for name, verses in chapters(books, count):
            words += write_document(root / side / f"{name}.txt", verses, max_words)
        sizes[f"{side}_documents"], sizes[f"{side}_words"] = count, words
    stamp.write_text(json.dumps({"settings": settings, "sizes": sizes}))
    return sizes


def score_differences(a: Path, b: Path, method: str) -> dict[str, float | int]:
    """Largest absolute difference of ``method``'s score between two scores.jsonl files."""
    def read(path: Path) -> dict[str, float | None]:
        return {row["id"]: row.get(method) for row in map(json.loads, path.read_text().splitlines())}

    first, second = read(a), read(b)
    common = [k for k in first if k in second and first[k] is not None and second[k] is not None]
    return {"passages_compared": len(common), "only_in_one": len(set(first) ^ set(second)),
            "max_abs_difference": max((abs(first[k] - second[k]) for k in common), default=0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True, help="name of this row (before, after, ...)")
    parser.add_argument("--code", type=Path, default=HERE.parent, help="source tree to run (PYTHONPATH)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--method", default="loss")
    parser.add_argument("--test", default="rank")
    parser.add_argument("--alpha", default="0.01")
    parser.add_argument("--suspect-docs", type=int, default=200)
    parser.add_argument("--clean-docs", type=int, default=200)
    parser.add_argument("--max-words", type=int, default=None, help="keep each chapter's first N words")
    parser.add_argument("--batch-size", default="8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kill-after", type=float, default=None,
                        help="SIGKILL the run after this many seconds, then run the same command again")
    parser.add_argument("--fake-model", action="store_true",
                        help="replace the model by the model-free FakeBackend (what the run holds, without a model)")
    parser.add_argument("--unchunked", action="store_true",
                        help="drive all passages at once as before chunking (for code that chunks)")
    parser.add_argument("--no-blind", action="store_true",
                        help="skip the blind baseline (its memory, capped at 5,000 passages, hides the scoring's)")
    parser.add_argument("--trace-scoring", action="store_true",
                        help="trace Python allocations: the peak while the model answers (all drive calls), "
                             "and the memory held when scoring starts")
    parser.add_argument("--work", type=Path, default=Path("/tmp/copyprobe-catalogue"))
    parser.add_argument("--compare", help="label of an earlier row whose scores to compare with")
    parser.add_argument("--results", type=Path, default=HERE / "results" / "catalogue.json")
    args = parser.parse_args()

    docs = args.work / f"documents-{args.suspect_docs}-{args.clean_docs}-{args.max_words}"
    sizes = write_catalogue(docs, args.suspect_docs, args.clean_docs, args.max_words)
    run_dir = args.work / f"run-{args.label}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cache = args.work / f"cache-{args.label}.sqlite"
    cache.unlink(missing_ok=True)
    # the response cache is on only where the resume needs it; otherwise every run is cold
    cache_args = ["--cache", str(cache)] if args.kill_after else ["--no-cache"]
    cli_args = ["audit", "--model", args.model, "--suspect", str(docs / "suspect"), "--clean", str(docs / "clean"),
                "--method", args.method, "--test", args.test, "--alpha", args.alpha, "--batch-size", args.batch_size,
                "--out", str(run_dir), "--no-progress", *cache_args]
    prelude = ("import importlib; importlib.import_module('copyprobe.audit').AUDIT_CHUNK_PASSAGES = 10 ** 9; "
               if args.unchunked else "")
    if args.no_blind:  # the command line calls copyprobe.audit.audit, looked up when it runs
        prelude += ("import importlib; module = importlib.import_module('copyprobe.audit'); audit = module.audit; "
                    "module.audit = lambda *a, **k: audit(*a, blind_baseline=False, **k); ")
    if args.trace_scoring:
        prelude += TRACE_SCORING
    runs = []
    cache_dir = cold_cache_dir()  # the rerun after a kill finds what the killed run stored, as a user's would
    if args.kill_after:
        runs.append(run_timed(args.code, cli_args, threads=args.threads, kill_after=args.kill_after,
                              log=args.work / f"log-{args.label}-killed.txt", fake_model=args.fake_model,
                              prelude=prelude, cache_dir=cache_dir))
    runs.append(run_timed(args.code, cli_args, threads=args.threads, log=args.work / f"log-{args.label}.txt",
                          fake_model=args.fake_model, prelude=prelude, cache_dir=cache_dir))
    final = runs[-1]
    row = {"label": args.label, "code": code_version(args.code), "documents": sizes,
           "model": "FakeBackend (no model)" if args.fake_model else args.model,
           "chunks": "off (all passages at once)" if args.unchunked else "as the code does",
           "blind_baseline": not args.no_blind,
           "command": "copyprobe " + " ".join(cli_args), "threads": args.threads}
    if final["exit"] == 0:
        record = json.loads((run_dir / "run.json").read_text())
        verdicts = json.loads((run_dir / "verdicts.json").read_text())
        row["passages"] = record.get("n_passages")
        row["tokens"] = record.get("n_tokens")
        row["timings"] = record.get("timings")
        row["requests"] = record.get("requests", {}).get("by_model_kind")
        row["test"] = {k: verdicts["test"].get(k) for k in ("name", "n_clean_documents", "min_p",
                                                             "passages_per_document")}
        row["verdicts"] = {v: sum(d["verdict"] == v for d in verdicts["documents"])
                           for v in ("evidence", "no evidence", "cannot tell")}
        row["verdict_lines"] = final["stdout"].splitlines()[:2] + \
            [line for line in final["stdout"].splitlines() if line.startswith("as a group")]
        shutil.copy(run_dir / "scores.jsonl", args.work / f"scores-{args.label}.jsonl")
        if args.compare:
            other = args.work / f"scores-{args.compare}.jsonl"
            if other.exists():
                row["compared_with"] = {"label": args.compare,
                                        **score_differences(other, run_dir / "scores.jsonl", args.method)}
    for run in runs:
        run.pop("stdout")
    row["runs"] = runs
    append_row(args.results, row)
    print(json.dumps(row, indent=1))
    return 0 if final["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
