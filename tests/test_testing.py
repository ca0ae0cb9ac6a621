"""copyprobe.testing.check_method: built-in methods pass it; methods that break the
contract in one way each are caught, with the problem named."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Sequence

import pytest

from copyprobe import Method, TokenLogprobs, TokenLogprobsRequest, param
from copyprobe.backends.base import GenerateRequest
from copyprobe.errors import RowError
from copyprobe.methods.base import BLACK_BOX
from copyprobe.params import Real
from copyprobe.registry import method_class
from copyprobe.testing import check_method, fake_corpus

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


class _Base(Method):
    access = "grey-box (token log-probs)"
    summary = "a test method"

    def requests(self, example):
        return [TokenLogprobsRequest(example.text)]

    def score(self, example, responses: Sequence[TokenLogprobs]) -> float:
        values = responses[0].logprobs
        if len(values) < 2:
            raise RowError("fewer than two tokens")
        return sum(values) / len(values)


class MeanLoglik(_Base):
    name = "test_mean_loglik"
    trim: float = param(0.0, Real(0, 1, high_open=True), "unused share")


class Negated(_Base):
    name = "test_negated"

    def score(self, example, responses):
        return -super().score(example, responses)


class Restless(_Base):
    name = "test_restless"

    def score(self, example, responses):
        return super().score(example, responses) + random.random()  # unseeded


class Stateful(_Base):
    name = "test_stateful"

    def __init__(self, k: int = 3):
        self.k = k
        self.seen = []  # state beyond the parameters


class Undocumented(_Base):
    name = "test_undocumented"
    k: float = param(2.0, Real(0, 1), "")  # no help, and a default outside its range


class Overreaching(_Base):
    name = "test_overreaching"
    access = BLACK_BOX  # says black-box, asks for log-probs


class Crashing(_Base):
    name = "test_crashing"

    def score(self, example, responses):
        return None.value  # a bug: AttributeError


class Generating(Method):
    name = "test_generating"
    access = BLACK_BOX
    summary = "length of the model's continuation of the first half (no signal on the fake)"

    def requests(self, example):
        words = example.text.split()
        if len(words) < 2:
            raise RowError("one word: no half to continue")
        return [GenerateRequest(prompt=" ".join(words[: len(words) // 2]), max_tokens=8, temperature=0.0)]

    def score(self, example, responses):
        return float(len(responses[0].text))


def test_a_correct_method_passes_and_its_scores_are_checkable():
    check = check_method(MeanLoglik)
    corpus = fake_corpus()
    assert check.n_passages == len(corpus) == 25 and check.n_scored == 24
    assert check.scores["one-word"] is None and check.errors["one-word"] == "fewer than two tokens"
    assert check.auc is not None and check.auc > 0.5 and check.problems == []


def test_a_black_box_method_without_signal_on_the_fake_passes():
    check = check_method(Generating)
    assert check.problems == [] and check.errors["one-word"] == "one word: no half to continue"


@pytest.mark.parametrize("name,params", [("loss", {}), ("min_k", {}), ("zlib", {}), ("samia", {"n_samples": 2}),
                                         ("feature_agg", {"n_train": 8})])
def test_built_in_methods_pass(name, params):
    assert check_method(method_class(name), params=params).problems == []


def test_the_documented_example_passes():
    spec = importlib.util.spec_from_file_location("trimmed_loglik", EXAMPLES / "trimmed_loglik.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert check_method(module.TrimmedLoglik).problems == []


@pytest.mark.parametrize("cls,needle", [
    (Negated, "members score lower than non-members"),
    (Restless, "two runs on the same inputs gave different scores"),
    (Stateful, "the constructor stores more than the parameters: ['seen']"),
    (Undocumented, "parameter 'k': the default 2.0 breaks its own constraint"),
    (Undocumented, "parameter 'k' has no help line"),
    (Overreaching, "but it asked the target for ['token_logprobs']"),
    (Crashing, "AttributeError"),
])
def test_each_broken_contract_is_named(cls, needle):
    with pytest.raises(AssertionError) as info:
        check_method(cls)
    assert needle in str(info.value)
    assert cls.name in str(info.value)


def test_problems_can_be_returned_instead_of_raised():
    check = check_method(Negated, raise_on_problems=False)
    assert len(check.problems) == 1 and check.auc < 0.5


def test_not_a_method_is_refused():
    with pytest.raises(AssertionError, match="not a subclass of copyprobe.Method"):
        check_method(dict)


@pytest.mark.model
def test_on_smollm2_famous_texts_score_above_nonsense(smollm2):
    check = check_method(method_class("loss"), model=smollm2)
    assert check.problems == [] and check.n_scored == 16
    assert check.auc > 0.5  # reported on a real model (enforced only on the fake)
