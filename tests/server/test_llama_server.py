"""Black-box methods over HTTP against a real llama-cpp-python server (smollm2)."""

from __future__ import annotations

import pytest

from copyprobe.backends.base import (
    ChoiceLogprobsRequest,
    GenerateRequest,
    RequestFailed,
    TokenLogprobsRequest,
)
from copyprobe.backends.cache import CachedBackend, ResponseCache
from copyprobe.backends.openai_compat import OpenAIBackend
from copyprobe.data.example import Example
from copyprobe.errors import BackendError, CapabilityError
from copyprobe.registry import make_method
from copyprobe.drive import Failure, drive

pytestmark = pytest.mark.server

SECRET = "sk-server-test-secret-42"

PASSAGES = [
    ("genesis", ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
                 "and darkness was upon the face of the deep.")),
    ("shepherd", ("The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: "
                  "he leadeth me beside the still waters. He restoreth my soul.")),
    ("fresh", ("Marta stacked the blue crates behind the bakery while the delivery van idled. Marta counted "
               "them twice, then locked the gate and walked home through the rain.")),
]


def booktection_rows() -> list[Example]:
    rows = []
    for i, (pid, text) in enumerate(PASSAGES):
        words = text.split()
        paraphrases = [
            " ".join(reversed(words)),
            " ".join(words[len(words) // 2 :] + words[: len(words) // 2]),
            text.lower().replace(",", "").replace(";", ""),
        ]
        letter = "ABCD"[i % 4]
        others = iter(paraphrases)
        meta = {f"Example_{l}": (text if l == letter else next(others)) for l in "ABCD"}
        meta["Answer"] = letter
        rows.append(Example(id=pid, text=text, meta=meta))
    return rows


@pytest.fixture
def backend(llama_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the server ignores it; it must never leak
    b = OpenAIBackend.from_spec(f"openai:smollm2@{llama_server}", concurrency=2, max_retries=2, timeout=120)
    b._sleep = lambda s: None
    return b


def run(method_name, examples, backend, **params):
    method = make_method(method_name, **params)
    return drive({e.id: method.run(e) for e in examples}, lambda spec: backend)


def run_each(examples, backend, decop_params):
    """decop on each example with its own parameters, all in one drive (one batch of requests)."""
    return drive({e.id: make_method("decop", **p).run(e) for e, p in zip(examples, decop_params)}, lambda spec: backend)


def test_server_features(backend):
    chat, completion, seeded_a, seeded_b = backend.answer([
        GenerateRequest(messages=(("user", "Say hello."),), max_tokens=8),
        GenerateRequest(prompt="The capital of France is", max_tokens=4),
        GenerateRequest(prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=3),
        GenerateRequest(prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=3),
    ])
    assert chat.text.strip() and completion.text.strip()
    assert seeded_a.text == seeded_b.text  # seeded sampling is reproducible
    assert chat.prompt_tokens and chat.completion_tokens
    assert backend.usage["prompt_tokens"] > 0 and backend.usage["completion_tokens"] > 0
    (top,) = backend.answer([GenerateRequest(prompt="One, two,", max_tokens=2, top_logprobs=3)])
    assert top.top_logprobs and all(v <= 0 for d in top.top_logprobs for v in d.values())


def test_prompt_logprobs_over_http(backend):
    assert backend.probe_prompt_logprobs() is True
    (tl,) = backend.answer([TokenLogprobsRequest(text=PASSAGES[0][1], stats=False)])
    assert len(tl.logprobs) == len(tl.tokens) - 1 >= 20
    assert all(v <= 0 for v in tl.logprobs)
    assert "".join(tl.tokens).strip() == PASSAGES[0][1]
    results = run("loss", [Example("g", PASSAGES[0][1])], backend)
    assert not isinstance(results["g"], Failure)
    with pytest.raises(CapabilityError, match="distribution_stats"):
        run("min_k_pp", [Example("g", PASSAGES[0][1])], backend)


def test_decop_blackbox_scores_every_passage(backend):
    # one passage with all 24 orderings, one with the 4 rotations (28 prompts: each costs
    # about a second on two busy cores)
    rows = booktection_rows()[:2]
    results = run_each(rows, backend, [{"mode": "blackbox"}, {"mode": "blackbox", "orderings_asked": "rotations"}])
    for row, n_orderings in zip(rows, (24, 4)):
        score = results[row.id]
        assert not isinstance(score, Failure), score
        assert score.details["n_orderings"] == n_orderings and 0 <= score.value <= 1
        assert score.value == score.details["n_correct"] / n_orderings


def test_decop_logit_scores_every_passage(backend):
    (choice,) = backend.answer([ChoiceLogprobsRequest(messages=(("user", "Pick A, B, C or D."),), choices=tuple("ABCD"))])
    assert choice.logprobs and all(v <= 0 for v in choice.logprobs.values())
    rows = booktection_rows()[1:]  # as above: all 24 orderings, then the 4 rotations
    results = run_each(rows, backend, [{"mode": "logit"}, {"mode": "logit", "orderings_asked": "rotations"}])
    for row, n_orderings in zip(rows, (24, 4)):
        score = results[row.id]
        assert not isinstance(score, Failure), score
        assert sum(score.details["letter_probs"].values()) == pytest.approx(1.0)
        assert 0 <= score.value <= 1 and score.details["n_orderings"] == n_orderings


def test_decop_with_target_as_paraphraser_scores_or_reports(backend):
    results = run("decop", [Example("p", PASSAGES[2][1])], backend, paraphrase_attempts=2, paraphrase_max_tokens=160)
    result = results["p"]
    # a 135M model may not follow the format: then the row says so, it is never dropped
    if isinstance(result, Failure):
        assert "could not be parsed in 2 attempts" in result.reason
    else:
        assert len(result.details["paraphrases"]) == 3 and 0 <= result.value <= 1


def test_name_cloze_and_prefix_probe_score_every_passage(backend):
    examples = [Example(pid, text) for pid, text in PASSAGES]
    cloze = run("name_cloze", examples, backend)
    probe = run("prefix_probe", examples, backend, prefix_tokens=10)
    for pid, _ in PASSAGES:
        assert cloze[pid].value in (0.0, 1.0) and cloze[pid].details["masked"]
        assert 0 <= probe[pid].value <= 1 and probe[pid].details["completion"]
    assert cloze["fresh"].details["masked"] == "Marta"


def test_second_run_with_the_cache_sends_no_request(backend, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    examples = [Example(pid, text) for pid, text in PASSAGES]
    first = run("prefix_probe", examples, CachedBackend(backend, cache), prefix_tokens=10)
    sent = backend.usage["requests"]
    assert sent >= len(PASSAGES)
    cached = CachedBackend(backend, cache)
    second = run("prefix_probe", examples, cached, prefix_tokens=10)
    assert backend.usage["requests"] == sent and cached.misses == 0 and cached.hits == len(PASSAGES)
    assert {k: v.value for k, v in first.items()} == {k: v.value for k, v in second.items()}


def test_failing_request_is_recorded_and_the_run_completes(backend):
    too_long = " ".join(f"word{i}" for i in range(3000))  # beyond n_ctx=2048
    examples = [Example("long", too_long), Example("ok", PASSAGES[0][1])]
    results = run("prefix_probe", examples, backend, prefix_tokens=1400)
    assert isinstance(results["long"], Failure) and "request failed" in results["long"].reason
    assert SECRET not in results["long"].reason
    short = run("prefix_probe", [Example("ok", PASSAGES[0][1])], backend, prefix_tokens=10)
    assert not isinstance(short["ok"], Failure)


def test_wrong_path_is_one_clear_error_without_the_key(llama_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    wrong = OpenAIBackend.from_spec(f"openai:smollm2@{llama_server}/nothing-here", max_retries=0)
    with pytest.raises(BackendError, match="HTTP 404") as info:
        wrong.answer([GenerateRequest(prompt="hi", max_tokens=2)])
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    assert isinstance(RequestFailed("x"), RequestFailed)


# -- information-guided probes and VeilProbe over HTTP (issue 6) ------------------------------

# short: llama-cpp-python's server sorts the whole vocabulary in Python for every token of a
# prompt whose log-probs are asked (about 0.1 s a token on two cores)
FRESH = [
    "Marta stacked the blue crates behind the bakery at dawn.",
    "The ferry schedule changed, so Ibrahim took the slower bus.",
    "Our neighbour's greenhouse leaks whenever the north wind blows.",
    "Lena tuned the cello twice, then forgot her bow.",
]
FAMOUS = [
    "In the beginning God created the heaven and the earth.",
    "The LORD is my shepherd; I shall not want.",
    "For God so loved the world, that he gave his only begotten Son.",
    "Our Father which art in heaven, Hallowed be thy name.",
]


def labelled_rows() -> list[Example]:
    return ([Example(f"famous{i}", t, label=1) for i, t in enumerate(FAMOUS)]
            + [Example(f"fresh{i}", t, label=0) for i, t in enumerate(FRESH)])


@pytest.mark.parametrize("method, params", [
    # the server is target and reference alike (surprisal from its prompt log-probs)
    ("info_probe", {"logprob_threshold": -6.0, "max_tokens": 2, "answer_tokens": 8}),
    ("veilprobe", {"n_train": 4, "n_samples": 1, "suffix_tokens": 8, "attribution_tokens": 4,
                   "max_attribution_words": 2, "map_epochs": 1, "proto_steps": 20}),
])
def test_guided_probes_run_through_detect_and_a_warm_cache_sends_nothing(llama_server, monkeypatch, tmp_path,
                                                                          method, params):
    import copyprobe

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    spec = f"openai:smollm2@{llama_server}"
    params = {**params, "reference": spec}
    cache = tmp_path / "cache.sqlite"
    first = copyprobe.detect(spec, labelled_rows(), [method], params={method: params}, cache=cache,
                             out=tmp_path / "run1", n_bootstrap=20, blind_baseline=False)
    scored = first.scores.dropna(subset=[method])
    trained = set(first.run["train_ids"] or [])
    # every row that is not a training row gets a score or an explicit, recorded reason
    failed = {f["id"] for f in first.run["failures"]}
    assert set(first.scores["id"]) - trained == set(scored["id"]) | failed
    assert len(scored) >= 2 and first.run["cache"]["misses"] > 0
    assert {i.rstrip("0123456789") for i in scored["id"]} == {"famous", "fresh"}  # a score on each side
    assert first.run["requests"]["by_model_kind"]
    second = copyprobe.detect(spec, labelled_rows(), [method], params={method: params}, cache=cache,
                              n_bootstrap=20, blind_baseline=False)
    assert second.run["cache"]["misses"] == 0
    assert list(second.scores[method].fillna(-99)) == list(first.scores[method].fillna(-99))
    for path in (tmp_path / "run1").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="ignore")
    assert SECRET.encode() not in cache.read_bytes()
