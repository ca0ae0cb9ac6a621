"""info_probe: candidate selection, parsing, the >=2 rule, no-probe rows, driven runs."""

from __future__ import annotations

import numpy as np
import pytest

from copyprobe.backends.base import GenerateRequest, TokenLogprobs, TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.base import Score
from copyprobe.methods.info_probe import MASK, InfoProbe, mask_word, parse_word, word_stats
from copyprobe.registry import make_method, method_class
from copyprobe.drive import Failure, drive
from copyprobe.text import normalize, split_words, token_spans

TEXT = "Stay gold, Ponyboy, stay gold."


def tl(tokens, logprobs, rank=None):
    return TokenLogprobs(token_ids=list(range(len(tokens))), logprobs=logprobs, rank=rank, tokens=tokens)


# -- words and tokens ------------------------------------------------------------------


def test_split_words_strips_edge_punctuation():
    words = split_words('He said: "Wemmick\'s book," then left.')
    assert [w.core for w in words] == ["He", "said", "Wemmick's", "book", "then", "left"]
    w = words[3]
    assert mask_word('He said: "Wemmick\'s book," then left.', w) == 'He said: "Wemmick\'s [MASK]," then left.'


def test_token_spans_understand_space_markers_and_special_tokens():
    spans = token_spans(TEXT, ["<s>", "Stay", "Ġgold", ",", "▁Pony", "boy", ",", "Ġstay", "Ġgold", "."])
    assert spans == [None, (0, 4), (5, 9), (9, 10), (11, 15), (15, 18), (18, 19), (20, 24), (25, 29), (29, 30)]


def test_word_logprob_is_the_sum_of_its_tokens_and_rank_the_max_alternatives():
    # tokens: <s> Stay Ġgold , ĠPony boy , Ġstay Ġgold .   (logprobs score tokens 1..9)
    r = tl(
        ["<s>", "Stay", "Ġgold", ",", "ĠPony", "boy", ",", "Ġstay", "Ġgold", "."],
        [-3.0, -1.0, -0.5, -7.0, -6.0, -0.2, -2.0, -0.1, -0.3],
        rank=[10, 2, 1, 900, 1500, 1, 3, 1, 1],
    )
    stats = {s.word.index: s for s in word_stats(TEXT, r)}
    assert stats[0].logprob == pytest.approx(-3.0)  # "Stay" is token 1 (scored after <s>)
    assert stats[2].logprob == pytest.approx(-13.0)  # Pony + boy, the comma is not part of the word
    assert stats[2].alternatives == 1499  # max(900, 1500) - 1
    assert stats[1].alternatives == 1


def test_first_token_of_the_text_is_never_a_candidate():
    # without a BOS token the first word has no log-prob at all
    r = tl(["Zyxw", "Ġgold"], [-1.0], rank=[1])
    assert [s.word.core for s in word_stats("Zyxw gold", r)] == ["gold"]


def test_whitespace_fallback_without_token_strings():
    r = TokenLogprobs(token_ids=[1, 2, 3], logprobs=[-13.0, -1.0], tokens=None)
    assert [(s.word.core, s.logprob) for s in word_stats("a Bb cc", r)] == [("Bb", -13.0), ("cc", -1.0)]
    bad = TokenLogprobs(token_ids=[1, 2], logprobs=[-13.0], tokens=None)
    with pytest.raises(Exception, match="cannot map tokens to words"):
        word_stats("a Bb cc", bad)


# -- candidate selection ------------------------------------------------------------------


TEXT2 = "The quick Zorblat ate eleven purple Quennix near Vask"
# whitespace tokens; logprobs score words 1..8
LP2 = [-2.0, -12.5, -1.0, -12.0, -11.9, -20.0, -3.0, -15.0]
RANK2 = [5, 2002, 1, 2001, 3000, 50000, 2, 2500]
R2 = TokenLogprobs(token_ids=list(range(9)), logprobs=LP2, rank=RANK2, tokens=TEXT2.split())


def test_prob_threshold_is_strict_and_most_surprising_first():
    cands = InfoProbe(measure="prob").select_candidates(TEXT2, R2)
    # -12.0 is not < -12; -11.9 neither
    assert [c.word.core for c in cands] == ["Quennix", "Vask", "Zorblat"]
    assert [c.surprise for c in cands] == [20.0, 15.0, 12.5]


def test_rank_threshold_counts_more_probable_alternatives():
    cands = InfoProbe(measure="rank").select_candidates(TEXT2, R2)
    # rank 2001 = 2000 likelier tokens: not > 2000; rank 2002 = 2001: selected
    assert [c.word.core for c in cands] == ["Quennix", "purple", "Vask", "Zorblat"]
    assert InfoProbe(measure="rank", rank_threshold=2999).select_candidates(TEXT2, R2)[0].word.core == "Quennix"
    assert [c.word.core for c in InfoProbe(measure="rank", rank_threshold=2999).select_candidates(TEXT2, R2)] == [
        "Quennix"
    ]


def test_cap_keeps_the_most_surprising():
    cands = InfoProbe(measure="prob", max_tokens=2).select_candidates(TEXT2, R2)
    assert [c.word.core for c in cands] == ["Quennix", "Vask"]


def test_repeated_words_are_skipped_unless_asked():
    text = "Vask met Vask today"
    r = TokenLogprobs(token_ids=[0, 1, 2, 3], logprobs=[-1.0, -14.0, -2.0], tokens=text.split())
    assert InfoProbe().select_candidates(text, r) == []
    cands = InfoProbe(skip_repeated=False).select_candidates(text, r)
    # one probe per distinct word, its most surprising occurrence
    assert [(c.word.core, c.word.index) for c in cands] == [("Vask", 2)]


def test_rank_measure_needs_ranks():
    r = TokenLogprobs(token_ids=[0, 1], logprobs=[-20.0], tokens=["a", "b"])
    with pytest.raises(Exception, match="no token ranks"):
        InfoProbe(measure="rank").select_candidates("a b", r)


# -- parsing and scoring ------------------------------------------------------------------


def test_parse_word():
    assert parse_word("Output: <word>Ponyboy</word>") == "Ponyboy"
    assert parse_word("<WORD> Gerty </word> and more") == "Gerty"
    assert parse_word("I think <word>Emma") == "Emma"  # answer cut by max tokens
    assert parse_word("Ponyboy") is None
    assert parse_word("") is None
    assert normalize(" “Ponyboy.” ") == "ponyboy"


def test_two_reconstructed_words_make_a_memorized_text():
    probe = InfoProbe()
    cands = InfoProbe(measure="prob").select_candidates(TEXT2, R2)  # Quennix, Vask, Zorblat
    answers = ["<word>quennix</word>", "<word>Vosk</word>", "Output: <word>Zorblat.</word>"]
    score = probe.score_answers(cands, answers)
    assert isinstance(score, Score)
    assert score.value == 2.0
    assert score.details["memorized"] is True
    assert score.details["unparsed"] == 0
    assert [p["reconstructed"] for p in score.details["probes"]] == [True, False, True]

    one = probe.score_answers(cands, ["<word>quennix</word>", "<word>Vosk</word>", "<word>x</word>"])
    assert one.value == 1.0 and one.details["memorized"] is False

    strict = InfoProbe(min_reconstructed=3).score_answers(cands, answers)
    assert strict.details["memorized"] is False

    frac = InfoProbe(score="fraction").score_answers(cands, answers)
    assert frac.value == pytest.approx(2 / 3)


def test_answers_without_tags_count_as_not_reconstructed():
    cands = InfoProbe(measure="prob").select_candidates(TEXT2, R2)
    score = InfoProbe().score_answers(cands, ["Quennix", "The word is Vask.", "<word>Zorblat</word>"])
    assert score.value == 1.0
    assert score.details["unparsed"] == 2
    assert score.details["probes"][0]["guess"] is None


# -- driven through the runner with FakeBackend ------------------------------------------


def _fake_lp(fake: FakeBackend, words: list[str]) -> list[float]:
    return [fake._word_logprob(words[i - 1], words[i]) for i in range(1, len(words))]


def _masked_passage(request: GenerateRequest) -> str:
    content = request.messages[-1][1] if request.messages else request.prompt
    return content.rsplit("Input: ", 1)[1].split("\nOutput:")[0]


def test_driven_run_masks_one_word_at_a_time_and_counts():
    text = "the old harbour keeper counted seventeen lanterns before the storm reached Kelloway"
    words = text.split()
    prompts: list[str] = []

    def answer(request: GenerateRequest) -> str:
        passage = _masked_passage(request)
        prompts.append(passage)
        i = passage.split().index(MASK)
        # the target "remembers" every word at an even position, and answers word 7 without tags
        if i == 7:
            return words[i]
        return f"<word>{words[i] if i % 2 == 0 else 'nothing'}</word>"

    fake = FakeBackend(generate_fn=answer)
    # the reference is a different model: the runner hands it the named backend
    ref = FakeBackend(spec="fake-ref")
    lps = _fake_lp(ref, words)
    # strictly below the fifth lowest: the four lowest words are surprising
    method = InfoProbe(reference="fake-ref", logprob_threshold=sorted(lps)[4], max_tokens=10)
    expected = sorted(range(1, len(words)), key=lambda i: lps[i - 1])[:4]

    results = drive({"a": method.run(Example("a", text))}, backend_for=lambda spec: ref if spec else fake)
    score = results["a"]
    assert isinstance(score, Score), score
    assert ref.calls["token_logprobs"] == 1
    assert fake.calls["generate"] == 4
    # each probe is the text with exactly one word replaced by [MASK]
    for passage in prompts:
        masked = passage.split()
        assert masked.count(MASK) == 1
        i = masked.index(MASK)
        assert masked[:i] + [words[i]] + masked[i + 1 :] == words
    assert sorted(p.split().index(MASK) for p in prompts) == sorted(expected)
    want = sum(1 for i in expected if i % 2 == 0 and i != 7)
    assert score.value == float(want)
    assert score.details["unparsed"] == (1 if 7 in expected else 0)
    assert score.details["memorized"] == (want >= 2)
    assert [p["position"] for p in score.details["probes"]] == expected


def test_no_surprising_word_is_an_explicit_no_probe_failure():
    fake = FakeBackend()
    method = InfoProbe(reference="ref")  # FakeBackend log-probs never go below -9
    results = drive({"x": method.run(Example("x", "a perfectly ordinary sentence"))}, backend_for=lambda s: fake)
    assert isinstance(results["x"], Failure)
    assert results["x"].reason.startswith("no probe")
    assert fake.calls["generate"] == 0


def test_knowledge_filter_drops_guessed_words():
    text = "alpha beta gamma delta epsilon zeta eta theta"
    words = text.split()
    ref = FakeBackend(spec="ref")
    lps = _fake_lp(ref, words)
    expected = sorted(range(1, len(words)), key=lambda i: lps[i - 1])[:3]
    guessable = words[expected[0]]

    def filter_answer(request: GenerateRequest) -> str:
        assert "What is the word that fills in the [MASK] token in the following passage?" in request.messages[0][1]
        return f"It is probably {guessable}."

    def target_answer(request: GenerateRequest) -> str:
        i = _masked_passage(request).split().index(MASK)
        return f"<word>{words[i]}</word>"

    filt = FakeBackend(spec="filt", generate_fn=filter_answer)
    target = FakeBackend(generate_fn=target_answer)
    backends = {None: target, "ref": ref, "filt": filt}
    method = InfoProbe(reference="ref", logprob_threshold=sorted(lps)[3], filter_models="filt")
    assert method.models() == {"ref", "filt"}
    score = drive({"k": method.run(Example("k", text))}, backend_for=backends.__getitem__)["k"]
    assert isinstance(score, Score), score
    assert filt.calls["generate"] == 3
    assert score.details["filtered_out"] == [guessable]
    assert score.details["candidates"] == 3 and score.details["probed"] == 2
    assert score.value == 2.0

    # a filter that guesses everything leaves no probe
    everything = FakeBackend(spec="filt", generate_fn=lambda r: " ".join(words))
    backends["filt"] = everything
    result = drive({"k": method.run(Example("k", text))}, backend_for=backends.__getitem__)["k"]
    assert isinstance(result, Failure) and result.reason.startswith("no probe")


def test_contamination_prompt_and_plain_prompts():
    method = InfoProbe(prompt="contamination", chat=False)
    req = method.probe_request("Which of these is produced during [MASK]?")
    assert req.messages is None
    assert req.prompt.startswith("Complete the sentence in one word:")
    assert "Which of these is produced during [MASK]?" in req.prompt
    default = InfoProbe().probe_request("x [MASK] y")
    assert "Input: Stay gold, [MASK], stay gold.\nOutput: <word>Ponyboy</word>" in default.messages[0][1]
    assert default.temperature == 0.0 and default.cacheable()


def test_registered_and_validated():
    assert method_class("info_probe") is InfoProbe
    with pytest.raises(ConfigError):
        make_method("info_probe", measure="entropy")
    with pytest.raises(ConfigError):
        make_method("info_probe", score="sum")
    with pytest.raises(ConfigError):
        make_method("info_probe", max_tokens=0)
    method = make_method("info_probe", reference="gemma-3-270m")
    assert method.models() == {"gemma-3-270m"}
    assert InfoProbe(measure="person").models() == set()


def test_unresolved_auto_reference_is_a_config_error():
    with pytest.raises(ConfigError, match="auto"):
        drive({"a": InfoProbe().run(Example("a", TEXT))}, backend_for=lambda s: FakeBackend())


def test_person_measure_uses_spacy_names():
    pytest.importorskip("spacy")
    try:
        from copyprobe.methods.info_probe import person_words

        person_words("Emma")
    except ConfigError:
        pytest.skip("no spaCy English model installed")
    text = "Yesterday Harriet Smith wrote a letter to the editor about the harbour."
    cands = InfoProbe(measure="person").select_candidates(text, None)
    assert [c.word.core for c in cands] == ["Harriet", "Smith"]


def test_detect_records_no_probe_rows_as_errors_not_zeros(tmp_path):
    from copyprobe.detect import detect
    from copyprobe.session import Session

    texts = ["alpha beta", "the old harbour keeper counted seventeen lanterns before the storm"]
    examples = [Example(f"e{i}", t, label=i % 2) for i, t in enumerate(texts)]
    ref = FakeBackend(spec="ref")
    lps = _fake_lp(ref, texts[0].split())
    session = Session(FakeBackend(spec="target"), cache=tmp_path / "c", loader=lambda spec: ref)
    # "beta" is not surprising at this threshold; the second text has candidates
    threshold = lps[0] - 1e-6
    result = detect(
        session, examples, ["info_probe"], params={"info_probe": {"reference": "ref", "logprob_threshold": threshold}},
        n_bootstrap=20,
    )
    rows = result.scores.set_index("id")
    second_lps = _fake_lp(ref, texts[1].split())
    assert any(v < threshold for v in second_lps)
    assert np.isnan(rows.loc["e0", "info_probe"])
    assert rows.loc["e0", "errors"]["info_probe"].startswith("no probe")
    assert rows.loc["e1", "info_probe"] >= 0


# -- real models (slow) ----------------------------------------------------------------------


class WithTokenStrings:
    """Adds token strings (tokenizer.convert_ids_to_tokens) to a HF backend's token
    log-probs when it gives none; a no-op once the backend fills ``tokens`` itself."""

    def __init__(self, inner):
        self.inner = inner
        self.spec = inner.spec

    def __getattr__(self, name):  # canonical, capabilities, fingerprint ...
        return getattr(self.inner, name)

    def check(self, requests):
        self.inner.check(requests)

    def answer(self, requests, progress=None):
        out = self.inner.answer(requests, progress)
        if requests and isinstance(requests[0], TokenLogprobsRequest):
            tok = self.inner.tokenizer
            out = [
                r if r.tokens is not None else TokenLogprobs(**{**r.to_json(), "tokens": tok.convert_ids_to_tokens(r.token_ids)})
                for r in out
            ]
        return out


@pytest.mark.model
def test_info_probe_end_to_end_on_smollm2_with_gemma_reference(smollm2, gemma):
    text = (
        "The ferry to Quellbrook left at dawn, and Marisol Okonkwo counted the gulls while "
        "her brother argued with the ticket clerk about a crate of pickled turnips."
    )
    seen: list[str] = []

    class Recording:
        spec = smollm2.spec

        def __getattr__(self, name):
            return getattr(smollm2, name)

        def check(self, requests):
            smollm2.check(requests)

        def answer(self, requests, progress=None):
            seen.extend(r.messages[0][1] for r in requests)
            return smollm2.answer(requests, progress)

    backends = {None: Recording(), "gemma-3-270m": WithTokenStrings(gemma)}
    method = InfoProbe(reference="gemma-3-270m", max_tokens=3)
    score = drive({"a": method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    assert isinstance(score, Score), score
    d = score.details
    assert 1 <= d["probed"] <= 3 and len(seen) == d["probed"]
    assert 0 <= d["reconstructed"] <= d["probed"] and score.value == d["reconstructed"]
    assert d["unparsed"] == sum(p["guess"] is None for p in d["probes"])
    for probe, prompt in zip(d["probes"], seen):
        passage = prompt.rsplit("Input: ", 1)[1].split("\nOutput:")[0]
        assert passage.count(MASK) == 1
        assert passage.replace(MASK, probe["word"], 1) == text
        assert probe["surprise"] > 12  # -log p below the paper's threshold


def test_lenient_parsing_accepts_the_papers_untagged_answers():
    from copyprobe.methods.info_probe import parse_lenient

    assert parse_lenient('I believe the word that fills in the [MASK] token in the passage is "Arthur."') == "Arthur."
    assert parse_lenient("Output: Wemmick") == "Wemmick"
    assert parse_lenient("   ") is None
    cands = InfoProbe(measure="prob").select_candidates(TEXT2, R2)  # Quennix, Vask, Zorblat
    answers = ["Output: Quennix", 'The word is "Vask".', "<word>Zorblat</word>"]
    assert InfoProbe().score_answers(cands, answers).value == 1.0
    lenient = InfoProbe(parse="lenient").score_answers(cands, answers)
    assert lenient.value == 3.0
    assert lenient.details["unparsed"] == 2  # still reported: two answers had no tags
    with pytest.raises(ConfigError):
        make_method("info_probe", parse="loose")
