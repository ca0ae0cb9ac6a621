"""What a book-length audit costs (issue 34, item 4): a ~95,000-word book against 6 clean
books, on CPU with SmolLM2: wall time, CPU time, peak memory, the passages scored and the
passages the test reads.

Documents (KJV, Debian ``bible-kjv``, public domain; written offline by ``kjv_books.py``):
the suspect book is Genesis + Exodus + Leviticus in one file (about 95,000 words); the
clean books are Ruth, Esther, Jonah, Ecclesiastes, the Song of Solomon and Lamentations
(1,300 to 5,800 words each). The model has surely seen the KJV: the verdict is not the
point, the cost is.

"Passages the test reads" come from verdicts.json: ``test.passages_per_document`` (M, the
passages per document the test uses) and each document's ``n_used`` of its ``n_passages``.

Each run adds a row to ``--results`` (JSON list, never overwritten) and a line to the
table in ``--table`` (markdown). ``--code`` is the source tree to run (default this
checkout; a "before" tree: ``git archive COMMIT | tar -x -C /tmp/before``); arguments after
``--`` go to ``copyprobe audit`` as they are (e.g. a new option that sets how many
passages an audit scores).

    python benchmarks/bench_audit_cost.py --label before --code /tmp/before --method loss
    python benchmarks/bench_audit_cost.py --label before --code /tmp/before --method auto
    python benchmarks/bench_audit_cost.py --label after --method auto -- --some-new-option 8
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kjv_books import verses, write_document  # noqa: E402
from timed_cli import append_row, code_version, run_timed  # noqa: E402

SUSPECT = ("genesis-exodus-leviticus", [("Ge", 50), ("Ex", 40), ("Le", 27)])
CLEAN = [("ruth", "Ru", 4), ("esther", "Es", 10), ("jonah", "Jon", 4), ("ecclesiastes", "Ec", 12),
         ("song-of-solomon", "So", 8), ("lamentations", "La", 5)]


def write_books(root: Path) -> dict[str, int]:
    """The suspect book and the clean books as text files; words per file."""
    words = {}
    paragraphs = [v for book, n in SUSPECT[1] for _, text in sorted(verses(book, 1, n).items()) for v in text]
    words[SUSPECT[0]] = write_document(root / "suspect" / f"{SUSPECT[0]}.txt", paragraphs)
    for name, book, n in CLEAN:
        paragraphs = [v for _, text in sorted(verses(book, 1, n).items()) for v in text]
        words[name] = write_document(root / "clean" / f"{name}.txt", paragraphs)
    return words


def table_line(row: dict) -> str:
    test = row.get("test") or {}
    run = row["runs"][-1]
    return (f"| {row['label']} | {row['code']} | {row.get('method_used') or row['method']} | {run['wall_s']} | "
            f"{run['user_s']} | {run['max_rss_mb']} | {row.get('passages')} | {test.get('passages_per_document')} | "
            f"{row.get('passages_read')} | {row.get('verdict_line', '')} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True, help="name of this row (before, after, ...)")
    parser.add_argument("--code", type=Path, default=HERE.parent, help="source tree to run (PYTHONPATH)")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--method", default="auto", help="loss, or auto (the reference score, gemma-3-270m)")
    parser.add_argument("--batch-size", default="8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/copyprobe-audit-cost"))
    parser.add_argument("--results", type=Path, default=HERE / "results" / "audit_cost.json")
    parser.add_argument("--table", type=Path, default=HERE / "results" / "audit_cost.md")
    parser.add_argument("audit_args", nargs="*", help="after --: more arguments for copyprobe audit")
    args = parser.parse_args()

    books = args.work / "books"
    if not (books / "clean").is_dir():
        write_books(books)
    words = {p.stem: len(p.read_text().split()) for p in sorted(books.rglob("*.txt"))}
    run_dir = args.work / f"run-{args.label}-{args.method}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cli_args = ["audit", "--model", args.model, "--suspect", str(books / "suspect"), "--clean",
                str(books / "clean"), "--method", args.method, "--batch-size", args.batch_size,
                "--out", str(run_dir), "--no-progress", "--no-cache", *args.audit_args]
    run = run_timed(args.code, cli_args, threads=args.threads, log=args.work / f"log-{args.label}-{args.method}.txt")
    row = {"label": args.label, "code": code_version(args.code), "method": args.method, "words": words,
           "command": "copyprobe " + " ".join(cli_args), "threads": args.threads}
    if run["exit"] == 0:
        record = json.loads((run_dir / "run.json").read_text())
        verdicts = json.loads((run_dir / "verdicts.json").read_text())
        row["method_used"] = (record.get("audit") or {}).get("method")
        row["passages"] = record.get("n_passages")
        row["tokens"] = record.get("n_tokens")
        row["timings"] = record.get("timings")
        row["requests"] = (record.get("requests") or {}).get("by_model_kind")
        row["test"] = {k: verdicts["test"].get(k) for k in ("name", "passages_per_document", "n_clean_documents")}
        row["documents"] = [{k: d.get(k) for k in ("doc_id", "n_passages", "n_used", "verdict")}
                            for d in verdicts["documents"]]
        # suspect documents' passages used, and M from each clean document
        row["passages_read"] = sum(d["n_used"] for d in row["documents"]) + \
            (verdicts["test"].get("passages_per_document") or 0) * (verdicts["test"].get("n_clean_documents") or 0)
        row["verdict_line"] = run["stdout"].splitlines()[0] if run["stdout"] else ""
    run.pop("stdout")
    row["runs"] = [run]
    append_row(args.results, row)
    if not args.table.exists():
        args.table.write_text("| label | code | method | wall s | CPU user s | peak RSS MB | passages scored | "
                              "M (passages per document the test reads) | passages the test reads | verdict |\n"
                              "|---|---|---|---|---|---|---|---|---|---|\n")
    with args.table.open("a") as table:
        table.write(table_line(row) + "\n")
    print(json.dumps(row, indent=1))
    return 0 if run["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
