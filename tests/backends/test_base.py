"""Request helpers of copyprobe.backends.base."""

import dataclasses

import pytest

from copyprobe.backends.base import GenerateRequest, TokenLogprobsRequest, with_fields


def test_with_fields_is_dataclasses_replace():
    request = TokenLogprobsRequest("a text", ngram=2, model="ref", context="before")
    copy = with_fields(request, stats=True)
    assert copy == dataclasses.replace(request, stats=True) and copy is not request
    assert copy.key() == dataclasses.replace(request, stats=True).key()
    assert request.stats is False  # the original is left as it was
    generate = GenerateRequest(prompt="p", stop=("\n",))
    assert with_fields(generate, max_tokens=3, seed=1) == dataclasses.replace(generate, max_tokens=3, seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.stats = False


def test_with_fields_refuses_a_field_the_request_lacks():
    with pytest.raises(TypeError, match="no field 'temperature'"):
        with_fields(TokenLogprobsRequest("x"), temperature=1.0)
