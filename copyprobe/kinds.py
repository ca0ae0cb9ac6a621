"""The run kinds, by the name run.json records: one line each.

A run kind is one module that declares its collect (a :class:`copyprobe.engine.Collection`)
and its derive in a :class:`copyprobe.engine.RunKind` named ``KIND``; registering it here
is what lets every reader of run directories know it (run.json's ``kind``, the files
``load_run`` reads) and ``copyprobe rescore`` derive its results again. ``import copyprobe``
imports this module, so the kinds are registered whatever is imported first. See
docs/architecture.md.
"""

from __future__ import annotations

from copyprobe.audit import KIND as AUDIT
from copyprobe.canary.scoring import KIND as CANARY
from copyprobe.copying.runner import KIND as COPYING
from copyprobe.detect import KIND as DETECT
from copyprobe.engine import RunKind, register

KINDS: dict[str, RunKind] = {kind.name: register(kind) for kind in (
    DETECT,
    AUDIT,
    COPYING,
    CANARY,
)}
