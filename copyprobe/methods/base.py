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

Parameters live in the constructor only (scikit-learn convention). They are declared
once, as annotated class attributes made with :func:`copyprobe.params.param` (default,
constraint, help); every ``Method`` subclass becomes a dataclass, so its generated
``__init__`` stores each argument under its own name and does nothing else. The
constraints serve ``validate()``, ``--param`` parsing and ``copyprobe methods``.
A method from another package may instead write a plain ``__init__`` (parameters are
then read from its signature and typed after their defaults).

Model-dependent parameters (a reference model "auto") are resolved by the method
itself in ``resolve(target_spec)``; the runner names no parameter.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator, Sequence

from copyprobe.backends.base import (
    CHOICE_LOGPROBS,
    CONTEXT_LOGPROBS,
    DISTRIBUTION_STATS,
    GENERATE,
    GRAD_NORM,
    NGRAM_LOGPROBS,
    TOKEN_LOGPROBS,
    TOP_LOGPROBS,
    Request,
)
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.params import AUTO, Constraint, ModelSpec, Optional, infer

# Access levels shown by `copyprobe methods`.
GREY_BOX = "grey-box (token log-probs)"
GREY_BOX_FULL = "grey-box (full next-token distribution)"
BLACK_BOX = "black-box (generated text)"
BLACK_BOX_LOGITS = "black-box with top-k log-probs"
WHITE_BOX = "white-box (weights and gradients)"

# What each access level may ask of the *target* model (other models a method names,
# e.g. a reference model, are not the audited model and are not limited by it).
# Top-k log-probs of generated tokens come with every level that reads log-probs
# (neighbourhood's substitute proposals are grey-box and ask for them).
ACCESS_CAPABILITIES: dict[str, frozenset[str]] = {
    GREY_BOX: frozenset({TOKEN_LOGPROBS, NGRAM_LOGPROBS, CONTEXT_LOGPROBS, GENERATE, TOP_LOGPROBS}),
    GREY_BOX_FULL: frozenset({TOKEN_LOGPROBS, NGRAM_LOGPROBS, CONTEXT_LOGPROBS, DISTRIBUTION_STATS, GENERATE,
                              TOP_LOGPROBS}),
    BLACK_BOX: frozenset({GENERATE}),
    BLACK_BOX_LOGITS: frozenset({GENERATE, CHOICE_LOGPROBS, TOP_LOGPROBS}),
    WHITE_BOX: frozenset({TOKEN_LOGPROBS, NGRAM_LOGPROBS, CONTEXT_LOGPROBS, DISTRIBUTION_STATS, GENERATE,
                          TOP_LOGPROBS, GRAD_NORM}),
}


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
    trains: ClassVar[bool] = False
    # Parameters added after runs were recorded: the value that reproduces what an older
    # run.json, whose parameters lack the key, computed (see recorded_params).
    recorded_defaults: ClassVar[dict[str, Any]] = {}
    # True when a class in the hierarchy wrote its own __init__: its signature, not
    # declared fields, then defines the parameters.
    _signature_params: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls._signature_params = True
        elif not cls._signature_params:
            # declared parameters become a constructor that only stores them
            dataclass(cls, repr=False, eq=False)

    # -- parameters (scikit-learn style) -------------------------------------------
    @classmethod
    def _declared(cls) -> dict[str, dataclasses.Field]:
        if dataclasses.is_dataclass(cls) and not cls._signature_params:
            return {f.name: f for f in dataclasses.fields(cls) if f.init}
        return {}

    @classmethod
    def param_names(cls) -> list[str]:
        declared = cls._declared()
        if declared:
            return list(declared)
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        declared = cls._declared()
        if declared:
            return {name: f.default for name, f in declared.items()}
        sig = inspect.signature(cls.__init__)
        return {n: sig.parameters[n].default for n in cls.param_names()}

    @classmethod
    def param_constraints(cls) -> dict[str, Constraint]:
        """Parameter -> constraint (declared, or inferred from the default)."""
        declared = cls._declared()
        return {
            name: declared[name].metadata.get("constraint") if name in declared else infer(default)
            for name, default in cls.param_defaults().items()
        }

    @classmethod
    def param_help(cls) -> dict[str, str]:
        declared = cls._declared()
        return {name: f.metadata.get("help", "") for name, f in declared.items()}

    @classmethod
    def recorded_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters a run record holds, with every key it lacks that is in
        ``recorded_defaults`` filled with the value that reproduces the older run."""
        return {**{k: v for k, v in cls.recorded_defaults.items() if k not in params}, **params}

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
        """Raise ConfigError for parameter values that make no sense. Every declared
        constraint is checked here; override to add rules between parameters (and
        call ``super().validate()`` first)."""
        for name, constraint in self.param_constraints().items():
            constraint.validate(getattr(self, name), f"{self.name}.{name}")

    # model-spec parameters the target's score is calibrated against (a difference of the
    # two): naming the target itself there is refused by :meth:`resolve`
    calibration_models: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def auto_model_params(cls) -> list[str]:
        """The model-spec parameters that accept ``auto`` (resolved against the target by
        :meth:`resolve`)."""
        names = []
        for name, constraint in cls.param_constraints().items():
            if isinstance(constraint, Optional):
                constraint = constraint.inner
            if isinstance(constraint, ModelSpec) and constraint.auto:
                names.append(name)
        return names

    def resolve(self, target_spec: str) -> "Method":
        """A copy whose model-dependent parameters are settled for this target model:
        every model-spec parameter left at ``auto`` becomes the default reference model
        for ``target_spec``."""
        from copyprobe.backends.specs import default_reference

        resolved = self.clone()
        for name in self.auto_model_params():
            if getattr(resolved, name) == AUTO:
                setattr(resolved, name, default_reference(target_spec))
        for name in self.calibration_models:
            if _same_model(str(getattr(resolved, name)), target_spec):
                raise ConfigError(f"{self.name}.{name} is the target model itself ({target_spec}): a score calibrated "
                                  f"against the same model is 0 for every passage; name another model (or auto)")
        return resolved

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

    # -- methods that take rows from the data ----------------------------------------
    def hold_out(self, examples: Sequence[Example], seed: int) -> list[int]:
        """Indices of rows this method takes from the data before scoring (ReCaLL's
        prefix passages), seeded by the run's ``seed``. The runner calls it once before
        any request; the rows are still scored but left out of this method's metrics,
        as a learning method's training rows are. The default takes none."""
        return []

    # -- learning methods only -------------------------------------------------------
    def train_size(self) -> int:
        """How many labelled rows the runner should fit this method on (trains = True)."""
        raise NotImplementedError

    def fit(self, features: Sequence[Any], labels: Sequence[int]) -> "Method":
        raise NotImplementedError

    def predict(self, features: Sequence[Any]) -> list[float | Score]:
        raise NotImplementedError


def _same_model(spec: str, target_spec: str) -> bool:
    """Whether two model specs name one model: the same spec, or the same weights under
    two spellings (an alias and its gguf: file)."""
    from copyprobe.backends.specs import weights_identity

    if spec.strip() == target_spec.strip():
        return True
    try:
        identity = weights_identity(spec)
        return identity is not None and identity == weights_identity(target_spec)
    except Exception:  # noqa: BLE001 - a spec that does not resolve here is not the target
        return False
