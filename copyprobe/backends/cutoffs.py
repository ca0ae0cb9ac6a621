"""When each bundled model's training data ends, and where that is said.

A model whose training data ends before a text was published cannot have seen it: the
cleanest reference model there is for that text. The months below come from the models'
cards and reports; where none states a cutoff, the model's release is an upper bound and
is marked so (``stated=False``). A text published in the cutoff month or earlier, or at a
date too coarse to tell (a year that contains the cutoff), could have been seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from copyprobe.backends.specs import GEMMA, QWEN_05B, QWEN_15B, SMOLLM2
from copyprobe.errors import SettingError


@dataclass(frozen=True)
class TrainingCutoff:
    month: str  # "YYYY-MM": the training data ends in this month or before it
    stated: bool  # True: the model card says so; False: an upper bound (the model's release)
    source: str

    def text(self) -> str:
        return f"ends {'in' if self.stated else 'by'} {self.month}" + ("" if self.stated else " at the latest") + \
            f" ({self.source})"


CUTOFFS = {
    GEMMA: TrainingCutoff("2024-08", True, "Gemma 3 model card, Training Dataset: 'The knowledge cutoff date for "
                                           "the training data was August 2024', ai.google.dev/gemma/docs/core/model_card_3"),
    SMOLLM2: TrainingCutoff("2024-10", False, "not stated; SmolLM2 was released on 2024-11-01: HuggingFaceTB model "
                                              "cards, arXiv 2502.02737"),
    QWEN_05B: TrainingCutoff("2024-11", False, "not stated for the whole corpus; code from GitHub repositories "
                                               "created before February 2024 (Qwen2.5-Coder Technical Report, arXiv "
                                               "2409.12186, section 3.1); the 0.5B model was released on 2024-11-12"),
    QWEN_15B: TrainingCutoff("2024-09", False, "not stated for the whole corpus; code from GitHub repositories "
                                               "created before February 2024 (Qwen2.5-Coder Technical Report, arXiv "
                                               "2409.12186, section 3.1); the 1.5B model was released on 2024-09-19"),
}

_DATE = re.compile(r"^(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?$")


def training_cutoff(spec: str | None) -> TrainingCutoff | None:
    """The cutoff of a bundled model spec (also ``llamacpp:<alias>``); None for any other model."""
    if not spec:
        return None
    name = spec.strip()
    if name.startswith("llamacpp:"):
        name = name[len("llamacpp:"):].strip()
    return CUTOFFS.get(name)


def check_published(text: str | None) -> str | None:
    """``text`` if it is a publication date YYYY, YYYY-MM or YYYY-MM-DD (None stays None),
    else a SettingError naming the setting (the command line names its option)."""
    if text is None:
        return None
    found = _DATE.match(str(text).strip())
    if not found or int(found.group(1)) < 1 or (found.group(2) and not 1 <= int(found.group(2)) <= 12) or \
            (found.group(3) and not _real_day(*map(int, found.groups()))):
        raise SettingError("published", f"must be a date YYYY, YYYY-MM or YYYY-MM-DD (when the suspect text was "
                                        f"first published), got {text!r}")
    import datetime

    year, month, day = (int(g) if g else 1 for g in found.groups())
    today = datetime.datetime.now(datetime.timezone.utc).date()
    if datetime.date(year, month, day) > today:  # its first possible day: a typo, not a publication
        raise SettingError("published", f"is {str(text).strip()!r}, after today ({today.isoformat()}): give the date "
                                        f"the suspect text was first published")
    return str(text).strip()


def _real_day(year: int, month: int, day: int) -> bool:
    """Is YYYY-MM-DD a day of the calendar (2024-02-30 is not)?"""
    import datetime

    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def could_have_seen(spec: str | None, published: str | None) -> tuple[bool | None, str | None]:
    """Could the model ``spec`` have been trained on a text first published on ``published``?
    (False: its training data ends before; True: the text is older than the cutoff, or the
    date too coarse to tell; None: the model's cutoff or the date is not known), and why."""
    cutoff = training_cutoff(spec)
    if cutoff is None:
        return None, (f"the training cutoff of {spec} is not known" if spec else None)
    if published is None:
        return None, f"its training data {cutoff.text()}; the text's publication date (published) was not given"
    found = _DATE.match(published)
    assert found is not None  # checked by check_published
    earliest = f"{found.group(1)}-{found.group(2) or '01'}"  # the first month the text can have appeared
    after = earliest > cutoff.month
    return (not after, f"its training data {cutoff.text()}; the text was published {published}")
