"""The reference model as a witness: does it recognise the suspect text itself?

A reference-calibrated score (``reference``: the target's mean log-likelihood minus a
reference model's; ``topk_reference``: the same through top-k log-probs) cancels what
makes a text easy for any model, and so finds documents planted in the target that the
reference never saw. A text both models were trained on cancels too: on the King James
Bible, which Gemma-3-270M knows better than SmolLM2-135M does, the calibrated score ranked
6 of 10 books *below* every clean text (benchmarks/results/audit_real.md). The calibrated
score then measures which model knows the text better, not whether the target saw it.

So before a calibrated score is trusted, the reference model is asked the audit's own
question: its mean log-likelihood of the suspect document (the calibrated score's second
half, so it costs nothing more) against the clean documents', by the t test whatever the
audit's test (the rank test with fewer than 19 clean documents could never reach the level;
the choice of path does not bear on validity). When it recognises the suspect (p <= ``LEVEL``), the document is tested on the
target's own likelihood (the calibrated score's first half: ``loss`` or ``topk_loss``)
instead. The rule reads only the reference model's scores, never the target's, but that
does not make it free: the reference's scores follow the target's through what makes a
text easy for any model, so a text the reference ranks high the target often ranks high
too, and the two tests (each of size alpha alone) together claimed training on never-seen
texts up to twice as often as alpha in simulations (0.079 at alpha 0.05, 19 clean
documents). A suspect the witness was asked about therefore has each test at a share of
alpha, the shares adding up to alpha: its p-value is multiplied by the inverse of the share
of the test it takes (weighted Bonferroni over the two paths, whatever their dependence;
:data:`WITNESS_FACTORS`: 5 on the calibrated score, 1.25 on the target's own), and the
collection's too when the witness judged the group. Where the target's own score is no
valid test (``topk_loss``), that path never claims and the calibrated one keeps all of
alpha (:func:`path_factors`). A reference model whose training data
ends before the text was published (``--published``) cannot have seen it and is trusted
without asking; then nothing is multiplied.

Pure functions of scores rows (scores.jsonl's ``details`` of the calibrated method hold
both halves); ``copyprobe rescore`` reruns them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

# calibrated score -> the target's own score it is the first half of
CALIBRATED = {"reference": "loss", "topk_reference": "topk_loss"}
# p at or below which the reference model recognises a suspect. Chosen on the real-exposure,
# planted and null tables together (benchmarks/results/audit_real.md, "The witness level"):
# at 0.01-0.2 the default finds the same King James books (4 of 10 on SmolLM2 and on
# Gemma), but from 0.1 up a never-seen pastiche text is sent to loss and claimed (1 of 18);
# at 0.2 topk_reference loses one-epoch planted letters (8 -> 6 of 12); the null battery
# has 0 false claims at every level. Ten held-out chapters on four models (audit_real.md, "Held
# out"): 24 of 40 found at every level from 0.01 to 0.2.
LEVEL = 0.05

# A suspect whose test the witness chose has its two possible tests at shares of alpha that
# add up to alpha (weighted Bonferroni): the calibrated score at a fifth, the target's own
# score at four fifths. Real text is in the reference model's data too, so the witness sends
# it to the target's own score, and that is the path that finds it. The default on the
# real-exposure table: a fifth for the calibrated path 19 of 120 found, 0 false claims of
# 236; halves 18 and 2; four fifths 17 and 2 (audit_real.md, 2026-12-01). The planted
# letters (found through the calibrated path) lost 2 of 468 finds. Held out (ten other chapters,
# four models): a fifth and a half 24 of 40 found, four fifths 18, nine tenths 16 (Qwen 1.5B
# finds 7 of 10 at every share).
CALIBRATED_SHARE = 0.2
WITNESS_FACTORS = {"calibrated": 1 / CALIBRATED_SHARE, "own": 1 / (1 - CALIBRATED_SHARE)}  # 5 and 1.25
# where the target's own score is no valid test (it claimed training on never-seen text by
# itself: topk_loss on the null battery, 2 of 108 audits at 0.01; any claim on any model
# counts, evaluation/verdicts.raw_unfit), a suspect the witness sends there is blocked and
# never claimed: the own path gets no share, and the calibrated path keeps all of alpha
NO_OWN_PATH = {"calibrated": 1.0, "own": 1.0}


def path_factors(own_unfit: str | None) -> dict[str, float]:
    """What the witness multiplies a suspect's p by on each of its paths (the weighted
    Bonferroni shares' inverses): :data:`WITNESS_FACTORS`, or :data:`NO_OWN_PATH` when the
    target's own score is no valid test (``own_unfit``: why not)."""
    return dict(NO_OWN_PATH if own_unfit else WITNESS_FACTORS)


@dataclass(frozen=True)
class Witness:
    """The two halves of a calibrated score per passage, and what is known of the
    reference model: who it is, whether it could have seen the text (None: not known) and
    why."""

    method: str  # the calibrated score
    own: Mapping[str, float]  # passage id -> the reference model's own score
    target: Mapping[str, float]  # passage id -> the target's own score
    model: str | None = None
    could_have_seen: bool | None = None
    basis: str | None = None  # e.g. "its training data ends 2024-08 (...); the text was published 2025-06"

    @property
    def raw_method(self) -> str:
        return CALIBRATED[self.method]

    def doc_scores(self, chosen: Mapping[str, Sequence[tuple[str, float]]], half: str) -> dict[str, float]:
        """Per document, the mean of ``half`` ("own" or "target") over the passages the
        test reads; documents with a passage lacking it are left out."""
        values = self.own if half == "own" else self.target
        out = {}
        for doc, passages in chosen.items():
            got = [values.get(i) for i, _ in passages]
            if passages and all(v is not None and math.isfinite(v) for v in got):
                out[doc] = float(np.mean(got))
        return out


def from_rows(rows: Sequence[Mapping[str, Any]], method: str, context: Mapping[str, Any] | None = None
              ) -> Witness | None:
    """The witness of a calibrated ``method`` from scores rows (the ``target`` and
    ``reference`` halves in each row's details); None for other methods, and for rows
    that do not hold the halves (runs before the witness)."""
    if method not in CALIBRATED:
        return None
    own, target = {}, {}
    for row in rows:
        halves = (row.get("details") or {}).get(method) or {}
        if isinstance(halves, Mapping) and _finite(halves.get("target")) and _finite(halves.get("reference")):
            target[row["id"]] = float(halves["target"])
            own[row["id"]] = float(halves["reference"])
    if not own:
        return None
    context = context or {}
    return Witness(method, own, target, model=context.get("model"), could_have_seen=context.get("could_have_seen"),
                   basis=context.get("basis"))


def with_halves(rows: Sequence[Mapping[str, Any]], method: str) -> list[dict[str, Any]]:
    """Rows saved with the calibrated score and the target's own score as columns, but
    without the halves in their details (benchmark files): the halves filled in, the
    reference model's own score being target - calibrated."""
    raw = CALIBRATED[method]
    out = []
    for row in rows:
        row = dict(row)
        value, own_target = row.get(method), row.get(raw)
        details = dict(row.get("details") or {})
        if method not in details and _finite(value) and _finite(own_target):
            details[method] = {"target": float(own_target), "reference": float(own_target) - float(value)}
            row["details"] = details
        out.append(row)
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Judgement:
    """What the witness said of one suspect document (or of the suspects as a group)."""

    p: float | None  # the reference model's own document test (None: could not be run)
    rank: int | None
    of: int | None
    recognises: bool
    needed: bool  # False: the reference cannot have seen the text, so it is trusted unasked
    switched: bool  # tested on the target's own score instead of the calibrated one

    def as_json(self, witness: Witness) -> dict[str, Any]:
        return {"model": witness.model, "p": self.p, "rank": self.rank, "of": self.of,
                "recognises": self.recognises, "could_have_seen": witness.could_have_seen,
                "tested_on": witness.raw_method if self.switched else witness.method}


def judge(witness: Witness, own: Mapping[str, float], suspect: str, clean: Sequence[str], p_value) -> Judgement:
    """The witness's judgement of one suspect document: ``p_value(x, clean_scores)`` is its
    document test (the t test, whatever the audit's: see verdicts.audit_verdicts)."""
    needed = witness.could_have_seen is not False
    clean_own = [own[c] for c in clean if c in own]
    if suspect not in own or len(clean_own) < len(clean) or not clean_own:
        # a half missing: the calibrated score is used, as before the witness, and the verdict says so
        return Judgement(None, None, None, False, needed, False)
    x = own[suspect]
    p = float(p_value(x, clean_own))
    recognises = p <= LEVEL
    rank = 1 + sum(c >= x for c in clean_own)
    return Judgement(p, rank, len(clean_own) + 1, recognises, needed, recognises and needed)


def judge_group(witness: Witness, own: Mapping[str, float], group: Sequence[str], clean: Sequence[str]) -> Judgement:
    """The witness's judgement of suspects as a group (one-sided Mann-Whitney of the
    reference model's own document scores, as the collection test)."""
    from copyprobe.evaluation.stats import exact_mann_whitney_p

    needed = witness.could_have_seen is not False
    s = [own[d] for d in group if d in own]
    c = [own[d] for d in clean if d in own]
    if len(s) < len(group) or len(c) < len(clean) or not s or not c:
        return Judgement(None, None, None, False, needed, False)
    p = exact_mann_whitney_p(s, c)
    return Judgement(p, None, None, p <= LEVEL, needed, p <= LEVEL and needed)


def clause(witness: Witness, name: str, judgement: Judgement, fmt_p) -> str:
    """What a verdict says of the witness, before its standing; '' when there is nothing to say."""
    who = f"the reference model ({witness.model})" if witness.model else "the reference model"
    if not judgement.needed:
        return f"{who} cannot have seen {name} ({witness.basis}), so the calibrated score is trusted: "
    if judgement.p is None:
        return ""
    if judgement.switched:
        return (f"{who} itself recognises {name} (by its own likelihood {_ordinal(judgement.rank)} of "
                f"{judgement.of}, p = {fmt_p(judgement.p)} <= {LEVEL:g}), so a calibrated score cannot show the "
                f"target's exposure and {name} is tested on the target's own likelihood ({witness.raw_method}): ")
    return ""


def _ordinal(n: int | None) -> str:
    from copyprobe.evaluation.vocabulary import ordinal

    return ordinal(n) if n is not None else "?"


def summary(witness: Witness | None, method: str, judgements: Mapping[str, Judgement],
            group: Judgement | None, name, multiplied: Sequence[str] = (),
            factors: Mapping[str, float] = WITNESS_FACTORS) -> dict[str, Any] | None:
    """verdicts.json's ``witness`` section; None for a method that is not calibrated.
    ``multiplied``: the suspects whose p the witness's factor multiplied (a suspect asked but
    left without a p, or blocked, has none)."""
    if method not in CALIBRATED:
        return None
    if witness is None:
        return {"run": False, "level": LEVEL,
                "why": "the run's scores do not hold the two halves of the calibrated score (a run from before "
                       "the witness): whether the reference model recognises the suspects is not known"}
    asked = {d: j for d, j in judgements.items() if j.p is not None}
    return {
        "run": bool(asked) or witness.could_have_seen is False,
        "model": witness.model, "level": LEVEL, "calibrated": witness.method, "raw": witness.raw_method,
        "could_have_seen": witness.could_have_seen, "basis": witness.basis,
        "recognised": sorted(name(d) for d, j in asked.items() if j.recognises),
        "switched": sorted(name(d) for d, j in judgements.items() if j.switched),
        "group": None if group is None else {"p": group.p, "recognises": group.recognises, "switched": group.switched},
        "p_multiplied": sorted(name(d) for d in multiplied),
        "rule": (f"a suspect the reference model recognises by its own likelihood against the clean documents "
                 f"(p <= {LEVEL:g}, by the t test) is tested on the target's own likelihood "
                 f"({witness.raw_method}) instead of the calibrated score ({witness.method}); unless the reference "
                 f"cannot have seen the text (its training data ends before the text was published); "
                 + (f"the p-value of a suspect the reference was asked about is multiplied (by "
                    f"{factors['calibrated']:g} on the calibrated score, {factors['own']:g} on the target's own: each "
                    f"test at its share of alpha), so that its two possible tests together claim training on a "
                    f"never-seen text with chance at most alpha" if factors["calibrated"] > 1 else
                    f"{witness.raw_method} alone is no valid test, so a suspect sent to it gets no verdict and the "
                    f"calibrated score keeps all of alpha: no p-value is multiplied")),
    }
