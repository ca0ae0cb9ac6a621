"""Pieces shared by the copying tasks: how a prompt becomes a request, and reading answers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.copying import prompts
from copyprobe.errors import ConfigError, RowError

MITIGATIONS = ("none", "system_prompt", "memfree")


@dataclass(frozen=True)
class GenConfig:
    """How the evaluated model is asked. B.1: greedy, repetition penalty 1.1.

    ``chat``: send the prompt as a user message (the backend applies the chat template);
    otherwise as plain text. ``mitigation="system_prompt"`` adds the §5.2 self-reminder as a
    system message in chat mode, else prepends it to the instruction (A.2). MemFree acts in
    the backend (a logits processor), so its requests are the plain ones.
    """

    max_tokens: int = 100
    repetition_penalty: float = 1.1
    chat: bool = False
    mitigation: str = "none"

    def __post_init__(self):
        if self.mitigation not in MITIGATIONS:
            raise ConfigError(f"unknown mitigation {self.mitigation!r} (known: {', '.join(MITIGATIONS)})")
        if self.max_tokens < 1:
            raise ConfigError("max_tokens must be at least 1")

    def request(self, prompt: str, max_tokens: int | None = None, stop: Sequence[str] = ()) -> GenerateRequest:
        reminder = self.mitigation == "system_prompt"
        common = dict(max_tokens=max_tokens or self.max_tokens, temperature=0.0,
                      repetition_penalty=self.repetition_penalty, stop=tuple(stop))
        if self.chat:
            messages = ((("system", prompts.SELF_REMINDER),) if reminder else ()) + (("user", prompt),)
            return GenerateRequest(messages=messages, **common)
        return GenerateRequest(prompt=prompts.with_self_reminder(prompt) if reminder else prompt, **common)


def text_of(response: Any) -> str:
    """The text of a Generation; a failed request (e.g. RequestFailed) fails this row."""
    text = getattr(response, "text", None)
    if text is None:
        reason = getattr(response, "reason", None) or "no answer"
        raise RowError(f"generation failed: {reason}")
    return text


_LABEL = re.compile(r"^\s*(?:provided\s+)?completion\s*:\s*", re.IGNORECASE)


def clean_completion(text: str) -> str:
    """Drop a leading "Completion:" label that templates 2 and 3 ask for."""
    return _LABEL.sub("", text, count=1).strip()
