"""veilprobe: attribution, perturbation, Welch selection, prototype scoring, training."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.methods._veil_models import ProtoConfig, ProtoNet, prototype_probability, welch_select
from copyprobe.text import split_words
from copyprobe.methods.veilprobe import (
    VeilFeatures,
    VeilProbe,
    attribution,
    choose_substitute,
    remove_word,
    replace_words,
    top_words,
)
from copyprobe.registry import make_method, method_class
from copyprobe.drive import drive

# tiny settings so that training takes seconds on a shared CPU
TINY = dict(map_epochs=1, proto_steps=60, max_input_bytes=48, max_suffix_bytes=32, map_dim=16, map_layers=1)


# -- text helpers ---------------------------------------------------------------------------


def test_remove_word_keeps_the_tail_identical():
    text = "one two, three four"
    words = split_words(text)
    new, r_tail, o_tail = remove_word(text, words[1])
    assert new == "one three four"
    assert new[r_tail:] == text[o_tail:] == "three four"
    new, r_tail, o_tail = remove_word(text, words[3])  # last word: the space before goes
    assert new == "one two, three"
    assert new[r_tail:] == text[o_tail:] == ""


def test_attribution_is_mean_absolute_change_aligned_from_the_end():
    assert attribution([-1.0, -2.0, -3.0], [-1.5, -2.0, -1.0]) == pytest.approx((0.5 + 0.0 + 2.0) / 3)
    # the removed text lost its first scored token: compare the last two only
    assert attribution([-9.0, -2.0, -3.0], [-2.5, -3.5]) == pytest.approx((0.5 + 0.5) / 2)
    assert attribution([], [-1.0]) == 0.0


def test_top_gamma_words():
    words = split_words("a b c d e f g h i j")
    imp = [0.1, 0.9, 0.3, 0.9, 0.0, 0.2, 0.5, 0.4, 0.05, 0.6]
    assert top_words(words, imp, 0.1) == [1]  # one of ten; tie 0.9 goes to the earlier word
    assert top_words(words, imp, 0.25) == [1, 3, 9]  # round(2.5) -> 3
    assert top_words(words[:3], imp[:3], 0.1) == [1]  # at least one


def test_substitute_is_never_the_same_word():
    assert choose_substitute("happy", " glad\n") == "glad"
    assert choose_substitute("Happy", "glad, cheerful") == "Glad"
    assert choose_substitute("NASA", "agency") == "AGENCY"
    same = choose_substitute("harbour", " Harbour")
    assert same and same.lower() != "harbour"
    assert same == choose_substitute("harbour", "")  # deterministic fallback
    assert choose_substitute("thing", "thing").lower() != "thing"  # fallback skips the word itself
    text = "The old harbour keeper."
    words = split_words(text)
    assert replace_words(text, [words[2], words[3]], ["port", "guard"]) == "The old port guard."


# -- driven with FakeBackend --------------------------------------------------------------


def test_run_samples_perturbs_the_most_important_word_and_returns_features():
    text = "the old harbour keeper counted seventeen lanterns before the storm"
    words = text.split()
    proxy = FakeBackend(spec="proxy", generate_fn=lambda r: " and then the night fell")
    target = FakeBackend(generate_fn=lambda r: f"suffix seed={r.seed} of [{r.prompt}]")
    subst = FakeBackend(spec="sub", generate_fn=lambda r: " port")
    backends = {None: target, "proxy": proxy, "sub": subst}
    method = VeilProbe(reference="proxy", substituter="sub", gamma=0.1, n_samples=3, seed=7,
                       attribution_scope="tail")
    assert method.models() == {"proxy", "sub"}
    feats = drive({"a": method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    assert isinstance(feats, VeilFeatures), feats

    # FakeBackend scores a word given only the previous word, so removing word i changes
    # the log-prob of the following token only; the tail = later words + the proxy's
    # greedy continuation (attribution_scope=tail).
    full = (text + " and then the night fell").split()
    lp = proxy._word_logprob

    def expected(i: int) -> float:
        tail_len = len(full) - i - 1
        if i == 0:
            return 0.0
        return abs(lp(full[i], full[i + 1]) - lp(full[i - 1], full[i + 1])) / tail_len

    want = [expected(i) for i in range(len(words))]
    assert feats.importance == pytest.approx(want, abs=1e-6)
    key = int(np.argmax(want))
    assert feats.key_words == (words[key],)
    assert feats.substitutes == ("port",)
    assert feats.perturbed_text.split() == words[:key] + ["port"] + words[key + 1 :]

    # three samples with distinct seeds, for the original and for the perturbed text
    assert feats.suffixes == tuple(f"suffix seed={7 + j} of [{text}]" for j in range(3))
    assert feats.perturbed_suffixes == tuple(f"suffix seed={7 + j} of [{feats.perturbed_text}]" for j in range(3))
    assert target.calls["generate"] == 6
    assert proxy.calls["token_logprobs"] == len(words) + 1
    assert subst.calls["generate"] == 1


def test_suffix_scope_measures_the_change_on_the_proxy_continuation_only():
    # the paper's attribution: how removing a word changes the proxy's predictions of its
    # own continuation. FakeBackend conditions each word on the previous one only, so only
    # the last word of the text touches the continuation (its first token)
    text = "the old harbour keeper counted seventeen lanterns before the storm"
    words = text.split()
    continuation = " and then the night fell"
    proxy = FakeBackend(spec="proxy", generate_fn=lambda r: continuation)
    backends = {None: FakeBackend(), "proxy": proxy, "sub": FakeBackend(spec="sub", generate_fn=lambda r: " gale")}
    method = VeilProbe(reference="proxy", substituter="sub")
    assert method.attribution_scope == "suffix"  # the default
    feats = drive({"a": method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    lp = proxy._word_logprob
    n_suffix = len(continuation.split())
    last = abs(lp("storm", "and") - lp("the", "and")) / n_suffix
    assert feats.importance == pytest.approx([0.0] * (len(words) - 1) + [last], abs=1e-6)
    assert last > 0 and feats.key_words == ("storm",) and feats.perturbed_text.endswith("the gale")
    assert proxy.calls["token_logprobs"] == len(words) + 1  # the same requests as the tail scope

    # an empty continuation leaves nothing to measure there: every token after the word
    silent = FakeBackend(spec="proxy", generate_fn=lambda r: "")
    backends["proxy"] = silent
    got = drive({"a": method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    tail = drive({"a": VeilProbe(reference="proxy", substituter="sub", attribution_scope="tail").run(
        Example("a", text))}, backend_for=backends.__getitem__)["a"]
    assert got.importance == tail.importance and any(v > 0 for v in got.importance[:-1])


def test_suffix_scope_sends_each_block_of_words_with_the_text_before_it_as_context():
    from copyprobe.backends.base import TokenLogprobsRequest
    from copyprobe.methods.veilprobe import ATTRIBUTION_BLOCK

    words = [f"w{i}" for i in range(2 * ATTRIBUTION_BLOCK + 3)]
    text = " ".join(words[:5]) + ",  " + " ".join(words[5:]) + "."  # a double space inside
    continuation = " and so on"
    proxy = FakeBackend(spec="proxy", generate_fn=lambda r: continuation)
    sent = []
    answer = proxy.answer
    proxy.answer = lambda requests, *a, **k: sent.extend(requests) or answer(requests, *a, **k)
    backends = {None: FakeBackend(), "proxy": proxy, "sub": FakeBackend(spec="sub")}
    feats = drive({"a": VeilProbe(reference="proxy", substituter="sub").run(Example("a", text))},
                  backend_for=backends.__getitem__)["a"]
    removed = [r for r in sent if isinstance(r, TokenLogprobsRequest)][1:]
    assert len(removed) == len(words)
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    tokens = text.split()
    for i, request in enumerate(removed):
        # the request is the text without word i (and its punctuation), cut before the
        # whitespace before the first word of its block
        assert (request.context + request.text).split() == tokens[:i] + tokens[i + 1:] + continuation.split()
        first = i // ATTRIBUTION_BLOCK * ATTRIBUTION_BLOCK
        assert request.context == (text[:starts[first]].rstrip() if first else "")
    # the same importances as whole texts give (the fake scores a word after the one before it)
    cont_words = len(continuation.split())
    whole = proxy.answer([TokenLogprobsRequest(text + continuation)] + [
        TokenLogprobsRequest(r.context + r.text) for r in removed])
    want = [float(np.abs(np.subtract(whole[0].logprobs[-cont_words:], w.logprobs[-cont_words:])).mean())
            for w in whole[1:]]
    assert feats.importance == pytest.approx(want, abs=1e-6)


def test_substituter_repeating_the_word_falls_back():
    text = "alpha beta gamma"
    fake = FakeBackend(generate_fn=lambda r: r.prompt.rsplit("\n", 1)[1].split(" ->")[0] if r.prompt.startswith("Synonyms") else "x")
    feats = drive({"a": VeilProbe(reference="fake").run(Example("a", text))}, backend_for=lambda s: fake)["a"]
    assert isinstance(feats, VeilFeatures), feats
    (word,) = feats.key_words
    (sub,) = feats.substitutes
    assert sub.lower() != word.lower()
    assert word not in feats.perturbed_text.split()


def test_random_key_tokens_and_attribution_cap():
    text = "the old harbour keeper counted seventeen lanterns before the storm"
    proxy = FakeBackend(spec="proxy")
    target = FakeBackend()
    backends = {None: target, "proxy": proxy}
    random_method = VeilProbe(reference="proxy", key_tokens="random", gamma=0.2)
    assert random_method.models() == {"proxy"}  # the substituter only
    a = drive({"a": random_method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    b = drive({"a": random_method.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    assert proxy.calls["token_logprobs"] == 0
    assert a.key_words == b.key_words and len(a.key_words) == 2

    capped = VeilProbe(reference="proxy", max_attribution_words=3)
    f = drive({"a": capped.run(Example("a", text))}, backend_for=backends.__getitem__)["a"]
    assert proxy.calls["token_logprobs"] == 4  # the text + the last three words removed
    assert f.importance[:7] == (0.0,) * 7 and any(v > 0 for v in f.importance[7:])
    assert f.key_words[0] in text.split()[7:]


def test_unresolved_auto_is_a_config_error():
    with pytest.raises(ConfigError, match="auto"):
        drive({"a": VeilProbe().run(Example("a", "some text here"))}, backend_for=lambda s: FakeBackend())


# -- Welch selection and prototypes ---------------------------------------------------------


def test_welch_selection_hand_case():
    # dim 0: members 1,2,3 vs 4,5,6: t = -3 / sqrt(1/3 + 1/3), Welch df = 4 -> p = 0.02131
    # dim 1: same values in both groups -> p = 1; dim 2: constant -> NaN -> 1 (dropped)
    x = np.array([[1, 0, 7], [2, 5, 7], [3, 9, 7], [4, 0, 7], [5, 5, 7], [6, 9, 7]], dtype=float)
    y = [1, 1, 1, 0, 0, 0]
    keep, p = welch_select(x, y, 0.05)
    t = -3 / math.sqrt(2 / 3)
    from scipy.stats import t as student_t

    assert p[0] == pytest.approx(2 * student_t.cdf(t, 4))
    assert p[0] == pytest.approx(0.02131, abs=1e-4)
    assert p[1] == pytest.approx(1.0) and p[2] == 1.0
    assert keep.tolist() == [True, False, False]
    assert welch_select(x, y, 0.01)[0].tolist() == [False, False, False]
    with pytest.raises(ValueError):
        welch_select(x[:3], [1, 1, 0], 0.05)


def test_prototype_probability_hand_case():
    # rows are (distance to non-member prototype, distance to member prototype)
    d = np.array([[4.0, 0.0], [0.0, 0.0], [1.0, 3.0], [1000.0, 0.0], [0.0, 1000.0]])
    p = prototype_probability(d)
    assert p[0] == pytest.approx(math.exp(0) / (math.exp(0) + math.exp(-4)))  # 0.98201
    assert p[1] == 0.5
    assert p[2] == pytest.approx(1 / (1 + math.exp(2)))
    assert p[3] == 1.0 and p[4] == pytest.approx(0.0)


def test_protonet_prototypes_are_class_means_of_the_embeddings():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (6, 4)), rng.normal(3, 1, (6, 4))])
    y = [0] * 6 + [1] * 6
    net = ProtoNet(ProtoConfig(steps=40, hidden=8, bottleneck=2)).fit(x, y)
    import torch

    with torch.no_grad():
        mu, _ = net.net(torch.as_tensor(x, dtype=torch.float32))
    assert np.allclose(net.prototypes[0].numpy(), mu[:6].mean(0).numpy(), atol=1e-6)
    assert np.allclose(net.prototypes[1].numpy(), mu[6:].mean(0).numpy(), atol=1e-6)
    d = net.distances(x)
    assert np.allclose(d[:, 1], ((mu.numpy() - net.prototypes[1].numpy()) ** 2).sum(1), atol=1e-5)
    p = net.member_probability(x)
    assert p[6:].mean() > 0.5 > p[:6].mean()


# -- training -----------------------------------------------------------------------------------


V = "alpha beta gamma delta river stone cloud market silver garden window engine paper winter".split()
A = "ORCHID ZEPHYR QUARTZ JUNIPER".split()


def _features(labels, seed):
    """Members' suffixes come from a vocabulary of their own (the target "remembers"),
    and perturbing a member's text makes its suffixes ordinary."""
    rng = np.random.default_rng(seed)
    out = []
    for label in labels:
        text = " ".join(rng.choice(V, 12))
        suffixes = tuple(" ".join(rng.choice(A if label else V, 6)) for _ in range(3))
        perturbed = tuple(" ".join(rng.choice(V, 6)) for _ in range(3))
        out.append(VeilFeatures(text, suffixes, text.replace(" ", " thing ", 1), perturbed))
    return out


def test_too_few_labelled_samples_is_a_clear_error():
    feats = _features([1, 1, 0, 1], seed=0)
    with pytest.raises(DataError, match=r"at least 2 labelled members and 2 labelled non-members.*got 3 members and 1 non-members"):
        VeilProbe(**TINY).fit(feats, [1, 1, 0, 1])
    with pytest.raises(ConfigError, match=">= 4"):
        make_method("veilprobe", n_train=3)


def test_fit_predict_separates_members_and_is_deterministic():
    from sklearn.metrics import roc_auc_score

    train_y = [1, 0] * 6
    test_y = [1, 0] * 6
    train, test = _features(train_y, 1), _features(test_y, 2)
    method = VeilProbe(reference="r", **TINY).fit(train, train_y)
    scores = method.predict(test)
    values = [s.value for s in scores]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert roc_auc_score(test_y, values) > 0.9
    assert method.train_info_["kept_perturbation_dims"] > 0
    assert set(scores[0].details) >= {"d_member", "d_nonmember"}
    again = VeilProbe(reference="r", **TINY).fit(train, train_y).predict(test)
    assert [s.value for s in again] == values


def test_registered_as_a_training_method():
    cls = method_class("veilprobe")
    assert cls is VeilProbe and cls.trains is True
    assert "TRAINS" in cls.summary
    assert VeilProbe().n_train == 50
    with pytest.raises(ConfigError):
        make_method("veilprobe", gamma=0.0)
    with pytest.raises(ConfigError):
        make_method("veilprobe", proxies=" , ")
    assert make_method("veilprobe", reference="gemma-3-270m", proxies="reference,smollm2-135m-instruct").models() == {
        "gemma-3-270m",
        "smollm2-135m-instruct",
    }


def test_features_round_trip_through_json():
    f = _features([1], seed=3)[0]
    assert VeilFeatures.from_json(f.to_json()) == f


def test_detect_trains_on_a_labelled_subset_and_caches_every_request(tmp_path):
    from copyprobe.detect import detect
    from copyprobe.session import Session

    words = V + A
    rng = np.random.default_rng(5)
    examples = [
        Example(f"e{i}", " ".join(rng.choice(words, 10)), label=i % 2) for i in range(12)
    ]
    made: list[FakeBackend] = []

    def loader(spec):
        made.append(FakeBackend(spec=spec))
        return made[-1]

    def session():
        return Session(FakeBackend(spec="fake-target"), cache=tmp_path / "cache", loader=loader)

    params = {"veilprobe": dict(reference="proxy", n_train=6, **TINY)}
    first = detect(session(), examples, ["veilprobe"], params=params, n_bootstrap=50)
    frame = first.scores
    assert frame["veilprobe"].between(0, 1).all()
    assert frame["veilprobe"].notna().sum() == 12
    trained = [row for row in frame.to_dict("records") if isinstance(row.get("train"), list) and "veilprobe" in row["train"]]
    assert len(trained) == 6
    assert sum(r["label"] for r in trained) == 3  # stratified
    # a second run answers everything from the cache: no model call at all
    made.clear()
    target = FakeBackend(spec="fake-target")
    second = detect(
        Session(target, cache=tmp_path / "cache", loader=loader), examples, ["veilprobe"], params=params, n_bootstrap=50
    )
    assert sum(target.calls.values()) == 0
    assert all(sum(b.calls.values()) == 0 for b in made)
    assert second.scores["veilprobe"].tolist() == frame["veilprobe"].tolist()


@pytest.mark.model
def test_veilprobe_end_to_end_on_smollm2_with_gemma_proxy(smollm2, gemma):
    from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest

    class WithTokenStrings:  # token strings for alignment until the HF backend gives them
        spec = gemma.spec

        def __getattr__(self, name):  # canonical, capabilities, fingerprint ...
            return getattr(gemma, name)

        def check(self, requests):
            gemma.check(requests)

        def answer(self, requests, progress=None):
            out = gemma.answer(requests, progress)
            if requests and isinstance(requests[0], TokenLogprobsRequest):
                conv = gemma.tokenizer.convert_ids_to_tokens
                out = [r if r.tokens else TokenLogprobs(**{**r.to_json(), "tokens": conv(r.token_ids)}) for r in out]
            return out

    texts = [
        "It was the best of times, it was the worst of times.",
        "Call me Ishmael. Some years ago I went to sea.",
        "The ferry to Quellbrook left at dawn with pickled turnips.",
        "Our committee approved the drainage plan for the allotments.",
    ]
    labels = [1, 1, 0, 0]
    method = VeilProbe(reference="gemma-3-270m", n_samples=2, suffix_tokens=8, attribution_tokens=4, n_train=4, **TINY)
    backends = {None: smollm2, "gemma-3-270m": WithTokenStrings()}
    feats = drive({i: method.run(Example(str(i), t)) for i, t in enumerate(texts)}, backend_for=backends.__getitem__)
    for i, text in enumerate(texts):
        f = feats[i]
        assert isinstance(f, VeilFeatures), f
        assert len(f.suffixes) == 2 and len(f.perturbed_suffixes) == 2
        assert len(f.key_words) == 1 and f.key_words[0] in text
        assert f.perturbed_text != text and f.substitutes[0].lower() != f.key_words[0].lower()
        assert len(f.importance) == len(text.split())
    scores = method.fit([feats[i] for i in range(4)], labels).predict([feats[i] for i in range(4)])
    assert all(0.0 <= s.value <= 1.0 for s in scores)
