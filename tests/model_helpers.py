"""Small random models and files for tests (imported by conftest.py and tests).

A uniquely named module rather than ``from conftest import ...``: several directories
have a conftest.py, and under pytest's default import mode that name is ambiguous.
"""

from __future__ import annotations


def make_byte_tokenizer():
    """A byte-level tokenizer (every UTF-8 byte one token) that puts <s> before each text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<s>": 0, "</s>": 1, "<pad>": 2}
    vocab.update({char: i + 3 for i, char in enumerate(alphabet)})
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def make_tiny_model(kind: str = "llama", context: int = 128, seed: int = 0):
    """A random causal LM over the byte tokenizer's 259 ids. ``gemma2`` has final-logit
    soft-capping, which the backend must apply like the model does."""
    import torch
    from transformers import AutoModelForCausalLM, Gemma2Config, LlamaConfig

    common = {"vocab_size": 259, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": context,
              "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}
    if kind == "llama":
        config = LlamaConfig(**common)
    elif kind == "gemma2":
        config = Gemma2Config(**common, head_dim=8, final_logit_softcapping=3.0, sliding_window=context)
    else:
        raise ValueError(kind)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    # the default init (std 0.02) gives almost equal logits; larger weights spread them
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:
                param.mul_(8.0)
    return model.eval()


def make_tiny_backend(kind: str = "llama", **options):
    from copyprobe.backends.hf import HFBackend

    options.setdefault("device", "cpu")
    options.setdefault("dtype", "float32")
    return HFBackend(make_tiny_model(kind), make_byte_tokenizer(), spec=f"tiny-{kind}", **options)


def write_tiny_gguf(path, seed: int = 0):
    """Write a random 2-layer llama GGUF (float32, 259 byte-level tokens + 1 merge)."""
    import gguf
    import numpy as np
    from tokenizers import pre_tokenizers

    rng = np.random.default_rng(seed)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = ["<s>", "</s>", *alphabet, "\u0120t"]  # "\u0120t" = " t", the result of the one merge
    writer = gguf.GGUFWriter(str(path), "llama")
    hidden, ffn, kv = 32, 64, 16
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(2)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(8)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * 2 + [gguf.TokenType.NORMAL] * (len(tokens) - 2))
    writer.add_token_merges(["\u0120 t"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)

    def random(name, *shape):
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))

    random("token_embd.weight", len(tokens), hidden)
    for block in range(2):
        writer.add_tensor(f"blk.{block}.attn_norm.weight", np.ones(hidden, np.float32))
        writer.add_tensor(f"blk.{block}.ffn_norm.weight", np.ones(hidden, np.float32))
        random(f"blk.{block}.attn_q.weight", hidden, hidden)
        random(f"blk.{block}.attn_k.weight", kv, hidden)
        random(f"blk.{block}.attn_v.weight", kv, hidden)
        random(f"blk.{block}.attn_output.weight", hidden, hidden)
        random(f"blk.{block}.ffn_gate.weight", ffn, hidden)
        random(f"blk.{block}.ffn_up.weight", ffn, hidden)
        random(f"blk.{block}.ffn_down.weight", hidden, ffn)
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    random("output.weight", len(tokens), hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def load_llamacpp(spec: str, **options):
    """A llama.cpp backend of ``spec`` (``llamacpp:<file or alias>``), with
    ``$COPYPROBE_TEST_THREADS`` threads when set; skips the test when llama-cpp-python or
    the model file is missing (the reason names the pip command)."""
    import os

    import pytest

    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install 'copyprobe[llamacpp]'")
    from copyprobe.backends.specs import load_backend, resolve_local
    from copyprobe.errors import BackendError

    try:
        resolve_local(spec)
    except BackendError as exc:
        pytest.skip(str(exc))
    threads = os.environ.get("COPYPROBE_TEST_THREADS")
    return load_backend(spec, n_threads=int(threads) if threads else None, **options)


# Three texts a pretrained model has seen many times and three it cannot have: the smoke
# set of the methods' end-to-end tests on smollm2.
FAMOUS_AND_NONSENSE = [
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago, never mind how long precisely, I went to sea.",
    "In the beginning God created the heaven and the earth.",
    "The purple umbrella negotiated quietly with seven reluctant spreadsheets.",
    "Our quarterly widget audit found fourteen mislabeled crates in bay nine.",
    "Marigold tax forms swam beneath the humming archive of forgotten lunches.",
]


# Three short texts and the formulas' reference computation for the method tests on the
# tiny random model: each method's score against an unbatched forward pass.
SHORT_TEXTS = ["The cat sat on the mat and looked at the rain outside.",
               "Seven reluctant spreadsheets negotiated quietly with a purple umbrella.",
               "In the beginning was the word, and the word was with God."]


def forward(backend, text):
    """(token ids, log-prob of each scored token, full log-softmax rows) from one plain forward pass."""
    import numpy as np
    import torch

    ids = backend.tokenizer(text).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(backend.model(torch.tensor([ids])).logits[0].double(), -1)
    values = np.array([logprobs[p - 1, ids[p]].item() for p in range(1, len(ids))])
    return ids, values, logprobs[:-1]


def score_texts(backend, name, params=None, texts=SHORT_TEXTS):
    """({id: score}, the detect result) of one method on ``texts`` (ids "0", "1", ...)."""
    import copyprobe
    from copyprobe.data.example import Example
    from copyprobe.session import Session

    examples = [Example(id=str(i), text=t) for i, t in enumerate(texts)]
    result = copyprobe.detect(Session(backend, cache=False), examples, [name],
                              params={name: params} if params else None, n_bootstrap=0, blind_baseline=False)
    return dict(zip(result.scores["id"], result.scores[name])), result


def model_fixture(request, name: str = "smollm2"):
    """The session fixture ``name`` of tests/conftest.py (skip where there is none)."""
    import pytest

    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        pytest.skip(f"needs the {name} fixture of tests/conftest.py")
