"""Loading transformers models: device and dtype, weight hashing, model directories, hub
ids and GGUF files (with a conversion cache). Used by :class:`HFBackend` and by
``copyprobe plant``, so a model is found, loaded and identified the same way in both.

``kind`` below is ``"hf"`` (a ``save_pretrained`` directory or a hub id) or ``"gguf"``
(a GGUF file), as resolved from a model spec by :func:`copyprobe.backends.specs.resolve_local`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from copyprobe.errors import BackendError, ConfigError, one_line
from copyprobe.files import name_bytes
from copyprobe.hub import hub_unreachable, offline_by_env

GGUF_MAGIC = b"GGUF"

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16"}


# -- device and dtype ----------------------------------------------------------------


def resolve_device(device: str, accelerators: Sequence[str] = ("cuda",)) -> str:
    """``auto`` becomes the first available of ``accelerators`` (``cuda``, ``mps``), else
    ``cpu``; an explicit device is checked. Scoring leaves MPS out of ``auto`` because its
    streaming statistics accumulate in float64, which MPS lacks; training (plant) needs no
    float64 and takes MPS when there is one."""
    import torch

    if device == "auto":
        for name in accelerators:
            if _available(torch, name):
                return name
        return "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"unknown device {device!r} (use auto, cpu, cuda, cuda:N or mps)") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but no CUDA GPU is available")
    return device


def _available(torch, name: str) -> bool:
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        mps = getattr(torch.backends, "mps", None)
        return mps is not None and mps.is_available()
    raise ValueError(f"unknown accelerator {name!r}")


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


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def weights_bytes(model) -> int:
    """Memory the model's weights take (tied weights once), for the run record."""
    return int(sum(p.numel() * p.element_size() for p in model.parameters()))


# -- hashing ---------------------------------------------------------------------------


# Files this large have their sha256 remembered (see sha256_file); smaller ones hash in
# milliseconds.
HASH_MEMO_MIN_BYTES = 16 << 20
HASH_MEMO_FILE = "file-hashes.json"
_hash_memo: dict[str, Any] | None = None


def sha256_file(path: str | os.PathLike) -> str:
    """The file's sha256. Hashing a model's weights takes seconds (2.2 s for SmolLM2's
    540 MB on this project's machine, as long as loading them), so a large file's hash is
    remembered in ``<cache>/file-hashes.json`` with its stat: size, modification and
    status-change times, inode and device. Writing to a file changes its status-change
    time, which no program can set back, and replacing it changes the inode, so the same
    stat means the same content; any change is hashed again."""
    file = Path(path)
    before = file.stat()
    if before.st_size < HASH_MEMO_MIN_BYTES:
        return _read_sha256(file)
    key, stamp = str(file.resolve()), _stamp(before)
    memo = _hash_memo_entries()
    entry = memo.get(key)
    if isinstance(entry, dict) and entry.get("stat") == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = _read_sha256(file)
    if _stamp(file.stat()) == stamp:  # unchanged while it was read
        memo[key] = {"stat": stamp, "sha256": digest}
        _save_hash_memo(memo)
    return digest


def _read_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def _hash_memo_entries() -> dict[str, Any]:
    global _hash_memo
    if _hash_memo is None:
        try:
            loaded = json.loads((cache_base_dir() / HASH_MEMO_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # absent or damaged: start afresh
            loaded = {}
        _hash_memo = loaded if isinstance(loaded, dict) else {}
    return _hash_memo


def _save_hash_memo(memo: dict[str, Any]) -> None:
    """Merge into the file (another process may have added entries) and replace it
    atomically; a cache directory that cannot be written only costs the next hash."""
    from copyprobe.files import atomic_write

    target = cache_base_dir() / HASH_MEMO_FILE
    try:
        on_disk = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        on_disk = {}
    merged = {**(on_disk if isinstance(on_disk, dict) else {}), **memo}
    try:
        atomic_write(target, json.dumps(merged, indent=1, sort_keys=True))
    except OSError:
        pass


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                    "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
                    "generation_config.json")


def hash_model_dir(path: str | os.PathLike) -> str:
    """Identify a model directory: config, tokenizer and weight files by content. Weights
    are hashed whatever their size (the hash is remembered by the file's stat, so a model
    is read for it once): two checkpoints of one model (a fine-tune's epochs) have the same
    file names and sizes, and a fingerprint of names and sizes made the response cache
    answer for one with the other's answers (Qwen2.5-0.5B, 2 GB, before 2026-11-27)."""
    root = Path(path)
    digest = hashlib.sha256()
    for name in ("config.json", *_TOKENIZER_FILES):
        file = root / name
        if file.is_file():
            digest.update(name.encode() + b"\0" + bytes.fromhex(sha256_file(file)))
    weights = sorted(p for p in root.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    for file in weights:
        digest.update(name_bytes(file.name) + b"\0" + str(file.stat().st_size).encode())
        digest.update(bytes.fromhex(sha256_file(file)))
    return digest.hexdigest()


def hash_weights(kind: str, path: str | os.PathLike) -> str:
    """The weights' identity on disk: a GGUF file's sha256, a model directory's
    :func:`hash_model_dir`."""
    return sha256_file(path) if kind == "gguf" else hash_model_dir(path)


def hash_parameters(model) -> str:
    """Content hash of a model held only in memory (no files to hash)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)}".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


# -- model directories and hub ids -------------------------------------------------------


def quiet_transformers() -> None:
    """transformers prints weight-loading bars and warnings meant for its developers;
    copyprobe shows its own progress. COPYPROBE_VERBOSE=1 keeps them."""
    if os.environ.get("COPYPROBE_VERBOSE"):
        return
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _quiet_gguf_conversion_bar() -> None:
    """transformers draws the GGUF conversion's bar with tqdm directly, past
    ``disable_progress_bar``; the line above it says what is happening (and --no-progress
    must mean no bar). COPYPROBE_VERBOSE=1 keeps it."""
    if os.environ.get("COPYPROBE_VERBOSE"):
        return
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # another layout of transformers: its bar stays
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None and not getattr(bar, "_copyprobe_quiet", False):
        quiet = functools.partial(bar, disable=True)
        quiet._copyprobe_quiet = True  # type: ignore[attr-defined]
        gguf_utils.tqdm = quiet


def local_directory(name_or_path: str) -> Path | None:
    """The model directory ``name_or_path`` names, or None for a hub id. A name that looks
    like a path (absolute, ./, ~) must exist and hold a config.json."""
    local = Path(name_or_path).expanduser()
    if local.is_dir() and not (local / "config.json").is_file():
        raise BackendError(f"not a transformers model directory (no config.json): {local}")
    looks_local = local.is_absolute() or name_or_path.startswith((".", "~")) or local.exists()
    if looks_local and not local.exists():
        raise BackendError(f"model directory not found: {local}")
    return local if looks_local else None


def hub_options(name_or_path: str, local: Path | None) -> tuple[dict[str, Any], str | None]:
    """``from_pretrained`` options for a hub id, and why the hub cannot be reached: then
    only the local cache is read (``local_files_only``), so a cached model still loads."""
    # offline mode asks nobody already
    if local is not None or offline_by_env("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        return {}, None
    why = hub_unreachable()
    return ({"local_files_only": True}, why) if why else ({}, None)


def _unreachable_error(what: str, name: str, why: str, exc: BaseException) -> BackendError:
    # transformers says "not found" with an OSError; anything else (a damaged cached copy)
    # is its own problem and keeps its words
    found = "it is not in the local cache" if isinstance(exc, OSError) else f"its cached copy fails: {one_line(exc)}"
    return BackendError(f"cannot load {what} {name!r}: the Hugging Face hub cannot be reached ({why}) and {found}; "
                        "give a model directory or a .gguf file")


def placement(device: str | None) -> dict[str, Any]:
    """``from_pretrained`` options that put the weights on ``device`` as they are read: on a
    GPU the file goes to its memory directly instead of to host memory first and then
    across (``.to(device)`` afterwards is then a no-op)."""
    return {"device_map": device} if device is not None and str(device).startswith("cuda") else {}


def load_pretrained(name_or_path: str, torch_dtype, device: str | None = None) -> tuple[Any, Any, Path | None]:
    """(model, tokenizer, local directory or None for a hub id); with ``device``, the
    weights are read onto it (:func:`placement`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    local = local_directory(name_or_path)
    where = str(local) if local is not None else name_or_path
    hub, unreachable = hub_options(name_or_path, local)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, **hub)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=torch_dtype, **placement(device), **hub)
    except Exception as exc:
        if unreachable:
            raise _unreachable_error("model", name_or_path, unreachable, exc) from exc
        raise BackendError(f"cannot load model {name_or_path!r}: {one_line(exc)}") from exc
    return model, tokenizer, local


def load_pretrained_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    local = local_directory(name_or_path)
    hub, unreachable = hub_options(name_or_path, local)
    try:
        return AutoTokenizer.from_pretrained(str(local) if local is not None else name_or_path, **hub)
    except Exception as exc:
        if unreachable:
            raise _unreachable_error("the tokenizer of", name_or_path, unreachable, exc) from exc
        raise BackendError(f"cannot load the tokenizer of {name_or_path!r}: {one_line(exc)}") from exc


def load_tokenizer(kind: str, path: str | os.PathLike):
    """Only the tokenizer of a model (its weights are not loaded)."""
    return load_gguf_tokenizer(path) if kind == "gguf" else load_pretrained_tokenizer(str(path))


def load_config(kind: str, path: str | os.PathLike):
    """The model's transformers config, without its weights; None when it cannot be read
    (loading the model then reports why)."""
    from transformers import AutoConfig

    try:
        if kind == "gguf":
            file = Path(path)
            return AutoConfig.from_pretrained(file.parent, gguf_file=file.name)
        hub, _ = hub_options(str(path), local_directory(str(path)))  # a cached hub id: no retries offline
        return AutoConfig.from_pretrained(path, **hub)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def context_length(config) -> int | None:
    """The number of positions the model was built for, from its (text) config."""
    if config is None:
        return None
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(text_config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


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


def load_gguf(path: str | os.PathLike, torch_dtype, device: str | None = None) -> tuple[Any, Any, str, bool]:
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
            model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch_dtype, **placement(device))
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
    _quiet_gguf_conversion_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
        model = AutoModelForCausalLM.from_pretrained(file.parent, **kwargs)
    except Exception as exc:
        raise BackendError(f"cannot load GGUF file {file}: {one_line(exc)}") from exc
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
        raise BackendError(f"cannot load the tokenizer of GGUF file {file}: {one_line(exc)}") from exc


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
