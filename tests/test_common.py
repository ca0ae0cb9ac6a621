"""Properties every registered method must have (scikit-learn's test_common idea)."""

import dataclasses
import inspect

import pytest

from copyprobe.backends.base import Request
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.base import BLACK_BOX, BLACK_BOX_LOGITS, GREY_BOX, GREY_BOX_FULL, Method
from copyprobe.registry import method_class, method_names

NAMES = method_names()
ACCESS_LEVELS = {GREY_BOX, GREY_BOX_FULL, BLACK_BOX, BLACK_BOX_LOGITS}


def test_core_methods_are_registered():
    assert {"loss", "zlib", "lowercase", "min_k", "min_k_pp", "slope", "reference"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_describes_itself(name):
    cls = method_class(name)
    assert issubclass(cls, Method) and cls.name == name
    assert cls.summary.strip(), "shown by `copyprobe methods`"
    assert cls.access in ACCESS_LEVELS
    assert set(cls.param_help) <= set(cls.param_names()), "help for parameters that do not exist"


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
    clone = method.clone()
    assert clone is not method and clone.get_params() == method.get_params()


@pytest.mark.parametrize("name", NAMES)
def test_set_params_rejects_unknown_names(name):
    with pytest.raises(ConfigError, match="no parameter"):
        method_class(name)().set_params(surely_not_a_parameter=1)


@pytest.mark.parametrize("name", NAMES)
def test_first_round_is_a_list_of_requests(name):
    method = method_class(name)()
    for param in ("model", "reference", "proxies", "paraphraser", "neighbour_model"):
        if param in method.param_names() and getattr(method, param) == "auto":
            method.set_params(**{param: "some-reference-model"})
    # long enough for prefix-based methods (first 50 tokens + a continuation)
    text = " ".join(["It was the best of times, it was the worst of times, it was the age of wisdom."] * 8)
    example = Example(id="1", text=text, label=1, doc_id="d")
    run = method.run(example)
    try:
        first = next(run)
    except ConfigError:
        pytest.skip(f"{name} needs configuration before it can run (e.g. a data file)")
    assert isinstance(first, list) and first, "a method asks for at least one response"
    assert all(isinstance(r, Request) for r in first)
    for request in first:
        hash(request)  # requests are frozen, so the runner can de-duplicate them
        assert request.key() == type(request)(**{f.name: getattr(request, f.name) for f in dataclasses.fields(request)}).key()
