"""The in-process fake backend the tests use answers each request kind it declares,
deterministically."""

from __future__ import annotations

from copyprobe.backends.base import GenerateRequest, Generation, GradNormRequest
from copyprobe.backends.fake import FakeBackend


def test_fake_backend_answers_each_kind_it_declares():
    fake = FakeBackend(generate_fn=lambda r: "ok")
    assert fake.answer([GenerateRequest(prompt="hi")])[0] == Generation(
        text="ok", finish_reason="stop", prompt_tokens=1, completion_tokens=1)
    answer = fake.answer([GradNormRequest("a b c")])[0]
    assert answer.mean_tensor_norm > 0 and answer == fake.answer([GradNormRequest("a b c")])[0]
