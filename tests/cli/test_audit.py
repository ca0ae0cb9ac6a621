"""copyprobe audit: verdict arithmetic against scipy, and the command end to end with a
fake model that knows the suspect documents."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from copyprobe.backends.fake import FakeBackend
from copyprobe.evaluation.verdicts import verdicts
from copyprobe.cli.main import main


def test_verdicts_match_scipy_and_rule():
    clean = [0.1, 0.2, 0.15, 0.3, 0.25, 0.2]
    seen = [0.9, 0.8, 0.95, 0.85]
    unseen = [0.2, 0.1, 0.3, 0.15]
    scores, docs, labels = {}, {}, {}
    for group, doc, values, label in [("c", "clean:c", clean, 0), ("s", "suspect:famous", seen, 1), ("u", "suspect:fresh", unseen, 1)]:
        for i, v in enumerate(values):
            scores[f"{group}{i}"], docs[f"{group}{i}"], labels[f"{group}{i}"] = v, doc, label
    scores["s_fail"], docs["s_fail"], labels["s_fail"] = None, "suspect:famous", 1
    report = verdicts(scores, docs, labels, alpha=0.01)
    rows = {r["doc_id"]: r for r in report["documents"]}
    welch = stats.ttest_ind(seen, clean, equal_var=False, alternative="greater")
    mw = stats.mannwhitneyu(seen, clean, alternative="greater")
    assert rows["famous"]["welch_p"] == pytest.approx(welch.pvalue)
    assert rows["famous"]["mann_whitney_p"] == pytest.approx(mw.pvalue)
    assert rows["famous"]["verdict"] == "seen" and rows["famous"]["n_failed"] == 1
    assert rows["famous"]["score"] == pytest.approx(sum(seen) / 4)
    assert rows["fresh"]["verdict"] == "not detected"
    mean = sum(clean) / 6
    assert report["baseline"]["mean"] == pytest.approx(mean)
    assert report["baseline"]["sd"] == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in clean) / 5))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_audit_command_end_to_end(tmp_path, monkeypatch, capsys):
    famous = [" ".join(f"fam{d}w{i}" for i in range(12)) + f" p{p}" for d in range(2) for p in range(4)]
    suspect = [{"id": f"s{i}", "text": t, "doc_id": f"famous{i // 4}"} for i, t in enumerate(famous)]
    fresh = [{"id": "f0", "text": " ".join(f"new{i}" for i in range(13)), "doc_id": "fresh"}] + [
        {"id": f"f{k}", "text": " ".join(f"new{k}x{i}" for i in range(13)), "doc_id": "fresh"} for k in range(1, 4)
    ]
    suspect += fresh
    clean = [{"id": f"c{k}", "text": " ".join(f"clean{k}x{i}" for i in range(13)), "doc_id": f"clean{k // 3}"} for k in range(9)]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    texts = {r["text"]: r["doc_id"] for r in suspect + clean}

    def fn(request):
        # the model continues the famous documents verbatim; elsewhere it gets the first
        # 0-2 words right and babbles, so the baseline has spread
        prefix = request.prompt
        text = next(t for t in texts if t.startswith(prefix))
        rest = text[len(prefix):].split()
        if texts[text].startswith("famous"):
            return " ".join(rest)
        right = sum(map(ord, text)) % 3
        return " ".join(rest[:right] + ["zz"] * (len(rest) - right))

    fake = FakeBackend(spec="fake-audit", generate_fn=fn)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    out = tmp_path / "run"
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "prefix_probe",
                 "--param", "prefix_probe.prefix_tokens=6", "--param", "prefix_probe.similarity=lcs",
                 "--alpha", "0.05", "--out", str(out), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    report = json.loads((out / "verdicts.json").read_text())
    rows = {r["doc_id"]: r for r in report["documents"]}
    assert set(rows) == {"famous0", "famous1", "fresh"}
    assert rows["famous0"]["score"] == 1.0 and rows["famous0"]["verdict"] == "seen"
    assert rows["fresh"]["verdict"] in ("not detected", "untested")
    assert (out / "scores.jsonl").exists() and (out / "run.json").exists()
    printed = capsys.readouterr().out
    assert "famous0" in printed and "seen" in printed and "Welch p" in printed


def test_audit_bad_alpha(tmp_path, capsys):
    code = main(["audit", "--model", "fake", "--suspect", "x.jsonl", "--clean", "y.jsonl", "--alpha", "2",
                 "--out", str(tmp_path / "r")])
    assert code == 2 and "--alpha" in capsys.readouterr().err


def test_dataset_level_test_matches_scipy():
    clean = [0.1, 0.2, 0.15, 0.3, 0.25, 0.2]
    suspect = {"a": [0.9, 0.8, 0.4], "b": [0.3, 0.35, 0.5]}
    scores, docs, labels = {}, {}, {}
    for i, v in enumerate(clean):
        scores[f"c{i}"], docs[f"c{i}"], labels[f"c{i}"] = v, "clean:c", 0
    for doc, values in suspect.items():
        for i, v in enumerate(values):
            scores[f"{doc}{i}"], docs[f"{doc}{i}"], labels[f"{doc}{i}"] = v, f"suspect:{doc}", 1
    report = verdicts(scores, docs, labels, alpha=0.05)
    every = suspect["a"] + suspect["b"]
    expected = stats.ttest_ind(every, clean, equal_var=False, alternative="greater").pvalue
    assert report["dataset"]["welch_p"] == pytest.approx(expected)
    assert report["dataset"]["n_suspect"] == 6 and report["dataset"]["n_clean"] == 6
    assert report["dataset"]["significant"] == (expected < 0.05)


def test_feature_agg_audit_leaves_out_its_training_rows(tmp_path, monkeypatch, capsys):
    """Dataset inference (Maini et al.): feature_agg is fitted on part of the suspect and
    clean passages; the test uses only the rest."""
    suspect = [{"id": f"s{i}", "text": " ".join(f"book{i % 2}w{j}" for j in range(20)) + f" s{i}", "doc_id": f"book{i % 2}"} for i in range(16)]
    clean = [{"id": f"c{i}", "text": " ".join(f"fresh{i}x{j}" for j in range(20)), "doc_id": f"fresh{i % 2}"} for i in range(16)]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    fake = FakeBackend(spec="fake-audit", member_texts=[r["text"] for r in suspect])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    out = tmp_path / "run"
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "feature_agg",
                 "--param", "feature_agg.n_train=8", "--alpha", "0.01", "--out", str(out),
                 "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    report = json.loads((out / "verdicts.json").read_text())
    trained = json.loads((out / "run.json").read_text())["train_ids"]["feature_agg"]
    assert len(trained) >= 8
    data = report["dataset"]
    assert data["n_suspect"] + data["n_clean"] == 32 - len(trained)
    assert data["welch_p"] < 0.01 and data["significant"]
    assert "dataset level" in capsys.readouterr().out
