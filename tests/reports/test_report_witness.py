"""The one verdicts reader (copyprobe.reports.sections.verdicts): any verdicts.json, format 1
normalised at its edge; the words verdicts.json holds shown as it holds them (what the audit
says once, once; each document's line, note and full reason); the reference model as a
witness, and a document it switched plotted against the clean documents on the score it was
tested on. Verdicts come from the audit's own procedure on hand-made rows: no model."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_report_html import Page
from test_report_verdicts import blocks, format1_run, ordinal, p_text, verdict_rows

from copyprobe.evaluation.verdicts import audit_verdicts
from copyprobe.reports.html import load_run, render_report
from copyprobe.reports.sample import write_sample_run
from copyprobe.reports.sections import verdicts as reader

WORDS = "the a lamp keeper night ship stair light sea rock wind boat".split()
SAVED_AUDIT = Path(__file__).resolve().parents[1] / "fixtures" / "saved_runs" / "audit"
# suspect -> (the target's own mean log-likelihood, the reference model's own)
SUSPECTS = {
    "bible": (-2.0, -1.5),    # both models know it: the reference recognises it, tested on loss
    "planted": (-2.0, -3.2),  # only the target knows it: the calibrated score is kept
    "quiet": (-3.3, -3.1),    # neither stands out
}


def witness_rows(n_clean: int = 8, seed: int = 0) -> tuple[list[dict], dict[str, str]]:
    """Scores rows of a reference audit, three passages a document, both halves of the
    calibrated score in each row's details (as tests/evaluation/test_witness.py makes them)."""
    rng = random.Random(seed)
    rows, texts = [], {}
    docs = [(f"suspect:{n}", *v) for n, v in SUSPECTS.items()] + [(f"clean:c{k}", None, None) for k in range(n_clean)]
    for d, (doc, target, own) in enumerate(docs):
        for i in range(3):
            pid = f"{doc}-{i}"
            if target is not None:
                t, r = target + 0.01 * i, own + 0.01 * i
            else:
                t, r = -3.5 + 0.05 * d + 0.01 * rng.random(), -3.4 + 0.04 * d + 0.01 * rng.random()
            rows.append({"id": pid, "doc_id": doc, "label": int(target is not None), "reference": t - r, "loss": t,
                         "details": {"reference": {"target": t, "reference": r}}})
            texts[pid] = " ".join(rng.choice(WORDS) for _ in range(40))
    return rows, texts


def witness_run(path: Path) -> tuple[Path, dict, list[dict]]:
    rows, texts = witness_rows()
    report = audit_verdicts(
        rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
        witness_context={"model": "gemma-3-270m", "could_have_seen": True,
                         "basis": "its training data ends 2024-08 (model card)"},
        context={"published": "1611", "target": {"model": "SmolLM2-135M", "could_have_seen": True,
                                                 "basis": "its training data ends 2024-06 (model card)"}})
    run_dir = write_sample_run(path, failures=False)
    (run_dir / "metrics.json").unlink()
    run = json.loads((run_dir / "run.json").read_text())
    run.update(kind="audit", methods={"reference": {}, "loss": {}})
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "examples.jsonl").write_text("".join(
        json.dumps({"id": r["id"], "doc_id": r["doc_id"], "label": r["label"], "text": texts[r["id"]]}) + "\n"
        for r in rows))
    (run_dir / "verdicts.json").write_text(json.dumps(report))
    return run_dir, report, rows


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    run_dir, report, rows = witness_run(tmp_path_factory.mktemp("witness") / "run")
    docs = {d["doc_id"]: d for d in report["documents"]}
    # the design's preconditions, from the audit's own procedure
    assert docs["bible"]["tested_on"] == "loss" and docs["bible"]["witness"]["recognises"]
    assert "tested_on" not in docs["planted"] and not docs["planted"]["witness"]["recognises"]
    assert report["baseline"]["raw"]["method"] == "loss"
    assert len(report["shared"]) == 4  # witness, target, evidence's null battery, what no evidence rules out
    return run_dir, report, rows, render_report(run_dir)


def block_pages(html: str) -> dict[str, Page]:
    """Each document's detail block, parsed: document -> Page."""
    out = {}
    for part in html.split('<div class="verdict-document">')[1:]:
        page = Page(part.split('<h2 id="methods">', 1)[0])
        out[page.text.split(" — ", 1)[0]] = page
    return out


def doc_means(rows: list[dict], half: str) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r["doc_id"].split(":", 1)[1], []).append(r["details"]["reference"][half])
    return {d: float(np.mean(v)) for d, v in out.items()}


# ---------------------------------------------------------------- one reader, any format

def test_one_reader_normalises_format_1_and_keeps_format_2(tmp_path, audited):
    from copyprobe.reports import plots

    _, report, _, _ = audited
    # today's layout passes the edge as it is
    assert reader.current(report) is report
    # an older file becomes today's layout: today's words, the recorded one kept, the sentence it lacked
    run_dir, old = format1_run(tmp_path / "old")
    now = reader.current(old, load_run(run_dir))
    assert now["format"] == 1 and now["method"] == "loss" and now["summary"].startswith("Of 6 suspect documents")
    assert [d["doc_id"] for d in now["documents"]] == [d["doc_id"] for d in old["documents"]]
    for before, after in zip(old["documents"], now["documents"]):
        assert after["verdict"] in ("evidence", "no evidence", "cannot tell")
        assert after["recorded"] == (before["verdict"] if before["verdict"] != after["verdict"] else None)
        assert after["score"] == before["score"] and after["mannwhitney_p"] == before["mann_whitney_p"]
        assert after["sentence"] and len(after["passage_scores"]) == 4
    assert len(now["baseline"]["passages"]) == 24  # the clean passages, for the plots
    # both render through the one entry point
    for loaded in (load_run(run_dir), load_run(audited[0])):
        context = reader.verdicts_context(loaded, plots)
        assert len(context["documents"]) == len(loaded["verdicts"]["documents"])


def test_saved_runs_still_render(tmp_path):
    """The saved audit run renders with its words once; the same file as format 2 wrote it
    before the witness (no shared words, no line or note: the clauses were in each reason)
    renders too, its full reasons under each document. (At its alpha 0.05 the three suspects
    are 'cannot tell', n/(k+1) = 3/41 after Holm's adjustment, and share no words: the run is
    rescored, without a model, at alpha 0.1.)"""
    from copyprobe.rescore import rescore

    saved = tmp_path / "saved"
    shutil.copytree(SAVED_AUDIT, saved)
    record = json.loads((saved / "run.json").read_text())
    record["audit"]["alpha"] = 0.1
    (saved / "run.json").write_text(json.dumps(record))
    rescore(saved)
    verdicts = json.loads((saved / "verdicts.json").read_text())
    html = render_report(saved)
    page = Page(html)
    assert [s["text"] for s in verdicts["shared"]] and all(page.text.count(s["text"]) == 1 for s in verdicts["shared"])
    assert verdict_rows(page).keys() == {d["doc_id"] for d in verdicts["documents"]}
    earlier = {k: v for k, v in verdicts.items() if k not in ("shared", "no_evidence_rules_out",
                                                              "evidence_null_battery", "published", "target")}
    earlier["documents"] = [{k: v for k, v in d.items() if k not in ("line", "note")} for d in verdicts["documents"]]
    shutil.copytree(saved, tmp_path / "run")
    (tmp_path / "run" / "verdicts.json").write_text(json.dumps(earlier))
    html = render_report(tmp_path / "run")
    page = Page(html)
    assert "verdict-shared" not in page.ids and "in short" not in page.tables["verdict-table"]["head"][0]
    details = blocks(html)
    for doc in verdicts["documents"]:
        assert doc["reason"] in details[doc["doc_id"]]


# ---------------------------------------------------------------- the words, as verdicts.json holds them

def test_shared_words_appear_once_near_the_table(audited):
    _, report, _, html = audited
    page = Page(html)
    shared = html.split('id="verdict-shared"', 1)[1].split("</div>", 1)[0]
    assert html.index('id="verdict-shared"') < html.index('id="verdict-table"')
    for said in report["shared"]:
        assert page.text.count(said["text"]) == 1, said["title"]
        assert Page(shared).text.count(said["text"]) == 1
    titles = Page(shared).text
    assert all(s["title"] in titles for s in report["shared"])
    # no document's words carry them again
    for doc in report["documents"]:
        assert not any(s["text"] in doc["reason"] for s in report["shared"])


def test_each_document_shows_its_line_note_and_full_reason(audited):
    _, report, _, html = audited
    page = Page(html)
    rows, details = verdict_rows(page), blocks(html)
    for doc in report["documents"]:
        assert rows[doc["doc_id"]]["in short"] == (doc["note"] or "—")
        block = details[doc["doc_id"]]
        assert doc["line"] in block and doc["sentence"] in block and doc["reason"] in block
    assert rows["bible"]["in short"] == "on loss: the reference model knows it"
    assert page.text.count(report["summary"]) == 1


def test_tested_on_and_the_witness_are_shown(audited):
    _, report, rows, html = audited
    page = Page(html)
    docs = {d["doc_id"]: d for d in report["documents"]}
    table = verdict_rows(page)
    assert page.tables["verdict-table"]["head"][0][2:4] == ["score", "tested on"]
    assert {d: r["tested on"] for d, r in table.items()} == {"bible": "loss", "planted": "reference",
                                                            "quiet": "reference"}
    details = blocks(html)
    for name, doc in docs.items():
        said = doc["witness"]
        (witness,) = [t for t in block_pages(html)[name].tables.values()
                      if t["head"] and t["head"][0][0] == "the reference model as a witness"]
        assert witness["rows"][0] == [
            "gemma-3-270m", f"{ordinal(said['rank'])} of {said['of']}", p_text(said["p"]),
            "yes" if said["recognises"] else "no", "yes", table[name]["tested on"]]
        assert f"the model's score ({table[name]['tested on']})" in details[name]
    # the switched document's standing is said on loss, with the clean documents' mean on loss
    clean_loss = [v for d, v in doc_means(rows, "target").items() if d.startswith("c")]
    assert "By loss, the model's score ranks it 1st of 9" in details["bible"]
    assert f"clean mean {np.mean(clean_loss):.3f} (both by loss)" in details["bible"]
    assert f"clean mean {report['baseline']['mean']:.3f}" in details["planted"]
    assert "all scored passages" not in details["bible"]  # that mean is on the calibrated score
    # the audit's witness section and what it knows of the text and the target
    test = {r[0]: r[1] for r in page.tables["verdict-test-table"]["rows"]}
    assert "gemma-3-270m" in test["reference model as a witness"]
    assert "recognises: bible" in test["reference model as a witness"]
    assert report["witness"]["rule"] in test["reference model as a witness"]
    assert test["text first published"] == "1611"
    assert test["target model"].startswith("SmolLM2-135M; could have seen a text of that date: yes")


def test_a_switched_document_is_plotted_on_the_score_it_was_tested_on(audited, monkeypatch):
    from copyprobe.reports import plots

    run_dir, report, rows, _ = audited
    drawn = {}
    real = plots.verdict_plot
    monkeypatch.setattr(plots, "verdict_plot",
                        lambda score, clean, **k: drawn.setdefault(k["title"].split(":")[0], (score, clean, k))
                        and real(score, clean, **k))
    Page(render_report(run_dir))
    assert set(drawn) == set(SUSPECTS)
    target, own = doc_means(rows, "target"), doc_means(rows, "reference")
    clean_loss = sorted(v for d, v in target.items() if d.startswith("c"))
    clean_calibrated = sorted(target[d] - own[d] for d in target if d.startswith("c"))
    # bible was tested on loss: its loss among the clean documents' losses (baseline.raw)
    score, clean, kwargs = drawn["bible"]
    assert score == pytest.approx(target["bible"]) and sorted(clean) == pytest.approx(clean_loss)
    assert kwargs["score_name"] == "loss" and kwargs["rank"] == 1
    # planted kept the calibrated score: among the clean documents' calibrated scores
    score, clean, kwargs = drawn["planted"]
    assert score == pytest.approx(target["planted"] - own["planted"]) and sorted(clean) == pytest.approx(clean_calibrated)
    assert kwargs["score_name"] == "reference"


def test_a_reference_that_cannot_have_seen_the_text_is_said_once(tmp_path):
    rows, texts = witness_rows()
    report = audit_verdicts(rows, "reference", {}, 0.01, texts, test="t", guard_test="t",
                            witness_context={"model": "gemma-3-270m", "could_have_seen": False,
                                             "basis": "its training data ends 2024-08; the text was published 2025-06"})
    run_dir, _, _ = witness_run(tmp_path / "run")
    (run_dir / "verdicts.json").write_text(json.dumps(report))
    html = render_report(run_dir)
    page = Page(html)
    (said,) = [s for s in report["shared"] if s["title"] == "reference model"]
    assert "cannot have seen" in said["text"] and page.text.count(said["text"]) == 1
    rows_ = verdict_rows(page)
    assert {r["tested on"] for r in rows_.values()} == {"reference"}  # trusted unasked: nothing switched


def test_the_terminal_table_gives_the_clean_baseline_on_the_score_a_switched_document_shows(audited, capsys):
    """A document tested on loss shows its loss in the score column, and the line above gave
    only the calibrated score's clean mean (-0.09 against a loss of -2.05 ranked 1st)."""
    import statistics

    from copyprobe.cli.commands.audit import _print

    report = audited[1]
    _print(report)
    out = capsys.readouterr().out
    raw = [d["score"] for d in report["baseline"]["raw"]["documents"]]
    said = f"; on loss: mean {statistics.mean(raw):.3f}, sd {statistics.stdev(raw):.3f})"
    assert said in out.splitlines()[1]
    kept = {**report, "documents": [d for d in report["documents"] if "tested_on" not in d]}
    _print(kept)  # no document on loss: the method's baseline alone
    assert "on loss" not in capsys.readouterr().out.splitlines()[1]
    page = Page(render_report(audited[0]))  # the report's table of the test says it too
    assert f"on loss, the score of the documents tested on it: mean {statistics.mean(raw):.3f}" in page.text
