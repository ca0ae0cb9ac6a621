"""`audit`: was the model trained on these suspect documents? (docs/audit.md)

Every passage of the suspect and the clean documents is scored with one method (the clean
passages get label 0 and the suspect ones label 1, so the run record also holds AUCs);
the verdicts, one per suspect *document*, come from :mod:`copyprobe.evaluation.verdicts`
(document-level test + model-free shift guard). Rows without a document form one
document per input (named after the file).

The method defaults to ``auto``: with a model that gives token log-probabilities, the
score chosen by ``benchmarks/bench_audit_validity.py`` (no false claim on its battery of
texts no model has seen at the default alpha, the most power on planted documents: the
reference-model difference), with the reference model asked first whether it knows each
suspect itself (:mod:`copyprobe.evaluation.witness`: a text both models trained on is
tested on the target's own likelihood, ``benchmarks/bench_audit_real.py``); DE-COP for a model that only generates, and only with
paraphrases supplied in the data or a paraphrasing model. The test defaults to ``t`` for
the same reason: the exact rank test needs 99 clean documents for a claim at alpha 0.01.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from copyprobe import record
from copyprobe.data.example import Example
from copyprobe.detect import (AUDIT_CHUNK_PASSAGES, DetectResult, ScoringCollection, derive_metrics, first_passages,
                              resample, scored_result, skipped_rows_note)
from copyprobe.engine import Derived, RunKind, execute
from copyprobe.errors import ConfigError, DataError
from copyprobe.files import printable_name, refuse_empty_path
from copyprobe.methods.base import Method
from copyprobe.evaluation.vocabulary import GUARD_TESTS, TESTS
from copyprobe.params import (COUNT, LIMIT_SETTING, SEED_SETTING, OneOf, Optional, Real, Setting, Settings, Text,
                              n_bootstrap_setting)

AUTO = "auto"
_NAME_A_SIDE = "name a file, a folder of books or a dataset"
# chosen by benchmarks/bench_audit_validity.py: see benchmarks/results/audit_validity.md
DEFAULT_LOGIT_METHOD = "reference"
# a model that does not score text, top-k log-probs or not: topk_loss made 2 false claims
# in 108 null audits at the defaults (benchmarks/results/audit_validity.md), as raw loss
# would without the guard, so auto does not choose it
DEFAULT_GENERATION_METHOD = "prefix_probe"
# prefix probing's ROUGE-L found 9 of 12 letters Qwen2.5-0.5B was tuned on for 3 epochs
# where the paper's token-sort similarity found 3 (benchmarks/results/audit_exposure.md)
AUTO_PARAMS: dict[str, dict[str, Any]] = {"prefix_probe": {"similarity": "rouge_l"}}
# bundled models shown unable to write DE-COP's paraphrases, per paraphrase_style
# (benchmarks/results/blackbox.md and audit_exposure.md): asked for three at once, Qwen2.5-Coder-1.5B
# copied the passage (none of 8 passages parsed in 3 attempts); asked one rewrite a request it
# wrote 72 usable of 89 (every one of 24 passages got its 3), Qwen2.5-Coder-0.5B 1 of 15 and
# SmolLM2 5 of 15 (copies, 2x padding, talk about the task); Gemma-3-270M is a base model
UNABLE_PARAPHRASERS = {
    "three_in_one": ("smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct",
                     "qwen2.5-coder-1.5b-instruct"),
    "one_per_request": ("smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct"),
}
# method parameters an audit refuses, and why: each made false claims in the exposure benchmark's
# controls (models never trained on the documents)
INVALID_FOR_AUDIT = {
    ("decop", "score", "probability"): (
        "decop.score=probability claimed 4 of 5 never-seen letters on the un-tuned Qwen2.5-Coder-1.5B at "
        "alpha 0.01 (benchmarks/results/audit_exposure.md): audits use DE-COP's accuracy (the default)"),
}


# audit's settings, declared once (keywords, checks, command-line options, run.json's audit section)
SETTINGS = Settings(
    Setting("method", AUTO, Text(empty=False),
            "method name: auto is the score chosen by the audit validity benchmark when the model gives "
            "log-probabilities, DE-COP with supplied paraphrases otherwise"),
    Setting("alpha", 0.01, Real(0, 1, low_open=True, high_open=True), "significance level"),
    Setting("test", "t", OneOf(*TESTS),
            "document-level test: t (assumes normal document scores, checked by the validity benchmark) or "
            "rank (exact, no distributional assumption; needs at least 1/alpha - 1 clean documents: 99 at "
            "alpha 0.01)"),
    Setting("passages_per_document", 64, Optional(COUNT),
            "the most passages of each document the test reads (evenly spaced through it; every document gets the "
            "same number, set by the shortest); only those are scored. none: as many as the shortest document has"),
    Setting("guard_test", "t", OneOf(*GUARD_TESTS),
            "how the style and length guard judges a suspect: t (by how far it stands out among the clean "
            "documents; passages within 10% of their length never count as a length difference) or rank (the "
            "earlier guard: also withholds any document farther than every clean one)"),
    Setting("published", None, Optional(Text(empty=False)),
            "when the suspect text was first published (YYYY, YYYY-MM or YYYY-MM-DD): a reference model whose "
            "training data ends before it cannot have seen it (the verdict says which models could have)"),
    replace(LIMIT_SETTING, help="only the first N passages of each side (a quick try-out)"),
    SEED_SETTING,
    n_bootstrap_setting(200),
)
# the settings in run.json's audit section
RECORDED = ("method", "alpha", "test", "limit", "passages_per_document", "guard_test", "published")


@dataclass
class AuditResult:
    verdicts: dict[str, Any]
    detect: DetectResult

    @property
    def out(self) -> Path | None:
        return self.detect.out

    @property
    def summary(self) -> str:
        return str(self.verdicts.get("summary", ""))


def audit_examples(data: Any, role: str, label: int, files: list | None = None,
                   cut_at: dict[str, int | None] | None = None, skipped: dict[str, dict] | None = None,
                   **read_options: Any) -> list[Example]:
    """The passages of one side ("suspect" or "clean"), ids and documents prefixed by the
    role; the input files read (path, bytes, sha256) are appended to ``files``, the most
    words of a passage where copyprobe cut books or source files into passages (else None) is ``cut_at[role]``,
    and rows the reader skipped for having no text are ``skipped[role]`` (n, first, file)."""
    from copyprobe.data.readers import Dataset, load_dataset

    refuse_empty_path(data, f"the {role}", _NAME_A_SIDE)
    if isinstance(data, (str, Path, Dataset)):
        # a Dataset is what load_dataset read (not iterable: it cannot be read as a list of texts)
        dataset = data if isinstance(data, Dataset) else load_dataset(data, **read_options)
        examples = dataset.examples
        if files is not None:
            files.extend(dataset.files)
        if cut_at is not None:
            cut_at[role] = dataset.passage_words
        if skipped is not None and dataset.n_skipped:
            skipped[role] = {"n_skipped": dataset.n_skipped, "first_skipped": dataset.first_skipped,
                             "path": str(dataset.path or role)}
        stem = printable_name(Path(dataset.path).stem) if dataset.path else role
    else:
        examples = [e if isinstance(e, Example) else Example(id=str(i), text=str(e)) for i, e in enumerate(data)]
        if cut_at is not None:
            cut_at[role] = None
        stem = role
    if not examples:
        where = f"file {data}" if isinstance(data, (str, Path)) else "set"
        raise DataError(f"{role} {where} has no passages")
    out = []
    for ex in examples:
        doc = ex.doc_id if ex.doc_id is not None else stem
        out.append(replace(ex, id=f"{role}:{ex.id}", label=label, doc_id=f"{role}:{doc}"))
    return out


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def check_overlap(suspect: list[Example], clean: list[Example]) -> None:
    """A suspect document identical to, or contained in, the clean set is an error: the
    comparison would test the text against itself."""
    clean_texts = {_norm(e.text) for e in clean}
    clean_docs: dict[str, list[str]] = {}
    for e in clean:
        clean_docs.setdefault(str(e.doc_id), []).append(_norm(e.text))
    clean_joined = {" ".join(v) for v in clean_docs.values()}
    by_doc: dict[str, list[str]] = {}
    for e in suspect:
        by_doc.setdefault(str(e.doc_id), []).append(_norm(e.text))
    for doc, passages in by_doc.items():
        name = doc.split(":", 1)[1]
        if " ".join(passages) in clean_joined:
            raise DataError(f"suspect document {name} is identical to a clean document: the clean set must hold "
                            f"other documents, ones the model cannot have seen")
        if all(p in clean_texts for p in passages):
            raise DataError(f"every passage of suspect document {name} is also in the clean set: the clean set "
                            f"must hold other documents, ones the model cannot have seen")


def check_duplicates(examples: list[Example], side: str) -> None:
    """Two documents of one side with the same text are an error: the test would count one
    document twice (a book given as .txt and .epub; clean files copied under other names),
    and each copy adds a document that is not there (a rank test at alpha 0.05 claimed a
    suspect with 8 clean documents given three times each, which cannot reach 0.05)."""
    by_doc: dict[str, list[str]] = {}
    for e in examples:
        by_doc.setdefault(str(e.doc_id), []).append(_norm(e.text))
    seen: dict[str, str] = {}
    for doc, passages in by_doc.items():
        text = " ".join(passages)
        if text in seen:
            first, name = seen[text].split(":", 1)[-1], doc.split(":", 1)[-1]
            raise DataError(f"{side} documents {first} and {name} have the same text: give each document once (the "
                            f"test would count it as two documents)")
        seen[text] = doc


def witness_factors(method: str, params: Mapping[str, Any] | None, target_spec: str | None,
                    published: str | None) -> dict[str, float] | None:
    """What the witness will multiply a suspect's p-value by on each of its two paths
    (:func:`copyprobe.evaluation.witness.path_factors`), known before any scoring; None when
    nothing will be multiplied: a method that is not calibrated, or a reference model that
    cannot have seen the text (trusted unasked). A reference left at ``auto`` with no target
    spec to resolve it against is taken as one that could have seen it."""
    from copyprobe.backends.cutoffs import could_have_seen
    from copyprobe.evaluation.verdicts import raw_unfit
    from copyprobe.evaluation.witness import CALIBRATED, path_factors

    if method not in CALIBRATED:
        return None
    if could_have_seen(reference_of(params, target_spec), published)[0] is False:
        return None
    return path_factors(raw_unfit(CALIBRATED[method]))


def reference_of(params: Mapping[str, Any] | None, target_spec: str | None) -> str | None:
    """The reference model a calibrated method will use, as its ``resolve`` will name it
    (``auto``: :func:`copyprobe.backends.specs.default_reference` of the target); None when
    it is not known yet (``auto`` with no target spec)."""
    from copyprobe.backends.specs import default_reference

    reference = (params or {}).get("model", AUTO)
    if reference == AUTO:
        return default_reference(target_spec) if target_spec else None
    return reference if isinstance(reference, str) else None


def check_answer_not_fixed(test: str, alpha: float, suspect: list[Example], clean: list[Example],
                           factors: Mapping[str, float] | None = None) -> None:
    """One line before any model work when no test of the audit can reach ``alpha`` with
    this many documents whatever the scores: every verdict would be "cannot tell", and on
    a paid API scoring would spend money on it. Per document, the rank test's smallest
    p-value is 1/(k+1), n/(k+1) after Holm's adjustment over n suspects, and the t test
    needs at least 3 clean documents; the group test (2 or more suspect and clean
    documents) can at best give 1/C(n+k, n). ``factors`` (:func:`witness_factors`): every p
    is multiplied by at least the smallest of them. Where only the group test can reach
    alpha the run goes on (:func:`document_floor_note` says so)."""
    import math

    from copyprobe.data.tables import DOC_NAMES
    from copyprobe.evaluation.verdicts import clean_needed, smallest_adjusted_p

    k = len({str(e.doc_id) for e in clean})
    n = len({str(e.doc_id) for e in suspect})
    factor = min(factors.values()) if factors else 1.0
    needed = clean_needed(test, alpha / factor, n)
    if k >= needed and smallest_adjusted_p(test, k, n, factor) <= alpha:
        return
    # the group verdict can still say something (factor times p, in the verdict's order of operations)
    if n >= 2 and k >= 2 and factor * (1 / math.comb(n + k, n)) <= alpha:
        return
    witness = (f", times {factor:g} for the reference model's choice of test (the witness)" if factor > 1 else "")
    holm = f", {n} times that after Holm's adjustment over {n} suspects" if n > 1 else ""
    why = (f"its smallest p-value with {k} clean document{'s' * (k != 1)} is 1/{k + 1} = {1 / (k + 1):.3g}{witness}"
           f"{holm}, above alpha {alpha:g}" if test == "rank" else f"it needs a standard deviation of at least {needed} clean "
           f"documents' scores and there {'is' if k == 1 else 'are'} {k}")
    one_file = (f" (the {len(clean)} clean passages are one document: so is a book, and a data file without a "
                f"document column, {', '.join(DOC_NAMES[:3])}, ...)" if k == 1 and len(clean) > 1 else "")
    # the group verdict's need, where fewer clean documents than a document's would let it speak
    group_k = next((c for c in range(2, needed) if factor / math.comb(n + c, n) <= alpha), None) if n >= 2 else None
    group = f" ({group_k} for the group verdict alone)" if group_k is not None else ""
    raise DataError(f"the answer is fixed before any scoring: the {test} test cannot reach alpha {alpha:g} ({why}), "
                    f"so every document would be 'cannot tell'; nothing was scored. Give at least {needed} clean "
                    f"documents{group}" + (", raise alpha, or use the t test" if test == "rank" else "") + one_file)


def document_floor_note(test: str, alpha: float, suspect: list[Example], clean: list[Example],
                        factors: Mapping[str, float] | None = None) -> str | None:
    """A note when no single document can reach ``alpha`` after Holm's adjustment (the rank
    test's smallest adjusted p-value is n/(k+1)) though the group test can: the run goes on
    for the group verdict, and the note says beforehand that every document will be "cannot
    tell" whatever its score."""
    from copyprobe.evaluation.verdicts import clean_needed, smallest_adjusted_p

    k = len({str(e.doc_id) for e in clean})
    n = len({str(e.doc_id) for e in suspect})
    # factor 1 whatever ``factors`` say: a suspect whose witness gets no p-value keeps all of
    # alpha, and the note must hold for every document
    del factors
    floor = smallest_adjusted_p(test, k, n)
    if n < 2 or floor <= alpha:
        return None
    return (f"no single document can get 'evidence': with {n} suspect and {k} clean documents the {test} test's "
            f"smallest Holm-adjusted p-value is {floor:.3g}, above alpha {alpha:g}, so each document will be 'cannot "
            f"tell' and only the group verdict can speak; {clean_needed(test, alpha, n)} clean documents "
            "(or fewer suspects at once) would let a document reach alpha")


def calibrated_path_note(test: str, alpha: float, clean: list[Example],
                         factors: Mapping[str, float] | None) -> str | None:
    """A note when the witness's calibrated path cannot reach alpha with these clean
    documents (the rank test at alpha / 5) though the run as a whole can: a suspect the
    reference model does not recognise will be 'cannot tell', whatever its score."""
    from copyprobe.evaluation.verdicts import clean_needed, min_p

    k = len({str(e.doc_id) for e in clean})
    if not factors or factors["calibrated"] <= 1 or min_p(test, k) * factors["calibrated"] <= alpha:
        return None
    return (f"a suspect the reference model does not recognise is tested on the calibrated score at alpha / "
            f"{factors['calibrated']:g} (the witness's share), which the {test} test cannot reach with {k} clean "
            f"documents (its smallest p-value is 1/{k + 1}): such a suspect is 'cannot tell' whatever its score; "
            f"{clean_needed(test, alpha / factors['calibrated'])} clean documents would let it reach that share")


def select_passages(examples: list[Example], cap: int | None) -> tuple[list[Example], dict[str, Any]]:
    """The passages the test will read (:func:`copyprobe.evaluation.verdicts.passages_to_read`),
    in their order, and what was chosen for the record: M, and the documents that set it
    when they, not the cap, did."""
    from copyprobe.evaluation.verdicts import passages_to_read

    by_doc: dict[str, list[Example]] = {}
    for e in examples:
        by_doc.setdefault(str(e.doc_id), []).append(e)
    chosen = passages_to_read({d: len(v) for d, v in by_doc.items()}, cap)
    keep = {id(by_doc[d][i]) for d, idx in chosen.items() for i in idx}
    selected = [e for e in examples if id(e) in keep]
    m = min((len(idx) for idx in chosen.values()), default=0)
    shortest = sorted(d.split(":", 1)[1] for d, v in by_doc.items() if len(v) == m) if cap is None or m < cap else []
    return selected, {"passages_per_document": m, "n_passages": len(examples), "n_scored": len(selected),
                      "set_by": shortest[:5]}


def unread_note(examples: list[Example], selection: Mapping[str, Any], shown: int = 3) -> str | None:
    """A note when the shortest documents, not the cap, leave most of a suspect unread: a
    book audited beside short clean documents is judged on as few passages as they have,
    which the results alone do not show."""
    from collections import Counter

    m, set_by = selection["passages_per_document"], selection["set_by"]
    counts = Counter(str(e.doc_id).split(":", 1)[-1] for e in examples if e.label == 1)
    long = sorted((d for d, n in counts.items() if n > 2 * m), key=lambda d: (-counts[d], d))
    if not set_by or not m or not long:
        return None
    names = ", ".join(set_by[:shown]) + (" ..." if len(set_by) > shown else "")
    if len(long) == 1:
        unread = f"most of {long[0]} went unread ({m} of its {counts[long[0]]} passages read)"
    else:
        read = "; ".join(f"{d}: {m} of {counts[d]}" for d in long[:shown]) + ("; ..." if len(long) > shown else "")
        unread = f"most of {len(long)} suspect documents went unread ({read})"
    short_suspects = [d for d in set_by if d in counts]
    advice = (f"audit the short suspect{'s' * (len(short_suspects) != 1)} ({', '.join(short_suspects[:shown])}) "
              "apart from the long ones to read more of these" if short_suspects
              else "clean documents as long as the suspects let it read more")
    return (f"the test reads {m} passage{'s' * (m != 1)} of each document (evenly spaced), as many as the shortest "
            f"have ({names}), so {unread}; {advice}")


def choose_method(method: str, capabilities: set[str] | frozenset[str], target_spec: str,
                  examples: list[Example], params: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """The method an audit runs, and a note when ``auto`` chose it; a one-line error
    before any work when the choice cannot work on this model and data."""
    from copyprobe.backends.base import TOKEN_LOGPROBS
    from copyprobe.methods.decop import given_options

    def has_paraphrases() -> bool:
        try:
            return all(given_options(e) is not None for e in examples)
        except Exception:
            return False

    note = None
    if method == AUTO:
        if TOKEN_LOGPROBS in capabilities:
            method = DEFAULT_LOGIT_METHOD
            note = (f"method auto -> {method}: the model gives token log-probabilities "
                    f"(benchmarks/results/audit_validity.md); a suspect the reference model itself recognises is "
                    f"tested on the target's own likelihood (benchmarks/results/audit_real.md)")
        elif has_paraphrases():
            method = "decop"
            note = "method auto -> decop: the model gives no token log-probabilities; paraphrases are in the data"
        else:
            method = DEFAULT_GENERATION_METHOD
            note = (f"method auto -> {method}: the model only generates text and the data holds no paraphrases "
                    f"for DE-COP (docs/audit.md, 'What no evidence rules out': this finds far fewer trained "
                    f"documents than a log-probability method)")
    for (name, key, value), why in INVALID_FOR_AUDIT.items():
        if method == name and str((params or {}).get(key, "")).strip() == value:
            raise ConfigError(why)
    if method == "decop" and not has_paraphrases():
        paraphraser = str((params or {}).get("paraphraser", "target")).strip()
        style = str((params or {}).get("paraphrase_style", "three_in_one")).strip()
        who = target_spec if paraphraser == "target" else paraphraser
        if any(name in who.lower() for name in UNABLE_PARAPHRASERS.get(style, ())):
            able = ("; with decop.paraphrase_style=one_per_request, qwen2.5-coder-1.5b-instruct can"
                    if style == "three_in_one" else "")
            raise ConfigError(
                f"DE-COP needs three paraphrases of every passage and {who} cannot write them "
                f"({style.replace('_', ' ')}, benchmarks/results/audit_exposure.md){able}: supply paraphrases in "
                f"the data (Example_A..Example_D + Answer, docs/audit.md), set the parameter decop.paraphraser to a "
                f"model that can, or use a log-probability method (method auto)")
    return method, note


def known_capabilities(target: Any) -> frozenset[str]:
    """What ``target`` can do, asked of its server first where only the server can tell
    (an OpenAI-compatible server that may give no prompt log-probs): auto chooses by it."""
    from copyprobe.backends.base import TOKEN_LOGPROBS

    probe = getattr(target, "probe_capabilities", None)
    return probe({TOKEN_LOGPROBS}) if probe else frozenset(target.capabilities)


class AuditCollection(ScoringCollection):
    """detect's collect on the suspect and clean passages, the method chosen once the
    model's capabilities are known."""

    def __init__(self, examples: list[Example], method: str, params: Mapping[str, Any] | None,
                 settings: dict[str, Any], n_bootstrap: int, seed: int = 0, blind_baseline: bool = True,
                 built: list[Method] | None = None, skipped: dict[str, dict] | None = None):
        # built: the fixed method, made before the model loads, so that begin() checks its
        # parameters against the data (a prefix file, documents to learn from) before it loads;
        # skipped: rows with no text each side's reader left out ({role: {n_skipped, first_skipped, path}})
        skipped = dict(skipped or {})
        n_skipped = sum(side["n_skipped"] for side in skipped.values())
        data_info = {"path": None, "sha256": None, "n_rows": len(examples), "n_skipped": n_skipped}
        if skipped:
            data_info["skipped"] = skipped
        super().__init__(examples, list(built or []), data_info,
                         seed=seed, n_bootstrap=n_bootstrap, blind_baseline=blind_baseline,
                         chunk_passages=AUDIT_CHUNK_PASSAGES,
                         # a learning method fitted on passages of a suspect document learns
                         # that document, and its other passages then score as "suspect"
                         train_split="document")
        self.method, self.params, self.settings = method, params, settings

    def skipped_notes(self) -> list[str]:
        return [skipped_rows_note(side["n_skipped"], side.get("first_skipped"), f"{role} {side['path']}: ")
                for role, side in self.data_info.get("skipped", {}).items()]

    def begin(self) -> None:
        if any(m.trains for m in self.methods):
            self._check_documents_to_learn_from(self.method)
        super().begin()

    def choose(self, session: Any) -> list[Method]:
        from copyprobe.scoring import build_methods

        method, params = self.method, self.params
        if method == AUTO:
            by_method = dict(params or {})
            method, note = choose_method(method, known_capabilities(session.target), session.target_spec,
                                         self.examples, by_method.get("decop"))
            # what auto picks, it runs as the exposure benchmark found it strongest; the
            # user's own parameters for that method win
            params = {**AUTO_PARAMS.get(method, {}), **(by_method.get(method) or {})} or None
        else:
            _, note = choose_method(method, session.target.capabilities, session.target_spec, self.examples, params)
        self.method = method
        from copyprobe.evaluation.validity import caution

        warning = caution(method, non_default_params(method, params, session.target_spec),
                          test=self.settings["test"], alpha=self.settings["alpha"],
                          guard_test=self.settings["guard_test"], passage_words=self.settings.get("passage_words"))
        # the witness's share of alpha, now that the method and the target are known: auto's
        # choice, or a reference the spec could not resolve before loading, is refused here,
        # still before any scoring, when no path can reach alpha (a run checked before the
        # load with the same factors passes again)
        factors = witness_factors(method, params, session.target_spec, self.settings.get("published"))
        clean = [e for e in self.examples if e.label == 0]
        check_answer_not_fixed(self.settings["test"], self.settings["alpha"],
                               [e for e in self.examples if e.label == 1], clean, factors)
        path_note = calibrated_path_note(self.settings["test"], self.settings["alpha"], clean, factors)
        floor_note = document_floor_note(self.settings["test"], self.settings["alpha"],
                                         [e for e in self.examples if e.label == 1], clean, factors)
        self.notes = [n for n in (note, warning, floor_note, path_note) if n]
        self.section = ("audit", {**self.settings, "method": method})
        if self.methods:  # fixed, built and checked before the model loaded
            return self.methods
        methods = build_methods([method], {method: dict(params)} if params else None)
        if any(m.trains for m in methods):
            self._check_documents_to_learn_from(method)
        return methods

    def _check_documents_to_learn_from(self, method: str) -> None:
        """A learning method is fitted on whole suspect and clean documents and tests the
        others: it needs two documents on each side, said in an audit's words."""
        docs = {role: {e.doc_id for e in self.examples if e.label == label} for role, label in (("suspect", 1), ("clean", 0))}
        short = [f"{len(docs[role])} {role} document{'s' if len(docs[role]) != 1 else ''}"
                 for role in docs if len(docs[role]) < 2]
        if short:
            raise DataError(f"method {method!r} learns from whole documents and tests the others, so it needs at "
                            f"least 2 suspect and 2 clean documents; the audit has {' and '.join(short)} "
                            f"(the methods reference and min_k_pp test a single document)")


def non_default_params(method: str, params: Mapping[str, Any] | None,
                       target_spec: str | None = None) -> dict[str, Any]:
    """The parameters of a run's method that differ from the method's defaults (a method
    this version does not know: all of them). A model left at ``auto`` is recorded as the
    model it resolved to (reference.model: gemma-3-270m for a SmolLM2 target), which is
    still the default: left out when it is what ``auto`` gives ``target_spec`` (or, with no
    target given, always)."""
    from copyprobe.backends.specs import default_reference
    from copyprobe.registry import method_class

    try:
        cls = method_class(method)
    except ConfigError:  # a run recorded by a version with other methods
        return dict(params or {})
    defaults = cls.param_defaults()
    resolved = {name for name in cls.auto_model_params() if defaults.get(name) == AUTO}
    auto_model = default_reference(target_spec) if target_spec else None
    return {k: v for k, v in (params or {}).items()
            if not (k in resolved and (auto_model is None or str(v) == auto_model))
            and (k not in defaults or str(defaults[k]) != str(v))}


def check_audit_rows(rows: list[dict[str, Any]], where: Any) -> None:
    """Rows an audit's verdicts can be read from: each names its document (a row without one
    would be left out of the test unseen; run_files' schema already checked each label)."""
    for line, row in enumerate(rows, 1):
        doc = row.get("doc_id")
        if not isinstance(doc, str) or not doc:
            raise DataError(f"{where} line {line}: 'doc_id' is missing or not a string (got {doc!r})")


def derive_verdicts(run: record.Run) -> Derived:
    """detect's metrics, and verdicts.json: one verdict per suspect document."""
    from copyprobe.backends.cutoffs import could_have_seen
    from copyprobe.evaluation.verdicts import audit_verdicts

    derived = derive_metrics(run)
    settings = run.record.audit or {}
    if "method" not in settings or "alpha" not in settings:
        raise DataError(f"{run.dir / 'run.json'} has no audit method and alpha to recompute verdicts from")
    texts = {str(e.get("id")): e.get("text", "") for e in run.examples or []}
    method = settings["method"]
    target_spec = (run.record.model or {}).get("spec")
    params = (run.record.methods or {}).get(method) or {}
    published = settings.get("published")  # checked when the run was made, or by rescore
    published = published.strip() if isinstance(published, str) else published  # as check_published reads it
    reference = params.get("model") if isinstance(params.get("model"), str) else None
    seen, basis = could_have_seen(reference, published)
    target_seen, target_basis = could_have_seen(target_spec, published)
    report = audit_verdicts(run.scores or [], method, run.record.train_ids, float(settings["alpha"]), texts,
                            test=str(settings.get("test", "rank")), guard_test=str(settings.get("guard_test", "rank")),
                            method_params=non_default_params(method, params, target_spec=target_spec),
                            witness_context={"model": reference, "could_have_seen": seen, "basis": basis},
                            passage_words=settings.get("passage_words"),  # check_recorded read it
                            context={"published": published, "target": {"model": target_spec,
                                                                        "could_have_seen": target_seen,
                                                                        "basis": target_basis}})
    derived.files["verdicts.json"] = report
    return derived


def check_recorded(run: record.Run) -> None:
    """A saved audit as strictly as the command line reads it (an alpha of 2 turned every
    verdict into evidence; a method that is no column gave 'cannot tell' everywhere)."""
    from copyprobe.backends.cutoffs import check_published
    from copyprobe.data.passages import check_passage_words
    from copyprobe.detect import check_method_column
    from copyprobe.errors import SettingError

    section = run.record.audit
    if section is None:
        return
    where = run.dir / "run.json"
    SETTINGS.check_recorded(section, f"{where}: 'audit")
    try:
        check_published(section.get("published"))
    except SettingError as exc:
        raise DataError(f"{where}: 'audit.published' {exc.problem}") from None
    words = section.get("passage_words")  # None: a run from before it was recorded, or passages as given
    if words is not None:
        try:
            check_passage_words(words)
        except ConfigError:
            raise DataError(f"{where}: 'audit.passage_words' must be a whole number of words, at least 1, or "
                            f"null (got {words!r})") from None
    check_audit_rows(run.scores or [], run.dir / "scores.jsonl")
    check_method_column(run, section.get("method"), "audit")


KIND = RunKind("audit", {"examples.jsonl": True, "scores.jsonl": True, "metrics.json": False,
                         "verdicts.json": False}, derive_verdicts, resample, check_recorded)


@record.discards_new_out_dir  # a run refused after making its directory leaves none behind
def audit(
    model: Any,
    suspect: Any,
    clean: Any,
    method: str = SETTINGS.default("method"),
    *,
    params: Mapping[str, Any] | None = None,
    alpha: float = SETTINGS.default("alpha"),
    test: str = SETTINGS.default("test"),
    out: str | Path | None = None,
    read_options: Mapping[str, Any] | None = None,
    n_bootstrap: int = SETTINGS.default("n_bootstrap"),
    limit: int | None = SETTINGS.default("limit"),
    seed: int = SETTINGS.default("seed"),
    passages_per_document: int | None = SETTINGS.default("passages_per_document"),
    guard_test: str = SETTINGS.default("guard_test"),
    published: str | None = SETTINGS.default("published"),
    blind_baseline: bool = True,
    **run_options: Any,
) -> AuditResult:
    """Score ``suspect`` and ``clean`` (paths, Datasets or lists of texts/Examples) with
    ``method`` on ``model`` and give a verdict per suspect document (``verdicts.json``
    in ``out``): ``evidence`` / ``no evidence`` / ``cannot tell``, each with its reason.
    ``test``: ``t`` (default; assumes normal document scores) or ``rank`` (exact,
    distribution-free, needs at least 1/alpha - 1 clean documents). ``params``: the method's parameters (with ``method="auto"``: a mapping from
    method name to its parameters, used for the method chosen); other options (cache,
    batch_size, device, dtype, api_options, progress, command) as for :func:`detect`.
    ``limit``: only the first ``limit`` passages of each side (a quick try-out).
    ``passages_per_document``: the most passages of a document the test reads (evenly spaced;
    the shortest document sets the number for all); only those are scored.
    ``guard_test``: how the style/length guard ranks a suspect (``t`` or ``rank``).
    ``published``: when the suspect text was first published (YYYY[-MM[-DD]]): the verdict
    says whether the target and the reference model could have seen it, and a reference
    that cannot have is trusted without asking it as a witness."""
    import time

    started = time.perf_counter()
    values = SETTINGS.check({"method": method, "alpha": alpha, "test": test, "limit": limit, "seed": seed,
                             "n_bootstrap": n_bootstrap, "passages_per_document": passages_per_document,
                             "guard_test": guard_test, "published": published})
    from copyprobe.backends.cutoffs import check_published

    values["published"] = check_published(published)
    for role, side in (("suspect", suspect), ("clean", clean)):
        refuse_empty_path(side, f"the {role}", _NAME_A_SIDE)  # before the same-file test: two unset variables are the same ""
    if isinstance(suspect, (str, Path)) and isinstance(clean, (str, Path)) and \
            Path(suspect).resolve() == Path(clean).resolve():
        raise DataError(f"suspect and clean are the same file {suspect}: the clean set must hold other documents")
    from copyprobe.scoring import build_methods

    built = None
    if "," in method:  # the list detect takes: "unknown method 'loss,zlib'; did you mean 'zlib'?" before
        raise ConfigError(f"an audit tests one method, got {method!r}: give one (detect scores several at once)")
    if method != AUTO:
        built = build_methods([method], {method: dict(params)} if params else None)  # a typo costs no loading
    elif params:
        build_methods(list(params), {m: dict(v) for m, v in params.items()})
    if out is not None:
        record.prepare_out_dir(out, "audit", model)
    options = {k: v for k, v in dict(read_options or {}).items() if v is not None}
    read_files: dict[str, list] = {"suspect": [], "clean": []}
    cut_at: dict[str, int | None] = {}
    skipped: dict[str, dict] = {}
    from copyprobe.data.readers import said_while_reading

    with said_while_reading() as said:
        suspect_examples = audit_examples(suspect, "suspect", 1, read_files["suspect"], cut_at, skipped, **options)
        clean_examples = audit_examples(clean, "clean", 0, read_files["clean"], cut_at, skipped, **options)
    if limit is not None:
        suspect_examples, _ = first_passages(suspect_examples, {}, limit)
        clean_examples, _ = first_passages(clean_examples, {}, limit)
    check_overlap(suspect_examples, clean_examples)
    check_duplicates(suspect_examples, "suspect")
    check_duplicates(clean_examples, "clean")
    # the witness's factor is known here for a named method whose reference resolves without
    # the model (auto's choice, and a reference left to the loaded model's spec, wait for it:
    # charged now, a factor the verdicts would not apply could refuse a run they could claim)
    target_spec = record.spec_of(model)
    known = method != AUTO and reference_of(params, target_spec) is not None
    factors = witness_factors(method, params, target_spec, values["published"]) if known else None
    check_answer_not_fixed(values["test"], values["alpha"], suspect_examples, clean_examples, factors)
    examples, selection = select_passages(suspect_examples + clean_examples, values["passages_per_document"])
    settings = {
        **SETTINGS.record(values, RECORDED),
        "suspect": str(suspect) if isinstance(suspect, (str, Path)) else None,
        "clean": str(clean) if isinstance(clean, (str, Path)) else None,
        "input_files": read_files,
        "selection": selection,
        # the null battery's count an evidence verdict quotes is the one at this length;
        # None: passages given as they are, or the two sides cut differently
        "passage_words": cut_at["suspect"] if cut_at["suspect"] == cut_at["clean"] else None,
    }
    collection = AuditCollection(examples, method, params, settings, n_bootstrap, seed, blind_baseline, built,
                                 skipped)
    unread = unread_note(suspect_examples, selection)
    collection.data_notes = [*said, unread] if unread else said
    done = execute(KIND, model, collection, out=out, started=started, **run_options)
    return AuditResult(verdicts=done.files["verdicts.json"], detect=scored_result(done, collection))
