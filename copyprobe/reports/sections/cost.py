"""What the run cost: timings, cache hits and requests, as run.json recorded them."""

from __future__ import annotations

from typing import Any

from copyprobe.reports.sections.formatting import fmt, num, pct


def cost_context(run: dict) -> dict[str, Any]:
    timings = run.get("timings") if isinstance(run.get("timings"), dict) else {}
    cache = run.get("cache") if isinstance(run.get("cache"), dict) else {}
    requests = run.get("requests") if isinstance(run.get("requests"), dict) else {}
    hits, misses = num(cache.get("hits")), num(cache.get("misses"))
    hit_rate = pct(hits / (hits + misses)) if hits is not None and misses is not None and hits + misses else "—"
    simple = {k: v for k, v in requests.items() if not isinstance(v, (dict, list))}
    nested = {k: v for k, v in requests.items() if isinstance(v, dict) and v}
    return {
        "timings": [(k, fmt(v, 2) + " s" if num(v) is not None else str(v)) for k, v in timings.items()],
        "cache": cache,
        "hit_rate": hit_rate,
        "requests": simple,
        "requests_nested": nested,
        "n_tokens": run.get("n_tokens"),
        "present": bool(timings or cache or requests or run.get("n_tokens") is not None),
    }


__all__ = ["cost_context"]
