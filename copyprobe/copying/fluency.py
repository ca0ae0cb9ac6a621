"""Fluency (§3.3, A.3): the Fig. 9 rubric (1-5) answered by any backend acting as judge.

The score is read from "[RESULT] n" (n an integer 1-5; the last such mark counts). A
judgement without one is reported as unparseable — never guessed — and the item gets no
fluency score. A judge request that fails leaves the item the scores it has (its
``fluency_error`` starts with :data:`JUDGE_FAILED`).
"""

from __future__ import annotations

import re
from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.copying import prompts
from copyprobe.errors import RowError

JUDGE_FAILED = "the fluency judge failed"



def fluency_judge_failed(row: dict[str, Any]) -> bool:
    """Whether a row lost its fluency score to a failed judge request (not to an unreadable
    judgement)."""
    return str(row.get("fluency_error") or "").startswith(JUDGE_FAILED)


_RESULT = re.compile(r"\[RESULT\]\s*\(?\s*([1-5])(?:\.0+)?\s*\)?(?![\d.])", re.IGNORECASE)


def parse_fluency(text: str) -> int | None:
    """The score of a "[RESULT] n" judgement, or None when there is none to read."""
    found = _RESULT.findall(text or "")
    return int(found[-1]) if found else None


class FluencyJudge:
    def __init__(self, model: str | None = None, max_tokens: int = 256):
        self.model = model
        self.max_tokens = max_tokens

    def describe(self) -> dict[str, Any]:
        return {"judge": "backend", "model": self.model or "target", "prompt": "CopyBench Fig. 9"}

    def request(self, response: str) -> GenerateRequest:
        return GenerateRequest(prompt=prompts.fill(prompts.FLUENCY_JUDGE, response=response),
                               max_tokens=self.max_tokens, temperature=0.0, model=self.model)

    def judge(self, response: str):
        """Runner generator: {"fluency": n} or {"fluency": None, "fluency_error": ...}."""
        try:
            (answer,) = yield [self.request(response)]
        except RowError as exc:  # the driver's failed request: it would fail the graded item's row
            return {"fluency": None, "fluency_error": f"{JUDGE_FAILED}: {exc}"}
        text = getattr(answer, "text", None)
        if text is None:  # a failed answer handed over as it is (a caller other than the driver)
            return {"fluency": None, "fluency_error": f"{JUDGE_FAILED}: {getattr(answer, 'reason', '?')}"}
        score = parse_fluency(text)
        if score is None:
            return {"fluency": None, "fluency_error": "judgement has no '[RESULT] n' (n in 1-5)",
                    "fluency_raw": text[-300:]}
        return {"fluency": score}
