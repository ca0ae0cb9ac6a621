"""Write DE-COP's paraphrases once, with a model stronger than the target, and keep them.

The 0.5B instruct model cannot paraphrase (benchmarks/results/blackbox.md), so DE-COP on it
needs paraphrases written by another model. This script asks one (default the bundled
Qwen2.5-Coder-1.5B-Instruct through llama.cpp) with the DE-COP paper's prompt (Appendix B,
the same text copyprobe.methods.decop sends; passages of ~105 words are over the paper's
128-token line, so B.2 "Rewrite this entire text ... three times"), at the paper's
temperature 0.1 with a seed, and checks each answer before keeping it:

* parseable into Example B/C/D, none empty, none the original, all distinct
  (copyprobe.methods.decop.parse_paraphrases, what DE-COP itself requires);
* not a near copy: word-sequence similarity (difflib ratio over lower-cased words) to the
  original and to each other paraphrase below ``--max-similarity`` (default 0.9);
* meaning kept, by proxy: at least ``--min-recall`` (default 0.3) of the original's content
  words (4+ letters) appear in the paraphrase, and its length is 0.6-1.6x the original's
  words (a paraphrase that drops half the passage, or pads it, fails).

An answer that fails is asked again with the next seed (up to ``--attempts``); every
attempt and its reason is logged to ``--log`` (JSONL, resumable: a passage already there
is not asked again). ``--build`` writes the BookTection-layout file (``ID``, ``Example_A``
.. ``Example_D``, ``Answer``, ``Label``, ``id``) that ``copyprobe detect --methods decop``
reads with no paraphrasing model.

    OMP_NUM_THREADS=1 python benchmarks/make_decop_paraphrases.py --plant runs/plant_q05 \\
        --per-doc 2 --log runs/paraphrases.jsonl
    python benchmarks/make_decop_paraphrases.py --plant runs/plant_q05 --per-doc 2 \\
        --log runs/paraphrases.jsonl --build benchmarks/data/one_voice/decop_paraphrases.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.backends.base import GenerateRequest  # noqa: E402
from copyprobe.methods.decop import (  # noqa: E402
    LETTERS, PARAPHRASE_PROMPT_ONE, content_recall, estimate_tokens, paraphrase_prompt, parse_paraphrases,
    word_similarity, words,
)

seq_similarity = word_similarity  # the similarity DE-COP's one_per_request check uses


def check(original: str, output: str, max_similarity: float, min_recall: float,
          length_bounds: tuple[float, float]) -> tuple[tuple[str, str, str] | None, str, dict]:
    """(paraphrases or None, reason, measurements) of one paraphraser answer."""
    try:
        paras = parse_paraphrases(output, original)
    except ValueError as exc:
        return None, str(exc), {}
    n = len(words(original))
    stats = {
        "similarity_to_original": [round(seq_similarity(original, p), 3) for p in paras],
        "similarity_between": [round(seq_similarity(paras[i], paras[j]), 3) for i, j in ((0, 1), (0, 2), (1, 2))],
        "content_recall": [round(content_recall(original, p), 3) for p in paras],
        "length_ratio": [round(len(words(p)) / n, 3) for p in paras],
    }
    for letter, s in zip("BCD", stats["similarity_to_original"]):
        if s >= max_similarity:
            return None, f"Example {letter} is a near copy of the original (similarity {s})", stats
    if max(stats["similarity_between"]) >= max_similarity:
        return None, f"two paraphrases are near copies of each other ({max(stats['similarity_between'])})", stats
    for letter, r in zip("BCD", stats["content_recall"]):
        if r < min_recall:
            return None, f"Example {letter} keeps {r:.2f} of the original's content words", stats
    for letter, r in zip("BCD", stats["length_ratio"]):
        if not length_bounds[0] <= r <= length_bounds[1]:
            return None, f"Example {letter} has {r:.2f}x the original's length", stats
    return paras, "", stats


def chosen_rows(plant: Path, per_doc: int) -> list[dict]:
    """``per_doc`` passages of every document (its 2nd, then its 1st, then its 3rd: the 2nd is
    the middle of a letter, away from the salutation all letters share), ordered by that rank
    first so that an interrupted run has one passage of every document before two of any."""
    rows = [json.loads(line) for line in (plant / "data.jsonl").read_text().splitlines() if line.strip()]
    by_doc: dict[str, list[dict]] = {}
    for row in rows:
        by_doc.setdefault(row["doc_id"], []).append(row)
    order = (1, 0, 2)[:per_doc]
    return [docs[k] for k in order for docs in by_doc.values() if k < len(docs)]


def load_log(path: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                done[rec["id"]] = rec
    return done



def check_one(original: str, paraphrase: str, others: list[str], max_similarity: float, min_recall: float,
              length_bounds: tuple[float, float]) -> tuple[str, dict]:
    """Reason to reject one paraphrase ("" to keep it) and its measurements."""
    text = re.sub(r"\s+", " ", paraphrase).strip().strip('"').strip()
    if not text:
        return "empty", {}
    stats = {"similarity_to_original": round(seq_similarity(original, text), 3),
             "similarity_to_kept": [round(seq_similarity(o, text), 3) for o in others],
             "content_recall": round(content_recall(original, text), 3),
             "length_ratio": round(len(words(text)) / len(words(original)), 3)}
    if stats["similarity_to_original"] >= max_similarity:
        return f"a near copy of the original (similarity {stats['similarity_to_original']})", stats
    if others and max(stats["similarity_to_kept"]) >= max_similarity:
        return f"a near copy of another paraphrase ({max(stats['similarity_to_kept'])})", stats
    if stats["content_recall"] < min_recall:
        return f"keeps {stats['content_recall']:.2f} of the original's content words", stats
    if not length_bounds[0] <= stats["length_ratio"] <= length_bounds[1]:
        return f"{stats['length_ratio']:.2f}x the original's length", stats
    return "", stats


def generate(args) -> None:
    from copyprobe.backends.specs import load_backend

    rows = chosen_rows(Path(args.plant), args.per_doc)[:args.limit or None]
    log = Path(args.log)
    done = load_log(log)
    todo = [r for r in rows if r["id"] not in done]
    print(f"{len(rows)} passages, {len(done)} already in {log}, {len(todo)} to write", flush=True)
    if not todo:
        return
    backend = load_backend(args.model, n_threads=args.threads, max_length=2048)
    bounds = (args.min_length, args.max_length_ratio)
    for row in todo:
        original = row["text"]
        attempts: list[dict] = []
        kept: list[str] | None = None
        if args.prompt == "paper3":
            for attempt in range(args.attempts):
                request = GenerateRequest(messages=(("user", paraphrase_prompt(original)),),
                                          max_tokens=4 * estimate_tokens(original) + 64,
                                          temperature=args.temperature, seed=args.seed + attempt)
                start = time.time()
                (gen,) = backend.answer([request])
                paras, reason, stats = check(original, gen.text, args.max_similarity, args.min_recall, bounds)
                attempts.append({"seed": args.seed + attempt, "seconds": round(time.time() - start, 1),
                                 "output": gen.text, "rejected": reason or None, "checks": stats})
                print(f"{row['id']} attempt {attempt + 1}: {'ok' if paras else 'REJECTED: ' + reason}", flush=True)
                if paras:
                    kept = list(paras)
                    break
        else:
            kept = []
            seed = args.seed
            while len(kept) < 3 and len(attempts) < 3 + args.attempts:
                request = GenerateRequest(messages=(("user", PARAPHRASE_PROMPT_ONE.format(ref_text=original)),),
                                          max_tokens=int(1.8 * estimate_tokens(original)),
                                          temperature=args.temperature, seed=seed)
                seed += 1
                start = time.time()
                (gen,) = backend.answer([request])
                reason, stats = check_one(original, gen.text, kept, args.max_similarity, args.min_recall, bounds)
                attempts.append({"seed": request.seed, "seconds": round(time.time() - start, 1), "output": gen.text,
                                 "rejected": reason or None, "checks": stats})
                print(f"{row['id']} request {len(attempts)}: {attempts[-1]['seconds']:.0f}s "
                      f"{'ok' if not reason else 'REJECTED: ' + reason}", flush=True)
                if not reason:
                    kept.append(re.sub(r"\s+", " ", gen.text).strip().strip('"').strip())
            kept = kept if len(kept) == 3 else None
        record = {"id": row["id"], "doc_id": row["doc_id"], "label": row["label"], "text": original,
                  "paraphrases": kept, "attempts": attempts, "model": args.model, "prompt": args.prompt,
                  "temperature": args.temperature}
        with log.open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def build(args) -> None:
    rows = chosen_rows(Path(args.plant), args.per_doc)
    done = load_log(Path(args.log))
    rng = random.Random(args.seed)
    out_rows, missing = [], []
    for row in rows:
        rec = done.get(row["id"])
        if not rec or not rec["paraphrases"]:
            missing.append(row["id"])
            continue
        # the verbatim option at a seeded letter, as BookTection varies it (DE-COP scores all
        # 24 orderings anyway, so the position cannot help)
        answer = rng.randrange(4)
        paras = iter(rec["paraphrases"])
        options = {f"Example_{l}": (rec["text"] if i == answer else next(paras)) for i, l in enumerate(LETTERS)}
        out_rows.append({"id": row["id"], "ID": row["doc_id"], **options, "Answer": LETTERS[answer],
                         "Label": row["label"]})
    with open(args.build, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "ID", *[f"Example_{l}" for l in LETTERS], "Answer", "Label"])
        writer.writeheader()
        writer.writerows(out_rows)
    n_attempts = sum(len(done[r["id"]]["attempts"]) for r in rows if r["id"] in done)
    reasons: dict[str, int] = {}
    for r in rows:
        for a in done.get(r["id"], {}).get("attempts", []):
            if a["rejected"]:
                key = re.sub(r"[\d.]+", "#", a["rejected"])
                reasons[key] = reasons.get(key, 0) + 1
    summary = {"passages": len(rows), "written": len(out_rows), "missing": missing, "requests": n_attempts,
               "rejected": sum(reasons.values()), "reasons": reasons,
               "seconds": round(sum(a["seconds"] for r in rows for a in done.get(r["id"], {}).get("attempts", [])))}
    print(json.dumps(summary, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plant", required=True, help="plant directory (its data.jsonl gives the passages)")
    p.add_argument("--per-doc", type=int, default=2, help="passages per document (the first N)")
    p.add_argument("--model", default="llamacpp:qwen2.5-coder-1.5b-instruct")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompt", choices=("one", "paper3"), default="one",
                   help="one: one rewrite per request (default); paper3: the paper's three-in-one prompt")
    p.add_argument("--temperature", type=float, default=0.7, help="paper: 0.1 (for its three-in-one prompt)")
    p.add_argument("--limit", type=int, default=0, help="only the first N passages (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attempts", type=int, default=4, help="extra requests allowed after rejections")
    p.add_argument("--max-similarity", type=float, default=0.9)
    p.add_argument("--min-recall", type=float, default=0.3)
    p.add_argument("--min-length", type=float, default=0.6)
    p.add_argument("--max-length-ratio", type=float, default=1.6)
    p.add_argument("--log", required=True, help="JSONL of every attempt (resumable)")
    p.add_argument("--build", help="write the BookTection-layout CSV from the log instead of generating")
    args = p.parse_args()
    build(args) if args.build else generate(args)


if __name__ == "__main__":
    main()
