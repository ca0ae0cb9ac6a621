"""copyprobe: was a language model trained on this text, and how much of it does it reproduce?

The public API (the CLI uses exactly this)::

    import copyprobe
    result = copyprobe.detect("smollm2-135m-instruct", "passages.jsonl",
                              ["loss", "min_k", "min_k_pp"], params={"min_k": {"k": 0.1}},
                              out="runs/first")
    result.scores    # pandas DataFrame, one row per passage, one column per method
    result.metrics   # {"passage": {method: {"auc", "auc_low", ...}}, "document": ...}
"""

from __future__ import annotations

from copyprobe._version import __version__

from copyprobe.backends.base import (
    Backend,
    ChoiceLogprobsRequest,
    GenerateRequest,
    Generation,
    TokenLogprobs,
    TokenLogprobsRequest,
)
from copyprobe.audit import AuditResult, audit
from copyprobe.data.example import Example
from copyprobe.detect import DetectResult, detect
from copyprobe.errors import CopyprobeError
from copyprobe.kinds import KINDS as _KINDS  # noqa: F401  (registers the run kinds: run.json's "kind", rescore)
from copyprobe.methods.base import Method, Score
from copyprobe.params import param
from copyprobe.record import Run, RunRecord, load_run
from copyprobe.registry import make_method, method_names, register
from copyprobe.session import Session


def load_model(spec: str, **kwargs) -> Backend:
    """Load a backend from a model spec (``smollm2-135m-instruct``, ``gemma-3-270m``,
    ``hf:DIR``, ``gguf:FILE``, ``openai:MODEL@URL``)."""
    from copyprobe.backends.specs import load_backend

    return load_backend(spec, **kwargs)


def load_dataset(path, **kwargs):
    """Read a JSONL / CSV / Parquet file or a saved Hugging Face dataset into examples,
    or a named benchmark (``"wikimia:64"``; ``copyprobe datasets`` lists them)."""
    from copyprobe.data.readers import load_dataset as _load

    return _load(path, **kwargs)


__all__ = [
    "AuditResult",
    "Backend",
    "ChoiceLogprobsRequest",
    "CopyprobeError",
    "DetectResult",
    "Example",
    "GenerateRequest",
    "Generation",
    "Method",
    "Run",
    "RunRecord",
    "Score",
    "Session",
    "TokenLogprobs",
    "TokenLogprobsRequest",
    "__version__",
    "audit",
    "detect",
    "load_dataset",
    "load_model",
    "load_run",
    "make_method",
    "method_names",
    "param",
    "register",
]
