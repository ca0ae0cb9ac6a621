"""What a "no evidence" verdict rules out, in numbers.

A test that did not reject says nothing by itself about training: a model can see a text
and keep no trace a score finds. What it does say depends on how strongly the document
was seen. ``benchmarks/bench_audit_exposure.py`` plants documents in models at known
exposures (epochs, repeats, dilution among other text) and counts how many the audit
finds with each method; its summary ships with the package (``exposure_power.json``,
written by ``bench_audit_exposure.py summary``) so that every ``no evidence`` verdict can
say, for the method used, at which exposures such an audit found documents and at which
it did not.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

TABLE = Path(__file__).with_name("exposure_power.json")


@lru_cache(maxsize=4)
def load_table(path: str | None = None) -> dict[str, Any]:
    """The shipped summary (empty when the file is missing or unreadable)."""
    file = Path(path) if path else TABLE
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def strength(row: Mapping[str, Any]) -> float:
    """Orders exposures from strongest to weakest: more showings, less other text around them."""
    return math.log(max(1, int(row["exposures"]))) - math.log1p(float(row.get("dilution") or 0.0))


def _amount(x: float) -> str:
    """10.007 -> '10', 1.0105 -> '1', 0.5 -> '0.5': a plant's dilution is what its seeded
    prefix of the background reached, a hair above the asked-for multiple."""
    return f"{round(x) if x >= 10 else round(x, 1):g}"


def describe(row: Mapping[str, Any]) -> str:
    """'seen 3 times with no other text', 'seen once among 10x as much other text' ..."""
    n = int(row["exposures"])
    times = "once" if n == 1 else "twice" if n == 2 else f"{n} times"
    dilution = float(row.get("dilution") or 0.0)
    return f"seen {times}" + (f" among {_amount(dilution)}x as much other text" if dilution else " with no other text")


def _picked(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of one model's rows, strongest first: the weakest exposure where at least half the
    documents were found, the weakest where any were, and the strongest weaker one where
    none were."""
    half = [r for r in rows if r["found"] * 2 >= r["of"] and r["found"] > 0]
    some = [r for r in rows if r["found"] > 0]
    none = [r for r in rows if r["found"] == 0]
    picked: list[Mapping[str, Any]] = []
    for group in (half, some):
        if group and group[-1] not in picked:
            picked.append(group[-1])
    weaker_none = [r for r in none if not picked or strength(r) < strength(picked[-1])]
    if weaker_none:
        picked.append(weaker_none[0])
    elif not picked and none:
        picked.append(none[0])
    return picked


def same_params(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Parameter sets compared as the command line gives them (0.5 and "0.5" are one value)."""
    return _differ(a, b) == 0


def _differ(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> int:
    """How many parameters two non-default parameter sets set differently (absent = default)."""
    a, b = a or {}, b or {}
    return sum(str(a.get(k)) != str(b.get(k)) for k in set(a) | set(b))


def params_text(params: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((params or {}).items()))


def rules_out(method: str, table: Mapping[str, Any] | None = None,
              params: Mapping[str, Any] | None = None) -> str | None:
    """One clause for a ``no evidence`` reason: per planted model, at which exposures the
    benchmark's audits with ``method`` found documents (the weakest where they found at
    least half, the weakest where they found any) and the strongest weaker one where they
    found none; None when the method was not benchmarked.

    ``params``: the parameters the audit ran the method with that differ from its
    defaults. Rows benchmarked with the same parameters are used; without any, the rows of
    the benchmarked setting closest to them (fewest parameters set differently, the
    defaults first among equals), said to be so."""
    table = load_table() if table is None else table
    all_rows: Sequence[Mapping[str, Any]] = (table.get("methods") or {}).get(method) or []
    if not all_rows:
        return None
    rows = [r for r in all_rows if same_params(r.get("params"), params)]
    used = params_text(params)
    qualifier = ""
    if not rows:
        settings = {params_text(r.get("params")): r.get("params") or {} for r in all_rows}
        closest = min(settings, key=lambda t: (_differ(settings[t], params), t != ""))
        rows = [r for r in all_rows if params_text(r.get("params")) == closest]
        qualifier = (f" (with {closest or 'its default parameters'}; this audit used "
                     f"{used or 'the defaults'}, which {'was' if used else 'were'} not benchmarked)")
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(str(r["model"]), []).append(r)
    parts = []
    for model, mine in sorted(by_model.items()):
        mine = sorted(mine, key=strength, reverse=True)
        said = [f"{r['found']} of {r['of']} documents {describe(r)}"
                + (" (the weakest exposure tested)" if r is mine[-1] and r["found"] > 0 else "")
                for r in _picked(mine)]
        parts.append(f"on {model}, " + ", ".join(said))
    where = table.get("source", "benchmarks/results/audit_exposure.md")
    audit = table.get("audit") or {}
    design = (f", each document against {audit['clean_documents']} clean ones at alpha {audit['alpha']}"
              if "clean_documents" in audit and "alpha" in audit else "")
    name = f"{method} ({used})" if used and not qualifier else method
    return f"on planted models ({where}{design}) audits with {name}{qualifier} found " + "; ".join(parts)


REAL_TABLE = Path(__file__).with_name("real_exposure.json")


def real_rules_out(method: str, table: Mapping[str, Any] | None = None,
                   params: Mapping[str, Any] | None = None) -> str | None:
    """One clause: per bundled model as it ships, how many texts its pretraining surely
    holds (the King James Bible, licence texts, standard-library code) audits with
    ``method`` found against never-published texts of the same kind
    (``benchmarks/bench_audit_real.py summary``); None when the method was not run there."""
    table = load_table(str(REAL_TABLE)) if table is None else table
    rows = [r for r in ((table.get("methods") or {}).get(method) or []) if same_params(r.get("params"), params)]
    if not rows:
        return None
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(str(r["model"]), []).append(r)
    kinds = table.get("kinds") or {}
    order = {k: i for i, k in enumerate(kinds)}
    parts = [f"on {model}, " + ", ".join(f"{r['found']} of {r['of']} {(kinds.get(r['kind']) or {}).get('short', r['kind'])}"
                                       for r in sorted(mine, key=lambda r: order.get(r["kind"], len(order))))
             for model, mine in sorted(by_model.items())]
    where = table.get("source", "benchmarks/results/audit_real.md")
    used = params_text(params)
    name = f"{method} ({used})" if used else method
    return (f"on texts the bundled models surely trained on, as they ship ({where}, each document against "
            f"never-published texts of its kind) audits with {name} found " + "; ".join(parts))


def no_evidence_clause(method: str, params: Mapping[str, Any] | None = None,
                       witness: Mapping[str, Any] | None = None) -> str | None:
    """What a ``no evidence`` verdict of an audit rules out, once per audit: the
    real-exposure rows, and the planted rows only where they hold. Planted documents were
    never seen by the reference model, so for a reference-calibrated score (``witness`` is
    its section of verdicts.json) the planted rows are quoted only when the reference
    cannot have seen the text or the witness recognised no suspect; otherwise the planted
    promise would claim more than this audit kept."""
    real = real_rules_out(method, params=params)
    planted_holds = witness is None or witness.get("could_have_seen") is False or (
        bool(witness.get("run")) and not witness.get("recognised"))
    planted = rules_out(method, params=params) if planted_holds else None
    if witness is not None and not planted_holds:
        why = ("the reference model recognises " + ", ".join(witness["recognised"])
               if witness.get("recognised") else "whether the reference model knows the suspects was not asked")
        planted = (f"the planted rows (documents the reference model never saw) do not apply here: {why}")
    parts = [p for p in (real, planted) if p]
    return "; ".join(parts) if parts else None
