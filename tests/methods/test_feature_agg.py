"""feature_agg: feature vector layout by hand, training/prediction, dataset test."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from copyprobe.backends.base import TokenLogprobs
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError
from copyprobe.evaluation.stats import dataset_test
from copyprobe.methods.feature_agg import feature_names, text_features
from copyprobe.registry import convert_param, make_method, method_class
from copyprobe.drive import Failure, drive
from model_helpers import FAMOUS_AND_NONSENSE, model_fixture

# ten scored tokens with losses 1, 2, ..., 10 (in scrambled order)
LOSSES = [3, 1, 4, 10, 5, 9, 2, 6, 8, 7]
RESPONSE = TokenLogprobs(token_ids=list(range(11)), logprobs=[-float(v) for v in LOSSES])
TEXT = "a text whose zlib size matters"




def test_feature_names_layout():
    names = feature_names()
    assert names == [
        "loss",
        "k_min_loss_0.05", "k_min_loss_0.1", "k_min_loss_0.2", "k_min_loss_0.3",
        "k_min_loss_0.4", "k_min_loss_0.5", "k_min_loss_0.6",
        "k_max_loss_0.05", "k_max_loss_0.1", "k_max_loss_0.2", "k_max_loss_0.3",
        "k_max_loss_0.4", "k_max_loss_0.5", "k_max_loss_0.6",
        "zlib_ratio",
    ]
    assert feature_names(reference=True)[-1] == "ref_loss_ratio" and len(feature_names(reference=True)) == 17


def test_feature_values_by_hand():
    zlib_len = len(zlib.compress(TEXT.encode()))
    # k -> count max(1, floor(10k)): 0.05->1, 0.1->1, 0.2->2, 0.3->3, 0.4->4, 0.5->5, 0.6->6
    expected = (
        [5.5]  # mean loss
        + [1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]  # means of the lowest 1,1,2,3,4,5,6 losses
        + [10.0, 10.0, 9.5, 9.0, 8.5, 8.0, 7.5]  # means of the highest
        + [5.5 / zlib_len]
    )
    assert text_features(TEXT, RESPONSE) == pytest.approx(expected)
    reference = TokenLogprobs(token_ids=list(range(11)), logprobs=[-2.75] * 10)
    with_ref = text_features(TEXT, RESPONSE, reference=reference)
    assert with_ref[:-1] == pytest.approx(expected) and with_ref[-1] == pytest.approx(2.0)


def test_custom_ks_from_the_command_line():
    cls = method_class("feature_agg")
    method = make_method("feature_agg", ks=convert_param(cls, "ks", "0.5, 0.25"))
    assert method.feature_names() == ["loss", "k_min_loss_0.5", "k_min_loss_0.25",
                                      "k_max_loss_0.5", "k_max_loss_0.25", "zlib_ratio"]
    # 0.5 -> 5 lowest (mean 3), 0.25 -> 2 lowest (1.5)
    assert text_features(TEXT, RESPONSE, method.ks)[1:5] == pytest.approx([3.0, 1.5, 8.0, 9.5])


def run_all(method, texts, backend, backends=None):
    route = backends or {}
    runs = {t: method.run(Example(id=t, text=t)) for t in texts}
    return drive(runs, backend_for=lambda spec: route.get(spec, backend))


def test_driven_features_and_reference_model():
    target, ref = FakeBackend(spec="t"), FakeBackend(spec="r")
    method = make_method("feature_agg", reference="hf:ref")
    assert method.models() == {"hf:ref"}
    text = "one two three four five six"
    out = run_all(method, [text, "single"], target, {"hf:ref": ref})
    assert isinstance(out["single"], Failure)
    assert ref.calls["token_logprobs"] == 2  # both texts asked the reference once
    features = out[text]
    assert len(features) == 17 and all(isinstance(v, float) for v in features)
    from copyprobe.backends.base import TokenLogprobsRequest

    (t_resp,) = target.answer([TokenLogprobsRequest(text, stats=False)])
    (r_resp,) = ref.answer([TokenLogprobsRequest(text, stats=False)])
    assert features == pytest.approx(text_features(text, t_resp, reference=r_resp))


def test_fit_predict_learns_a_separable_rule():
    rng = np.random.default_rng(0)
    method = make_method("feature_agg", ks=(0.5,))
    # members: low loss; non-members: high loss; the other features are noise
    def rows(center, n):
        X = rng.normal(0, 1, size=(n, 4))
        X[:, 0] = center + rng.normal(0, 0.3, size=n)
        return X.tolist()
    X = rows(1.0, 20) + rows(3.0, 20)
    y = [1] * 20 + [0] * 20
    method.fit(X, y)
    probs = method.predict(rows(1.0, 10) + rows(3.0, 10))
    assert all(0 <= p <= 1 for p in probs)
    assert min(probs[:10]) > 0.5 > max(probs[10:])
    assert method.clone().get_params() == method.get_params()
    assert not hasattr(method.clone(), "model_")


def test_members_ranked_first_after_training_on_fake_backend():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(400)]
    # members and non-members use different words, so only members' words are boosted
    texts = [" ".join(rng.choice(words[:200] if i < 20 else words[200:], size=12)) for i in range(40)]
    members = texts[:20]
    backend = FakeBackend(member_texts=members, boost=2.0)
    method = make_method("feature_agg", n_train=16)
    out = run_all(method, texts, backend)
    train = list(range(8)) + list(range(20, 28))
    test = [i for i in range(40) if i not in train]
    method.fit([out[texts[i]] for i in train], [1 if i < 20 else 0 for i in train])
    scores = method.predict([out[texts[i]] for i in test])
    auc = roc_auc_score([1 if i < 20 else 0 for i in test], scores)
    assert auc > 0.9


def test_training_errors():
    method = make_method("feature_agg", ks=(0.5,))
    with pytest.raises(ConfigError, match="before fit"):
        method.predict([[0.0] * 4])
    with pytest.raises(DataError, match="members and non-members"):
        method.fit([[0.0] * 4, [1.0] * 4], [1, 1])
    with pytest.raises(ConfigError, match="rows of 4 values"):
        method.fit([[0.0] * 3, [1.0] * 3], [1, 0])


@pytest.mark.parametrize("params", [{"n_train": 1}, {"n_train": 2.5}, {"ks": ()}, {"ks": (0.0,)},
                                    {"ks": ("x",)}, {"C": 0}, {"reference": ""}])
def test_bad_parameters(params):
    with pytest.raises(ConfigError):
        make_method("feature_agg", **params)


def test_dataset_test_welch_and_student_by_hand():
    suspect, clean = [1, 2, 3, 4, 10], [0, 0.5]
    # means 4 and 0.25; sample variances 12.5 and 0.125
    # Welch: t = 3.75 / sqrt(12.5/5 + 0.125/2) = 3.75 / 1.6007811 = 2.3426064
    welch = dataset_test(suspect, clean)
    assert welch.statistic == pytest.approx(2.3426064) and welch.ok
    # Student: pooled variance (4*12.5 + 1*0.125)/5 = 10.025; t = 3.75/sqrt(7.0175) = 1.4155984
    student = dataset_test(suspect, clean, equal_var=True)
    assert student.statistic == pytest.approx(1.4155984)
    # one-sided: equal sizes, t = 1.0954451 with 6 degrees of freedom -> p = 0.15767
    result = dataset_test([1, 2, 3, 4], [0, 1, 2, 3])
    assert result.p_value == pytest.approx(0.1576668, abs=1e-6)
    assert dataset_test([0, 1, 2, 3], [1, 2, 3, 4]).p_value == pytest.approx(1 - 0.1576668, abs=1e-6)


def test_dataset_test_degenerate_inputs_give_reasons():
    few = dataset_test([1.0], [0.0, 1.0])
    assert not few.ok and math.isnan(few.p_value) and "at least 2" in few.reason
    flat = dataset_test([1.0, 1.0], [0.0, 0.0], equal_var=True)
    assert not flat.ok and "zero variance" in flat.reason
    assert dataset_test([1, 2, float("nan"), 3], [0, 1]).n_suspect == 3


@pytest.mark.model
def test_end_to_end_on_smollm2(request):
    smollm2 = model_fixture(request)
    texts = list(FAMOUS_AND_NONSENSE)
    method = make_method("feature_agg", n_train=4)
    out = run_all(method, texts, smollm2)
    X = [out[t] for t in texts]
    assert all(len(row) == 16 and all(math.isfinite(v) for v in row) for row in X)
    method.fit(X[:2] + X[3:5], [1, 1, 0, 0])
    probs = method.predict([X[2], X[5]])
    assert all(0 < p < 1 for p in probs)
