"""Request and response types, and the interface every backend implements.

A backend answers lists of requests of a few kinds (list in, list out, as in
lm-evaluation-harness), so the backend owns batching. Methods never call a backend:
they return requests, and the runner answers them through the cache.

Token alignment (all backends): a text is tokenized with the tokenizer's defaults
(special tokens included when the tokenizer adds them). The logits at position i
score token i+1, so the first token is context only and a text of T tokens yields
T-1 scored tokens::

    tokens:   t0   t1   t2   t3
    scored:        ^    ^    ^      log p(t1|t0), log p(t2|t0 t1), log p(t3|t0..t2)
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable, Sequence

from copyprobe.errors import CapabilityError, ConfigError

# Capabilities a backend may declare.
TOKEN_LOGPROBS = "token_logprobs"  # log-prob of each actual token given its full prefix
DISTRIBUTION_STATS = "distribution_stats"  # per position mu/sigma of log p over the vocabulary (+ rank)
NGRAM_LOGPROBS = "ngram_logprobs"  # log-prob of each token given only its last n tokens
GENERATE = "generate"  # text generation
# the top-k log-probs of each generated token (GenerateRequest.top_logprobs > 0): its own
# capability so that a server that generates text but returns no log-probs refuses up front
TOP_LOGPROBS = "top_logprobs"
CHOICE_LOGPROBS = "choice_logprobs"  # log-probs of given next tokens after a prompt
GRAD_NORM = "grad_norm"  # norm of the gradient of the text's loss w.r.t. the weights (local models)
# token log-probs of a text read after a context whose tokens are not scored (ReCaLL); its
# own capability so that a backend that would ignore the context refuses instead
CONTEXT_LOGPROBS = "context_logprobs"

ALL_CAPABILITIES = (TOKEN_LOGPROBS, DISTRIBUTION_STATS, NGRAM_LOGPROBS, GENERATE, CHOICE_LOGPROBS, GRAD_NORM,
                    CONTEXT_LOGPROBS, TOP_LOGPROBS)


# one encoder for every key: json.dumps with any option builds a new one a call
_STABLE_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _stable_json(obj: Any) -> str:
    return _STABLE_ENCODER.encode(obj)


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, read once per class (``fields()`` took 15 µs a call, one
    per answer written to the cache and per request keyed)."""
    return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Request:
    """Base of all requests. ``model`` is None for the target model, else a model spec."""

    kind: ClassVar[str] = ""
    capability: ClassVar[str] = ""

    def payload(self) -> dict[str, Any]:
        """The fields that determine the answer (the model is keyed separately)."""
        return {name: getattr(self, name) for name in _field_names(type(self)) if name != "model"}

    def key(self) -> str:
        """Stable hash of kind + payload: the cache key together with the model fingerprint."""
        return hashlib.sha256(_stable_json({"kind": self.kind, **self.payload()}).encode()).hexdigest()

    def cacheable(self) -> bool:
        return True

    def capabilities(self) -> set[str]:
        return {self.capability}


class Response:
    """Base of the answers: stored in the cache as JSON and read back."""

    def to_json(self) -> dict[str, Any]:
        # the fields themselves: json.dumps only reads them, and dataclasses.asdict's deep
        # copy of every list took 1.7 s for the answers of WikiMIA's 1,650 passages
        return {name: getattr(self, name) for name in _field_names(type(self))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Any:
        return cls(**data)


@dataclass(frozen=True)
class TokenLogprobsRequest(Request):
    """Log-probabilities of every token of ``text``.

    ``ngram``: None scores each token given its whole prefix; an integer n scores each
    token given only its n preceding tokens (n-gram normalization of the slope method);
    tokens with fewer than n predecessors get their full-prefix value, unless
    ``ngram_drop_short``: then they are left out and the lists hold only the T - n
    tokens that have n predecessors (leading special tokens do not count), aligned
    with the last T - n entries of ``token_ids`` (T = the text's own tokens).
    ``context``: text the model reads before ``text`` whose own tokens are not scored
    (ReCaLL's prefix). With a context every token of ``text`` is scored (the first one
    given the context), so the lists have ``len(token_ids)`` entries instead of
    ``len(token_ids) - 1``; the context is tokenized (with the tokenizer's leading special
    tokens) as it is split before a word (its trailing blank line as two newlines where
    that is what a following word gives), and the text on its own without them. An empty
    context is the plain request, with the same cache key as before the field existed.
    ``stats``: also return mu, sigma and rank of the full next-token distribution (off by
    default: not every backend can give them; one that can answers every request with
    them anyway, see ``Backend.canonical``).
    """

    text: str
    ngram: int | None = None
    stats: bool = False
    model: str | None = None
    context: str = ""
    ngram_drop_short: bool = False

    kind: ClassVar[str] = "token_logprobs"

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        if not self.context:  # requests without a context keep their old cache keys
            del data["context"]
        else:  # answered since 2026-12-02 with the context's end split as before a word
            data["context_end"] = "before a word"
        if not self.ngram_drop_short:  # so do requests that keep the short-context tokens
            del data["ngram_drop_short"]
        return data

    def capabilities(self) -> set[str]:
        caps = {TOKEN_LOGPROBS}
        if self.stats:
            caps.add(DISTRIBUTION_STATS)
        if self.ngram is not None:
            caps.add(NGRAM_LOGPROBS)
        if self.context:
            caps.add(CONTEXT_LOGPROBS)
        return caps


# the per-token values of a TokenLogprobs answer that may be held as arrays (Values)
VALUE_FIELDS = ("logprobs", "mu", "sigma", "rank")


@dataclass(frozen=True)
class TokenLogprobs(Response):
    """Answer to a TokenLogprobsRequest; lists are aligned with ``token_ids[1:]``.

    ``mu``/``sigma``: mean and standard deviation of log p(z) for z drawn from the
    model's next-token distribution at that position (Min-K%++); the distribution's
    Shannon entropy is ``-mu`` (see :func:`entropies`); ``rank``: 1 + number
    of vocabulary entries more probable than the actual token. None when not asked for
    or when the backend cannot give them.
    """

    token_ids: list[int]
    logprobs: list[float]
    mu: list[float] | None = None
    sigma: list[float] | None = None
    rank: list[int] | None = None
    tokens: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return values_as_lists(self.json_fields())

    def json_fields(self) -> dict[str, Any]:
        """:meth:`to_json` with the per-token lists a backend handed over as arrays left as
        :class:`Values` (the response cache stores their arrays' bytes, never the lists)."""
        data = super().to_json()
        if isinstance(self.tokens, TokenStrings):  # the backend makes them again when read
            data["tokens"] = None
        return data

    def array(self, name: str):
        """The per-token list ``name`` (``logprobs``, ``mu``, ``sigma``: float64; ``rank``,
        ``token_ids``: int64) as a read-only numpy array, made once per answer and shared by
        every method that reads it (five logit methods converted the same lists five times:
        15,000 conversions for 1,650 passages). None where the answer has no such list. A
        backend that holds the values as arrays already hands them over with
        :meth:`keep_arrays`."""
        memo = self.__dict__.setdefault("_arrays", {})  # not a field: equality and JSON ignore it
        if name not in memo:
            import numpy as np

            values = getattr(self, name)
            if values is None:
                return None
            dtype = np.int64 if name in ("rank", "token_ids") else np.float64
            # Values hold an array already (the backend's, or the cache's bytes): no copy
            self.keep_arrays({name: np.asarray(values, dtype=dtype) if isinstance(values, Values)
                              else np.array(values, dtype=dtype)})
        return memo[name]

    def keep_arrays(self, arrays: dict[str, Any]) -> TokenLogprobs:
        """Remember arrays equal to the lists of the same names (see :meth:`array`); made
        read-only. Returns the answer."""
        memo = self.__dict__.setdefault("_arrays", {})
        for name, array in arrays.items():
            if array.flags.writeable:  # a read-only one (the HF backend's) is kept as it is
                array = array.view()
                array.setflags(write=False)
            memo[name] = array
        return self


class ListOnRead(Sequence):
    """A list made on its first read (``_make``) and kept: indexing, iterating, comparing
    with a list (either side), joining with ``+`` and pickling read it; its length does
    not. Base of the parts of an answer that most methods never read as lists."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: list | None = None

    def _make(self) -> list:
        raise NotImplementedError

    def _list(self) -> list:
        if self._made is None:
            self._made = self._make()
        return self._made

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ListOnRead)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> list:
        if isinstance(other, (list, ListOnRead)):
            return self._list() + list(other)
        return NotImplemented

    def __radd__(self, other: Any) -> list:
        if isinstance(other, list):
            return other + self._list()
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._list())

    def __reduce__(self):
        return (list, (self._list(),))


class Values(ListOnRead):
    """A per-token list of an answer (``logprobs``, ``mu``, ``sigma``, ``rank``) held as
    the 1-D numpy array the backend computed it in, made a list of Python numbers only
    when something reads it as one. The logit methods read the arrays
    (:meth:`TokenLogprobs.array`) and the cache stores their bytes, so for them no list is
    made: the HF backend built four lists an answer (6,600 ``tolist`` calls for WikiMIA's
    1,650 passages) that were only freed again, and a Python float in a list takes 32
    bytes where the array's takes 8. ``np.asarray`` gives the array."""

    __slots__ = ("_array",)

    def __init__(self, array: Any):
        super().__init__()
        self._array = array

    def _make(self) -> list:
        return self._array.tolist()

    def __len__(self) -> int:
        return len(self._array)

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        if copy:
            return np.array(self._array, dtype=dtype)
        return self._array if dtype is None else np.asarray(self._array, dtype=dtype)


def values_as_lists(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (an answer's fields) with each :class:`Values` made the list it stands for,
    as JSON writes it."""
    for name, value in data.items():
        if isinstance(value, Values):
            data[name] = list(value)
    return data


class TokenStrings(ListOnRead):
    """Token strings of ``token_ids`` looked up on first use (all at once, by
    ``convert(ids)``, e.g. a tokenizer's ``convert_ids_to_tokens``), so that answers whose
    strings no method reads cost no look-up: the HF backend scored 256 passages with 26,387
    ``id_to_token`` calls for the logit methods, which read none. Compares equal to the
    list it stands for. Not stored in the response cache (the entry says ``null``): the
    backend that made it completes the entry when it is read back (``Backend.completed``)."""

    __slots__ = ("_ids", "_convert")

    def __init__(self, token_ids: Sequence[int], convert: Any):
        super().__init__()
        self._ids = token_ids
        self._convert = convert

    def _make(self) -> list[str]:
        strings = list(self._convert(list(self._ids)))
        self._convert = None
        return strings

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return super().__repr__() if self._made is not None else f"TokenStrings({len(self)} tokens, not looked up)"


def with_fields(request: Request, **changes: Any) -> Request:
    """A copy of a frozen request with ``changes``: ``dataclasses.replace`` without its
    ``__init__`` call and field checks (13 µs a request; the drive canonicalises 6,600 for
    5 logit methods on 1,650 passages). Requests have no ``__post_init__`` to skip."""
    unknown = set(changes) - set(request.__dataclass_fields__)
    if unknown:
        raise TypeError(f"{type(request).__name__} has no field {sorted(unknown)[0]!r}")
    copy = object.__new__(type(request))
    copy.__dict__.update(request.__dict__)
    copy.__dict__.update(changes)
    return copy


def hands_over(backend: Any) -> bool:
    """Whether ``backend.answer`` takes ``on_result`` (every :class:`Backend` does; test
    doubles and wrappers from elsewhere may not)."""
    try:
        return "on_result" in inspect.signature(backend.answer).parameters
    except (TypeError, ValueError):
        return False


def checked_max_length(max_length: int | None, context: int) -> int:
    """The window a backend scores in: ``max_length`` (default the model's context, at most
    2048 tokens), refused with one line when it is not an integer >= 2 or exceeds the context."""
    if max_length is None:
        max_length = min(context, 2048)
    if not isinstance(max_length, int) or max_length < 2:
        raise ConfigError(f"max length must be an integer >= 2, got {max_length!r}")
    if max_length > context:
        raise ConfigError(f"max length {max_length} exceeds the model's context of {context} tokens")
    return max_length


def entropies(response: TokenLogprobs) -> list[float]:
    """Per scored position, the Shannon entropy (nats) of the next-token distribution:
    H = -sum p log p = -E_p[log p] = -mu, so it comes from the same streaming pass as mu
    (no tokens x vocabulary tensor). Needs a response with stats."""
    if response.mu is None:
        raise ValueError("entropy needs distribution statistics (a request with stats=True)")
    return [-m for m in response.mu]


@dataclass(frozen=True)
class GenerateRequest(Request):
    """Generate a continuation of ``prompt`` (plain text) or of chat ``messages``.

    ``temperature`` 0 means greedy. Sampled generations are cached only when a ``seed``
    is given, so that a cached answer is one the model would give again. ``top_k`` > 0
    samples from the k likeliest tokens only (applied before ``top_p``, as transformers
    does); 0 means no limit. ``top_logprobs`` > 0 also asks for the log-probs of the
    ``top_logprobs`` likeliest tokens at each generated position (capability
    ``top_logprobs``), keyed by each token's text as it reads in the output: a leading
    space is a space, not a tokenizer marker such as "Ġ" or "▁".
    """

    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # ((role, content), ...)
    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    repetition_penalty: float = 1.0
    top_logprobs: int = 0
    model: str | None = None

    kind: ClassVar[str] = "generate"
    capability: ClassVar[str] = GENERATE

    def cacheable(self) -> bool:
        return self.temperature == 0 or self.seed is not None

    def capabilities(self) -> set[str]:
        return {GENERATE, TOP_LOGPROBS} if self.top_logprobs > 0 else {GENERATE}

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        data["stop"] = list(self.stop)
        data["messages"] = [list(m) for m in self.messages] if self.messages is not None else None
        if not self.top_k:  # requests without a top-k keep their old cache keys
            del data["top_k"]
        return data


@dataclass(frozen=True)
class Generation(Response):
    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # per generated token: {token: logprob} of the top alternatives, when asked and available
    top_logprobs: list[dict[str, float]] | None = None


@dataclass(frozen=True)
class ChoiceLogprobsRequest(Request):
    """Log-probabilities of each of ``choices`` as the next token(s) after ``prompt``
    (e.g. the letters A-D of a multiple-choice question)."""

    prompt: str = ""
    choices: tuple[str, ...] = ()
    messages: tuple[tuple[str, str], ...] | None = None
    model: str | None = None

    kind: ClassVar[str] = "choice_logprobs"
    capability: ClassVar[str] = CHOICE_LOGPROBS

    def payload(self) -> dict[str, Any]:
        data = super().payload()
        data["choices"] = list(self.choices)
        data["messages"] = [list(m) for m in self.messages] if self.messages is not None else None
        return data


@dataclass(frozen=True)
class ChoiceLogprobs(Response):
    logprobs: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GradNormRequest(Request):
    """Gradient of the mean token loss of ``text`` (scored as in TokenLogprobsRequest,
    first ``max_length`` tokens) with respect to every trainable weight of the model."""

    text: str
    model: str | None = None

    kind: ClassVar[str] = "grad_norm"
    capability: ClassVar[str] = GRAD_NORM


@dataclass(frozen=True)
class GradNorm(Response):
    """``global_norm``: L2 norm of all gradients together; ``mean_tensor_norm``: mean over
    weight tensors of each tensor's gradient L2 norm (MIMIR's statistic); ``loss``: the
    mean token loss whose gradient was taken."""

    global_norm: float
    mean_tensor_norm: float
    loss: float


@dataclass(frozen=True)
class RequestFailed:
    """Returned in place of a response when a request failed for good (after retries).

    The runner fails only the rows that needed it, records the reason, and never caches
    it, so the next run asks again.
    """

    reason: str


RESPONSE_TYPES: dict[str, type] = {
    TokenLogprobsRequest.kind: TokenLogprobs,
    GenerateRequest.kind: Generation,
    ChoiceLogprobsRequest.kind: ChoiceLogprobs,
    GradNormRequest.kind: GradNorm,
}


class Backend:
    """A model that answers requests. Subclasses set ``capabilities`` and implement
    the ``_answer_<kind>`` methods they support.

    ``fingerprint`` identifies the exact weights and settings that determine answers
    (not the batch size), so cache entries are shared only between identical models.
    """

    spec: str = ""
    capabilities: frozenset[str] = frozenset()
    # requests answered together per model call; the cache hands a non-streaming backend
    # a few dozen batches at a time so the backend can share work across them
    batch_size: int = 1
    # True when the _answer_<kind> handlers take an ``on_result(index, response)`` callback
    # and call it as each request finishes, so the cache can keep every finished answer
    # even if the process dies before the whole list is done.
    streams_results: bool = False

    @property
    def fingerprint(self) -> str:
        raise NotImplementedError

    def check(self, requests: Sequence[Request]) -> None:
        """Fail before any work if a request needs something this backend lacks."""
        needed: set[str] = set()
        for request in requests:
            needed |= request.capabilities()
        missing = sorted(needed - set(self.capabilities))
        if missing:
            raise CapabilityError(
                f"model {self.spec!r} cannot answer {', '.join(missing)} requests "
                f"(it supports: {', '.join(sorted(self.capabilities)) or 'nothing'})"
            )

    def check_to_answer(self, requests: Sequence[Request]) -> None:
        """The check ``answer`` makes before its work: ``check``, less what the work itself
        finds out as soon (an API model's look for a server before its first request)."""
        self.check(requests)

    def probe_capabilities(self, wanted: Iterable[str] = ()) -> frozenset[str]:
        """The capabilities, with those of ``wanted`` that this backend can only tell by
        asking its server (an OpenAI-compatible server's prompt log-probs) settled first:
        read this, not ``capabilities``, before choosing a method by what the model can do."""
        return frozenset(self.capabilities)

    def canonical(self, request: Request) -> Request:
        """The request this backend will actually answer for ``request``.

        Distribution statistics cost almost nothing once the logits exist, so a backend
        that can give them answers every token-logprob request with them: methods that
        need mu/sigma and methods that do not then share one forward pass and one cache
        entry per text.
        """
        if (
            isinstance(request, TokenLogprobsRequest)
            and not request.stats
            and DISTRIBUTION_STATS in self.capabilities
        ):
            return with_fields(request, stats=True)
        return request

    def answer(self, requests: Sequence[Request], progress=None, on_result=None) -> list[Any]:
        """Answer requests of one kind, in order. ``progress(n)`` is called as n more are
        done; ``on_result(i, response)`` as request i finishes (at the end for backends
        that do not stream results)."""
        if not requests:
            return []
        kinds = {r.kind for r in requests}
        if len(kinds) != 1:
            raise ValueError("answer() takes requests of one kind at a time")
        requests = [self.canonical(r) for r in requests]
        self.check_to_answer(requests)
        handler = getattr(self, f"_answer_{requests[0].kind}")
        if on_result is not None and "on_result" in inspect.signature(handler).parameters:
            return handler(list(requests), progress, on_result)
        results = handler(list(requests), progress)
        if on_result is not None:
            for index, response in enumerate(results):
                on_result(index, response)
        return results

    def completed(self, response: Any) -> Any:
        """An answer read back from the response cache, with what this backend leaves out
        of stored entries put back (the HF backend's token strings); the rest as it is."""
        return response

    def info(self) -> dict[str, Any]:
        """Facts about the model for the run record (no secrets)."""
        return {"spec": self.spec, "fingerprint": self.fingerprint}

    def close(self) -> None:
        pass
