"""Shared fixtures.

Model fixtures (``smollm2``, ``gemma``) load the GGUF files shipped in pip packages; tests
that use them carry ``@pytest.mark.model``. They skip, with the pip command to run, when
the package is missing. The converted models are kept in copyprobe's normal cache
directory (see ``copyprobe.backends.hf.load_gguf``), so only the first run pays the
~30 s conversion.

``tiny_llama`` / ``tiny_gemma2`` are random few-kilobyte models with a byte-level
tokenizer that adds a BOS token: fast, need no files, and exercise the same code paths.
``tiny_gguf`` is a random llama-architecture GGUF file (float32 tensors, byte-level
"gpt2" tokenizer) for testing GGUF loading and its conversion cache in seconds.

``fake_openai`` starts the one fake OpenAI-compatible server (``fake_openai.py``):
``fake_openai(corpus=..., api_key=..., answer=...)``; every server started is closed
after the test.
"""

from __future__ import annotations

import os

import pytest
from fake_openai import FakeOpenAIServer
from model_helpers import (  # noqa: F401
    make_byte_tokenizer,
    make_tiny_backend,
    make_tiny_model,
    write_tiny_gguf,
)

# On a machine whose cores are busy with other work, OpenMP threads spin-waiting for
# them make a forward pass 10-15x slower than one thread does (measured: 7 s vs 0.5 s
# for 8 tokens); set COPYPROBE_TEST_THREADS=1 there. A quiet CI machine uses them all.
if os.environ.get("COPYPROBE_TEST_THREADS"):
    import torch

    torch.set_num_threads(int(os.environ["COPYPROBE_TEST_THREADS"]))


@pytest.fixture
def fake_openai():
    servers = []

    def start(**kwargs) -> FakeOpenAIServer:
        server = FakeOpenAIServer(**kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _alias_backend(alias: str, **options):
    from copyprobe.backends.specs import alias_path, load_backend
    from copyprobe.errors import BackendError

    try:
        alias_path(alias)
    except BackendError as exc:  # the message names the pip command that installs it
        pytest.skip(str(exc))
    return load_backend(alias, device="cpu", dtype="float32", **options)


@pytest.fixture(scope="session")
def smollm2():
    """HFBackend for smollm2-135m-instruct (no leading special tokens), batch size 4."""
    backend = _alias_backend("smollm2-135m-instruct", batch_size=4)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def gemma():
    """HFBackend for gemma-3-270m (adds <bos>; 262k vocabulary; no chat template), batch size 4."""
    backend = _alias_backend("gemma-3-270m", batch_size=4)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def tiny_llama():
    return make_tiny_backend("llama", batch_size=3)


@pytest.fixture(scope="session")
def tiny_gemma2():
    return make_tiny_backend("gemma2", batch_size=3)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
