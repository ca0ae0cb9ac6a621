"""The planted benchmark's subset and table helpers (the benchmark itself is too slow for tests)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_planted", ROOT / "benchmarks" / "bench_planted.py")
bench_planted = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_planted)


def rows(n_members, n_others):
    return [{"id": f"m{i}", "text": "x", "label": 1} for i in range(n_members)] + \
           [{"id": f"n{i}", "text": "y", "label": 0} for i in range(n_others)]


def test_subset_is_label_balanced_seeded_and_refuses_too_few(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(10, 12)))
    first = bench_planted.write_subset(data, tmp_path / "a.jsonl", 7, seed=3)
    picked = [json.loads(line) for line in first.read_text().splitlines()]
    assert [r["label"] for r in picked].count(1) == 3 and len(picked) == 7
    assert len({r["id"] for r in picked}) == 7
    again = bench_planted.write_subset(data, tmp_path / "b.jsonl", 7, seed=3)
    assert again.read_text() == first.read_text()
    other = bench_planted.write_subset(data, tmp_path / "c.jsonl", 7, seed=4)
    assert other.read_text() != first.read_text()
    with pytest.raises(SystemExit, match="needs 11 members"):
        bench_planted.write_subset(data, tmp_path / "d.jsonl", 22, seed=0)


def test_table_shows_each_methods_passage_count_and_merged_commands(tmp_path):
    report = {
        "created": "now", "machine": "m", "command": ["python", "bench", "--merge"],
        "earlier_commands": [["python", "bench", "first"]], "bootstrap": 10, "complete": True,
        "corpus": {"n_passages": 20, "passage_tokens": 128, "description": "d"}, "plant": {}, "notes": ["a note"],
        "plants": [{"epochs": 3, "base_model": "b", "model": "hf:x", "n_members": 10, "n_nonmembers": 10,
                    "training": "t", "methods": {
                        "loss": {"auc": 0.9, "auc_low": 0.8, "auc_high": 1.0, "seconds": 1.0, "model_calls": 20},
                        "decop": {"auc": 0.6, "passages": 8, "seconds": 9.0, "model_calls": 8},
                        "veilprobe": {"error": "too slow"}}}],
    }
    out = tmp_path / "planted.md"
    bench_planted.write_markdown(out, report)
    text = out.read_text()
    assert "| loss | 20 | 0.900 [0.800, 1.000]" in text
    assert "| decop | 8 | 0.600" in text
    assert "| veilprobe | | not run: too slow" in text
    assert "earlier, merged: `python bench first`" in text and "- a note" in text
