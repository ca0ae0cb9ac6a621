"""HFBackend: a causal LM from transformers, answering every request kind.

The class holds what all jobs share: construction (through :mod:`.loading`), identity,
the forward pass and LM head, prompts and out-of-memory handling. Each kind of request is
answered by a mixin in its own module: token log-probs (:mod:`.scoring`), generation
(:mod:`.generation`), multiple choice (:mod:`.choices`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from copyprobe.backends.base import (
    ALL_CAPABILITIES,
    Backend,
    GradNorm,
    GradNormRequest,
    TokenLogprobs,
    checked_max_length,
)
from copyprobe.backends.hf.batching import (
    AUTO,
    CPU_TOKEN_BUDGET,
    Batcher,
    check_batch_size,
    cuda_token_budget,
    sequences_per_batch,
)
from copyprobe.backends.hf.choices import ChoiceLogprobsMixin
from copyprobe.backends.hf.generation import GenerationMixin
from copyprobe.backends.hf.loading import (
    context_length,
    dtype_name,
    hash_model_dir,
    hash_parameters,
    load_gguf,
    load_pretrained,
    local_directory,
    resolve_device,
    resolve_dtype,
    weights_bytes,
)
from copyprobe.backends.hf.scoring import TokenLogprobsMixin, soft_cap
from copyprobe.errors import BackendError, ConfigError


def plain_causal_sdpa(config: Any) -> bool:
    """Whether a model attends through PyTorch's SDPA with one causal mask for every layer
    (no sliding-window or other per-layer pattern), so that :func:`causal_padding_mask` is
    the mask transformers would build for a padded batch."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(text, "_attn_implementation", None) != "sdpa":
        return False
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True) is not False:
        return False
    if any(kind != "full_attention" for kind in getattr(text, "layer_types", None) or []):
        return False
    return getattr(text, "attention_chunk_size", None) is None


def causal_padding_mask(mask):
    """The [B, 1, W, W] boolean mask of a right-padded batch (position i sees the real
    tokens at j <= i) from its [B, W] 0/1 mask: what transformers builds for SDPA, made here
    because transformers reads the 2D mask on the host first (is there padding at all?), two
    waits for the device a forward pass that let no batch be queued while another runs
    (101 stream synchronisations in one detect on an H200); a 4D mask is used as given."""
    import torch

    width = mask.shape[1]
    causal = torch.ones(width, width, dtype=torch.bool, device=mask.device).tril_()
    return causal[None, None] & mask.bool()[:, None, None, :]


class HFBackend(TokenLogprobsMixin, GenerationMixin, ChoiceLogprobsMixin, Backend):
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
        batch_size: int | str = "auto",
        max_length: int | None = None,
        chat: bool = False,
        logits_processors: Sequence[Any] | None = None,
        fingerprint_extra: str = "",
        weights_id: str | None = None,
        source: str | None = None,
    ):
        # "auto": token log-prob passes take a budget of padded tokens (see .batching);
        # generation and multiple choice, which batch by count, take DEFAULT_SEQUENCES
        self.batch_setting = check_batch_size(batch_size)
        self.batch_size = sequences_per_batch(self.batch_setting)
        self._text_batcher: Batcher | None = None
        self.device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.device)
        self.model = model.to(device=self.device, dtype=self.torch_dtype).eval()
        self.tokenizer = tokenizer
        self.spec = spec or str(getattr(model, "name_or_path", "") or type(model).__name__)
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        context = context_length(config) or 2048
        self.max_length = checked_max_length(max_length, context)
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
        self._mask_built_here = str(self.device).startswith("cuda") and plain_causal_sdpa(model.config)
        if len(self.lead_ids) >= self.max_length // 2:
            raise ConfigError(f"max length {self.max_length} is too small for this tokenizer")

    # -- construction helpers ---------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name_or_path: str, *, spec: str | None = None, device: str = "auto",
                        dtype: str = "auto", **options: Any) -> HFBackend:
        """Load a local model directory (or, for users with hub access, a hub id)."""
        from concurrent.futures import ThreadPoolExecutor

        resolved = resolve_device(device)
        directory = local_directory(name_or_path)
        # the weights' hash is read while transformers reads them, in a thread (hashing and
        # file reads release the GIL): the files come from the disk once, into the page
        # cache, and the fingerprint costs no second pass after the load (a first load of a
        # model directory hashed every weight file after loading it: 1.33x from_pretrained)
        with ThreadPoolExecutor(max_workers=1) as pool:
            hashed = pool.submit(hash_model_dir, directory) if directory is not None else None
            try:
                model, tokenizer, local = load_pretrained(name_or_path, resolve_dtype(dtype, resolved), resolved)
            except BaseException:
                if hashed is not None:
                    hashed.cancel()
                raise
            weights_id = hashed.result() if hashed is not None else None
        return cls(model, tokenizer, spec=spec or f"hf:{name_or_path}", device=resolved, dtype=dtype,
                   weights_id=weights_id, source=str(local) if local is not None else name_or_path, **options)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike, *, spec: str | None = None, device: str = "auto",
                  dtype: str = "auto", **options: Any) -> HFBackend:
        """Load a GGUF file (through the conversion cache, see :func:`load_gguf`)."""
        resolved = resolve_device(device)
        model, tokenizer, file_sha, _ = load_gguf(path, resolve_dtype(dtype, resolved), resolved)
        return cls(model, tokenizer, spec=spec or f"gguf:{path}", device=resolved, dtype=dtype,
                   weights_id=f"gguf:{file_sha}", source=str(path), **options)

    @classmethod
    def from_path(cls, path: str | os.PathLike, **kwargs: Any) -> HFBackend:
        """A ``.gguf`` file or a model directory / hub id."""
        if str(path).endswith(".gguf") or Path(path).is_file():
            return cls.from_gguf(path, **kwargs)
        return cls.from_pretrained(str(path), **kwargs)

    def renamed(self, spec: str) -> HFBackend:
        """This loaded model under another spec (the same weights named twice in a run,
        see :class:`copyprobe.session.Session`): it shares the weights, the tokenizer and
        the batch limits, and answers like this one (same fingerprint, same cache entries)."""
        twin = copy.copy(self)
        twin.spec = spec
        return twin

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

    def completed(self, response: Any) -> Any:
        """A token log-prob answer read from the cache gets its token strings back (they
        are not stored: see :class:`~copyprobe.backends.base.TokenStrings`)."""
        if isinstance(response, TokenLogprobs) and response.tokens is None:
            return dataclasses.replace(response, tokens=self._token_strings(response.token_ids))
        return response

    # -- identity ---------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            if self._weights_id is None:
                self._weights_id = f"params:{hash_parameters(self.model)}"
            payload = {"backend": "hf", "weights": self._weights_id, "dtype": dtype_name(self.torch_dtype),
                       "max_length": self.max_length, "chat": self.chat, "extra": self.fingerprint_extra}
            self._fingerprint = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return self._fingerprint

    def info(self) -> dict[str, Any]:
        data = super().info()
        data.update({
            "backend": "hf",
            "source": self.source,
            "device": self.device,
            "dtype": dtype_name(self.torch_dtype),
            "max_length": self.max_length,
            "vocab_size": self.vocab_size,
            "n_params": int(sum(p.numel() for p in self.model.parameters())),
            "weights_bytes": weights_bytes(self.model),
            "batch": self._batch_record(),
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
        if self.batch_setting == AUTO:
            return (f"out of memory on {self.device} at {self.batch_size} sequences per batch (batch size auto): "
                    f"give a smaller batch size (batch_size), e.g. {max(1, self.batch_size // 2)}")
        return f"out of memory on {self.device} at batch size {self.batch_size}: lower the batch size"

    # -- batches ------------------------------------------------------------------------
    def _text_batches(self) -> Batcher:
        """The batches of token log-prob passes: by a token budget under "auto", else by
        count. Made at first use, so that a GPU's free memory is read after every model of
        the run that was loaded by then; kept (with any limit an out-of-memory error
        lowered) for the backend's life."""
        if self._text_batcher is None:
            if self.batch_setting == AUTO:
                self._text_batcher = Batcher(count=None, tokens=self._auto_token_budget(), device=self.device)
            else:
                self._text_batcher = Batcher(count=self.batch_setting, tokens=None, device=self.device)
        return self._text_batcher

    @property
    def chunk_requests(self) -> int:
        """Requests the response cache hands over (and commits) at a time: about
        CHUNK_BATCHES batches, counting a text as 256 tokens under "auto"."""
        from copyprobe.backends.cache import CHUNK_BATCHES

        batches = self._text_batches()
        per_batch = batches.count if batches.tokens is None else max(1, batches.tokens // 256)
        return max(1, per_batch) * CHUNK_BATCHES

    def _auto_token_budget(self) -> int:
        if not str(self.device).startswith("cuda"):
            return CPU_TOKEN_BUDGET
        import torch

        from copyprobe.backends.hf.scoring import SCORE_BLOCKS

        dtype_bytes = torch.empty((), dtype=self.torch_dtype).element_size()
        rows, block = SCORE_BLOCKS["cuda"]
        # the streamed LM head holds about three float32 blocks of logits at its peak
        reserved = 3 * 4 * block + rows * 4 * 16
        return cuda_token_budget(self.device, self.model.config, dtype_bytes, self.max_length, reserved)

    def _batch_record(self) -> dict[str, Any]:
        """The batch setting as given and what it became, for the run record."""
        batches = self._text_batches()
        record: dict[str, Any] = {"setting": self.batch_setting, "sequences": self.batch_size}
        if batches.tokens is not None:
            record["token_budget"] = batches.tokens
        chosen = batches.chosen()
        if chosen:  # what the setting chose for this run's token log-prob passes
            record["chosen"] = chosen
        if batches.shrunk:
            record["shrunk_after_out_of_memory"] = True
            if batches.count is not None:
                record["texts_per_batch"] = batches.count
        return record

    def _hidden(self, input_ids, attention_mask=None):
        if attention_mask is not None and self._mask_built_here:
            attention_mask = causal_padding_mask(attention_mask)
        out = self._decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]

    def _padded_hidden(self, sequences: Sequence[Sequence[int]]):
        """Final hidden states of token lists, right-padded to the longest in one batch."""
        import numpy as np

        from copyprobe.backends.hf.scoring import padded_arrays

        ids, mask = padded_arrays(sequences, self.pad_id)
        return self._hidden(self._device_tensor(ids), self._device_tensor(mask.astype(np.int64)))

    def _logits(self, hidden):
        """LM head on hidden rows [N, H] -> float32 logits [N, V]."""
        return soft_cap(self._head(hidden).float(), self._softcap)

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

    # -- gradient norms (white-box) -------------------------------------------------------
    def _answer_grad_norm(self, requests: list[GradNormRequest], progress=None) -> list[GradNorm]:
        """One backward pass per text (gradients are per text, so no batching): the mean
        loss over the scored tokens of the first ``max_length`` tokens, its gradient with
        respect to every weight that requires one, and two norms of it. Gradients are
        cleared after each text and the model is left as it was."""
        import torch

        parameters = [p for p in self.model.parameters() if p.requires_grad]
        if not parameters:
            raise BackendError("the model has no trainable weights: no gradient to take")
        answers = []
        try:
            for request in requests:
                ids = list(self.tokenizer(request.text).input_ids)[:self.max_length]
                if len(ids) < 2:
                    answers.append(GradNorm(global_norm=math.nan, mean_tensor_norm=math.nan, loss=math.nan))
                    continue
                self.model.zero_grad(set_to_none=True)
                with torch.enable_grad():
                    input_ids = torch.tensor([ids], device=self.device)
                    logits = soft_cap(self.model(input_ids=input_ids).logits[0, :-1].float(), self._softcap)
                    loss = torch.nn.functional.cross_entropy(logits, input_ids[0, 1:])
                    loss.backward()
                norms = torch.stack([p.grad.detach().float().norm() for p in parameters if p.grad is not None])
                answers.append(GradNorm(global_norm=float(norms.square().sum().sqrt()),
                                        mean_tensor_norm=float(norms.mean()), loss=float(loss.detach())))
                if progress:
                    progress(1)
        except torch.cuda.OutOfMemoryError as exc:
            raise BackendError(self._oom_message()) from exc
        finally:
            self.model.zero_grad(set_to_none=True)
        return answers

    def _context_limit(self) -> int:
        return context_length(self.model.config) or self.max_length

