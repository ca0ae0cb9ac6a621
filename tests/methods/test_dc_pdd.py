"""DC-PDD on a toy frequency table by hand, table/model mismatch errors, driven runs."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.freq import FrequencyTable
from copyprobe.methods.base import Score
from copyprobe.methods.dc_pdd import dc_pdd_score, first_occurrences
from copyprobe.registry import make_method
from copyprobe.drive import Failure, drive
from model_helpers import FAMOUS_AND_NONSENSE, model_fixture

# vocabulary of 5 ids, 10 corpus tokens: counts 5, 3, 1, 0, 1
TOY = FrequencyTable(counts=np.array([5, 3, 1, 0, 1]), name="toy", vocab_hash="h")



def test_first_occurrences():
    assert first_occurrences([4, 2, 4, 4, 1, 2]).tolist() == [0, 1, 4]


def toy_response():
    # token 0 is context only; scored ids 1, 2, 1 (repeat, ignored), 3
    return TokenLogprobs(
        token_ids=[0, 1, 2, 1, 3],
        logprobs=[math.log(0.5), math.log(0.2), math.log(0.9), math.log(0.01)],
    )


def test_toy_table_by_hand():
    # Laplace: f = (count + 1) / (10 + 5):  id1 4/15, id2 2/15, id3 1/15
    # terms p * -ln f: 0.5 * 1.3217558 = 0.6608779
    #                  0.2 * 2.0149030 = 0.4029806
    #                  0.01 * 2.7080502 = 0.0270805   (the repeated id1 with p=0.9 is skipped)
    unclipped = dc_pdd_score(toy_response(), TOY, a=10.0)
    assert unclipped.value == pytest.approx((0.6608779 + 0.4029806 + 0.0270805) / 3, abs=1e-6)
    assert unclipped.details == {"tokens_used": 3, "clipped": 0}
    clipped = dc_pdd_score(toy_response(), TOY, a=0.5)  # first term clipped to 0.5
    assert clipped.value == pytest.approx((0.5 + 0.4029806 + 0.0270805) / 3, abs=1e-6)
    assert clipped.details["clipped"] == 1
    # the paper's a = 0.01 clips all three
    assert dc_pdd_score(toy_response(), TOY, a=0.01).value == pytest.approx(0.01)


def test_rare_confident_token_scores_higher_than_common_confident_token():
    common = TokenLogprobs(token_ids=[0, 0], logprobs=[math.log(0.9)])  # count 5
    rare = TokenLogprobs(token_ids=[0, 3], logprobs=[math.log(0.9)])  # count 0
    assert dc_pdd_score(rare, TOY, 10).value > dc_pdd_score(common, TOY, 10).value


def test_ids_outside_the_table_are_a_tokenizer_mismatch():
    response = TokenLogprobs(token_ids=[0, 7], logprobs=[-1.0])
    with pytest.raises(ConfigError, match="tokenizer mismatch"):
        dc_pdd_score(response, TOY, 0.01)


# --- a table for FakeBackend, whose token ids are hashes of words below 50,000 -------
def fake_ids(words):
    (resp,) = FakeBackend().answer([TokenLogprobsRequest(" ".join(words), stats=False)])
    return resp.token_ids


def fake_table(corpus_words, vocab=(), strings_from=None):
    """Counts of ``corpus_words``; token strings known for them and for ``vocab`` (a real
    table knows every id's string), or wrong strings from ``strings_from``."""
    counts = np.zeros(50_000, dtype=np.int64)
    crc = np.zeros(50_000, dtype=np.uint32)
    for word, i in zip(corpus_words, fake_ids(corpus_words)):
        counts[i] += 1
    known = list(corpus_words) + list(vocab)
    for word, i in zip(strings_from or known, fake_ids(known)):
        crc[i] = zlib.crc32(word.encode())
    return FrequencyTable(counts=counts, name="fake", vocab_hash="h", token_crc=crc, piece_crc=crc)


def run_all(method, texts, backend):
    runs = {t: method.run(Example(id=t, text=t)) for t in texts}
    return drive(runs, backend_for=lambda spec: backend)


def test_driven_run_matches_formula(tmp_path):
    words = "the cat sat on the mat with a hat".split()
    path = fake_table(words * 3).save(tmp_path / "fake.npz")
    backend = FakeBackend()
    text = "the cat sat on the hat"
    result = run_all(make_method("dc_pdd", freq=str(path), a=10.0), [text], backend)[text]
    assert isinstance(result, Score)
    (resp,) = backend.answer([TokenLogprobsRequest(text, stats=False)])
    # scored words: cat sat on the hat (each first occurrence); corpus: 27 tokens, V = 50,000
    scored = text.split()[1:]
    expected = np.mean([
        math.exp(lp) * -math.log(((words * 3).count(w) + 1) / (27 + 50_000))
        for w, lp in zip(scored, resp.logprobs)
    ])
    assert result.value == pytest.approx(expected)
    assert result.details["tokens_used"] == 5


def test_members_score_higher_on_fake_backend(tmp_path):
    corpus = "a the of and to in is it that was for on".split()
    members = ["the old keeper climbed the stairs at dusk", "rain fell on copper roofs in town"]
    others = ["revenue figures beat forecasts this quarter", "engineers replaced one faulty valve"]
    path = fake_table(corpus, vocab=" ".join(members + others).split()).save(tmp_path / "t.npz")
    backend = FakeBackend(member_texts=members, boost=6.0)
    # the fake's probabilities are all >= e^-9, so the paper's a=0.01 would clip every term
    results = run_all(make_method("dc_pdd", freq=str(path), a=1.0), members + others, backend)
    assert min(results[t].value for t in members) > max(results[t].value for t in others)


def test_table_of_another_tokenizer_stops_the_run(tmp_path):
    words = "the cat sat on the mat".split()
    wrong = fake_table(words, strings_from=["x", "y", "z", "u", "v", "w"]).save(tmp_path / "w.npz")
    with pytest.raises(ConfigError, match="tokens differ"):
        run_all(make_method("dc_pdd", freq=str(wrong)), ["the cat sat"], FakeBackend())
    small = FrequencyTable(counts=np.ones(100, dtype=np.int64), name="small", vocab_hash="h").save(tmp_path / "s.npz")
    with pytest.raises(ConfigError, match="tokenizer mismatch"):
        run_all(make_method("dc_pdd", freq=str(small)), ["the cat sat"], FakeBackend())


def test_short_text_fails_its_row_only(tmp_path):
    path = fake_table("the cat sat".split()).save(tmp_path / "t.npz")
    results = run_all(make_method("dc_pdd", freq=str(path)), ["single", "the cat sat"], FakeBackend())
    assert isinstance(results["single"], Failure) and isinstance(results["the cat sat"], Score)


def test_missing_or_bad_parameters(tmp_path):
    with pytest.raises(ConfigError, match="needs a token frequency table"):
        make_method("dc_pdd")
    with pytest.raises(ConfigError, match="needs a token frequency table"):
        make_method("dc_pdd", freq=" ")
    with pytest.raises(ConfigError, match="not found"):
        make_method("dc_pdd", freq=str(tmp_path / "missing.npz"))
    path = fake_table(["the"]).save(tmp_path / "t.npz")
    for a in (0, -1, float("nan"), True):
        with pytest.raises(ConfigError, match="dc_pdd.a"):
            make_method("dc_pdd", freq=str(path), a=a)


@pytest.mark.model
def test_end_to_end_on_smollm2(request, tmp_path):
    smollm2 = model_fixture(request)
    from copyprobe.freq import build_frequency_table

    tokenizer = smollm2.tokenizer
    corpus = ("The cat sat on the mat. It was a sunny day and the children played outside. "
              "Prices rose in the market while the council met to discuss the new road. ") * 20
    table = build_frequency_table(tokenizer, [iter([corpus])], name="smollm2")
    path = table.save(tmp_path / "smollm2.npz")
    texts = list(FAMOUS_AND_NONSENSE)
    results = run_all(make_method("dc_pdd", freq=str(path)), texts, smollm2)
    for t in texts:
        assert isinstance(results[t], Score), results[t]
        assert 0 < results[t].value <= 0.01
    # a table of a smaller tokenizer is refused
    small = FrequencyTable(counts=table.counts[:100], name="small", vocab_hash="x").save(tmp_path / "small.npz")
    with pytest.raises(ConfigError, match="tokenizer mismatch"):
        run_all(make_method("dc_pdd", freq=str(small)), texts[:1], smollm2)
    (resp,) = smollm2.answer([TokenLogprobsRequest(texts[0], stats=False)])
    if resp.tokens is not None:  # backends that return token strings: wrong strings are refused
        other = FrequencyTable(counts=table.counts, name="other", vocab_hash="x",
                               token_crc=np.roll(table.token_crc, 1), piece_crc=np.roll(table.piece_crc, 1))
        bad = other.save(tmp_path / "other.npz")
        with pytest.raises(ConfigError, match="tokens differ"):
            run_all(make_method("dc_pdd", freq=str(bad)), texts[:1], smollm2)
