"""The copying and canary report pages in headless Chromium: they render, show their
tables, and make no network request (skipped without Debian's chromium)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import CopyConfig
from copyprobe.copying.runner import copying
from copyprobe.reports.html import write_report

_spec = importlib.util.spec_from_file_location(
    "report_browser", Path(__file__).resolve().parents[1] / "reports" / "test_browser.py")
browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(browser)

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None, reason="headless Chromium not found")


def test_copying_report_opens_in_a_browser(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"word{i % 97} and{i % 13}" for i in range(900)))
    words = book.read_text().split()

    def gen(req):  # copies the book's continuation for half of the prompts
        tail = " ".join(req.prompt.split()[-8:])
        at = " ".join(words).find(tail)
        return " ".join(" ".join(words)[at + len(tail):].split()[:30]) if at >= 0 else "nothing like it"

    copying(FakeBackend(generate_fn=gen), book, CopyConfig(tasks=("literal",), n_bootstrap=200), cache=False,
            book_options={"prefix_words": 60, "reference_words": 30}, out=tmp_path / "run")
    page = write_report(tmp_path / "run")
    dom, requests = browser.run_chromium(tmp_path, "copying", page.as_uri())
    assert browser.page_requests(requests) == []
    assert 'id="copying-table"' in dom and "unseen text (n = " in dom and "<mark>" in dom
    assert "words in a row" in dom

