"""The audit section of the HTML report: format-2 verdicts.json (one score per document, the
rank test, the model-free guard, the collection test) and older format-1 files (passage
tests, old verdict words read as today's)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_report_html import Page

from copyprobe.evaluation.verdicts import audit_verdicts
from copyprobe.reports.html import render_report, verdict_sentence
from copyprobe.reports.sample import write_sample_run

COMMON = ("harbour market letter river station garden church hill house bridge lamp road winter morning "
          "ship clerk widow farmer engineer teacher window kitchen village doctor").split()
ARCHAIC = ("thee thou hath doth unto verily begat wherefore lo behold thine saith spake yea shalt art "
           "hither thither whence").split()
CSS = {"evidence": "evidence", "no evidence": "no-evidence", "cannot tell": "cannot-tell"}
# what earlier versions wrote, and the word the report must show for it
OLD_WORDS = {"seen": "evidence", "suspect": "evidence", "inconclusive": "cannot tell",
             "untested": "cannot tell", "not detected": "no evidence", "no evidence": "no evidence"}


def ordinal(n: int) -> str:
    return f"{n}" + ("th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


def p_text(p: float | None) -> str:
    return "—" if p is None else (f"{p:.2g}" if p < 0.001 else f"{p:.3f}")


def designed_run(path: Path, suspects: list[tuple[str, list[str], float]], n_clean: int, alpha: float,
                 seed: int = 0, guard_test: str = "rank") -> tuple[Path, dict, dict[str, list[float]]]:
    """A run directory as `copyprobe audit` writes it, with verdicts.json from the audit's own
    procedure: clean documents share a vocabulary plus a few words of their own (topic);
    suspects are (name, vocabulary, score). Returns the directory, verdicts.json and every
    document's passage scores."""
    rng = np.random.default_rng(seed)
    rows, texts, examples = [], {}, []

    def add(doc: str, label: int, words: list[str], score: float) -> None:
        for j in range(4):
            pid = f"{doc}-{j}"
            text = " ".join(rng.choice(words, size=30)).capitalize() + "."
            rows.append({"id": pid, "doc_id": doc, "label": label, "loss": float(score + rng.normal(0, 0.05))})
            texts[pid] = text
            examples.append({"id": pid, "doc_id": doc, "label": label, "text": text})

    for i in range(n_clean):
        topic = ["".join(rng.choice(list("bcdfgklmnprstvz"), 3)) + end for end in ("ank", "ore", "ith", "ul")]
        add(f"clean:c{i:02d}", 0, COMMON + topic, float(rng.normal(0, 1)))
    for name, words, score in suspects:
        add(f"suspect:{name}", 1, words, score)
    run_dir = write_sample_run(path, failures=False)
    (run_dir / "metrics.json").unlink()
    run = json.loads((run_dir / "run.json").read_text())
    run["methods"] = {"loss": {}}
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    report = audit_verdicts(rows, "loss", {}, alpha, texts, guard_test=guard_test)
    report["method"] = "loss"
    (run_dir / "verdicts.json").write_text(json.dumps(report))
    by_doc: dict[str, list[float]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"].split(":", 1)[1], []).append(r["loss"])
    return run_dir, report, by_doc


def section(html: str) -> str:
    """The text of the audit section alone."""
    text = Page(html).text
    return text[text.index("Audit verdicts"):text.index("Methods", text.index("Audit verdicts"))]


def verdict_rows(page: Page) -> dict[str, dict[str, str]]:
    """The per-document table: document -> {header: cell text}."""
    table = page.tables["verdict-table"]
    return {row[0]: dict(zip(table["head"][0], row)) for row in table["rows"]}


def blocks(html: str) -> dict[str, str]:
    """Each document's detail block (below the table): document -> the block's text."""
    out = {}
    for part in html.split('<div class="verdict-document">')[1:]:
        text = Page(part.split('<h2 id="methods">', 1)[0]).text
        out[text.split(" — ", 1)[0]] = text
    return out


@pytest.fixture(scope="module")
def three_words(tmp_path_factory):
    """One suspect in the clean documents' style scoring above all of them (evidence), one in
    another style scoring as high (the guard: cannot tell), one scoring like them (no evidence)."""
    run_dir, report, by_doc = designed_run(
        tmp_path_factory.mktemp("three") / "run",
        [("plain", COMMON, 5.0), ("kjv", ARCHAIC, 5.0), ("quiet", COMMON, 0.0)], n_clean=19, alpha=0.2)
    # the design gives each word once (a precondition, from the audit's own procedure)
    assert {d["doc_id"]: d["verdict"] for d in report["documents"]} == {
        "plain": "evidence", "kjv": "cannot tell", "quiet": "no evidence"}
    return run_dir, report, by_doc, render_report(run_dir)


def test_the_t_guard_is_described_as_the_t_guard(tmp_path):
    """The t guard withholds by how far a document lies beyond the clean ones, not by its
    rank: the farthest document is not withheld for being the farthest (verdicts._guard_trips)."""
    from copyprobe.evaluation.guard import LENGTH_MATERIAL

    run_dir, report, _ = designed_run(tmp_path / "run", [("plain", COMMON, 5.0)], n_clean=19, alpha=0.2,
                                      guard_test="t")
    assert report["guard"]["test"] == "t"
    assert "1/(k+1)" not in report["rule"] and "all of them" not in report["rule"]
    assert "t test puts it at p <= 0.1" in report["rule"]
    within = round(100 * (math.exp(LENGTH_MATERIAL) - 1))
    assert f"passage length within {within}% of theirs does not count" in report["rule"]
    test = {r[0]: r[1] for r in Page(render_report(run_dir)).tables["verdict-test-table"]["rows"]}
    described = test["shift guard (no model)"]
    assert "t test gives it p at most 0.1" in described and f"within {within}% of theirs" in described
    assert "rank p-value" not in described and "1/(k+1)" not in described
    assert test["rule"] == report["rule"]


def test_format2_summary_first_and_each_verdict_word(three_words):
    _, report, _, html = three_words
    page = Page(html)
    text = section(html)
    # the summary sentence comes first, before the test and the table
    assert text.startswith(f"Audit verdicts {report['summary']}")
    assert html.index('id="verdict-summary"') < html.index('id="verdict-test-table"') < html.index('id="verdict-table"')
    rows = verdict_rows(page)
    assert page.tables["verdict-table"]["head"][0] == [
        "document", "verdict", "score", "model's rank", "p", "Holm p", "style rank", "length rank", "passages",
        "in short"]  # no witness: no "tested on" column
    assert set(rows) == {d["doc_id"] for d in report["documents"]}
    details = blocks(html)
    for doc in report["documents"]:
        row = rows[doc["doc_id"]]
        assert row["verdict"] == doc["verdict"]
        assert f'<td class="{CSS[doc["verdict"]]}">{doc["verdict"]}</td>' in html
        assert row["score"] == f"{doc['score']:.3f}"
        assert row["model's rank"] == f"{ordinal(doc['rank'])} of {doc['of']}" == f"{ordinal(doc['rank'])} of 20"
        assert row["p"] == p_text(doc["p"]) and row["Holm p"] == p_text(doc["p_adjusted"])
        assert row["style rank"] == f"{ordinal(doc['style']['rank'])} of 20"
        assert row["length rank"] == f"{ordinal(doc['length']['rank'])} of 20"
        assert row["passages"] == "4 / 4 / 0"
        assert row["in short"] == (doc["note"] or "—")  # the few words of verdicts.json, not the full reason
        # the short line and the full reason, as verdicts.json holds them, in the document's own block
        block = details[doc["doc_id"]]
        assert doc["line"] in block and doc["reason"] in block and doc["sentence"] in block
        assert page.text.count(doc["reason"]) == 1  # once: inside the sentence, not again beside it
        # the model's standing and the text-only standings side by side, in words
        assert (f"the model's score ranks it {ordinal(doc['rank'])} of 20; its style alone "
                f"{ordinal(doc['style']['rank'])} of 20; its passage length alone "
                f"{ordinal(doc['length']['rank'])} of 20") in text
        assert doc["sentence"] in text
    assert page.classes.count("verdict-sentence") == 3
    # plain and kjv both rank 1st of 20: raw p = 1/20, Holm over three suspects = 3/20
    assert rows["plain"]["p"] == "0.050" and rows["plain"]["Holm p"] == "0.150"
    assert "0.050 (Holm-adjusted 0.150)" in text
    # kjv is held back by its style, and the page says so
    assert rows["kjv"]["in short"] == "withheld: its style alone sets it apart"
    assert "its style alone already sets it apart" in details["kjv"]
    assert rows["kjv"]["style rank"] == "1st of 20" and rows["plain"]["style rank"] != "1st of 20"


def test_format2_states_the_test_guard_and_collection(three_words):
    _, report, _, html = three_words
    page = Page(html)
    text = section(html)
    test = {r[0]: r[1] for r in page.tables["verdict-test-table"]["rows"]}
    assert test["assumptions"] == report["test"]["assumptions"]
    assert test["test"].startswith("rank, one-sided")
    # n/(k+1) after Holm's adjustment: 3 suspects, k = 19 clean documents
    assert test["smallest attainable p"].startswith(p_text(3 / 20) + " (after Holm’s adjustment")
    assert f"needs at least {report['test']['clean_needed']} clean documents" in test["smallest attainable p"]
    assert report["test"]["clean_needed"] == 14  # n/alpha - 1 at alpha 0.2 for n = 3 suspects
    assert test["multiple testing"] == "Holm over suspect documents"
    assert report["guard"]["features"] in test["shift guard (no model)"]
    assert "90% of them" in test["shift guard (no model)"] and "rank p-value" in test["shift guard (no model)"]
    assert "90% of them, or than all of them" in report["rule"]
    assert test["clean documents"].startswith("19 scored")
    assert test["rule"] == report["rule"]
    # the suspect-vs-clean AUCs of the summary are said not to be the audit's test
    assert "audit-auc-note" in page.ids and html.index('id="audit-auc-note"') < html.index('id="summary-table"')
    # the collection test: its verdict, reason and p-values
    collection = report["collection"]
    assert "verdict-collection" in page.ids
    assert f"{collection['verdict']} : {collection['reason']}" in text
    assert f"p = {p_text(collection['p'])} (smallest attainable {p_text(collection['min_p'])})" in text
    assert f"style p = {p_text(collection['style_p'])}" in text
    # the user's inputs are suspect and clean documents, never "members"
    assert "member" not in text.lower()
    assert "not legal conclusions" in text


def test_audit_runs_call_inputs_suspect_and_clean(three_words, tmp_path):
    run_dir, _, _, html = three_words
    page = Page(html)
    assert "member" not in page.text.lower()  # anywhere on the page, not only the audit section
    assert "12 suspect passages, 76 clean passages" in page.text  # 3 suspect and 19 clean documents x 4
    assert {r[1] for r in page.tables["document-table"]["rows"]} == {"suspect", "clean"}
    # a detect run, whose labels are ground truth, keeps member / non-member
    detect = Page(render_report(write_sample_run(tmp_path / "detect", failures=False)))
    assert {r[1] for r in detect.tables["document-table"]["rows"]} == {"member", "non-member"}
    assert "24 members, 24 non-members" in detect.text
    # an audit run without verdicts.json (kind recorded in run.json) is still an audit
    audit_dir = write_sample_run(tmp_path / "audit", failures=False)
    run = json.loads((audit_dir / "run.json").read_text())
    run.update(kind="audit", format_version=1)
    (audit_dir / "run.json").write_text(json.dumps(run))
    audit = Page(render_report(audit_dir))
    assert {r[1] for r in audit.tables["document-table"]["rows"]} == {"suspect", "clean"}


def test_format2_plot_is_document_level(three_words, monkeypatch):
    from copyprobe.reports import plots

    run_dir, report, by_doc, _ = three_words
    drawn = []
    real = plots.verdict_plot
    monkeypatch.setattr(plots, "verdict_plot", lambda *a, **k: drawn.append((a, k)) or real(*a, **k))
    page = Page(render_report(run_dir))
    assert len([i for i in page.images if i.get("class") == "verdict-plot"]) == 3
    # evidence first; one dot per clean document, at its mean passage score
    clean_means = sorted(float(np.mean(v)) for d, v in by_doc.items() if d.startswith("c"))
    assert len(clean_means) == 19
    names = [d["doc_id"] for d in report["documents"]]
    suspects_means = {d: float(np.mean(by_doc[d])) for d in names}
    first = drawn[0][0][0]
    assert first == pytest.approx(suspects_means["plain"])
    for (suspect_score, clean_scores), kwargs in ((a[:2], k) for a, k in drawn):
        assert sorted(clean_scores) == pytest.approx(clean_means)
        assert any(suspect_score == pytest.approx(m) for m in suspects_means.values())
        assert kwargs["rank"] == 1 + sum(c >= suspect_score for c in clean_means)


def test_format2_too_few_clean_documents_says_what_to_give(tmp_path):
    run_dir, report, _, = designed_run(tmp_path / "run", [("novel", COMMON, 9.0)], n_clean=3, alpha=0.01)[:3]
    html = render_report(run_dir)
    page = Page(html)
    text = section(html)
    (doc,) = report["documents"]
    assert doc["verdict"] == "cannot tell"
    row = verdict_rows(page)["novel"]
    # the p-value, where recorded, cannot go below 1/(k+1) = 0.25
    assert row["verdict"] == "cannot tell" and row["p"] == p_text(doc["p"]) and row["model's rank"] == "1st of 4"
    assert doc["p"] is None or doc["p"] >= 0.25
    assert "give at least 99 documents you are sure the model never saw" in blocks(html)["novel"]
    assert text.startswith(f"Audit verdicts {report['summary']}")
    assert report["summary"].startswith("Cannot tell whether the model was trained on novel")
    test = {r[0]: r[1] for r in page.tables["verdict-test-table"]["rows"]}
    assert test["smallest attainable p"].startswith("0.250: above alpha = 0.01, so no document can get")
    assert test["multiple testing"].startswith("none")
    assert "verdict-collection" not in page.ids  # one suspect: no collection test


def test_format2_plot_cap_shows_evidence_first(three_words, tmp_path, monkeypatch):
    import copyprobe.reports.sections.verdicts as reader

    run_dir, report, _, _ = three_words
    monkeypatch.setattr(reader, "MAX_VERDICT_PLOTS", 1)
    html = render_report(run_dir)
    page = Page(html)
    assert len(page.tables["verdict-table"]["rows"]) == 3
    assert len([i for i in page.images if i.get("class") == "verdict-plot"]) == 1
    assert "2 more have their words below, without a plot" in page.text
    # every document keeps its words; the one plot goes to the document with evidence
    parts = html.split('id="verdict-table"', 1)[1].split('<div class="verdict-document">')[1:]
    assert len(parts) == 3 and parts[0].split('">', 1)[1].startswith("plain —")
    assert 'class="verdict-plot"' in parts[0] and not any('class="verdict-plot"' in p for p in parts[1:])
    for doc in report["documents"]:
        assert doc["reason"] in page.text


def test_sample_run_verdicts_are_the_audits(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", verdicts=True)
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["format"] == 2 and verdicts["method"] == "loss"
    scores = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    labels = {r["doc_id"]: r["label"] for r in scores}
    assert sorted(d["doc_id"] for d in verdicts["documents"]) == sorted(d for d, lab in labels.items() if lab == 1)
    # the clean documents' scores are their mean passage losses
    clean = {d["doc_id"]: d["score"] for d in verdicts["baseline"]["documents"]}
    assert set(clean) == {d for d, lab in labels.items() if lab == 0}
    for doc, value in clean.items():
        assert value == pytest.approx(np.mean([r["loss"] for r in scores if r["doc_id"] == doc]))
    # 6 clean documents cannot reach alpha 0.01 with the rank test: every document says so
    assert {d["verdict"] for d in verdicts["documents"]} == {"cannot tell"}
    html = render_report(run_dir)
    page = Page(html)
    rows = page.tables["verdict-table"]["rows"]
    assert [r[0] for r in rows] == [d["doc_id"] for d in verdicts["documents"]]
    details = blocks(html)
    assert all("give at least 599 documents" in details[r[0]] for r in rows)  # 6/alpha - 1: 6 suspects
    assert "verdict-collection" in page.ids and verdicts["collection"]["reason"] in page.text


# ---------------------------------------------------------------- format 1 (older run directories)

def format1_run(path: Path) -> tuple[Path, dict]:
    """verdicts.json as `copyprobe audit` wrote it before format 2: ids prefixed suspect:/clean:
    in scores.jsonl, one top-level baseline, "score" and "mann_whitney_p", old words."""
    run_dir = write_sample_run(path, failures=False)
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    for r in rows:
        r["doc_id"] = ("suspect:" if r["label"] == 1 else "clean:") + r["doc_id"]
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    clean = [r["loss"] for r in rows if r["label"] == 0]
    suspects = sorted({r["doc_id"] for r in rows if r["label"] == 1})
    words = ["seen", "inconclusive", "not detected", "untested", "suspect", "no evidence"]
    documents = []
    for doc, word in zip(suspects, words):
        values = [r["loss"] for r in rows if r["doc_id"] == doc]
        entry = {"doc_id": doc.split(":", 1)[1], "n_passages": len(values), "score": float(np.mean(values)),
                 "welch_p": 0.0004 + 0.1 * len(documents), "mann_whitney_p": 0.002 + 0.1 * len(documents),
                 "verdict": word}
        if word == "untested":
            entry.update(welch_p=None, mann_whitney_p=None,
                         reason="needs at least 2 scores per group, got 1 suspect and 24 clean")
        documents.append(entry)
    verdicts = {"alpha": 0.01, "method": "loss", "rule": "seen = Welch and Mann-Whitney both below alpha",
                "baseline": {"n_passages": len(clean), "mean": float(np.mean(clean)),
                             "sd": float(np.std(clean, ddof=1))},
                "documents": documents}
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts))
    return run_dir, verdicts


def test_format1_old_words_mapped_and_old_fields_shown(tmp_path, monkeypatch):
    from copyprobe.reports import plots

    run_dir, verdicts = format1_run(tmp_path / "run")
    drawn = []
    real = plots.passage_verdict_plot
    monkeypatch.setattr(plots, "passage_verdict_plot", lambda *a, **k: drawn.append(a) or real(*a, **k))
    html = render_report(run_dir)
    page = Page(html)
    text = section(html)
    assert "verdicts-format-1" in page.ids and "copyprobe rescore" in text
    rows = verdict_rows(page)
    assert page.tables["verdict-table"]["head"][0] == [
        "document", "verdict", "score", "baseline mean", "baseline sd", "Welch p", "Mann-Whitney p", "passages"]
    assert len(rows) == len(verdicts["documents"]) == 6
    base = verdicts["baseline"]
    for doc in verdicts["documents"]:
        row = rows[doc["doc_id"]]
        new = OLD_WORDS[doc["verdict"]]
        # today's word, the recorded one in brackets when it differs
        assert row["verdict"] == (new if new == doc["verdict"] else f"{new} ({doc['verdict']})")
        assert f'<td class="{CSS[new]}">{new}' in html
        assert row["score"] == f"{doc['score']:.3f}" and row["passages"] == "4"
        assert row["baseline mean"] == f"{base['mean']:.3f}" and row["baseline sd"] == f"{base['sd']:.3f}"
        assert row["Welch p"] == p_text(doc["welch_p"]) and row["Mann-Whitney p"] == p_text(doc["mann_whitney_p"])
    counts = {w: sum(OLD_WORDS[d["verdict"]] == w for d in verdicts["documents"]) for w in CSS}
    assert text.startswith(f"Audit verdicts Of 6 suspect documents, {counts['evidence']} with evidence, "
                           f"{counts['no evidence']} without, {counts['cannot tell']} cannot tell")
    assert "not tested: needs at least 2 scores per group" in text
    assert "rule: seen = Welch and Mann-Whitney" in text
    assert "The tests disagree (recorded as “inconclusive”)" in text
    # passages found through the "suspect:" prefix; the baseline = the clean (label 0) passages
    assert sorted(len(a[0]) for a in drawn) == [4] * 6
    assert all(len(a[1]) == 24 for a in drawn)
    # only today's words as verdicts
    assert {r["verdict"].split(" (")[0] for r in rows.values()} == {"evidence", "no evidence", "cannot tell"}


def test_format1_baseline_variants_and_plot_cap(tmp_path, monkeypatch):
    """The report's own older layout: baseline_scores or baseline_ids, per document
    passage_scores, mean_score/baseline_mean/baseline_std, words suspect / no evidence."""
    import copyprobe.reports.sections.verdicts as reader

    run_dir = write_sample_run(tmp_path / "run", failures=False)
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    baseline = [r["loss"] for r in rows if r["label"] == 0]
    docs = sorted({r["doc_id"] for r in rows if r["label"] == 1})
    documents = [{"doc_id": d, "n_passages": 4, "mean_score": 1.0, "baseline_mean": float(np.mean(baseline)),
                  "baseline_std": float(np.std(baseline, ddof=1)), "welch_p": 0.3, "mannwhitney_p": 0.4,
                  "verdict": "suspect" if i % 2 else "no evidence"} for i, d in enumerate(docs)]
    documents[0]["passage_scores"] = [9.0, 9.5]
    verdicts = {"alpha": 0.01, "method": "loss", "baseline_ids": [r["id"] for r in rows if r["label"] == 0],
                "documents": documents, "notes": ["clean set: texts published after the model's cut-off"]}
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts))
    page = Page(render_report(run_dir))
    assert len([i for i in page.images if i.get("class") == "verdict-plot"]) == len(documents)
    assert "clean set: texts published after the model's cut-off" in page.text
    assert "about 0.06 would fall below alpha by chance" in page.text  # alpha x 6 documents

    # no baseline scores at all: a normal curve from mean and sd; and only the first plots
    del verdicts["baseline_ids"]
    (run_dir / "verdicts.json").write_text(json.dumps(verdicts))
    monkeypatch.setattr(reader, "MAX_VERDICT_PLOTS", 2)
    html = render_report(run_dir)
    page = Page(html)
    assert len(page.tables["verdict-table"]["rows"]) == len(documents)
    assert len([i for i in page.images if i.get("class") == "verdict-plot"]) == 2
    assert f"{len(documents) - 2} more have their words below, without a plot" in page.text
    # documents with evidence ("suspect" in this layout) get the plots first
    evidence = [d["doc_id"] for d in documents if d["verdict"] == "suspect"]
    plotted = [b for b in html.split('<div class="verdict-document">')[1:] if 'class="verdict-plot"' in b]
    assert len(plotted) == 2 and all(any(f">{s} —" in b for s in evidence) for b in plotted)


def test_format1_sentences_say_what_evidence_does_not_show():
    doc = {"doc_id": "novel-1", "n_passages": 8, "mean_score": 1.5, "baseline_mean": 0.1,
           "baseline_std": 0.9, "welch_p": 0.0004, "mannwhitney_p": 0.002, "verdict": "suspect"}
    text = verdict_sentence(doc, 0.01, "loss")
    assert text.startswith("Evidence for document novel-1")
    assert "8 passages score 1.500" in text and "0.100" in text and "Welch p = 0.0004" in text
    assert "not proof" in text and "licensed or lawful" in text
    for word in ("infring", "illegal", "guilty", "violat"):
        assert word not in text.lower()
    assert verdict_sentence({**doc, "verdict": "seen"}, 0.01, "loss") == text
    quiet = verdict_sentence({**doc, "welch_p": 0.3, "mannwhitney_p": 0.4, "verdict": "not detected"}, 0.01, "loss")
    assert quiet.startswith("No evidence") and "does not show that the text was not used for training" in quiet
    missing = verdict_sentence({"doc_id": "x", "verdict": "no evidence"}, 0.01, "loss")
    assert "Welch p = —" in missing
    mixed = verdict_sentence({**doc, "mannwhitney_p": 0.2, "verdict": "inconclusive"}, 0.01, "loss")
    assert mixed.startswith("Cannot tell") and "evidence is mixed" in mixed and "neither shows" in mixed
    untested = verdict_sentence({"doc_id": "x", "verdict": "untested", "reason": "too few"}, 0.01, "loss")
    assert untested.startswith("Cannot tell") and "not tested: too few" in untested


def test_format2_unscored_suspect_says_why(tmp_path):
    run_dir, _, _ = designed_run(tmp_path / "run", [("lost", COMMON, 1.0)], n_clean=5, alpha=0.2)
    rows = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    texts = {r["id"]: r["text"] for r in map(json.loads, (run_dir / "examples.jsonl").read_text().splitlines())}
    for r in rows:
        if r["doc_id"] == "suspect:lost":
            r["loss"] = None
            r["errors"] = {"loss": "context length exceeded"}
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = audit_verdicts(rows, "loss", {}, 0.2, texts)
    report["method"] = "loss"
    (run_dir / "verdicts.json").write_text(json.dumps(report))
    html = render_report(run_dir)
    page = Page(html)
    row = verdict_rows(page)["lost"]
    assert row["verdict"] == "cannot tell" and row["score"] == "—" and row["model's rank"] == "—"
    assert row["passages"] == "0 / 4 / 4" and row["in short"] == "no passage scored"
    assert "no passage of lost could be scored with loss (4 failed" in blocks(html)["lost"]
    assert "No standing: the document has no score" in page.text


def test_the_normality_check_of_the_t_test_is_shown(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", verdicts=True)
    path = run_dir / "verdicts.json"
    report = json.loads(path.read_text())
    report["test"]["normality"] = {"test": "Shapiro-Wilk", "p": 0.0021, "note": "the clean documents' scores do not "
                                   "look normal (Shapiro-Wilk p = 0.0021), which the t test assumes"}
    path.write_text(json.dumps(report))
    page = Page(render_report(run_dir))
    assumptions = {r[0]: r[1] for r in page.tables["verdict-test-table"]["rows"]}["assumptions"]
    assert "do not look normal (Shapiro-Wilk p = 0.0021)" in assumptions
    report["test"]["normality"] = {"test": "Shapiro-Wilk", "p": 0.41}
    path.write_text(json.dumps(report))
    assumptions = {r[0]: r[1] for r in Page(render_report(run_dir)).tables["verdict-test-table"]["rows"]}["assumptions"]
    assert "against a normal distribution: Shapiro-Wilk p = 0.41" in assumptions
    # the scores a suspect the reference model knows was tested on are checked too
    report["test"]["normality_own"] = {"test": "Shapiro-Wilk", "p": 0.003, "method": "loss", "documents": ["lost"],
                                       "note": "the clean documents' loss scores, which lost was tested on (the "
                                       "reference model knows it), do not look normal (Shapiro-Wilk p = 0.003)"}
    path.write_text(json.dumps(report))
    assumptions = {r[0]: r[1] for r in Page(render_report(run_dir)).tables["verdict-test-table"]["rows"]}["assumptions"]
    assert "Shapiro-Wilk p = 0.41" in assumptions and "loss scores, which lost was tested on" in assumptions
