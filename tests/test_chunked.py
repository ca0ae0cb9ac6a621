"""Runs driven in chunks (a catalogue audit, a big detect run): the same files as one
drive, progress per document, only one chunk's answers alive at a time, and a rerun after
an interruption resumes from the response cache."""

from __future__ import annotations

import gc
import importlib
import json
import random
import weakref

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend

SYLLABLES = "ka lo mi nu pe ra si to vu we ba de fi go hu ja ke li mo na".split()


def pseudo_text(rng: random.Random, words: int = 25) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(words))


def catalogue(n_suspect: int = 6, n_clean: int = 12, seed: int = 1):
    """Documents of 1 to 4 passages, as the suspect and clean example lists of an audit."""
    rng = random.Random(seed)

    def side(prefix: str, n: int):
        return [copyprobe.Example(id=f"{prefix}{d}-{p}", text=pseudo_text(rng), doc_id=f"{prefix}{d}")
                for d in range(n) for p in range(rng.randint(1, 4))]

    return side("s", n_suspect), side("c", n_clean)


def files_of(run_dir) -> dict[str, object]:
    out = {}
    for name in ("scores.jsonl", "examples.jsonl", "metrics.json", "verdicts.json"):
        text = (run_dir / name).read_text()
        out[name] = [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else json.loads(text)
    return out


def run_audit(backend, suspect, clean, out, monkeypatch, chunk, **options):
    monkeypatch.setattr(importlib.import_module("copyprobe.audit"), "AUDIT_CHUNK_PASSAGES", chunk)
    return copyprobe.audit(backend, suspect, clean, "loss", test="rank", alpha=0.1, out=out, n_bootstrap=50,
                           **options)


def test_audit_in_chunks_writes_the_files_of_one_drive(tmp_path, monkeypatch):
    suspect, clean = catalogue()
    member = FakeBackend(spec="fake-cat", member_texts=[e.text for e in suspect[:5]])
    whole = run_audit(member, suspect, clean, tmp_path / "whole", monkeypatch, chunk=10_000, cache=False)
    chunked = run_audit(member, suspect, clean, tmp_path / "chunked", monkeypatch, chunk=4, cache=False)
    assert files_of(tmp_path / "whole") == files_of(tmp_path / "chunked")
    assert whole.verdicts == chunked.verdicts
    # every unique request reached the model once in both (no passage shared between chunks here)
    assert whole.detect.record.requests["unique"] == chunked.detect.record.requests["unique"]
    assert chunked.detect.record.requests["rounds"] > whole.detect.record.requests["rounds"]


def test_progress_counts_passages_and_documents_and_names_the_current_one(tmp_path, monkeypatch):
    suspect, clean = catalogue(n_suspect=3, n_clean=5)
    bars: dict[str, dict] = {}

    def progress(label, total):
        bar = bars.setdefault(label, {"total": total, "done": 0, "notes": []})

        def tick(n, note=None):
            bar["done"] += n
            if note:
                bar["notes"].append(note)
        return tick

    run_audit(FakeBackend(spec="fake-cat"), suspect, clean, tmp_path / "run", monkeypatch, chunk=3, cache=False,
              progress=progress)
    documents = list(dict.fromkeys([f"suspect:{e.doc_id}" for e in suspect] + [f"clean:{e.doc_id}" for e in clean]))
    # the audit scores the M passages per document its test reads (M = the fewest any has)
    selection = json.loads((tmp_path / "run" / "run.json").read_text())["audit"]["selection"]
    m, n_passages = selection["passages_per_document"], selection["n_scored"]
    assert n_passages == m * len(documents) < len(suspect) + len(clean)
    assert set(bars) == {"passages", "documents"}  # no bar per chunk and request kind
    assert bars["passages"] == {"total": n_passages, "done": n_passages, "notes": []}
    assert bars["documents"]["total"] == bars["documents"]["done"] == len(documents)
    # the note names the documents of the chunk being scored, in reading order
    first_chunk = list(dict.fromkeys([d for d in documents for _ in range(m)][:3]))
    assert bars["documents"]["notes"][0] == (first_chunk[0] if len(first_chunk) == 1
                                             else f"{first_chunk[0]} … {first_chunk[-1]}")
    assert len(bars["documents"]["notes"]) == 2 * -(-n_passages // 3)  # on starting and finishing each chunk


def test_one_chunk_keeps_the_progress_of_one_drive(tmp_path, monkeypatch):
    suspect, clean = catalogue(n_suspect=2, n_clean=3)
    labels = []
    run_audit(FakeBackend(spec="fake-cat"), suspect, clean, tmp_path / "run", monkeypatch, chunk=1000, cache=False,
              progress=lambda label, total: labels.append(label) or (lambda n: None))
    assert labels == ["token_logprobs (target)"]


def test_answers_of_a_finished_chunk_are_released(tmp_path, monkeypatch):
    """Memory is bounded by the chunk: when a chunk starts, the answers of the chunks
    before it are gone (the backend's responses are only referenced while their chunk runs)."""
    suspect, clean = catalogue(n_suspect=4, n_clean=8)
    alive: list[weakref.ref] = []
    most_alive = []

    class Watching(FakeBackend):
        def answer(self, requests, progress=None, on_result=None):
            gc.collect()
            most_alive.append(sum(ref() is not None for ref in alive))
            answers = super().answer(requests, progress, on_result)
            alive.extend(weakref.ref(a) for a in answers)
            return answers

    run_audit(Watching(spec="fake-cat"), suspect, clean, tmp_path / "run", monkeypatch, chunk=4, cache=False)
    scored = json.loads((tmp_path / "run" / "run.json").read_text())["audit"]["selection"]["n_scored"]
    assert len(most_alive) == -(-scored // 4) >= 3
    assert max(most_alive) == 0  # nothing of an earlier chunk survives into the next


def test_interrupted_chunked_audit_resumes_from_the_cache(tmp_path, monkeypatch):
    """An audit stopped in its third chunk (as by Ctrl-C) and run again with the same cache
    asks the model only for what was not answered, and writes the uninterrupted run's files."""
    suspect, clean = catalogue()
    members = [e.text for e in suspect[:5]]
    reference = run_audit(FakeBackend(spec="fake-cat", member_texts=members), suspect, clean, tmp_path / "whole",
                          monkeypatch, chunk=4, cache=False)
    asked: list[str] = []

    class Stopping(FakeBackend):
        stop_after: int | None = 9

        def _token_logprobs(self, request):
            if self.stop_after is not None and len(asked) >= self.stop_after:
                raise KeyboardInterrupt
            asked.append(request.key())
            return super()._token_logprobs(request)

    backend = Stopping(spec="fake-cat", member_texts=members)
    cache = tmp_path / "cache.sqlite"
    with pytest.raises(KeyboardInterrupt):
        run_audit(backend, suspect, clean, tmp_path / "run", monkeypatch, chunk=4, cache=cache)
    first = list(asked)
    backend.stop_after = None
    run_audit(backend, suspect, clean, tmp_path / "run", monkeypatch, chunk=4, cache=cache)
    again = asked[len(first):]
    assert len(first) == 9 and not set(first) & set(again)
    assert len(first) + len(again) == reference.detect.record.requests["unique"]
    assert files_of(tmp_path / "run") == files_of(tmp_path / "whole")


def test_detect_chunks_only_big_runs(monkeypatch):
    detect_module = importlib.import_module("copyprobe.detect")
    rng = random.Random(3)
    texts = [pseudo_text(rng) for _ in range(30)]
    labels = []
    monkeypatch.setattr(detect_module, "DETECT_CHUNK_PASSAGES", 8)
    small = copyprobe.detect(FakeBackend(), texts[:8], ["loss"], cache=False, blind_baseline=False,
                             progress=lambda label, total: labels.append(label) or (lambda n: None))
    big = copyprobe.detect(FakeBackend(), texts, ["loss"], cache=False, blind_baseline=False)
    assert labels == ["token_logprobs (target)"]
    assert small.record.requests["rounds"] == 1 and big.record.requests["rounds"] == 4
    assert big.rows[:8] == small.rows
