"""The HTML report, rendered from synthetic run directories (no model)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from copyprobe.cli.main import main
from copyprobe.errors import ConfigError, DataError
from copyprobe.reports.html import render_report, write_report
from copyprobe.reports.sample import HOSTILE_DOC, write_sample_run


class Page(HTMLParser):
    """Tables (by id: header texts and row cell texts), images, links, scripts, ids, text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, dict] = {}
        self.images: list[dict] = []
        self.refs: list[str] = []  # every src/href attribute
        self.ids: set[str] = set()
        self.classes: list[str] = []
        self.text_parts: list[str] = []
        self._table: dict | None = None
        self._row: list | None = None
        self._cell: list | None = None
        self._in_head = False
        self.feed(html)
        self.text = " ".join(" ".join(self.text_parts).split())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if "class" in a:
            self.classes.extend(a["class"].split())
        for name in ("src", "href"):
            if name in a:
                self.refs.append(a[name])
        if tag == "img":
            self.images.append(a)
        elif tag == "table":
            self._table = {"head": [], "rows": [], "class": a.get("class", "")}
            self.tables[a.get("id", f"table{len(self.tables)}")] = self._table
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._cell_attrs = a

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            (self._table["head"] if self._in_head else self._table["rows"]).append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text_parts.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    run_dir = write_sample_run(tmp_path_factory.mktemp("full") / "run", verdicts=True)
    path = write_report(run_dir)
    return run_dir, path, path.read_text(encoding="utf-8")


def _scores(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines() if line]


def test_default_path_and_self_contained(full_run):
    run_dir, path, html = full_run
    assert path == run_dir / "report.html"
    page = Page(html)
    # plots are embedded PNGs: summary ROC, per method ROC + distribution, per suspect document
    n_verdicts = len(json.loads((run_dir / "verdicts.json").read_text())["documents"])
    assert len(page.images) == 1 + 3 * 2 + n_verdicts
    for img in page.images:
        assert img["src"].startswith("data:image/png;base64,")
        png = base64.b64decode(img["src"].split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
        assert img.get("alt")
    # nothing outside the file: in-page anchors and data URIs only, no stylesheet/script files
    assert all(ref.startswith("#") or ref.startswith("data:") for ref in page.refs)
    assert "<link" not in html and "<script src" not in html and "@import" not in html
    assert "Content-Security-Policy" in html


def test_data_text_is_escaped(full_run):
    _, _, html = full_run
    assert '<script>alert("doc")</script>' not in html
    assert "&lt;script&gt;alert(" in html
    assert '<img src="https://example.com' not in html
    assert "<b>4096</b>" not in html and "&lt;b&gt;4096&lt;/b&gt;" in html
    assert html.count("<script") == 1  # only the page's own sorting script
    # the only web addresses in the page are the (escaped) ones in the data
    assert html.count("http:") + html.count("https:") == html.count("https://example.com") > 0
    assert HOSTILE_DOC in Page(html).text  # shown as text


def test_summary_table_matches_metrics(full_run):
    run_dir, _, html = full_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    table = Page(html).tables["summary-table"]
    rows = {r[0]: r for r in table["rows"]}
    assert set(rows) == {"loss", "zlib", "prefix_probe", "blind baseline (no model)"}
    for name in ("loss", "zlib", "prefix_probe"):
        m = metrics["passage"][name]
        d = metrics["document"][name]
        assert rows[name][1] == f"{m['auc']:.3f}"
        assert rows[name][2] == f"{m['auc_low']:.3f}–{m['auc_high']:.3f}"
        assert rows[name][3] == f"{100 * m['tpr_at_1pct_fpr']:.1f}%"
        assert rows[name][4] == f"{100 * m['tpr_at_5pct_fpr']:.1f}%"
        assert rows[name][5] == str(m["n"])
        assert rows[name][6] == f"{d['auc']:.3f}"
    assert rows["prefix_probe"][-1] == "3" and rows["loss"][-1] == "0"  # failed column
    blind = rows["blind baseline (no model)"]
    assert blind[1] == "0.560" and blind[2] == "0.440–0.680"
    assert "blind-warning" not in Page(html).ids  # 0.56 is below every method: no warning


def test_document_table_aggregates_and_ranks(full_run):
    run_dir, _, html = full_run
    table = Page(html).tables["document-table"]
    assert "sortable" in table["class"]
    head = table["head"][0]
    assert head[:3] == ["document", "label", "passages"]
    assert head[3:5] == ["loss score", "loss rank"]
    rows = table["rows"]
    assert len(rows) == 12
    by_doc: dict[str, list[float]] = {}
    labels = {}
    for r in _scores(run_dir):
        by_doc.setdefault(r["doc_id"], []).append(r["loss"])
        labels[r["doc_id"]] = r["label"]
    means = {d: float(np.mean(v)) for d, v in by_doc.items()}
    order = sorted(means, key=lambda d: -means[d])
    # rows come sorted by the first method's rank; rank 1 = highest mean score
    assert [r[0] for r in rows] == order
    assert [r[4] for r in rows] == [str(i) for i in range(1, 13)]
    for r in rows:
        assert r[3] == f"{means[r[0]]:.3f}"
        # a run with verdicts is an audit: its labels are the user's suspect and clean inputs
        assert r[1] == ("suspect" if labels[r[0]] == 1 else "clean")
        assert r[2] == "4"
    # the failed prefix_probe passages are left out of that method's document mean
    pp_col = head.index("prefix_probe score")
    pp = {}
    for r in _scores(run_dir):
        if r.get("prefix_probe") is not None:
            pp.setdefault(r["doc_id"], []).append(r["prefix_probe"])
    for r in rows:
        assert r[pp_col] == f"{np.mean(pp[r[0]]):.3f}"


def test_examples_show_prompts_and_answers(full_run):
    _, _, html = full_run
    page = Page(html)
    examples_text = page.text.split("Examples: prompts and answers", 1)[1].split("Cost", 1)[0]
    assert "prefix_probe" in examples_text
    for key in ("prefix", "suffix", "completion", "rouge_l", "passage"):
        assert key in examples_text
    assert examples_text.count("· suspect ·") == 3 and examples_text.count("· clean ·") == 3
    assert "loss" not in examples_text  # logit methods recorded no details


def test_cost_notes_failures_settings(full_run):
    run_dir, _, html = full_run
    page = Page(html)
    cost = {r[0]: r[1] for r in page.tables["cost-table"]["rows"]}
    assert cost["score_s"] == "3.25 s" and cost["total_s"] == "4.00 s"
    assert cost["tokens scored by the target"] == str(24 * 48)
    assert cost["requests: total"] == "144" and cost["requests: unique"] == "96"
    assert cost["cache hits / misses"].startswith("30 / 66") and "31.2%" in cost["cache hits / misses"]
    assert "2 rows with empty or no text were skipped (the first: line 4)" in page.text
    assert page.tables["failure-summary"]["rows"] == [["prefix_probe", "3"]]
    reasons = page.tables["failure-reasons"]["rows"]
    assert reasons == [["prefix_probe", "request failed: context length exceeded <b>4096</b>", "3"]]
    settings = {r[0]: r[1] for r in page.tables["settings-table"]["rows"]}
    assert settings["command"] == "copyprobe detect --model fake --data sample.jsonl"
    assert "fake:sample" in settings["model"] and "similarity" in settings["methods"]
    assert "3 scores could not be computed" in page.text


def test_run_without_labels(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", labels=False)
    assert not (run_dir / "metrics.json").exists()
    page = Page(render_report(run_dir))
    assert not [i for i in page.images if i.get("class") == "roc"]
    assert "summary-roc" not in page.ids
    assert len([i for i in page.images if i.get("class") == "dist"]) == 3
    assert "no labels" in page.text
    assert {r[1] for r in page.tables["document-table"]["rows"]} == {"—"}
    assert "blind-row" not in page.ids


def test_blind_warning_shown_prominently_and_printed_by_cli(tmp_path, capsys):
    run_dir = write_sample_run(tmp_path / "run", blind_auc=0.93, failures=False)
    out = tmp_path / "elsewhere" / "page.html"
    out.parent.mkdir()  # a missing folder is refused (test_report_out_refuses_a_missing_folder)
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert "WARNING" in captured.err and "0.93" in captured.err and len(captured.err.splitlines()) == 1
    html = out.read_text(encoding="utf-8")
    page = Page(html)
    assert "blind-warning" in page.ids and "audit-auc-note" not in page.ids  # members and non-members here
    # the warning comes before the summary table
    assert html.index('id="blind-warning"') < html.index('id="summary-table"')
    assert "No failed scores." in page.text
    assert not (run_dir / "report.html").exists()


def test_report_out_replaces_an_earlier_page_and_nothing_else(tmp_path, capsys):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    scores = (run_dir / "scores.jsonl").read_bytes()
    data = tmp_path / "passages.jsonl"
    data.write_text('{"id": "p1", "text": "kept"}\n')
    for target in (run_dir / "scores.jsonl", data, tmp_path):
        assert main(["report", str(run_dir), "--out", str(target)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and str(target) in err and "Traceback" not in err
    assert (run_dir / "scores.jsonl").read_bytes() == scores  # the run can still be reported
    assert data.read_text() == '{"id": "p1", "text": "kept"}\n'
    page = tmp_path / "page.html"
    assert main(["report", str(run_dir), "--out", str(page)]) == 0
    first = page.read_text(encoding="utf-8")
    assert main(["report", str(run_dir), "--out", str(page)]) == 0  # an earlier report is replaced
    assert page.read_text(encoding="utf-8") == first
    empty = tmp_path / "empty.html"
    empty.touch()
    assert main(["report", str(run_dir), "--out", str(empty)]) == 0 and empty.stat().st_size > 0


def test_blind_warning_recomputed_when_not_stored(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", blind_auc=0.75)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["blind_baseline"]["warning"] = None
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    assert "blind-warning" in Page(render_report(run_dir)).ids


def test_no_blind_warning_where_the_run_found_no_signal(tmp_path, capsys):
    """A blind AUC the run judged to rest on too few texts (signal false, so it stored no
    warning) is not warned about by the report either: the page said WARNING and then 'no
    signal claimed' (a user-journey review)."""
    run_dir = write_sample_run(tmp_path / "run", blind_auc=0.75)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["blind_baseline"].update(warning=None, signal=False)
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    assert "blind-warning" not in Page(render_report(run_dir)).ids
    assert main(["report", str(run_dir)]) == 0
    assert "WARNING" not in capsys.readouterr().err


def test_labels_without_metrics_file_and_null_scores_without_reason(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    (run_dir / "metrics.json").unlink()
    rows = _scores(run_dir)
    rows[0]["zlib"] = None  # a null with no reason recorded
    rows[1]["zlib"] = None
    rows[1]["errors"] = {"zlib": "boom"}
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = Page(render_report(run_dir))
    summary = {r[0]: r for r in page.tables["summary-table"]["rows"]}
    assert summary["loss"][1].endswith("(computed here)")
    assert summary["zlib"][-1] == "2"
    reasons = {r[1] for r in page.tables["failure-reasons"]["rows"]}
    assert reasons == {"no score and no reason recorded", "boom"}
    assert len([i for i in page.images if i.get("class") == "roc"]) == 3


def test_training_rows_left_out(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    rows = _scores(run_dir)
    for r in rows[:5]:
        r["train"] = ["zlib"]
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = Page(render_report(run_dir))
    assert "43 passages scored, 5 used for fitting" in page.text


@pytest.mark.parametrize("damage,message", [
    (lambda d: (d / "scores.jsonl").unlink(), "scores.jsonl does not exist"),
    (lambda d: (d / "run.json").unlink(), "run.json does not exist"),
    (lambda d: (d / "scores.jsonl").write_text('{"id": "a"}\n{oops\n'), "line 2 is not valid JSON"),
    (lambda d: (d / "metrics.json").write_text("[1, 2"), "metrics.json is not valid JSON"),
    (lambda d: (d / "verdicts.json").write_text('{"alpha": 0.01}'), "'documents' is missing"),
    (lambda d: (d / "verdicts.json").write_text('{"documents": [{"verdict": "suspect"}]}'), "'documents[0].doc_id' is missing"),
])
def test_broken_run_directories_raise_data_error(tmp_path, damage, message):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    damage(run_dir)
    with pytest.raises(DataError) as info:
        write_report(run_dir)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_run_of_a_kind_without_a_page_is_named(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    record = json.loads((run_dir / "run.json").read_text())
    record["kind"] = "plant"  # what `copyprobe plant` writes beside its model
    (run_dir / "run.json").write_text(json.dumps(record))
    with pytest.raises(DataError, match="holds a plant run, which has no scores.jsonl; the report shows detect, audit, canary and copying"):
        write_report(run_dir)


def test_not_a_directory_and_unwritable_output(tmp_path, capsys):
    with pytest.raises(DataError, match="missing does not exist"):
        write_report(tmp_path / "missing")
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot write the report"):
        write_report(run_dir, blocker / "report.html")
    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("copyprobe: error:") and len(err.strip().splitlines()) == 1


def test_report_imports_stay_light():
    code = ("import sys, copyprobe, copyprobe.reports, copyprobe.reports.html, "
            "copyprobe.cli.commands.report; "
            "heavy = [m for m in ('matplotlib', 'jinja2', 'sklearn') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_degenerate_runs(tmp_path):
    """A method that failed everywhere, one-class labels, no methods in run.json."""
    run_dir = write_sample_run(tmp_path / "run", failures=False)
    rows = _scores(run_dir)
    for r in rows:
        r["zlib"] = None
        r.setdefault("errors", {})["zlib"] = "zlib: empty text"
        r["label"] = 1
        r["year"] = 1999  # an extra numeric column is not a method when run.json names them
    (run_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "metrics.json").unlink()
    page = Page(render_report(run_dir))
    summary = {r[0]: r for r in page.tables["summary-table"]["rows"]}
    assert set(summary) == {"loss", "zlib", "prefix_probe"}
    assert summary["zlib"][-2:] == ["0", "48"]
    assert not [i for i in page.images if i.get("class") == "roc"]  # one class: no ROC
    assert "summary-roc" not in page.ids
    assert page.tables["failure-summary"]["rows"] == [["zlib", "48"]]

    run = json.loads((run_dir / "run.json").read_text())
    del run["methods"]
    (run_dir / "run.json").write_text(json.dumps(run))
    page = Page(render_report(run_dir))
    names = {r[0] for r in page.tables["summary-table"]["rows"]}
    assert names == {"loss", "zlib", "prefix_probe", "year"}  # inferred from the columns


def test_missing_report_extras_is_a_one_line_error(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(ConfigError, match=r"needs matplotlib: pip install 'copyprobe\[report\]'"):
        render_report(tmp_path)
