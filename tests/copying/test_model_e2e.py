"""End to end on smollm2-135m-instruct (slow, CPU): all rates on the KJV set, and MemFree
driving the literal rate to zero on the prompt set where the model copies."""

import pytest

from copyprobe.backends.hf import HFBackend
from copyprobe.copying import (
    CopyConfig,
    GenConfig,
    compute_metrics,
    load_copyset,
    run_copying,
)
from copyprobe.copying.fluency import FluencyJudge
from copyprobe.copying.memfree import MemFreeLogitsProcessor

pytestmark = pytest.mark.model


def _ngrams(ids, n):
    return {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}


def test_kjv_set_reports_every_rate(smollm2):
    data = load_copyset("kjv")
    # every generated token is a forward pass of the whole model (~0.1 s here): short budgets
    cfg = CopyConfig(literal_max_tokens=40, nonliteral_max_tokens=64, qa_max_tokens=24, limit=2,
                     fluency_judge=FluencyJudge(None, max_tokens=48))
    rows, metrics = run_copying(data, lambda spec: smollm2, cfg)
    assert len(rows) == 6
    assert metrics == compute_metrics(rows, cfg)
    lit, nl, qa = metrics["literal"], metrics["nonliteral"], metrics["qa"]
    assert lit["n"] + lit["n_errors"] == 2 and 0 <= lit["rate"] <= 1 and lit["mean_lcs"] >= 0
    assert nl["n"] + nl["n_errors"] == 2
    assert nl["character_rate"] is not None and 0 <= nl["character_rate"] <= 1
    assert nl["event_rate"] is not None  # the embedding judge always decides
    assert qa["n"] + qa["n_errors"] == 2 and 0 <= qa["f1"] <= 1
    for block in (lit, nl):  # fluency: a score or an unparseable count for every scored output
        assert block["fluency"]["n"] + block["fluency"]["n_unparseable"] == block["n"]
    for r in rows:
        if r["task"] == "literal" and r["error"] is None:
            assert 0 <= r["rouge_l"] <= 1 and r["output"]


def test_memfree_drives_the_literal_rate_to_zero(smollm2):
    data = load_copyset("kjv_incontext")
    # repetition penalty 1.0: with 1.1 the penalty itself keeps this small model from
    # repeating the passage shown in the prompt
    cfg = CopyConfig(tasks=("literal",), gen=GenConfig(repetition_penalty=1.0), literal_max_tokens=70)
    _, plain = run_copying(data, lambda spec: smollm2, cfg)
    assert plain["literal"]["rate"] >= 1 / 3  # the model copies here (measured: 3 of 6)

    proc = MemFreeLogitsProcessor.deferred(data.protected_corpus(), n=10)
    filtered = HFBackend(smollm2.model, smollm2.tokenizer, spec="smollm2-memfree", device="cpu", dtype="float32",
                         batch_size=6, logits_processors=[proc], fingerprint_extra=proc.fingerprint())
    proc.bind(smollm2.tokenizer)
    rows_mf, mf = run_copying(data, lambda spec: filtered, cfg)
    assert mf["literal"]["rate"] == 0.0
    assert mf["literal"]["mean_rouge_l"] < plain["literal"]["mean_rouge_l"]
    assert proc.n_rejections > 0
    protected = set().union(*[_ngrams(smollm2.tokenizer(t, add_special_tokens=False)["input_ids"], 10)
                              for t in data.protected_corpus()])
    for r in rows_mf:  # re-tokenized outputs hold no protected 10-gram
        ids = smollm2.tokenizer(r["output"], add_special_tokens=False)["input_ids"]
        assert not (_ngrams(ids, 10) & protected), r["id"]
