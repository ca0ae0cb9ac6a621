"""Properties every registered method must have (scikit-learn's test_common idea):
it describes itself, its constructor only stores parameters, its constraints are the ones
validation and ``--param`` use, it runs end to end on the fake backend, asks the target
only for what its declared access allows, is deterministic, and ``fit`` leaves its
parameters as they were."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest

import copyprobe
from copyprobe.backends.base import Request, TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.freq import FrequencyTable
from copyprobe.methods.base import ACCESS_CAPABILITIES, Method
from copyprobe.params import Boolean, Integer, ModelSpec, OneOf, Optional, Real
from copyprobe.registry import convert_param, make_method, method_class, method_names
from copyprobe.session import Session
from copyprobe.testing import RecordingBackend, answer_letter_then_echo, fake_corpus

NAMES = method_names()


@pytest.fixture(scope="module")
def freq_table(tmp_path_factory):
    # FakeBackend's token ids are word hashes below 50,000; no token strings to compare
    path = tmp_path_factory.mktemp("freq") / "fake.npz"
    # a prefix file beside it for the methods that read one (recall, con_recall)
    (path.parent / "prefix.txt").write_text("the worst of folly and wisdom\n", encoding="utf-8")
    return str(FrequencyTable(counts=np.ones(50_000, dtype=np.int64), name="fake", vocab_hash="h").save(path))


def runnable_params(name: str, freq_table: str) -> dict:
    """The few parameters a method cannot run without, or that keep it small on 24 texts."""
    prefix = str(Path(freq_table).parent / "prefix.txt")
    return {
        "recall": {"prefix": prefix},
        "con_recall": {"prefix": prefix, "member_prefix": prefix},
        "dc_pdd": {"freq": freq_table},
        "tag_tab": {"freq": freq_table},
        "surp": {"max_entropy": 5.0},  # the fake's entropies (-mu) lie in [3, 4]
        "feature_agg": {"n_train": 8},
        "veilprobe": {"n_train": 8, "n_samples": 1, "suffix_tokens": 4, "attribution_tokens": 2,
                      "map_epochs": 1, "proto_steps": 5, "map_dim": 8, "map_layers": 1, "bottleneck": 4},
        "neighborhood": {"n_neighbours": 2, "proposals": "sample"},  # the fake gives no top log-probs
        # fake log-probs lie in [-9, -1], and every word of corpus() repeats
        "info_probe": {"logprob_threshold": -5.0, "skip_repeated": False},
    }.get(name, {})


def corpus() -> list[Example]:
    return fake_corpus(one_word=False)


def run_end_to_end(name: str, params: dict, member_texts=()):
    target = RecordingBackend(spec="fake-target", member_texts=member_texts, generate_fn=answer_letter_then_echo)
    others = {}

    def loader(spec):
        return others.setdefault(spec, FakeBackend(spec=spec))

    session = Session(target, cache=False, loader=loader)
    result = copyprobe.detect(session, corpus(), [name], params={name: params} if params else None,
                              n_bootstrap=0, blind_baseline=False)
    return result, target


def test_core_methods_are_registered():
    assert {"loss", "zlib", "lowercase", "min_k", "min_k_pp", "slope", "reference"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_describes_itself(name):
    cls = method_class(name)
    assert issubclass(cls, Method) and cls.name == name
    assert cls.summary.strip(), "shown by `copyprobe methods`"
    assert cls.access in ACCESS_CAPABILITIES
    helps, constraints = cls.param_help(), cls.param_constraints()
    assert set(helps) == set(cls.param_names()), "every parameter has one line of help"
    assert all(text.strip() for text in helps.values())
    assert set(constraints) == set(cls.param_names())
    for key, default in cls.param_defaults().items():
        assert constraints[key].check(default), f"{name}.{key}: the default breaks its own constraint"


@pytest.mark.parametrize("name", NAMES)
def test_constructor_only_stores_parameters(name):
    cls = method_class(name)
    signature = inspect.signature(cls.__init__)
    for param in signature.parameters.values():
        if param.name == "self":
            continue
        assert param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD), "no **kwargs: parameters are explicit"
        assert param.default is not param.empty, f"{name}.{param.name} needs a default"
    method = cls()
    assert method.get_params() == cls.param_defaults()
    assert set(vars(method)) == set(cls.param_names()), "the constructor stores its parameters and nothing else"
    clone = method.clone()
    assert clone is not method and clone.get_params() == method.get_params()


@pytest.mark.parametrize("name", NAMES)
def test_set_params_rejects_unknown_names(name):
    with pytest.raises(ConfigError, match="no parameter"):
        method_class(name)().set_params(surely_not_a_parameter=1)


def _bad_value(constraint):
    """A value the constraint refuses, or None when it accepts everything."""
    if isinstance(constraint, Optional):
        constraint = constraint.inner
    if isinstance(constraint, Boolean):
        return "yes please"
    if isinstance(constraint, OneOf):
        return "surely-not-a-choice"
    if isinstance(constraint, Integer):
        return (constraint.low - 1) if constraint.low is not None else 1.5
    if isinstance(constraint, Real):
        return (constraint.low - 1) if constraint.low is not None else float("nan")
    return None


@pytest.mark.parametrize("name", NAMES)
def test_constraints_drive_validation_and_param_parsing(name):
    cls = method_class(name)
    for key, constraint in cls.param_constraints().items():
        default = cls.param_defaults()[key]
        if isinstance(default, (bool, int, float, str)) and not (isinstance(default, str) and "," in default):
            # the command line reads back what `copyprobe methods` shows
            assert convert_param(cls, key, str(default).lower() if isinstance(default, bool) else str(default)) == default
        bad = _bad_value(constraint)
        if bad is None:
            continue
        with pytest.raises(ConfigError, match=f"{name}.{key}"):
            make_method(name, **{key: bad})
        # the command line only reads the string; making the method refuses it, naming the parameter
        with pytest.raises(ConfigError, match=f"{name}.{key}"):
            raw = "surely-not-a-choice" if isinstance(bad, str) else str(bad)
            make_method(name, **{key: convert_param(cls, key, raw)})


@pytest.mark.parametrize("name", NAMES)
def test_resolve_settles_auto_model_parameters(name):
    method = method_class(name)()
    resolved = method.resolve("smollm2-135m-instruct")
    assert resolved is not method and method.get_params() == method_class(name).param_defaults()
    for key, constraint in method_class(name).param_constraints().items():
        inner = constraint.inner if isinstance(constraint, Optional) else constraint
        if isinstance(inner, ModelSpec):
            assert getattr(resolved, key) != "auto", f"{name}.{key} left at auto"


@pytest.mark.parametrize("name", NAMES)
def test_runs_end_to_end_within_its_declared_access_and_deterministically(name, freq_table):
    params = runnable_params(name, freq_table)
    members = [e.text for e in corpus() if e.label == 1]
    first, target = run_end_to_end(name, params, members)
    access = method_class(name).access
    assert target.asked, f"{name} asked the target nothing"
    assert target.asked <= ACCESS_CAPABILITIES[access], (
        f"{name} declares {access!r} but asked the target for {sorted(target.asked - ACCESS_CAPABILITIES[access])}")
    scored = first.scores[name].notna().sum()
    assert scored > 0, f"{name} scored no passage: {first.run['failures'][:2]}"
    second, _ = run_end_to_end(name, params, members)
    assert first.rows == second.rows, "same inputs, same scores"


@pytest.mark.parametrize("name", [n for n in NAMES if method_class(n).trains])
def test_fit_leaves_parameters_unchanged(name, freq_table):
    method = make_method(name, **runnable_params(name, freq_table)).resolve("fake-target")
    before = copy.deepcopy(method.get_params())
    session = Session(FakeBackend(spec="fake-target"), cache=False, loader=lambda spec: FakeBackend(spec=spec))
    from copyprobe.drive import drive

    examples = corpus()
    features = drive({i: method.run(e) for i, e in enumerate(examples)}, session.backend_for)
    method.fit([features[i] for i in range(len(examples))], [e.label for e in examples])
    assert method.get_params() == before


@pytest.mark.parametrize("name", NAMES)
def test_first_round_is_a_list_of_frozen_requests(name, freq_table):
    method = make_method(name, **runnable_params(name, freq_table)).resolve("fake-target")
    example = corpus()[0]
    first = next(method.run(example))
    assert isinstance(first, list) and first, "a method asks for at least one response"
    assert all(isinstance(r, Request) for r in first)
    for request in first:
        hash(request)  # requests are frozen, so the runner can de-duplicate them
        assert request.key() == type(request)(**{f.name: getattr(request, f.name) for f in dataclasses.fields(request)}).key()


def test_token_logprob_requests_ask_for_no_statistics_by_default():
    # a method written the obvious way must work on a backend without distribution stats
    assert TokenLogprobsRequest("some text").capabilities() == {"token_logprobs"}
