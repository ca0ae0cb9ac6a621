"""Hugging Face transformers backend: local model directories, hub ids and GGUF files.

Token alignment follows :mod:`copyprobe.backends.base`: logits at position i score token
i+1, so a text of T tokens yields T-1 scored tokens.

**Leading special tokens.** Some tokenizers put special tokens in front of every text
(Gemma adds ``<bos>``; SmolLM2 adds nothing). Windows that start inside a text (sliding
windows, n-gram contexts) get the same leading tokens, so the model always sees a text
start it was trained on.

**Sliding windows** for texts longer than ``max_length`` (L) tokens, stride S = L // 2.
Each token is scored once, by the earliest window that contains it, which is the one
giving it the most preceding context (as in the transformers perplexity-with-stride
guide)::

    tokens  b0 t1 t2 t3 t4 t5 t6 t7 t8 t9     (b0: leading special token, L = 6, S = 3)
    win 0   b0 t1 t2 t3 t4 t5                 scores t1..t5
    win 1   b0       t3 t4 t5 t6 t7           scores t6 t7  (t3..t5 are context only)
    win 2   b0                t6 t7 t8 t9     scores t8 t9

Window k >= 1 holds the leading tokens plus up to L - (number of leading tokens) text
tokens starting at text position k*S; every scored token has at least L - S tokens
before it in its window. Window 0 is the text's own start, so its scores equal the
full-context ones.

**N-gram scores** (``TokenLogprobsRequest.ngram = n``): a token with at least n text
tokens before it (leading special tokens do not count) is scored given only the leading
tokens and its n predecessors; earlier tokens get their full-prefix value (which is the
same thing with fewer predecessors). All such contexts have the same length, so they run
in large unpadded batches, identical contexts are computed once, contexts that share a
prefix compute it once (a level-by-level walk of their prefix tree with a re-indexed KV
cache), and the LM head is applied to the last position only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from copyprobe.backends.base import (
    ALL_CAPABILITIES,
    Backend,
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    GenerateRequest,
    Generation,
    TokenLogprobs,
    TokenLogprobsRequest,
)
from copyprobe.errors import BackendError, ConfigError

# Token statistics: (rows per chunk, logits per vocabulary block). On CPU a block of
# 2**19 float32 logits (2 MiB) stays in cache while the statistics read it; on a GPU fewer,
# larger blocks keep kernel launches from dominating. Peak extra memory: two blocks.
SCORE_BLOCKS = {"cpu": (256, 2**19), "cuda": (4096, 2**25)}
# Full-vocabulary logit rows held at once when many next-token distributions are read
# from one pass (2**25 float32 = 128 MiB).
LOGIT_ROWS = 2**25
# Cap on n-gram contexts per forward pass; they are short, so this is cheap.
MAX_NGRAM_BATCH = 2048
# Content hashing of HF weight files is skipped (names and sizes only) above this size.
HASH_CONTENT_LIMIT = 1 << 30

GGUF_MAGIC = b"GGUF"

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16"}

Progress = Callable[[int], None] | None


# -- device and dtype ----------------------------------------------------------------


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"unknown device {device!r} (use auto, cpu, cuda, cuda:N or mps)") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but no CUDA GPU is available")
    return device


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        raise ConfigError(f"unknown dtype {dtype!r} (use auto, float32, bfloat16 or float16)")
    return getattr(torch, name)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# -- hashing ---------------------------------------------------------------------------


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                    "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
                    "generation_config.json")


def hash_model_dir(path: str | os.PathLike) -> str:
    """Identify a model directory: config + tokenizer files by content, weights by content
    when they total under 1 GiB, else by names and sizes (hashing many GB takes minutes)."""
    root = Path(path)
    digest = hashlib.sha256()
    for name in ("config.json", *_TOKENIZER_FILES):
        file = root / name
        if file.is_file():
            digest.update(name.encode() + b"\0" + bytes.fromhex(sha256_file(file)))
    weights = sorted(p for p in root.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    by_content = sum(p.stat().st_size for p in weights) < HASH_CONTENT_LIMIT
    for file in weights:
        digest.update(file.name.encode() + b"\0" + str(file.stat().st_size).encode())
        if by_content:
            digest.update(bytes.fromhex(sha256_file(file)))
    return digest.hexdigest()


def hash_parameters(model) -> str:
    """Content hash of a model held only in memory (no files to hash)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)}".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


# -- GGUF loading with a conversion cache ------------------------------------------------


def cache_base_dir() -> Path:
    """Base of copyprobe's caches: $COPYPROBE_CACHE_DIR, else the platform's user cache dir."""
    override = os.environ.get("COPYPROBE_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("copyprobe"))


def check_gguf_file(path: str | os.PathLike) -> Path:
    file = Path(path).expanduser()
    if not file.exists():
        raise BackendError(f"GGUF file not found: {file}")
    if not file.is_file():
        raise BackendError(f"not a GGUF file (it is a directory): {file}")
    with open(file, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise BackendError(f"not a valid GGUF file (bad header {magic!r}): {file}")
    return file


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def quiet_transformers() -> None:
    """transformers prints weight-loading bars and warnings meant for its developers;
    copyprobe shows its own progress. COPYPROBE_VERBOSE=1 keeps them."""
    if os.environ.get("COPYPROBE_VERBOSE"):
        return
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def load_gguf(path: str | os.PathLike, torch_dtype) -> tuple[Any, Any, str, bool]:
    """Load a GGUF file as a dense transformers model.

    Returns (model, tokenizer, sha256 of the file, whether the conversion cache was used).
    Converting through transformers (de-quantization, tokenizer conversion) takes tens of
    seconds, so the result is saved once under ``<cache>/models/<sha256>/`` and loaded
    from there afterwards. The full file hash is needed for the fingerprint anyway, so it
    also keys the cache: a changed file can never reuse a stale conversion.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    file = check_gguf_file(path)
    file_sha = sha256_file(file)
    cached = cache_base_dir() / "models" / file_sha
    if (cached / "copyprobe-source.json").is_file():
        try:
            model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch_dtype)
            tokenizer = AutoTokenizer.from_pretrained(cached)
            return model, tokenizer, file_sha, True
        except Exception:  # noqa: BLE001 - a damaged cache entry is rebuilt below
            shutil.rmtree(cached, ignore_errors=True)

    import torch

    kwargs: dict[str, Any] = {"gguf_file": file.name, "dtype": torch.float32}
    try:  # newer transformers can keep GGUF blocks packed; a dense model is what we want
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    print(f"copyprobe: converting {file.name} for transformers (once; later loads use the cache)",
          file=sys.stderr)
    try:
        tokenizer = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
        model = AutoModelForCausalLM.from_pretrained(file.parent, **kwargs)
    except Exception as exc:
        raise BackendError(f"cannot load GGUF file {file}: {_one_line(exc)}") from exc
    _drop_gguf_quantizer(model)
    _save_conversion(model, tokenizer, cached, {"source": str(file), "sha256": file_sha,
                                                "size": file.stat().st_size})
    if torch_dtype != torch.float32:
        model = model.to(torch_dtype)
    return model, tokenizer, file_sha, False


def load_gguf_tokenizer(path: str | os.PathLike):
    """Only the tokenizer of a GGUF file: from the conversion cache when the model was
    converted before, else converted directly (the model is not loaded)."""
    from transformers import AutoTokenizer

    file = check_gguf_file(path)
    cached = cache_base_dir() / "models" / sha256_file(file)
    try:
        if (cached / "copyprobe-source.json").is_file():
            return AutoTokenizer.from_pretrained(cached)
        return AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
    except Exception as exc:
        raise BackendError(f"cannot load the tokenizer of GGUF file {file}: {_one_line(exc)}") from exc


def _drop_gguf_quantizer(model) -> None:
    # The weights are already de-quantized into plain tensors; only the loader's marker
    # remains, and it makes save_pretrained refuse ("not serializable").
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if hasattr(model, "is_quantized"):
        try:
            model.is_quantized = False
        except AttributeError:  # a read-only property derived from hf_quantizer
            pass


def _save_conversion(model, tokenizer, target: Path, source: dict[str, Any]) -> None:
    """Save atomically: write a temporary sibling directory, then rename it into place, so
    a concurrent reader never sees a half-written model. Failure to cache is not fatal."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".tmp-{target.name[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(temp)
        tokenizer.save_pretrained(temp)
        (temp / "copyprobe-source.json").write_text(json.dumps(source, indent=2))
        try:
            os.rename(temp, target)
        except OSError:
            if not target.exists():
                raise
            # another process finished first; its copy is identical
    except Exception as exc:  # noqa: BLE001 - disk full, read-only cache...: loads again slowly next time
        logging.getLogger(__name__).warning("could not cache the converted model in %s: %s", target, exc)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


# -- the backend -----------------------------------------------------------------------


class _Completion:
    """Counts outstanding work units per request; reports finished requests to progress."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.left: dict[int, int] = {}
        self.finished = 0

    def add(self, index: int, units: int = 1) -> None:
        self.left[index] = self.left.get(index, 0) + units

    def done(self, index: int, units: int = 1) -> None:
        self.left[index] -= units
        if self.left[index] == 0:
            self.finished += 1

    def flush(self) -> None:
        if self.progress and self.finished:
            self.progress(self.finished)
        self.finished = 0

    def finish_empty(self, count: int) -> None:
        self.finished += count
        self.flush()


class HFBackend(Backend):
    """A causal LM from transformers.

    ``chat``: wrap plain-text generation prompts in the chat template (requests with
    ``messages`` always use it). Models without a chat template get a plain
    ``role: content`` transcript ending in ``assistant:``.
    ``logits_processors``: transformers ``LogitsProcessor`` objects applied to every
    generation (e.g. a MemFree filter); describe them in ``fingerprint_extra`` so that
    their generations never share cache entries with unfiltered ones.
    """

    capabilities = frozenset(ALL_CAPABILITIES)

    def __init__(
        self,
        model,
        tokenizer,
        *,
        spec: str = "",
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        max_length: int | None = None,
        chat: bool = False,
        logits_processors: Sequence[Any] | None = None,
        fingerprint_extra: str = "",
        weights_id: str | None = None,
        source: str | None = None,
    ):

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch size must be a positive integer, got {batch_size!r}")
        self.device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        self.model = model.to(device=self.device, dtype=self.torch_dtype).eval()
        self.tokenizer = tokenizer
        self.spec = spec or str(getattr(model, "name_or_path", "") or type(model).__name__)
        self.batch_size = batch_size
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        context = getattr(config, "max_position_embeddings", None) or 2048
        if max_length is None:
            max_length = min(context, 2048)
        if not isinstance(max_length, int) or max_length < 2:
            raise ConfigError(f"max length must be an integer >= 2, got {max_length!r}")
        if max_length > context:
            raise ConfigError(f"max length {max_length} exceeds the model's context of {context} tokens")
        self.max_length = max_length
        self.chat = chat
        self.logits_processors = list(logits_processors or [])
        self.fingerprint_extra = fingerprint_extra
        self.source = source
        self._weights_id = weights_id
        self._fingerprint: str | None = None
        self._softcap = getattr(config, "final_logit_softcapping", None)
        self._decoder = getattr(model, "model", None) or model.get_decoder()
        self._head = model.get_output_embeddings()
        self.vocab_size = int(self._head.weight.shape[0])
        self.pad_id = self._pad_token_id()
        self.lead_ids = self._leading_special_ids()
        if len(self.lead_ids) >= max_length // 2:
            raise ConfigError(f"max length {max_length} is too small for this tokenizer")

    # -- construction helpers ---------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name_or_path: str, *, spec: str | None = None, device: str = "auto",
                        dtype: str = "auto", **options: Any) -> HFBackend:
        """Load a local model directory (or, for users with hub access, a hub id)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        resolved = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, resolved)
        local = Path(name_or_path).expanduser()
        if local.is_dir() and not (local / "config.json").is_file():
            raise BackendError(f"not a transformers model directory (no config.json): {local}")
        looks_local = local.is_absolute() or name_or_path.startswith((".", "~")) or local.exists()
        if looks_local and not local.exists():
            raise BackendError(f"model directory not found: {local}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(local) if looks_local else name_or_path)
            model = AutoModelForCausalLM.from_pretrained(str(local) if looks_local else name_or_path,
                                                         dtype=torch_dtype)
        except Exception as exc:
            raise BackendError(f"cannot load model {name_or_path!r}: {_one_line(exc)}") from exc
        weights_id = hash_model_dir(local) if looks_local else None
        return cls(model, tokenizer, spec=spec or f"hf:{name_or_path}", device=resolved, dtype=dtype,
                   weights_id=weights_id, source=str(local) if looks_local else name_or_path, **options)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike, *, spec: str | None = None, device: str = "auto",
                  dtype: str = "auto", **options: Any) -> HFBackend:
        """Load a GGUF file (through the conversion cache, see :func:`load_gguf`)."""
        resolved = resolve_device(device)
        model, tokenizer, file_sha, _ = load_gguf(path, resolve_dtype(dtype, resolved))
        return cls(model, tokenizer, spec=spec or f"gguf:{path}", device=resolved, dtype=dtype,
                   weights_id=f"gguf:{file_sha}", source=str(path), **options)

    @classmethod
    def from_path(cls, path: str | os.PathLike, **kwargs: Any) -> HFBackend:
        """A ``.gguf`` file or a model directory / hub id."""
        if str(path).endswith(".gguf") or Path(path).is_file():
            return cls.from_gguf(path, **kwargs)
        return cls.from_pretrained(str(path), **kwargs)

    def _pad_token_id(self) -> int:
        for candidate in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if candidate is not None:
                return int(candidate)
        return 0

    def _leading_special_ids(self) -> list[int]:
        """The special tokens the tokenizer puts before every text (e.g. Gemma's <bos>)."""
        probe = "copyprobe"
        full = self.tokenizer(probe).input_ids
        plain = self.tokenizer(probe, add_special_tokens=False).input_ids
        for start in range(len(full) - len(plain) + 1):
            if full[start:start + len(plain)] == plain:
                return list(full[:start])
        return []

    # -- identity ---------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            if self._weights_id is None:
                self._weights_id = f"params:{hash_parameters(self.model)}"
            payload = {"backend": "hf", "weights": self._weights_id, "dtype": _dtype_name(self.torch_dtype),
                       "max_length": self.max_length, "chat": self.chat, "extra": self.fingerprint_extra}
            self._fingerprint = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return self._fingerprint

    def info(self) -> dict[str, Any]:
        data = super().info()
        data.update({
            "backend": "hf",
            "source": self.source,
            "device": self.device,
            "dtype": _dtype_name(self.torch_dtype),
            "max_length": self.max_length,
            "vocab_size": self.vocab_size,
            "n_params": int(sum(p.numel() for p in self.model.parameters())),
            "chat_template": bool(getattr(self.tokenizer, "chat_template", None)),
        })
        if self.fingerprint_extra:
            data["fingerprint_extra"] = self.fingerprint_extra
        return data

    def close(self) -> None:
        self.model = None
        self._decoder = None
        self._head = None

    # -- shared numerics --------------------------------------------------------------
    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn out-of-memory into a message the user can act on."""
        import torch

        try:
            with torch.inference_mode():
                yield
        except torch.cuda.OutOfMemoryError as exc:
            raise BackendError(self._oom_message()) from exc
        except MemoryError as exc:
            raise BackendError(self._oom_message()) from exc
        except RuntimeError as exc:
            message = str(exc).lower()
            if "out of memory" in message or "can't allocate memory" in message:
                raise BackendError(self._oom_message()) from exc
            raise

    def _oom_message(self) -> str:
        return f"out of memory on {self.device} at batch size {self.batch_size}: lower --batch-size"

    def _hidden(self, input_ids, attention_mask=None):
        out = self._decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]

    def _padded_hidden(self, sequences: Sequence[Sequence[int]]):
        """Final hidden states of token lists, right-padded to the longest in one batch."""
        import torch

        width = max(len(ids) for ids in sequences)
        input_ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            mask[row, :len(ids)] = 1
        return self._hidden(input_ids.to(self.device), mask.to(self.device))

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, list) else [eos] if eos is not None else [])

    def _logits(self, hidden):
        """LM head on hidden rows [N, H] -> float32 logits [N, V]."""
        return self._cap(self._head(hidden).float())

    def _score_rows(self, hidden, targets):
        """Log-prob, mu, sigma and rank of ``targets`` [N] given hidden rows [N, H].

        The LM head runs one vocabulary block at a time and the statistics are accumulated
        online (running max, as in a streaming softmax), so each block of logits is used
        while it is still in cache and no [N, V] tensor is ever built. On CPU this makes the
        statistics nearly free: measured on smollm2's head, 1.00x the time of the bare
        head product, against 2.8x for softmax over whole rows (benchmarks/bench_single_pass.py
        for the end-to-end number). Per row it keeps, relative to the target's logit
        (y = l - l_target) and the running max m of y:
        Z = sum exp(y - m), S1 = sum exp(y - m) y, S2 = sum exp(y - m) y^2, in float64.
        Then log p(target) = -(m + log Z), mu = S1/Z + log p(target), and
        sigma^2 = S2/Z - (S1/Z)^2 (the variance of log p equals the variance of y).
        """
        import torch
        import torch.nn.functional as F

        weight = self._head.weight
        bias = getattr(self._head, "bias", None)
        rows_per_chunk, block_elements = SCORE_BLOCKS["cuda" if self.device.startswith("cuda") else "cpu"]
        parts = []
        for start in range(0, hidden.shape[0], rows_per_chunk):
            rows = hidden[start:start + rows_per_chunk]
            target = targets[start:start + rows_per_chunk]
            n = rows.shape[0]
            # The target's logit from the same kernel and reduction length as the blocks, so
            # the rank comparison below matches a full logits tensor (bitwise on CPU).
            target_logit = self._cap(F.linear(rows, weight[target], None if bias is None else bias[target])
                                     .diagonal().float()).unsqueeze(1)
            running_max = torch.full((n, 1), -math.inf, device=rows.device)
            z_sum, y_sum, y2_sum = (torch.zeros(n, dtype=torch.float64, device=rows.device) for _ in range(3))
            above = torch.zeros(n, dtype=torch.long, device=rows.device)
            width = max(1, block_elements // n)
            for begin in range(0, self.vocab_size, width):
                end = min(begin + width, self.vocab_size)
                block = self._cap(F.linear(rows, weight[begin:end], None if bias is None else bias[begin:end]).float())
                above += (block > target_logit).sum(-1)
                inside = (target >= begin) & (target < end)
                if bool(inside.any()):  # never count the target as above itself
                    own = block.gather(1, (target - begin).clamp(0, end - begin - 1).unsqueeze(1)).squeeze(1)
                    above -= (inside & (own > target_logit.squeeze(1))).long()
                block.sub_(target_logit)  # y
                new_max = torch.maximum(running_max, block.amax(-1, keepdim=True))
                scale = (running_max - new_max).exp().squeeze(1).double()
                block.sub_(new_max)  # y - new_max <= 0: exp cannot overflow
                weights = block.exp()
                z = weights.sum(-1).double()
                weights.mul_(block)
                s1 = weights.sum(-1).double()
                weights.mul_(block)
                s2 = weights.sum(-1).double()
                shift = new_max.squeeze(1).double()  # y = (y - new_max) + shift
                z_sum = z_sum * scale + z
                y_sum = y_sum * scale + s1 + shift * z
                y2_sum = y2_sum * scale + s2 + 2 * shift * s1 + shift * shift * z
                running_max = new_max
                del block, weights
            log_norm = running_max.squeeze(1).double() + z_sum.log()
            mean_y = y_sum / z_sum
            sigma = (y2_sum / z_sum - mean_y.square()).clamp_min(0).sqrt()
            parts.append((-log_norm, mean_y - log_norm, sigma, above + 1))
        return [torch.cat([p[i] for p in parts]).cpu() for i in range(4)]

    def _cap(self, logits):
        """Gemma-2 style final-logit soft-capping (monotone, so ranks are unchanged)."""
        import torch

        if self._softcap:
            return torch.tanh(logits / self._softcap) * self._softcap
        return logits

    # -- token log-probs ----------------------------------------------------------------
    def _answer_token_logprobs(self, requests: list[TokenLogprobsRequest], progress: Progress = None):
        """See the module docstring for windows and n-gram contexts."""
        tracker = _Completion(progress)
        token_ids = [list(self.tokenizer(r.text).input_ids) for r in requests]
        results = [_ScoreBuffer(max(len(ids) - 1, 0)) for ids in token_ids]
        jobs: list[tuple[int, list[int], int, int]] = []  # (request, window ids, first target, offset)
        contexts: dict[tuple[int, ...], list[tuple[int, int, int]]] = {}  # ids -> [(request, pos, target)]
        n_lead = len(self.lead_ids)
        empty = 0
        for index, (request, ids) in enumerate(zip(requests, token_ids)):
            if request.ngram is not None and (
                    isinstance(request.ngram, bool) or not isinstance(request.ngram, int)
                    or not 1 <= request.ngram <= self.max_length - n_lead - 1):
                raise ConfigError(f"ngram must be an integer in [1, {self.max_length - n_lead - 1}], "
                                  f"got {request.ngram!r}")
            if len(ids) < 2:
                empty += 1
                continue
            lead = ids[:n_lead] if ids[:n_lead] == self.lead_ids else []
            if request.ngram is None:
                windows = self._windows(ids, lead)
            else:
                # full-prefix values for the tokens with fewer than n text predecessors
                first_ngram = len(lead) + request.ngram
                windows = self._windows(ids[:min(len(ids), first_ngram)], lead)
                for position in range(first_ngram, len(ids)):
                    key = tuple(lead) + tuple(ids[position - request.ngram:position])
                    contexts.setdefault(key, []).append((index, position - 1, ids[position]))
                    tracker.add(index)
            for window, first, offset in windows:
                jobs.append((index, window, first, offset))
                tracker.add(index)
        tracker.finish_empty(empty)

        with self._guard():
            self._run_windows(jobs, results, tracker)
            self._run_contexts(contexts, results, tracker)

        answers = []
        for request, ids, result in zip(requests, token_ids, results):
            assert result.complete(), "every token must be scored exactly once"
            answers.append(TokenLogprobs(
                token_ids=ids,
                logprobs=result.logprobs,
                mu=result.mu if request.stats else None,
                sigma=result.sigma if request.stats else None,
                rank=result.rank if request.stats else None,
                # token strings let word-level methods (info_probe, veilprobe) map tokens to words
                tokens=self.tokenizer.convert_ids_to_tokens(ids),
            ))
        return answers

    def _windows(self, ids: list[int], lead: list[int]) -> list[tuple[list[int], int, int]]:
        """Split a token list into (window ids, first scored window position, offset from
        window position to text position); see the drawing in the module docstring."""
        length = self.max_length
        if len(ids) <= length:
            return [(ids, 1, 0)]
        stride = length // 2
        windows = [(ids[:length], 1, 0)]
        scored_to = length  # text positions < scored_to have a score
        begin = stride
        while scored_to < len(ids):
            end = min(begin + length - len(lead), len(ids))
            window = lead + ids[begin:end]
            offset = begin - len(lead)
            windows.append((window, scored_to - offset, offset))
            scored_to = end
            begin += stride
        return windows

    def _run_windows(self, jobs, results, tracker: _Completion) -> None:
        import torch

        jobs = sorted(jobs, key=lambda job: len(job[1]), reverse=True)
        for start in range(0, len(jobs), self.batch_size):
            batch = jobs[start:start + self.batch_size]
            hidden = self._padded_hidden([window for _, window, _, _ in batch])
            rows, targets, spans = [], [], []
            for row, (_, window, first, _) in enumerate(batch):
                # logits at position j-1 score the token at position j
                rows.append(hidden[row, first - 1:len(window) - 1])
                targets.extend(window[first:])
                spans.append(len(window) - first)
            scores = self._score_rows(torch.cat(rows), torch.tensor(targets, device=self.device))
            del hidden
            cursor = 0
            for (index, window, first, offset), span in zip(batch, spans):
                part = [s[cursor:cursor + span] for s in scores]
                # window position j is text position j + offset, whose score sits at j + offset - 1
                results[index].put(first + offset - 1, *part)
                cursor += span
                tracker.done(index)
            tracker.flush()

    def _run_contexts(self, contexts, results, tracker: _Completion) -> None:
        import torch

        if not contexts:
            return
        by_width: dict[int, list] = {}
        for item in contexts.items():  # requests may ask for different n
            by_width.setdefault(len(item[0]), []).append(item)
        for group in by_width.values():
            group.sort(key=lambda item: item[0])  # contexts that share a prefix sit together
            for start in range(0, len(group), MAX_NGRAM_BATCH):
                batch = group[start:start + MAX_NGRAM_BATCH]
                last = self._context_states([key for key, _ in batch])
                rows, targets, owners = [], [], []
                for row, (_, users) in enumerate(batch):
                    for index, slot, target in users:
                        rows.append(row)
                        targets.append(target)
                        owners.append((index, slot))
                scores = self._score_rows(last[torch.tensor(rows, device=self.device)],
                                          torch.tensor(targets, device=self.device))
                values = list(zip(*(s.tolist() for s in scores)))
                for (index, slot), value in zip(owners, values):
                    results[index].put_one(slot, *value)
                    tracker.done(index)
                tracker.flush()

    def _context_states(self, keys: list[tuple[int, ...]]):
        """Last-position hidden states of equal-length token sequences, computing each
        distinct prefix once: level k runs one token for every distinct k-token prefix,
        on top of a KV cache whose rows are re-indexed from the parents of level k - 1.

        The n-gram contexts of a text overlap in most of their prefixes (over 200 KJV
        passages of 128 tokens, 5-gram contexts need 62% of the tokens of running each
        context on its own), and a causal model's state at a position depends on that
        position's prefix only, so this is exact.
        """
        import torch

        width = len(keys[0])
        index: dict[tuple[int, ...], int] = {}
        cache = hidden = None
        for level in range(1, width + 1):
            parents, tokens, index_here = [], [], {}
            for key in keys:
                prefix = key[:level]
                if prefix not in index_here:
                    index_here[prefix] = len(tokens)
                    tokens.append(prefix[-1])
                    parents.append(index.get(prefix[:-1], 0))
            input_ids = torch.tensor(tokens, device=self.device).unsqueeze(1)
            if cache is not None:
                cache.reorder_cache(torch.tensor(parents, device=self.device))
            out = self._decoder(input_ids=input_ids, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            hidden = out.last_hidden_state[:, -1]
            index = index_here
        return hidden[torch.tensor([index[key] for key in keys], device=self.device)]

    # -- prompts ------------------------------------------------------------------------
    def _prompt_ids(self, prompt: str | None, messages, use_chat: bool) -> list[int]:
        """Token ids of a prompt. Chat messages go through the chat template with the
        generation prompt; a plain prompt given as well continues the assistant turn."""
        if messages is None and use_chat and prompt is not None:
            messages, prompt = (("user", prompt),), None
        if messages is None:
            return list(self.tokenizer(prompt or "").input_ids)
        turns = [{"role": role, "content": content} for role, content in messages]
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False)
            text += prompt or ""
            # the template writes its own special tokens (BOS included)
            return list(self.tokenizer(text, add_special_tokens=False).input_ids)
        text = "".join(f"{t['role']}: {t['content']}\n" for t in turns) + "assistant:" + (
            f" {prompt}" if prompt else "")
        return list(self.tokenizer(text).input_ids)

    # -- generation ---------------------------------------------------------------------
    def _answer_generate(self, requests: list[GenerateRequest], progress: Progress = None):
        """Requests run in left-padded batches of the same settings. A sampled row draws
        from its own random generator seeded with its request's seed (see _SeededSampler),
        so its sample does not depend on what else is in the batch."""
        answers: list[Generation | None] = [None] * len(requests)
        prompts = [self._prompt_ids(r.prompt, r.messages, self.chat) for r in requests]
        for index, request in enumerate(requests):
            if request.max_tokens < 1:
                raise ConfigError(f"max_tokens must be >= 1, got {request.max_tokens}")
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            key = (request.max_tokens, request.stop, request.repetition_penalty, request.top_logprobs,
                   request.temperature, request.top_p if request.temperature > 0 else None)
            groups.setdefault(key, []).append(index)
        with self._guard():
            for key, indices in groups.items():
                if key[0] == 1 and key[4] == 0 and not self.logits_processors:
                    # greedy one-token requests need no decoding loop (neighbourhood
                    # proposals: thousands of them, prefixes of a few texts)
                    request = requests[indices[0]]
                    for i, output in zip(indices, self._next_token_generations([prompts[i] for i in indices], request)):
                        answers[i] = output
                    if progress:
                        progress(len(indices))
                    continue
                indices = sorted(indices, key=lambda i: len(prompts[i]))
                for start in range(0, len(indices), self.batch_size):
                    chunk = indices[start:start + self.batch_size]
                    outputs = self._generate([prompts[i] for i in chunk], requests[chunk[0]],
                                             seeds=[requests[i].seed for i in chunk])
                    for i, output in zip(chunk, outputs):
                        answers[i] = output
                    if progress:
                        progress(len(chunk))
        return answers

    def _generate(self, prompts: list[list[int]], request: GenerateRequest,
                  seeds: Sequence[int | None] | None = None) -> list[Generation]:
        import torch
        from transformers import (
            GenerationConfig,
            LogitsProcessorList,
            StoppingCriteriaList,
        )

        if not all(prompts):
            raise BackendError("empty generation prompt: give a prompt or messages")
        width = max(len(p) for p in prompts)
        if width + request.max_tokens > self._context_limit():
            raise BackendError(f"prompt of {width} tokens + max_tokens {request.max_tokens} exceeds "
                               f"the model's context of {self._context_limit()} tokens")
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # left padding: every row ends at the last column
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        eos_ids = self._eos_ids()
        processors = LogitsProcessorList(self.logits_processors)
        if request.temperature > 0:
            # generate() runs greedy over the one-hot scores of our own per-row sampler,
            # which comes after every other processor (repetition penalty included)
            seeds = list(seeds or [None] * len(prompts))
            processors.append(_SeededSampler(
                [s if s is not None else int.from_bytes(os.urandom(4), "little") for s in seeds],
                request.temperature, request.top_p, self.device))
        config = GenerationConfig(
            max_new_tokens=request.max_tokens,
            do_sample=False,
            repetition_penalty=request.repetition_penalty,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(eos_ids) or None,
            return_dict_in_generate=True,
            output_logits=request.top_logprobs > 0,
        )
        stopping = StoppingCriteriaList()
        if request.stop:
            stopping.append(_stop_strings_criterion(self.tokenizer, request.stop, width))
        output = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                     generation_config=config, logits_processor=processors,
                                     stopping_criteria=stopping)
        new_tokens = output.sequences[:, width:].tolist()
        step_logprobs = None
        if request.top_logprobs > 0:
            stacked = torch.stack(output.logits, dim=1).float()  # [B, steps, V], raw model logits
            step_logprobs = torch.log_softmax(stacked, dim=-1).topk(request.top_logprobs, dim=-1)
        results = []
        for row, tokens in enumerate(new_tokens):
            results.append(self._finish(tokens, len(prompts[row]), request, eos_ids, step_logprobs, row))
        return results

    def _next_token_generations(self, prompts: list[list[int]], request: GenerateRequest) -> list[Generation]:
        """Greedy one-token generations without generate(): a prompt whose tokens begin a
        longer prompt of the set is read off that prompt's forward pass (the causal state at
        its last token is the same), so all the word-boundary prompts of one text cost one
        pass of the text. Same token, top log-probs and finish reason as generate()."""
        import torch
        from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

        if not all(prompts):
            raise BackendError("empty generation prompt: give a prompt or messages")
        longest = max(len(p) for p in prompts)
        if longest + 1 > self._context_limit():
            raise BackendError(f"prompt of {longest} tokens + max_tokens 1 exceeds "
                               f"the model's context of {self._context_limit()} tokens")
        chains: list[tuple[list[int], list[int]]] = []  # (longest prompt, prompts it holds)
        for i in sorted(range(len(prompts)), key=lambda i: len(prompts[i]), reverse=True):
            ids = prompts[i]
            for head, members in reversed(chains):  # the text just opened is the likeliest
                if head[:len(ids)] == ids:
                    members.append(i)
                    break
            else:
                chains.append((ids, [i]))
        processors = LogitsProcessorList()
        if request.repetition_penalty != 1.0:
            processors.append(RepetitionPenaltyLogitsProcessor(request.repetition_penalty))
        eos_ids = self._eos_ids()
        answers: list[Generation | None] = [None] * len(prompts)
        rows_per_head = max(1, LOGIT_ROWS // self.vocab_size)
        for start in range(0, len(chains), self.batch_size):
            batch = chains[start:start + self.batch_size]
            hidden = self._padded_hidden([head for head, _ in batch])
            wanted = [(row, i) for row, (_, members) in enumerate(batch) for i in members]
            for begin in range(0, len(wanted), rows_per_head):
                part = wanted[begin:begin + rows_per_head]
                logits = self._logits(torch.stack([hidden[row, len(prompts[i]) - 1] for row, i in part]))
                top = torch.log_softmax(logits, dim=-1).topk(request.top_logprobs, dim=-1) \
                    if request.top_logprobs > 0 else None
                for k, (_, i) in enumerate(part):
                    scores = processors(torch.tensor([prompts[i]], device=self.device), logits[k:k + 1].clone())
                    step = None if top is None else (top.values[k:k + 1].unsqueeze(1), top.indices[k:k + 1].unsqueeze(1))
                    answers[i] = self._finish([int(scores.argmax())], len(prompts[i]), request, eos_ids, step, 0)
        return answers  # type: ignore[return-value]

    def _context_limit(self) -> int:
        config = self.model.config.get_text_config() if hasattr(self.model.config, "get_text_config") else self.model.config
        return getattr(config, "max_position_embeddings", None) or self.max_length

    def _finish(self, tokens: list[int], prompt_len: int, request: GenerateRequest, eos_ids: set[int],
                step_logprobs, row: int) -> Generation:
        count = len(tokens)
        reason = "length"
        for k, token in enumerate(tokens):
            if token in eos_ids:
                count, reason = k + 1, "stop"
                break
        tokens = tokens[:count]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cut = _first_stop(text, request.stop)
        if cut is not None:
            text, reason = text[:cut], "stop"
            # the tokens it took to produce the stop string
            for k in range(1, len(tokens) + 1):
                if _first_stop(self.tokenizer.decode(tokens[:k], skip_special_tokens=True), request.stop) is not None:
                    count = k
                    break
        top = None
        if step_logprobs is not None:
            values, ids = step_logprobs
            top = []
            for step in range(count):
                alternatives: dict[str, float] = {}
                for value, token_id in zip(values[row, step].tolist(), ids[row, step].tolist()):
                    piece = self.tokenizer.decode([token_id])
                    alternatives[piece] = max(value, alternatives.get(piece, -math.inf))
                top.append(alternatives)
        return Generation(text=text, finish_reason=reason, prompt_tokens=prompt_len,
                          completion_tokens=count, top_logprobs=top)

    # -- multiple choice ----------------------------------------------------------------
    def _answer_choice_logprobs(self, requests: list[ChoiceLogprobsRequest], progress: Progress = None):
        """Log-prob of each choice's first token at the position after the prompt.

        A choice is tried both as tokenized alone ("A") and with a leading space (" A"),
        and the larger log-prob is kept: whether "Answer:" is followed by the token "A" or
        " A" depends on the tokenizer and on how the prompt ends, and the model's
        preferred form is the one it would actually produce.
        """
        prompts = [self._prompt_ids(r.prompt, r.messages, use_chat=False) for r in requests]
        for ids in prompts:
            if not ids:
                raise BackendError("empty prompt: nothing to condition the choices on")
            if len(ids) > self._context_limit():
                raise BackendError(f"prompt of {len(ids)} tokens exceeds the model's context")
        forms = [{choice: self._choice_token_ids(choice) for choice in r.choices} for r in requests]
        columns = sorted({t for f in forms for ids in f.values() for t in ids})
        with self._guard():
            if self.device == "cpu":
                # DE-COP's 24 orderings of a passage share most of their prompt: on CPU,
                # computing each shared prefix once beats batching (issue 9's benchmark).
                from copyprobe.backends.prefix_tree import shared_prefix_logprobs

                rows = shared_prefix_logprobs(self.model, prompts, columns, progress=progress)
            else:
                rows = self._batched_next_logprobs(prompts, columns, progress)
        answers = []
        for row, choice_forms in zip(rows, forms):
            value = dict(zip(columns, row))
            answers.append(ChoiceLogprobs(logprobs={
                choice: max(value[t] for t in ids) for choice, ids in choice_forms.items()}))
        return answers

    def _batched_next_logprobs(self, prompts: list[list[int]], columns: list[int], progress: Progress):
        """Log-probs of ``columns`` as the next token after each prompt, batched by length."""
        import torch

        rows: list[list[float] | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]), reverse=True)
        index = torch.tensor(columns)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            hidden = self._padded_hidden([prompts[i] for i in chunk])
            last = torch.stack([hidden[row, len(prompts[i]) - 1] for row, i in enumerate(chunk)])
            logp = torch.log_softmax(self._logits(last), dim=-1).cpu()[:, index]
            for row, i in enumerate(chunk):
                rows[i] = logp[row].tolist()
            if progress:
                progress(len(chunk))
        return rows

    def _choice_token_ids(self, choice: str) -> set[int]:
        ids = set()
        for form in (choice, " " + choice):
            tokens = self.tokenizer(form, add_special_tokens=False).input_ids
            if tokens:
                ids.add(tokens[0])
        if not ids:
            raise BackendError(f"choice {choice!r} tokenizes to nothing")
        return ids


class _SeededSampler:
    """Logits processor that samples every row from its own ``torch.Generator``:
    temperature, then nucleus (top_p) filtering, then one uniform draw per row and step
    through the row's cumulative distribution. It returns scores that are 0 at the chosen
    token and -inf elsewhere, so generate() in greedy mode emits exactly that token. A row's
    tokens depend only on its seed and its own logits, which lets sampled requests share a
    batch (one draw per row per step, whatever the other rows do)."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device: str):
        import torch

        self.generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]
        self.temperature = float(temperature)
        self.top_p = float(top_p)

    def __call__(self, input_ids, scores):
        import torch

        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        ordered, order = probs.sort(dim=-1, descending=True)
        if self.top_p < 1.0:
            # keep the smallest set of likeliest tokens whose mass reaches top_p
            before = ordered.cumsum(dim=-1) - ordered
            ordered = ordered.masked_fill(before >= self.top_p, 0.0)
        cumulative = ordered.cumsum(dim=-1)
        draws = torch.stack([torch.rand((), generator=g, device=g.device) for g in self.generators])
        draws = draws.to(cumulative.device).unsqueeze(1) * cumulative[:, -1:]
        picked = torch.searchsorted(cumulative, draws).clamp_max(cumulative.shape[1] - 1)
        chosen = order.gather(1, picked)
        out = torch.full_like(scores, -math.inf)
        out.scatter_(1, chosen, 0.0)
        return out


class _ScoreBuffer:
    """Per-request result lists, filled window by window, in text order."""

    def __init__(self, size: int):
        self.logprobs: list[float] = [math.nan] * size
        self.mu: list[float] = [math.nan] * size
        self.sigma: list[float] = [math.nan] * size
        self.rank: list[int] = [0] * size
        self.filled = [False] * size

    def put(self, start: int, logprobs, mu, sigma, rank) -> None:
        for k, value in enumerate(zip(logprobs.tolist(), mu.tolist(), sigma.tolist(), rank.tolist())):
            self.put_one(start + k, *value)

    def put_one(self, slot: int, logprob: float, mu: float, sigma: float, rank: int) -> None:
        assert not self.filled[slot], "token scored twice"
        self.filled[slot] = True
        self.logprobs[slot], self.mu[slot], self.sigma[slot], self.rank[slot] = logprob, mu, sigma, int(rank)

    def complete(self) -> bool:
        return all(self.filled)


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


def _stop_strings_criterion(tokenizer, stops: Sequence[str], prompt_width: int):
    """A row is done once its generated text contains a stop string. (transformers'
    StopStringCriteria pre-computes tables over the whole vocabulary, slow for 262k.)"""
    import torch
    from transformers import StoppingCriteria

    stops = [s for s in stops if s]

    class StopStrings(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = [
                _first_stop(tokenizer.decode(row[prompt_width:], skip_special_tokens=True), stops) is not None
                for row in input_ids.tolist()
            ]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StopStrings()
