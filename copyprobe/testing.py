"""Checks for method authors: does a method keep copyprobe's contract?

    from copyprobe.testing import check_method

    def test_my_method():
        check_method(MyMethod)                    # the in-process fake model: no download, seconds
        check_method(MyMethod, model="smollm2-135m-instruct")   # a real (bundled) model

:func:`check_method` runs the method through :func:`copyprobe.detect` on a small
labelled corpus and checks what the runner, the record and ``copyprobe methods`` rely on:

* it describes itself: a ``name``, a one-line ``summary``, a known ``access`` level;
* its settings are declared: each parameter has a default that passes its own
  constraint and a line of help, and the constructor stores the parameters and nothing
  else (so ``clone`` and the run record see them all);
* one score per passage: a finite number, or null with the reason in the row's
  ``errors`` (a passage it cannot score is a row failure, never a crash or a silent
  null): the corpus includes a one-word passage to see it;
* on the fake model it asks the target only for what its ``access`` allows, and two
  runs give the same scores;
* direction: higher means member. On the fake model, whose members' tokens are made
  likelier, a method that reads token log-probs must rank members above non-members
  (AUC above 0.5); for other methods and real models the AUC is reported, not enforced.

Every problem found is listed in one AssertionError; on success the :class:`MethodCheck`
is returned (the scores and the AUC, to look at).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any

from copyprobe.backends.base import TOKEN_LOGPROBS
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import CopyprobeError
from copyprobe.methods.base import ACCESS_CAPABILITIES, GREY_BOX, GREY_BOX_FULL, WHITE_BOX, Method

# where the fake model's signal is in the token log-probs, a method reading them must find it
_SIGNAL_ACCESS = (GREY_BOX, GREY_BOX_FULL, WHITE_BOX)

# famous texts a pretrained model has seen many times, and sentences it cannot have seen
_FAMOUS = [
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse.",
    "In the beginning God created the heaven and the earth. And the earth was without form, and void.",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
]
_NONSENSE = [
    "The purple umbrella negotiated quietly with seven reluctant spreadsheets about the price of thunder.",
    "Our quarterly widget audit found fourteen mislabeled crates of velvet gravel in bay nine last Tuesday.",
    "Marigold tax forms swam beneath the humming archive of forgotten lunches while the kettle argued.",
    "A copper falcon rented the lighthouse for a week of silent arithmetic and two borrowed accordions.",
]


@dataclass
class MethodCheck:
    """What :func:`check_method` saw."""

    name: str
    model: str
    n_passages: int
    n_scored: int
    scores: dict[str, float | None]  # passage id -> score
    errors: dict[str, str]  # passage id -> why it has no score
    auc: float | None  # members vs non-members (higher score = member)
    problems: list[str] = field(default_factory=list)


def fake_corpus(one_word: bool = True) -> list[Example]:
    """24 labelled passages for the fake model (odd ids are members) and, with
    ``one_word``, a passage of a single word, which many methods cannot score."""
    words = "it was the best of times it was the worst of times it was the age of wisdom and folly".split()
    rows = []
    for i in range(24):
        rotated = words[i % 7:] + words[: i % 7] + [f"w{i}", f"x{i}"]
        text = " ".join(rotated * 3)
        # DE-COP-style options, as BookTection rows carry them (the fake cannot paraphrase)
        options = {f"Example_{letter}": " ".join(reversed(text.split()[k:] + text.split()[:k]))
                   for k, letter in enumerate("BCD", start=1)}
        rows.append(Example(id=f"p{i}", text=text, label=i % 2, doc_id=f"d{i % 6}",
                            meta={"Example_A": text, **options, "Answer": "A"}))
    if one_word:
        rows.append(Example(id="one-word", text="alone", label=0, doc_id="d-alone"))
    return rows


def model_corpus() -> list[Example]:
    """Famous texts (members) and nonsense (non-members) for a real model, twice each in
    other documents, and a single word."""
    rows = [Example(id=f"{copy}{k}{i}", text=text, label=int(k == "m"), doc_id=f"{copy}{k}{i}")
            for copy in "ab" for k, texts in (("m", _FAMOUS), ("n", _NONSENSE)) for i, text in enumerate(texts)]
    rows.append(Example(id="one-word", text="alone", label=0, doc_id="d-alone"))
    return rows


def answer_letter_then_echo(request) -> str:
    # a letter first, so multiple-choice probes parse an answer; then the prompt's end
    source = request.prompt or (request.messages[-1][1] if request.messages else "")
    return "A " + " ".join(source.split()[-request.max_tokens:])


class RecordingBackend(FakeBackend):
    """The fake target, remembering the capabilities of every request a method sends
    (as the method made it, before the backend upgrades it)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.asked: set[str] = set()
        self._answering = False

    def canonical(self, request):
        if not self._answering:
            self.asked |= request.capabilities()
        return super().canonical(request)

    def answer(self, requests, progress=None, on_result=None):
        self._answering = True
        try:
            return super().answer(requests, progress=progress, on_result=on_result)
        finally:
            self._answering = False


def _check_declaration(cls: type, problems: list[str]) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        problems.append(f"{cls!r} is not a subclass of copyprobe.Method")
        return
    if not isinstance(cls.name, str) or not cls.name.strip():
        problems.append("the class sets no `name`")
    if not isinstance(cls.summary, str) or not cls.summary.strip():
        problems.append("the class sets no one-line `summary` (shown by `copyprobe methods`)")
    if cls.access not in ACCESS_CAPABILITIES:
        problems.append(f"`access` {cls.access!r} is none of copyprobe.methods.base's levels")
    try:
        defaults, constraints, helps = cls.param_defaults(), cls.param_constraints(), cls.param_help()
    except Exception as exc:  # a plugin's broken declaration is a finding, not a crash of the check
        problems.append(f"its parameters cannot be read: {type(exc).__name__}: {exc}")
        return
    for key, default in defaults.items():
        if default is inspect.Parameter.empty:
            problems.append(f"parameter {key!r} has no default")
            continue
        constraint = constraints.get(key)
        if constraint is not None and not constraint.check(default):
            problems.append(f"parameter {key!r}: the default {default!r} breaks its own constraint "
                            f"({constraint.describe()})")
        if not cls._signature_params and not (helps.get(key) or "").strip():
            problems.append(f"parameter {key!r} has no help line (param(default, constraint, help))")
    try:
        method = cls()
    except Exception as exc:
        problems.append(f"{cls.__name__}() with the defaults fails: {type(exc).__name__}: {exc}")
        return
    extra = set(vars(method)) - set(cls.param_names())
    if extra:
        problems.append(f"the constructor stores more than the parameters: {sorted(extra)} "
                        "(compute such things in `run`/`score`, or declare them as parameters)")
    if method.clone().get_params() != method.get_params():
        problems.append("clone() does not reproduce the parameters")


def _auc(scores: dict[str, float | None], labels: dict[str, int | None]) -> float | None:
    pairs = [(scores[i], labels[i]) for i in scores if scores[i] is not None and labels.get(i) is not None]
    if len({label for _, label in pairs}) < 2:
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([label for _, label in pairs], [value for value, _ in pairs]))


def check_method(method: type | Method, *, model: Any = "fake", params: dict[str, Any] | None = None,
                 examples: list[Example] | None = None, raise_on_problems: bool = True) -> MethodCheck:
    """Run ``method`` (a Method subclass, or an instance whose parameters are used) and
    check the contract above. ``model``: "fake" (the in-process fake model), a model
    spec such as "smollm2-135m-instruct", or a Backend. ``params``: settings it needs to
    run (e.g. a frequency table). ``examples`` replace the built-in corpus."""
    cls = method if isinstance(method, type) else type(method)
    problems: list[str] = []
    _check_declaration(cls, problems)
    if problems and not (isinstance(cls, type) and issubclass(cls, Method)):
        raise AssertionError(f"check_method: {problems[0]}")
    params = {**(method.get_params() if isinstance(method, Method) else {}), **(params or {})}
    name = cls.name
    _register_if_new(cls, problems)
    fake = isinstance(model, str) and model == "fake"
    corpus = examples or (fake_corpus() if fake else model_corpus())

    def stop(why: str) -> AssertionError:
        listed = [*problems, why]
        return AssertionError(f"check_method({name}) found {len(listed)} problem(s):\n- " + "\n- ".join(listed))

    try:
        result, target = _run_once(name, params, corpus, model, fake)
    except CopyprobeError as exc:
        raise stop(f"the run stopped: {exc}") from None
    except Exception as exc:  # a bug in the method, reaching the user as a traceback
        raise stop(f"the run crashed: {type(exc).__name__}: {exc} (raise copyprobe.errors.RowError for a "
                   "passage the method cannot score)") from exc
    scores, errors = _check_rows(result.rows, name, len(corpus), problems)
    n_scored = sum(v is not None for v in scores.values())
    if n_scored == 0:
        problems.append(f"no passage was scored; first reasons: {list(errors.values())[:2]}")
    auc = _auc(scores, {e.id: e.label for e in corpus})
    if fake and target is not None:
        _check_access(cls, target, problems)
        again, _ = _run_once(name, params, corpus, model, fake)
        if again.rows != result.rows:
            problems.append("two runs on the same inputs gave different scores (seed what is random)")
        _check_direction(cls, target, auc, problems)
    check = MethodCheck(name=name, model=model if isinstance(model, str) else getattr(model, "spec", repr(model)),
                        n_passages=len(corpus), n_scored=n_scored, scores=scores, errors=errors, auc=auc,
                        problems=problems)
    if problems and raise_on_problems:
        raise AssertionError(f"check_method({name}) found {len(problems)} problem(s):\n- " + "\n- ".join(problems))
    return check


def _register_if_new(cls: type, problems: list[str]) -> None:
    """detect finds methods by name: an unregistered plugin class is registered here; a name
    taken by another class is a problem."""
    from copyprobe.registry import method_class, register

    try:
        if method_class(cls.name) is not cls:
            problems.append(f"the name {cls.name!r} is registered to another class")
    except CopyprobeError:
        register(cls)


def _run_once(name: str, params: dict[str, Any], corpus: list[Example], model: Any, fake: bool):
    """(detect's result, the recording fake target or None) of one run of the method."""
    import copyprobe
    from copyprobe.session import Session

    if fake:
        target = RecordingBackend(spec="fake-target", member_texts=[e.text for e in corpus if e.label == 1],
                                  generate_fn=answer_letter_then_echo)
        session = Session(target, cache=False, loader=lambda spec: FakeBackend(spec=spec))
    else:
        target = None
        session = model if isinstance(model, Session) else Session(model, cache=False)
    result = copyprobe.detect(session, corpus, [name], params={name: params} if params else None,
                              n_bootstrap=0, blind_baseline=False)
    return result, target


def _check_rows(rows: list[dict], name: str, n_passages: int,
                problems: list[str]) -> tuple[dict[str, float | None], dict[str, str]]:
    """(passage id -> score or None, passage id -> reason of a null): one row per passage,
    each a finite number or null with a reason."""
    scores: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    if len(rows) != n_passages:
        problems.append(f"{len(rows)} score rows for {n_passages} passages (one per passage expected)")
    for row in rows:
        value = row.get(name, "missing")
        reason = (row.get("errors") or {}).get(name)
        if value is None:
            if not (isinstance(reason, str) and reason.strip()):
                problems.append(f"passage {row['id']}: a null score without a reason")
            errors[str(row["id"])] = reason or ""
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"passage {row['id']}: score {value!r} is not a finite number")
        else:
            scores[str(row["id"])] = float(value)
            continue
        scores[str(row["id"])] = None
    return scores, errors


def _check_access(cls: type, target: RecordingBackend, problems: list[str]) -> None:
    """On the fake target: it asked the model something, and only what its access allows."""
    allowed = ACCESS_CAPABILITIES.get(cls.access, frozenset())
    if not target.asked:
        problems.append("it asked the model nothing")
    elif not target.asked <= allowed:
        problems.append(f"access is {cls.access!r} but it asked the target for "
                        f"{sorted(target.asked - allowed)}")


def _check_direction(cls: type, target: RecordingBackend, auc: float | None, problems: list[str]) -> None:
    """On the fake target, whose members are known: a method that read token log-probs
    scores members higher."""
    if cls.access in _SIGNAL_ACCESS and TOKEN_LOGPROBS in target.asked and auc is not None and auc <= 0.5:
        problems.append(f"members score lower than non-members (AUC {auc:.3f}) on a model whose members are "
                        "known: higher must mean member (negate the score?)")


__all__ = ["MethodCheck", "RecordingBackend", "answer_letter_then_echo", "check_method", "fake_corpus", "model_corpus"]
