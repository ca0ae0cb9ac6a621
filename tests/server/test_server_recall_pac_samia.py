"""Over HTTP against the real llama-cpp-python server (smollm2): token log-probs after a
context (what recall and con_recall ask for), and recall, con_recall, pac and samia through
detect; gradnorm, which needs gradients, is refused up front."""

from __future__ import annotations

import pytest

import copyprobe
from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.backends.openai_compat import OpenAIBackend
from copyprobe.data.example import Example
from copyprobe.errors import CapabilityError
from copyprobe.session import Session

pytestmark = pytest.mark.server

# short: llama-cpp-python's server sorts the whole vocabulary in Python for every token of a
# prompt whose log-probs are asked, a context's too (about 0.1 s a token on two cores)
TEXTS = ["In the beginning God created the heaven.",
         "Marta stacked the crates behind the bakery.",
         "The LORD is my shepherd; I shall not want.",
         "Seven reluctant spreadsheets negotiated quietly."]


@pytest.fixture
def backend(llama_server):
    return OpenAIBackend.from_spec(f"openai:smollm2@{llama_server}", concurrency=2, max_retries=2, timeout=120)


def test_context_scores_every_text_token_and_the_context_changes_them(backend):
    context = "Once upon a time there was a small village by the sea.\n\n"
    plain, after = backend.answer([TokenLogprobsRequest(TEXTS[0]), TokenLogprobsRequest(TEXTS[0], context=context)])
    assert "".join(after.tokens) == TEXTS[0], "exactly the text's tokens are kept"
    assert len(after.logprobs) == len(plain.logprobs) + 1  # the first token is scored too
    assert after.logprobs[1:] != plain.logprobs


def test_recall_pac_and_samia_score_through_detect_and_gradnorm_is_refused(backend):
    examples = [Example(id=str(i), text=t, label=int(i % 2 == 0)) for i, t in enumerate(TEXTS * 2)]
    session = Session(backend, cache=False)
    result = copyprobe.detect(session, examples, ["recall", "con_recall", "pac", "samia"],
                              params={"recall": {"n_prefix": 1}, "con_recall": {"n_prefix": 1},
                                      "pac": {"n_augment": 2}, "samia": {"n_samples": 2, "max_tokens": 24}},
                              n_bootstrap=0, blind_baseline=False)
    for name in ("recall", "con_recall", "pac", "samia"):
        assert result.scores[name].notna().sum() >= 4, (name, result.run["failures"][:2])
    with pytest.raises(CapabilityError, match="grad_norm"):
        copyprobe.detect(Session(backend, cache=False), examples, ["gradnorm"], n_bootstrap=0)
