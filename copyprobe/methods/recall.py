"""ReCaLL and Con-ReCall: how much a prefix of known members / non-members changes a
text's log-likelihood.

**ReCaLL** (Xie et al. 2024, "ReCaLL: Membership Inference via Relative Conditional
Log-Likelihoods", EMNLP 2024, §3)::

    recall(x) = LL(x | P) / LL(x)

with LL the mean token log-likelihood and P a prefix made of non-member texts. The
paper's finding (§3, Fig. 1): conditioning a *member* on non-member context lowers its
log-likelihood more than it lowers a non-member's. LL < 0, so a larger drop gives a
larger ratio: higher = member, the paper's score used as is.

**Con-ReCall** (Wang et al. 2024, "Con-ReCall: Detecting Pre-training Data in LLMs via
Contrastive Decoding", COLING 2025, §3.2, Eq. 3)::

    con_recall(x) = [LL(x | P_non) - gamma * LL(x | P_mem)] / LL(x)

with P_non a non-member prefix and P_mem a member prefix: a member prefix raises a
member's likelihood while a non-member prefix lowers it, and the contrast sharpens the
signal. Higher = member (the numerator is more negative for members, LL(x) < 0).
The paper tunes gamma on held-out data; the default here is 0.5.

**The prefixes.** ``prefix`` (and, for Con-ReCall, ``member_prefix``) names a UTF-8 text
file whose whole content is the prefix. Without it, the method draws ``n_prefix`` rows
labelled 0 (and, for Con-ReCall's member prefix, ``n_prefix`` rows labelled 1) from the
data with a generator seeded by the run's ``--seed``, joins their texts with blank lines,
and leaves those rows out of its metrics, as a learning method's training rows are
(:meth:`~copyprobe.methods.base.Method.hold_out`). The prefix always ends with a blank
line, so the scored text starts a new paragraph.

**Token alignment.** Both means are over the same tokens of x. LL(x) is the plain
request's mean, which cannot score x's first token where the tokenizer puts no special
token before it (SmolLM2's, GPT-2's, Qwen's); LL(x | P) is read after the prefix's
tokens (:class:`~copyprobe.backends.base.TokenLogprobsRequest` with ``context``), which
scores every token of x, and its first is then left out (:func:`conditional_loglik`).
The authors' code (and this method before 2026-12-02) kept it: one more token in the
numerator than in the denominator, the least predictable one, weighing 1/T, so the
ratio moved with the text's length and first word. The prefix is computed once per batch
of texts (HF: one KV cache; see docs/more-methods.md).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from typing import Any, ClassVar, Sequence

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError, TooFewLabelledRows
from copyprobe.methods.base import GREY_BOX, Method
from copyprobe.methods.likelihood import mean, mean_loglik, token_logprobs
from copyprobe.params import COUNT, Optional, Real, Text, param
from copyprobe.registry import register

SEPARATOR = "\n\n"


def join_prefix(texts: Sequence[str]) -> str:
    """The prefix made of ``texts``: joined by blank lines, ending with one."""
    return SEPARATOR.join(t.strip() for t in texts) + SEPARATOR


def read_prefix(path: str, owner: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{owner}: cannot read prefix file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{owner}: prefix file {path!r} is not UTF-8 text") from None
    if not text.strip():
        raise ConfigError(f"{owner}: prefix file {path!r} is empty")
    return text.strip() + SEPARATOR


def draw_rows(examples: Sequence[Example], label: int, count: int, seed: int, owner: str,
              parameters: Sequence[str] = ("prefix",)) -> list[int]:
    """``count`` rows labelled ``label``, drawn with a generator seeded by (seed, owner);
    at least one such row is left to evaluate. ``parameters`` are the prefix files not
    given, which would spare the draws."""
    rows = [i for i, e in enumerate(examples) if e.label == label]
    if len(rows) < count + 1:
        kind = "members (label 1)" if label == 1 else "non-members (label 0)"
        raise TooFewLabelledRows(
            f"{owner} draws {count} {kind} for its prefix and needs at least one more to evaluate; "
            f"the data has {len(rows)} (lower n_prefix or give a prefix file)", tuple(parameters))
    return sorted(random.Random(f"{seed}:{owner}:{label}").sample(rows, count))


def conditional_loglik(conditional: TokenLogprobs, plain: TokenLogprobs) -> float:
    """LL(x | P) over the tokens that LL(x) scores: the two means of the ratio are of the
    same tokens. A tokenizer without a leading special token leaves x's first token
    unscored alone but scored after P; kept, that one token (read right after the
    prefix's last token, the least predictable of x's) would move the ratio by its own
    weight, 1/T, whatever the membership. Where the two responses' tokens differ (a server
    that tokenizes P + x as one text), the whole conditional mean is kept."""
    values = token_logprobs(conditional)
    n = len(token_logprobs(plain))
    if len(values) > n and np.array_equal(conditional.array("token_ids")[-n:], plain.array("token_ids")[-n:]):
        values = values[-n:]
    return mean(values)


def conditional_ratio(conditional: TokenLogprobs, plain: TokenLogprobs) -> tuple[float, float]:
    """(LL(x | P), LL(x)) from the two responses, over the same tokens."""
    ll = mean_loglik(plain)
    if ll == 0:
        raise RowError("text has zero loss: ratio undefined")
    return conditional_loglik(conditional, plain), ll


class _PrefixMethod(Method):
    """Shared by ReCaLL and Con-ReCall: prefixes from files or from held-out rows."""

    access = GREY_BOX
    # (parameter naming the file, label of the rows drawn instead)
    _prefixes: ClassVar[tuple[tuple[str, int], ...]] = (("prefix", 0),)

    def hold_out(self, examples: Sequence[Example], seed: int) -> list[int]:
        self.validate()
        held: list[int] = []
        contexts: dict[str, str] = {}
        drawn = tuple(name for name, _ in self._prefixes if getattr(self, name) is None)
        for name, label in self._prefixes:
            path = getattr(self, name)
            if path is not None:
                contexts[name] = read_prefix(path, f"{self.name}.{name}")
            else:
                rows = draw_rows(examples, label, self.n_prefix, seed, self.name, drawn)
                contexts[name] = join_prefix([examples[i].text for i in rows])
                held += rows
        self._contexts = contexts
        return held

    def resolve(self, target_spec: str) -> "_PrefixMethod":
        resolved = super().resolve(target_spec)
        # the runner holds rows out before the model loads (so a bad prefix file costs no load)
        # and resolves once it is known: the prefixes read or drawn then are the ones scored with
        if hasattr(self, "_contexts"):
            resolved._contexts = self._contexts
        return resolved

    def _context(self, name: str) -> str:
        contexts: dict[str, Any] = getattr(self, "_contexts", {})
        if name not in contexts:
            path = getattr(self, name)
            if path is None:
                raise ConfigError(f"{self.name} has no {name}: set the parameter {self.name}.{name} to a FILE, or run it "
                                  "through detect on labelled data so it can draw one")
            contexts = {**contexts, name: read_prefix(path, f"{self.name}.{name}")}
            self._contexts = contexts
        return contexts[name]


@register
class ReCaLL(_PrefixMethod):
    name = "recall"
    summary = "LL(x | non-member prefix) / LL(x) (Xie et al. 2024, ReCaLL)"

    n_prefix: int = param(5, COUNT, "non-member rows (label 0) drawn for the prefix when no prefix file is given")
    prefix: str | None = param(None, Optional(Text(empty=False)),
                               "UTF-8 file whose text is the non-member prefix P (then no rows are held out)")

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [TokenLogprobsRequest(example.text),
                TokenLogprobsRequest(example.text, context=self._context("prefix"))]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        conditional, plain = conditional_ratio(responses[1], responses[0])
        return conditional / plain


@register
class ConReCaLL(_PrefixMethod):
    name = "con_recall"
    summary = "[LL(x | non-member prefix) - gamma LL(x | member prefix)] / LL(x) (Wang et al. 2024, Con-ReCall)"
    _prefixes = (("prefix", 0), ("member_prefix", 1))

    n_prefix: int = param(5, COUNT, "rows of each label drawn for each prefix when no prefix file is given")
    prefix: str | None = param(None, Optional(Text(empty=False)),
                               "UTF-8 file whose text is the non-member prefix P_non (else drawn from label-0 rows)")
    member_prefix: str | None = param(None, Optional(Text(empty=False)),
                                      "UTF-8 file whose text is the member prefix P_mem (else drawn from label-1 rows)")
    gamma: float = param(0.5, Real(0, 1), "weight of the member-prefix term, in [0, 1] (tuned in the paper)")

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        return [TokenLogprobsRequest(example.text),
                TokenLogprobsRequest(example.text, context=self._context("prefix")),
                TokenLogprobsRequest(example.text, context=self._context("member_prefix"))]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> float:
        non_member, plain = conditional_ratio(responses[1], responses[0])
        member = conditional_loglik(responses[2], responses[0])
        return (non_member - self.gamma * member) / plain
