"""The one verdict vocabulary of copyprobe: audit, canary test, report and the Python API.

A verdict is one of three words, always with a ``reason`` (one plain sentence):

- ``evidence``: the test rejects "the model never saw this document" at the chosen alpha,
  and nothing model-free (style, topic) explains the result as well;
- ``no evidence``: the test ran as designed and did not reject; this does *not* show the
  model never saw the document;
- ``cannot tell``: no valid test could be made (too few clean documents, a style/topic
  difference the blind guard explains, failed scores, a method the model cannot run).

"suspect" and "clean" name the user's inputs; "member" only where ground truth is known.
"""

from __future__ import annotations

EVIDENCE = "evidence"
NO_EVIDENCE = "no evidence"
CANNOT_TELL = "cannot tell"
VERDICTS = (EVIDENCE, NO_EVIDENCE, CANNOT_TELL)
# the document-level tests a verdict can come from (evaluation/verdicts.py); here, with no
# numeric import, so a settings declaration can name them without loading numpy
TESTS = ("rank", "t")
# how the shift guard turns a suspect's distance into a p-value (evaluation/guard.py)
GUARD_TESTS = ("rank", "t")

# Words written by earlier versions (audit: seen/inconclusive/not detected/untested;
# report: suspect/member) read as today's words, so old run directories still load.
LEGACY_VERDICTS = {
    "seen": EVIDENCE,
    "suspect": EVIDENCE,
    "member": EVIDENCE,
    "detected": EVIDENCE,
    "inconclusive": CANNOT_TELL,
    "untested": CANNOT_TELL,
    "not detected": NO_EVIDENCE,
    "not significant": NO_EVIDENCE,
}


def normalise_verdict(word: object) -> str:
    """Today's word for a verdict written by any version; unknown words read as ``cannot tell``."""
    text = str(word).strip().lower() if word is not None else ""
    if text in VERDICTS:
        return text
    return LEGACY_VERDICTS.get(text, CANNOT_TELL)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st: ranks in verdict sentences."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
