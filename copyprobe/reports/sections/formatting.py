"""Numbers and words every report section formats the same way."""

from __future__ import annotations

import json
import math
from typing import Any

TEXT_LIMIT = 600
DETAIL_LIMIT = 1200
DETAIL_ITEMS = 12


def num(value: Any) -> float | None:
    """A finite float, or None (null, NaN, text, booleans are no scores)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def label_of(value: Any) -> int | None:
    """1 or 0 for a label, None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value in (0, 1) else None


def fmt(value: Any, digits: int = 3) -> str:
    number = num(value)
    if number is None:
        return "—"
    if number != 0 and (abs(number) >= 1e5 or abs(number) < 10 ** -digits):
        return f"{number:.{digits}g}"
    return f"{number:.{digits}f}"


def fmt_p(value: Any) -> str:
    number = num(value)
    if number is None:
        return "—"
    return f"{number:.2g}" if number < 0.001 else f"{number:.3f}"


def pct(value: Any) -> str:
    number = num(value)
    return "—" if number is None else f"{100 * number:.1f}%"


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more characters]"


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def detail_value(value: Any) -> dict[str, Any]:
    """A details value for display: text, a list of texts, or JSON."""
    if isinstance(value, str):
        return {"kind": "text", "value": truncate(value, DETAIL_LIMIT)}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        items = [truncate(v, DETAIL_LIMIT // 2) for v in value[:DETAIL_ITEMS]]
        more = len(value) - len(items)
        return {"kind": "list", "value": items, "more": more}
    if isinstance(value, (int, float, bool)) or value is None:
        return {"kind": "text", "value": fmt(value) if isinstance(value, float) else json.dumps(value)}
    dumped = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return {"kind": "json", "value": truncate(dumped, DETAIL_LIMIT)}


def side_words(loaded: dict) -> dict[str, str]:
    """What label-1 and label-0 rows are called. In an audit they are the user's suspect and
    clean inputs, whose membership nobody knows; "member" only where ground truth is known."""
    if loaded["run"].get("kind") == "audit" or loaded.get("verdicts") is not None:
        return {"pos": "suspect", "neg": "clean", "pos_pl": "suspect passages", "neg_pl": "clean passages",
                "higher": "more like trained-on text"}
    return {"pos": "member", "neg": "non-member", "pos_pl": "members", "neg_pl": "non-members",
            "higher": "more likely a member"}


__all__ = ["as_list", "detail_value", "fmt", "fmt_p", "label_of", "num", "pct", "side_words", "truncate"]
