"""The run kinds, by the name run.json records: one line each.

A run kind is one module that declares its collect (a :class:`copyprobe.engine.Collection`)
and its derive in a :class:`copyprobe.engine.RunKind` named ``KIND``; registering it here
is what lets ``copyprobe rescore`` (and anything else reading run directories) derive
its results again. See docs/architecture.md.
"""

from __future__ import annotations

from copyprobe.audit import KIND as AUDIT
from copyprobe.canary.scoring import KIND as CANARY
from copyprobe.copying.runner import KIND as COPYING
from copyprobe.detect import KIND as DETECT
from copyprobe.engine import RunKind

KINDS: dict[str, RunKind] = {kind.name: kind for kind in (
    DETECT,
    AUDIT,
    COPYING,
    CANARY,
)}
