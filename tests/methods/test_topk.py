"""topk_loss: word-start prompts, matching the passage's next token among the top-k
candidates by text, the floor, the statistics and details (by hand and on the fake
backend), and the per-position values against the full-prefix token log-probs of models
that give them (tiny random models; SmolLM2 through transformers and llama.cpp)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import load_llamacpp

import copyprobe
from copyprobe.backends.base import GENERATE, TOKEN_LOGPROBS, GenerateRequest, Generation, TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import CapabilityError, ConfigError
from copyprobe.methods.topk import TopkLoss, match_next, word_starts
from copyprobe.registry import make_method
from copyprobe.testing import check_method


def run_by_hand(method, text, answer):
    """(the requests, the score) of ``method`` on ``text``, each request answered by
    ``answer(request)``; a passage it cannot score raises from here."""
    run = method.run(Example(id="x", text=text))
    requests = next(run)
    try:
        run.send([answer(r) for r in requests])
    except StopIteration as stop:
        return requests, stop.value
    raise AssertionError("topk_loss asks in one round")


def top(candidates, prompt_tokens=None):
    return Generation(text="", top_logprobs=[dict(candidates)] if candidates is not None else None,
                      prompt_tokens=prompt_tokens)


# -- requests ------------------------------------------------------------------------------

def test_one_greedy_token_per_word_start_with_the_text_up_to_the_previous_word():
    text = "  Call me\tIshmael.\n\nSome  years ago"
    requests, _ = run_by_hand(make_method("topk_loss", k=7), text, lambda r: top({" x": -1.0}))
    assert [r.prompt for r in requests] == ["  Call", "  Call me", "  Call me\tIshmael.",
                                            "  Call me\tIshmael.\n\nSome", "  Call me\tIshmael.\n\nSome  years"]
    assert all(r.max_tokens == 1 and r.temperature == 0 and r.top_logprobs == 7 and r.messages is None
               for r in requests)
    assert not any(r.prompt[-1].isspace() for r in requests)
    assert [p.cut for p in word_starts(text, 2)] == [6, 9]  # max_words: the first N word starts
    capped, _ = run_by_hand(make_method("topk_loss", max_words=2), text, lambda r: top({" x": -1.0}))
    assert [r.prompt for r in capped] == ["  Call", "  Call me"]


def test_a_passage_of_one_word_is_a_row_failure_and_bad_parameters_are_refused():
    with pytest.raises(copyprobe.errors.RowError, match="fewer than two words"):
        run_by_hand(make_method("topk_loss"), "  alone\n", lambda r: top({" x": -1.0}))
    for bad in ({"k": 0}, {"max_words": 0}, {"statistic": "median"}, {"min_k_fraction": 0.0}):
        with pytest.raises(ConfigError):
            make_method("topk_loss", **bad)


# -- matching the next token by text -------------------------------------------------------

def test_the_longest_candidate_that_begins_the_rest_of_the_passage_is_its_next_token():
    candidates = {" t": -0.5, " the": -1.0, " theatre": -3.0, " cat": -0.2}
    assert match_next(candidates, " theatre is full") == (" theatre", -3.0)
    assert match_next(candidates, " the cat") == (" the", -1.0)
    assert match_next(candidates, " tea") == (" t", -0.5)
    # none fits: the floor is the smallest returned log-prob
    assert match_next(candidates, " dog") == (None, -3.0)


def test_leading_whitespace_is_text_and_must_match():
    # the rest starts with the whitespace before the word: a piece without it does not fit
    assert match_next({"the": -0.1, " dog": -2.0}, " the end") == (None, -2.0)
    assert match_next({"the": -0.1, " the": -0.7}, " the end") == (" the", -0.7)
    assert match_next({" The": -0.3, "\n": -1.5, "\n\n": -1.2}, "\n\nThe end") == ("\n\n", -1.2)
    assert match_next({" The": -0.3, "\n": -1.5}, "\n\nThe end") == ("\n", -1.5)
    # a token that reads as nothing (a special token some servers render as "") fits no text
    assert match_next({"": -0.1, " x": -3.0}, " y") == (None, -3.0)


def test_unicode_pieces_match_by_their_characters():
    assert match_next({" caf": -2.0, " café": -1.5, " cafe": -1.0}, " café au lait") == (" café", -1.5)
    assert match_next({"中": -1.0, "中国": -0.5, "国": -0.1}, "中国人") == ("中国", -0.5)
    # a lone byte of a longer character comes back as U+FFFD and matches nothing; the
    # decomposed "e" + combining accent is other text than the composed "é"
    assert match_next({"\ufffd": -0.1, " cafe\u0301": -0.4, " c": -5.0}, " café") == (" c", -5.0)


# -- the score and its details -------------------------------------------------------------

def answers_for_a_b_c_d_e(request):
    return {
        "a": top({" b": -1.0, " bb": -0.5, " x": -2.0}, 1),  # found: " b" (" bb" is not a prefix)
        "a b": top({" z": -0.5, " y": -4.0}, 2),  # not in the top k: the floor -4
        "a b c": top({" d": -0.2, " dd": -9.0}, 3),  # found
        "a b c d": top(None, 4),  # no top log-probs: left out, counted
    }[request.prompt]


def test_mean_floor_min_k_and_details_by_hand():
    text = "a b c d e"
    _, score = run_by_hand(make_method("topk_loss"), text, answers_for_a_b_c_d_e)
    assert score.value == pytest.approx((-1.0 - 4.0 - 0.2) / 3)
    assert score.details == {"positions": 3, "in_top_k": 2, "coverage": pytest.approx(2 / 3), "whitespace_only": 0,
                             "unanswered": 1, "requests": 4, "prompt_words": 1 + 2 + 3 + 4, "prompt_tokens": 10}
    # min_k: the mean of the lowest floor(fraction * 3) positions, at least one
    _, lowest = run_by_hand(make_method("topk_loss", statistic="min_k", min_k_fraction=0.4), text,
                            answers_for_a_b_c_d_e)
    assert lowest.value == pytest.approx(-4.0)
    _, two = run_by_hand(make_method("topk_loss", statistic="min_k", min_k_fraction=0.7), text,
                         answers_for_a_b_c_d_e)
    assert two.value == pytest.approx((-4.0 - 1.0) / 2)
    _, everything = run_by_hand(make_method("topk_loss", statistic="min_k", min_k_fraction=1.0), text,
                                answers_for_a_b_c_d_e)
    assert everything.value == pytest.approx(score.value)


def test_a_lone_space_candidate_is_found_and_counted():
    # " 1984" starts with the token " " for SmolLM2; for a word it is only a prefix
    _, score = run_by_hand(make_method("topk_loss"), "In 1984 it rained",
                           lambda r: top({" ": -0.4, " 2": -1.0, " it": -2.0, " snowed": -3.0}))
    assert score.value == pytest.approx((-0.4 - 2.0 - 0.4) / 3)
    assert score.details["in_top_k"] == 3 and score.details["whitespace_only"] == 2


def test_prompt_tokens_are_recorded_only_when_the_backend_counts_them():
    _, score = run_by_hand(make_method("topk_loss"), "one two three", lambda r: top({" two": -1.0}))
    assert "prompt_tokens" not in score.details and score.details["prompt_words"] == 3
    with pytest.raises(copyprobe.errors.RowError, match="no top log-probs"):
        run_by_hand(make_method("topk_loss"), "one two three", lambda r: top(None))


# -- on the fake backend -------------------------------------------------------------------

TEXTS = ["it was the best of times and the worst of times", "seven quiet herons crossed the grey lake at dawn"]


def test_on_the_fake_positions_in_the_top_k_take_the_token_log_prob_and_the_rest_the_floor():
    backend = FakeBackend(member_texts=TEXTS[:1])
    method = make_method("topk_loss", k=4)
    found = floored = 0
    for text in TEXTS:
        requests, score = run_by_hand(method, text, lambda r: backend.answer([r])[0])
        truth = backend.answer([TokenLogprobsRequest(text)])[0].logprobs  # word i given word i - 1
        expected = []
        for i, request in enumerate(requests):
            candidates = backend.answer([request])[0].top_logprobs[0]
            assert len(candidates) == 4 and all(piece.startswith(" ") for piece in candidates)
            word = " " + text.split()[i + 1]
            if word in candidates:
                assert candidates[word] == truth[i]
                expected.append(truth[i])
                found += 1
            else:
                assert min(candidates.values()) >= truth[i]  # the floor is an upper bound
                expected.append(min(candidates.values()))
                floored += 1
        assert score.value == pytest.approx(np.mean(expected))
    assert found >= 3 and floored >= 3  # both cases occur


def test_a_backend_without_top_log_probs_refuses_before_any_work():
    backend = FakeBackend(capabilities=[GENERATE, TOKEN_LOGPROBS])
    examples = [Example(id=str(i), text=t) for i, t in enumerate(TEXTS)]
    with pytest.raises(CapabilityError, match="top_logprobs"):
        copyprobe.detect(backend, examples, ["topk_loss"], cache=False, n_bootstrap=0, blind_baseline=False)
    assert sum(backend.calls.values()) == 0
    assert GenerateRequest(prompt="x", top_logprobs=3).capabilities() == {GENERATE, "top_logprobs"}
    assert GenerateRequest(prompt="x").capabilities() == {GENERATE}


def test_each_request_is_cached_and_a_rerun_asks_nothing(tmp_path):
    backend = FakeBackend(member_texts=TEXTS[:1])
    examples = [Example(id=str(i), text=t) for i, t in enumerate(TEXTS)]

    def run():
        return copyprobe.detect(backend, examples, ["topk_loss"], cache=tmp_path / "cache.sqlite", n_bootstrap=0,
                                blind_baseline=False).scores["topk_loss"].tolist()

    first = run()
    asked = backend.calls["generate"]
    assert asked == sum(len(t.split()) - 1 for t in TEXTS)  # one request per word start
    assert run() == first and backend.calls["generate"] == asked


def test_check_method():
    check = check_method(TopkLoss)
    assert check.n_scored == check.n_passages - 1 and "fewer than two words" in check.errors["one-word"]
    check_method(TopkLoss, params={"statistic": "min_k", "k": 3, "max_words": 10})


# -- against the full-prefix token log-probs of real models --------------------------------

def piece_reader(backend):
    """The backend's own text of a token id (checked in the backend tests)."""
    return getattr(backend, "token_piece", None) or backend._token_piece


def token_ids(backend, text):
    """The ids a token log-prob request of ``text`` scores (the llama.cpp or HF tokenizer)."""
    if hasattr(backend, "tokenize"):
        return backend.tokenize(text)
    return backend.tokenizer(text).input_ids


def compare_with_token_logprobs(backend, texts, k, max_words=128):
    """Per word start whose prompt's tokens begin the text's tokens: the method's value
    against log p(the text's next token | the prompt's tokens) from one TokenLogprobsRequest
    of the whole text. Returns {"found": [|difference|], "floored": [value - true],
    "longer": n}, where ``longer`` counts positions whose matched candidate is a longer
    token than the tokenizer's own (still a prefix of the rest), and checks that each
    passage's score is the mean of its positions' values."""
    method = make_method("topk_loss", k=k, max_words=max_words)
    piece_of = piece_reader(backend)
    out = {"found": [], "floored": [], "longer": 0, "skipped": 0}
    for text in texts:
        requests = method.requests(Example(id="x", text=text))
        answers = backend.answer(requests)
        score = method.score(Example(id="x", text=text), answers)
        full = backend.answer([TokenLogprobsRequest(text)])[0]
        assert full.token_ids == token_ids(backend, text)
        values = []
        for position, answer, request in zip(word_starts(text, max_words), answers, requests):
            candidates = answer.top_logprobs[0]
            piece, value = match_next(candidates, text[position.cut:])
            values.append(value)
            prompt_ids = token_ids(backend, request.prompt)
            n = len(prompt_ids)
            if full.token_ids[:n] != prompt_ids or len(full.token_ids) <= n:
                out["skipped"] += 1
                continue
            true_piece, true_value = piece_of(full.token_ids[n]), full.logprobs[n - 1]
            assert text[position.cut:].startswith(true_piece)
            if true_piece not in candidates:
                out["floored"].append(value - true_value)
            elif piece == true_piece:
                out["found"].append(abs(value - true_value))
            else:
                assert len(piece) > len(true_piece)
                out["longer"] += 1
        assert score.value == pytest.approx(np.mean(values), abs=1e-12)
        assert score.details["positions"] == len(values)
    return out


SENTENCES = ["The ferry left at nine; the lake was flat as a plate.",
             "Mother said the ice would hold until March, and Edvin laughed.",
             "def add(a, b): return a + b  # two numbers"]


def test_tiny_random_model_values_equal_its_token_log_probs(tiny_llama):
    # the byte tokenizer: a word's first token is the space before it (every value is
    # log p(" " | text so far)); the random model puts the space among its 80 likeliest of
    # 259 bytes at 8 of the 30 word starts
    out = compare_with_token_logprobs(tiny_llama, SENTENCES, k=80)
    assert len(out["found"]) >= 5 and len(out["floored"]) >= 5 and out["skipped"] == 0
    assert max(out["found"]) < 1e-5  # float32, the same positions in other batch shapes
    assert min(out["floored"]) > -1e-5


@pytest.fixture(scope="module")
def llamacpp_tiny_gguf(tiny_gguf):
    backend = load_llamacpp(f"llamacpp:{tiny_gguf}", chunk=16, kv_type="f32")
    yield backend
    backend.close()


def test_tiny_gguf_through_llama_cpp_values_equal_its_token_log_probs(llamacpp_tiny_gguf):
    # its one merge " t" makes words that start with t begin with a two-byte token; the
    # random model seldom ranks a word start high, so the whole vocabulary (260) finds
    # every one and 4 candidates none
    texts = ["a tall cat sat on the mat", "ten tin tubs", "the ferry left at nine; the lake was flat"]
    everything = compare_with_token_logprobs(llamacpp_tiny_gguf, texts, k=260)
    assert len(everything["found"]) == 16 and everything["skipped"] == 0
    # float32 weights and KV cache; the generation's last row and the text's row sit in
    # decode calls of other lengths
    assert max(everything["found"]) < 1e-4
    few = compare_with_token_logprobs(llamacpp_tiny_gguf, texts, k=4)
    assert len(few["floored"]) == 16 and min(few["floored"]) > -1e-4  # the floor is an upper bound


def wikimia(n):
    from copyprobe.scoring import load_examples

    examples, _ = load_examples("wikimia:64")
    return examples[:n]


@pytest.mark.model
def test_smollm2_through_transformers_values_equal_its_token_log_probs(smollm2):
    texts = [e.text for e in wikimia(4)]
    out = compare_with_token_logprobs(smollm2, texts, k=20)
    # measured on these 4 passages: 167 found (max |diff| 1.5e-5), 84 floored, 1 longer
    # (" referendum" for the tokenizer's " referend" + "ums")
    assert len(out["found"]) >= 100 and len(out["floored"]) >= 30
    assert max(out["found"]) < 1e-4
    assert min(out["floored"]) > -1e-4
    assert out["longer"] <= 0.02 * (len(out["found"]) + out["longer"])


@pytest.fixture(scope="module")
def llamacpp_smollm2_here():
    backend = load_llamacpp("llamacpp:smollm2-135m-instruct")
    yield backend
    backend.close()


@pytest.mark.model
def test_smollm2_through_llama_cpp_values_equal_its_token_log_probs(llamacpp_smollm2_here):
    texts = [e.text for e in wikimia(2)]  # each word start decodes ~16 tokens here: 2 passages
    out = compare_with_token_logprobs(llamacpp_smollm2_here, texts, k=20)
    assert len(out["found"]) >= 50 and len(out["floored"]) >= 15
    # Q4_1 weights and an f16 KV cache: the generation reads the prompt's last row at the
    # end of its own decode call, the text's scores read it inside a 128-token call, and
    # llama.cpp's kernels compute a row of a partial tile differently (module docstring of
    # backends/llamacpp.py). Measured on the first 4 passages: max 0.025, mean 1.5e-4 over
    # 167 positions.
    assert max(out["found"]) < 0.05 and np.mean(out["found"]) < 2e-3
    assert min(out["floored"]) > -0.05
    assert out["longer"] <= 0.02 * (len(out["found"]) + out["longer"])


@pytest.mark.model
def test_smollm2_topk_loss_follows_loss_over_passages(smollm2):
    examples = wikimia(36)
    result = copyprobe.detect(smollm2, examples, ["loss", "topk_loss"], cache=False, n_bootstrap=0,
                              blind_baseline=False)
    frame = result.scores
    assert frame["topk_loss"].notna().all()
    pearson = float(np.corrcoef(frame["loss"], frame["topk_loss"])[0, 1])
    spearman = float(frame["loss"].rank().corr(frame["topk_loss"].rank()))
    # measured on these 36 passages: see the report in benchmarks/results/topk_loss.md
    assert pearson > 0.6 and spearman > 0.6, (pearson, spearman)
    assert not math.isnan(result.metrics["passage"]["topk_loss"]["auc"])


# -- over HTTP -----------------------------------------------------------------------------

def test_over_an_openai_compatible_server(fake_openai, monkeypatch):
    from copyprobe.backends.openai_compat import OpenAIBackend

    known = "Call me Ishmael. Some years ago"

    def answer(path, body):  # the server knows the next word of one passage
        prompt, k = body["prompt"], body.get("logprobs") or 0
        following = known[len(prompt):].split() if known.startswith(prompt) else []
        top = {" and": -1.5, " the": -3.0}
        if following:
            top = {" " + following[0]: -0.25, **top}
        logprobs = {"tokens": [" x"], "top_logprobs": [dict(list(top.items())[:k])]} if k else None
        return {"choices": [{"text": " x", "finish_reason": "length", "logprobs": logprobs}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 1}}

    server = fake_openai(answer=answer)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    backend = OpenAIBackend.from_spec(f"openai:tiny-model@{server.base_url}", concurrency=2)
    examples = [Example(id="known", text=known), Example(id="other", text="Call me later, please")]
    result = copyprobe.detect(backend, examples, ["topk_loss"], params={"topk_loss": {"k": 3}}, cache=False,
                              n_bootstrap=0, blind_baseline=False)
    scores = dict(zip(result.scores["id"], result.scores["topk_loss"]))
    assert scores["known"] == pytest.approx(-0.25)  # every next word found
    # "Call me" is shared: " later," is not a candidate (floor -3), " please" neither (floor -3)
    assert scores["other"] == pytest.approx((-0.25 - 3.0 - 3.0) / 3)
    sent = [r["body"] for r in server.log]
    assert sent[0]["prompt"] == "The quick brown fox"  # the one probe, first
    bodies = sent[1:]
    assert len(bodies) == 4 + 3 - 1  # one request per word start, "Call" shared by both passages
    assert all(b["max_tokens"] == 1 and b["temperature"] == 0 and b["logprobs"] == 3 for b in bodies)
    assert not any(b["prompt"][-1].isspace() for b in bodies)


# -- topk_reference ------------------------------------------------------------------------

def test_topk_reference_is_the_targets_topk_loss_minus_the_references_asked_the_same_way(tmp_path):
    from copyprobe.session import Session

    target = FakeBackend(spec="smollm2-135m-instruct", member_texts=TEXTS[:1])
    reference = FakeBackend(spec="gemma-3-270m", member_texts=TEXTS[1:2])
    session = Session(target, cache=False, loader=lambda spec: reference)
    examples = [Example(id=str(i), text=t) for i, t in enumerate(TEXTS)]
    result = copyprobe.detect(session, examples, ["topk_reference"], params={"topk_reference": {"k": 4}},
                              n_bootstrap=0, blind_baseline=False)
    # 'auto' resolved against the target, as reference's model is
    assert result.run["methods"]["topk_reference"]["model"] == "gemma-3-270m"
    # each model was asked once per word start of every passage
    per_model = sum(len(t.split()) - 1 for t in TEXTS)
    assert target.calls["generate"] == reference.calls["generate"] == per_model
    plain = make_method("topk_loss", k=4)
    for text, value in zip(TEXTS, result.scores["topk_reference"]):
        _, on_target = run_by_hand(plain, text, lambda r: target.answer([r])[0])
        _, on_reference = run_by_hand(plain, text, lambda r: reference.answer([r])[0])
        assert value == pytest.approx(on_target.value - on_reference.value)
    # the text the reference found easy and the target did not (TEXTS[1]) scores below the target's member
    assert result.scores["topk_reference"][0] > result.scores["topk_reference"][1]


def test_topk_reference_check_method_and_unresolved_auto():
    check_method(make_method("topk_reference", model="other").__class__, params={"model": "other", "max_words": 10})
    with pytest.raises(ConfigError, match="must be resolved"):
        make_method("topk_reference").requests(Example(id="x", text="two words"))
