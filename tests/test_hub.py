"""The hub probe: one connection attempt, named when it fails, skipped behind a proxy;
hub datasets asked for only when the hub can be reached and no offline switch is on."""

from __future__ import annotations

import socket

import pytest

from copyprobe import hub
from copyprobe.data import datasets

SWITCHES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy", "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "COPYPROBE_OFFLINE", "HF_ENDPOINT")


@pytest.fixture
def plain_env(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    hub.forget_unreachable()
    yield monkeypatch
    hub.forget_unreachable()


@pytest.fixture
def listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_listening_endpoint_is_reachable_and_a_closed_one_is_named(plain_env, listening):
    plain_env.setenv("HF_ENDPOINT", listening)
    assert hub.hub_unreachable() is None
    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        plain_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{probe.getsockname()[1]}")
        why = hub.hub_unreachable()
    assert why is not None and why.startswith("127.0.0.1: ") and "\n" not in why


def test_the_default_hub_is_huggingface_co_on_443(plain_env):
    asked = []

    def refuse(address, *args, **kwargs):
        asked.append(address)
        raise socket.gaierror(-2, "Name or service not known")

    plain_env.setattr(socket, "create_connection", refuse)
    assert hub.hub_unreachable() == "huggingface.co: gaierror: [Errno -2] Name or service not known"
    assert asked == [("huggingface.co", 443)]


@pytest.mark.parametrize("proxy", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_nothing_is_probed_behind_a_proxy(plain_env, proxy):
    plain_env.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed behind a proxy"))
    plain_env.setenv(proxy, "http://proxy.example:3128")
    assert hub.hub_unreachable() is None


def test_an_http_proxy_counts_only_for_an_http_endpoint(plain_env):
    asked = []

    def refuse(address, *args, **kwargs):
        asked.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    plain_env.setattr(socket, "create_connection", refuse)
    plain_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    plain_env.setenv("HF_ENDPOINT", "http://mirror.example")
    assert hub.hub_unreachable() is None and asked == []  # the client would go through the proxy
    plain_env.setenv("HF_ENDPOINT", "https://mirror.example")
    assert hub.hub_unreachable().startswith("mirror.example: ") and asked == [("mirror.example", 443)]


@pytest.mark.parametrize("value,on", [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False),
                                      ("false", False), ("", False), ("no", False)])
def test_offline_switches_read_as_huggingface_hub_reads_them(plain_env, value, on):
    plain_env.setenv("HF_HUB_OFFLINE", value)
    assert hub.offline_by_env("HF_HUB_OFFLINE", "COPYPROBE_OFFLINE") is on


def test_hub_datasets_need_a_reachable_hub_and_no_offline_switch(plain_env, listening):
    plain_env.setenv("HF_ENDPOINT", listening)
    assert datasets._hub_allowed()
    plain_env.setenv("COPYPROBE_OFFLINE", "1")
    assert not datasets._hub_allowed()
    plain_env.delenv("COPYPROBE_OFFLINE")
    plain_env.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    assert not datasets._hub_allowed()
    plain_env.setenv("HTTP_PROXY", "http://proxy.example:3128")  # the proxy may reach it (an http endpoint)
    assert datasets._hub_allowed()


@pytest.mark.parametrize("endpoint,said", [("https://x:99999", "HF_ENDPOINT 'https://x:99999' is not a URL: ValueError"),
                                           ("https://[::1", "HF_ENDPOINT 'https://[::1' is not a URL: ValueError"),
                                           ("localhost:9", "HF_ENDPOINT 'localhost:9' is not a URL (scheme://host[:port])"),
                                           ("https://a..b", "a..b: UnicodeError")])  # IDNA refuses the name
def test_a_malformed_endpoint_is_named_not_raised(plain_env, endpoint, said):
    plain_env.setenv("HF_ENDPOINT", endpoint)
    assert hub.hub_unreachable().startswith(said)
    assert not datasets._hub_allowed()


def test_an_unreachable_host_is_probed_once_a_minute(plain_env):
    asked = []
    now = [1000.0]

    def refuse(address, *args, **kwargs):
        asked.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    plain_env.setattr(socket, "create_connection", refuse)
    plain_env.setattr(hub.time, "monotonic", lambda: now[0])
    first = hub.hub_unreachable()
    assert first.startswith("huggingface.co: ") and hub.hub_unreachable() == first and len(asked) == 1
    plain_env.setenv("HF_ENDPOINT", "https://mirror.example")  # another host is its own probe
    assert hub.hub_unreachable().startswith("mirror.example: ") and len(asked) == 2
    plain_env.delenv("HF_ENDPOINT")
    now[0] += hub.REMEMBER_UNREACHABLE_S
    assert hub.hub_unreachable() == first and len(asked) == 3  # a minute on: asked again
    plain_env.setattr(socket, "create_connection", lambda *a, **k: _Closing())
    hub.forget_unreachable()
    assert hub.hub_unreachable() is None


class _Closing:
    def close(self):
        pass
