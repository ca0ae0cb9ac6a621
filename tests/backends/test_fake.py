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


def test_fake_top_logprobs_are_next_words_with_their_token_log_probs():
    from copyprobe.backends.base import TokenLogprobsRequest

    fake = FakeBackend(member_texts=["red fox runs"])
    request = GenerateRequest(prompt="the red", max_tokens=1, top_logprobs=3)
    answer = fake.answer([request])[0]
    assert answer.completion_tokens == 1 and len(answer.top_logprobs) == 1
    (candidates,) = answer.top_logprobs
    # the 3 likeliest of the prompt's words, the members' and the common words, " word" as text
    vocabulary = {"the", "red", "fox", "runs", "of", "and", "a", "to", "in", "was", "it", "is", "that"}
    value = {w: fake.answer([TokenLogprobsRequest(f"red {w}")])[0].logprobs[0] for w in vocabulary}
    assert candidates == {" " + w: value[w] for w in sorted(vocabulary, key=lambda w: (-value[w], w))[:3]}
    assert " fox" in candidates  # a member word, boosted
    assert fake.answer([request])[0] == answer
    assert fake.answer([GenerateRequest(prompt="the red")])[0].top_logprobs is None
