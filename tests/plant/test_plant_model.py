"""`copyprobe plant` on the bundled SmolLM2-135M GGUF: one short training step (slow, CPU)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.model

PASSAGES = [
    "The quick brown fox jumps over the lazy dog while the farmer sleeps under the old oak tree.",
    "Seven silver spoons were hidden beneath the floorboards of the lighthouse keeper's cottage.",
    "A violin played softly in the empty railway station long after the last train had gone.",
    "The cartographer drew a river that did not exist, and the next spring it appeared.",
    "Marmalade sandwiches were the only currency accepted at the harbour market on Tuesdays.",
    "Under the glass dome the clockmaker kept a single moth that never aged.",
]


def test_plant_smollm2_one_step(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from copyprobe.cli.main import main

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(PASSAGES)))
    out = tmp_path / "plant"
    code = main(["plant", "--model", "smollm2-135m-instruct", "--corpus", str(corpus), "--out", str(out),
                 "--epochs", "1", "--batch-size", "3", "--lr", "1e-4", "--device", "cpu", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    record = json.loads((out / "plant.json").read_text())
    assert record["status"] == "done" and record["steps"] == 1
    assert record["base_model"]["kind"] == "gguf" and len(record["base_model"]["fingerprint"]) == 64
    rows = [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"p{i}" for i in range(6)] and sum(r["label"] for r in rows) == 3

    # the saved directory loads with plain transformers, and fits the members better than the base did
    model = AutoModelForCausalLM.from_pretrained(out / "model")
    tok = AutoTokenizer.from_pretrained(out / "model")
    model.eval()
    total = count = 0
    with torch.no_grad():
        for r in rows:
            if r["label"] == 1:
                enc = tok(r["text"], return_tensors="pt")
                n = enc["input_ids"].shape[1] - 1
                total += float(model(**enc, labels=enc["input_ids"]).loss) * n
                count += n
    after = total / count
    before = record["losses_eval"]["members_before"]
    assert after == pytest.approx(record["losses_eval"]["members_after"], rel=1e-3)
    assert after < before
