"""Document verdicts of an audit: was the model trained on this suspect document?

The document, not the passage, is what was or was not trained on, so the document is the
unit of evidence. Passages of one document share author, topic and style; testing them as
independent draws (as a t-test over pooled passages does) gives p-values far too small
whenever the suspect and clean documents differ in anything.

The procedure, a pure function of the scores and texts (``copyprobe rescore`` reruns it):

1. Every document, suspect or clean, is represented by the same number M of passages
   (evenly spaced through it; M = the fewest scored passages of any document), and its
   score is their mean, so no document's score is less noisy than another's.
2. Each suspect document's score is compared with the k clean documents' scores:

   - ``rank``: p = (1 + #clean documents scoring at least as high) / (k + 1).
     Exact whenever the suspect document is exchangeable with the clean ones under
     "never trained on"; no assumption about the scores' distribution. The smallest
     p it can give is 1 / (k + 1), so a claim at alpha needs k >= 1/alpha - 1 clean
     documents; with fewer the verdict is "cannot tell" and says how many to give.
   - ``t`` (the audit's default): the one-sided prediction t-test, (x - mean) /
     (sd * sqrt(1 + 1/k)) with k - 1 degrees of freedom. Also assumes the clean documents'
     scores are normal; reaches small p-values with few clean documents only by that
     assumption, which benchmarks/bench_audit_validity.py puts to the test. Scores that
     take few possible values (:func:`few_values`, asked of the clean documents and the
     suspect together) are not normal: the suspect's p-value comes from the rank test.

   With several suspect documents, the p-values are Holm-adjusted, so the chance of any
   false "evidence" among them stays at most alpha. The smallest adjusted p-value is then
   n times the smallest p-value: with the rank test, n suspects need k >= n/alpha - 1 clean
   documents, and with fewer every document is "cannot tell".
3. The shift guard (:mod:`copyprobe.evaluation.guard`) asks, with no model, whether the
   suspect stands out from the clean documents in style or passage length. When it does
   as much as or more than in the model's score (or, with the rank guard, is farther than
   every clean document / 90% of them; the t guard asks by how much it is farther), no
   "evidence" is given: the difference can be explained by style or
   topic. The output says both standings, so the reader sees by how much the model's
   evidence exceeds what the text alone explains.
4. The verdict, in the vocabulary of :mod:`copyprobe.evaluation.vocabulary`, with its
   reason and one plain sentence.

With two or more suspect documents a collection-level test is added: are the suspect
documents as a group above the clean ones (exact one-sided Mann-Whitney over document
scores, ties counted as halves in the exact permutation distribution, with the same guard
on the group)? It answers another question ("some of them", not "this one") at its own
alpha: each claim's chance of being false is at most alpha, but not both together (a
null simulation with 3 suspects and 19 clean documents, t test, alpha 0.05: any document
0.038, the group 0.037, either 0.066).

With a reference-calibrated score the reference model is asked as a witness
(:mod:`copyprobe.evaluation.witness`); a suspect it was asked about has its p-value
multiplied by the inverse of its test's share of alpha (:data:`WITNESS_FACTORS`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from copyprobe.evaluation.stats import exact_mann_whitney_p, prediction_t_p
from copyprobe.evaluation.guard import FEATURES, GUARD_LEVEL, LENGTH_MATERIAL, Standing, collection_standing, guard
from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE, TESTS, ordinal as _ordinal
from copyprobe.evaluation.witness import Witness, clause as witness_clause, judge, judge_group, path_factors
from copyprobe.evaluation.witness import summary as witness_summary

FORMAT = 2  # verdicts.json layout; 1 (no "format" key) = passage-pooled Welch/Mann-Whitney
NORMALITY_LEVEL = 0.05  # Shapiro-Wilk on the clean documents' scores, below which the t test is doubted
MIN_CLEAN_T = 3  # a standard deviation with at least 2 degrees of freedom

ASSUMPTIONS = {
    "rank": ("had the model never seen the suspect document, its score would be exchangeable with the clean "
             "documents' scores (same kind of text, chosen without regard to the scores); no distributional "
             "assumption"),
    "t": ("had the model never seen the suspect document, its score and the clean documents' scores would be "
          "independent draws from one normal distribution (same kind of text, chosen without regard to the scores)"),
}
def rule(guard_test: str = "rank") -> str:
    """How a verdict is reached, in one sentence, for the guard's test (:func:`_guard_trips`)."""
    apart = (f"and not farther from the clean documents than {100 * (1 - GUARD_LEVEL):.0f}% of them, or than all of "
             f"them" if guard_test == "rank" else
             f"and not so far beyond the clean documents' own distances that a t test puts it at p <= {GUARD_LEVEL:g}; "
             f"a passage length within {100 * (math.exp(LENGTH_MATERIAL) - 1):.0f}% of theirs does not count")
    return ("evidence = the document's p-value (Holm-adjusted over suspect documents) <= alpha, and the model-free "
            f"guard finds it no more unusual in style or passage length than in the model's score ({apart}); "
            "cannot tell = no valid test (too few clean documents, a style/length difference the guard explains, "
            "no scored passage); no evidence = otherwise")


def min_p(test: str, k: int) -> float:
    """The smallest p-value the test can give with k clean documents (0: no lower bound)."""
    if test == "rank":
        return 1.0 / (k + 1)
    return 0.0


def clean_needed(test: str, alpha: float, n_suspects: int = 1) -> int:
    """The fewest clean documents with which the test of one document can reach alpha when
    ``n_suspects`` are tested together: Holm's smallest adjusted p-value is n times the
    smallest p-value, n/(k + 1) for the rank test."""
    if test == "rank":
        return max(1, math.ceil(max(1, n_suspects) / alpha - 1 - 1e-9))
    return MIN_CLEAN_T


def smallest_adjusted_p(test: str, k: int, n_suspects: int, factor: float = 1.0) -> float:
    """The smallest p-value a document can get with k clean documents, Holm-adjusted over
    ``n_suspects`` tested together (each p times ``factor``, the witness's): n times the
    smallest p, whatever the other suspects score."""
    return min(1.0, max(1, n_suspects) * factor * min_p(test, k))


def normality(clean: Sequence[float], alpha: float, n_suspects: int = 1,
              what: str = "the clean documents' scores") -> dict[str, Any] | None:
    """Shapiro-Wilk on the clean documents' scores, which the t test takes for normal: its
    p-value, and a note when it is below :data:`NORMALITY_LEVEL`. A skewed or heavy-tailed
    null makes the t test's p-values too small (a review's simulation: lognormal scores,
    19 clean documents, 5.3% below 0.01); the note says so and what the rank test needs.
    With few clean documents the check has little power: no note is no proof of normality.
    ``what`` names the scores in the note (those a suspect was tested on)."""
    from scipy import stats

    values = [float(v) for v in clean if v is not None and math.isfinite(v)]
    if len(values) < 3 or max(values) == min(values):
        return None
    with np.errstate(all="ignore"):  # an overflow is answered by the NaN checked below
        p = float(stats.shapiro(values).pvalue)
    if not math.isfinite(p):  # scores so far apart that the statistic overflows: nothing to say
        return None
    out: dict[str, Any] = {"test": "Shapiro-Wilk", "p": p}
    if p < NORMALITY_LEVEL:
        out["note"] = (f"{what} do not look normal (Shapiro-Wilk p = {_fmt_p(p)}), which the t "
                       f"test assumes: its p-values may then be too small; the rank test assumes nothing of their "
                       f"shape and needs at least {clean_needed('rank', alpha, n_suspects)} clean documents")
    return out


def _own_normality(on_own: Sequence[str], clean: Sequence[str], target_own: dict[str, float], witness, alpha: float,
                   n_suspects: int) -> dict[str, Any] | None:
    """The normality check of the scores the suspects ``on_own`` would be t-tested on: the
    target's own (the reference model knowing them), not the calibrated ones. The witness
    sends there the texts every model finds easy, the right tail a skewed null puts too
    little weight on, so there the check binds: below :data:`NORMALITY_LEVEL` they get no
    p-value (benchmarks/results/t_skew.md)."""
    if not on_own:
        return None
    names = [_name(s) for s in on_own]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    what = (f"the clean documents' {witness.raw_method} scores, which {shown} {'was' if len(names) == 1 else 'were'} "
            f"tested on (the reference model knows {'it' if len(names) == 1 else 'them'}),")
    shape = normality([target_own[c] for c in clean], alpha, n_suspects, what)
    if shape is None:
        return None
    if "note" in shape:
        one = len(names) == 1
        shape["note"] = (f"{what} do not look normal (Shapiro-Wilk p = {_fmt_p(shape['p'])}), which the t test "
                         f"assumes, so {'it gets' if one else 'they get'} `cannot tell` rather than a p-value that "
                         f"may be too small; the rank test assumes nothing of their shape and needs at least "
                         f"{clean_needed('rank', alpha / path_factors(None)['own'], n_suspects)} clean documents")
    return {**shape, "method": witness.raw_method, "documents": names}


def rank_p(x: float, clean: Sequence[float]) -> float:
    return (1 + sum(c >= x for c in clean)) / (len(clean) + 1)


def t_p(x: float, clean: Sequence[float]) -> float:
    """The prediction t test's p; the rank test's when :func:`few_values` says the scores
    are not continuous. It asks of the pool (the clean scores and ``x``), not of the clean
    scores alone: a choice every ordering of the documents makes alike keeps the rank test
    exact given the choice (asked of the clean scores, the choice depended on which
    document was the suspect, and the rank p given it could exceed alpha: 0.0109 at 0.01)."""
    return rank_p(x, clean) if few_values([*clean, x]) else prediction_t_p(x, clean)


def test_p(x: float, clean: Sequence[float], test: str = "t") -> float:
    """The document test's p: the rank test's, or the t test's (the rank test's for scores
    with :func:`few_values`)."""
    return rank_p(x, clean) if test == "rank" else t_p(x, clean)


def tied(clean: Sequence[float]) -> int:
    """How many clean documents share their score with another."""
    counts = Counter(float(c) for c in clean)
    return sum(n for n in counts.values() if n > 1)


def few_values(clean: Sequence[float]) -> bool:
    """Do the scores take few possible values: at most half as many distinct values as
    there are scores? Normal scores never tie; a score with few possible values
    does (DE-COP's share of right answers: 0.25 on every passage of a model that answers by
    position, 0 or 0.5 on a few), and its clean documents' sd then says nothing of how far a
    new document can fall: on the null battery the t test claimed a never-seen article at
    DE-COP 0.5 against clean documents at 0.25 and 0. The exact rank test is used instead.
    One coincidental tie among continuous-looking scores (two of 18 prefix-probing scores at
    0.1875 on the real-exposure rows) is not such a score: it keeps the t test."""
    distinct = len({float(c) for c in clean})
    return len(clean) >= 2 and distinct <= len(clean) / 2

def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN)."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    order = sorted(idx, key=lambda i: p_values[i])
    m = len(order)
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def evenly_spaced(n: int, m: int) -> list[int]:
    """m distinct indices spread evenly over range(n) (first and last included)."""
    if m >= n:
        return list(range(n))
    if m == 1:
        return [(n - 1) // 2]
    return [int(round(i * (n - 1) / (m - 1))) for i in range(m)]


def passages_to_read(counts: Mapping[str, int], cap: int | None) -> dict[str, list[int]]:
    """Which passages of each document an audit's test reads: M evenly spaced ones, M = the
    fewest passages of any document, at most ``cap`` (None: no cap). Every document is then
    judged on equally many passages (equally noisy scores), and an audit scores only these:
    a long book beside short documents costs what the test uses."""
    if not counts:
        return {}
    m = min(counts.values())
    if cap is not None:
        m = min(m, cap)
    return {doc: evenly_spaced(n, m) for doc, n in counts.items()}


def _name(doc: str) -> str:
    return doc.split(":", 1)[1] if doc.startswith(("suspect:", "clean:")) else doc


def _fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3g}"


def _guard_trips(standing: Standing | None, p_model: float) -> bool:
    """Does the text alone set the document apart as much as the model's score does? A rank
    standing also trips when the document is farther than every clean one (its smallest
    p, 1/(k+1), can exceed the guard level with few clean documents); a t standing says by
    how much it is farther, so only its p counts."""
    if standing is None or math.isnan(standing.p_value):
        return True
    if not standing.material:
        return False
    floor = 1.0 / (len(standing.clean_values) + 1) if standing.test == "rank" else 0.0
    return standing.p_value <= max(GUARD_LEVEL, floor, p_model)


def _z(x: float | None, clean: Sequence[float]) -> float | None:
    """How many clean standard deviations ``x`` is above the clean documents' mean."""
    if x is None or len(clean) < 2:
        return None
    sd = float(np.std(clean, ddof=1))
    return (x - float(np.mean(clean))) / sd if sd > 0 else None


def _num(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def verdicts(
    scores: Mapping[str, float | None],
    docs: Mapping[str, str],
    labels: Mapping[str, int],
    alpha: float,
    texts: Mapping[str, str],
    *,
    test: str = "rank",
    method: str = "score",
    order: Sequence[str] | None = None,
    guard_test: str = "rank",
    method_params: Mapping[str, Any] | None = None,
    witness: Witness | None = None,
    context: Mapping[str, Any] | None = None,
    passage_words: int | None = None,
) -> dict[str, Any]:
    """Verdicts per suspect document (label 1) against the clean documents (label 0).

    ``scores``/``docs``/``labels``/``texts`` map passage ids to the score (None = failed),
    the document, the side and the text; ``order`` is the passages' order in their
    documents (default: the order of ``scores``). Document ids ``role:name`` are
    reported as ``name``. ``guard_test``: how the guard's standings get their p-values
    (``rank`` or ``t``, see :func:`copyprobe.evaluation.guard.rank_standing`).
    ``method_params``: the method's parameters that differ from its defaults (what a ``no
    evidence`` reason says was benchmarked is looked up with them). ``witness``: the two
    halves of a reference-calibrated score (:mod:`copyprobe.evaluation.witness`): a suspect
    the reference model itself recognises is tested on the target's own score.
    ``context``: what the audit knows of the text and the target (``published``, ``target``:
    its model, whether it could have seen the text, why), said once in ``shared``.
    ``passage_words``: the most words of a passage, where copyprobe cut the texts (None: given
    as passages): an evidence reason quotes the null battery at that length."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {', '.join(TESTS)}")
    ids = list(order) if order is not None else list(scores)
    values: dict[str, list[tuple[str, float]]] = {}
    failed: dict[str, int] = {}
    side: dict[str, int] = {}
    for i in ids:
        if i not in scores:
            continue
        doc = docs[i]
        side.setdefault(doc, labels[i])
        v = scores[i]
        if v is None or not math.isfinite(v):
            failed[doc] = failed.get(doc, 0) + 1
            values.setdefault(doc, [])
            continue
        values.setdefault(doc, []).append((i, float(v)))
    suspects = sorted(d for d in values if side[d] == 1)
    clean_all = sorted(d for d in values if side[d] == 0)
    clean = [d for d in clean_all if values[d]]
    scored = [d for d in suspects + clean if values[d]]
    m_passages = min((len(values[d]) for d in scored), default=0)
    chosen = {d: [values[d][j] for j in evenly_spaced(len(values[d]), m_passages)] for d in scored}
    doc_score = {d: float(np.mean([v for _, v in chosen[d]])) for d in scored}
    doc_passages = {d: [texts.get(i, "") for i, _ in chosen[d]] for d in scored}
    clean_scores = [doc_score[d] for d in clean]
    k = len(clean)

    # the battery's counts are for the test asked (t, with tied clean scores sent to rank)
    validity = _validity(method, method_params, test, alpha, guard_test, passage_words=passage_words)

    tested = [s for s in suspects if values[s]]
    # the witness: per suspect, the score it is tested on (the target's own when the
    # reference model recognises it) and that score's clean documents
    own = witness.doc_scores(chosen, "own") if witness else {}
    target_own = witness.doc_scores(chosen, "target") if witness else {}
    # the witness asks by the t test whatever the audit's test: the rank test's smallest p with
    # fewer than 19 clean documents is above its level, so it could never recognise a text, and
    # which path a suspect takes does not bear on validity (each path is tested at its share)
    judgements = {s: judge(witness, own, s, clean, t_p) for s in tested} if witness else {}
    switched = {s for s, j in judgements.items()
                if j.switched and s in target_own and all(c in target_own for c in clean)}
    # a target's own score that claims training on never-seen text by itself (topk_loss on the
    # null battery) is no test: a suspect the reference knows then gets no verdict from it
    own_unfit = raw_unfit(witness.raw_method) if judgements else None
    unfit = own_unfit if switched else None
    blocked = switched if unfit else set()
    factors = path_factors(own_unfit)
    # the witness picks each suspect's test (the target's own score or the calibrated one) from
    # the reference model's scores, which follow the target's through what makes a text easy
    # for any model: each path alone has size alpha, the two together up to 2 alpha. So a
    # suspect the witness was asked about gets each path at its share of alpha (its p times
    # WITNESS_FACTORS of the path it takes), and a false claim by either path has chance at
    # most alpha (weighted Bonferroni, any dependence); with no valid own path, the calibrated
    # path keeps all of alpha (path_factors)
    split = {s: factors["own" if s in switched else "calibrated"] if j.needed and j.p is not None else 1
             for s, j in judgements.items()}
    score_of = {s: (target_own if s in switched else doc_score) for s in tested}
    test_of = {s: ("rank" if test == "rank" or few_values([score_of[s][c] for c in clean] + [score_of[s][s]])
                   else "t") for s in tested}
    # what the p-values come from, for the report's test section: the rank test when every
    # tested suspect got it (each is decided from its own pool, so they can differ: a row's
    # p_from says its own); with none tested, what the clean scores alone would decide
    to_rank = [s for s in tested if test_of[s] != test]
    p_test = ("rank" if to_rank and len(to_rank) == len(tested) else test) if tested else (
        "rank" if test == "t" and few_values(clean_scores) else test)
    ties = tied(clean_scores) if p_test != test else 0
    n_tested = len(tested)  # Holm's family below: every suspect with a scored passage
    needed = clean_needed(p_test, alpha, n_tested)
    # the target's own score is tested by the t test only where its clean scores look normal:
    # the witness sends there the texts every model finds easy, the right tail a skewed null
    # puts too little weight on (benchmarks/results/t_skew.md); a choice from the clean
    # scores alone, so it cannot make a claim, only withhold one
    on_own = [s for s in switched if s not in blocked and test_of[s] == "t"]
    own_shape = _own_normality(on_own, clean, target_own, witness, alpha, n_tested) if k >= MIN_CLEAN_T else None
    skewed = set(on_own) if own_shape and "note" in own_shape else set()
    raw_p = {}
    for s in tested:
        if s not in blocked and s not in skewed and k >= 1 and (test_of[s] == "rank" or k >= MIN_CLEAN_T):
            raw_p[s] = min(1.0, split.get(s, 1) * test_p(score_of[s][s], [score_of[s][c] for c in clean], test_of[s]))
    # a suspect left without a test by the reference's scores (blocked) stays in Holm's family
    # at p = 1: which suspects are tested must not shrink the others' adjustment
    family = {**raw_p, **{s: 1.0 for s in blocked | skewed}}
    adjusted = {s: a for s, a in zip(family, holm(list(family.values()))) if s in raw_p}
    n_family = max(1, len(family))
    # Holm's smallest adjusted p is n times the family's smallest p, whichever suspect has it
    family_floor = min((smallest_adjusted_p(test_of[s], k, n_family, split.get(s, 1)) for s in raw_p), default=0.0)
    least_split = min((split.get(s, 1) for s in raw_p), default=1)
    standings = guard(doc_passages, tested, clean, guard_test) if tested and k >= 2 else {}

    rows = []
    for s in suspects:
        name = _name(s)
        row: dict[str, Any] = {
            "doc_id": name,
            "n_passages": len(values[s]) + failed.get(s, 0),
            "n_failed": failed.get(s, 0),
            "n_used": len(chosen.get(s, [])),
            "score": _num(doc_score.get(s)),
            "score_all_passages": _num(float(np.mean([v for _, v in values[s]]))) if values[s] else None,
        }
        p = raw_p.get(s, math.nan)
        row["p"] = _num(p)
        row["p_adjusted"] = _num(adjusted.get(s, math.nan))
        mine = score_of.get(s, doc_score)
        my_clean = [mine[c] for c in clean]
        if s in switched:
            row["score"] = _num(mine[s])
            every = [witness.target.get(i) for i, _ in values[s]]
            row["score_all_passages"] = _num(float(np.mean(every))) if all(v is not None for v in every) else None
            row["tested_on"] = witness.raw_method
        if s in mine and clean_scores:
            row["rank"] = 1 + sum(c >= mine[s] for c in my_clean)  # ties count against it
            row["of"] = k + 1
        if s in judgements:
            row["witness"] = judgements[s].as_json(witness)
        st = standings.get(s, {})
        row["style"] = st["style"].as_json() if "style" in st else None
        row["length"] = st["length"].as_json() if "length" in st else None
        my_test = test_of.get(s, p_test)
        my_ties = tied(my_clean) if my_test != test else 0
        if s in test_of and my_test != test:
            row["p_from"] = my_test
        # enough clean documents for both floors: Holm's over the family (n times the smallest
        # witness factor) and this document's own (its factor)
        needed_here = max(clean_needed(my_test, alpha / least_split, n_family),
                          clean_needed(my_test, alpha / split.get(s, 1)))
        verdict, reason, why = _decide(row, s, p, adjusted.get(s, math.nan), st, k, alpha, my_test,
                                       needed_here,
                                       witness.raw_method if s in switched else method,
                                       _z(mine.get(s), my_clean), my_ties, split.get(s, 1),
                                       n_family, family_floor)
        if s in blocked:
            verdict, why = CANNOT_TELL, f"the reference model knows it and {witness.raw_method} alone is no test"
            reason = (f"{name} ranks {_ordinal(row['rank'])} of {row['of']} documents by {witness.raw_method}, but "
                      f"{witness.raw_method} alone is no valid test: {unfit}")
        if s in skewed:
            raw = witness.raw_method
            verdict, why = CANNOT_TELL, f"the reference model knows it and the clean {raw} scores do not look normal"
            reason = (f"{name} ranks {_ordinal(row['rank'])} of {row['of']} documents by {raw}, but the clean "
                      f"documents' {raw} scores do not look normal (Shapiro-Wilk p = {_fmt_p(own_shape['p'])}), "
                      f"which the t test on {raw} assumes, and the reference model knowing {name}, the calibrated "
                      f"score cannot show the target's exposure; the rank test assumes nothing of the scores' shape "
                      f"and needs at least {clean_needed('rank', alpha / factors['own'], n_tested)} clean documents")
        if s in judgements:
            reason = witness_clause(witness, name, judgements[s], _fmt_p) + reason
        row["verdict"], row["reason"] = verdict, reason
        row["note"] = why if s not in switched or s in blocked | skewed else (
            f"on {witness.raw_method}: the reference model knows it" + (f"; {why}" if why else ""))
        row["line"] = _line(row)
        row["sentence"] = _sentence(verdict, name, reason, row.get("p_adjusted"), k)
        rows.append(row)

    report: dict[str, Any] = {
        "format": FORMAT,
        "method": method,
        "alpha": alpha,
        "test": {"name": test, "assumptions": ASSUMPTIONS[p_test], "n_clean_documents": k,
                 # after Holm's adjustment over the suspects tested: what a document can reach
                 "min_p": smallest_adjusted_p(p_test, k, n_tested), "clean_needed": needed,
                 "passages_per_document": m_passages,
                 **({"p_from": "rank", "tied_clean_documents": ties} if p_test != test else {}),
                 "multiple_testing": "Holm over suspect documents" if len(family) > 1 else None,
                 **({"witness_factors": factors} if any(v > 1 for v in split.values()) else {}),
                 **({"normality": shape} if (shape := normality(clean_scores, alpha, n_tested) if p_test == "t" else None)
                    else {}),
                 **({"normality_own": own_shape} if own_shape else {})},
        "guard": {"features": FEATURES, "level": GUARD_LEVEL, **({"test": guard_test} if guard_test != "rank" else {})},
        "rule": rule(guard_test),
        "baseline": {
            "n_documents": k,
            "mean": _num(float(np.mean(clean_scores))) if clean_scores else None,
            "sd": _num(float(np.std(clean_scores, ddof=1))) if k > 1 else None,
            "documents": [{"doc_id": _name(d), "score": doc_score[d], "n_passages": len(values[d])} for d in clean],
            "unscored": [_name(d) for d in clean_all if not values[d]],
        },
        "documents": rows,
    }
    group, group_unfit = None, None
    if len(tested) >= 2 and k >= 2:
        group = judge_group(witness, own, tested, clean) if witness else None
        by_own = group is not None and group.switched and all(d in target_own for d in tested + clean)
        group_split = (factors["own" if by_own else "calibrated"]
                       if group is not None and group.needed and group.p is not None else 1)
        report["collection"] = _collection(tested, clean, target_own if by_own else doc_score, alpha, standings,
                                           _validity(method, method_params, test, alpha, guard_test,
                                                     collection=True, passage_words=passage_words), group_split)
        group_unfit = raw_unfit(witness.raw_method) if by_own else None
        if group_unfit:
            report["collection"].update(verdict=CANNOT_TELL, tested_on=witness.raw_method, reason=(
                f"the reference model ({witness.model}) recognises the suspects as a group (p = {_fmt_p(group.p)}), "
                f"so the calibrated score cannot show the target's exposure, and {witness.raw_method} alone is no "
                f"valid test: {group_unfit}"))
        elif by_own:
            report["collection"]["tested_on"] = witness.raw_method
            report["collection"]["reason"] = (
                f"the reference model ({witness.model}) recognises the suspects as a group (p = {_fmt_p(group.p)}), "
                f"so they are compared on the target's own likelihood ({witness.raw_method}): "
                + report["collection"]["reason"])
    said = witness_summary(witness, method, judgements, group, _name,
                           [s for s in raw_p if split.get(s, 1) > 1], factors)
    if said is not None:
        if unfit or group_unfit:
            said["raw_unfit"] = unfit or group_unfit
        report["witness"] = said
    if switched:
        report["baseline"]["raw"] = {"method": witness.raw_method,
                                     "documents": [{"doc_id": _name(d), "score": target_own[d]} for d in clean]}
    report["no_evidence_rules_out"] = _rules_out(method, method_params, said)
    report["evidence_null_battery"] = validity[2:] if validity else None
    if context:
        report["published"] = context.get("published")
        report["target"] = context.get("target")
    report["shared"] = shared_words(report)
    report["summary"] = summary_sentence(report)
    return report


def _decisive(test: str, z: float | None, k: int, alpha: float, n_family: int = 1) -> str | None:
    """For a t test that did not reach alpha: how many clean documents like these would make
    the same standing (z clean standard deviations above their mean) significant, or that
    none would. The rank test's need (1/alpha - 1) is said where it applies. With
    ``n_family`` suspects tested together, a p-value at most alpha/n is significant after
    Holm's adjustment whatever the others score (each step's factor is at most n): the count
    is for that level, enough, though fewer may do."""
    from scipy import stats

    if test != "t" or z is None or not math.isfinite(z):
        return None
    # "never" is said at alpha itself: Holm's adjusted p of a document is at least its own p,
    # and may be no more when the other suspects' p-values are far smaller
    holm_note = (f" (at alpha/{n_family}, enough whatever the other {n_family - 1} suspect"
                 f"{'s' if n_family > 2 else ''} score)" if n_family > 1 else "")
    if stats.norm.sf(z) > alpha:
        where = f"{z:.2f} standard deviations of the clean documents above" if z >= 0 else \
            f"{-z:.2f} standard deviations of the clean documents below"
        return (f"no number of clean documents would make this standing significant: it is {where} their "
                f"mean, and alpha = {alpha:.3g} needs more than {stats.norm.isf(alpha):.2f} above it")
    level = alpha / max(1, n_family)  # enough after Holm's adjustment, whatever the others score

    def reaches(n: int) -> bool:
        return stats.t.sf(z / math.sqrt(1 + 1 / n), n - 1) <= level

    # the p falls as n grows (more degrees of freedom, a smaller prediction interval): bisect
    # for the fewest n, up to 100,000 (one by one took 35 s for an answer near 94,000)
    low, high = k + 1, 100_000
    if not reaches(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    more = low
    return (f"the same standing ({z:.2f} standard deviations above the clean documents' mean) would be "
            f"significant with at least {more} clean documents like these{holm_note}")


def _rules_out(method: str, params: Mapping[str, Any] | None, witness: Mapping[str, Any] | None) -> str | None:
    """What a ``no evidence`` verdict of this audit rules out, said once per audit
    (evaluation/exposure.py): real-exposure rows, and planted rows only where they hold."""
    from copyprobe.evaluation.exposure import no_evidence_clause

    return no_evidence_clause(method, params, witness)


def raw_unfit(raw: str) -> str | None:
    """Why the target's own score cannot stand in for a calibrated one (it made false claims
    on the null battery, on any model it ran on, or has no count there), or None when it can.
    Any claim, not only more than alpha allows: this opens a path of the witness's test, and
    one claim in 108 audits does not show a rate below alpha (its 95% bound is 4%). Claims
    at any passage length the battery was cut at count, whatever the audit's: a score that
    claims training on never-seen text at one length is not shown sound at another."""
    from copyprobe.evaluation.validity import TABLE, claimed_by_length, made_claims, null_records
    from copyprobe.evaluation.exposure import load_table

    records = null_records(raw)
    if not records:
        return f"how often {raw} claims training on documents no model has seen is not known"
    flagged = [(row, made) for row in records.values() if (made := made_claims(row))]
    if not flagged:
        return None
    where = load_table(str(TABLE)).get("source", "benchmarks/results/audit_validity.md")
    return f"on the null battery ({where}) {raw} claimed training on {claimed_by_length(flagged)}"


def _validity(method: str, params, test: str, alpha: float, guard_test: str, collection: bool = False,
              passage_words: int | None = None) -> str:
    """'; on 108 documents no model has seen ... claimed training on 0' (evaluation/validity.py), or ''."""
    from copyprobe.evaluation.validity import false_claims

    clause = false_claims(method, params, collection=collection, test=test, alpha=alpha, guard_test=guard_test,
                          passage_words=passage_words)
    return f"; {clause}" if clause else ""


def _times(factor: float) -> str:
    return f"times {factor:g}"


def _decide(row, s, p, p_adj, st, k, alpha, test, needed, method, z=None, ties=0, split=1, n_family=1,
            family_floor=0.0) -> tuple[str, str, str | None]:
    """(verdict, reason, a few words on why for the one-line form: None when the standing says it);
    ``split``: the factor the witness multiplied the p-value by (WITNESS_FACTORS when it chose the test);
    ``n_family``, ``family_floor``: the suspects in Holm's family and the smallest adjusted p any can get."""
    name = row["doc_id"]
    if row["n_used"] == 0:
        return CANNOT_TELL, (f"no passage of {name} could be scored with {method} ({row['n_failed']} failed; "
                             f"see errors in scores.jsonl)"), "no passage scored"
    if k == 0:
        return (CANNOT_TELL, "no clean document has a score: give documents you are sure the model never saw",
                "no clean document scored")
    if math.isnan(p) or split * min_p(test, k) > alpha:
        if test == "rank":
            why = (f"{ties} of the {k} clean documents share their score with another (a score with few possible "
                   f"values), so the t test's normal model does not hold and the exact rank test is used: "
                   if ties else "")
            smallest = (f"1/{k + 1} = {1 / (k + 1):.3g}" if split == 1 else
                        f"{split:g}/{k + 1} = {split / (k + 1):.3g} ({_times(split)} for the witness's choice of "
                        "test)")
            if n_family > 1:
                smallest += f", and {n_family} times that after Holm's adjustment over {n_family} suspects"
            return CANNOT_TELL, (f"{why}with {k} clean document{'s' if k != 1 else ''} the smallest p-value a test of "
                                 f"one document can give is {smallest}, above alpha = {alpha}: "
                                 f"give at least {needed} documents you are sure the model never saw, in the same "
                                 f"genre and style as {name}"), f"too few clean documents for the rank test ({k} < {needed})"
        return CANNOT_TELL, (f"the t test needs at least {MIN_CLEAN_T} clean documents, got {k}: give documents "
                             f"you are sure the model never saw, in the same genre and style as {name}"), \
            f"too few clean documents for the t test ({k} < {MIN_CLEAN_T})"
    if family_floor > alpha:
        # no document of the family can reach alpha after Holm's adjustment, whatever the scores
        return CANNOT_TELL, (f"with {k} clean documents and {n_family} suspect documents tested together, the "
                             f"smallest Holm-adjusted p-value a document can get is {_fmt_p(family_floor)} "
                             f"({n_family} times the smallest p-value), above alpha = {alpha}: give at least "
                             f"{needed} documents you are sure the model never saw, in the same genre and style as "
                             f"{name}, or audit fewer suspect documents at once"), \
            f"too few clean documents for {n_family} suspects ({k} < {needed})"
    standing = f"{_ordinal(row['rank'])} of {row['of']} documents by {method} (p = {_fmt_p(p)}"
    if split > 1:
        standing += f", {_times(split)} for the witness's choice of test"
    standing += f", Holm-adjusted {_fmt_p(p_adj)})" if p_adj != p else ")"
    if p_adj > alpha:
        if p <= alpha:
            return NO_EVIDENCE, (f"{name} ranks {standing}: below alpha = {alpha} alone, but not after adjusting "
                                 f"for the other suspect documents tested; this does not show the model never saw "
                                 f"it"), "not after Holm's adjustment"
        if row["rank"] == 1:
            where = (f"{name} ranks {standing}, above all {k} clean documents, but with {k} clean documents that is "
                     f"not significant at alpha = {alpha}")
        else:
            higher = row["rank"] - 1
            where = (f"{name} scores within the range of the clean documents: it ranks {standing}, {higher} of the "
                     f"{k} clean documents score{'s' if higher == 1 else ''} at least as high, not significant at "
                     f"alpha = {alpha}")
        decisive = _decisive(test, z, k, alpha / split, n_family)
        return NO_EVIDENCE, (f"{where}{'; ' + decisive if decisive else ''}; this does not show the model never "
                             f"saw it"), None
    style, length = st.get("style"), st.get("length")
    if style is None or length is None:
        return CANNOT_TELL, (f"{standing}, but the style guard needs at least 2 clean documents to compare "
                             f"with each other"), "too few clean documents for the style guard"
    tripped = [(what, x) for what, x in (("style", style), ("passage length", length)) if _guard_trips(x, p)]
    if tripped:
        what, x = tripped[0]
        return CANNOT_TELL, (f"{name} ranks {standing}, but its {what} alone already sets it apart: it is "
                             f"farther from the clean documents than {len(x.clean_values) + 1 - x.rank} of "
                             f"{len(x.clean_values)} clean documents are from the others ({_ordinal(x.rank)} of "
                             f"{len(x.clean_values) + 1}, p = {_fmt_p(x.p_value)}), so the difference can be "
                             f"explained by {what if what != 'style' else 'style or topic'}, not only by training; "
                             f"give clean documents in the same genre and style"), \
            f"withheld: its {what} alone sets it apart"
    by_length = (f"by passage length {_ordinal(length.rank)} (p = {_fmt_p(length.p_value)})" if length.material
                 else "its passages are within 10% of the clean documents' length")
    return EVIDENCE, (f"{name} ranks {standing}, while by style alone it ranks {_ordinal(style.rank)} of "
                      f"{len(style.clean_values) + 1} (p = {_fmt_p(style.p_value)}) and {by_length}: the model's "
                      f"score sets it apart more than the text alone does"), None


def _line(row: Mapping[str, Any]) -> str:
    """One short line of a document's verdict (the full reason stays in ``reason``)."""
    parts = []
    if row.get("rank"):
        parts.append(f"{_ordinal(row['rank'])} of {row['of']}")
    if row.get("p_adjusted") is not None:
        parts.append(f"p = {_fmt_p(row['p_adjusted'])}")
    if row.get("note"):
        parts.append(row["note"])
    return f"{row['doc_id']}: {row['verdict']}" + (f" ({'; '.join(parts)})" if parts else "")


def shared_words(report: Mapping[str, Any]) -> list[dict[str, str]]:
    """What an audit says once, not once per document: what the reference model knows,
    which models could have seen a text of the given date, the null battery's count behind
    every ``evidence`` and what ``no evidence`` rules out. verdicts.json keeps them
    (``shared``); the terminal and the report print them as they are."""
    out = []
    rows = report.get("documents") or []
    said = report.get("witness")
    if said:
        model = f"the reference model ({said['model']})" if said.get("model") else "the reference model"
        n = sum(1 for r in rows if r.get("witness"))
        if said.get("could_have_seen") is False:
            text = f"{model} cannot have seen the suspect text ({said['basis']}): the calibrated score is trusted"
        elif not said.get("run"):
            text = said.get("why", f"{model} was not asked whether it knows the suspects")
        elif said.get("recognised"):
            text = (f"{model} itself recognises {len(said['recognised'])} of {n} suspect document{'s' if n != 1 else ''} by its own "
                    f"likelihood against the clean ones (p <= {said['level']:g}: {', '.join(said['recognised'])}); "
                    f"a calibrated score cannot show the target's exposure to a text the reference also knows, so "
                    + (f"{'those were' if len(said['switched']) != 1 else 'it was'} tested on the target's own "
                       f"likelihood ({said['raw']})" if not said.get("raw_unfit") else
                       f"no valid test is left for {'them' if len(said['switched']) != 1 else 'it'}: {said['raw']} "
                       f"alone is none ({said['raw_unfit']})"))
        else:
            which = "the suspect document" if n == 1 else f"the {n} suspect documents"
            text = (f"{model} does not recognise {which if n == 1 else 'any of ' + which} by its own likelihood (p > "
                    f"{said['level']:g}): the calibrated score ({said['calibrated']}) is used")
        if said.get("basis") and said.get("could_have_seen") is not False:
            text += f"; {said['basis']}"
        out.append({"title": "reference model", "text": text})
    target = report.get("target") or {}
    if report.get("published") and target.get("could_have_seen") is not None:
        can = "could have" if target["could_have_seen"] else "cannot have"
        out.append({"title": "target model",
                    "text": f"{target.get('model') or 'the target'} {can} been trained on a text first published "
                            f"{report['published']} ({target.get('basis')})"
                            + ("" if target["could_have_seen"] else ": only later training (fine-tuning) could "
                               "have shown it the text")})
    if report.get("evidence_null_battery") and any(r["verdict"] == EVIDENCE for r in rows):
        out.append({"title": "evidence", "text": report["evidence_null_battery"]})
    if report.get("no_evidence_rules_out") and any(r["verdict"] == NO_EVIDENCE for r in rows):
        out.append({"title": "what no evidence rules out", "text": report["no_evidence_rules_out"]})
    return out


def _collection(suspects, clean, doc_score, alpha, standings, validity: str = "", split: float = 1) -> dict[str, Any]:
    """The group test over the suspect documents that pass their own guard. A suspect that
    differs from the clean documents in style or length by the text alone could carry the
    group result on its style, so it is left out of the group (a choice made without the
    scores, so the test stays valid for the rest); the rest must not stand out as a group
    either (Mann-Whitney over their style and length distances)."""
    outliers = [s for s in suspects
                if any(_guard_trips(standings.get(s, {}).get(part), 0.0) for part in ("style", "length"))]
    group = [s for s in suspects if s not in outliers]
    names = sorted(_name(s) for s in outliers)
    left_out = (f"; {len(names)} suspect document{'s' if len(names) != 1 else ''} that differ{'s' if len(names) == 1 else ''} "
                f"from the clean documents in style or passage length by the text alone left out of the group "
                f"({', '.join(names)})") if names else ""
    out: dict[str, Any] = {"n_suspect": len(suspects), "n_tested": len(group), "n_clean": len(clean),
                           "style_outliers": names,
                           "test": "one-sided exact Mann-Whitney U over document scores (suspect > clean)"}
    if not group:
        return {**out, "p": None, "min_p": None, "style_p": None, "length_p": None, "verdict": CANNOT_TELL,
                "reason": (f"every suspect document differs from the clean documents in style or passage length by "
                           f"the text alone ({', '.join(names)}): give clean documents in the same genre and style")}
    s_scores = [doc_score[s] for s in group]
    c_scores = [doc_score[c] for c in clean]
    # split: WITNESS_FACTORS of the score the group is compared on, when the witness chose it (as for one document)
    p = min(1.0, split * exact_mann_whitney_p(s_scores, c_scores))
    text = collection_standing({s: standings[s] for s in group})
    pooled = sorted(s_scores + c_scores, reverse=True)  # the most extreme pick: the largest scores
    min_possible = min(1.0, split * exact_mann_whitney_p(pooled[:len(group)], pooled[len(group):]))
    # a part none of the group differs in materially (the t guard's length part) cannot block it
    immaterial = {part for part in ("style", "length") if all(not standings[s][part].material for s in group)}
    blocked = [part for part in ("style", "length")
               if part not in immaterial and (math.isnan(text[part]) or text[part] <= max(GUARD_LEVEL, p))]
    shown_p = _fmt_p(p) + (f", {_times(split)} for the witness's choice of score" if split > 1 else "")
    one = len(group) == 1
    which = ("the" if not names else "the other") + (" suspect document" if one else f" {len(group)} suspect documents")
    score, do = ("scores", "does") if one else ("score", "do")
    if p > alpha:
        verdict = NO_EVIDENCE
        reason = (f"{which} {do} not score above the {len(clean)} clean documents as a group (one-sided "
                  f"Mann-Whitney over documents, p = {shown_p}){left_out}")
    elif blocked:
        verdict = CANNOT_TELL
        reason = (f"{which} {score} above the clean ones as a group (p = {shown_p}), but {'it also differs' if one else 'they also differ'} from "
                  f"them in {' and '.join(blocked)} by the text alone (p = "
                  f"{', '.join(_fmt_p(text[b]) for b in blocked)}): give clean documents in the same genre and "
                  f"style{left_out}")
    else:
        verdict = EVIDENCE
        reason = (f"{which} {score} above the clean ones as a group (one-sided Mann-Whitney over documents, "
                  f"p = {shown_p}), while the text alone does not set them apart (style p = "
                  f"{_fmt_p(text['style'])}, passage length p = {_fmt_p(text['length'])}); this says the model was "
                  f"trained on some of them, not which{left_out}{validity}")
    return {**out, "p": p, "min_p": min_possible, "style_p": _num(text["style"]), "length_p": _num(text["length"]),
            "verdict": verdict, "reason": reason}


def _sentence(verdict: str, name: str, reason: str, p: float | None, k: int) -> str:
    detail = f"p = {_fmt_p(p)}, " if p is not None else ""
    detail += f"{k} clean document{'s' if k != 1 else ''}"
    if verdict == EVIDENCE:
        head = f"Evidence that the model was trained on {name}"
    elif verdict == NO_EVIDENCE:
        head = f"No evidence that the model was trained on {name}"
    else:
        head = f"Cannot tell whether the model was trained on {name}"
    return f"{head}: {reason} ({detail})."


def raw_baseline(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The clean documents' mean and sd (n - 1) on the target's own score, where a document
    was tested on it (the reference model recognised it): its score is on that scale, so the
    calibrated score's baseline beside it misleads. ``{"method", "mean", "sd"}`` or None."""
    raw = report.get("baseline", {}).get("raw") if isinstance(report.get("baseline"), dict) else None
    if not isinstance(raw, dict):
        return None
    scores = [d["score"] for d in raw.get("documents") or []
              if isinstance(d, dict) and isinstance(d.get("score"), (int, float)) and math.isfinite(d["score"])]
    documents = [d for d in report.get("documents") or [] if isinstance(d, dict)]
    if len(scores) < 2 or not any(d.get("tested_on") == raw.get("method") for d in documents):
        return None
    return {"method": raw.get("method"), "mean": statistics.mean(scores), "sd": statistics.stdev(scores)}


def summary_sentence(report: Mapping[str, Any]) -> str:
    """The first line an audit prints: one plain sentence."""
    rows = report.get("documents") or []
    if len(rows) == 1:
        return str(rows[0]["sentence"])
    counts = {w: sum(r["verdict"] == w for r in rows) for w in (EVIDENCE, NO_EVIDENCE, CANNOT_TELL)}
    parts = [f"{counts[EVIDENCE]} with evidence", f"{counts[NO_EVIDENCE]} without", f"{counts[CANNOT_TELL]} cannot tell"]
    k = report["test"]["n_clean_documents"]
    line = (f"Of {len(rows)} suspect documents, {', '.join(parts)} "
            f"({k} clean document{'s' if k != 1 else ''}, {report['test']['name']} test, "
            f"alpha {report['alpha']})")
    if report.get("collection"):
        line += f"; as a group: {report['collection']['verdict']} (p = {_fmt_p(report['collection']['p'])})"
    return line + "."


def audit_verdicts(rows: list[dict[str, Any]], method: str, train_ids: Mapping[str, Any], alpha: float,
                   texts: Mapping[str, str], *, test: str = "rank", guard_test: str = "rank",
                   method_params: Mapping[str, Any] | None = None,
                   witness_context: Mapping[str, Any] | None = None, use_witness: bool = True,
                   context: Mapping[str, Any] | None = None, passage_words: int | None = None
                   ) -> dict[str, Any]:
    """Verdicts from scores rows (as scores.jsonl holds them) and the passages' texts
    (examples.jsonl): rows a learning method was fitted on are no evidence and are left out.
    A reference-calibrated method's rows carry both halves of the score in their details:
    the reference model is asked as a witness (:mod:`copyprobe.evaluation.witness`;
    ``witness_context``: its model, whether it could have seen the text and why;
    ``use_witness=False``: the calibrated score alone, as before the witness;
    ``passage_words``: as for :func:`verdicts`)."""
    from copyprobe.evaluation.witness import from_rows

    trained = {i for ids in train_ids.values() for i in ids}
    witness = from_rows([r for r in rows if r["id"] not in trained], method, witness_context) if use_witness else None
    scores: dict[str, float | None] = {}
    for row in rows:
        if row["id"] in trained:
            continue
        value = row.get(method)
        scores[row["id"]] = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    docs = {r["id"]: r.get("doc_id") for r in rows}
    labels = {r["id"]: r.get("label") for r in rows}
    return verdicts(scores, docs, labels, alpha, texts, test=test, method=method,
                    order=[r["id"] for r in rows], guard_test=guard_test, method_params=method_params,
                    witness=witness, context=context, passage_words=passage_words)
