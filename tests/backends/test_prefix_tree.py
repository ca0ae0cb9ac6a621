import functools
import itertools

import pytest

from copyprobe.backends.prefix_tree import shared_prefix_logprobs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ORDERINGS = list(itertools.permutations(range(4)))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(config).eval()


def test_shared_prefix_logprobs_equal_one_forward_pass_per_sequence(model):
    header, opts = [1, 2, 3, 4], [[10, 11, 12], [13, 14], [15, 16, 17, 18], [19]]
    sequences = [header + [t for i in perm for t in opts[i]] + [5] for perm in ORDERINGS]
    sequences += [header[:2], header + [40], header + [40]]  # a prefix of others, and duplicates
    targets = [20, 21, 22, 23]
    got = shared_prefix_logprobs(model, sequences, targets)
    with torch.no_grad():
        for seq, row in zip(sequences, got):
            logits = model(input_ids=torch.tensor([seq])).logits[0, -1]
            want = torch.log_softmax(logits, dim=-1)[targets].tolist()
            assert row == pytest.approx(want, abs=1e-4)


def test_progress_counts_each_sequence_once(model):
    sequences = [[1, 2, 3], [1, 2, 4], [1, 2], [7], [1, 2, 3]]
    counts = []
    shared_prefix_logprobs(model, sequences, [5, 6], progress=counts.append)
    assert sum(counts) == len(sequences)


def test_empty_sequence_is_refused(model):
    with pytest.raises(ValueError, match="empty"):
        shared_prefix_logprobs(model, [[1], []], [5])


def test_the_kv_cache_goes_under_the_keyword_the_forward_names():
    from copyprobe.backends.prefix_tree import _cache_keyword, run_with_cache

    class Output:
        def __init__(self, **fields):
            self.__dict__.update(fields)

    class Old:  # transformers 4.x: past_key_values in and out
        def forward(self, input_ids=None, past_key_values=None, use_cache=None):
            raise AssertionError("called through __call__")

        def __call__(self, **kwargs):
            return Output(seen=kwargs, past_key_values=("old", kwargs["past_key_values"]))

    class New:  # transformers 5.x: cache in and out (past_key_values deprecated)
        def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs):
            raise AssertionError("called through __call__")

        def __call__(self, **kwargs):
            return Output(seen=kwargs, cache=("new", kwargs["cache"]), past_key_values="deprecated")

    assert (_cache_keyword(Old()), _cache_keyword(New())) == ("past_key_values", "cache")

    def wrapper(**kwargs):  # a callable: its own signature
        return New()(**kwargs)

    assert _cache_keyword(wrapper) == "past_key_values"
    assert _cache_keyword(functools.wraps(New().forward)(wrapper)) == "cache"  # signature follows __wrapped__
    out, extended = run_with_cache(Old(), "kv", input_ids=1)
    assert out.seen == {"input_ids": 1, "past_key_values": "kv", "use_cache": True} and extended == ("old", "kv")
    out, extended = run_with_cache(New(), None, input_ids=2)
    assert out.seen == {"input_ids": 2, "cache": None, "use_cache": True} and extended == ("new", None)
