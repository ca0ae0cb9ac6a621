"""Loading costs (issue 34 item 5): remembered file hashes, weights read onto a GPU
directly, and a model named twice in one run loaded once."""

from __future__ import annotations

import functools
import os

import pytest
import torch
from model_helpers import make_byte_tokenizer, make_tiny_model

from copyprobe import hub
from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.backends.hf import HFBackend, loading
from copyprobe.session import Session


@pytest.fixture
def memo_dir(tmp_path, monkeypatch):
    """A fresh cache directory and remembered-hash file, with every file 'large'."""
    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "HASH_MEMO_MIN_BYTES", 1)
    monkeypatch.setattr(loading, "_hash_memo", None)
    reads: list[str] = []
    real = loading._read_sha256

    def counted(file):
        reads.append(file.name)
        return real(file)

    monkeypatch.setattr(loading, "_read_sha256", counted)
    return reads


def direct_sha256(path) -> str:
    import hashlib

    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_a_large_files_hash_is_remembered_until_the_file_changes(memo_dir, tmp_path, monkeypatch):
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"a" * 4096)
    first = loading.sha256_file(weights)
    assert first == direct_sha256(weights) and memo_dir == ["weights.bin"]
    assert loading.sha256_file(weights) == first and memo_dir == ["weights.bin"]  # not read again
    # another process reads the remembered hash from the cache directory
    monkeypatch.setattr(loading, "_hash_memo", None)
    assert loading.sha256_file(weights) == first and len(memo_dir) == 1
    # same size, content changed, modification time put back: the status-change time moved
    stat = weights.stat()
    with open(weights, "r+b") as handle:
        handle.write(b"b")
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = loading.sha256_file(weights)
    assert changed == direct_sha256(weights) != first and len(memo_dir) == 2
    # replaced by another file (a new inode) with the same bytes: hashed again, same hash
    replacement = tmp_path / "new.bin"
    replacement.write_bytes(weights.read_bytes())
    os.replace(replacement, weights)
    assert loading.sha256_file(weights) == changed and len(memo_dir) == 3


def test_small_files_are_always_read(memo_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "HASH_MEMO_MIN_BYTES", 1 << 20)
    config = tmp_path / "config.json"
    config.write_text("{}")
    loading.sha256_file(config)
    loading.sha256_file(config)
    assert memo_dir == ["config.json", "config.json"]
    assert not (tmp_path / "cache" / loading.HASH_MEMO_FILE).exists()


def test_a_damaged_hash_file_is_ignored(memo_dir, tmp_path):
    memo = tmp_path / "cache" / loading.HASH_MEMO_FILE
    memo.parent.mkdir(parents=True)
    memo.write_text("{not json")
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"x" * 100)
    assert loading.sha256_file(weights) == direct_sha256(weights)
    assert str(weights.resolve()) in memo.read_text()


def test_model_directory_fingerprint_reads_the_weights_once(memo_dir, tmp_path):
    directory = tmp_path / "tiny"
    make_tiny_model().save_pretrained(directory)
    make_byte_tokenizer().save_pretrained(directory)
    first = loading.hash_model_dir(directory)
    assert "model.safetensors" in memo_dir and "config.json" in memo_dir
    reads = len(memo_dir)
    assert loading.hash_model_dir(directory) == first
    assert len(memo_dir) == reads  # nothing read again (every file counts as large here)


def test_weights_are_read_onto_a_gpu_directly(monkeypatch, tmp_path):
    import transformers

    directory = tmp_path / "tiny"
    make_tiny_model().save_pretrained(directory)
    make_byte_tokenizer().save_pretrained(directory)
    calls = []
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        calls.append(kwargs.get("device_map"))
        kwargs.pop("device_map", None)  # no GPU here: load on the CPU after recording the request
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    loading.load_pretrained(str(directory), torch.float32, "cuda:0")
    loading.load_pretrained(str(directory), torch.float32, "cpu")
    loading.load_pretrained(str(directory), torch.float32)
    assert calls == ["cuda:0", None, None]


def test_a_gguf_named_twice_in_one_run_is_loaded_once(tiny_gguf, tmp_path, monkeypatch):
    from copyprobe.backends.hf import backend as hf_backend

    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    loads = []
    real = hf_backend.load_gguf

    def counted(*args, **kwargs):
        loads.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(hf_backend, "load_gguf", counted)
    link = tmp_path / "same-file.gguf"
    link.symlink_to(tiny_gguf)
    monkeypatch.chdir(tiny_gguf.parent)
    with Session(f"gguf:{tiny_gguf}", cache=False, device="cpu", dtype="float32") as session:
        reference = session.backend_for(f"gguf:{link}")  # another spelling of the same file
        again = session.backend_for(f"gguf:./{tiny_gguf.name}")
        assert len(loads) == 1
        assert reference.spec == f"gguf:{link}" and again.spec == f"gguf:./{tiny_gguf.name}"
        assert reference.fingerprint == session.target.fingerprint
        assert reference.model is session.target.model
        request = [TokenLogprobsRequest("the cat sat")]
        assert reference.answer(request) == session.target.answer(request)
        _, others = session.model_info()
        assert set(others) == {f"gguf:{link}", f"gguf:./{tiny_gguf.name}"}
    # a different file is loaded
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_gguf.read_bytes())
    with Session(f"gguf:{tiny_gguf}", cache=False, device="cpu", dtype="float32") as session:
        session.backend_for(f"gguf:{other}")
    assert len(loads) == 3


def test_a_renamed_backend_shares_the_model_under_its_own_name():
    backend = HFBackend(make_tiny_model(), make_byte_tokenizer(), spec="one", device="cpu", dtype="float32")
    twin = backend.renamed("two")
    assert (twin.spec, backend.spec) == ("two", "one")
    assert twin.model is backend.model and twin.fingerprint == backend.fingerprint
    assert twin.info()["spec"] == "two"


def test_checkpoints_of_equal_size_differ_above_a_gigabyte(memo_dir, tmp_path):
    # two epochs of one fine-tune: the same file names and sizes, other bytes; sparse
    # files of 1.1 GiB (the size above which weights were once identified by size alone)
    size = (1 << 30) + (100 << 20)
    hashes = []
    for name, byte in (("epoch1", b"\x01"), ("epoch2", b"\x02")):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "config.json").write_text('{"model_type": "llama"}')
        with open(directory / "model.safetensors", "wb") as handle:
            handle.seek(size // 2)
            handle.write(byte)
            handle.truncate(size)
        hashes.append(loading.hash_model_dir(directory))
    assert hashes[0] != hashes[1]


def test_the_gguf_conversion_draws_no_bar_of_its_own(monkeypatch, capsys):
    # transformers draws it with tqdm directly, past disable_progress_bar; --no-progress means none
    pytest.importorskip("gguf")
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    from copyprobe.backends.hf.loading import _quiet_gguf_conversion_bar

    monkeypatch.setattr(gguf_utils, "tqdm", gguf_utils.tqdm)  # restored after the test
    monkeypatch.delenv("COPYPROBE_VERBOSE", raising=False)
    _quiet_gguf_conversion_bar()
    _quiet_gguf_conversion_bar()  # twice: wrapped once
    assert list(gguf_utils.tqdm(range(3), desc="Converting")) == [0, 1, 2]
    assert "Converting" not in capsys.readouterr().err
    assert not isinstance(gguf_utils.tqdm.func, functools.partial)


# -- a hub id without a network ------------------------------------------------------


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """No hub (every connection refused) and an empty hub cache of our own."""
    import socket

    import huggingface_hub.constants

    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                 "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    probed: list = []

    def refuse(address, *args, **kwargs):
        probed.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub.forget_unreachable()  # a host another test found unreachable is probed again here
    yield probed
    hub.forget_unreachable()


def test_a_hub_id_not_in_the_cache_is_refused_at_once_when_the_hub_cannot_be_reached(no_hub):
    from copyprobe.errors import BackendError

    with pytest.raises(BackendError) as caught:
        HFBackend.from_pretrained("copyprobe-test/absent", device="cpu")
    message = str(caught.value)
    assert "'copyprobe-test/absent'" in message and "hub cannot be reached (huggingface.co:" in message
    assert "not in the local cache" in message and "\n" not in message
    assert no_hub[0] == ("huggingface.co", 443)  # the probe, before transformers starts
    with pytest.raises(BackendError, match=r"cannot load the tokenizer of 'copyprobe-test/absent': the Hugging Face hub"):
        loading.load_pretrained_tokenizer("copyprobe-test/absent")


def test_a_cached_hub_model_loads_without_the_hub(no_hub, tmp_path):
    """What users with a hub cache expect offline: the cached copy, the same model."""
    model = make_tiny_model()
    snapshot = tmp_path / "hub" / "models--copyprobe-test--tiny" / "snapshots" / ("0" * 40)
    model.save_pretrained(snapshot)
    make_byte_tokenizer().save_pretrained(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    backend = HFBackend.from_pretrained("copyprobe-test/tiny", device="cpu", dtype="float32")
    assert no_hub  # probed, found unreachable, read from the cache
    assert loading.context_length(loading.load_config("hf", "copyprobe-test/tiny")) == 128  # plant's look
    request = TokenLogprobsRequest("a cached model")
    expected = HFBackend(model, make_byte_tokenizer(), device="cpu", dtype="float32").answer([request])[0]
    assert backend.answer([request])[0].logprobs == pytest.approx(expected.logprobs, abs=1e-6)


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"TRANSFORMERS_OFFLINE": "true"}])
def test_offline_mode_is_left_to_transformers_without_a_probe(no_hub, monkeypatch, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert loading.hub_options("copyprobe-test/tiny", None) == ({}, None) and no_hub == []


def test_a_model_directory_is_never_probed_for(no_hub, tmp_path):
    assert loading.hub_options(str(tmp_path), tmp_path) == ({}, None) and no_hub == []
