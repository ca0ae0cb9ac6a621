"""`copyprobe report` on a canary-test run: verdict in the shared vocabulary, exact and
combined p-values, one rank plot per canary."""

from __future__ import annotations

import json
import re

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.canary.kit import make_kit
from copyprobe.canary.scoring import canary_summary, canary_test
from copyprobe.cli.main import main
from copyprobe.evaluation.vocabulary import VERDICTS

DOC = ("The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to the "
       "wall, and the nets hung drying above the slipway. Nobody in the village expected the storm that came "
       "in the second week of February.\n")


@pytest.fixture
def kit(tmp_path):
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    return make_kit(doc, tmp_path / "kit", n_candidates=25, n_canaries=2, seed="report")


def test_report_of_a_model_that_saw_the_canaries(kit, tmp_path, capsys):
    backend = FakeBackend(spec="saw-it", member_texts=[c.text for c in kit.canaries], boost=6.0)
    result = canary_test(backend, kit.dir, out=tmp_path / "run", cache=False)
    summary = json.loads((tmp_path / "run" / "canary.json").read_text())
    assert summary["verdict"] == "evidence" and summary["significant"]
    assert "p = " in summary["reason"] and "at most p =" in summary["explanation"]
    assert main(["report", str(tmp_path / "run")]) == 0
    page = (tmp_path / "run" / "report.html").read_text()
    assert 'class="verdict evidence"' in page and ">evidence</span>" in page
    assert len(re.findall(r'<img class="plot" alt="rank plot of canary \d"', page)) == 2
    comb = result.canary["combined"]
    assert f"sum of ranks {comb['sum_of_ranks']}" in page
    for c in result.canary["canaries"]:
        assert f"<td class=\"num\">{c['rank']}</td><td class=\"num\">25</td>" in page
    assert "http" not in page.replace("http-equiv", "")  # self-contained


def test_verdict_words_follow_p_alpha_and_what_the_kit_can_give(kit):
    rows_null = [{"id": f"c{c.index}:{j}", "loss": float(j)} for c in kit.canaries for j in range(25)]
    s = canary_summary(kit, rows_null, "loss", 0.05)
    expected = "evidence" if s["p_value"] <= 0.05 else "no evidence"
    assert s["verdict"] == expected and s["verdict"] in VERDICTS
    # alpha below the smallest p two canaries of 25 can give (1/625): cannot tell
    s = canary_summary(kit, rows_null, "loss", 0.001)
    assert s["verdict"] == "cannot tell" and "smallest possible p-value" in s["reason"]
    # most held-out candidates unscored: cannot tell
    rows = [dict(r, loss=None) if r["id"].split(":")[1] not in {str(c.published) for c in kit.canaries} else r
            for r in rows_null]
    assert canary_summary(kit, rows, "loss", 0.05)["verdict"] == "cannot tell"


def test_an_old_canary_json_still_renders(kit, tmp_path):
    backend = FakeBackend(spec="null")
    canary_test(backend, kit.dir, out=tmp_path / "run", cache=False)
    path = tmp_path / "run" / "canary.json"
    old = json.loads(path.read_text())
    old["verdict"] = old.pop("explanation")
    old.pop("reason")
    path.write_text(json.dumps(old))
    from copyprobe.reports.html import render_report

    page = render_report(tmp_path / "run")
    word = "evidence" if old["significant"] else "no evidence"
    assert f">{word}</span>" in page and old["verdict"][:40] in page
