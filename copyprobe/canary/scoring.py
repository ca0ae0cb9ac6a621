"""`canary test`: score every candidate of a kit with one method through the normal
runner (one row per candidate), rank the published canary among its candidates, and
turn the ranks into exact p-values (see :mod:`copyprobe.canary.stats`).

Each candidate is scored as a passage on its own (the same text for published and
held-out candidates, so the method cannot tell them apart by anything but the model).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from copyprobe import record
from copyprobe.canary import stats
from copyprobe.canary.kit import Kit, load_kit
from copyprobe.data.example import Example
from copyprobe.engine import Derived, RunKind, execute
from copyprobe.errors import DataError, DataSettingError, RowError, TooFewLabelledRows
from copyprobe.params import SEED_SETTING, Real, Setting, Settings, Text
from copyprobe.evaluation.vocabulary import CANNOT_TELL, EVIDENCE, NO_EVIDENCE
from copyprobe.evaluation.vocabulary import ordinal


@dataclass
class CanaryResult:
    canary: dict[str, Any]  # canary.json
    record: record.RunRecord
    rows: list[dict[str, Any]]
    examples: list[Example]
    out: Path | None = None


def kit_examples(kit: Kit, prefix: str = "") -> list[Example]:
    """One passage per candidate: id ``<prefix>c<canary>:<candidate>``, doc_id ``canary-<k>``."""
    return [Example(id=f"{prefix}c{c.index}:{j}", text=text, doc_id=f"{prefix}canary-{c.index}")
            for c in kit.canaries for j, text in enumerate(c.candidates)]


def _p(p: float) -> str:
    return f"{p:.3g}"


def smallest_p(sizes: list[int]) -> float:
    """The smallest p-value canaries among ``sizes`` candidates each can give: every one ranked first."""
    return stats.sum_of_ranks_p_value([1] * len(sizes), sizes)


def check_answer_not_fixed(kit: Kit, alpha: float) -> None:
    """One line before any model work when the kit cannot reach ``alpha`` whatever the
    scores: every test would say 'cannot tell', after scoring every candidate (on a paid
    API, for money). The audit refuses the same case (copyprobe.audit.check_answer_not_fixed)."""
    sizes = [len(c.candidates) for c in kit.canaries]
    smallest = smallest_p(sizes)
    if smallest > alpha:
        raise DataError(f"the answer is fixed before any scoring: with {len(sizes)} "
                        f"canar{'y' if len(sizes) == 1 else 'ies'} of {'/'.join(map(str, sorted(set(sizes))))} "
                        f"candidates the smallest possible p-value is {_p(smallest)}, above alpha {alpha:g}, so the "
                        "test would be 'cannot tell'; nothing was scored. Raise alpha or make a kit with more "
                        "candidates")


class _NeedsTheModel(Exception):
    """A method's first step cannot run before the model is known (a parameter still ``auto``)."""


def _first_step_refusal(method: Any, example: Example) -> str | None:
    """Why ``method`` refuses ``example`` before it asks the model anything (its first step
    raises RowError: a passage too short for it), or None when it asks. Raises
    :class:`_NeedsTheModel` when the first step cannot run yet: then only the run can tell."""
    from copyprobe.methods.base import Method

    try:
        if type(method).run is Method.run:  # asks once: its requests are its first step
            method.requests(example)
        else:
            steps = method.run(example)
            try:
                next(steps)
            except StopIteration:  # scored without the model
                pass
            finally:
                steps.close()
    except RowError as exc:
        return str(exc) or type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - not the text's fault: the run will say it, after the load
        raise _NeedsTheModel from exc
    return None


def check_method_can_score(kit: Kit, method: Any, seed: int) -> None:
    """One line before any model work when ``method`` cannot test this kit: it learns
    from labelled passages or takes passages from the data (candidates have no labels),
    or its first step refuses the candidates' text (a probe needing more words than they
    have), so the test would fail ("the published canary has no score") or be 'cannot
    tell' only after every candidate was scored. What depends on the model's answers
    (paraphrases, surprising tokens) only the run can tell."""
    name = method.name
    if method.trains:
        raise DataError(f"method {name!r} cannot score canaries: it learns from labelled passages, and a kit's "
                        "candidates have no labels")
    examples = kit_examples(kit)
    try:
        held = method.hold_out(examples, seed)
    except TooFewLabelledRows as exc:  # its own advice (draw fewer) cannot help: there are no labels
        files = " and ".join(exc.parameters)
        raise DataError(f"method {name!r} cannot score canaries as set: it draws labelled passages from the data "
                        f"for its {files}, and a kit's candidates have no labels; give it "
                        f"{'a ' + files + ' file' if len(exc.parameters) == 1 else files + ' files'} instead") from None
    except DataError as exc:  # the data lacks what it draws (a file it cannot read is the file's error)
        raise DataError(f"method {name!r} cannot score canaries as set: a kit's candidates have no labels, "
                        f"and {exc}") from None
    if held:  # it would score candidates against other candidates, held out of the test
        raise DataError(f"method {name!r} cannot score canaries as set: it takes {len(held)} passages of the data "
                        "for itself, and a kit's passages are all candidates")
    by_id = {e.id: e for e in examples}

    def refusal(index: int, j: int) -> str | None:
        return _first_step_refusal(method, by_id[f"c{index}:{j}"])

    try:
        _refuse_before_scoring(kit, name, refusal)
    except _NeedsTheModel:
        return


def _refuse_before_scoring(kit: Kit, name: str, refusal) -> None:
    """Raise when the first steps (``refusal(canary, candidate)``: why a candidate's is
    refused, or None) fix the answer: the published canaries first, then the held-out
    candidates only until their share refused is known to stay within verdict_word's rule
    (at most half) or to exceed it. A kit of 400 canaries of 1,000 candidates is 400,000
    first steps (a spaCy pass each for name_cloze); about half of them settle it. A first
    step that cannot run before the model (:class:`_NeedsTheModel`) among those not
    reached is not met: the decision is the one the steps tried settle."""
    for n, c in enumerate(kit.canaries):
        why = refusal(c.index, c.published)
        if why is None:
            continue
        if n == 0 and all(refusal(d.index, j) is not None for d in kit.canaries for j in range(len(d.candidates))
                          if (d.index, j) != (c.index, c.published)):
            raise DataError(f"method {name!r} cannot score this kit's candidates, so nothing was scored: {why}")
        raise DataError(f"method {name!r} cannot score the published canary {c.index}, so it cannot be "
                        f"tested and nothing was scored: {why}")
    held_out = sum(len(c.candidates) - 1 for c in kit.canaries)
    left, refused, first = held_out, 0, None
    for index, j in ((c.index, j) for c in kit.canaries for j in range(len(c.candidates)) if j != c.published):
        if (refused + left) * 2 <= held_out:  # were all the rest refused, still within the rule
            return
        left -= 1
        why = refusal(index, j)
        if why is not None:
            refused, first = refused + 1, first or why
            if refused * 2 > held_out:  # verdict_word's rule: 'cannot tell' whatever the scores
                raise DataError(f"the answer is fixed before any scoring: method {name!r} cannot score more than "
                                f"half of the {held_out} held-out candidates ({first}), so the test would be "
                                "'cannot tell'; nothing was scored")


def coarse(values: list[Any]) -> bool:
    """Scores that take few values: at most half as many distinct scores as candidates
    (0/1 answers, a share of 4 options), where ties are the rule, not chance."""
    scored = [v for v in values if not _unscored(v)]
    return len(set(scored)) * 2 <= len(values)


def ties_decided(result: dict[str, Any], is_coarse: bool) -> bool:
    """Whether coarse scores (``is_coarse``: :func:`coarse` for every canary's candidates)
    alone kept the test from significance: p is above alpha, and it would not have been had
    every tie with a published canary been broken in the canary's favour. Ties count against
    the canary (valid, but with scores such as 0/1 most candidates tie and p is near 1
    whether or not the model saw the document). A few ties of a continuous score, or a test
    already 'cannot tell' for its unscored candidates, are not this case."""
    per = result["canaries"]
    held = sum(c["n_candidates"] - 1 for c in per)
    unscored = sum(c["n_unscored"] for c in per)
    if not is_coarse or result["p_value"] <= result["alpha"] or unscored * 2 > held or not any(c["n_ties"] for c in per):
        return False
    ranks = [c["rank"] - c["n_ties"] for c in per]
    sizes = [c["n_candidates"] for c in per]
    untied = (stats.rank_p_value(ranks[0], sizes[0]) if result["test"] == "rank"
              else stats.sum_of_ranks_p_value(ranks, sizes))
    return untied <= result["alpha"]


def _ties(result: dict[str, Any]) -> str:
    """'k of the n held-out candidates tie with the published canary'."""
    per = result["canaries"]
    ties, held = sum(c["n_ties"] for c in per), sum(c["n_candidates"] - 1 for c in per)
    return (f"{ties} of the {held} held-out candidates tie with the published canar"
            f"{'y' if len(per) == 1 else 'ies'}")


def verdict_word(result: dict[str, Any], tied: bool = False) -> tuple[str, str]:
    """(verdict, reason) in the shared vocabulary (copyprobe.evaluation.vocabulary);
    ``tied``: what :func:`ties_decided` says of it (canary_summary knows the scores)."""
    method, alpha, p = result["method"], result["alpha"], result["p_value"]
    per = result["canaries"]
    smallest = smallest_p([c["n_candidates"] for c in per])
    unscored = sum(c["n_unscored"] for c in per)
    held = sum(c["n_candidates"] - 1 for c in per)
    if unscored * 2 > held:
        return CANNOT_TELL, (f"{method} could not score {unscored} of the {held} held-out candidates, "
                             "so the rank says little.")
    if p <= alpha:
        return EVIDENCE, (f"The published canar{'y' if len(per) == 1 else 'ies'} ranked high enough among the "
                          f"held-out candidates by {method} for an exact p = {_p(p)} <= alpha = {alpha}.")
    if smallest > alpha:
        return CANNOT_TELL, (f"With these candidates the smallest possible p-value is {_p(smallest)}, above alpha = "
                             f"{alpha}: this kit cannot give evidence at that level (make kits with more candidates).")
    if tied:  # it ran, but coarse scores left it no way to reject
        return CANNOT_TELL, (f"{_ties(result)} by {method}, whose scores are too coarse to rank "
                             f"{'it' if len(per) == 1 else 'them'}: a tie counts against the canary, and had it "
                             "ranked above the tied candidates the test would have been significant.")
    return NO_EVIDENCE, (f"The exact p = {_p(p)} is above alpha = {alpha}; this does not show that the model never saw "
                         "the document (it may have read it without memorising the canary).")


def verdict(result: dict[str, Any], tied: bool = False) -> str:
    """The plain-language explanation of canary.json (``tied`` as for :func:`verdict_word`)."""
    method, alpha, p = result["method"], result["alpha"], result["p_value"]
    per = result["canaries"]
    if len(per) == 1:
        c = per[0]
        what = (f"The published canary ranked {ordinal(c['rank'])} of {c['n_candidates']} candidates "
                f"by {method} (1st = most likely seen).")
    else:
        ranks = ", ".join(f"{c['rank']}/{c['n_candidates']}" for c in per)
        what = (f"The {len(per)} published canaries ranked {ranks} among their candidates by {method}; "
                f"combined by the sum of ranks ({result['combined']['sum_of_ranks']}).")
    chance = (f"If the model never saw this document, the chance of a result at least this extreme "
              f"is at most p = {_p(p)}.")
    if p <= alpha:
        conclusion = (f"At alpha = {alpha} this is evidence that the model was trained on the marked "
                      f"document (or on text copied from it).")
    elif tied:
        conclusion = (f"At alpha = {alpha} this is not significant only because of ties: {_ties(result)} "
                      f"(the same score), and a tie counts against the canary. {method}'s scores are too coarse "
                      f"to rank {'it' if len(per) == 1 else 'them'}, so this says nothing either way about whether "
                      "the model saw the document.")
    else:
        conclusion = (f"At alpha = {alpha} this is not significant. It does not show that the model never "
                      f"saw the document: the model may have seen it without memorising the canary.")
    return " ".join([what, chance, conclusion])


def _unscored(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def canary_summary(kit: Kit, rows: list[dict[str, Any]], method: str, alpha: float,
                   prefix: str = "", kit_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """canary.json from the scores rows (a pure function: rescoring gives the same);
    ``kit_summary``: the kit as the run recorded it (default: ``kit.public_summary()``)."""
    by_id = {r["id"]: r for r in rows}
    per: list[dict[str, Any]] = []
    candidate_scores = []
    for c in kit.canaries:
        values = [by_id[f"{prefix}c{c.index}:{j}"].get(method) for j in range(len(c.candidates))]
        candidate_scores.append(values)
        published = values[c.published]
        if _unscored(published):  # which method and why, where canary_p_value can only say that it has none
            why = (by_id[f"{prefix}c{c.index}:{c.published}"].get("errors") or {}).get(method)
            raise DataError(f"the published canary {c.index} has no score by {method}, so it cannot be tested"
                            f"{f': {why}' if why else ''}")
        held = [v for j, v in enumerate(values) if j != c.published]
        rank, p = stats.canary_p_value(published, held)
        per.append({
            "index": c.index, "n_candidates": len(c.candidates), "repeat": len(c.positions),
            "published_score": published, "rank": rank, "p_value": p,
            # a NaN score is unscored too (canary_p_value counts it as a tie, against the canary)
            "n_ties": sum(not _unscored(v) and v == published for v in held),
            "n_unscored": sum(_unscored(v) for v in held),
        })
    ranks = [c["rank"] for c in per]
    sizes = [c["n_candidates"] for c in per]
    combined = stats.combine(ranks, sizes)
    result: dict[str, Any] = {
        "method": method, "alpha": alpha, "kit": kit_summary if kit_summary is not None else kit.public_summary(),
        "canaries": per, "combined": combined,
        "test": "rank" if len(per) == 1 else "sum_of_ranks",
        "p_value": per[0]["p_value"] if len(per) == 1 else combined["sum_of_ranks_p"],
    }
    result["significant"] = result["p_value"] <= alpha
    # once: with several canaries it is a second exact p-value
    tied = ties_decided(result, all(coarse(values) for values in candidate_scores))
    result["verdict"], result["reason"] = verdict_word(result, tied)
    result["explanation"] = verdict(result, tied)
    return result


# the keys of Kit.public_summary(), recorded in run.json's canary section
_KIT_KEYS = ("kit", "style", "repeat", "n_canaries", "n_candidates", "document_sha256", "manifest_checksum")


def recorded_kit(run: record.Run) -> Kit:
    """The kit a canary run was tested with, from its recorded directory (or
    ``run.inputs["kit"]`` when it moved), checked to be the same kit (manifest checksum).
    Only the manifest is read: which candidate was published is private to the kit."""
    from copyprobe.canary.kit import read_manifest

    settings = run.record.canary or {}
    where = run.inputs.get("kit") or settings.get("kit")
    if not where or not settings.get("manifest_checksum"):
        raise DataError(f"{run.dir / 'run.json'} does not name the canary kit it was tested with "
                        "(canary.kit and canary.manifest_checksum)")
    if not run.inputs.get("kit") and not Path(str(where)).exists():  # moved since: the rescore must say where to
        raise DataSettingError("kit", f"is needed: the kit this run was tested with is no longer at {where}; "
                                      "give the directory it was moved to")
    path, manifest, canaries = read_manifest(where)
    if manifest.get("checksum") != settings.get("manifest_checksum"):
        raise DataError(f"{path} is not the kit this run was tested with (its manifest checksum differs from "
                        f"canary.manifest_checksum in {run.dir / 'run.json'})")
    return Kit(dir=path, manifest=manifest, canaries=canaries, document=Path(str(settings.get("document", ""))))


def derive_canary(run: record.Run) -> Derived:
    """canary.json (ranks, exact p-values, verdict) from the candidates' scores and the kit."""
    from copyprobe.detect import derive_metrics

    settings = run.record.canary or {}
    if "method" not in settings or "alpha" not in settings:
        raise DataError(f"{run.dir / 'run.json'} has no canary method and alpha to recompute canary.json from")
    kit = recorded_kit(run)
    have = {str(r.get("id")) for r in run.scores or []}
    missing = next((f"c{c.index}:{j}" for c in kit.canaries for j in range(len(c.candidates))
                    if f"c{c.index}:{j}" not in have), None)
    if missing is not None:
        raise DataError(f"{run.dir / 'scores.jsonl'} has no row for candidate {missing} of the kit")
    derived = derive_metrics(run)  # unlabelled candidates: no metrics, and the note that says so
    derived.files["metrics.json"] = None
    derived.files["canary.json"] = canary_summary(kit, run.scores or [], settings["method"],
                                                  float(settings["alpha"]),
                                                  kit_summary={k: settings.get(k) for k in _KIT_KEYS})
    return derived


def check_recorded(run: record.Run) -> None:
    """A saved canary test as strictly as the command line reads it (an alpha of 5 was a verdict at alpha 5)."""
    from copyprobe.detect import check_method_column

    section = run.record.canary
    if section is None:
        return
    SETTINGS.check_recorded(section, f"{run.dir / 'run.json'}: 'canary")
    check_method_column(run, section.get("method"), "canary test")


KIND = RunKind("canary", {"examples.jsonl": True, "scores.jsonl": True, "canary.json": False}, derive_canary,
               check_recorded=check_recorded)

# canary test's settings, declared once (keywords, checks, command-line options, run.json)
SETTINGS = Settings(
    Setting("method", "loss", Text(empty=False), "any registered method"),
    Setting("alpha", 0.05, Real(0, 1, low_open=True, high_open=True), "significance level"),
    replace(SEED_SETTING, help="seed for methods"),
)


@record.discards_new_out_dir  # a run refused after making its directory leaves none behind
def canary_test(
    model: Any,
    kit: str | os.PathLike | Kit,
    method: str = SETTINGS.default("method"),
    *,
    params: Mapping[str, Any] | None = None,
    alpha: float = SETTINGS.default("alpha"),
    document: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    cache: Any = True,
    batch_size: int | str = "auto",
    device: str = "auto",
    dtype: str = "auto",
    seed: int = SETTINGS.default("seed"),
    progress: Any = None,
    command: list[str] | None = None,
    api_options: Mapping[str, Any] | None = None,
) -> CanaryResult:
    """Test ``model`` with the kit; writes the run directory when ``out`` is given."""
    import time

    from copyprobe.detect import ScoringCollection
    from copyprobe.scoring import build_methods

    started = time.perf_counter()
    values = SETTINGS.check({"method": method, "alpha": alpha, "seed": seed})
    loaded = kit if isinstance(kit, Kit) else load_kit(kit, document)
    check_answer_not_fixed(loaded, values["alpha"])
    methods = build_methods([method], {method: dict(params)} if params else None)
    check_method_can_score(loaded, methods[0], seed)
    if out is not None:  # after the kit and method are found usable: a refused test leaves no run directory
        record.prepare_out_dir(out, "canary", model)
    examples = kit_examples(loaded)
    settings = {**SETTINGS.record(values, ("method", "alpha")), **loaded.public_summary(),
                "document": os.path.abspath(loaded.document)}
    data = {"kit": os.path.abspath(loaded.dir), "n_passages": len(examples),
            "document_sha256": loaded.manifest["document"]["sha256"]}
    collection = ScoringCollection(examples, methods,
                                   data, seed=seed, n_bootstrap=0, blind_baseline=None,
                                   section=("canary", settings))
    done = execute(KIND, model, collection, out=out, cache=cache, batch_size=batch_size, device=device,
                   dtype=dtype, api_options=api_options, progress=progress,
                   command=command if command is not None else list(sys.argv), started=started)
    return CanaryResult(canary=done.files["canary.json"], record=done.record, rows=done.files["scores.jsonl"],
                        examples=examples, out=done.out)
