"""Hugging Face transformers backend: local model directories, hub ids and GGUF files.

One module per job:

=================  ===========================================================================
``loading``        device and dtype, weight hashing, model directories, GGUF conversion cache
``batching``       batches by memory (``batch_size="auto"``), the out-of-memory retry in halves
``backend``        :class:`HFBackend`: construction, identity, forward pass and LM head, prompts
``scoring``        token log-probs: sliding windows, n-gram contexts, streaming statistics
``generation``     greedy and seeded sampling, the one-token shortcut, stop strings
``choices``        next-token log-probs of multiple-choice answers
=================  ===========================================================================

Shared-prefix KV-cache walks (n-gram contexts, DE-COP prompts) are in
:mod:`copyprobe.backends.prefix_tree`. Nothing here imports torch or transformers until
a model is loaded.
"""

from copyprobe.backends.hf.backend import HFBackend
from copyprobe.backends.hf.generation import SeededSampler as _SeededSampler  # noqa: F401 - tests use it
from copyprobe.backends.hf.loading import (
    cache_base_dir,
    check_gguf_file,
    hash_model_dir,
    hash_parameters,
    load_gguf,
    load_gguf_tokenizer,
    quiet_transformers,
    resolve_device,
    resolve_dtype,
    sha256_file,
)

__all__ = [
    "HFBackend", "cache_base_dir", "check_gguf_file", "hash_model_dir", "hash_parameters", "load_gguf",
    "load_gguf_tokenizer", "quiet_transformers", "resolve_device", "resolve_dtype", "sha256_file",
]
