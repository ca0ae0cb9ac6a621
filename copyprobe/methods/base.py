"""The Method interface.

A method turns an :class:`~copyprobe.data.example.Example` into a score where **higher
means more likely a member**. It never calls a model: it yields lists of requests and
receives their responses, so the runner can gather every method's requests, remove
duplicates, batch them and answer them from the cache.

Single-stage methods implement ``requests`` and ``score``. Multi-stage methods (generate
paraphrases, then ask about them) override ``run``, a generator::

    def run(self, example):
        first = yield [GenerateRequest(...)]
        second = yield [ChoiceLogprobsRequest(...) for ...]
        return 0.75

Methods that learn from labelled data set ``trains = True``: ``run`` then returns a
feature object, the runner calls ``fit(features, labels)`` on a seeded training subset,
and ``predict(features)`` gives scores for the rest (training rows are excluded from
evaluation automatically).

Parameters live in the constructor only (scikit-learn convention): ``__init__`` stores
each argument under its own name and does nothing else; ``validate()`` checks values.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator, Sequence

from copyprobe.backends.base import Request
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError

# Access levels shown by `copyprobe methods`.
GREY_BOX = "grey-box (token log-probs)"
GREY_BOX_FULL = "grey-box (full next-token distribution)"
BLACK_BOX = "black-box (generated text)"
BLACK_BOX_LOGITS = "black-box with top-k log-probs"


@dataclass(frozen=True)
class Score:
    """A score with optional details (recorded in scores.jsonl under ``details``)."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)


MethodRun = Generator[list[Request], list[Any], Any]


class Method:
    name: ClassVar[str] = ""
    access: ClassVar[str] = GREY_BOX
    summary: ClassVar[str] = ""
    # documented meaning of each constructor parameter, for `copyprobe methods`
    param_help: ClassVar[dict[str, str]] = {}
    trains: ClassVar[bool] = False

    # -- parameters (scikit-learn style) -------------------------------------------
    @classmethod
    def param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        sig = inspect.signature(cls.__init__)
        return {n: sig.parameters[n].default for n in cls.param_names()}

    def get_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: Any) -> "Method":
        for key, value in params.items():
            if key not in self.param_names():
                raise ConfigError(f"method {self.name!r} has no parameter {key!r} "
                                  f"(it has: {', '.join(self.param_names()) or 'none'})")
            setattr(self, key, value)
        return self

    def clone(self) -> "Method":
        return type(self)(**self.get_params())

    def validate(self) -> None:
        """Raise ConfigError for parameter values that make no sense."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- scoring -------------------------------------------------------------------
    def requests(self, example: Example) -> list[Request]:
        raise NotImplementedError

    def score(self, example: Example, responses: Sequence[Any]) -> float | Score:
        raise NotImplementedError

    def run(self, example: Example) -> MethodRun:
        responses = yield self.requests(example)
        return self.score(example, responses)

    def models(self) -> set[str]:
        """Model specs other than the target that this method's requests name."""
        return set()

    # -- learning methods only -------------------------------------------------------
    def fit(self, features: Sequence[Any], labels: Sequence[int]) -> "Method":
        raise NotImplementedError

    def predict(self, features: Sequence[Any]) -> list[float | Score]:
        raise NotImplementedError


def check_fraction(method: Method, name: str, value: Any) -> None:
    """Shared check for k-like parameters that must lie in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{method.name}.{name} must be a number in (0, 1], got {value!r}")
