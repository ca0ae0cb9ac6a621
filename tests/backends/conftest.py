"""Fixtures of the backend contract tests (tests/backends/test_contract.py).

``llamacpp_tiny`` and ``hf_tiny_gguf`` run the same random float32 GGUF (conftest's
``tiny_gguf``) through llama.cpp and through transformers: fast, and the two must agree
almost exactly. ``llamacpp_smollm2`` (``model``) runs the GGUF file that the ``smollm2``
fixture converts; ``llamacpp_qwen`` (``bigmodel``) the Qwen2.5-Coder-0.5B-Instruct alias.
The llama.cpp fixtures skip when llama-cpp-python is not installed.
"""

from __future__ import annotations

import os

import pytest


def _threads() -> int | None:
    value = os.environ.get("COPYPROBE_TEST_THREADS")
    return int(value) if value else None


def _llamacpp(spec: str, **options):
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install 'copyprobe[llamacpp]'")
    from copyprobe.backends.specs import load_backend, resolve_local
    from copyprobe.errors import BackendError

    try:
        resolve_local(spec)
    except BackendError as exc:  # the message names the pip command that installs it
        pytest.skip(str(exc))
    return load_backend(spec, n_threads=_threads(), **options)


@pytest.fixture(scope="session")
def llamacpp_tiny(tiny_gguf):
    # f32 KV cache: with llama.cpp's default f16 one, log-probs move by up to ~1e-2
    backend = _llamacpp(f"llamacpp:{tiny_gguf}", chunk=16, kv_type="f32")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def hf_tiny_gguf(tiny_gguf):
    from copyprobe.backends.hf import HFBackend

    return HFBackend.from_gguf(tiny_gguf, device="cpu", dtype="float32", batch_size=3)


@pytest.fixture(scope="session")
def llamacpp_smollm2():
    backend = _llamacpp("llamacpp:smollm2-135m-instruct")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def llamacpp_qwen():
    backend = _llamacpp("llamacpp:qwen2.5-coder-0.5b-instruct", max_length=1024)
    yield backend
    backend.close()
