"""How often a method claims training on documents no model has seen, in numbers.

An ``evidence`` verdict is as good as the test's false-claim rate. ``benchmarks/
bench_audit_validity.py`` audits 160 documents written for copyprobe after every bundled
model was trained, a short version of each and long ones joined from them (its null battery:
326 documents, of which the 15 scenarios read 186, with 108 suspects none trained on by
anyone) with each method; its summary ships with the package (``validity.json``,
written by ``bench_audit_validity.py summary``) so that every ``evidence`` verdict can say
how many false claims audits with the same method and settings made there, or that they
were never tested. Its rows are per passage length too (passages of at most 64 words, and
for some scores 128, the command's default): a verdict quotes its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from copyprobe.evaluation.exposure import load_table, params_text, same_params

TABLE = Path(__file__).with_name("validity.json")


COUNTS = ("documents", "false_claims", "cannot_tell", "collections", "collection_claims")


def null_records(method: str, params: Mapping[str, Any] | None = None,
                 table: Mapping[str, Any] | None = None) -> dict[int | None, Mapping[str, Any]]:
    """The null battery's records for ``method`` with exactly these non-default ``params``,
    one per passage length the battery was cut at (``passage_words``; None in a table that
    did not record it), shortest first: empty when never run with them. Run on several models, the counts
    are summed over them, so that a false claim on any model counts, and each model's row is
    kept (``by_model``): the same documents audited on another model are more audits, not
    more documents. Lengths are kept apart: the same documents cut into longer passages are
    another test, whose false claims need not be the shorter ones'."""
    table = load_table(str(TABLE)) if table is None else table
    rows = [r for r in (table.get("methods") or {}).get(method) or [] if same_params(r.get("params"), params)]
    by_length: dict[int | None, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_length.setdefault(row.get("passage_words"), []).append(row)
    return {length: _merged(by_length[length]) for length in sorted(by_length, key=lambda n: n or 0)}


def _merged(rows: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    if len(rows) == 1:
        return rows[0]
    merged = {**rows[0], **{key: sum(r[key] for r in rows) for key in COUNTS}}
    merged["by_model"] = rows
    names = [str(r["model"]) for r in rows]
    merged["model"] = ", ".join(names[:-1]) + " and " + names[-1]
    spacing = {r.get("passages_per_document") for r in rows}
    merged["passages_per_document"] = spacing.pop() if len(spacing) == 1 else None
    return merged


def null_record(method: str, params: Mapping[str, Any] | None = None,
                table: Mapping[str, Any] | None = None, passage_words: int | None = None
                ) -> Mapping[str, Any] | None:
    """The null battery's record for ``method`` with exactly these non-default ``params``
    (None: never run with them) at the audit's passage length ``passage_words``; where the
    battery has none at that length (or the audit's is not known: passages given as a
    table), the nearest length it has, the one audited on most models when unknown (its
    ``passage_words`` says which; :func:`null_records` has them all)."""
    return _nearest(null_records(method, params, table), passage_words)


def _nearest(records: Mapping[int | None, Mapping[str, Any]], passage_words: int | None
             ) -> Mapping[str, Any] | None:
    """Of :func:`null_records`, the record :func:`null_record` reads."""
    if not records:
        return None
    if passage_words in records:
        return records[passage_words]
    lengths = list(records)
    if passage_words is None or None in lengths:
        # most models first, then the shorter passages (the battery's own length, 64 words);
        # rows of no length (a table from before lengths were recorded) have no distance
        return records[min(lengths, key=lambda n: (-len(_per_model(records[n])), n or 0))]
    return records[min(lengths, key=lambda n: (abs(n - passage_words), n))]


def _per_model(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(row.get("by_model") or [row])


def _passages(n: int | None) -> str:
    return f"{n} passage{'s' if n != 1 else ''} a document"


def _audited(row: Mapping[str, Any], what: str) -> tuple[str, str]:
    """('108 documents no model has seen', 'smollm2-135m-instruct'): on several models, the
    documents each audited, when every model audited the same, else each model's count."""
    models = _per_model(row)
    cut = f", passages of at most {row['passage_words']} words" if row.get("passage_words") else ""
    if len({(m[what], m.get("passages_per_document")) for m in models}) == 1:
        spacing = models[0].get("passages_per_document")
        on = (f"each audited on {row['model']}" if len(models) > 1 else str(row["model"])) + (
            f", {_passages(spacing)}" if spacing else "") + cut
        return f"{models[0][what]} {what} no model has seen", on
    each = ", ".join(f"{m['model']} ({m[what]}" + (f", {_passages(m['passages_per_document'])}"
                                                  if m.get("passages_per_document") else "") + ")" for m in models)
    return f"{what} no model has seen", f"audited on {each}{cut}"


def _tally(row: Mapping[str, Any], what: str, alpha: float, always_of: bool = False) -> str:
    """'on 2, where alpha = 0.01 allows about 1.1' (one model; ``always_of``: 'in 2 of 108, ...'),
    'in 1 of 432 (smollm2 0, gemma 1, ...), where ...' (several, each model named when any claimed)."""
    n, of = _claims(row)[what]
    promised = f", where alpha = {alpha} allows about {alpha * of:.2g}" if n > 0 else ""
    models = _per_model(row)
    if len(models) == 1 and not always_of:
        return f"on {n}{promised}"
    which = "" if not n or len(models) == 1 else (
        " (" + ", ".join(f"{m['model']} {_claims(m)[what][0]}" for m in models) + ")")
    return f"in {n} of {of}{which}{promised}"


def _never_run(row: Mapping[str, Any], passage_words: int | None) -> str:
    """'; the battery was never run with passages of at most 96 words, this audit's length', or ''."""
    if passage_words is None or row.get("passage_words") in (None, passage_words):
        return ""
    return f"; the battery was never run with passages of at most {passage_words} words, this audit's length"


def _other_lengths(row: Mapping[str, Any], records: Mapping[int | None, Mapping[str, Any]], what: str,
                   alpha: float, passage_words: int | None) -> str:
    """'; with passages of at most 64 words, audits claimed training in 1 of 432 (smollm2 0,
    gemma 1, ...), where alpha = 0.01 allows about 4.3': the battery's counts at the lengths
    other than the quoted ``row``'s (a table's rows with no length are not listed), and
    :func:`_never_run`; '' when there is nothing to add."""
    out = ""
    for length, other in records.items():
        if length is None or length == row.get("passage_words"):
            continue
        # the models are named with the count when any claimed, else here
        on = "" if _claims(other)[what][0] and len(_per_model(other)) > 1 else f" ({other['model']})"
        out += f"; with passages of at most {length} words{on}, audits claimed training {_tally(other, what, alpha, True)}"
    return out + _never_run(row, passage_words)


def claimed_by_length(flagged: list[tuple[Mapping[str, Any], Mapping[str, tuple[int, int]]]]) -> str:
    """'5 of 216 audits of documents no model has seen (passages of at most 64 words) and ...':
    each (row, counts) of :func:`claimed` with the passage length of its row."""
    return " and ".join(f"{claimed(row, counts)} no model has seen" + (
        f" (passages of at most {row['passage_words']} words)" if row.get("passage_words") else "")
        for row, counts in flagged)


def above_alpha(row: Mapping[str, Any], alpha: float) -> dict[str, tuple[int, int]]:
    """The battery's counts (of documents, of collections: false claims, audits) where it
    claimed training on more than ``alpha`` of its audits, in all or on any one model: what
    a valid test at alpha is expected to keep to (a point estimate, enough for a note)."""
    out = {}
    for what, (n, of) in _claims(row).items():
        if n > alpha * of or any(_claims(m)[what][0] > alpha * _claims(m)[what][1] for m in _per_model(row)):
            out[what] = (n, of)
    return out


def applies(table: Mapping[str, Any], test: str, alpha: float, guard_test: str) -> bool:
    """The battery's counts hold for an audit with its test, alpha and guard only."""
    audit = table.get("audit") or {}
    return (audit.get("test"), audit.get("alpha"), audit.get("guard_test")) == (test, alpha, guard_test)


@dataclass(frozen=True)
class _Lookup:
    name: str  # the method with its non-default parameters, as a verdict names it
    where: str  # the results file the battery's counts come from
    row: Mapping[str, Any] | None  # the battery's row; None: never run with these settings
    records: Mapping[int | None, Mapping[str, Any]]  # its rows at every passage length


def _claims(row: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The battery's false claims and audits, of documents and of collections."""
    return {"documents": (row["false_claims"], row["documents"]),
            "collections": (row["collection_claims"], row["collections"])}


def made_claims(row: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The battery's counts (false claims, audits) of documents and of collections where it
    claimed training at all, on any model."""
    return {what: (n, of) for what, (n, of) in _claims(row).items() if n}


def claimed(row: Mapping[str, Any], counts: Mapping[str, tuple[int, int]]) -> str:
    """'2 of 216 audits of documents and 1 of 4 audits of collections': ``counts`` of
    ``row`` in words; summed over several models, they are audits of each document."""
    audits = "audits of " if len(_per_model(row)) > 1 else ""
    return " and ".join(f"{n} of {of} {audits}{what}" for what, (n, of) in counts.items())


def _lookup(method: str, params: Mapping[str, Any] | None, test: str, alpha: float, guard_test: str,
            table: Mapping[str, Any] | None, passage_words: int | None) -> _Lookup | None:
    """What the battery says of ``method`` with ``params`` at (or nearest) the audit's
    passage length; None when the audit's test, alpha or guard differ from the battery's
    (its counts say nothing about those)."""
    table = load_table(str(TABLE)) if table is None else table
    if not table or not applies(table, test, alpha, guard_test):
        return None
    used = params_text(params)
    records = null_records(method, params, table)
    return _Lookup(f"{method} ({used})" if used else method,
                   table.get("source", "benchmarks/results/audit_validity.md"), _nearest(records, passage_words),
                   records)


def false_claims(method: str, params: Mapping[str, Any] | None = None, *, collection: bool = False,
                 test: str = "t", alpha: float = 0.01, guard_test: str = "t",
                 table: Mapping[str, Any] | None = None, passage_words: int | None = None) -> str | None:
    """One clause for an ``evidence`` reason: the false claims audits with ``method`` (and
    these non-default ``params``) made on the null battery, of documents or (``collection``)
    of collections, with passages of the audit's length ``passage_words`` (None: not known)
    or, never run at it, of the nearest length, named; that they were never run there; None
    when the audit's test, alpha or guard differ from the battery's."""
    found = _lookup(method, params, test, alpha, guard_test, table, passage_words)
    if found is None:
        return None
    row = found.row
    if row is None:
        return (f"how often {found.name} claims training on documents no model has seen is not known: the null "
                f"battery ({found.where}) has no count for it with these settings")
    what = "collections" if collection else "documents"
    seen, on = _audited(row, what)
    comma = "," if len(_per_model(row)) > 1 else ""
    return (f"on {seen} ({found.where}, {on}){comma} audits with {found.name} claimed training "
            f"{_tally(row, what, alpha)}{_other_lengths(row, found.records, what, alpha, passage_words)}")


def caution(method: str, params: Mapping[str, Any] | None = None, *, test: str = "t", alpha: float = 0.01,
            guard_test: str = "t", table: Mapping[str, Any] | None = None,
            passage_words: int | None = None) -> str | None:
    """A note for an audit whose method (with these settings) made more false claims on the
    null battery than alpha allows, or has no count there; None when it made no more (the
    evidence verdict still quotes the count), or when the audit's test, alpha or guard are
    not the battery's (:func:`above_alpha`: 2 of 108 audits at alpha 0.01 is above what
    alpha allows, 1 of 432 over four models is not), at the audit's passage length
    ``passage_words`` (None: not known) or any other: the battery's longer passages are no
    reassurance about its shorter ones, nor the reverse, so a count above alpha at any
    length is said, with its length."""
    found = _lookup(method, params, test, alpha, guard_test, table, passage_words)
    if found is None:
        return None
    row = found.row
    if row is None:
        return (f"{found.name} has no count on the null battery ({found.where}) with these settings: how often it "
                f"claims training on documents no model has seen is not known; method auto picks a method that has one")
    # the audit's own length (or the nearest) first
    rows = [row] + [r for length, r in found.records.items() if length != row.get("passage_words")]
    flagged = [(r, counts) for r in rows if (counts := above_alpha(r, alpha))]
    if not flagged:
        return None
    return (f"{found.name} claimed training on {claimed_by_length(flagged)} on the null battery ({found.where}), at "
            f"the alpha of this audit ({alpha}): read its evidence as weaker than alpha says"
            f"{_never_run(row, passage_words)}")
