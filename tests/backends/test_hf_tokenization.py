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


# -- many plain texts: the longest tokenized first, the rest while they run ----------------


def _many_requests(n: int):
    from copyprobe.backends.base import TokenLogprobsRequest

    # distinct texts of 8 to about n + 4 characters, not in length order
    return [TokenLogprobsRequest(f"{i:03d} " + "ab c" * ((i * 37) % n // 4 + 1)) for i in range(n)]


def test_later_texts_are_all_but_the_longest_plain_ones_longest_first():
    from copyprobe.backends.base import TokenLogprobsRequest
    from copyprobe.backends.hf import scoring

    requests = _many_requests(600)
    requests.append(TokenLogprobsRequest("x" * 10, context="a context"))  # never later
    requests.append(TokenLogprobsRequest("y" * 10, ngram=2))  # never later
    later = scoring.later_texts(requests)
    assert len(later) == 600 - scoring.FIRST_TEXTS and set(later) <= set(range(600))
    lengths = [len(requests[i].text) for i in later]
    assert lengths == sorted(lengths, reverse=True)
    first_plain = set(range(600)) - set(later)
    assert min(len(requests[i].text) for i in first_plain) >= lengths[0]
    assert scoring.later_texts(requests[:scoring.FIRST_TEXTS * 2]) == []  # too few left: no thread


def test_later_texts_are_tokenized_on_a_thread_after_the_first_batches_with_the_same_answers(monkeypatch):
    import threading

    from model_helpers import make_tiny_backend

    from copyprobe.backends.base import TokenLogprobsRequest
    from copyprobe.backends.hf import HFBackend, scoring

    backend = make_tiny_backend(batch_size=32)
    requests = _many_requests(600)
    requests += [TokenLogprobsRequest(requests[5].text, context="Shared. "),
                 TokenLogprobsRequest(requests[7].text, context="Shared. "),
                 TokenLogprobsRequest(requests[9].text, ngram=3), TokenLogprobsRequest(requests[9].text)]
    monkeypatch.setattr(scoring, "FIRST_TEXTS", 10**6)
    expected = backend.answer(requests)  # everything tokenized before the first batch

    monkeypatch.setattr(scoring, "FIRST_TEXTS", 64)
    monkeypatch.setattr(scoring, "LATER_CHUNK", 200)
    events = []
    real_tokenize, real_plan, real_hidden = scoring.batch_token_ids, HFBackend._plan, HFBackend._hidden

    def tokenize(tokenizer, texts, add_special_tokens=True):
        events.append(("tokenize", threading.current_thread() is threading.main_thread(), len(texts)))
        return real_tokenize(tokenizer, texts, add_special_tokens)

    def plan(self, *args):
        events.append(("plan", len(args[-2])))
        return real_plan(self, *args)

    def hidden(self, *args, **kwargs):
        events.append(("forward",))
        return real_hidden(self, *args, **kwargs)

    monkeypatch.setattr(scoring, "batch_token_ids", tokenize)
    monkeypatch.setattr(HFBackend, "_plan", plan)
    monkeypatch.setattr(HFBackend, "_hidden", hidden)
    answers = backend.answer(requests)
    later = scoring.later_texts(requests)
    # the later texts (each distinct one once), on another thread
    chunks = [later[i:i + scoring.LATER_CHUNK] for i in range(0, len(later), scoring.LATER_CHUNK)]
    assert len(chunks) == 3
    off_main = [e[2] for e in events if e[0] == "tokenize" and not e[1] and e[2]]
    assert off_main == [len({requests[i].text for i in chunk}) for chunk in chunks]  # each distinct text once
    on_main = [e for e in events if e[0] != "tokenize" or e[1]]
    plans = [i for i, e in enumerate(on_main) if e[0] == "plan"]
    assert [on_main[i][1] for i in plans] == [len(requests) - len(later), *map(len, chunks)]
    for before, after in zip(plans, plans[1:]):  # batches ran before each chunk was planned
        assert ("forward",) in on_main[before:after]
    for got, want in zip(answers, expected):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
        assert got.mu == pytest.approx(want.mu, abs=1e-5)
        assert got.sigma == pytest.approx(want.sigma, abs=1e-5)


def test_an_error_of_the_tokenizer_thread_reaches_the_caller(monkeypatch):
    import threading

    from model_helpers import make_tiny_backend

    from copyprobe.backends.hf import scoring

    real = scoring.batch_token_ids

    def failing_off_the_main_thread(tokenizer, texts, add_special_tokens=True):
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("tokenizer broke")
        return real(tokenizer, texts, add_special_tokens)

    monkeypatch.setattr(scoring, "batch_token_ids", failing_off_the_main_thread)
    handed = []
    with pytest.raises(RuntimeError, match="tokenizer broke"):
        make_tiny_backend(batch_size=32).answer(_many_requests(600), on_result=lambda i, answer: handed.append(i))
    # the answers finished before the error were handed over (the response cache commits them)
    assert 0 < len(handed) < 600


def test_a_context_too_long_among_many_texts_is_refused_before_any_work(monkeypatch):
    from model_helpers import make_tiny_backend

    from copyprobe.backends.base import TokenLogprobsRequest
    from copyprobe.backends.hf import HFBackend
    from copyprobe.errors import ConfigError

    backend = make_tiny_backend(batch_size=32)
    forwards = []
    real = HFBackend._hidden
    monkeypatch.setattr(HFBackend, "_hidden", lambda self, *a, **k: forwards.append(1) or real(self, *a, **k))
    requests = _many_requests(600) + [TokenLogprobsRequest("a text", context="word " * backend.max_length)]
    with pytest.raises(ConfigError, match="must be shorter than max length"):
        backend.answer(requests)
    assert forwards == []
