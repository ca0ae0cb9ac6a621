"""A backend for any OpenAI-compatible HTTP server: OpenAI itself, vLLM, llama.cpp's
server, llama-cpp-python's server, TGI, LM Studio, ...

Spec: ``openai:<model>@<base_url>``, e.g. ``openai:gpt-4o-mini@https://api.openai.com/v1``
or ``openai:smollm2@http://127.0.0.1:8000/v1``. A base URL without a path gets ``/v1``.
Without ``@<base_url>``, ``$OPENAI_BASE_URL`` or OpenAI's URL is used.

The API key comes from an environment variable only (``OPENAI_API_KEY`` unless
``api_key_env`` names another). Local servers need none. The key is sent in the
Authorization header and nowhere else: not in the spec, fingerprint, info(), logs or
exception messages (server error texts are scrubbed of it too).

What each request kind becomes:

* GenerateRequest with ``messages`` -> ``POST /chat/completions``; with ``prompt`` ->
  ``POST /completions``. ``seed`` is passed when set; ``top_logprobs`` asks for
  top-k log-probs of the generated tokens (``top_logprobs`` on chat, ``logprobs`` on
  completions), keyed by the token texts the server sends. Only when the server gives
  them (capability ``top_logprobs``): ``top_logprobs=None`` probes each route a request
  needs once, lazily, on first need, with one 1-token request asking for 2.
* ChoiceLogprobsRequest -> one generated token (``max_tokens=1``, temperature 0) with the
  top ``choice_top_k`` (20) log-probs of that token; each choice gets the log-sum-exp of
  the top tokens equal to it after stripping whitespace (" A" and "A"). Choices that are
  not among the top-k are left out of the answer's dict.
* TokenLogprobsRequest -> ``POST /completions`` with ``echo=true``, ``logprobs=1`` and
  ``max_tokens=1`` (prompt log-probs, llama.cpp / OpenAI legacy style). Only when the
  server supports it: ``prompt_logprobs=None`` probes once, lazily, on first need. The
  API gives no token ids, so ``token_ids`` holds -1 per token (``tokens`` has the text).
  With a ``context``, context + text is sent and the tokens that end inside the
  context are dropped (by ``text_offset``), so every token of the text is scored.
  Distribution statistics (mu/sigma/rank) and n-gram log-probs are never available over
  HTTP, so methods that need them (min_k_pp, ...) fail up front in ``check``.

Requests run concurrently (``concurrency`` threads, default 8). 429 (honouring
Retry-After), 5xx, timeouts, connection errors and unreadable JSON are retried with
exponential backoff and jitter, up to ``max_retries`` times. A request that still fails
is answered with :class:`~copyprobe.backends.base.RequestFailed` carrying the reason, so
only the rows that needed it fail. Errors that concern every request -- server
unreachable, wrong model name (404), authentication (401/403) -- raise
:class:`~copyprobe.errors.BackendError` at once; a refused connection or an unknown host
before the server has answered once is one of them, not retried.

``usage`` totals requests, retries, failures, prompt and completion tokens (from the
responses' ``usage``) for cost accounting.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import math
import os
import queue
import re
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from copyprobe.backends.base import (
    CHOICE_LOGPROBS,
    CONTEXT_LOGPROBS,
    GENERATE,
    TOKEN_LOGPROBS,
    TOP_LOGPROBS,
    Backend,
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    GenerateRequest,
    Generation,
    RequestFailed,
    TokenLogprobs,
    TokenLogprobsRequest,
)
from copyprobe.errors import BackendError, CapabilityError, ConfigError, SettingError


DEFAULT_BASE_URL = "https://api.openai.com/v1"
# the most seconds the look for a server before work waits (reach); a slower one is left to the requests
REACH_TIMEOUT_S = 10.0


class _Retryable(Exception):
    """A transient failure: try again after ``delay`` seconds (None = backoff)."""

    def __init__(self, reason: str, delay: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class _Fatal(Exception):
    """A failure of this request that retrying will not fix (e.g. 400 prompt too long)."""


class _GaveUp(_Fatal):
    """Transient failures until the retries ran out (HTTP 5xx, unreadable answers): the
    server is in trouble, which says nothing about what it can answer."""


class _RunWide(Exception):
    """A failure that concerns every request (unreachable, 401/403/404)."""


class _Stopped(Exception):
    """The run was interrupted (Ctrl-C): this request is not tried again."""


def parse_spec(spec: str) -> tuple[str, str]:
    """``openai:<model>@<base_url>`` -> (model, base_url)."""
    body = spec.removeprefix("openai:")
    model, sep, url = body.partition("@")
    model = model.strip()
    if not model:
        raise ConfigError(f"bad model spec {spec!r}: expected openai:<model>@<base_url>")
    url = url.strip() if sep else os.environ.get("OPENAI_BASE_URL", DEFAULT_BASE_URL)
    _refuse_credentials(url, "the base URL" if sep else "OPENAI_BASE_URL")
    from copyprobe.params import URL

    problem = URL().reason(url)  # scheme, host, IPv6 brackets, port a number in [1, 65535]
    if problem is not None:
        raise ConfigError(f"bad base URL in model spec {spec!r}: it {problem}; expected http(s)://host[:port]/v1")
    parsed = urllib.parse.urlparse(url)
    if parsed.path in ("", "/"):
        url = url.rstrip("/") + "/v1"
    return model, url.rstrip("/")


def _refuse_credentials(url: str, where: str = "the base URL") -> None:
    """Refuse ``http://user:secret@host/v1`` without repeating it: urllib sends no
    credentials from a URL (it would take ``user:secret@host`` for the host name), and the URL
    is written to run.json, the cache and every error message."""
    try:
        netloc = urllib.parse.urlsplit(url.strip()).netloc
    except ValueError:  # a broken URL: the URL check that follows says what is wrong
        return
    if "@" in netloc:
        raise ConfigError(f"{where} holds a user name or password (user:...@host), which would be written to "
                          "run.json and the cache and is not sent: put the API key in the environment variable "
                          "the backend reads (OPENAI_API_KEY unless api_key_env names another) and give the URL "
                          "without it")


# -- the API key: refused when an HTTP header cannot carry it, scrubbed from every text --

def _checked_key(key: str | None, env_name: str) -> str | None:
    """The key as it will be sent, or one ConfigError that says what is wrong with it
    without repeating it. A key read from a file often ends with a newline: sending it
    would fail (or be stripped by one library and not another), and the library's error
    would quote the key -- so whitespace anywhere, control characters and anything
    outside printable ASCII (what an HTTP header value can carry) are refused."""
    if key is None:
        return None
    for position, char in enumerate(key):
        if char.isspace():
            what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}.get(
                char, f"whitespace U+{ord(char):04X}")
            where = ("at its end" if position == len(key) - 1 else "at its start" if position == 0
                     else f"at character {position + 1} of {len(key)}")
            raise ConfigError(f"the API key in ${env_name} contains {what} {where}; remove it "
                              f"(a key read from a file: export {env_name}=\"$(tr -d '[:space:]' < FILE)\")")
        if not 0x21 <= ord(char) <= 0x7E:
            raise ConfigError(f"the API key in ${env_name} contains U+{ord(char):04X} at character {position + 1} "
                              f"of {len(key)}, which an HTTP header cannot carry (keys are printable ASCII)")
    return key


def _might_be_a_key(name: str) -> bool:
    """Whether a value given for a variable's name could be a key instead: not a name at
    all (sk-..., with dashes), a long one with digits and no words split by _ (AKIA...),
    or a long one mixing lower case and digits (hf_..., where variables are named in
    capitals)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return True
    if len(name) >= 16 and "_" not in name and any(c.isdigit() for c in name):  # AKIA... : no words in it
        return True
    return len(name) >= 20 and any(c.islower() for c in name) and any(c.isdigit() for c in name)


def _key_forms(key: str | None) -> tuple[str, ...]:
    """The key as it could appear in a text: itself, URL-quoted, JSON-escaped."""
    if not key:
        return ()
    forms = {key, urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key), json.dumps(key)[1:-1]}
    return tuple(sorted(forms, key=len, reverse=True))


def scrub_key(text: str, key: str | None, forms: Sequence[str] = (), min_run: int = 8) -> str:
    """``text`` without the key in any form, and without any run of ``min_run`` or more of
    its characters (a server that echoes a truncated or partly masked key, ``sk-abc...xyz``)."""
    if not key or not text:
        return text
    for form in forms or _key_forms(key):
        text = text.replace(form, "***")
    windows = [key[i:i + min_run] for i in range(max(0, len(key) - min_run + 1))]
    while True:
        hit = next(((text.find(w), i) for i, w in enumerate(windows) if w in text), None)
        if hit is None:
            return text
        at, start = hit
        length = min_run
        while start + length < len(key) and at + length < len(text) and text[at + length] == key[start + length]:
            length += 1
        text = text[:at] + "***" + text[at + length:]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _route(request: Any) -> str:
    """The endpoint a generation goes to: chat messages -> "chat", a plain prompt -> "completions"."""
    return "chat" if getattr(request, "messages", None) is not None else "completions"


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


class OpenAIBackend(Backend):
    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key_env: str | None = None,
        concurrency: int = 8,
        max_retries: int = 5,
        timeout: float = 120.0,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        prompt_logprobs: bool | None = None,
        top_logprobs: bool | None = None,
        choice_top_k: int = 20,
        spec: str | None = None,
    ):
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if isinstance(timeout, bool) or not (isinstance(timeout, (int, float)) and 0 < timeout <= 86400):
            raise SettingError("timeout", f"must be a number of seconds in (0, 86400], got {timeout!r}")
        if api_key_env is not None:  # named: the key must be there (a typo must not send no key)
            if not isinstance(api_key_env, str) or not api_key_env.strip():
                raise SettingError("api_key_env", "is empty: name the environment variable that holds the API key, "
                                                  "or leave it out for OPENAI_API_KEY")
            if _might_be_a_key(api_key_env) and not os.environ.get(api_key_env):
                # a key pasted where its variable's name goes: said without repeating it
                raise SettingError("api_key_env", f"is not the name of a set environment variable ("
                                                  f"{len(api_key_env)} characters, not repeated here in case it is "
                                                  "the key itself): export the key in a variable and give the "
                                                  "variable's name")
            if not os.environ.get(api_key_env):
                state = "is empty" if api_key_env in os.environ else "is not set"
                raise SettingError("api_key_env", f"names {api_key_env}, and that environment variable {state}: "
                                                  "export it with the API key, or leave the option out for a "
                                                  "server that needs none")
        else:  # the default: optional (local servers need no key)
            api_key_env = "OPENAI_API_KEY"
        if isinstance(base_url, str):
            _refuse_credentials(base_url)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.__key = _checked_key(os.environ.get(api_key_env) or None, api_key_env)  # never stored elsewhere
        self.__forms = _key_forms(self.__key)  # what a server or a library could echo of it
        self._probe_answers: dict[str, str] = {}  # capability -> the error a probe for it got
        # until a server has answered once, a refused connection or an unknown host name is a
        # wrong URL or a server not started, not a hiccup: said at once, not after the retries
        self._answered = False
        self._looked = False  # whether reach() has looked for the server (once is enough)
        # runs of 8 of its characters: what an answer must not hold (scrub_key's partial echoes)
        self.__windows = tuple(self.__key[i:i + 8] for i in range(len(self.__key) - 7)) if self.__key else ()
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.choice_top_k = int(choice_top_k)
        self._prompt_logprobs = prompt_logprobs
        # route ("chat" / "completions") -> does it return top-k log-probs of generated tokens
        self._top_logprobs: dict[str, bool] = {} if top_logprobs is None else {
            route: bool(top_logprobs) for route in ("chat", "completions")}
        self.spec = spec or f"openai:{model}@{self.base_url}"
        self._lock = threading.Lock()
        self.usage: dict[str, int] = {
            "requests": 0,  # HTTP requests sent, retries included
            "retries": 0,
            "failed": 0,  # requests that failed for good
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        self._sleep: Callable[[float], None] = time.sleep  # tests may replace it
        self._local = threading.local()  # .stop: the Event of the run this thread works for

    @classmethod
    def from_spec(cls, spec: str, **kwargs: Any) -> OpenAIBackend:
        model, base_url = parse_spec(spec)
        known = {
            "api_key_env", "concurrency", "max_retries", "timeout", "backoff", "max_backoff",
            "prompt_logprobs", "top_logprobs", "choice_top_k",
        }
        if "request_timeout" in kwargs:  # the Python API's name for --request-timeout
            kwargs = {**kwargs, "timeout": kwargs.pop("request_timeout")}
        options = {k: v for k, v in kwargs.items() if k in known and v is not None}
        return cls(model, base_url, spec=spec, **options)

    # -- identity --------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"openai\x1f{self.model}\x1f{self.base_url}".encode()).hexdigest()[:16]

    @property
    def capabilities(self) -> frozenset[str]:  # type: ignore[override]
        caps = {GENERATE, CHOICE_LOGPROBS}
        if self._prompt_logprobs is None or self._prompt_logprobs:  # unknown: decided in check() by probing
            caps |= {TOKEN_LOGPROBS, CONTEXT_LOGPROBS}  # a context is echoed with the text
        if len(self._top_logprobs) < 2 or any(self._top_logprobs.values()):  # one route unknown or able
            caps.add(TOP_LOGPROBS)
        return frozenset(caps)

    def probe_capabilities(self, wanted: Any = ()) -> frozenset[str]:
        """Settle by asking the server (one 1-token request each) what the capabilities
        only claim while unknown: prompt log-probs (TOKEN_LOGPROBS) and top log-probs of
        generated tokens (TOP_LOGPROBS, on /completions), for those in ``wanted``."""
        wanted = set(wanted)
        if wanted & {TOKEN_LOGPROBS, CONTEXT_LOGPROBS} and self._prompt_logprobs is None:
            self._prompt_logprobs = self.probe_prompt_logprobs()
        if TOP_LOGPROBS in wanted and "completions" not in self._top_logprobs:
            self._top_logprobs["completions"] = self.probe_top_logprobs("completions")
        return self.capabilities

    def check(self, requests: Sequence[Any]) -> None:
        self.check_to_answer(requests)
        if requests and not self._answered and not self._looked:  # no probe was needed: is anyone there?
            self.reach()

    def check_to_answer(self, requests: Sequence[Any]) -> None:
        needs_logprobs = any(TOKEN_LOGPROBS in r.capabilities() for r in requests)
        if needs_logprobs and self._prompt_logprobs is None:
            self._prompt_logprobs = self.probe_prompt_logprobs()
        routes = {_route(r) for r in requests if TOP_LOGPROBS in r.capabilities()}
        for route in sorted(routes):
            if route not in self._top_logprobs:
                self._top_logprobs[route] = self.probe_top_logprobs(route)
        lacking = sorted(route for route in routes if not self._top_logprobs[route])
        if lacking:
            path = "/chat/completions" if lacking[0] == "chat" else "/completions"
            raise CapabilityError(f"model {self.spec!r} cannot answer {TOP_LOGPROBS} requests: the server "
                                  f"returns no top log-probs of generated tokens on {path}"
                                  + self._probe_answer(TOP_LOGPROBS))
        try:
            super().check(requests)
        except CapabilityError as exc:
            raise CapabilityError(f"{exc}{self._probe_answer(TOKEN_LOGPROBS)}") from None

    def reach(self) -> None:
        """One GET of ``/models`` (once per backend, whatever came of it), so that a server
        that is not there (nothing listens, or no such host) is said before any work, or
        before another model loads. Any answer is someone there: an error status too (no
        ``/models`` route, 404; a key allowed to generate but not to list models, 401/403:
        the requests say for themselves), and a timeout is left to the requests, which retry."""
        self._looked = True
        try:
            self._send("GET", "/models", None, timeout=min(self.timeout, REACH_TIMEOUT_S))
        except _RunWide as exc:
            if not self._answered:  # nothing answered: no server there (or a URL urllib refuses)
                raise BackendError(f"model {self.spec!r}: {exc}") from None
        except (_Retryable, _Fatal):
            return

    def _probe_answer(self, capability: str) -> str:
        """'; asked, the server answered: HTTP 500 ...' where a probe for it met an error."""
        answer = self._probe_answers.get(capability)
        return f"; asked, the server answered: {answer}" if answer else ""

    def info(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "fingerprint": self.fingerprint,
            "backend": "openai-compatible",
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "api_key_set": self.__key is not None,
            "concurrency": self.concurrency,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout,
            "prompt_logprobs": self._prompt_logprobs,
            "top_logprobs": dict(self._top_logprobs),
            "usage": dict(self.usage),
        }

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    # -- HTTP ------------------------------------------------------------------------
    def _scrub_strings(self, value: Any) -> Any:
        """``value`` (parsed JSON) with the key taken out of every string in it."""
        if isinstance(value, str):
            return scrub_key(value, self.__key, self.__forms)
        if isinstance(value, list):
            return [self._scrub_strings(v) for v in value]
        if isinstance(value, dict):
            return {self._scrub_strings(k): self._scrub_strings(v) for k, v in value.items()}
        return value

    def _scrub(self, text: str) -> str:
        return " ".join(scrub_key(text, self.__key, self.__forms).split())[:300]

    def _send(self, method: str, path: str, body: dict | None, timeout: float | None = None) -> dict:
        """One HTTP exchange; raises _Retryable / _Fatal / _RunWide."""
        timeout = self.timeout if timeout is None else timeout
        url = self.base_url + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = "Bearer " + self.__key
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        with self._lock:
            self.usage["requests"] += 1
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
            self._answered = True
        except urllib.error.HTTPError as exc:
            self._answered = True
            status = exc.code
            try:
                detail = exc.read().decode("utf-8", "replace")
                parsed = json.loads(detail)
                err = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
                if isinstance(err, dict):
                    detail = str(err.get("message") or err.get("detail") or err)
                else:
                    detail = str(err)
            except Exception:
                detail = ""
            detail = self._scrub(detail or exc.reason or "")
            what = f"HTTP {status} from {self.base_url}{path}" + (f": {detail}" if detail else "")
            if status == 429 or status >= 500 or status == 408:
                raise _Retryable(what, _retry_after(exc.headers.get("Retry-After") if exc.headers else None)) from None
            if status in (401, 403):
                hint = "" if self.__key else f" (no API key: set ${self.api_key_env})"
                raise _RunWide(what + hint) from None
            if status == 404:
                raise _RunWide(what + f" (is the model name {self.model!r} and the base URL right?)") from None
            raise _Fatal(what) from None
        except TimeoutError:
            raise _Retryable(f"timed out after {timeout:g}s waiting for {self.base_url}{path}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise _Retryable(f"timed out after {timeout:g}s waiting for {self.base_url}{path}") from None
            if not self._answered and self._nobody_there(reason):
                raise _RunWide(f"cannot reach {self.base_url}: {self._scrub(str(reason))} (nothing has answered "
                               "there yet: is the server running, and the URL right?)") from None
            raise _Retryable(f"cannot reach {self.base_url}: {self._scrub(str(reason))}") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retryable(f"connection to {self.base_url} failed: {self._scrub(type(exc).__name__ + ' ' + str(exc))}") from None
        except ValueError as exc:  # a request urllib refuses to build (its text may quote a header)
            raise _RunWide(f"cannot send a request to {self.base_url}: {self._scrub(str(exc))}") from None
        try:
            text = raw.decode("utf-8")
            payload = json.loads(text)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            raise _Retryable(f"unreadable JSON from {self.base_url}{path}") from None
        if self.__key and any(w in text for w in self.__windows + self.__forms):
            # a server that echoes the request's headers into an answer: what is cached,
            # scored and reported is the answer without the key
            payload = self._scrub_strings(payload)
        if "error" in payload and "choices" not in payload and "data" not in payload:
            err = payload["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise _Fatal(f"error from {self.base_url}{path}: {self._scrub(str(msg))}")
        return payload

    def _nobody_there(self, reason: object) -> bool:
        """Whether a failed connection means no server at the URL: a host name that does
        not exist (not a resolver's temporary failure), or a refusal that a fresh
        connection gets too (a full listen queue, which some systems answer with a refusal
        under many concurrent requests, lets the fresh one in)."""
        if isinstance(reason, socket.gaierror):
            return reason.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME))
        if not isinstance(reason, ConnectionRefusedError):
            return False
        parts = urllib.parse.urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=min(self.timeout, 5.0)).close()
        except OSError:
            return True
        return False

    def _call(self, path: str, body: dict) -> dict:
        """POST with retries. Raises _Fatal (this request) or _RunWide (every request).
        Once the run is interrupted (``_stopped``), no attempt is made and no backoff waited."""
        attempt = 0
        stop = getattr(self._local, "stop", None)
        while True:
            if stop is not None and stop.is_set():
                raise _Stopped()
            try:
                payload = self._send("POST", path, body)
            except _Retryable as exc:
                if stop is not None and stop.is_set():
                    raise _Stopped() from None
                if attempt >= self.max_retries:
                    if exc.reason.startswith("cannot reach"):
                        raise _RunWide(exc.reason) from None
                    raise _GaveUp(f"{exc.reason} (gave up after {attempt + 1} attempts)") from None
                delay = exc.delay
                if delay is None:
                    delay = self.backoff * (2**attempt) * random.uniform(0.5, 1.5)
                delay = min(delay, self.max_backoff)
                with self._lock:
                    self.usage["retries"] += 1
                if stop is not None and self._sleep is time.sleep:
                    if stop.wait(delay):  # interrupted while waiting: no further attempt
                        raise _Stopped() from None
                else:
                    self._sleep(delay)
                attempt += 1
                continue
            usage = payload.get("usage") or {}
            with self._lock:
                self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
                self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            return payload

    streams_results = True  # each answer goes to the cache as it arrives (see CachedBackend)

    def _run_all(self, requests: list, one: Callable[[Any], Any], progress=None, on_result=None) -> list[Any]:
        """Answer ``requests`` with ``one``, ``concurrency`` at a time, each handed to
        ``on_result`` (the cache) as it arrives. An interruption (Ctrl-C) sets the run's stop
        event: no queued request is sent, no failed one tried again, no backoff waited; the
        worker threads are daemons, so a request hanging on a dead server holds neither the
        caller nor the process's exit (its answer would have been lost with it anyway)."""
        results: list[Any] = [None] * len(requests)
        run_wide: list[str] = []
        stop = threading.Event()

        def work(i: int) -> None:
            if run_wide:
                results[i] = RequestFailed(reason=run_wide[0])
                return
            try:
                results[i] = one(requests[i])
            except _RunWide as exc:
                run_wide.append(str(exc))
                results[i] = RequestFailed(reason=str(exc))
            except _Fatal as exc:
                with self._lock:
                    self.usage["failed"] += 1
                results[i] = RequestFailed(reason=str(exc))
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                with self._lock:
                    self.usage["failed"] += 1
                results[i] = RequestFailed(reason=f"unexpected response from {self.base_url}: {type(exc).__name__} {self._scrub(str(exc))}")

        if len(requests) == 1 or self.concurrency == 1:
            previous = getattr(self._local, "stop", None)
            self._local.stop = stop  # a KeyboardInterrupt here ends the attempt in progress itself
            try:
                for i in range(len(requests)):
                    work(i)
                    if on_result:
                        on_result(i, results[i])
                    if progress:
                        progress(1)
            finally:
                self._local.stop = previous
        else:
            todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
            done: queue.SimpleQueue[tuple[int, BaseException | None]] = queue.SimpleQueue()
            for i in range(len(requests)):
                todo.put(i)
            n_workers = min(self.concurrency, len(requests))
            for _ in range(n_workers):
                todo.put(None)

            def worker() -> None:
                self._local.stop = stop
                while not stop.is_set():
                    i = todo.get()
                    if i is None or stop.is_set():
                        return
                    try:
                        work(i)
                        done.put((i, None))
                    except _Stopped:
                        return
                    except BaseException as exc:  # a bug: handed to the caller's thread
                        done.put((i, exc))

            for _ in range(n_workers):
                threading.Thread(target=worker, name="copyprobe-openai", daemon=True).start()
            try:
                # in completion order, so each answer reaches the cache the moment it arrives
                for _ in range(len(requests)):
                    while True:
                        try:
                            i, error = done.get(timeout=0.5)  # a short wait: Ctrl-C is seen at once
                            break
                        except queue.Empty:
                            continue
                    if error is not None:
                        raise error
                    if on_result:
                        on_result(i, results[i])
                    if progress:
                        progress(1)
            finally:
                stop.set()  # normal end, error or Ctrl-C: the workers take no more requests
        if run_wide:
            raise BackendError(f"model {self.spec!r}: {run_wide[0]}")
        return results

    # -- probing ----------------------------------------------------------------------
    def probe_prompt_logprobs(self) -> bool:
        """Does ``/completions`` with echo give log-probs of the prompt's tokens?"""
        try:
            payload = self._call(
                "/completions",
                {"model": self.model, "prompt": "The quick brown fox", "max_tokens": 1,
                 "echo": True, "logprobs": 1, "temperature": 0},
            )
            lp = payload["choices"][0]["logprobs"]
            values = [v for v in lp["token_logprobs"] if v is not None]
            return len(values) >= 2
        except _RunWide as exc:
            raise BackendError(f"model {self.spec!r}: {exc}") from None
        except _GaveUp as exc:
            # llama.cpp's server says "logprobs is not supported" with HTTP 500, so a 5xx is
            # taken as "cannot"; the refusal then quotes it, as a server in trouble looks the same
            self._probe_answers[TOKEN_LOGPROBS] = str(exc)
            return False
        except (_Fatal, KeyError, IndexError, TypeError):
            return False

    def probe_top_logprobs(self, route: str = "completions") -> bool:
        """Does ``route`` ("completions" or "chat") return top-k log-probs of a generated
        token? One greedy 1-token request asking for the top 2."""
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1, "temperature": 0}
        try:
            if route == "chat":
                body.update(messages=[{"role": "user", "content": "Say yes."}], logprobs=True, top_logprobs=2)
                content = (self._call("/chat/completions", body)["choices"][0].get("logprobs") or {}).get("content")
                return bool(content and content[0].get("top_logprobs"))
            body.update(prompt="The quick brown fox", logprobs=2)
            lp = self._call("/completions", body)["choices"][0].get("logprobs") or {}
            return bool((lp.get("top_logprobs") or [None])[0])
        except _RunWide as exc:
            raise BackendError(f"model {self.spec!r}: {exc}") from None
        except _GaveUp as exc:  # as in probe_prompt_logprobs
            self._probe_answers[TOP_LOGPROBS] = str(exc)
            return False
        except (_Fatal, KeyError, IndexError, TypeError, AttributeError):
            return False

    # -- answers ----------------------------------------------------------------------
    @staticmethod
    def _messages(messages) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in messages]

    def _generate_one(self, request: GenerateRequest) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if request.top_k:
            # not part of OpenAI's API: vLLM and llama.cpp's server read it
            body["top_k"] = request.top_k
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.repetition_penalty != 1.0:
            # not part of OpenAI's API: vLLM reads repetition_penalty, llama.cpp repeat_penalty
            body["repetition_penalty"] = request.repetition_penalty
            body["repeat_penalty"] = request.repetition_penalty
        chat = request.messages is not None
        if chat:
            body["messages"] = self._messages(request.messages)
            if request.top_logprobs:
                body["logprobs"] = True
                body["top_logprobs"] = request.top_logprobs
            payload = self._call("/chat/completions", body)
            choice = payload["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
            top = None
            content = ((choice.get("logprobs") or {}).get("content")) if request.top_logprobs else None
            if content:
                top = [{t["token"]: float(t["logprob"]) for t in (item.get("top_logprobs") or [])} for item in content]
        else:
            body["prompt"] = request.prompt or ""
            if request.top_logprobs:
                body["logprobs"] = request.top_logprobs
            payload = self._call("/completions", body)
            choice = payload["choices"][0]
            text = choice.get("text") or ""
            top = None
            lp = choice.get("logprobs") if request.top_logprobs else None
            if lp and lp.get("top_logprobs"):
                top = [{k: float(v) for k, v in (d or {}).items()} for d in lp["top_logprobs"]]
        usage = payload.get("usage") or {}
        return Generation(
            text=text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            top_logprobs=top,
        )

    def _answer_generate(self, requests: list[GenerateRequest], progress=None, on_result=None) -> list[Any]:
        return self._run_all(requests, self._generate_one, progress, on_result)

    def _choice_one(self, request: ChoiceLogprobsRequest) -> ChoiceLogprobs:
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1, "temperature": 0}
        if request.messages is not None:
            body["messages"] = self._messages(request.messages)
            body["logprobs"] = True
            body["top_logprobs"] = self.choice_top_k
            payload = self._call("/chat/completions", body)
            content = ((payload["choices"][0].get("logprobs") or {}).get("content")) or []
            tops = [(t["token"], float(t["logprob"])) for t in (content[0].get("top_logprobs") or [])] if content else []
        else:
            body["prompt"] = request.prompt
            body["logprobs"] = self.choice_top_k
            payload = self._call("/completions", body)
            lp = payload["choices"][0].get("logprobs") or {}
            first = (lp.get("top_logprobs") or [None])[0] or {}
            tops = [(k, float(v)) for k, v in first.items()]
        if not tops:
            raise _RunWide(
                f"the server returned no log-probs for {'chat' if request.messages is not None else 'completion'} "
                "requests; use a mode that needs only generated text (e.g. decop.mode=blackbox)"
            )
        out: dict[str, float] = {}
        for choice in request.choices:
            matches = [v for token, v in tops if token.strip() == choice.strip() and math.isfinite(v)]
            if matches:
                out[choice] = _logsumexp(matches)
        return ChoiceLogprobs(logprobs=out)

    def _answer_choice_logprobs(self, requests: list[ChoiceLogprobsRequest], progress=None, on_result=None) -> list[Any]:
        return self._run_all(requests, self._choice_one, progress, on_result)

    def _token_logprobs_one(self, request: TokenLogprobsRequest) -> TokenLogprobs:
        if request.context:
            return self._context_logprobs_one(request)
        payload = self._call(
            "/completions",
            {"model": self.model, "prompt": request.text, "max_tokens": 1, "echo": True,
             "logprobs": 1, "temperature": 0},
        )
        choice = payload["choices"][0]
        lp = choice["logprobs"]
        tokens = list(lp["tokens"])
        values = list(lp["token_logprobs"])
        offsets = lp.get("text_offset")
        # keep the prompt's tokens only (the generated token follows them)
        n_prompt = (payload.get("usage") or {}).get("prompt_tokens")
        if offsets:
            n = sum(1 for o in offsets if o < len(request.text))
        elif n_prompt:
            n = int(n_prompt)
        else:
            n = len(tokens) - 1
        tokens, values = tokens[:n], values[:n]
        if len(tokens) < 2:
            raise _Fatal("text too short: fewer than 2 tokens")
        scored = [float(v) if v is not None else float("nan") for v in values[1:]]
        if any(math.isnan(v) for v in scored):
            raise _Fatal("the server left some prompt tokens without a log-prob")
        return TokenLogprobs(token_ids=[-1] * len(tokens), logprobs=scored, tokens=tokens)

    def _context_logprobs_one(self, request: TokenLogprobsRequest) -> TokenLogprobs:
        """Context + text sent as one echoed prompt; the tokens that end inside the
        context (``text_offset`` + length <= its length) are dropped and every other
        prompt token is scored. The server tokenizes the joined string, so a token that
        spans the boundary (" the" after a context ending in a space) counts as text."""
        prompt = request.context + request.text
        payload = self._call(
            "/completions",
            {"model": self.model, "prompt": prompt, "max_tokens": 1, "echo": True,
             "logprobs": 1, "temperature": 0},
        )
        lp = payload["choices"][0]["logprobs"]
        offsets = lp.get("text_offset")
        if not offsets:
            raise _Fatal("the server gives no text_offset: cannot tell the context's tokens from the text's")
        tokens = list(lp["tokens"])
        keep = [i for i, (o, t) in enumerate(zip(offsets, tokens))
                if o + len(t) > len(request.context) and o < len(prompt)]
        if not keep or keep[0] == 0:
            raise _Fatal("no text token after the context" if not keep else "the context has no token of its own")
        values = [lp["token_logprobs"][i] for i in keep]
        tokens = [tokens[i] for i in keep]
        if any(v is None for v in values):
            raise _Fatal("the server left some prompt tokens without a log-prob")
        return TokenLogprobs(token_ids=[-1] * len(tokens), logprobs=[float(v) for v in values], tokens=tokens)

    def _answer_token_logprobs(self, requests: list[TokenLogprobsRequest], progress=None, on_result=None) -> list[Any]:
        if self._prompt_logprobs is None:
            self._prompt_logprobs = self.probe_prompt_logprobs()
        if not self._prompt_logprobs:
            super().check(requests)  # raises CapabilityError
        return self._run_all(requests, self._token_logprobs_one, progress, on_result)
