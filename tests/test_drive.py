"""The round-based driver: de-duplication, multi-stage methods, per-row failures."""

import pytest

from copyprobe.backends.base import GenerateRequest, RequestFailed, TokenLogprobsRequest, TOKEN_LOGPROBS
from copyprobe.backends.fake import FakeBackend
from copyprobe.errors import CapabilityError, RowError
from copyprobe.drive import DriveStats, Failure, drive


def test_identical_requests_are_answered_once():
    fake = FakeBackend()
    def one(text):
        responses = yield [TokenLogprobsRequest(text), TokenLogprobsRequest(text)]
        return len(responses)
    runs = {i: one("a b c") for i in range(5)}
    stats = DriveStats()
    results = drive(runs, lambda spec: fake, stats=stats)
    assert results == {i: 2 for i in range(5)}
    assert fake.calls["token_logprobs"] == 1
    assert stats.requests_total == 10 and stats.requests_unique == 1


def test_stats_false_requests_share_the_stats_request():
    fake = FakeBackend()
    def run(stats_flag):
        responses = yield [TokenLogprobsRequest("x y z", stats=stats_flag)]
        return responses[0].mu is not None
    results = drive({"a": run(True), "b": run(False)}, lambda spec: fake)
    assert results == {"a": True, "b": True}
    assert fake.calls["token_logprobs"] == 1


def test_multi_stage_generators_take_rounds():
    fake = FakeBackend(generate_fn=lambda r: r.prompt.upper())
    def two_stage(text):
        first = yield [GenerateRequest(prompt=text)]
        second = yield [TokenLogprobsRequest(first[0].text)]
        return second[0].tokens
    stats = DriveStats()
    results = drive({1: two_stage("a b"), 2: two_stage("c d")}, lambda spec: fake, stats=stats)
    assert results == {1: ["A", "B"], 2: ["C", "D"]}
    assert stats.rounds == 2


def test_requests_go_to_the_named_model():
    target, other = FakeBackend(spec="t"), FakeBackend(spec="o")
    def run():
        responses = yield [TokenLogprobsRequest("a b"), TokenLogprobsRequest("a b", model="o")]
        return [r.logprobs[0] for r in responses]
    results = drive({0: run()}, lambda spec: other if spec == "o" else target)
    assert target.calls["token_logprobs"] == 1 and other.calls["token_logprobs"] == 1
    assert results[0][0] != results[0][1]


def test_row_errors_fail_one_row_only():
    fake = FakeBackend()
    def bad():
        yield [TokenLogprobsRequest("a b")]
        raise RowError("no probe: nothing surprising")
    def good():
        yield [TokenLogprobsRequest("a b")]
        return 1.0
    results = drive({"bad": bad(), "good": good()}, lambda spec: fake)
    assert results["good"] == 1.0
    assert isinstance(results["bad"], Failure) and "no probe" in results["bad"].reason


def test_failed_requests_fail_their_rows_with_the_reason():
    class Flaky(FakeBackend):
        def _answer_generate(self, requests, progress=None):
            return [RequestFailed("HTTP 500 after 5 retries") if r.prompt == "x" else super(Flaky, self)._answer_generate([r])[0] for r in requests]
    flaky = Flaky()
    def run(prompt):
        responses = yield [GenerateRequest(prompt=prompt)]
        return responses[0].text
    stats = DriveStats()
    results = drive({"x": run("x"), "y": run("y")}, lambda spec: flaky, stats=stats)
    assert results["y"] == "y"
    assert isinstance(results["x"], Failure) and "HTTP 500" in results["x"].reason
    assert stats.failed_requests[0]["reason"] == "HTTP 500 after 5 retries"


def test_a_run_that_catches_a_failed_request_goes_on_and_others_fail_as_before():
    # a failed request is raised in a multi-step run as a RowError: one that has a use for
    # its row without the answer (non-literal copying keeps its character score when the
    # judge's requests fail) catches it, may ask more, and returns; one that does not fails
    class Flaky(FakeBackend):
        def _answer_generate(self, requests, progress=None):
            return [RequestFailed("HTTP 500") if r.prompt.startswith("judge") else
                    super(Flaky, self)._answer_generate([r])[0] for r in requests]

    flaky = Flaky()
    closed = []

    def keeps_going():
        (story,) = yield [GenerateRequest(prompt="story")]
        try:
            yield [GenerateRequest(prompt="judge 1")]
        except RowError as exc:
            (again,) = yield [GenerateRequest(prompt="after")]  # it may still ask
            return {"story": story.text, "judge_error": str(exc), "again": again.text}
        return {"story": story.text}

    def gives_up():
        try:
            yield [GenerateRequest(prompt="judge 2")]
        finally:
            closed.append(True)  # ended, as a closed generator is

    results = drive({"keeps": keeps_going(), "gives_up": gives_up()}, lambda spec: flaky)
    assert results["keeps"] == {"story": "story", "judge_error": "request failed: HTTP 500", "again": "after"}
    assert isinstance(results["gives_up"], Failure) and results["gives_up"].reason == "request failed: HTTP 500"
    assert closed == [True]


def test_missing_capability_fails_before_any_work():
    text_only = FakeBackend(capabilities=[TOKEN_LOGPROBS])
    def run():
        yield [GenerateRequest(prompt="hi")]
    with pytest.raises(CapabilityError, match="generate"):
        drive({0: run()}, lambda spec: text_only)
    assert not text_only.calls


def _models_loaded_before_the_target_failed(target, error, match) -> list:
    """Drive a run whose reference-model request comes first, with ``target`` failing its
    check; the specs whose backends were asked for before the failure."""
    loaded = []

    def backend_for(spec):
        loaded.append(spec)
        return target if spec is None else FakeBackend(spec=spec)

    def run():
        yield [TokenLogprobsRequest("a b", model="reference"), GenerateRequest(prompt="hi")]
    with pytest.raises(error, match=match):
        drive({0: run()}, backend_for)
    return loaded


def test_the_target_is_checked_before_another_model_loads():
    """A reference model's requests placed first made it load (gemma-3-270m: 86 s) before an
    unreachable openai: target said it cannot be reached; the target is checked first."""
    unable = FakeBackend(spec="t", capabilities=[TOKEN_LOGPROBS])
    assert _models_loaded_before_the_target_failed(unable, CapabilityError, "generate") == [None]


def test_a_cached_target_is_asked_before_another_model_loads(tmp_path):
    """Behind the cache (the default), the target's own check did not run: an openai: target
    with no server let the reference model load first (15 s here), then said 'cannot reach'."""
    from copyprobe.backends.cache import CachedBackend, ResponseCache
    from copyprobe.errors import BackendError

    class NoServer(FakeBackend):
        def check(self, requests):
            raise BackendError("cannot reach http://127.0.0.1:9/v1")

    target = CachedBackend(NoServer(spec="t"), ResponseCache(tmp_path / "c.sqlite"))
    assert _models_loaded_before_the_target_failed(target, BackendError, "cannot reach") == [None]


def test_cyclic_garbage_is_collected_less_often_while_driving_and_as_before_after():
    import gc

    from copyprobe.drive import YOUNG_COLLECTION_THRESHOLD

    before = gc.get_threshold()
    seen = []

    def gen():
        seen.append(gc.get_threshold())
        yield [TokenLogprobsRequest("a text")]
        seen.append(gc.get_threshold())
        return 1.0

    backend = FakeBackend()
    assert drive({"x": gen()}, lambda spec: backend) == {"x": 1.0}
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, *before[1:])] * 2
    assert gc.get_threshold() == before

    def broken():
        raise RuntimeError("boom")
        yield []

    with pytest.raises(RuntimeError):
        drive({"y": broken()}, lambda spec: backend)
    assert gc.get_threshold() == before


def test_a_generator_is_resumed_as_soon_as_its_responses_are_handed_over():
    # the backend hands answers over one by one (as the HF backend does while its next
    # batch runs on the device): each method scores its passage before the backend returns
    events = []

    class Handing(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            out = []
            for i, request in enumerate(requests):
                out.append(self._token_logprobs(request))
                events.append(f"answered {request.text}")
                on_result(i, out[-1])
            events.append("returned")
            return out

    def score(text):
        responses = yield [TokenLogprobsRequest(text)]
        events.append(f"scored {text}")
        return len(responses[0].token_ids)

    results = drive({t: score(t) for t in ("a b", "c d e")}, lambda spec: Handing())
    assert results == {"a b": 2, "c d e": 3}
    assert events == ["answered a b", "scored a b", "answered c d e", "scored c d e", "returned"]


def test_a_generator_waiting_on_two_models_resumes_once_both_have_answered():
    events = []

    class Handing(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            for i, request in enumerate(requests):
                events.append(f"{self.spec} answered")
                on_result(i, self._token_logprobs(request))
            return [self._token_logprobs(r) for r in requests]

    target, other = Handing(spec="t"), Handing(spec="o")

    def both():
        responses = yield [TokenLogprobsRequest("a b"), TokenLogprobsRequest("a b", model="o")]
        events.append("scored")
        return len(responses)

    assert drive({0: both()}, lambda spec: other if spec == "o" else target) == {0: 2}
    assert events == ["t answered", "o answered", "scored"]


def test_a_backend_without_on_result_is_answered_as_a_whole():
    class Plain(FakeBackend):
        def answer(self, requests, progress=None):  # a wrapper from elsewhere, no hand-over
            return super().answer(requests, progress=progress)

    def run(text):
        responses = yield [TokenLogprobsRequest(text)]
        more = yield [TokenLogprobsRequest(text + " x")]
        return len(responses[0].token_ids) + len(more[0].token_ids)

    stats = DriveStats()
    assert drive({1: run("a"), 2: run("b c")}, lambda spec: Plain(), stats=stats) == {1: 3, 2: 5}
    assert stats.rounds == 2


def test_requests_with_an_unhashable_field_are_still_merged():
    fake = FakeBackend(generate_fn=lambda r: "ok")
    messages = [["user", "hi"]]  # lists where the dataclass declares tuples

    def ask():
        responses = yield [GenerateRequest(messages=messages), GenerateRequest(messages=[["user", "hi"]])]
        return [r.text for r in responses]

    stats = DriveStats()
    assert drive({0: ask(), 1: ask()}, lambda spec: fake, stats=stats) == {0: ["ok", "ok"], 1: ["ok", "ok"]}
    assert stats.requests_total == 4 and stats.requests_unique == 1


class _Once:
    """A method that asks once and scores (what OneStep runs): the number of tokens,
    refusing texts that start with "bad"."""

    def __init__(self, stats=False):
        self.stats = stats

    def requests(self, text):
        return [TokenLogprobsRequest(text, stats=self.stats)]

    def score(self, text, responses):
        if text.startswith("bad"):
            raise RowError("a bad text")
        return len(responses[0].token_ids)


def test_one_step_runs_score_as_their_generators_do_and_fail_their_rows_alone():
    from copyprobe.drive import OneStep

    def generator(method, text):
        responses = yield method.requests(text)
        return method.score(text, responses)

    texts = ["a b", "c d e", "bad f"]
    method = _Once()
    by_step = drive({t: OneStep(method, t) for t in texts}, lambda spec: FakeBackend())
    by_generator = drive({t: generator(method, t) for t in texts}, lambda spec: FakeBackend())
    assert {t: r for t, r in by_step.items() if not isinstance(r, Failure)} == {"a b": 2, "c d e": 3}
    assert by_step["a b"] == by_generator["a b"] and by_step["c d e"] == by_generator["c d e"]
    assert isinstance(by_step["bad f"], Failure) and by_step["bad f"].reason == "a bad text"


def test_one_step_runs_fail_on_a_failed_request_and_stop_on_a_missing_capability():
    from copyprobe.drive import OneStep

    class Refusing(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            return [RequestFailed("too long") if r.text == "x y" else self._token_logprobs(r) for r in requests]

    results = drive({t: OneStep(_Once(), t) for t in ("x y", "z")}, lambda spec: Refusing())
    assert results["z"] == 1 and results["x y"].reason == "request failed: too long"
    text_only = FakeBackend(capabilities=[TOKEN_LOGPROBS])
    with pytest.raises(CapabilityError, match="distribution"):
        drive({0: OneStep(_Once(stats=True), "a b")}, lambda spec: text_only)
    assert not text_only.calls


def test_one_step_runs_of_one_and_of_two_requests_and_generators_share_an_answer():
    """A OneStep of one request is scored from its answer directly; one of two waits for
    both, as a generator does; a failed request fails only the runs that asked for it."""
    from copyprobe.drive import OneStep

    class Twice(_Once):
        def requests(self, text):
            return [TokenLogprobsRequest(text), TokenLogprobsRequest(text.upper())]

        def score(self, text, responses):
            return 10 * len(responses[0].token_ids) + len(responses[1].token_ids)

    class Refusing(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            out = []
            for i, request in enumerate(requests):
                out.append(RequestFailed("upper") if request.text == "E F" else self._token_logprobs(request))
                if on_result:
                    on_result(i, out[-1])
                    on_result(i, out[-1])  # handed over twice: the second is ignored
            return out

    def generator(text):
        first = yield [TokenLogprobsRequest(text)]
        second = yield [TokenLogprobsRequest(text + " z")]
        return (len(first[0].token_ids), len(second[0].token_ids))

    runs = {}
    for text in ("a b c", "e f"):
        runs[("once", text)] = OneStep(_Once(), text)
        runs[("twice", text)] = OneStep(Twice(), text)
        runs[("generator", text)] = generator(text)
    runs[("nothing", "")] = OneStep(type("Asking", (_Once,), {"requests": lambda self, text: []})(), "")
    results = drive(runs, lambda spec: Refusing())
    assert results[("once", "a b c")] == 3 and results[("once", "e f")] == 2
    assert results[("twice", "a b c")] == 33
    assert results[("twice", "e f")].reason == "request failed: upper"
    assert results[("generator", "a b c")] == (3, 4) and results[("generator", "e f")] == (2, 3)
    assert isinstance(results[("nothing", "")], Failure)  # scored with no responses: its IndexError


def test_each_distinct_request_is_made_canonical_once_however_many_ask_for_it():
    made, answering = [], []

    class Counting(FakeBackend):
        def canonical(self, request):
            if not answering:  # the driver's calls (answer makes its requests canonical again)
                made.append(request)
            return super().canonical(request)

        def answer(self, requests, progress=None, on_result=None):
            answering.append(True)
            return super().answer(requests, progress=progress, on_result=on_result)

    from copyprobe.drive import OneStep

    backend = Counting()
    texts = ["a b", "c d", "e f g"]
    runs = {(t, m): OneStep(_Once(stats=m == 0), t) for t in texts for m in range(5)}  # 1 with stats, 4 without
    stats = DriveStats()
    results = drive(runs, lambda spec: backend, stats=stats)
    assert results == {(t, m): len(t.split()) for t in texts for m in range(5)}
    assert sorted((r.text, r.stats) for r in made) == sorted((t, s) for t in texts for s in (False, True))
    # the two forms of a text's request are one request after all (the backend gives stats anyway)
    assert stats.requests_total == 15 and stats.requests_unique == 3 and backend.calls["token_logprobs"] == 3
