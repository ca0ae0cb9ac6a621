"""Scores that could not be computed and requests that failed, counted by method and reason."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from copyprobe.reports.sections.formatting import as_list, num, truncate

MAX_FAILURE_ROWS = 200


def failures_context(loaded: dict, names: list[str]) -> dict[str, Any]:
    per_method: Counter = Counter()
    reasons: Counter = Counter()
    rows = []
    for row in loaded["scores"]:
        errors = row.get("errors") if isinstance(row.get("errors"), dict) else {}
        for name in names:
            if name in row and num(row.get(name)) is None or name in errors:
                reason = str(errors.get(name) or "no score and no reason recorded")
                per_method[name] += 1
                reasons[(name, reason)] += 1
                if len(rows) < MAX_FAILURE_ROWS:
                    rows.append({"id": str(row.get("id")), "method": name, "reason": truncate(reason, 300)})
    failed_requests = as_list((loaded["run"].get("requests") or {}).get("failed")
                              if isinstance(loaded["run"].get("requests"), dict) else None)
    return {
        "total": sum(per_method.values()),
        "per_method": sorted(per_method.items()),
        "reasons": [{"method": m, "reason": truncate(r, 300), "count": c}
                    for (m, r), c in reasons.most_common(30)],
        "rows": rows,
        "requests": [json.dumps(f, ensure_ascii=False, default=str)[:300] for f in failed_requests[:50]],
    }


__all__ = ["failures_context"]
