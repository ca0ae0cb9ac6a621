"""A fault-injecting HTTP proxy on 127.0.0.1 for reliability tests.

``FaultProxy(upstream)`` forwards every request to an OpenAI-compatible server
(``upstream`` = ``http://127.0.0.1:PORT``; the real llama.cpp server when available, the
fake one of ``tests/fake_openai.py`` otherwise) and, with probability ``rate`` (drawn from a
seeded ``random.Random``), answers with a fault instead:

=============  ==============================================================
``429``        HTTP 429 with ``Retry-After: <retry_after>`` (seconds)
``500``        HTTP 500 with a JSON error body
``timeout``    holds the connection for ``hang_s`` seconds, then drops it
``drop``       closes the connection without any response
``garbled``    HTTP 200 with a truncated JSON body
=============  ==============================================================

``kinds`` picks which faults are drawn (uniformly). ``always_fail(body)``, when given,
marks requests that get a 500 every time (to force failures that survive all retries).

Every request is logged in ``events`` (monotonic time, request key = sha256 of the body,
path, what happened), so tests can measure the spacing of retries and count faults.
Only loopback addresses are accepted as upstream.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Sequence

from fake_openai import LocalServer  # tests/ is on the path (tests/conftest.py)

KINDS = ("429", "500", "timeout", "drop", "garbled")


def body_key(raw: bytes) -> str:
    """Identity of a request for the proxy's log: its canonical JSON body."""
    try:
        canonical = json.dumps(json.loads(raw), sort_keys=True).encode()
    except ValueError:
        canonical = raw
    return hashlib.sha256(canonical).hexdigest()[:16]


class FaultProxy(LocalServer):
    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.2,
        seed: int = 0,
        kinds: Sequence[str] = KINDS,
        retry_after: float = 1,
        hang_s: float = 2.0,
        always_fail: Callable[[dict], bool] | None = None,
    ):
        parsed = urllib.parse.urlparse(upstream)
        if parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the fault proxy forwards to loopback only, not {upstream!r}")
        unknown = set(kinds) - set(KINDS)
        if unknown or not kinds:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {KINDS}")
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self.rate = rate
        self.kinds = tuple(kinds)
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.always_fail = always_fail
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._handle(b"")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self._handle(self.rfile.read(length) if length else b"")

            def _handle(self, raw: bytes) -> None:
                key = body_key(raw) if raw else self.path
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                with proxy.lock:
                    if proxy.always_fail is not None and proxy.always_fail(body):
                        fault = "500"
                        forced = True
                    else:
                        forced = False
                        fault = proxy.rng.choice(proxy.kinds) if proxy.rng.random() < proxy.rate else None
                    proxy.events.append({"t": time.monotonic(), "key": key, "path": self.path,
                                         "fault": fault, "forced": forced})
                if fault is None:
                    self._forward(raw)
                elif fault == "429":
                    self._reply(429, {"error": {"message": "rate limited (injected)"}},
                                {"Retry-After": f"{proxy.retry_after:g}"})
                elif fault == "500":
                    self._reply(500, {"error": {"message": "internal error (injected)"}})
                elif fault == "timeout":
                    time.sleep(proxy.hang_s)
                    self._drop()
                elif fault == "drop":
                    self._drop()
                elif fault == "garbled":
                    data = b'{"id": "x", "choices": [{"index": 0, "text": "trunc'
                    self._raw(200, data, {})

            def _forward(self, raw: bytes) -> None:
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "content-length", "connection")}
                    conn.request(self.command, self.path, body=raw or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    extra = {k: v for k, v in resp.getheaders()
                             if k.lower() in ("retry-after", "content-type")}
                    self._raw(resp.status, data, extra)
                except OSError as exc:
                    self._reply(502, {"error": {"message": f"proxy: upstream failed: {exc}"}})
                finally:
                    conn.close()

            def _reply(self, code: int, obj: dict, headers: dict | None = None) -> None:
                self._raw(code, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

            def _raw(self, code: int, data: bytes, headers: dict) -> None:
                try:
                    self.send_response(code)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass

        self._serve(Handler)

    # -- accounting ------------------------------------------------------------------
    def faults(self) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["fault"] is not None]

    def count(self, fault: str | None = None) -> int:
        with self.lock:
            return sum(1 for e in self.events if e["fault"] == fault)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
