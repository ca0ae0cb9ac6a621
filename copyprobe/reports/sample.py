"""A small synthetic run directory (no model): for tests and to preview the report.

``write_sample_run(path)`` writes run.json, examples.jsonl, scores.jsonl, metrics.json
(and optionally verdicts.json, computed by the audit's procedure) as docs/run-record.md and docs/report.md describe them.
Scores are drawn so that members score higher; one black-box method records prompts and
answers in ``details``; some rows fail with a recorded reason; one document's id and text
hold HTML, to check that the report escapes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

HOSTILE_DOC = '<script>alert("doc")</script>'
HOSTILE_TEXT = ('Ships sailed <img src="https://example.com/track.png"> at dawn; '
                '<script>fetch("https://example.com/x")</script> & more.')
WORDS = ("harbour market letter river station garden church hill house bridge lamp road "
         "winter morning ship clerk widow farmer engineer teacher").split()


def _dump(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _dump_lines(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


METHODS = {"loss": {}, "zlib": {}, "prefix_probe": {"similarity": "rouge_l", "threshold": 0.5}}


def write_sample_run(
    path: str | Path,
    *,
    labels: bool = True,
    failures: bool = True,
    verdicts: bool = False,
    verdict_alpha: float = 0.01,
    blind_auc: float | None = 0.56,
    n_docs: int = 12,
    passages_per_doc: int = 4,
    seed: int = 0,
) -> Path:
    """Write a synthetic run directory at ``path`` and return it."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    examples, scores = _sample_rows(np.random.default_rng(seed), n_docs, passages_per_doc, labels, failures)
    notes = ["2 rows with empty or no text were skipped (the first: line 4)"]
    metrics = _sample_metrics(scores, blind_auc, seed) if labels else None
    if metrics is not None:
        notes.extend(metrics["notes"])
    _dump_lines(out / "examples.jsonl", examples)
    _dump_lines(out / "scores.jsonl", scores)
    if metrics is not None:
        _dump(out / "metrics.json", metrics)
    _dump(out / "run.json", _sample_record(scores, notes, seed))
    if verdicts:
        texts = {e["id"]: e["text"] for e in examples}
        _dump(out / "verdicts.json", sample_verdicts(scores, "loss", texts, alpha=verdict_alpha))
    return out


def _sample_rows(rng: np.random.Generator, n_docs: int, passages_per_doc: int, labels: bool,
                 failures: bool) -> tuple[list[dict], list[dict]]:
    """(examples.jsonl rows, scores.jsonl rows): the first half of the documents are members
    and score higher; prefix_probe records its prompt and answer; some of its rows fail."""
    examples, scores = [], []
    for d in range(n_docs):
        member = int(d < n_docs // 2)
        doc_id = HOSTILE_DOC if d == 0 else f"doc-{d:02d}"
        for p in range(passages_per_doc):
            pid = f"{d:02d}-{p}"
            words = rng.choice(WORDS, size=24)
            text = HOSTILE_TEXT if (d == 0 and p == 0) else " ".join(words).capitalize() + "."
            example = {"id": pid, "text": text, "doc_id": doc_id}
            row: dict[str, Any] = {"id": pid, "doc_id": doc_id}
            if labels:
                example["label"] = member
                row["label"] = member
            examples.append(example)
            row["loss"] = float(rng.normal(1.2 if member else 0.0, 1.0))
            row["zlib"] = float(rng.normal(0.5 if member else 0.0, 1.0))
            prefix, suffix = " ".join(words[:12]), " ".join(words[12:])
            completion = suffix if member and rng.random() < 0.5 else " ".join(rng.choice(WORDS, size=12))
            overlap = sum(a == b for a, b in zip(suffix.split(), completion.split())) / 12
            row["prefix_probe"] = overlap
            row["details"] = {"prefix_probe": {"prefix": prefix, "suffix": suffix,
                                               "completion": completion, "rouge_l": overlap,
                                               "match": overlap > 0.5}}
            if d == 0 and p == 0:
                row["details"]["prefix_probe"]["prefix"] = HOSTILE_TEXT
            if failures and p == 1 and d % 5 == 1:
                row["prefix_probe"] = None
                row.pop("details")
                row["errors"] = {"prefix_probe": "request failed: context length exceeded <b>4096</b>"}
            scores.append(row)
    return examples, scores


def _sample_metrics(scores: list[dict], blind_auc: float | None, seed: int) -> dict[str, Any]:
    """metrics.json by the detect command's own evaluation, with a made-up blind baseline
    of AUC ``blind_auc`` (and its warning, computed as detect computes it)."""
    import pandas as pd

    from copyprobe.evaluation.blind import blind_warning
    from copyprobe.evaluation.metrics import evaluate

    frame = pd.DataFrame([{k: v for k, v in r.items() if k not in ("details", "errors")} for r in scores])
    metrics = evaluate(frame, list(METHODS), n_bootstrap=200, seed=seed)
    if blind_auc is not None:
        best = max(v["auc"] for v in metrics["passage"].values())
        metrics["blind_baseline"] = {
            "auc": blind_auc, "auc_low": max(0.0, blind_auc - 0.12),
            "auc_high": min(1.0, blind_auc + 0.12), "n": len(scores),
            "n_members": sum(r["label"] for r in scores),
            "n_nonmembers": sum(1 - r["label"] for r in scores), "folds": 5, "grouped": True,
            "features": "character 2-4-gram TF-IDF + length and date-like tokens; logistic regression",
            "components": {"char_ngrams": blind_auc, "length_date": 0.5},
            "warning": blind_warning(blind_auc, best),
        }
        if metrics["blind_baseline"]["warning"]:
            metrics["notes"].append(metrics["blind_baseline"]["warning"])
    return metrics


def _sample_record(scores: list[dict], notes: list[str], seed: int) -> dict[str, Any]:
    """run.json of a made-up detect run over ``scores``."""
    return {
        "copyprobe_version": "0.1.0",
        "command": ["copyprobe", "detect", "--model", "fake", "--data", "sample.jsonl"],
        "created": "2026-01-01T00:00:00+00:00",
        "model": {"spec": "fake:sample", "fingerprint": "0123abcd", "backend": "fake"},
        "models": {},
        "methods": METHODS,
        "data": {"path": "sample.jsonl", "sha256": "ab" * 32, "n_rows": len(scores) + 2,
                 "n_skipped": 2, "columns": ["id", "text", "doc_id", "label"]},
        "versions": {"python": "3.11.7", "numpy": np.__version__},
        "n_passages": len(scores),
        "n_tokens": 24 * len(scores),
        "timings": {"load_s": 0.5, "score_s": 3.25, "total_s": 4.0},
        "cache": {"path": "/tmp/cache.sqlite", "hits": 30, "misses": 66},
        "requests": {"rounds": 2, "total": 144, "unique": 96,
                     "by_model_kind": {"target/logprobs": 48, "target/generate": 48},
                     "tokens_by_model": {"target": 24 * len(scores)}, "failed": []},
        "seed": seed,
        "bootstrap": {"n": 200, "seed": seed},
        "train_ids": {},
        "failures": [{"id": r["id"], "errors": r["errors"]} for r in scores if r.get("errors")],
        "notes": notes,
    }


def sample_verdicts(scores: list[dict], method: str, texts: dict[str, str], alpha: float = 0.01,
                    test: str = "rank") -> dict[str, Any]:
    """verdicts.json (format 2) for a run, by the audit's own procedure
    (:func:`copyprobe.evaluation.verdicts.verdicts`): documents labelled 1 are the
    suspects, documents labelled 0 the clean ones; ``texts`` maps passage ids to texts
    (the style guard reads them)."""
    from copyprobe.evaluation.verdicts import verdicts

    values = {r["id"]: r.get(method) for r in scores}
    report = verdicts(values, {r["id"]: r["doc_id"] for r in scores}, {r["id"]: r.get("label") for r in scores},
                      alpha, texts, test=test, method=method, order=[r["id"] for r in scores])
    return report
