"""The report in a real browser: headless Chromium renders it, runs its script, and the page
makes no network request.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from copyprobe.reports.html import write_report
from copyprobe.reports.sample import write_sample_run


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


CHROMIUM = _find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not found (install Debian's `chromium`: apt-get install -y chromium)",
)

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
    "--disable-extensions", "--disable-default-apps", "--no-pings",
    "--hide-scrollbars", "--window-size=1280,2600",
]
# requests Chromium makes for itself (sign-in, component updates, network time) carry this
# initiator; requests made by a page carry the page's origin ("null" for file://)
BROWSER_INITIATOR = "not an origin"


def run_chromium(tmp_path: Path, name: str, url: str, screenshot: Path | None = None) -> tuple[str, list[dict]]:
    """Load ``url``; return the DOM after scripts ran and the URL requests from the net log."""
    profile = tmp_path / f"profile-{name}"  # fresh profile each time
    netlog = tmp_path / f"netlog-{name}.json"
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}", "--dump-dom"]
    if screenshot is not None:
        command.append(f"--screenshot={screenshot}")
    command.append(url)
    result = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, url_requests(netlog)


def url_requests(netlog: Path) -> list[dict]:
    """Every URL request the network stack started: url, initiator, isolation key."""
    text = netlog.read_text(encoding="utf-8", errors="replace").rstrip()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short at exit lacks its closing brackets
        log = json.loads(text.rstrip(",\n") + "]}")
    kinds = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requests = []
    for event in log["events"]:
        params = event.get("params") or {}
        if kinds.get(event["type"]) == "URL_REQUEST_START_JOB" and "url" in params:
            requests.append({"url": params["url"], "initiator": params.get("initiator"),
                             "isolation": params.get("network_isolation_key", "")})
    return requests


def page_requests(requests: list[dict]) -> list[str]:
    """Requests a page caused: anything not started by the browser for itself."""
    return [r["url"] for r in requests
            if r["initiator"] != BROWSER_INITIATOR or "file://" in r["isolation"]]


class Dom(HTMLParser):
    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.images: list[dict] = []
        self.rows: dict[str, list[list[str]]] = {}
        self.sorted_headers: list[tuple[str, str]] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_body = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a)
        elif tag == "table":
            self._table = a.get("id", "")
            self.rows[self._table] = []
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        if tag == "th" and "aria-sort" in a:
            self.sorted_headers.append((self._table, a["aria-sort"]))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_net_log_catches_a_page_request(tmp_path):
    """Control: the net-log check sees a request that a page does make."""
    port = free_port()
    page = tmp_path / "control.html"
    page.write_text(f'<!DOCTYPE html><html><body><img src="http://127.0.0.1:{port}/probe.png">'
                    f"<p>control</p></body></html>", encoding="utf-8")
    _, requests = run_chromium(tmp_path, "control", page.as_uri())
    assert f"http://127.0.0.1:{port}/probe.png" in page_requests(requests)


def test_report_renders_in_chromium_without_network(tmp_path):
    run_dir = write_sample_run(tmp_path / "run", verdicts=True)
    report = write_report(run_dir)
    shot = tmp_path / "report.png"
    # the fragment asks the page's script to sort the document table by "loss rank", descending
    dom_html, requests = run_chromium(tmp_path, "report", report.as_uri() + "#sort=document-table:4:desc",
                                      screenshot=shot)
    keep = os.environ.get("COPYPROBE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)

    dom = Dom(dom_html)
    n_verdicts = len(json.loads((run_dir / "verdicts.json").read_text())["documents"])
    plots = [i for i in dom.images if i.get("src", "").startswith("data:image/png;base64,")]
    assert len(plots) == len(dom.images) == 1 + 3 * 2 + n_verdicts
    assert len(dom.rows["document-table"]) == 12
    assert len(dom.rows["summary-table"]) == 4  # three methods and the blind baseline
    assert len(dom.rows["verdict-table"]) == n_verdicts
    assert dom.rows["failure-summary"] == [["prefix_probe", "3"]]
    # the inline script ran: the table is sorted by rank, highest rank number first
    assert ("document-table", "descending") in dom.sorted_headers
    assert [r[4] for r in dom.rows["document-table"]] == [str(i) for i in range(12, 0, -1)]
    # escaped data stays text: the hostile document id is a cell, not a script
    assert '<script>alert("doc")</script>' in {r[0] for r in dom.rows["document-table"]}

    # no request from the page; anything else in the log is Chromium talking to itself
    assert page_requests(requests) == []
    for r in requests:
        assert r["url"].startswith(("file:", "data:")) or r["initiator"] == BROWSER_INITIATOR, r
    assert not [r for r in requests if "example.com" in r["url"]]

    # the screenshot shows a page, not a blank window
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 2600)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 200
