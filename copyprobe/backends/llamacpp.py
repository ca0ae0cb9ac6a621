"""LlamaCppBackend: a GGUF file run in-process by llama.cpp (``llama-cpp-python``).

Spec ``llamacpp:<gguf file or alias>``; install with ``pip install 'copyprobe[llamacpp]'``.
It answers the same requests as :class:`~copyprobe.backends.hf.HFBackend` on the
quantized weights as they are (no de-quantization to float32, no conversion cache), which
on CPU is what makes instruction-following models of 0.5B-1.5B parameters usable for the
black-box methods (benchmarks/results/llamacpp.md).

**Token log-probs** follow the alignment of :mod:`copyprobe.backends.base`. A text is
decoded in chunks of ``chunk`` tokens that extend the KV cache; llama.cpp returns the
logits of each chunk (``chunk x vocabulary`` floats, its only full-vocabulary buffer) and
log p, mu, sigma and rank of each position are read off them in small row blocks before
the next chunk is decoded, so memory does not grow with the text. Texts longer than
``max_length`` use the HF backend's sliding windows (same plan, same scores per token).
A request with a ``context`` (ReCaLL's prefix) scores its text's tokens after the
context's tokens, as the HF backend does; requests are taken context by context, so a
shared context stays in the KV cache and each text decodes only its own tokens (plus the
context's last few, from an aligned position). Plain texts run in sorted token order and
each takes the prefix it shares with the text before it from the cache and from that
text's answer (VeilProbe's leave-one-word-out texts decode about 60% of their tokens).
A decode that resumes in the cache starts at a multiple of 32 tokens, where llama.cpp's
matrix kernels compute every position as they do from the start, so an answer does not
depend on which texts came before it (bit for bit; tests/backends/test_llamacpp.py). A
one-token generation resumed that way (topk_loss's prompts) gives the same token, but on a
quantized model its top log-probs differ from a fresh decode's by up to 0.14 (SmolLM2 Q4).

**Generation** is a plain decode loop over the logits: greedy (argmax), or seeded
sampling with temperature, top-k and nucleus (top_p) from a NumPy generator seeded with the
request's seed, so a sample depends only on (prompt, settings, seed); HF-style repetition
penalty; stop strings; top log-probs from the raw logits. Prompts run in sorted token
order and each reuses the KV cache of the prefix it shares with the prompt before it
(DE-COP's orderings, probes with a common instruction), from the last multiple of 32
tokens, as token log-probs do, and never the cells a generation appended one at a time.
With ``parallel`` > 1 (opt-in) up to ``parallel`` sequences decode together (continuous
batching in a second llama.cpp context with one KV stream per sequence): one llama_decode
per step for all of them.
llama.cpp's numbers depend on how tokens are grouped into decode calls and laid out in
the cache, so both loops follow the same rule (same prefix reuse, same prompt chunks, a
sequence's cells contiguous as in the one-sequence context). That gives the same tokens
on SmolLM2 (Q4_1; tests/backends/test_generation_batching.py), and the same greedy
tokens on Qwen2.5-Coder-0.5B (Q4_K_M), but its seeded samples differed after the first
token (benchmarks/results/blackbox_speed.md): one at a time, each step decodes one row,
batched, one row per sequence in the same call, and llama.cpp's Q4_K kernels compute a
lone row differently from rows in a tile (measured on token log-probs: decoding 1 or 4
tokens per call moves them by up to 0.4, 8 or more per call not at all). So one at a
time stays the default.

**Multiple choice** reads the next-token log-probs after the prompt, like the HF backend
(each choice as tokenized alone and with a leading space, the larger kept).

N-gram log-probs (slope) are not offered: each scored token would need its own decode.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from copyprobe.backends.base import (
    CHOICE_LOGPROBS,
    CONTEXT_LOGPROBS,
    DISTRIBUTION_STATS,
    GENERATE,
    TOKEN_LOGPROBS,
    TOP_LOGPROBS,
    Backend,
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    GenerateRequest,
    Generation,
    TokenLogprobs,
    TokenLogprobsRequest,
    checked_max_length,
)
from copyprobe.errors import BackendError, ConfigError

INSTALL = "pip install 'copyprobe[llamacpp]'  (llama-cpp-python)"
# KV-cache element types (GGML type ids): llama.cpp's default f16 rounds keys and values,
# which moves log-probs by up to ~1e-2 against float32 math; f32 matches transformers to ~1e-5
KV_TYPES = {"f16": 1, "f32": 0}
ROW_BLOCK = 16  # logit rows turned into statistics at once (16 x 152k float64 = 19 MiB)


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


def row_stats(logits, targets) -> dict[str, list]:
    """log p(target), mu, sigma and rank per row of float32 logits [N, V].

    Per row, with y = logit - max (float32, <= 0) and sums in float64:
    Z = sum exp(y), S1 = sum exp(y) y, S2 = sum exp(y) y^2; log p(v) = y_v - log Z,
    mu = S1/Z - log Z, sigma^2 = S2/Z - (S1/Z)^2 (the variance of log p is that of y)."""
    import numpy as np

    out: dict[str, list] = {"logprobs": [], "mu": [], "sigma": [], "rank": []}
    for start in range(0, logits.shape[0], ROW_BLOCK):
        rows = np.asarray(logits[start:start + ROW_BLOCK], dtype=np.float32)
        target = np.asarray(targets[start:start + ROW_BLOCK], dtype=np.int64)
        target_logit = rows[np.arange(len(target)), target]
        rank = 1 + (rows > target_logit[:, None]).sum(axis=1)
        top = rows.max(axis=1, keepdims=True)
        shifted = rows - top
        weights = np.exp(shifted)
        z = weights.sum(axis=1, dtype=np.float64)
        weights *= shifted
        s1 = weights.sum(axis=1, dtype=np.float64)
        weights *= shifted
        s2 = weights.sum(axis=1, dtype=np.float64)
        log_norm = np.log(z)
        mean_y = s1 / z
        out["logprobs"].extend((target_logit.astype(np.float64) - top[:, 0] - log_norm).tolist())
        out["mu"].extend((mean_y - log_norm).tolist())
        out["sigma"].extend(np.sqrt(np.maximum(s2 / z - mean_y * mean_y, 0.0)).tolist())
        out["rank"].extend(rank.tolist())
    return out


def _log_softmax(row):
    import numpy as np

    row = np.asarray(row, dtype=np.float64)
    top = row.max()
    return row - top - math.log(np.exp(row - top).sum())


class LlamaCppBackend(Backend):
    """A GGUF model run by llama.cpp. ``chat``: wrap plain-text generation prompts in the
    chat template (requests with ``messages`` always use it). ``n_threads``: llama.cpp
    threads (default: its own choice). ``chunk``: tokens per decode call. ``kv_type``: element
    type of the KV cache, ``f16`` (llama.cpp's default) or ``f32``. ``parallel``: generations
    decoded together (1: one at a time, the default; see the module docstring)."""

    capabilities = frozenset({TOKEN_LOGPROBS, DISTRIBUTION_STATS, CONTEXT_LOGPROBS, GENERATE, CHOICE_LOGPROBS,
                              TOP_LOGPROBS})

    def __init__(self, path: str | os.PathLike, *, spec: str = "", batch_size: int = 8,
                 max_length: int | None = None, chat: bool = False, n_threads: int | None = None,
                 chunk: int = 128, kv_type: str = "f16", parallel: int = 1, file_sha256: str | None = None,
                 **ignored: Any):
        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendError(f"llamacpp: specs need llama-cpp-python: {INSTALL}") from exc
        file = Path(path).expanduser()
        if not file.is_file():
            raise BackendError(f"GGUF file not found: {file}")
        with open(file, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise BackendError(f"not a valid GGUF file (bad header): {file}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch size must be a positive integer, got {batch_size!r}")
        if not isinstance(chunk, int) or chunk < 1:
            raise ConfigError(f"chunk must be a positive integer, got {chunk!r}")
        if not isinstance(parallel, int) or parallel < 1:
            raise ConfigError(f"parallel must be a positive integer, got {parallel!r}")
        if kv_type not in KV_TYPES:
            raise ConfigError(f"kv_type must be one of {', '.join(KV_TYPES)}, got {kv_type!r}")
        self._lib = llama_cpp
        self.kv_type = kv_type
        self.path = file
        self.spec = spec or f"llamacpp:{file}"
        self.batch_size = batch_size
        self.parallel = parallel
        self.chat = chat
        self.chunk = chunk
        self._file_sha = file_sha256
        probe = llama_cpp.Llama(model_path=str(file), vocab_only=True, verbose=False)
        meta = dict(probe.metadata)
        probe.close()
        arch = meta.get("general.architecture", "")
        context = int(meta.get(f"{arch}.context_length", 0) or 2048)
        self.max_length = checked_max_length(max_length, context)
        try:
            self.llm = llama_cpp.Llama(model_path=str(file), n_ctx=self.max_length, n_batch=chunk, n_ubatch=chunk,
                                       n_threads=n_threads, n_threads_batch=n_threads, logits_all=False,
                                       type_k=KV_TYPES[kv_type], type_v=KV_TYPES[kv_type], verbose=False)
        except ValueError as exc:
            raise BackendError(f"llama.cpp cannot load {file}: {exc}") from exc
        self.n_threads = self.llm.n_threads
        self.vocab_size = int(self.llm.n_vocab())
        self._vocab = self.llm._model.vocab
        self._ctx = self.llm._ctx
        self._batch = self.llm._batch
        self.add_bos = bool(self.llm._model.add_bos_token())
        self.metadata = dict(self.llm.metadata)
        self.chat_template = self.metadata.get("tokenizer.chat_template")
        self._kv: list[int] = []  # tokens whose keys/values are in the cache (sequence 0)
        self._exact = 0  # how many of them a prompt decode computed (the rest: generated one by one)
        # the last plain text scored in one window and its score lists (prefix reuse)
        self._scored: tuple[list[int], dict[str, list]] | None = None
        # cost accounting (benchmarks/bench_blackbox_speed.py): tokens asked for, tokens run
        # through llama_decode, tokens taken from the KV cache instead, decode calls
        self.counters = {"prompt_tokens": 0, "generated_tokens": 0, "decoded_tokens": 0,
                         "reused_tokens": 0, "decode_calls": 0}
        self._fingerprint: str | None = None
        self._mctx = None  # multi-sequence context of batched generation (made on first use)
        self._mcells: list[list[int]] | None = None  # tokens in the KV cache per sequence there
        self.lead_ids = self._leading_special_ids()

    @classmethod
    def from_path(cls, path: str | os.PathLike, **options: Any) -> LlamaCppBackend:
        # the offline aliases record their sha256: no need to hash 0.5-1 GB again
        from copyprobe.backends.bundled import BUNDLES

        for bundle in BUNDLES.values():
            if Path(path).name == bundle.file_name and Path(path).stat().st_size == bundle.size:
                options.setdefault("file_sha256", bundle.sha256)
        return cls(path, **options)

    # -- identity ---------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            if self._file_sha is None:
                digest = hashlib.sha256()
                with open(self.path, "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 22), b""):
                        digest.update(block)
                self._file_sha = digest.hexdigest()
            payload = {"backend": "llamacpp", "weights": f"gguf:{self._file_sha}",
                       "llama_cpp": getattr(self._lib, "__version__", "?"), "max_length": self.max_length,
                       "chat": self.chat, "kv_type": self.kv_type}
            if self.parallel > 1:  # batched samples are not always the same tokens (module docstring)
                payload["parallel"] = self.parallel
            self._fingerprint = hashlib.sha256(repr(sorted(payload.items())).encode()).hexdigest()
        return self._fingerprint

    def info(self) -> dict[str, Any]:
        data = super().info()
        data.update({"backend": "llamacpp", "source": str(self.path), "max_length": self.max_length,
                     "vocab_size": self.vocab_size, "n_threads": self.n_threads,
                     "llama_cpp": getattr(self._lib, "__version__", "?"),
                     "model_name": self.metadata.get("general.name"),
                     "chat_template": bool(self.chat_template)})
        return data

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        mctx, self._mctx = getattr(self, "_mctx", None), None
        if mctx is not None:
            self._mbatch.close()
            mctx.close()
        if llm is not None:
            llm.close()

    # -- tokens -----------------------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of ``text``; special-token strings in it are parsed as such (as the
        HF tokenizers do), and BOS is added where the model's tokenizer adds it."""
        if not text:
            return [self.llm.token_bos()] if add_special and self.add_bos else []
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=add_special and self.add_bos, special=True))

    def token_text(self, token: int) -> str:
        """The vocabulary entry of a token (``Ġthe`` for byte-level BPE, as
        ``convert_ids_to_tokens`` gives it)."""
        raw = self._lib.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="replace") if raw is not None else ""

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.llm.detokenize(list(tokens), special=False).decode("utf-8", errors="replace")

    def token_piece(self, token: int) -> str:
        """A token's text as it reads in generated text: " the" (the space as a space, for
        byte-level and SentencePiece vocabularies alike), a special token by its own text
        (as the HF backend's top log-probs give it; with ``special=False`` every special
        token would read as "" and they would merge), a lone byte of a longer character as
        U+FFFD."""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def _leading_special_ids(self) -> list[int]:
        full = self.tokenize("copyprobe")
        plain = self.tokenize("copyprobe", add_special=False)
        for start in range(len(full) - len(plain) + 1):
            if full[start:start + len(plain)] == plain:
                return full[:start]
        return []

    def _is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    # -- decoding ---------------------------------------------------------------------
    def _decode(self, ids: Sequence[int], all_logits: bool, on_chunk=None, reuse: int = 0,
                cap: int | None = None):
        """Bring the KV cache to ``ids`` (reusing the longest cached prefix) and return the
        last position's logits. With ``all_logits``, ``on_chunk(first_position, logits[n, V])``
        sees the logits of every decoded position, and at most the first ``reuse`` tokens
        are taken from the cache (0: nothing is reused). Every resume starts at a multiple
        of 32 tokens (:meth:`_aligned`), whatever the caller allows."""
        import numpy as np

        if len(ids) > self.max_length:
            raise BackendError(f"{len(ids)} tokens exceed the context of {self.max_length}")
        if not ids:
            raise BackendError("empty prompt: nothing to decode")
        common = 0
        if not all_logits or reuse:
            limit = min(len(self._kv), len(ids) - 1)  # decode at least one token for its logits
            if all_logits:
                limit = min(limit, reuse)
            if cap is not None:
                limit = min(limit, cap)
            # cells a generation appended were computed one row at a time, as a decode from
            # the start would not compute them: never reuse them
            limit = min(limit, self._exact)
            while common < limit and self._kv[common] == ids[common]:
                common += 1
            common = self._aligned(common)
        if common == 0:
            self._ctx.kv_cache_clear()
        else:
            self._ctx.kv_cache_seq_rm(0, common, -1)
        self._kv = list(ids[:common])
        self.counters["reused_tokens"] += common
        last = None
        for start in range(common, len(ids), self.chunk):
            part = list(ids[start:start + self.chunk])
            self._batch.set_batch(part, n_past=start, logits_all=all_logits)
            try:
                self._ctx.decode(self._batch)
            except RuntimeError as exc:
                self._kv, self._exact = [], 0
                raise BackendError(f"llama.cpp decode failed: {exc}") from exc
            self.counters["decoded_tokens"] += len(part)
            self.counters["decode_calls"] += 1
            self._kv.extend(part)
            rows = len(part) if all_logits else 1
            logits = np.ctypeslib.as_array(self._ctx.get_logits(), shape=(rows, self.vocab_size))
            if on_chunk is not None:
                on_chunk(start, logits)
            last = logits[-1]
        self._exact = len(self._kv)
        return np.array(last, dtype=np.float32)

    def _append(self, token: int):
        """Decode one more token after the cached sequence; its logits."""
        import numpy as np

        if len(self._kv) + 1 > self.max_length:
            raise BackendError(f"generation ran past the context of {self.max_length} tokens")
        self._batch.set_batch([token], n_past=len(self._kv), logits_all=False)
        self._ctx.decode(self._batch)
        self.counters["decoded_tokens"] += 1
        self.counters["decode_calls"] += 1
        self._kv.append(token)
        return np.array(np.ctypeslib.as_array(self._ctx.get_logits(), shape=(1, self.vocab_size))[0],
                        dtype=np.float32)

    # -- token log-probs --------------------------------------------------------------
    def _answer_token_logprobs(self, requests: list[TokenLogprobsRequest], progress=None, on_result=None):
        from copyprobe.backends.hf.scoring import ScoreBuffer, windows

        if any(r.ngram is not None for r in requests):
            raise ConfigError("the llamacpp backend does not give n-gram log-probs")
        answers: list[TokenLogprobs | None] = [None] * len(requests)
        plain = {i: self.tokenize(r.text) for i, r in enumerate(requests) if not r.context}
        # requests of one context run one after another: the context stays in the KV cache;
        # plain texts run in sorted token order (a depth-first walk of their prefix tree), so
        # each shares the longest prefix with the text before it and decodes only the rest
        order = sorted((i for i in range(len(requests)) if requests[i].context),
                       key=lambda i: (requests[i].context, i))
        order += sorted(plain, key=lambda i: (plain[i], i))
        context_ids: dict[str, list[int]] = {}  # each distinct context tokenized once (twice: alone, with the probe)
        for index in order:
            request = requests[index]
            if request.context:
                answers[index] = self._context_logprobs(request, context_ids)
            else:
                ids = plain[index]
                buffer = ScoreBuffer(max(len(ids) - 1, 0))
                if len(ids) <= self.max_length:
                    self._score_reusing(ids, buffer)
                else:
                    lead = ids[:len(self.lead_ids)] if ids[:len(self.lead_ids)] == self.lead_ids else []
                    for window in windows(ids, lead, self.max_length):
                        self._score_window(window, buffer)
                    self._scored = None
                answers[index] = self._answer(request, ids, buffer)
            if on_result:
                on_result(index, answers[index])
            if progress:
                progress(1)
        return answers

    def _score_reusing(self, ids: list[int], buffer) -> None:
        """Score a text that fits one window, taking the scores of the prefix it shares with
        the text scored before it from that text's answer, and that prefix's keys and
        values from the KV cache (VeilProbe's leave-one-word-out texts share everything
        before the removed word). The shared prefix's scores are the same numbers, and the
        rest is decoded from an aligned position (:meth:`_aligned`), so every answer is the
        one a decode from an empty cache gives, bit for bit."""
        from copyprobe.backends.hf.scoring import Window

        previous, values = self._scored if self._scored else ([], None)
        shared = _common_prefix(previous, ids, min(len(previous), len(ids)))
        # row p scores token p + 1: rows below shared - 1 score the same tokens as before
        # (a decode resumes at the aligned position at or below that: see _decode)
        reusable = max(shared - 1, 0) if values is not None else 0
        if len(ids) >= 2:
            if reusable >= len(ids) - 1:
                buffer.put(0, values, 0, len(ids) - 1)
            else:
                start = self._score_window(Window(ids, 1, 0), buffer, reuse=reusable)
                if start:
                    buffer.put(0, values, 0, start)
        # a copy: the answer's lists go to the caller, who may change them
        self._scored = (ids, {k: list(v) for k, v in buffer.values.items()}) if buffer.complete() else None

    def _answer(self, request: TokenLogprobsRequest, ids: list[int], buffer) -> TokenLogprobs:
        return TokenLogprobs(
            token_ids=ids, logprobs=buffer.values["logprobs"],
            mu=buffer.values["mu"] if request.stats else None,
            sigma=buffer.values["sigma"] if request.stats else None,
            rank=buffer.values["rank"] if request.stats else None,
            tokens=[self.token_text(t) for t in ids])

    def _context_logprobs(self, request: TokenLogprobsRequest,
                          memo: dict[str, list[int]] | None = None) -> TokenLogprobs:
        """Every token of the text (tokenized without BOS) scored after the context's
        tokens (with BOS): the HF backend's ``_plan_context``, window by window. ``memo``
        keeps each context's tokens across the requests of one call."""
        from copyprobe.backends.hf.scoring import (
            WORD_AFTER, ScoreBuffer, check_context, context_before_word, context_windows,
        )

        memo = {} if memo is None else memo
        if request.context not in memo:
            memo[request.context] = context_before_word(
                self.tokenize(request.context), self.tokenize(request.context + WORD_AFTER), self.detokenize)
        context_ids = memo[request.context]
        ids = self.tokenize(request.text, add_special=False)
        check_context(context_ids, request.context, self.max_length, len(ids))
        buffer = ScoreBuffer(len(ids))
        if ids:
            for number, window in enumerate(context_windows(context_ids, ids, self.lead_ids, self.max_length)):
                # the first window starts with the context: keep it cached up to its last token
                self._score_window(window, buffer, reuse=len(context_ids) - 1 if number == 0 else 0)
        return self._answer(request, ids, buffer)

    def _aligned(self, reuse: int) -> int:
        """``reuse`` rounded down to a multiple of 32 (of ``chunk`` when 32 does not divide
        it). llama.cpp's matrix kernels take a decode call's tokens in tiles of a few rows
        (4 for Qwen's Q4_K on x86) and compute the rows left over differently: a decode that
        resumes at an arbitrary position moves the tiles and changes log-probs by up to 0.14
        on Qwen2.5-Coder-0.5B (benchmarks/bench_logprob_reuse.py); one that resumes at a multiple of the tile (and of every tile
        size that divides 32) computes every position as a decode from the start does."""
        unit = 32 if self.chunk % 32 == 0 else self.chunk
        return reuse // unit * unit

    def _score_window(self, window, buffer, reuse: int = 0) -> int:
        """Decode a window and score the positions it decodes; returns how many leading
        positions came from the KV cache instead (their scores are left to the caller)."""
        ids = window.ids
        reused = []

        def on_chunk(first: int, logits) -> None:
            if not reused:
                reused.append(first)
            # logits row r is window position first + r and scores position first + r + 1
            begin = max(first, window.first - 1)
            end = min(first + logits.shape[0], len(ids) - 1)
            if begin >= end:
                return
            scores = row_stats(logits[begin - first:end - first], ids[begin + 1:end + 1])
            buffer.put(begin + window.offset, scores, 0, end - begin)

        self._decode(ids, all_logits=True, on_chunk=on_chunk, reuse=reuse)
        return reused[0] if reused else 0

    streams_results = True

    # -- prompts ----------------------------------------------------------------------
    def prompt_ids(self, prompt: str | None, messages, use_chat: bool) -> list[int]:
        """As :meth:`HFBackend._prompt_ids`: chat messages through the GGUF's chat template
        with the generation prompt; a plain prompt given as well continues the assistant turn."""
        if messages is None and use_chat and prompt is not None:
            messages, prompt = (("user", prompt),), None
        if messages is None:
            return self.tokenize(prompt or "")
        turns = [{"role": role, "content": content} for role, content in messages]
        if self.chat_template:
            text = self._render_chat(turns) + (prompt or "")
            return self.tokenize(text, add_special=False)  # the template writes its own BOS
        text = "".join(f"{t['role']}: {t['content']}\n" for t in turns) + "assistant:" + (
            f" {prompt}" if prompt else "")
        return self.tokenize(text)

    def _render_chat(self, turns: list[dict[str, str]]) -> str:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        special = {}
        for name in ("bos", "eos"):
            key = f"tokenizer.ggml.{name}_token_id"
            if key in self.metadata:
                special[f"{name}_token"] = self.token_text(int(self.metadata[key]))
        return env.from_string(self.chat_template).render(messages=turns, add_generation_prompt=True, **special)

    # -- generation -------------------------------------------------------------------
    def _answer_generate(self, requests: list[GenerateRequest], progress=None, on_result=None):
        """Prompts run in sorted token order, so consecutive ones share the longest prefix
        of KV cache; answers are independent of the order (greedy, or per-request seeds).
        With ``parallel`` > 1 and several requests, up to ``parallel`` sequences decode
        together (:meth:`_generate_batched`)."""
        prompts = []
        for request in requests:
            if request.max_tokens < 1:
                raise ConfigError(f"max_tokens must be >= 1, got {request.max_tokens}")
            ids = self.prompt_ids(request.prompt, request.messages, self.chat)
            if not ids:
                raise BackendError("empty generation prompt: give a prompt or messages")
            if len(ids) + request.max_tokens > self.max_length:
                raise BackendError(f"prompt of {len(ids)} tokens + max_tokens {request.max_tokens} exceeds "
                                   f"the model's context of {self.max_length} tokens")
            prompts.append(ids)
        answers: list[Generation | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: prompts[i])
        # Which KV cache a prompt reuses is fixed by the sorted list alone: the prefix it
        # shares with the prompt before it (none for the first). llama.cpp's numbers
        # depend on how tokens are grouped into decode calls, so this rule, the same in
        # both loops below, is what makes batched and one-at-a-time answers identical.
        shared = [0] + [self._aligned(_common_prefix(prompts[a], prompts[b], len(prompts[b]) - 1))
                        for a, b in zip(order, order[1:])]

        def done(index: int, answer: Generation) -> None:
            answers[index] = answer
            if on_result:
                on_result(index, answer)
            if progress:
                progress(1)

        if min(self.parallel, self.chunk) > 1 and len(requests) > 1:
            self._generate_batched([(i, prompts[i], requests[i], n) for i, n in zip(order, shared)], done)
            return answers
        for index, n in zip(order, shared):
            done(index, self._generate(prompts[index], requests[index], n))
        return answers

    def _generate(self, ids: list[int], request: GenerateRequest, reuse: int | None = None) -> Generation:
        """One sequence; ``reuse``: at most this many prompt tokens from the KV cache."""
        sequence = _Sequence(self, ids, request)
        logits = self._decode(ids, all_logits=False, cap=reuse)
        while sequence.push(logits):
            logits = self._append(sequence.tokens[-1])
        return sequence.result()

    # -- batched generation -----------------------------------------------------------
    def _multi(self):
        """The multi-sequence context (made on first use): one KV stream of ``max_length``
        cells per sequence (llama.cpp's non-unified cache), so that each sequence's cells
        are laid out as in the one-sequence context. With one cache shared by all sequences
        (``kv_unified``) their cells interleave and the attention sums run in another
        order: greedy answers then differed from one-at-a-time (10 of 21 on SmolLM2)."""
        if self._mctx is None:
            from llama_cpp import _internals

            params = type(self.llm.context_params).from_buffer_copy(self.llm.context_params)
            width = self.chunk  # the main context's decode calls: the same groups of tokens
            self._slots = min(self.parallel, self.chunk)  # a step decodes one token per slot
            params.n_seq_max = self._slots
            params.kv_unified = False
            params.n_ctx = self._slots * self.max_length
            params.n_batch = params.n_ubatch = width
            try:
                self._mctx = _internals.LlamaContext(model=self.llm._model, params=params, verbose=False)
                self._mbatch = _internals.LlamaBatch(n_tokens=width, embd=0, n_seq_max=1, verbose=False)
            except ValueError as exc:
                raise BackendError(f"llama.cpp cannot make a {self.parallel}-sequence context: {exc}; "
                                   "lower parallel") from exc
            self._mwidth = width
        return self._mctx

    def _decode_rows(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, sequence, wants logits) rows."""
        batch = self._mbatch.batch
        batch.n_tokens = len(rows)
        for j, (token, pos, seq, logits) in enumerate(rows):
            batch.token[j] = token
            batch.pos[j] = pos
            batch.seq_id[j][0] = seq
            batch.n_seq_id[j] = 1
            batch.logits[j] = logits
        try:
            self._mctx.decode(self._mbatch)
        except RuntimeError as exc:
            self._mctx.kv_cache_clear()
            self._mcells = [[] for _ in range(self._slots)]
            raise BackendError(f"llama.cpp decode failed: {exc}") from exc
        self.counters["decoded_tokens"] += len(rows)
        self.counters["decode_calls"] += 1

    def _row_logits(self, j: int):
        import numpy as np

        return np.array(np.ctypeslib.as_array(self._mctx.get_logits_ith(j), shape=(self.vocab_size,)),
                        dtype=np.float32)

    def _admit(self, slot: int, ids: list[int], donor: int | None, common: int):
        """Put a prompt into ``slot`` with its first ``common`` tokens' cells taken from
        sequence ``donor`` (the previous prompt's; tagging cells copies nothing), decode the
        rest in ``chunk``-token calls as :meth:`_decode` does; the logits after the prompt."""
        ctx = self._mctx
        if donor is None or common == 0:
            ctx.kv_cache_seq_rm(slot, 0, -1)
            common = 0
        elif donor == slot:
            ctx.kv_cache_seq_rm(slot, common, -1)
        else:
            # each sequence has its own KV stream (contiguous cells, as in the one-sequence
            # context); llama.cpp copies a stream only whole: copy it, cut it back
            ctx.kv_cache_seq_rm(slot, 0, -1)
            ctx.kv_cache_seq_cp(donor, slot, -1, -1)
            ctx.kv_cache_seq_rm(slot, common, -1)
        cells = self._mcells
        cells[slot] = list(ids[:common])
        self.counters["reused_tokens"] += common
        for start in range(common, len(ids), self.chunk):
            part = ids[start:start + self.chunk]
            last = start + len(part) == len(ids)
            self._decode_rows([(t, start + k, slot, last and k == len(part) - 1) for k, t in enumerate(part)])
            cells[slot].extend(part)
        return self._row_logits(len(part) - 1)

    def _generate_batched(self, work: list[tuple[int, list[int], GenerateRequest, int]], done) -> None:
        """Continuous batching: up to ``parallel`` sequences decode one token each per
        llama_decode; a finished sequence's slot takes the next prompt (work is in sorted
        prompt order, so a new prompt usually shares a prefix with one in the cache).
        Each sequence chooses its tokens from its own logits exactly as :meth:`_generate`
        (greedy, or its own seeded generator), so answers do not depend on the batch."""
        self._multi()
        if self._mcells is None:
            self._mcells = [[] for _ in range(self._slots)]
        pending = list(reversed(work))
        active: dict[int, tuple[int, _Sequence]] = {}
        previous: int | None = None  # slot of the last prompt admitted (its cells stay until reused)
        while pending or active:
            for slot in range(self._slots):
                if slot in active or not pending:
                    continue
                index, ids, request, common = pending.pop()
                sequence = _Sequence(self, ids, request)
                logits = self._admit(slot, ids, previous, common)
                previous = slot
                if sequence.push(logits):
                    active[slot] = (index, sequence)
                else:
                    done(index, sequence.result())
            if not active:
                continue
            slots = sorted(active)
            rows = []
            for slot in slots:
                token = active[slot][1].tokens[-1]
                rows.append((token, len(self._mcells[slot]), slot, True))
            self._decode_rows(rows)
            for j, slot in enumerate(slots):
                index, sequence = active[slot]
                self._mcells[slot].append(rows[j][0])
                if not sequence.push(self._row_logits(j)):
                    del active[slot]
                    done(index, sequence.result())

    # -- multiple choice --------------------------------------------------------------
    def _answer_choice_logprobs(self, requests: list[ChoiceLogprobsRequest], progress=None, on_result=None):
        prompts = [self.prompt_ids(r.prompt, r.messages, use_chat=False) for r in requests]
        if not all(prompts):
            raise BackendError("empty prompt: nothing to condition the choices on")
        answers: list[ChoiceLogprobs | None] = [None] * len(requests)
        # sorted prompts: DE-COP's 24 orderings then re-decode only past their shared prefix
        for index in sorted(range(len(requests)), key=lambda i: prompts[i]):
            request, ids = requests[index], prompts[index]
            logp = _log_softmax(self._decode(ids, all_logits=False))
            values = {}
            for choice in request.choices:
                forms = {t[0] for t in (self.tokenize(choice, add_special=False),
                                        self.tokenize(" " + choice, add_special=False)) if t}
                if not forms:
                    raise BackendError(f"choice {choice!r} tokenizes to nothing")
                values[choice] = max(float(logp[t]) for t in forms)
            answers[index] = ChoiceLogprobs(logprobs=values)
            if on_result:
                on_result(index, answers[index])
            if progress:
                progress(1)
        return answers


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n, top = 0, min(len(a), len(b), limit)
    while n < top and a[n] == b[n]:
        n += 1
    return n


class _Sequence:
    """One generation's state: the choice of each next token from the logits after the
    tokens so far (greedy argmax, or a draw from the request's own seeded generator; HF
    repetition penalty; top log-probs; stop at end-of-generation, a stop string or
    ``max_tokens``). The one-at-a-time and the batched loops both use it, so they choose alike."""

    def __init__(self, backend: LlamaCppBackend, ids: list[int], request: GenerateRequest):
        import numpy as np

        self.backend = backend
        self.ids = ids
        self.request = request
        self.rng = None
        if request.temperature > 0:
            seed = request.seed if request.seed is not None else int.from_bytes(os.urandom(4), "little")
            self.rng = np.random.default_rng(int(seed))
        self.tokens: list[int] = []
        self.top: list[dict[str, float]] | None = [] if request.top_logprobs > 0 else None
        self.reason = "length"
        self.seen = set(ids)

    def push(self, logits) -> bool:
        """Choose the next token; True when the sequence goes on (the token must be decoded)."""
        import numpy as np

        request, backend = self.request, self.backend
        if self.top is not None:
            logp = _log_softmax(logits)
            count = min(request.top_logprobs, len(logp))  # at most the whole vocabulary
            best = np.argpartition(-logp, count - 1)[:count]
            alternatives: dict[str, float] = {}
            for token_id in best[np.argsort(-logp[best])]:
                piece = backend.token_piece(int(token_id))
                alternatives[piece] = max(float(logp[token_id]), alternatives.get(piece, -math.inf))
            self.top.append(alternatives)
        scores = logits.astype(np.float64)
        if request.repetition_penalty != 1.0 and self.seen:
            index = np.fromiter(self.seen, dtype=np.int64)
            values = scores[index]
            scores[index] = np.where(values > 0, values / request.repetition_penalty,
                                     values * request.repetition_penalty)
        token = int(scores.argmax()) if self.rng is None else _sample(scores, request.temperature,
                                                                     request.top_p, self.rng, request.top_k)
        self.tokens.append(token)
        self.seen.add(token)
        if backend._is_eog(token):
            self.reason = "stop"
            return False
        if request.stop and _first_stop(backend.detokenize(self.tokens), request.stop) is not None:
            self.reason = "stop"
            return False
        return len(self.tokens) < request.max_tokens

    def result(self) -> Generation:
        backend, request = self.backend, self.request
        backend.counters["prompt_tokens"] += len(self.ids)
        backend.counters["generated_tokens"] += len(self.tokens)
        text = backend.detokenize(self.tokens)
        cut = _first_stop(text, request.stop)
        if cut is not None:
            text = text[:cut]
        top = self.top[:len(self.tokens)] if self.top is not None else None
        return Generation(text=text, finish_reason=self.reason, prompt_tokens=len(self.ids),
                          completion_tokens=len(self.tokens), top_logprobs=top)


def _sample(scores, temperature: float, top_p: float, rng, top_k: int = 0) -> int:
    """One draw: temperature, then the ``top_k`` likeliest tokens (0: all), then the
    smallest set of likeliest tokens whose mass reaches ``top_p`` (as the HF backend's
    SeededSampler), then the generator's uniform draw."""
    import numpy as np

    scaled = scores / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    ordered = probs[order]
    if 0 < top_k < len(ordered):
        ordered = np.where(np.arange(len(ordered)) < top_k, ordered, 0.0)
        ordered = ordered / ordered.sum()
    if top_p < 1.0:
        before = np.cumsum(ordered) - ordered
        ordered = np.where(before >= top_p, 0.0, ordered)
    cumulative = np.cumsum(ordered)
    draw = rng.random() * cumulative[-1]
    picked = min(int(np.searchsorted(cumulative, draw)), len(order) - 1)
    return int(order[picked])
