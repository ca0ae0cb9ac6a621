"""Calibrate the embedding event judge's threshold on labelled (event, chunk) pairs.

``python -m copyprobe.copying.calibrate build`` writes ``data/event_calibration.json`` from
the KJV (needs Debian's ``bible-kjv``): for each hand-written event of the KJV stories
(:data:`copyprobe.copying.kjv.STORIES`) the verses that narrate it are annotated below.

* positive: the event and a chunk (at most 128 tokens) made of those verses and their
  neighbours;
* hard negative: the event and a chunk of the same story at least 6 verses away from them;
* easy negatives: the event and two chunks of other stories.

``python -m copyprobe.copying.calibrate [store]`` scores every pair with the judge (``store``
also keeps each similarity in the file, which the unit test uses) and prints, for
a grid of thresholds, precision / recall / F1 / false-positive rate; the chosen threshold
is the one with the best F1 (ties: the higher threshold). The shipped default
(:data:`copyprobe.copying.nonliteral.EMBEDDING_THRESHOLD`) and its numbers are in
``docs/copying.md``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from copyprobe.copying import kjv
from copyprobe.copying.nonliteral import CHUNK_TOKENS, EmbeddingJudge, chunk_text
from copyprobe.errors import DataError

CALIBRATION_PATH = Path(__file__).parent / "data" / "event_calibration.json"

# story index -> (book abbreviation for `bible`, chapter range to draw chunks from, key verses per event)
ANNOTATIONS: dict[int, dict[str, Any]] = {
    0: {"book": "Ge", "chapters": (1, 3), "keys": [
        (1, 1, 1), (1, 3, 4), (2, 7, 7), (2, 8, 8), (2, 16, 17), (2, 21, 22), (3, 1, 5), (3, 6, 7),
        (3, 7, 8), (3, 14, 14), (3, 23, 23), (3, 24, 24)]},
    1: {"book": "Ge", "chapters": (6, 9), "keys": [
        (6, 5, 5), (6, 14, 14), (7, 7, 9), (7, 12, 12), (7, 19, 22), (8, 4, 4), (8, 7, 8), (8, 11, 11),
        (8, 18, 20), (9, 13, 15)]},
    2: {"book": "Ge", "chapters": (37, 45), "keys": [
        (37, 3, 3), (37, 7, 7), (37, 24, 24), (37, 28, 28), (37, 31, 32), (39, 1, 4), (39, 17, 20),
        (40, 12, 13), (41, 25, 27), (41, 41, 41), (42, 3, 3), (45, 3, 5)]},
    3: {"book": "Ex", "chapters": (1, 14), "keys": [
        (1, 22, 22), (2, 3, 3), (2, 10, 10), (2, 12, 15), (3, 2, 4), (5, 1, 1), (7, 20, 20), (12, 29, 29),
        (12, 41, 41), (14, 21, 21), (14, 27, 28)]},
    4: {"book": "1Sa", "chapters": (17, 17), "keys": [
        (17, 1, 2), (17, 8, 10), (17, 11, 11), (17, 17, 18), (17, 32, 32), (17, 38, 39), (17, 40, 40),
        (17, 49, 49), (17, 51, 51), (17, 52, 52)]},
    5: {"book": "Ge", "chapters": (22, 22), "keys": [
        (22, 1, 2), (22, 3, 3), (22, 4, 4), (22, 6, 6), (22, 7, 7), (22, 9, 9), (22, 11, 12), (22, 13, 13),
        (22, 13, 13), (22, 17, 17)]},
}


def _chapter_verses(book: str, chapter: int) -> list[str]:
    """The verses of one chapter, in order (from the verse-numbered `bible` listing)."""
    exe = shutil.which("bible")
    if exe is None:
        raise DataError("the `bible` command is missing: apt-get install bible-kjv")
    raw = subprocess.run([exe, "-f", f"{book}{chapter}:1-200"], capture_output=True, text=True, check=False).stdout
    out = []
    for line in raw.splitlines():
        m = re.match(r"^\S+?(\d+):(\d+)\s+(.*)$", line.strip())
        if m and int(m.group(1)) == chapter:
            out.append(m.group(3).strip())
    if not out:
        raise DataError(f"no verses for {book}{chapter}")
    return out


def _window(verses: list[str], first: int, last: int, max_tokens: int = CHUNK_TOKENS) -> str:
    """Verses first..last (1-based) plus neighbours while the chunk stays within max_tokens."""
    lo, hi = first - 1, last
    text = " ".join(verses[lo:hi])
    while True:
        grown = False
        for cand in ((lo - 1, hi), (lo, hi + 1)):
            if 0 <= cand[0] and cand[1] <= len(verses):
                t = " ".join(verses[cand[0] : cand[1]])
                if len(chunk_text(t, 10**6)[0].split()) <= max_tokens * 0.75:
                    lo, hi, text, grown = cand[0], cand[1], t, True
        if not grown:
            break
    return chunk_text(text, max_tokens)[0]


def build(seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    story_verses: dict[int, dict[int, list[str]]] = {}
    for s, ann in ANNOTATIONS.items():
        a, b = ann["chapters"]
        story_verses[s] = {c: _chapter_verses(ann["book"], c) for c in range(a, b + 1)}
    pairs = []
    for s, ann in ANNOTATIONS.items():
        events = kjv.STORIES[s]["events"]
        for event, (ch, v1, v2) in zip(events, ann["keys"]):
            vs = story_verses[s][ch]
            pairs.append({"event": event, "chunk": _window(vs, v1, v2), "label": 1, "kind": "positive"})
            far = [v for v in range(1, len(vs) + 1) if v < v1 - 6 or v > v2 + 6]
            if far:
                v = rng.choice(far)
                pairs.append({"event": event, "chunk": _window(vs, v, v), "label": 0, "kind": "hard"})
            others = [o for o in ANNOTATIONS if o != s]
            for o in rng.sample(others, 2):
                c = rng.choice(list(story_verses[o]))
                ovs = story_verses[o][c]
                v = rng.randint(1, len(ovs))
                pairs.append({"event": event, "chunk": _window(ovs, v, v), "label": 0, "kind": "easy"})
    return pairs


def evaluate(pairs: list[dict[str, Any]], judge: EmbeddingJudge | None = None) -> dict[str, Any]:
    """Score every pair with the judge (the embedding model) and pick the threshold."""
    judge = judge or EmbeddingJudge()
    return choose_threshold(judge.pair_similarities([(p["event"], p["chunk"]) for p in pairs]),
                            [p["label"] for p in pairs])


def choose_threshold(scores: list[float], labels: list[int]) -> dict[str, Any]:
    """Precision / recall / F1 / FPR over a threshold grid; best F1 (ties: higher threshold)."""
    grid = [round(0.20 + 0.01 * i, 2) for i in range(61)]
    table = []
    for t in grid:
        tp = sum(1 for s, y in zip(scores, labels) if s >= t and y == 1)
        fp = sum(1 for s, y in zip(scores, labels) if s >= t and y == 0)
        fn = sum(1 for s, y in zip(scores, labels) if s < t and y == 1)
        tn = sum(1 for s, y in zip(scores, labels) if s < t and y == 0)
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        table.append({"threshold": t, "precision": prec, "recall": rec, "f1": f1, "fpr": fp / (fp + tn) if fp + tn else 0.0})
    best = max(table, key=lambda r: (round(r["f1"], 6), r["threshold"]))
    return {"n_pairs": len(scores), "n_positive": sum(labels), "best": best, "table": table, "scores": scores}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["build"]:
        pairs = build()
        CALIBRATION_PATH.write_text(json.dumps(pairs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{CALIBRATION_PATH}: {len(pairs)} pairs")
        return
    pairs = json.loads(CALIBRATION_PATH.read_text(encoding="utf-8"))
    result = evaluate(pairs)
    if argv[:1] == ["store"]:
        # keep each pair's similarity beside it: the unit test then checks the threshold
        # without embedding 250 pairs, and a sample of them against the live model
        for pair, score in zip(pairs, result["scores"]):
            pair["similarity"] = round(float(score), 6)
        CALIBRATION_PATH.write_text(json.dumps(pairs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{CALIBRATION_PATH}: similarities of {len(pairs)} pairs stored")
    for row in result["table"]:
        print(f"{row['threshold']:.2f}  P={row['precision']:.3f} R={row['recall']:.3f} F1={row['f1']:.3f} FPR={row['fpr']:.3f}")
    print("best:", result["best"], "pairs:", result["n_pairs"], "positives:", result["n_positive"])


if __name__ == "__main__":
    main()
