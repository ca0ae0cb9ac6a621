"""`audit`: per suspect document, is its score above a clean baseline? (DE-COP section 5.1)

Every passage of the suspect and the clean set is scored with one method (the clean
passages get label 0 and the suspect ones label 1, so the run record also holds AUCs);
the verdicts come from :mod:`copyprobe.evaluation.verdicts`. Rows without a document
form one document per set (named after the file).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from copyprobe import record
from copyprobe.data.example import Example
from copyprobe.detect import DetectResult, detect
from copyprobe.errors import ConfigError, DataError
from copyprobe.params import Real


@dataclass
class AuditResult:
    verdicts: dict[str, Any]
    detect: DetectResult

    @property
    def out(self) -> Path | None:
        return self.detect.out


def audit_examples(data: Any, role: str, label: int, **read_options: Any) -> list[Example]:
    """The passages of one side ("suspect" or "clean"), ids and documents prefixed by the role."""
    from copyprobe.data.readers import load_dataset

    if isinstance(data, (str, Path)):
        examples = load_dataset(data, **read_options).examples
        stem = Path(data).stem
    else:
        examples = [e if isinstance(e, Example) else Example(id=str(i), text=str(e)) for i, e in enumerate(data)]
        stem = role
    if not examples:
        where = f"file {data}" if isinstance(data, (str, Path)) else "set"
        raise DataError(f"{role} {where} has no passages")
    out = []
    for ex in examples:
        doc = ex.doc_id if ex.doc_id is not None else stem
        out.append(replace(ex, id=f"{role}:{ex.id}", label=label, doc_id=f"{role}:{doc}"))
    return out


def audit(
    model: Any,
    suspect: Any,
    clean: Any,
    method: str = "decop",
    *,
    params: Mapping[str, Any] | None = None,
    alpha: float = 0.01,
    out: str | Path | None = None,
    read_options: Mapping[str, Any] | None = None,
    n_bootstrap: int = 200,
    **detect_options: Any,
) -> AuditResult:
    """Score ``suspect`` and ``clean`` (paths, Datasets or lists of texts/Examples) with
    ``method`` on ``model`` and give a verdict per suspect document (``verdicts.json``
    in ``out``). ``params``: the method's parameters; other options go to :func:`detect`."""
    Real(0, 1, low_open=True, high_open=True).validate(alpha, "alpha")
    if not isinstance(method, str):
        raise ConfigError("audit takes one method name")
    out_dir = record.prepare_out_dir(out) if out is not None else None
    options = dict(read_options or {})
    examples = audit_examples(suspect, "suspect", 1, **options) + audit_examples(clean, "clean", 0, **options)
    settings = {
        "method": method, "alpha": alpha,
        "suspect": str(suspect) if isinstance(suspect, (str, Path)) else None,
        "clean": str(clean) if isinstance(clean, (str, Path)) else None,
    }
    result = detect(model, examples, [method], params={method: dict(params)} if params else None,
                    n_bootstrap=n_bootstrap, kind="audit", settings=settings, **detect_options)
    from copyprobe.evaluation.verdicts import audit_verdicts

    report = audit_verdicts(result.rows, method, result.record.train_ids, alpha)
    if out_dir is not None:
        result.write(out_dir, {"verdicts.json": report})
    return AuditResult(verdicts=report, detect=result)
