"""Shared by the plant tests: a tiny random Llama with a one-token-per-word tokenizer, the
plant command line for it, and readers of what plant writes."""

from __future__ import annotations

import json

from copyprobe.cli.main import main

WORDS = [f"w{i}" for i in range(60)]


def make_tiny_model(path, context: int = 64) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=context,
                      tie_word_embeddings=True, pad_token_id=1, eos_token_id=2, bos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)


def args(tiny, out, *extra):
    return ["plant", "--model", f"hf:{tiny / 'model'}", "--corpus", str(tiny / "book.txt"),
            "--passage-tokens", "16", "--epochs", "2", "--lr", "1e-2", "--batch-size", "2",
            "--no-progress", "--out", str(out), *extra]


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith(("copyprobe: error:", "copyprobe plant: error:"))]
    assert len(lines) == 1
    return lines[0]
