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


def describe(row: Mapping[str, Any]) -> str:
    """'12 times', 'once among 10x other text' ..."""
    n = int(row["exposures"])
    times = "once" if n == 1 else "twice" if n == 2 else f"{n} times"
    dilution = float(row.get("dilution") or 0.0)
    return f"seen {times}" + (f" among {dilution:g}x as much other text" if dilution else " with no other text")


def rules_out(method: str, table: Mapping[str, Any] | None = None) -> str | None:
    """One clause for a ``no evidence`` reason: at which planted exposures the benchmark's
    audits with ``method`` found documents (the weakest where they found at least half, the
    weakest where they found any) and the weakest where they found none; None when the
    method was not benchmarked."""
    table = load_table() if table is None else table
    rows: Sequence[Mapping[str, Any]] = (table.get("methods") or {}).get(method) or []
    if not rows:
        return None
    rows = sorted(rows, key=strength, reverse=True)
    parts: list[str] = []
    half = [r for r in rows if r["found"] * 2 >= r["of"] and r["found"] > 0]
    some = [r for r in rows if r["found"] > 0]
    none = [r for r in rows if r["found"] == 0]
    picked: list[Mapping[str, Any]] = []
    for group in (half, some):
        if group and group[-1] not in picked:
            picked.append(group[-1])
    weaker_none = [r for r in none if not picked or strength(r) < strength(picked[-1])]
    if weaker_none:
        picked.append(weaker_none[0])  # the strongest exposure below the last found at which nothing was
    elif not picked and none:
        picked.append(none[0])
    models = sorted({str(r["model"]) for r in rows})
    for r in picked:
        which = f" ({r['model']})" if len(models) > 1 else ""
        parts.append(f"{r['found']} of {r['of']} documents {describe(r)}{which}")
    where = table.get("source", "benchmarks/results/audit_exposure.md")
    return f"on planted models ({', '.join(models)}; {where}) audits with {method} found " + ", ".join(parts)
