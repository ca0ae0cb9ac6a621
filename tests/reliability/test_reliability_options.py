"""Option values checked where they are declared (copyprobe.params): devices that are not
present here, URLs and ports, seeds and counts -- the same words on the command line, in
--param and through the Python API, and no traceback for any of them."""

from __future__ import annotations

import argparse

import pytest

from copyprobe.errors import ConfigError
from copyprobe.params import PORT, SEED, URL, Device, option_type


@pytest.mark.parametrize("url, words", [
    ("http://[::1/v1", "Invalid IPv6 URL"),
    ("http://[::1]:80x/v1", "has port '80x'"),
    ("http://host:abc/v1", "has port 'abc'"),
    ("http://host:0/v1", "has port '0'"),
    ("http://host:65536/v1", "has port '65536'"),
    ("http://host:-1/v1", "has port '-1'"),
    ("ftp://host/v1", "must be a URL"),
    ("http:///v1", "must be a URL"),
    ("http://host/v\t1", "without spaces or control characters"),
    ("", "must be a URL"),
])
def test_bad_urls_are_refused_with_the_reason(url, words):
    from copyprobe.backends.openai_compat import parse_spec

    assert words in URL().reason(url)
    with pytest.raises(ConfigError, match="bad base URL") as info:
        parse_spec(f"openai:m@{url}" if url else "openai:m@ ")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("url", ["http://[::1]:8080/v1", "https://api.example.com/v1", "http://127.0.0.1:1/v1",
                                 "http://host:65535/v1", "http://host:/v1"])
def test_good_urls_pass(url):
    from copyprobe.backends.openai_compat import parse_spec

    assert URL().reason(url) is None
    assert parse_spec(f"openai:m@{url}")[1].startswith(url.rstrip("/"))


def test_port_constraint_bounds():
    assert [PORT.check(p) for p in (0, 1, 65535, 65536, True)] == [False, True, True, False, False]


class _FakeCuda:
    def __init__(self, n):
        self.n = n

    def is_available(self):
        return self.n > 0

    def device_count(self):
        return self.n


@pytest.mark.parametrize("gpus, value, ok", [
    (0, "cuda", False), (0, "cuda:0", False), (1, "cuda:0", True), (1, "cuda:1", False),
    (2, "cuda:1", True), (2, "cuda:7", False), (2, "cuda", True),
])
def test_cuda_devices_must_exist_here(monkeypatch, gpus, value, ok):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch, "cuda", _FakeCuda(gpus))
    problem = Device().reason(value)
    assert (problem is None) == ok, problem
    if not ok:
        assert value in problem and ("no CUDA GPU" in problem or f"has {gpus} CUDA GPU" in problem)


def test_mps_is_refused_for_scoring_and_checked_for_training(monkeypatch):
    torch = pytest.importorskip("torch")
    assert "scoring cannot use" in Device().reason("mps")

    class NoMps:
        @staticmethod
        def is_available():
            return False

    monkeypatch.setattr(torch.backends, "mps", NoMps, raising=False)
    assert "no MPS device" in Device(("cuda", "mps")).reason("mps")


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "cuda:-1", "cpu:0", "mps:1", "", 3])
def test_unknown_devices(value):
    assert "must be one of" in Device(("cuda", "mps")).reason(value)


def test_auto_and_cpu_never_import_torch(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # an import would fail
    assert Device().reason("auto") is None and Device().reason("cpu") is None
    assert "PyTorch is not installed" in Device().reason("cuda")


def test_load_backend_checks_the_device_before_loading(monkeypatch):
    """Through the Python API too: a device missing here is one ConfigError before any weights load."""
    from copyprobe.backends import specs

    monkeypatch.setattr(specs, "resolve_local", lambda spec: specs.LocalModel(spec, "gguf", "/nonexistent.gguf"))
    with pytest.raises(ConfigError, match="device 'mps'|device is 'mps'"):
        specs.load_backend("gguf:/nonexistent.gguf", device="mps")


@pytest.mark.parametrize("raw, words", [("-1", "must be an integer in [0, 4294967295], got -1"),
                                        (str(2**32), "must be an integer in [0, 4294967295]"),
                                        ("1e3", "expected an integer"), ("9" * 5000, "expected an integer")])
def test_seed_option(raw, words):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        option_type(SEED, "--seed")(raw)
    assert words in str(info.value).replace('"', "'")


def test_plant_device_is_checked_at_parse_time(capsys):
    from copyprobe.cli.main import main

    code = main(["plant", "--model", "smollm2-135m-instruct", "--corpus", "x.txt", "--out", "o", "--device", "tpu"])
    err = capsys.readouterr().err
    assert code == 2 and "argument --device: must be one of auto, cpu, cuda, cuda:N, mps, got 'tpu'" in err
    assert "Traceback" not in err
