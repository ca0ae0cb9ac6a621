"""One engine for every run kind: *collect* the model's answers, then *derive* results.

A run kind (detect, audit, copying, canary test, ...) is declared by two parts:

* a :class:`Collection` says which model requests to make: ``plan(session)`` gives the
  generators (one per passage and method, or per copying item), ``finish(results, stats)``
  turns what they returned into the collected files (``scores.jsonl``, ``results.jsonl``,
  ``examples.jsonl``) and the kind's fields of the run record;
* a :class:`RunKind` names the kind and its ``derive``: a pure function from a
  :class:`~copyprobe.record.Run` (the record and the collected files) to the derived files
  (``metrics.json``, ``verdicts.json``, ``canary.json``) and notes.

:func:`execute` is the one path that opens the session (the target and every other model,
each behind the response cache, so an interrupted run resumes from the cache), drives the
generators with progress, closes the session however the run ends (an error, Ctrl-C),
builds the run record, derives and writes the run directory. :func:`derive_run` is the
same derive applied to a saved directory: ``copyprobe rescore`` makes no model call.
The kinds are registered in :mod:`copyprobe.kinds`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, Protocol

from copyprobe import record, run_files
from copyprobe.drive import DriveStats, ProgressFactory, drive
from copyprobe.errors import Interrupted
from copyprobe.progress import check_progress, progress_bars
from copyprobe.session import Session


@dataclass
class Collected:
    """What collect produced: the collected files (name -> content) and the run record's
    fields that belong to this kind (``methods``, ``data``, its settings section, ...)."""

    files: dict[str, Any]
    record: dict[str, Any]


class Collection(Protocol):
    """The collect half of a run kind. A collection may also have ``begin()``: work that
    needs the data but not the model, done before the session opens: checks that can fail
    (detect's plan reads prefix files and draws its training split; a bad one costs no
    load), and work started on a thread to run while the model loads and scores (the blind
    baseline)."""

    def plan(self, session: Session) -> dict[Hashable, Any] | Chunked:
        """key -> generator of request lists (see :func:`copyprobe.drive.drive`), or
        those in chunks (:class:`Chunked`)."""

    def finish(self, results: dict[Hashable, Any], stats: DriveStats) -> Collected:
        """The collected files and record fields from the generators' results."""


@dataclass
class Chunk:
    """Part of a run's generators: ``make()`` builds them when their turn comes; ``units``
    is how many passages (or items) they cover, ``finished`` the documents whose last
    passage is in this chunk, ``current`` what the chunk works on (for progress)."""

    make: Callable[[], dict[Hashable, Any]]
    units: int
    finished: list[str] = field(default_factory=list)
    current: str = ""


@dataclass
class Chunked:
    """What ``plan`` may return instead of one dict, for a run too big to drive at once:
    each chunk is driven to the end before the next one's generators are made, so only one
    chunk's model answers (token log-prob lists, generations) are held at a time; the
    results of all chunks (the methods' outputs, one number or a few per passage) are
    kept for ``finish``. Progress is two bars, passages and documents (with the current
    one), instead of one per request kind."""

    chunks: list[Chunk]
    units: int
    documents: int
    unit: str = "passages"


def _drive(runs: dict[Hashable, Any] | Chunked, backend_for: Callable, stats: DriveStats,
           progress: ProgressFactory | None) -> dict[Hashable, Any]:
    if not isinstance(runs, Chunked):
        kwargs = {"progress": progress} if progress is not None else {}
        return drive(runs, backend_for, stats=stats, **kwargs) if runs else {}
    if len(runs.chunks) == 1:
        return _drive(runs.chunks[0].make(), backend_for, stats, progress)
    bars = progress if progress is not None else _no_bars
    units, documents = bars(runs.unit, runs.units), _with_note(bars("documents", runs.documents))
    results: dict[Hashable, Any] = {}
    for chunk in runs.chunks:
        documents(0, chunk.current)
        results.update(drive(chunk.make(), backend_for, stats=stats))
        units(chunk.units)
        documents(len(chunk.finished), chunk.current)
    return results


def _no_bars(label: str, total: int) -> Callable[..., None]:
    return lambda n, note=None: None


def _with_note(tick: Callable[..., None]) -> Callable[[int, str], None]:
    """tick(n, note) where the bar can show a note (the command line's can), else tick(n)."""
    import inspect

    try:
        parameters = inspect.signature(tick).parameters.values()
        takes_note = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters) >= 2 or \
            any(p.kind is p.VAR_POSITIONAL for p in parameters)
    except (TypeError, ValueError):
        takes_note = False
    return tick if takes_note else (lambda n, note: tick(n))


@dataclass
class Derived:
    """What derive produced: derived files (None removes a stale one) and notes for run.json."""

    files: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunKind:
    """A run kind's declaration: its name, the files besides run.json that hold its results
    (name -> JSON lines?), its derive, (for kinds with resampled intervals) how a new
    number of bootstrap resamples is written into its record, and (``check_recorded``) what
    a saved run directory must hold before derive reads it: rescore calls it, since only a
    hand edit after the run can break what the run checked once at its start."""

    name: str
    files: Mapping[str, bool]
    derive: Callable[[record.Run], Derived]
    resample: Callable[[record.RunRecord, int | None], None] | None = None
    check_recorded: Callable[[record.Run], None] | None = None


def register(kind: RunKind) -> RunKind:
    """Make ``kind`` known to every reader of run directories (run.json's ``kind``, the
    files :func:`record.load_run` reads); :mod:`copyprobe.kinds` calls it once per kind."""
    if kind.name not in run_files.KINDS:
        run_files.KINDS.append(kind.name)
    record.RESULT_FILES[kind.name] = dict(kind.files)
    return kind


@dataclass
class Executed:
    """A finished run: its record, every file written (collected and derived) and where."""

    record: record.RunRecord
    files: dict[str, Any]
    derived: Derived
    stats: DriveStats
    out: Path | None = None


def as_run(rec: record.RunRecord, files: Mapping[str, Any], where: Path | None = None) -> record.Run:
    """A :class:`~copyprobe.record.Run` from in-memory files (as :func:`record.load_run`
    gives it from disk), so derive reads the same thing in both places."""
    known = {f.name for f in dataclasses.fields(record.Run)} - {"dir", "record", "inputs"}
    return record.Run(dir=where if where is not None else Path("."), record=rec,
                      **{name.split(".")[0]: content for name, content in files.items()
                         if name.split(".")[0] in known})


@record.discards_new_out_dir  # a run refused after making its directory leaves none behind
def execute(kind: RunKind, model: Any, collection: Collection, *, progress: Any = None,
            **options: Any) -> Executed:
    """Collect through one session, derive, and (with ``out``) write the run directory
    (:func:`_execute` has the options). ``progress``: None or False (no bars), True (bars
    on stderr), or a factory ``(label, total) -> tick`` of the caller's own; anything else
    is refused before the model loads."""
    progress = check_progress(progress)
    if progress is True:
        with progress_bars() as bars:
            return _execute(kind, model, collection, progress=bars, **options)
    return _execute(kind, model, collection, progress=progress, **options)


def _execute(
    kind: RunKind,
    model: Any,
    collection: Collection,
    *,
    out: str | Path | None = None,
    cache: bool | str | Path = True,
    batch_size: int | str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    api_options: Mapping[str, Any] | None = None,
    progress: ProgressFactory | None = None,
    command: list[str] | None = None,
    started: float | None = None,
    load_s: float = 0.0,
) -> Executed:
    """:func:`execute` with its progress factory resolved.

    ``model``: a model spec, a Backend, or a Session (reused and left open). ``started``:
    when the caller began (perf_counter), for ``timings.total_s``; ``load_s``: loading
    time the caller spent before (e.g. building a filtered backend)."""
    started = time.perf_counter() if started is None else started
    out_dir = record.prepare_out_dir(out, kind.name) if out is not None else None
    own_session = not isinstance(model, Session)
    begin = getattr(collection, "begin", None)
    if begin is not None:
        begin()
    session = Session(model, cache=cache, batch_size=batch_size, device=device, dtype=dtype,
                      api_options=api_options) if own_session else model
    try:
        runs = collection.plan(session)
        stats = DriveStats()
        score_start = time.perf_counter()
        results = _drive(runs, session.backend_for, stats, progress)
        collected = collection.finish(results, stats)
        score_s = time.perf_counter() - score_start
        target_info, other_models = session.model_info()
        load_s += session.load_s
        cache_counts = session.cache_counts()
        if own_session:
            # the cache file's last checkpoint (see ResponseCache.start_closing) runs while
            # the run is derived and written; the finally waits for it, so the run returns
            # or raises once the file is closed (a failed collect closes there, waiting)
            session.close(wait=False)
        fields = dict(collected.record)
        notes = list(fields.pop("notes", []))
        # a kind's own section (its settings) that RunRecord has no field for is kept as it is
        known = {f.name for f in dataclasses.fields(record.RunRecord)}
        extra = {k: fields.pop(k) for k in list(fields) if k not in known}
        rec = record.RunRecord(
            kind=kind.name,
            command=command if command is not None else list(sys.argv),
            model=target_info,
            models=other_models,
            timings={"load_s": round(load_s, 3), "score_s": round(score_s, 3),
                     "total_s": round(time.perf_counter() - started, 3)},
            cache=cache_counts,
            requests=stats.as_record(),
            notes=notes,
            extra=extra,
            **fields,
        )
        try:
            derived = kind.derive(as_run(rec, collected.files, out_dir))
        except BaseException as exc:
            # the model's answers are the costly part (and with no cache the only copy):
            # written without what derive computes, which rescore recomputes from them
            if out_dir is not None:
                rec.notes.append(f"{DERIVE_FAILED} ({type(exc).__name__}: "
                                 f"{str(exc)[:200] or 'no message'}); copyprobe rescore computes them from these files")
                unfinished = {name: None for name in kind.files if name not in collected.files}
                record.write_run(out_dir, rec, {**collected.files, **unfinished})
                if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Interrupted):
                    # the model's work is in the run directory, cache or not: say so, not "nothing kept"
                    raise Interrupted(f"interrupted while computing the metrics; the model's answers are in "
                                      f"{out_dir}: copyprobe rescore {out_dir} computes the rest") from exc
            raise
        rec.notes.extend(derived.notes)
        files = {**collected.files, **derived.files}
        if out_dir is not None:
            record.write_run(out_dir, rec, files)
        return Executed(record=rec, files=files, derived=derived, stats=stats, out=out_dir)
    finally:
        if own_session:
            session.close()


# the note of a run whose derive failed, dropped once a rescore has computed what it lacked
DERIVE_FAILED = "the run's metrics could not be computed"


def derive_run(kind: RunKind, run: record.Run, *, n_bootstrap: int | None = None) -> Derived:
    """Derive again from a saved run (no model): the kind's derive on what
    :func:`record.load_run` read; ``n_bootstrap`` replaces the recorded number of resamples."""
    if kind.resample is not None:
        kind.resample(run.record, n_bootstrap)
    elif n_bootstrap is not None:
        from copyprobe.errors import SettingError

        raise SettingError("n_bootstrap", f"does not apply: a {kind.name} run has no bootstrap resamples to change")
    return kind.derive(run)


def rewrite_derived(run: record.Run, derived: Derived) -> None:
    """Write the derived files into the run directory, then run.json last (without the note
    that they could not be computed, now that they are)."""
    run.record.notes = [n for n in run.record.notes if not n.startswith(DERIVE_FAILED)]
    record.write_run(run.dir, run.record, derived.files, marker=record.RESCORING)
