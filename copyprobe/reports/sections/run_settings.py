"""The settings table: run.json's fields in a readable order, nested values as JSON."""

from __future__ import annotations

import json
from typing import Any

from copyprobe.reports.sections.formatting import truncate

_SHOWN_ELSEWHERE = {"failures", "notes", "timings", "cache", "requests", "n_tokens", "train_ids"}
_ORDER = ["created", "command", "copyprobe_version", "model", "models", "data", "methods",
          "n_passages", "seed", "bootstrap", "versions"]


def settings_context(run: dict) -> list[tuple[str, Any]]:
    keys = [k for k in _ORDER if k in run] + [k for k in run if k not in _ORDER and k not in _SHOWN_ELSEWHERE]
    out = []
    for key in keys:
        value = run[key]
        if key == "command" and isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, (dict, list)):
            if not value:
                continue
            out.append((key, {"kind": "json", "value": truncate(
                json.dumps(value, ensure_ascii=False, indent=1, default=str), 4000)}))
        else:
            out.append((key, {"kind": "text", "value": "—" if value is None else str(value)}))
    train = run.get("train_ids")
    if isinstance(train, dict) and train:
        out.append(("train_ids", {"kind": "text", "value": "; ".join(
            f"{m}: {len(ids)} rows used for fitting, left out of the metrics"
            for m, ids in train.items() if isinstance(ids, list))}))
    return out


__all__ = ["settings_context"]
