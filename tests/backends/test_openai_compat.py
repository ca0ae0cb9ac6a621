"""OpenAIBackend against a scripted OpenAI-compatible server on 127.0.0.1: request
bodies, answers of each kind, retries (429 + Retry-After, 5xx, timeouts, garbled JSON),
failures per request vs for the whole run, concurrency, and the key staying secret."""

from __future__ import annotations

import json
import math
import time

import pytest

from copyprobe.backends.base import (
    TOP_LOGPROBS,
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    GenerateRequest,
    RequestFailed,
    TokenLogprobs,
    TokenLogprobsRequest,
)
from copyprobe.backends.openai_compat import OpenAIBackend, parse_spec
from copyprobe.data.example import Example
from copyprobe.errors import BackendError, CapabilityError, ConfigError
from copyprobe.registry import make_method
from copyprobe.drive import Failure, drive

SECRET = "sk-test-very-secret-key-0123456789"


def default_answer(path: str, body: dict) -> dict:
    usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    if path.endswith("/chat/completions"):
        text = "reply to: " + body["messages"][-1]["content"]
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if body.get("logprobs"):
            k = body.get("top_logprobs", 0)
            top = [{"token": " A", "logprob": math.log(0.3)}, {"token": "A", "logprob": math.log(0.2)},
                   {"token": "B", "logprob": math.log(0.1)}, {"token": "Z", "logprob": math.log(0.05)}][:k]
            choice["logprobs"] = {"content": [{"token": " A", "logprob": math.log(0.3), "top_logprobs": top}]}
        return {"choices": [choice], "usage": usage}
    if path.endswith("/completions"):
        prompt = body["prompt"]
        if body.get("echo"):
            words = prompt.split(" ")
            tokens, offsets, pos = [], [], 0
            for i, w in enumerate(words):
                tok = w if i == 0 else " " + w
                tokens.append(tok)
                offsets.append(pos)
                pos += len(tok)
            tokens.append(" next")
            offsets.append(pos)
            lps = [None] + [-float(i) for i in range(1, len(tokens))]
            return {"choices": [{"text": prompt + " next", "logprobs": {"tokens": tokens, "token_logprobs": lps,
                    "text_offset": offsets, "top_logprobs": None}, "finish_reason": "length"}], "usage": usage}
        choice = {"text": " completion of " + prompt, "finish_reason": "length"}
        if body.get("logprobs"):
            choice["logprobs"] = {"tokens": [" C"], "top_logprobs": [{" C": math.log(0.5), " D": math.log(0.25)}]}
        return {"choices": [choice], "usage": usage}
    return {"data": [{"id": "m"}]}


@pytest.fixture
def api(fake_openai):
    """The fake server with this file's answers (fixed texts and log-probs to check against)."""
    return fake_openai(answer=default_answer)


def backend_for(api, monkeypatch, key=SECRET, **kwargs):
    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    backend = OpenAIBackend.from_spec(f"openai:tiny-model@{api.base_url}", **kwargs)
    sleeps: list[float] = []
    backend._sleep = sleeps.append  # no real waiting; record the delays
    backend.sleeps = sleeps
    return backend


# -- spec, identity, secrecy ------------------------------------------------------------------

def test_parse_spec():
    assert parse_spec("openai:gpt-4o-mini@https://api.example.com/v1") == ("gpt-4o-mini", "https://api.example.com/v1")
    assert parse_spec("openai:m@http://127.0.0.1:8000") == ("m", "http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError):
        parse_spec("openai:@http://x/v1")
    with pytest.raises(ConfigError):
        parse_spec("openai:m@ftp//nowhere")


@pytest.mark.parametrize("url", ["http://user:pw-s3cret@127.0.0.1:8000/v1", "https://pw-s3cret@api.example.com",
                                 "http://:pw-s3cret@[::1]:8000/v1"])
def test_credentials_in_the_url_are_refused_without_repeating_them(url, monkeypatch):
    # urllib would send them nowhere (it reads user:pw@host as the host name) and the spec
    # lands in run.json, the cache and error messages
    for make in (lambda: parse_spec(f"openai:m@{url}"), lambda: OpenAIBackend("m", url)):
        with pytest.raises(ConfigError, match="user name or password") as caught:
            make()
        assert "s3cret" not in str(caught.value) and "OPENAI_API_KEY" in str(caught.value)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigError, match="^OPENAI_BASE_URL holds") as caught:
        parse_spec("openai:m")
    assert "s3cret" not in str(caught.value)
    # an @ in the path is not a credential
    assert parse_spec("openai:m@http://127.0.0.1:8000/v1/@x") == ("m", "http://127.0.0.1:8000/v1/@x")


def test_fingerprint_and_info_never_hold_the_key(api, monkeypatch):
    a = backend_for(api, monkeypatch, key=SECRET)
    b = backend_for(api, monkeypatch, key="another-key")
    assert a.fingerprint == b.fingerprint  # the key does not change answers
    other = OpenAIBackend.from_spec(f"openai:other-model@{api.base_url}")
    assert other.fingerprint != a.fingerprint
    text = json.dumps(a.info()) + repr(a) + a.spec + a.fingerprint
    assert SECRET not in text and a.info()["api_key_set"] is True


def test_key_from_named_env_var_is_sent_and_none_for_local(api, monkeypatch):
    monkeypatch.setenv("MY_KEY", "k-123")
    backend = backend_for(api, monkeypatch, key=None, api_key_env="MY_KEY")
    backend.answer([GenerateRequest(prompt="hi")])
    assert api.log[-1]["headers"]["Authorization"] == "Bearer k-123"
    monkeypatch.delenv("MY_KEY")
    keyless = backend_for(api, monkeypatch, key=None)
    keyless.answer([GenerateRequest(prompt="hi")])
    assert "Authorization" not in api.log[-1]["headers"]


# -- request kinds ------------------------------------------------------------------------

def test_chat_generate_body_and_usage(api, monkeypatch):
    backend = backend_for(api, monkeypatch, top_logprobs=True)  # known: no probe in the usage
    (gen,) = backend.answer([GenerateRequest(messages=(("system", "be brief"), ("user", "hello")), max_tokens=5,
                                             temperature=0.7, seed=42, stop=("\n",), top_logprobs=2)])
    sent = api.log[-1]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    assert sent["body"]["seed"] == 42 and sent["body"]["max_tokens"] == 5 and sent["body"]["stop"] == ["\n"]
    assert sent["body"]["temperature"] == 0.7 and sent["body"]["top_logprobs"] == 2
    assert sent["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert gen.text == "reply to: hello" and gen.finish_reason == "stop"
    assert gen.prompt_tokens == 10 and gen.completion_tokens == 3
    assert gen.top_logprobs == [{" A": pytest.approx(math.log(0.3)), "A": pytest.approx(math.log(0.2))}]
    assert backend.usage["prompt_tokens"] == 10 and backend.usage["completion_tokens"] == 3


def test_top_k_is_sent_only_when_set(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    backend.answer([GenerateRequest(prompt="one", temperature=1.0, seed=1, top_k=50)])
    assert api.log[-1]["body"]["top_k"] == 50
    backend.answer([GenerateRequest(prompt="two", temperature=1.0, seed=1)])
    assert "top_k" not in api.log[-1]["body"]  # OpenAI's own API refuses unknown fields


def test_completion_generate_without_seed(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    gens = backend.answer([GenerateRequest(prompt="one"), GenerateRequest(prompt="two")])
    assert [g.text for g in gens] == [" completion of one", " completion of two"]
    assert all(r["path"] == "/v1/completions" and "seed" not in r["body"] for r in api.log)
    assert backend.usage == {"requests": 2, "retries": 0, "failed": 0, "prompt_tokens": 20, "completion_tokens": 6}


def test_choice_logprobs_sum_token_variants(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    chat, completion = backend.answer([
        ChoiceLogprobsRequest(messages=(("user", "pick"),), choices=("A", "B", "C", "D")),
        ChoiceLogprobsRequest(prompt="pick", choices=("A", "B", "C", "D")),
    ])
    # " A" and "A" are the same answer: log(0.3 + 0.2); C and D are not in the top-k
    assert chat == ChoiceLogprobs({"A": pytest.approx(math.log(0.5)), "B": pytest.approx(math.log(0.1))})
    assert completion.logprobs == {"C": pytest.approx(math.log(0.5)), "D": pytest.approx(math.log(0.25))}
    by_path = {r["path"]: r["body"] for r in api.log}  # sent concurrently: any order
    chat_body = by_path["/v1/chat/completions"]
    assert chat_body["max_tokens"] == 1 and chat_body["top_logprobs"] == 20 and chat_body["temperature"] == 0
    assert by_path["/v1/completions"]["logprobs"] == 20 and by_path["/v1/completions"]["max_tokens"] == 1


def test_choice_logprobs_without_logprobs_is_one_clear_error(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    plain = json.dumps({"choices": [{"message": {"content": "A"}, "finish_reason": "length"}]})
    api.script = [("status", 200, {}, plain)] * 3
    with pytest.raises(BackendError, match="no log-probs.*decop.mode=blackbox"):
        backend.answer([ChoiceLogprobsRequest(messages=(("user", "pick"),), choices=("A", "B"))] * 3)


def test_token_logprobs_via_echo_drops_the_generated_token(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    (tl,) = backend.answer([TokenLogprobsRequest(text="the cat sat down", stats=False)])
    assert isinstance(tl, TokenLogprobs)
    assert tl.tokens == ["the", " cat", " sat", " down"]
    assert tl.logprobs == [-1.0, -2.0, -3.0]  # the first token is context only
    assert len(tl.token_ids) == 4 and tl.mu is None
    echo = api.log[-1]["body"]
    assert echo["echo"] is True and echo["logprobs"] == 1 and echo["prompt"] == "the cat sat down"


def test_capabilities_distribution_stats_never_and_prompt_logprobs_probed(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    with pytest.raises(CapabilityError, match="distribution_stats"):
        backend.check([TokenLogprobsRequest(text="a b c", stats=True)])
    with pytest.raises(CapabilityError, match="ngram_logprobs"):
        backend.check([TokenLogprobsRequest(text="a b c", stats=False, ngram=2)])
    backend.check([TokenLogprobsRequest(text="a b c", stats=False)])  # probe says yes
    probes = [r for r in api.log if r["body"].get("echo")]
    assert len(probes) == 1
    backend.check([TokenLogprobsRequest(text="x y", stats=False)])
    assert len([r for r in api.log if r["body"].get("echo")]) == 1  # probed once

    no_echo = backend_for(api, monkeypatch)
    api.script = [("status", 400, {}, json.dumps({"error": {"message": "echo not supported"}}))]
    with pytest.raises(CapabilityError, match="token_logprobs"):
        no_echo.check([TokenLogprobsRequest(text="a b c", stats=False)])
    fixed = backend_for(api, monkeypatch, prompt_logprobs=False)
    with pytest.raises(CapabilityError):
        fixed.answer([TokenLogprobsRequest(text="a b c", stats=False)])


def test_top_logprobs_probed_once_per_route_and_refused_before_any_request(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    assert TOP_LOGPROBS in backend.capabilities  # unknown until a request needs it
    backend.check([GenerateRequest(prompt="a b", max_tokens=1, top_logprobs=5)])
    probes = list(api.log)
    assert [r["path"] for r in probes] == ["/v1/completions"]
    assert probes[0]["body"]["logprobs"] == 2 and probes[0]["body"]["max_tokens"] == 1
    backend.check([GenerateRequest(prompt="c d", max_tokens=1, top_logprobs=5), GenerateRequest(prompt="e")])
    assert len(api.log) == 1  # probed once; a request without top log-probs needs no probe
    backend.check([GenerateRequest(messages=(("user", "hi"),), top_logprobs=2)])
    assert [r["path"] for r in api.log[1:]] == ["/v1/chat/completions"]
    assert backend.info()["top_logprobs"] == {"chat": True, "completions": True}

    # a server that generates but sends no log-probs: refused at the check, before the method's requests
    plain = json.dumps({"choices": [{"text": " x", "finish_reason": "length"}], "usage": {}})
    silent = backend_for(api, monkeypatch)
    api.script = [("status", 200, {}, plain)]
    method = make_method("topk_loss")
    with pytest.raises(CapabilityError, match="top_logprobs.*/completions"):
        drive({"x": method.run(Example("x", "some words to score here"))}, lambda spec: silent)
    assert not [r for r in api.log if r["body"].get("prompt", "").startswith("some")]
    assert TOP_LOGPROBS in silent.capabilities  # the chat route is still unknown
    fixed = backend_for(api, monkeypatch, top_logprobs=False)
    sent = len(api.log)
    with pytest.raises(CapabilityError, match="top_logprobs"):
        fixed.answer([GenerateRequest(prompt="a b", max_tokens=1, top_logprobs=5)])
    assert len(api.log) == sent and TOP_LOGPROBS not in fixed.capabilities
    assert fixed.answer([GenerateRequest(prompt="a b")])[0].text  # plain generation still works


@pytest.mark.parametrize("trouble", [("status", 500, {}, '{"error": {"message": "model crashed"}}'), ("garbled",)])
@pytest.mark.parametrize("probe", ["prompt", "top"])
def test_a_probe_that_met_server_errors_quotes_them_in_the_refusal(api, monkeypatch, trouble, probe):
    """llama.cpp's server refuses prompt log-probs with HTTP 500 ("logprobs is not
    supported ..."), so a probe that meets 5xx answers takes the capability as missing (audit
    --method auto then picks another score); the refusal says what the server answered, so a
    server in trouble is not mistaken for one without the capability."""
    backend = backend_for(api, monkeypatch, max_retries=1)
    api.script = [trouble, trouble]
    request = (TokenLogprobsRequest(text="a b c", stats=False) if probe == "prompt"
               else GenerateRequest(prompt="a b", max_tokens=1, top_logprobs=5))
    with pytest.raises(CapabilityError) as caught:
        backend.check([request])
    message = str(caught.value)
    assert "cannot answer" in message and "asked, the server answered:" in message
    assert "gave up after 2 attempts" in message
    assert ("HTTP 500" in message and "model crashed" in message) if trouble[0] == "status" else "unreadable JSON" in message
    plain = backend_for(api, monkeypatch, max_retries=1)  # a server that simply lacks it: nothing quoted
    api.script = [("status", 400, {}, json.dumps({"error": {"message": "echo not supported"}}))]
    if probe == "prompt":
        with pytest.raises(CapabilityError) as caught:
            plain.check([request])
        assert "asked, the server answered" not in str(caught.value)


def test_min_k_pp_fails_before_any_request(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    method = make_method("min_k_pp")
    with pytest.raises(CapabilityError, match="distribution_stats"):
        drive({"x": method.run(Example("x", "some words to score here"))}, lambda spec: backend)
    assert not [r for r in api.log if r["body"].get("prompt") == "some words to score here"]


# -- retries and failures -------------------------------------------------------------------

def test_429_honours_retry_after(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    api.script = [("status", 429, {"Retry-After": "3"}, '{"error": {"message": "slow down"}}')]
    (gen,) = backend.answer([GenerateRequest(prompt="x")])
    assert gen.text == " completion of x"
    assert backend.sleeps == [3.0] and backend.usage["retries"] == 1 and backend.usage["requests"] == 2


def test_5xx_exponential_backoff_with_jitter(api, monkeypatch):
    backend = backend_for(api, monkeypatch, backoff=1.0)
    api.script = [("status", 500, {}, "oops"), ("status", 502, {}, ""), ("status", 503, {}, "")]
    (gen,) = backend.answer([GenerateRequest(prompt="x")])
    assert gen.text == " completion of x"
    assert len(backend.sleeps) == 3
    for i, delay in enumerate(backend.sleeps):
        assert 0.5 * 2**i <= delay <= 1.5 * 2**i


def test_timeout_is_retried(api, monkeypatch):
    backend = backend_for(api, monkeypatch, timeout=0.3)
    api.script = [("sleep", 1.0)]
    (gen,) = backend.answer([GenerateRequest(prompt="x")])
    assert gen.text == " completion of x" and backend.usage["retries"] == 1


def test_garbled_json_then_failure_after_retries_is_per_request(api, monkeypatch):
    backend = backend_for(api, monkeypatch, max_retries=2, concurrency=1)
    api.script = [("garbled",)] * 3  # the first request gets all three
    first, second = backend.answer([GenerateRequest(prompt="bad"), GenerateRequest(prompt="good")])
    assert isinstance(first, RequestFailed)
    assert "unreadable JSON" in first.reason and "gave up after 3 attempts" in first.reason
    assert second.text == " completion of good"
    assert backend.usage["failed"] == 1 and backend.usage["retries"] == 2


def test_dropped_connection_is_retried(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    api.script = [("close",)]
    (gen,) = backend.answer([GenerateRequest(prompt="x")])
    assert gen.text == " completion of x" and backend.usage["retries"] == 1


def test_400_fails_that_request_without_retry(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    api.script = [("status", 400, {}, json.dumps({"error": {"message": "context length exceeded"}}))]
    (result,) = backend.answer([GenerateRequest(prompt="x")])
    assert isinstance(result, RequestFailed) and "HTTP 400" in result.reason and "context length exceeded" in result.reason
    assert backend.usage["retries"] == 0


def test_wrong_model_and_auth_errors_stop_the_run_and_hide_the_key(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    api.script = [("status", 404, {}, json.dumps({"error": {"message": "model tiny-model not found"}}))]
    with pytest.raises(BackendError, match="404.*model name 'tiny-model'") as info:
        backend.answer([GenerateRequest(prompt="x")])
    # a server that echoes the key back in its error text
    api.script = [("status", 401, {}, json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}}))]
    with pytest.raises(BackendError, match="401") as info:
        backend.answer([GenerateRequest(prompt="x")])
    assert SECRET not in str(info.value) and "***" in str(info.value)


def test_unreachable_server_is_one_clear_error(monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = OpenAIBackend.from_spec(f"openai:m@http://127.0.0.1:{port}/v1", max_retries=1)
    backend._sleep = lambda s: None
    with pytest.raises(BackendError, match="cannot reach") as info:
        backend.answer([GenerateRequest(prompt="x"), GenerateRequest(prompt="y")])
    assert "\n" not in str(info.value) and SECRET not in str(info.value)


def test_a_refused_connection_is_said_at_once_before_any_answer_and_retried_after_one(api, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    never = backend_for(api, monkeypatch, max_retries=5)
    never.base_url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendError, match="Connection refused.*is the server running"):
        never.answer([GenerateRequest(prompt="x")])
    assert never.usage["requests"] == 1 and never.sleeps == []  # no retry, no wait
    # a server that has answered once and then goes away (a restart) is waited for
    backend = backend_for(api, monkeypatch, max_retries=2)
    assert backend.answer([GenerateRequest(prompt="x")])[0].text == " completion of x"
    api.close()
    with pytest.raises(BackendError, match="cannot reach"):
        backend.answer([GenerateRequest(prompt="y")])
    assert backend.usage["requests"] == 1 + 3 and len(backend.sleeps) == 2


def test_check_of_generation_alone_looks_for_the_server_once(api, monkeypatch):
    """Generation needs no probe, so check() sent nothing and an absent server was found
    only by the first request, after another model had loaded (a reference model: 15 s).
    check() now sends one GET /models; answer() needs none (its first request tells)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    absent = backend_for(api, monkeypatch, max_retries=5)
    absent.base_url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(BackendError, match="cannot reach .*is the server running") as info:
        absent.check([GenerateRequest(prompt="x")])
    assert absent.usage["requests"] == 1 and absent.sleeps == [] and SECRET not in str(info.value)

    backend = backend_for(api, monkeypatch)
    backend.check([])  # nothing to answer: nothing sent
    assert api.gets == []
    backend.check([GenerateRequest(prompt="x")])
    backend.check([GenerateRequest(prompt="y")])  # someone answered: not asked again
    assert api.gets == ["/v1/models"] and api.log == []
    assert backend.answer([GenerateRequest(prompt="x")])[0].text == " completion of x"

    direct = backend_for(api, monkeypatch)
    direct.answer([GenerateRequest(prompt="x")])
    assert api.gets == ["/v1/models"] and len(api.log) == 2  # answer() alone sent no GET

    probed = backend_for(api, monkeypatch)
    probed.check([TokenLogprobsRequest("a b c")])  # the probe found the server: no GET besides
    assert api.gets == ["/v1/models"]


def test_with_the_server_down_the_prompt_log_probs_the_cache_shows_stand_for_its_answer(api, monkeypatch, tmp_path):
    """audit's method auto probes the server for prompt log-probs, so an audit rerun whose
    answers were all cached failed with the server down. A server that answers is still
    asked (another server may answer at the same URL now); one that cannot be reached is
    taken at what its stored answers show, and nothing else."""
    from copyprobe.backends.base import TOKEN_LOGPROBS
    from copyprobe.backends.cache import CachedBackend, ResponseCache

    def echoes() -> int:
        return len([r for r in api.log if r["body"].get("echo")])

    cache = ResponseCache(tmp_path / "c.sqlite")
    texts = [TokenLogprobsRequest("the cat sat down", stats=False)]
    first = CachedBackend(backend_for(api, monkeypatch), cache)
    assert TOKEN_LOGPROBS in first.probe_capabilities({TOKEN_LOGPROBS})  # asked
    first.answer(texts)
    assert echoes() == 2  # the probe and the answer

    up = CachedBackend(backend_for(api, monkeypatch), cache)
    assert TOKEN_LOGPROBS in up.probe_capabilities({TOKEN_LOGPROBS}) and echoes() == 3  # up: asked again

    url = api.base_url
    api.close()
    down = CachedBackend(OpenAIBackend.from_spec(f"openai:tiny-model@{url}"), cache)  # same fingerprint
    assert TOKEN_LOGPROBS in down.probe_capabilities({TOKEN_LOGPROBS})
    down.check(texts)
    assert down.answer(texts)[0].logprobs == [-1.0, -2.0, -3.0] and down.hits == 1
    assert down.backend.info()["prompt_logprobs"] is None  # not known this run
    with pytest.raises(BackendError, match="cannot reach"):  # what the answers do not show is not assumed
        down.probe_capabilities({TOKEN_LOGPROBS, TOP_LOGPROBS})
    empty = CachedBackend(OpenAIBackend.from_spec(f"openai:tiny-model@{url}"),
                          ResponseCache(tmp_path / "empty.sqlite"))
    with pytest.raises(BackendError, match="cannot reach"):  # nothing of it stored
        empty.probe_capabilities({TOKEN_LOGPROBS})
    told = CachedBackend(OpenAIBackend.from_spec(f"openai:tiny-model@{url}", prompt_logprobs=False), cache)
    assert TOKEN_LOGPROBS not in told.probe_capabilities({TOKEN_LOGPROBS})  # the user's word wins


def test_the_look_for_a_server_takes_any_answer_as_someone_there_and_looks_once(fake_openai, monkeypatch):
    """A 401/403 from /models may be a key allowed to generate but not to list models, and a
    404 a server without the route: someone is there, and the requests say for themselves.
    A look that gets no answer in time is not repeated (drive checks every round)."""
    server = fake_openai(answer=default_answer, api_key=SECRET)
    wrong = backend_for(server, monkeypatch, key="sk-wrong-key-0123456789abcdef")
    wrong.check([GenerateRequest(prompt="x")])
    assert server.gets == ["/v1/models"]
    with pytest.raises(BackendError, match="HTTP 401") as info:  # the first request says it, at once
        wrong.answer([GenerateRequest(prompt="x")])
    assert "sk-wrong-key-0123456789abcdef" not in str(info.value) and wrong.usage["requests"] == 2
    server.has_models_route = False
    right = backend_for(server, monkeypatch)
    right.check([GenerateRequest(prompt="x")])
    assert server.gets == ["/v1/models"] * 2 and right.answer([GenerateRequest(prompt="x")])[0].text

    server.has_models_route, server.get_delay = True, 1.0
    slow = backend_for(server, monkeypatch, timeout=0.3)
    for _ in range(3):
        slow.check([GenerateRequest(prompt="x")])  # the look timed out: the requests will retry
    assert server.gets == ["/v1/models"] * 3 and slow.usage["requests"] == 1


@pytest.mark.parametrize("reason", ["refused but listening", "temporary name failure"])
def test_a_first_failure_that_is_no_missing_server_is_retried(api, monkeypatch, reason):
    """A refusal while a fresh connection gets in (a full listen queue), and a resolver's
    temporary failure, are retried even before the server's first answer."""
    import socket
    import urllib.error
    import urllib.request

    real = urllib.request.urlopen
    failures = [ConnectionRefusedError(111, "Connection refused") if reason.startswith("refused")
                else socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")]

    def flaky(*args, **kwargs):
        if failures:
            raise urllib.error.URLError(failures.pop())
        return real(*args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", flaky)
    backend = backend_for(api, monkeypatch, max_retries=2)
    assert backend.answer([GenerateRequest(prompt="x")])[0].text == " completion of x"
    assert backend.usage["retries"] == 1 and len(backend.sleeps) == 1


def test_requests_run_concurrently(api, monkeypatch):
    backend = backend_for(api, monkeypatch, concurrency=8)
    api.delay = 0.3  # long enough that a serial client could never overlap two requests
    done = []
    gens = backend.answer([GenerateRequest(prompt=f"p{i}") for i in range(8)], progress=done.append)
    assert [g.text for g in gens] == [f" completion of p{i}" for i in range(8)]  # order kept
    assert sum(done) == 8
    assert api.peak_in_flight >= 2  # several requests were in flight at once
    serial = backend_for(api, monkeypatch, concurrency=1)
    # a handler counts itself out only after the client has its answer: wait for the server
    # to finish the first run's handlers, or one of them is counted with the serial run's
    deadline = time.monotonic() + 10
    while api.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    api.peak_in_flight = 0
    serial.answer([GenerateRequest(prompt=f"q{i}") for i in range(3)])
    assert api.peak_in_flight == 1


def test_failed_request_fails_only_its_row_in_the_runner(api, monkeypatch):
    backend = backend_for(api, monkeypatch, max_retries=0, concurrency=1)
    api.script = [("status", 503, {}, "")]
    method = make_method("prefix_probe", prefix_tokens=3)
    examples = [Example("a", "w0 w1 w2 w3 w4 w5"), Example("b", "v0 v1 v2 v3 v4 v5")]
    results = drive({e.id: method.run(e) for e in examples}, lambda spec: backend)
    assert isinstance(results["a"], Failure) and "HTTP 503" in results["a"].reason
    assert not isinstance(results["b"], Failure) and 0 <= results["b"].value <= 1


def test_token_logprobs_after_a_context_send_both_and_drop_the_context_tokens(api, monkeypatch):
    backend = backend_for(api, monkeypatch)
    (tl,) = backend.answer([TokenLogprobsRequest(text="the cat sat", context="prefix words ")])
    echo = api.log[-1]["body"]
    assert echo["echo"] is True and echo["prompt"] == "prefix words the cat sat"
    # the fake server's tokens: "prefix" " words" " the" " cat" " sat" (+ generated " next");
    # " the" starts on the context's trailing space but ends in the text, so it is scored
    assert tl.tokens == [" the", " cat", " sat"]
    assert tl.logprobs == [-2.0, -3.0, -4.0]  # every text token, none dropped as first
    assert len(tl.token_ids) == len(tl.logprobs)
