"""The one fake OpenAI-compatible server of the tests, on 127.0.0.1 (the ``fake_openai``
fixture of tests/conftest.py starts it and closes it after the test).

It answers ``/v1/completions``, ``/v1/chat/completions`` and ``/v1/models`` the way a
real server would, deterministically where a real one is deterministic:

* greedy requests (temperature 0) get a completion that depends only on the prompt:
  when the prompt is the start of one of the ``corpus`` passages the true next words
  (a "memorised" passage), otherwise words derived from a hash of the prompt;
* sampled requests (temperature > 0) depend on the prompt and ``seed``; without a seed
  they are truly random (``os.urandom``), as on a real server -- so a method that samples
  without a seed shows up as a non-deterministic run;
* DE-COP paraphrase prompts get three "Example B/C/D" paraphrases (word shuffles),
  multiple-choice prompts a letter.

With ``api_key`` set, every request must carry ``Authorization: Bearer <api_key>``;
otherwise it gets a 401 whose message echoes the key it was given (as OpenAI's
"Incorrect API key provided: ..." does), to check that clients do not repeat it.

Every request is logged (``log``: time, path, body, headers) so tests can count what
reached the model; ``in_flight`` / ``peak_in_flight`` count the requests being served.

To test a client's handling of a bad server, ``script`` holds actions that the next
requests take in turn (then answers resume): ``("ok",)``, ``("status", code, headers,
body_text)``, ``("sleep", seconds)`` (then an answer), ``("garbled",)`` (a truncated JSON
body), ``("close",)`` (the connection dropped without a response). ``answer=`` replaces
the answers with a function ``(path, body) -> dict`` of the test's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

WORDS = (
    "river stone lantern quiet meadow silver harbour distant thunder velvet orchard candle "
    "winter ember hollow shadow marble willow copper falcon"
).split()


def _digest(*parts: Any) -> bytes:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()


def _hash_words(n: int, *parts: Any) -> list[str]:
    rng = random.Random(_digest(*parts))
    return [rng.choice(WORDS) for _ in range(n)]


class LocalServer:
    """An HTTP server on 127.0.0.1 in a daemon thread (this fake, and the fault proxy of
    tests/reliability/fault_proxy.py): ``port``, ``base_url`` (with /v1), ``close()``."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeOpenAIServer(LocalServer):
    def __init__(self, corpus: Iterable[str] = (), api_key: str | None = None, model: str = "tiny-model",
                 answer: Callable[[str, dict], dict] | None = None):
        self.corpus = [" ".join(t.split()) for t in corpus]
        self.api_key = api_key
        self.model = model
        self.answer_fn = answer or self.answer
        self.log: list[dict[str, Any]] = []
        self.script: list[tuple] = []
        self.gets: list[str] = []  # paths of the GET requests (the look for a server before work)
        self.has_models_route = True  # False: a server without GET /models (404)
        self.get_delay = 0.0  # seconds before a GET is answered (a server too busy to say)
        self.lock = threading.Lock()
        self.delay = 0.0  # seconds to wait before each answer (a slow model)
        self.in_flight = 0
        self.peak_in_flight = 0  # most requests the server was handling at once
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _authorised(self) -> bool:
                if server.api_key is None:
                    return True
                given = self.headers.get("Authorization", "")
                if given == f"Bearer {server.api_key}":
                    return True
                shown = given[len("Bearer "):] if given.startswith("Bearer ") else given
                self._reply(401, {"error": {"message": f"Incorrect API key provided: {shown}.",
                                            "type": "invalid_request_error", "code": "invalid_api_key"}})
                return False

            def do_GET(self):
                with server.lock:
                    server.gets.append(self.path)
                if server.get_delay:
                    time.sleep(server.get_delay)
                if not server.has_models_route:
                    self._reply(404, {"error": {"message": f"no route {self.path}"}})
                elif self._authorised():
                    self._reply(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if len(raw) < length:  # the client was killed while sending: no request arrived
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._reply(400, {"error": {"message": "request body is not JSON"}})
                    return
                with server.lock:
                    server.log.append({"t": time.monotonic(), "path": self.path, "body": body,
                                       "headers": dict(self.headers)})
                    action = server.script.pop(0) if server.script else ("ok",)
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    if self._authorised():
                        self._act(action, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _act(self, action: tuple, body: dict) -> None:
                if server.delay:
                    time.sleep(server.delay)
                if action[0] == "sleep":
                    time.sleep(action[1])
                elif action[0] == "status":
                    self._reply(action[1], action[3].encode(), action[2])
                    return
                elif action[0] == "garbled":
                    self._reply(200, b'{"choices": [{"text": "unterminated')
                    return
                elif action[0] == "close":
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.close()
                    return
                if body.get("model") != server.model:
                    self._reply(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
                    return
                try:
                    answer = server.answer_fn(self.path, body)
                except KeyError as exc:
                    self._reply(400, {"error": {"message": f"missing field {exc}"}})
                    return
                self._reply(200, answer)

            def _reply(self, code: int, obj: dict | bytes, headers: dict[str, str] | None = None) -> None:
                data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._serve(Handler)

    # -- answers -------------------------------------------------------------------
    def _continue(self, prompt: str, n: int, temperature: float, seed: Any) -> str:
        if temperature and temperature > 0:
            salt = seed if seed is not None else os.urandom(8).hex()
            return " ".join(_hash_words(n, "sample", prompt, salt))
        flat = " ".join(prompt.split())
        for text in self.corpus:
            if flat and text.startswith(flat) and len(text) > len(flat):
                return " " + " ".join(text[len(flat):].split()[:n])
        return " " + " ".join(_hash_words(n, "greedy", prompt))

    def _chat_text(self, messages: list[dict], body: dict) -> str:
        last = messages[-1]["content"]
        temperature = float(body.get("temperature", 1.0))
        seed = body.get("seed")
        if "possible paraphrases" in last:
            passage = last.rsplit("Example A:", 1)[-1].split()
            salt = seed if (temperature == 0 or seed is not None) else os.urandom(8).hex()
            parts = []
            for letter in "BCD":
                words = list(passage)
                random.Random(_digest("para", last, salt, letter)).shuffle(words)
                words.append(letter.lower() * 3)  # keeps the three paraphrases distinct
                parts.append(f"Example {letter}: {' '.join(words)}")
            return "\n\n".join(parts)
        if "Options:" in last:
            if temperature and temperature > 0 and seed is None:
                return random.choice("ABCD")
            return "ABCD"[_digest("mcq", last, seed if temperature else None)[0] % 4]
        n = min(int(body.get("max_tokens", 16)), 64)
        return self._continue(last, n, temperature, seed).strip()

    def answer(self, path: str, body: dict) -> dict:
        n = min(int(body.get("max_tokens", 16)), 64)
        temperature = float(body.get("temperature", 1.0))
        if path.endswith("/chat/completions"):
            text = self._chat_text(body["messages"], body)
            return {
                "id": "chatcmpl-fake", "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(json.dumps(body["messages"]).split()),
                          "completion_tokens": len(text.split()), "total_tokens": 0},
            }
        if path.endswith("/completions"):
            prompt = body["prompt"]
            text = self._continue(prompt, n, temperature, body.get("seed"))
            return {
                "id": "cmpl-fake", "object": "text_completion", "model": self.model,
                "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
                          "total_tokens": 0},
            }
        raise KeyError(path)

    def requests_for(self, path_suffix: str = "") -> list[dict]:
        with self.lock:
            return [r for r in self.log if r["path"].endswith(path_suffix)]
