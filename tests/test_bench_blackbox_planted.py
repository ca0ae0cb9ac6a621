"""Helpers of the planted black-box benchmark and of the DE-COP paraphrase writer (the
benchmarks themselves load models and are too slow for tests)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


planted = load("bench_blackbox_planted")
writer = load("make_decop_paraphrases")


def test_metrics_document_auc_is_the_auc_of_document_means():
    rng = np.random.default_rng(0)
    groups = [f"d{i // 2}" for i in range(40)]  # 20 documents of 2 passages
    labels = [1 if int(g[1:]) % 2 else 0 for g in groups]
    values = [float(rng.normal(0.6 * y, 1)) for y in labels]
    out = planted.metrics(labels, values, groups)
    assert out["auc"] == pytest.approx(roc_auc_score(labels, values))
    docs = sorted(set(groups))
    doc_y = [labels[groups.index(d)] for d in docs]
    doc_v = [np.mean([v for v, g in zip(values, groups) if g == d]) for d in docs]
    assert out["doc_auc"] == pytest.approx(roc_auc_score(doc_y, doc_v))
    assert out["n_docs"] == 20 and out["n"] == 40
    assert out["ci_documents"][0] <= out["auc"] <= out["ci_documents"][1]
    assert 0 <= out["tpr_1"] <= out["tpr_5"] <= 1


def test_metrics_with_one_class_give_no_auc():
    out = planted.metrics([1, 1, 1], [0.1, 0.2, 0.3], ["a", "b", "c"])
    assert "auc" not in out and out["n"] == 3


ORIGINAL = ("The wind came through on Tuesday night with no manners at all. I had tied the Tern "
            "to the jetty with every rope I own and two I borrowed from Sundqvist without asking.")
GOOD = ("On Tuesday night the wind blew in rudely. I had fastened the Tern to the jetty using all "
        "my ropes and a pair I took from Sundqvist without his leave.")


def check(paraphrase, kept=()):
    return writer.check_one(ORIGINAL, paraphrase, list(kept), 0.9, 0.3, (0.6, 1.6))[0]


def test_paraphrase_checks_accept_a_rewrite_and_name_each_rejection():
    assert check(GOOD) == ""
    assert check("  ") == "empty"
    assert "near copy of the original" in check(ORIGINAL.replace("Tuesday", "Monday"))
    assert "near copy of another paraphrase" in check(GOOD, kept=[GOOD.replace("rudely", "rough")])
    assert "content words" in check("Something happened at some point, and it was quite bad for everyone involved there.")
    assert "length" in check(GOOD + " " + GOOD)
