"""The HF backend's batch tokenization (``batch_token_ids``): the Rust tokenizer's ids
where that is what the transformers call would give, the call itself everywhere else."""

from __future__ import annotations

import pytest
from model_helpers import make_byte_tokenizer

from copyprobe.backends.hf.scoring import _plain_rust_tokenizer, batch_token_ids

TEXTS = [
    "Hello world",
    "",
    " ",
    "naïve café 日本語 🎉\n\n\ttabs",
    "<s> a text that names the start token </s> and the end one",
    "<|im_start|>user\nhi<|im_end|>",
    "<bos><eos> x",
    "word " * 700,  # longer than any model's window here: no truncation
]


def _called(tokenizer, texts, **options):
    return [list(ids) for ids in tokenizer(texts, **options).input_ids]


@pytest.mark.parametrize("name", ["byte", pytest.param("smollm2", marks=pytest.mark.model),
                                  pytest.param("gemma", marks=pytest.mark.model)])
def test_the_rust_path_gives_the_ids_of_the_call(request, name):
    tokenizer = make_byte_tokenizer() if name == "byte" else request.getfixturevalue(name).tokenizer
    assert _plain_rust_tokenizer(tokenizer) is not None, "this tokenizer should take the Rust path"
    got = batch_token_ids(tokenizer, TEXTS)
    assert got == _called(tokenizer, TEXTS)
    assert all(type(ids) is list for ids in got)
    assert len(got[-1]) > 700  # nothing cut
    # texts after a context (ReCaLL's) without the leading special tokens, as a call per text gave them
    bare = batch_token_ids(tokenizer, TEXTS, add_special_tokens=False)
    assert bare == [list(tokenizer(text, add_special_tokens=False).input_ids) for text in TEXTS]
    if name != "smollm2":  # SmolLM2 adds no special tokens; the byte tokenizer and Gemma add <s> / <bos>
        assert bare != got


def test_a_tokenizer_set_to_truncate_is_called_as_the_call_would_be():
    tokenizer = make_byte_tokenizer()
    tokenizer.backend_tokenizer.enable_truncation(max_length=4)
    assert _plain_rust_tokenizer(tokenizer) is None
    # the call sets the Rust tokenizer back to no truncation, so the ids are whole
    assert batch_token_ids(tokenizer, ["abcdefgh"]) == [[0, *[tokenizer.convert_tokens_to_ids(c) for c in "abcdefgh"]]]
    assert tokenizer.backend_tokenizer.truncation is None


def test_split_special_tokens_is_followed():
    tokenizer = make_byte_tokenizer()
    texts = ["x </s> y"]
    whole = batch_token_ids(tokenizer, texts)
    assert 1 in whole[0]  # </s> read as the special token
    tokenizer.split_special_tokens = True
    split = batch_token_ids(tokenizer, texts)  # the Rust tokenizer is not yet set so: the call sets it
    assert split == _called(tokenizer, texts) and 1 not in split[0]
    assert _plain_rust_tokenizer(tokenizer) is not None
    assert batch_token_ids(tokenizer, texts) == split


def test_a_tokenizer_with_its_own_call_is_called():
    from transformers import PreTrainedTokenizerFast

    class Marking(PreTrainedTokenizerFast):
        def _encode_plus(self, *args, **kwargs):
            encoded = super()._encode_plus(*args, **kwargs)
            encoded["input_ids"] = [[*ids, 1] for ids in encoded["input_ids"]]
            return encoded

    base = make_byte_tokenizer()
    tokenizer = Marking(tokenizer_object=base.backend_tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    assert _plain_rust_tokenizer(tokenizer) is None
    assert batch_token_ids(tokenizer, ["ab"]) == [[0, *base("ab", add_special_tokens=False).input_ids, 1]]


def test_a_plain_callable_tokenizer_is_called():
    class Plain:
        def __call__(self, texts):
            return type("Encoded", (), {"input_ids": [(len(t),) for t in texts]})()

    assert batch_token_ids(Plain(), ["ab", "c"]) == [[2], [1]]
    assert batch_token_ids(make_byte_tokenizer(), []) == []


def test_the_call_is_given_the_special_tokens_option_only_when_it_is_off():
    seen = []

    class Plain:  # a tokenizer without the option still tokenizes plain texts
        def __call__(self, texts, **options):
            seen.append(options)
            return type("Encoded", (), {"input_ids": [(len(t),) for t in texts]})()

    batch_token_ids(Plain(), ["ab"])
    batch_token_ids(Plain(), ["ab"], add_special_tokens=False)
    assert seen == [{}, {"add_special_tokens": False}]
    tokenizer = make_byte_tokenizer()
    tokenizer.backend_tokenizer.enable_truncation(max_length=40)  # the call's path
    assert batch_token_ids(tokenizer, ["ab", "c"], add_special_tokens=False) == _called(
        tokenizer, ["ab", "c"], add_special_tokens=False) != _called(tokenizer, ["ab", "c"])
