"""The unit every method scores: one passage with optional label and document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    label: int | None = None  # 1 = member, 0 = non-member, None = unknown
    doc_id: str | None = None
    # other columns of the row (title, author, paraphrases, references ...) for methods that use them
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
