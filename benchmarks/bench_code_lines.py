"""Is code never found because the audit reads it as prose? The real-exposure table's `code`
kind (benchmarks/bench_audit_real.py) reads Python standard-library modules as a user's `.py`
renamed `.txt` is read: the passage cutter joins the lines of a paragraph with spaces, so
indentation and line breaks are not what the models trained on. No score found any module
on any bundled model there. This audits the same ten modules against the same 17 clean
modules twice: cut as the audit cuts text (``joined``), and cut at line ends with every line
kept as written (``lines``: whole lines while a passage stays within the word limit), the
same passages evenly spaced through each file in both (3 a document, as the table reads).

    python benchmarks/bench_code_lines.py --model qwen2.5-coder-0.5b-instruct \\
        --out benchmarks/results/code_lines_qwen2.5-coder-0.5b-instruct.json

Prints, per cut, the audit's summary, each module's rank among the 18 documents and p.
The ``lines`` cut is how `copyprobe audit` now reads a .py file
(:func:`copyprobe.data.passages.cut_code`); the results in benchmarks/results/code_lines.md
were measured with this benchmark's own cutter, which gave the same passages of all 27
files at 16, 64 and 128 words before the product's replaced it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_audit_real as real  # noqa: E402

PASSAGES_PER_DOCUMENT = 3


def cut_joined(path: Path, passage_words: int) -> list[str]:
    """As `copyprobe audit` cuts the file renamed .txt (the real-exposure table's reading)."""
    from copyprobe.data.books import book_paragraphs
    from copyprobe.data.passages import cut_passages

    return cut_passages(book_paragraphs(path.read_bytes(), path.stem + ".txt"), passage_words)


def documents(paths: list[Path], how: str, passage_words: int) -> list:
    from copyprobe.data.example import Example
    from copyprobe.data.passages import document_passages
    from copyprobe.evaluation.verdicts import evenly_spaced

    examples = []
    for path in paths:
        passages = (document_passages(path.read_bytes(), str(path), passage_words) if how == "lines"
                    else cut_joined(path, passage_words))
        for j in evenly_spaced(len(passages), PASSAGES_PER_DOCUMENT):
            examples.append(Example(id=f"{path.stem}:{j:04d}", text=passages[j], doc_id=path.stem))
    return examples


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--methods", default="loss", help="comma-separated audit methods (default: loss)")
    parser.add_argument("--passage-words", type=int, default=64)
    parser.add_argument("--cache", default="runs/code_lines.sqlite")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    import copyprobe

    suspects = [real.stdlib_dir() / f"{name}.py" for name in real.STDLIB_MODULES]
    clean = real.clean_documents("code")
    result = {"model": args.model, "passage_words": args.passage_words,
              "passages_per_document": PASSAGES_PER_DOCUMENT, "suspects": [p.stem for p in suspects],
              "clean": [p.stem for p in clean], "runs": []}
    for how in ("joined", "lines"):
        suspect_docs, clean_docs = documents(suspects, how, args.passage_words), documents(clean, how,
                                                                                           args.passage_words)
        for method in [m for m in args.methods.split(",") if m]:
            started = time.perf_counter()
            audit = copyprobe.audit(args.model, suspect_docs, clean_docs, method=method, cache=args.cache)
            verdicts = audit.verdicts
            docs = [{"doc": d["doc_id"].removeprefix("suspect:"), "verdict": d["verdict"], "rank": d.get("rank"),
                     "of": d.get("of"), "p": d.get("p")} for d in verdicts["documents"]]
            run = {"cut": how, "method": method, "summary": verdicts["summary"], "documents": docs,
                   "found": sum(d["verdict"] == "evidence" for d in docs),
                   "median_rank": statistics.median([d["rank"] for d in docs if d["rank"] is not None] or [None]),
                   "seconds": round(time.perf_counter() - started, 1)}
            result["runs"].append(run)
            print(f"{how:6} {method:10} found {run['found']}/{len(docs)}, median rank {run['median_rank']} of "
                  f"{docs[0]['of']}: {verdicts['summary']}")
            for d in docs:
                p = "-" if d["p"] is None else f"{d['p']:.3g}"
                print(f"    {d['doc']:10} {d['verdict']:12} rank {d['rank']} of {d['of']}, p = {p}")
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")  # after each audit: a crash keeps the rest
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
