"""A Session: the target model plus every other model a method names, each wrapped by
the response cache, loaded once and closed together.

    with copyprobe.Session("smollm2-135m-instruct") as session:
        first = copyprobe.detect(session, "a.jsonl", ["loss"])
        second = copyprobe.detect(session, "b.jsonl", ["min_k_pp"])   # no second load
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

from copyprobe.backends.base import Backend


class Session:
    def __init__(
        self,
        target: str | Backend,
        *,
        cache: bool | str | Path = True,
        batch_size: int | str | None = "auto",
        device: str = "auto",
        dtype: str = "auto",
        loader: Callable[..., Backend] | None = None,
        api_options: Mapping[str, Any] | None = None,
    ):
        from copyprobe.backends.cache import CachedBackend, ResponseCache, default_cache_path
        from copyprobe.backends.hf.batching import check_batch_size

        # "auto" (batches by memory) or texts per forward pass; see copyprobe.backends.hf.batching
        # None: not given (the Python API's detect and audit): 8 texts a pass for a local model,
        # and nothing to refuse for an API model, which has no batches
        self.batch_size = check_batch_size(8 if batch_size is None else batch_size)
        if isinstance(target, str):  # before the cache file opens: an option the model would ignore is refused
            from copyprobe.backends.specs import check_model_options

            check_model_options(target, device=device, dtype=dtype, batch_size=batch_size, api_options=api_options)
        self.device = device
        self.dtype = dtype
        self._loader = loader
        self._by_weights: dict[tuple[str, str], Any] = {}  # weights identity -> backend loaded from them
        # options for OpenAI-compatible backends only (e.g. api_key_env, concurrency)
        self.api_options = dict(api_options or {})
        if cache is True:
            self.cache = ResponseCache(default_cache_path())
        elif cache is False or cache is None:
            self.cache = None
        else:
            self.cache = ResponseCache(cache)
        self._wrap = (lambda b: CachedBackend(b, self.cache)) if self.cache else (lambda b: b)
        self.closed = False
        # backends this session loaded (and so closes); a Backend handed in stays the caller's
        self._owned: set[str | None] = set()
        self._api_options_used = False
        start = time.perf_counter()
        try:
            raw = target if isinstance(target, Backend) else self._load(target)
        except BaseException:
            self._close_cache()
            raise
        self.load_s = time.perf_counter() - start
        self.target_spec = raw.spec
        self.backends: dict[str | None, Backend] = {None: self._wrap(raw)}
        if not isinstance(target, Backend):
            self._owned.add(None)

    def _load(self, spec: str) -> Backend:
        """Load ``spec``; a spec naming weights this session already loaded under another
        spec (an alias and ``gguf:`` with its file, two spellings of one directory) gets
        that model under its own name, so a file is read (and de-quantized) once per run."""
        if self._loader is not None:
            return self._loader(spec)
        from copyprobe.backends.specs import load_backend, weights_identity

        identity = weights_identity(spec)
        if identity in self._by_weights:
            return self._by_weights[identity].renamed(spec)
        if spec.startswith("openai:"):  # the options of a local model do not reach an API model, and back
            self._api_options_used = True
            backend = load_backend(spec, batch_size=self.batch_size, **self.api_options)
        else:
            backend = load_backend(spec, device=self.device, dtype=self.dtype, batch_size=self.batch_size)
        if identity is not None and hasattr(backend, "renamed"):  # a backend that can be shared (HFBackend)
            self._by_weights[identity] = backend
        return backend

    def backend_for(self, spec: str | None) -> Backend:
        """The (cached) backend of ``spec``; None or the target's own spec is the target."""
        if self.closed:
            raise RuntimeError("this Session is closed")
        if spec == self.target_spec:
            spec = None
        if spec not in self.backends:
            start = time.perf_counter()
            self.backends[spec] = self._wrap(self._load(spec))
            self._owned.add(spec)
            self.load_s += time.perf_counter() - start
        return self.backends[spec]

    @property
    def target(self) -> Backend:
        return self.backends[None]

    def cache_counts(self) -> dict[str, Any]:
        hits = sum(getattr(b, "hits", 0) for b in self.backends.values())
        misses = sum(getattr(b, "misses", 0) for b in self.backends.values())
        return {"path": str(self.cache.path) if self.cache else None, "hits": hits, "misses": misses}

    def model_info(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(target facts, other models' facts by spec) for the run record. A local target's
        facts include ``weights_location``, the weights its spec loads, resolved from the
        working directory of this run: a later run in the same output directory is of the
        same model when its spec loads the same (record.prepare_out_dir)."""
        from copyprobe.backends.specs import weights_identity

        target = self.target.info()
        spec = target.get("spec")
        location = weights_identity(spec) if isinstance(spec, str) else None
        if location is not None:
            target = {**target, "weights_location": list(location)}
        return target, {spec: b.info() for spec, b in self.backends.items() if spec is not None}

    def close(self, *, wait: bool = True) -> None:
        """Release the backends this session loaded and the cache file; safe to call twice.
        ``wait=False``: the cache file closes on a thread of its own (its last checkpoint
        overlaps the caller's next work); a later ``close()`` waits for it."""
        if self.closed:
            if wait and self.cache is not None:
                self.cache.close()  # a close begun without waiting: wait for it
            return
        self.closed = True
        if self.api_options and not self._api_options_used:
            import warnings

            from copyprobe.errors import DataWarning

            given = ", ".join(sorted(self.api_options))
            warnings.warn(DataWarning(f"the options of OpenAI-compatible models ({given}) had no effect: no "
                                      "openai: model took part in this run"), stacklevel=2)
        try:
            for spec in self._owned:
                self.backends[spec].close()
        finally:
            self._close_cache(wait)

    def _close_cache(self, wait: bool = True) -> None:
        if self.cache is not None:
            if wait:
                self.cache.close()
            else:
                self.cache.start_closing()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
