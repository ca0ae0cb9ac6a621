"""PAC, Polarized Augment Calibration (Ye et al. 2024, "Data Contamination Calibration for
Black-box LLMs", Findings of ACL 2024, §3).

**Polarized distance** of a text from its T scored token log-probs l_1..l_T (§3.2)::

    PD(x) = mean of the max(1, floor(k_max * T)) highest l_t
          - mean of the max(1, floor(k_min * T)) lowest l_t

the gap between the far (confidently predicted) and local (least likely) regions.

**Augment calibration** (§3.3): the text is compared with ``n_augment`` augmented copies
made as the paper makes them, by EDA random swap (Wei & Zou 2019): copy j swaps two
randomly chosen words, ``max(1, floor(alpha * W))`` times for a text of W
whitespace-separated words, with a generator seeded by (``seed``, j, text)::

    pac(x) = mean_j PD(x~_j) - PD(x)

Swapping words disturbs a memorised text more than an unseen one, so a member's
augmented copies move further from it. Higher = member: the orientation of the authors'
code (yyy01/PAC ``attack.py``, which reports -(PD(x) - mean PD(x~)), as fast-mia notes);
the paper's full text was not at hand to check the sign against it, but ground truth
agrees: on the planted benchmark (benchmarks/results/planted.md) this orientation gives
AUC 0.675 after one epoch and 0.938 after three. PD is taken over
token log-probabilities, as in that code. Defaults: k_min = 0.3, k_max = 0.05,
alpha = 0.3, n_augment = 5 (the authors' settings). Every copy is one more
TokenLogprobsRequest, batched and cached with all the others.

Deviation from the authors' EDA (``src/eda.py``), which splits on single spaces and
rejoins with one: words are runs of non-whitespace swapped between the text's own
separators, so newlines stay in place and a text whose words are separated only by
newlines is augmented too (for words separated by single spaces, none at either end, the copies are the same). A text with
fewer than 2 words (e.g. CJK without spaces), or whose copies all equal it, fails for
this method only, where EDA returns it unchanged and the score is 0.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Sequence

import numpy as np

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import GREY_BOX, Method, Score
from copyprobe.methods.likelihood import token_logprobs
from copyprobe.params import FRACTION, PER_TEXT, SEED, param
from copyprobe.registry import register


def polarized_distance(values: np.ndarray, k_max: float, k_min: float) -> float:
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    far = ordered[::-1][:max(1, int(len(ordered) * k_max))]
    local = ordered[:max(1, int(len(ordered) * k_min))]
    return float(far.mean() - local.mean())


def random_swap(text: str, alpha: float, rng: random.Random) -> str:
    """EDA random swap: ``max(1, floor(alpha * W))`` swaps of two distinct random word
    positions. Words are the text's runs of non-whitespace (``str.split()``); the
    authors' EDA splits on single spaces, which gives the same words, swaps and output
    for words separated by single spaces with none at either end."""
    # Words are swapped between the original separators, which stay where they were:
    # joining with " " would flatten newlines and paragraph breaks, and splitting on " "
    # alone left a text without spaces (CJK, one word per line) with nothing to swap, so
    # every copy equalled the original and the score was rounding noise.
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if len(spans) < 2:
        raise RowError(f"text has {len(spans)} whitespace-separated word(s): fewer than 2 words to swap")
    words = [text[a:b] for a, b in spans]
    for _ in range(max(1, int(alpha * len(words)))):
        i, j = rng.sample(range(len(words)), 2)
        words[i], words[j] = words[j], words[i]
    parts, end = [], 0
    for (a, b), word in zip(spans, words):
        parts += [text[end:a], word]
        end = b
    return "".join(parts) + text[end:]


def augmentations(text: str, n: int, alpha: float, seed: int) -> list[str]:
    out = []
    for j in range(n):
        digest = hashlib.sha256(f"pac\x1f{seed}\x1f{j}\x1f{text}".encode()).hexdigest()
        out.append(random_swap(text, alpha, random.Random(int(digest[:16], 16))))
    if all(copy == text for copy in out):
        # nothing to calibrate against: the score would be 0 whatever the model
        raise RowError("every word-swapped copy equals the text (e.g. its words are all alike)")
    return out


@register
class PAC(Method):
    name = "pac"
    access = GREY_BOX
    summary = "Polarized distance calibrated against word-swapped copies (Ye et al. 2024, PAC)"

    k_min: float = param(0.3, FRACTION, "fraction of lowest token log-probs (the local region), in (0, 1]")
    k_max: float = param(0.05, FRACTION, "fraction of highest token log-probs (the far region), in (0, 1]")
    alpha: float = param(0.3, FRACTION, "swaps per augmented copy as a fraction of the text's words")
    n_augment: int = param(5, PER_TEXT, "augmented copies per text")
    seed: int = param(0, SEED, "seed of the word swaps")

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        copies = augmentations(example.text, self.n_augment, self.alpha, self.seed)
        return [TokenLogprobsRequest(example.text)] + [TokenLogprobsRequest(c) for c in copies]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> Score:
        own = polarized_distance(token_logprobs(responses[0]), self.k_max, self.k_min)
        augmented = [polarized_distance(token_logprobs(r), self.k_max, self.k_min) for r in responses[1:]]
        calibrated = float(np.mean(augmented))
        return Score(calibrated - own, {"pd": own, "pd_augmented": calibrated})
