"""MemFree decoding (Ippolito et al., 2023; CopyBench §5.2, B.2) as a transformers LogitsProcessor.

At every decoding step the processor looks at the last ``n - 1`` tokens of each sequence
(prompt included) and sets to -inf the score of every next token that would complete an
``n``-gram of the protected corpus, so no protected token ``n``-gram is ever emitted
(n = 10 by default). Deviation: the released code's sampler (src/vllm_memfree_sampler.py)
looks at generated tokens only, so the first ``n - 1`` tokens of an output are never
checked; here an output that continues its prompt into protected text is blocked from its
first token (why the default corpus joins each prefix to its reference:
:meth:`copyprobe.copying.data.CopySet.protected_corpus`). Which tokens complete an n-gram
is looked up in an index of token n-gram hashes:

* ``kind="set"``: a dict from the 64-bit hash of each (n-1)-token prefix to the set of
  tokens that follow it in the corpus — exact up to 64-bit hash collisions, which can only
  block more, never less;
* ``kind="bloom"``: a Bloom filter holding the hashes of the corpus n-grams and of their
  prefixes, for corpora too large for a dict (a few bits per n-gram). When a prefix may be
  present, every vocabulary entry is tested at once (vectorised). False positives block a
  harmless token now and then; there are no false negatives, so the guarantee holds.

Nothing protected, or a prefix that is not in the corpus: the scores are returned untouched.

Known limits (Ippolito et al.): the guarantee is about token n-grams under the model's
tokenizer. The same words tokenized differently, or with small changes (case, spelling,
punctuation), are not blocked, so MemFree removes verbatim copying, not near-verbatim or
non-literal copying.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from copyprobe.errors import ConfigError

MASK = (1 << 64) - 1
_P = 0x100000001B3  # FNV prime: polynomial base
_PREFIX_SALT = 0x5BD1E9955BD1E995


def _mix(z: int) -> int:
    """splitmix64 finaliser on a Python int."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _mix_np(z: np.ndarray) -> np.ndarray:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def prefix_hash(tokens: Sequence[int]) -> int:
    """Polynomial hash (mod 2**64) of a token sequence; extendable one token at a time."""
    h = 0
    for t in tokens:
        h = (h * _P + int(t) + 1) & MASK
    return h


def extend_hash(h: int, token: int) -> int:
    return (h * _P + int(token) + 1) & MASK


class BloomFilter:
    """A Bloom filter over 64-bit keys (double hashing on the mixed key)."""

    def __init__(self, capacity: int, fp_rate: float = 1e-4):
        capacity = max(capacity, 1)
        if not 0 < fp_rate < 1:
            raise ConfigError("Bloom filter false-positive rate must be in (0, 1)")
        self.m = max(64, int(math.ceil(-capacity * math.log(fp_rate) / (math.log(2) ** 2))))
        self.k = max(1, int(round(self.m / capacity * math.log(2))))
        self.bits = np.zeros((self.m + 7) // 8, dtype=np.uint8)
        self.capacity = capacity
        self.fp_rate = fp_rate

    def _positions(self, keys: np.ndarray) -> np.ndarray:
        mixed = _mix_np(keys.astype(np.uint64))
        h1 = mixed & np.uint64(0xFFFFFFFF)
        h2 = (mixed >> np.uint64(32)) | np.uint64(1)
        i = np.arange(self.k, dtype=np.uint64)
        return ((h1[:, None] + i[None, :] * h2[:, None]) % np.uint64(self.m)).astype(np.int64)

    def add(self, keys: Iterable[int]) -> None:
        arr = np.fromiter((int(k) for k in keys), dtype=np.uint64)
        if arr.size == 0:
            return
        pos = self._positions(arr).ravel()
        np.bitwise_or.at(self.bits, pos >> 3, (1 << (pos & 7)).astype(np.uint8))

    def contains_many(self, keys: np.ndarray) -> np.ndarray:
        if keys.size == 0:
            return np.zeros(0, dtype=bool)
        pos = self._positions(keys)
        bit = (self.bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return bit.all(axis=1)

    def __contains__(self, key: int) -> bool:
        return bool(self.contains_many(np.array([key], dtype=np.uint64))[0])


class NgramIndex:
    """The protected corpus as token n-gram hashes (see the module docstring)."""

    def __init__(self, n: int = 10, kind: str = "set", capacity: int | None = None, fp_rate: float = 1e-4):
        if n < 2:
            raise ConfigError("MemFree n must be at least 2")
        if kind not in ("set", "bloom"):
            raise ConfigError(f"unknown MemFree index {kind!r} (set or bloom)")
        self.n = n
        self.kind = kind
        self.n_ngrams = 0
        self._next: dict[int, set[int]] = {}
        self._bloom = BloomFilter(capacity or 1_000_000, fp_rate) if kind == "bloom" else None
        self._digest = hashlib.sha256(f"memfree:{n}".encode())

    @property
    def empty(self) -> bool:
        return self.n_ngrams == 0

    def fingerprint(self) -> str:
        """Identifies the protected n-grams (for cache keys): the same corpus, same value."""
        return self._digest.hexdigest()[:16]

    def add(self, token_ids: Sequence[int]) -> None:
        ids = [int(t) for t in token_ids]
        n = self.n
        if len(ids) < n:
            return
        self._digest.update(np.asarray(ids, dtype=np.int64).tobytes() + b"|")
        keys_full, keys_prefix = [], []
        for i in range(len(ids) - n + 1):
            ph = prefix_hash(ids[i : i + n - 1])
            nxt = ids[i + n - 1]
            if self._next is not None and self.kind == "set":
                self._next.setdefault(ph, set()).add(nxt)
            else:
                keys_prefix.append(ph ^ _PREFIX_SALT)
                keys_full.append(extend_hash(ph, nxt))
            self.n_ngrams += 1
        if self._bloom is not None:
            self._bloom.add(keys_prefix)
            self._bloom.add(keys_full)

    def contains(self, ngram: Sequence[int]) -> bool:
        """Whether an n-gram (exactly n tokens) is protected (Bloom: possibly protected)."""
        if len(ngram) != self.n:
            raise ValueError(f"expected {self.n} tokens")
        ph = prefix_hash(ngram[:-1])
        if self.kind == "set":
            return int(ngram[-1]) in self._next.get(ph, ())
        return (ph ^ _PREFIX_SALT) in self._bloom and extend_hash(ph, ngram[-1]) in self._bloom

    def blocked(self, prefix: Sequence[int], vocab_size: int) -> list[int]:
        """Tokens that would complete a protected n-gram after ``prefix`` (its last n-1 tokens)."""
        if self.empty or len(prefix) < self.n - 1:
            return []
        ph = prefix_hash(prefix[len(prefix) - (self.n - 1) :])
        if self.kind == "set":
            return sorted(t for t in self._next.get(ph, ()) if 0 <= t < vocab_size)
        if (ph ^ _PREFIX_SALT) not in self._bloom:
            return []
        cand = np.arange(vocab_size, dtype=np.uint64)
        keys = cand + np.uint64((ph * _P + 1) & MASK)  # == extend_hash(ph, t) for every t (wraps mod 2**64)
        return np.nonzero(self._bloom.contains_many(keys))[0].tolist()

    def add_texts(self, texts: Iterable[str], tokenizer: Any) -> None:
        for text in texts:
            self.add(tokenizer(text, add_special_tokens=False)["input_ids"])


def _base_class():
    try:
        from transformers import LogitsProcessor

        return LogitsProcessor
    except ImportError:  # pragma: no cover
        return object


class MemFreeLogitsProcessor(_base_class()):
    """Reject next tokens that complete a protected n-gram (see the module docstring).

    Built either from an index, or deferred: ``MemFreeLogitsProcessor.deferred(texts)``
    can be handed to a backend before the model (and so the tokenizer) is loaded, and is
    then ``bind(tokenizer)``-ed; its fingerprint depends only on the texts and settings.
    """

    def __init__(self, index: NgramIndex | None, texts: Sequence[str] | None = None, n: int = 10,
                 kind: str = "set", **index_options: Any):
        self.index = index
        self.n_rejections = 0  # (row, step) pairs where at least one token was rejected
        self._texts = list(texts) if texts is not None else None
        self._n = index.n if index is not None else n
        self._kind = index.kind if index is not None else kind
        self._options = index_options
        if index is None and self._texts is None:
            raise ConfigError("MemFree needs an index or the protected texts")
        if index is None:
            NgramIndex(n=n, kind=kind, capacity=1)  # check the settings now

    @classmethod
    def deferred(cls, texts: Iterable[str], n: int = 10, kind: str = "set", **index_options: Any) -> MemFreeLogitsProcessor:
        return cls(None, texts=list(texts), n=n, kind=kind, **index_options)

    def bind(self, tokenizer: Any) -> MemFreeLogitsProcessor:
        """Tokenize the protected texts with the model's tokenizer and build the index."""
        if self._texts is None:
            return self
        options = dict(self._options)
        if self._kind == "bloom" and "capacity" not in options:
            options["capacity"] = max(1000, 4 * sum(len(t) for t in self._texts) // 3)
        index = NgramIndex(n=self._n, kind=self._kind, **options)
        index.add_texts(self._texts, tokenizer)
        self.index = index
        return self

    def fingerprint(self) -> str:
        """memfree:<kind>:<n>:<hash of the protected texts (or token ids)>."""
        if self._texts is not None:
            digest = hashlib.sha256("\x1e".join(self._texts).encode()).hexdigest()[:16]
        else:
            digest = self.index.fingerprint()
        return f"memfree:{self._kind}:{self._n}:{digest}"

    def __call__(self, input_ids, scores):
        index = self.index
        if index is None:
            raise RuntimeError("MemFree processor used before bind(tokenizer)")
        if index.empty or input_ids.shape[-1] < index.n - 1:
            return scores
        prefixes = input_ids[:, -(index.n - 1):].tolist()
        vocab = scores.shape[-1]
        hits = [(row, index.blocked(p, vocab)) for row, p in enumerate(prefixes)]
        hits = [(row, toks) for row, toks in hits if toks]
        if not hits:
            return scores
        scores = scores.clone()
        for row, toks in hits:
            scores[row, toks] = -float("inf")
            self.n_rejections += 1
        return scores


def memfree_backend(spec: str, texts: Sequence[str], *, n: int = 10, kind: str = "set",
                    loader: Any = None, **load_options: Any):
    """Load ``spec`` with a MemFree processor for ``texts``; returns (backend, processor).
    The processor's fingerprint goes into the backend's, so cached unfiltered generations
    are never reused."""
    proc = MemFreeLogitsProcessor.deferred(texts, n=n, kind=kind)
    if loader is None:
        from copyprobe.backends.specs import load_backend as loader
    if str(spec).startswith("openai:"):
        raise ConfigError("MemFree decoding needs the logits of every step: use a local (hf:, gguf:) model, not openai:")
    backend = loader(spec, logits_processors=[proc], fingerprint_extra=proc.fingerprint(), **load_options)
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        raise ConfigError(f"MemFree decoding needs a Hugging Face backend; {spec!r} has no tokenizer")
    proc.bind(tokenizer)
    return backend, proc
