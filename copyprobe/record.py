"""The run record: what every command writes, and the one way to read it back.

A run directory holds ``run.json`` (a :class:`RunRecord`: what was asked, what was
computed, with which versions) and the files of its kind (see docs/run-record.md):

=========  ==========================================================================
detect     examples.jsonl, scores.jsonl, metrics.json (when labelled)
audit      the detect files + verdicts.json
copying    results.jsonl, metrics.json
canary     examples.jsonl, scores.jsonl (one row per candidate), canary.json
plant      (run.json beside the plant's own plant.json, data.jsonl and model/)
=========  ==========================================================================

Everything after the model calls (metrics, verdicts, blind baseline, report) can be
recomputed from the directory alone: :func:`load_run` reads it, ``copyprobe rescore``
recomputes it. ``format_version`` says which layout a record follows; records written
before versioning (no ``format_version``) read as version 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from copyprobe.errors import ConfigError, DataError
from copyprobe.files import kind_of, read_json, read_jsonl, refuse_empty_path, utc_now, versions, write_json, write_jsonl
from copyprobe.run_files import ANY, COPYING_METRICS, RUN, check, obj, read_checked, scores_row
from copyprobe.text import article

try:
    import fcntl
except ImportError:  # Windows: runs into one output directory are not guarded against each other
    fcntl = None  # type: ignore[assignment]

# the end of every message about result files that disagree with their run.json
DAMAGED = "the run's files are damaged; run the command again (the cache makes it cheap)"

FORMAT_VERSION = 1

# kind -> the files besides run.json that hold its results (name -> JSON lines?): plant's
# here, every engine run kind's added from its declaration as it registers (copyprobe.kinds)
RESULT_FILES: dict[str, dict[str, bool]] = {"plant": {}}


@dataclass
class RunRecord:
    """``run.json``. Field names are the JSON keys; empty optional sections are left out."""

    kind: str
    command: list[str]
    created: str = field(default_factory=utc_now)
    copyprobe_version: str | None = None
    versions: dict[str, str] = field(default_factory=versions)
    model: dict[str, Any] | None = None  # target: spec, fingerprint, backend facts (no secrets)
    models: dict[str, Any] = field(default_factory=dict)  # other models used, by spec
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> resolved parameters
    data: dict[str, Any] = field(default_factory=dict)
    n_passages: int | None = None
    n_tokens: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    bootstrap: dict[str, Any] = field(default_factory=dict)  # {"n", "seed"}
    blind_baseline: bool | None = None  # whether metrics include the blind baseline
    train_ids: dict[str, list[str]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # kind-specific settings
    audit: dict[str, Any] | None = None  # {"method", "alpha", "suspect", "clean"}
    copying: dict[str, Any] | None = None  # CopyConfig.describe()
    mitigation: dict[str, Any] | None = None
    canary: dict[str, Any] | None = None
    plant: dict[str, Any] | None = None
    # keys this version does not know (a newer minor writer, or hand edits), kept as they are
    extra: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.copyprobe_version is None:
            self.copyprobe_version = self.versions.get("copyprobe")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"format_version": self.format_version, "kind": self.kind}
        for f in dataclasses.fields(self):
            if f.name in ("format_version", "kind", "extra"):
                continue
            value = getattr(self, f.name)
            if value is None and f.name in _OPTIONAL_SECTIONS:
                continue
            data[f.name] = value
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Any, where: str = "run.json") -> "RunRecord":
        if not isinstance(data, dict):
            raise DataError(f"{where} is not a JSON object")
        check(data, RUN, where)
        version = data.get("format_version", 0)
        if version > FORMAT_VERSION:
            raise DataError(f"{where} has format_version {version}, written by a newer copyprobe "
                            f"(this one reads up to {FORMAT_VERSION}); upgrade copyprobe to read it")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        if version >= 1:  # every versioned writer wrote these: one missing is damage, never a default
            check(data, obj(required=dict.fromkeys(("kind", "command", "created"), ANY)), where)
        elif not known & set(data):
            raise DataError(f"{where} is not a copyprobe run record (it has none of its keys: "
                            "format_version, kind, command, methods, ...)")
        values = {k: v for k, v in data.items() if k in known}
        values["format_version"] = version
        values.setdefault("kind", _legacy_kind(data))
        values.setdefault("command", [])
        values.setdefault("created", "")
        record = cls(**values)
        record.methods = _recorded_method_params(record.methods)
        record.extra = {k: v for k, v in data.items() if k not in known}
        return record


_OPTIONAL_SECTIONS = {"blind_baseline", "model", "n_passages", "n_tokens", "seed", "audit", "copying", "mitigation", "canary", "plant"}


def _recorded_method_params(methods: dict[str, Any]) -> dict[str, Any]:
    """Each method's recorded parameters, with the keys added since the record was
    written set to what that older run used (``Method.recorded_defaults``), so the record
    names the variant that produced each column. Unknown methods stay as they are."""
    from copyprobe.registry import method_class

    out: dict[str, Any] = {}
    for name, params in methods.items():
        try:
            cls = method_class(name)
        except ConfigError:  # a plugin that is not installed here
            cls = None
        fill = getattr(cls, "recorded_params", None)
        out[name] = fill(params) if fill is not None and isinstance(params, dict) else params
    return out


def _legacy_kind(data: dict[str, Any]) -> str:
    """The kind of a record written before run.json said it (format_version 0)."""
    if "copying" in data:
        return "copying"
    return "detect"


@dataclass
class Run:
    """A run directory as read back: the record and the files of its kind (None if absent)."""

    dir: Path
    record: RunRecord
    examples: list[dict] | None = None  # examples.jsonl
    scores: list[dict] | None = None  # scores.jsonl
    metrics: dict | None = None  # metrics.json
    verdicts: dict | None = None  # verdicts.json (audit)
    results: list[dict] | None = None  # results.jsonl (copying)
    canary: dict | None = None  # canary.json
    # where inputs that derive reads (a canary kit) are now, when moved since the run
    inputs: dict[str, Any] = field(default_factory=dict)

    def scores_frame(self):
        """The scores as a pandas DataFrame (one row per passage, one column per method)."""
        from copyprobe.scoring import scores_frame

        return scores_frame(self.scores or [], list(self.record.methods))


DERIVED_FILES = ("verdicts.json", "canary.json", "metrics.json")  # what rescore recomputes


def load_run(run_dir: str | os.PathLike, *, derived: bool = True) -> Run:
    """Read a run directory written by any copyprobe command (no model needed).
    ``derived=False`` leaves out the files computed from the others (:data:`DERIVED_FILES`),
    for a rescore that writes them anew (a damaged one is then no obstacle). Scores that do
    not match the run's passages (a file cut short, a row twice, an unknown id) are refused."""
    path = Path(run_dir)
    refuse_empty_path(run_dir, "the run directory's", "give the run directory that a copyprobe command wrote")
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise DataError(f"{path} {what} (give the run directory that a copyprobe command wrote)")
    try:
        stopped = (path / UNFINISHED).read_text(errors="replace")
    except FileNotFoundError:
        stopped = None
    except OSError:
        stopped = ""
    if stopped == RESCORING:
        # a rescore rewrites only what is derived: the model's answers and run.json are one
        # run, which the next rescore reads (a report waits for it)
        if derived:
            raise DataError(f"a rescore of {path} stopped while its files were written: run copyprobe rescore "
                            f"{path} again")
    elif stopped is not None:
        # write_run stopped between its first file and run.json: the files beside run.json (an
        # earlier run's, if any) may be of two runs, which no rescore or report may mix
        raise DataError(f"{path} holds a run stopped while its files were written (it may mix two runs' files); "
                        "run the command that wrote it again (with the cache it had, the model is not asked again)")
    record = RunRecord.from_json(read_json(path / "run.json"), str(path / "run.json"))
    files: dict[str, Any] = {}
    names = dict(RESULT_FILES.get(record.kind, {}))
    names.update(dict.fromkeys(DERIVED_FILES, False))
    for name in names:
        if not derived and name in DERIVED_FILES:
            continue
        shape = None
        if name == "scores.jsonl":
            shape = scores_row(list(record.methods))
        elif name == "metrics.json" and record.kind == "copying":
            shape = COPYING_METRICS
        files[name.split(".")[0]] = read_checked(path / name, shape, required=name == "scores.jsonl")
    run = Run(dir=path, record=record, **files)
    _check_scores_match(run)
    return run


def _check_scores_match(run: Run) -> None:
    """One scores row per passage of the run: metrics and verdicts recomputed from a file
    that lost or repeated rows would be wrong without a sign of it."""
    if run.scores is None:
        return
    where = run.dir / "scores.jsonl"
    line_of: dict[Any, int] = {}
    for line, row in enumerate(run.scores, 1):
        if row["id"] in line_of:
            raise DataError(f"{where}: passage {row['id']!r} has two rows (lines {line_of[row['id']]} and {line}): "
                            f"{DAMAGED}")
        line_of[row["id"]] = line
    if run.examples is None:
        # without the passages' file, run.json's count is what the rows are checked against
        expected = run.record.n_passages
        if expected is not None and run.record.kind in ("detect", "audit") and len(line_of) != expected:
            raise DataError(f"{where} has {len(line_of)} row{'s' if len(line_of) != 1 else ''} where run.json "
                            f"counts {expected} passages: {DAMAGED}")
        return
    known = {e["id"] for e in run.examples}
    unknown = [i for i in line_of if i not in known]
    if unknown:
        raise DataError(f"{where} line {line_of[unknown[0]]}: passage {unknown[0]!r} is not in examples.jsonl: "
                        f"{DAMAGED}")
    missing = [e["id"] for e in run.examples if e["id"] not in line_of]
    if missing:
        raise DataError(f"{where} has no row for {len(missing)} of the {len(known)} passages in examples.jsonl "
                        f"(the first: {missing[0]!r}): {DAMAGED}")


def write_run(out_dir: str | os.PathLike, record: RunRecord, files: dict[str, Any], marker: str | None = None) -> Path:
    """Write the result files, then run.json last (so a complete run.json means every
    file beside it is from the same run). A file given as None is removed, so a rerun
    into the same directory leaves no stale result behind. ``marker``: what the unfinished
    marker says meanwhile (the run's kind; :data:`RESCORING` for a rescore)."""
    out = Path(out_dir)
    # made again if gone: a run into the same empty directory that failed meanwhile removes
    # what it made while it is empty (discards_new_out_dir), and this run's results must land
    out.mkdir(parents=True, exist_ok=True)
    # written before the first result file, so files without run.json can be told to be this
    # run's (resumed by the same command) rather than anyone's; a run that stops earlier
    # leaves its directory as it found it
    (out / UNFINISHED).write_text(marker if marker is not None else str(record.kind or ""))
    for name, content in files.items():
        if content is None:
            (out / name).unlink(missing_ok=True)
        elif name.endswith(".jsonl"):
            write_jsonl(out / name, content)
        else:
            write_json(out / name, content)
    write_json(out / "run.json", record.to_json())
    (out / UNFINISHED).unlink(missing_ok=True)
    return out


# Left in an output directory by write_run (it holds the run's kind) until run.json is
# written: what tells a run interrupted while writing from files that are not a run's.
UNFINISHED = ".copyprobe-unfinished"
# what the marker says while a rescore rewrites the derived files (no run's kind)
RESCORING = "rescore"


def prepare_out_dir(out: str | os.PathLike, kind: str | None = None, model: Any = None) -> Path:
    """Create the output directory now, so an unwritable one fails before any model work.

    With ``kind``, a directory that already holds a run is reused only when it is a
    copyprobe run of the same kind (the same command run again): files of another kind,
    another tool or a damaged record are never silently replaced. With ``model`` (a spec
    or a backend), only a run of the same model spec is replaced: a record of what model A
    did is evidence that a run of model B must not erase."""
    refuse_empty_path(out, "the output directory's", "name a directory for the run", ConfigError)
    path = Path(out)
    try:
        there = path.stat().st_mode
    except OSError:  # nothing there (made below), or a problem the mkdir below names
        there = stat.S_IFDIR
    if not stat.S_ISDIR(there):  # else mkdir's "File exists" (of /dev/null, a named pipe, a file)
        raise ConfigError(f"cannot write to output directory {path}: it is {kind_of(there)}, not a directory")
    scopes = getattr(_made_in, "scopes", None)
    held = _hold(path)  # None where nothing is there yet: taken once made, below
    try:
        if kind is not None:
            _check_reusable(path, kind, spec_of(model))
        made = _make_out_dir(path)
        if held is None:  # made just now (or on a file system without locks: _hold says None again)
            held = _hold(path)  # refused if another run took it since: then it is that run's, kept
        if scopes:  # removed again if this run fails and they are still empty
            scopes[-1].made.extend(made)
    except BaseException:
        _release(held)
        raise
    if scopes:
        scopes[-1].held.append(held)  # released when the run's entry point returns or raises
    else:  # no run around it to hold the directory for: a check that no run is writing there
        _release(held)
    return path


def _make_out_dir(path: Path) -> list[Path]:
    """Make ``path`` and check it is writable; the directories made, deepest first (removed
    again when this fails)."""
    made: list[Path] = []  # deepest first
    try:
        for part in reversed(_missing_dirs(path)):
            try:
                part.mkdir()  # one level at a time, to know which this call made
                made.insert(0, part)
            except FileExistsError:  # made meanwhile by someone else (or a file: refused below)
                pass
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".copyprobe-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        _remove_if_empty(made)
        raise ConfigError(f"cannot write to output directory {path}: {exc.strerror or exc}") from None
    return made


# (st_dev, st_ino) of an output directory this process holds -> [its open descriptor, holders,
# the holding thread]: a run whose entry point prepares its directory again inside (detect,
# then the engine) holds it once; another thread's run is refused as another process's is
_held: dict[tuple[int, int], list[int]] = {}
_held_guard = threading.Lock()


def _forget_held_in_child() -> None:
    """In a forked child (a data loader's worker, multiprocessing's fork): close the
    copies of the held directories' descriptors. The child shares each lock with its
    parent, so a child that outlived the parent (a stuck worker) kept the directory
    locked: the next run there was refused as "another copyprobe run". The parent's
    locks are its own; a child holds none."""
    global _held_guard
    _held_guard = threading.Lock()  # the parent's, acquired for the fork, is not the child's to release
    for fd, _, _ in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


if hasattr(os, "register_at_fork"):
    # held across the fork, so the child copies _held whole, never half-updated (a
    # descriptor locked but not yet listed would stay open and locked in the child);
    # looked up at each call: the child replaces the lock
    os.register_at_fork(before=lambda: _held_guard.acquire(), after_in_parent=lambda: _held_guard.release(),
                        after_in_child=_forget_held_in_child)


def _hold(path: Path, advice: str = "wait for it to end, or choose another output directory") -> tuple[int, int] | None:
    """Lock the directory ``path`` against other processes (an advisory lock on the directory
    itself, so no file is left in it; the system drops it when the process ends, however it
    ends). Two runs writing into one directory at once would leave one run's run.json beside
    the other's scores. The key to :func:`_release`; None where the system has no such lock."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None  # not a directory we can open: what follows names the problem
    key = os.fstat(fd)[stat.ST_DEV], os.fstat(fd)[stat.ST_INO]
    with _held_guard:
        if key in _held and _held[key][2] == threading.get_ident():  # this run holds it already
            os.close(fd)
            _held[key][1] += 1
            return key
        if key in _held:
            os.close(fd)
            raise ConfigError(f"another copyprobe run is writing to {path}; {advice}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"another copyprobe run is writing to {path}; {advice}") from None
        except OSError:  # a file system without locks (some network ones): not guarded
            os.close(fd)
            return None
        _held[key] = [fd, 1, threading.get_ident()]
    return key


def _release(key: tuple[int, int] | None) -> None:
    if key is None:
        return
    with _held_guard:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _held[key]
            os.close(entry[0])  # closing the last descriptor drops the lock


@contextlib.contextmanager
def holding(run_dir: str | os.PathLike):
    """Hold the run directory ``run_dir`` while rewriting it (a rescore): refused while
    another run writes there."""
    key = _hold(Path(run_dir), "run this again when it has ended")
    try:
        yield
    finally:
        _release(key)


F = TypeVar("F", bound=Callable[..., Any])

@dataclass
class _Scope:
    """One running call of a :func:`discards_new_out_dir` function: the directories
    prepare_out_dir created during it (deepest first) and the locks it took."""

    made: list[Path] = field(default_factory=list)
    held: list[tuple[int, int] | None] = field(default_factory=list)


# per thread: the running calls of discards_new_out_dir functions (innermost last)
_made_in = threading.local()


def discards_new_out_dir(function: F) -> F:
    """Decorate a run's entry point (one that calls :func:`prepare_out_dir` early, so a bad
    output directory costs no work): when the call raises, the directories that
    prepare_out_dir created during it (the run directory and any parents it made) are
    removed again if they are still empty. A run refused after that point (bad data, an
    unknown model) then leaves no empty directory for the next run to find. A directory
    that existed before the call, or that the run wrote anything into (its files, the
    unfinished-run marker, a cache file), is never touched: nothing computed is lost."""

    @functools.wraps(function)
    def discarding(*args: Any, **kwargs: Any) -> Any:
        scopes = getattr(_made_in, "scopes", None)
        if scopes is None:
            scopes = _made_in.scopes = []
        scope = _Scope()
        scopes.append(scope)
        try:
            result = function(*args, **kwargs)
        except BaseException:
            _remove_if_empty(scope.made)
            raise
        finally:
            scopes.pop()
            for key in scope.held:
                _release(key)
        if scopes:  # a run inside another run: the outer one's failure still removes them if empty
            scopes[-1].made.extend(scope.made)
        return result

    return discarding  # type: ignore[return-value]


def _missing_dirs(path: Path) -> list[Path]:
    """The directories that making ``path`` would create, deepest first."""
    missing = []
    for part in (path.absolute(), *path.absolute().parents):
        try:
            os.lstat(part)
            break
        except FileNotFoundError:
            missing.append(part)
        except OSError:  # cannot tell (permission denied): not ours to remove; mkdir says why
            break
    return missing


def _remove_if_empty(dirs: list[Path]) -> None:
    for directory in dirs:  # deepest first, so a parent made for it is empty when its turn comes
        try:
            directory.rmdir()  # refuses a directory that holds anything, atomically
        except OSError:
            pass


def spec_of(model: Any) -> str | None:
    """The model spec of a run's model: the text given, or a backend's or session's own."""
    spec = model if isinstance(model, str) else getattr(model, "target_spec", getattr(model, "spec", None))
    return spec.strip() if isinstance(spec, str) and spec.strip() else None


def _check_reusable(path: Path, kind: str, spec: str | None = None) -> None:
    if not (path / "run.json").is_file():
        # run.json is written last: a run's files without it are a run whose writing failed,
        # which the same command resumes; without the marker of such a run they may be
        # anyone's (a user's own scores.jsonl), so a file the run would write is never replaced
        try:
            if (path / UNFINISHED).read_text(errors="replace") == kind:
                return
        except OSError:
            pass
        names = dict.fromkeys([*RESULT_FILES.get(kind, {}), *DERIVED_FILES, "report.html"])
        found = next((name for name in names if (path / name).exists()), None)
        if found is not None:
            raise ConfigError(f"{path} holds {found} but no run.json (not a finished copyprobe run); {article(kind)} "
                              f"{kind} run would overwrite it; choose a new output directory")
        return
    advice = "choose a new output directory"
    try:
        found = read_json(path / "run.json")
    except (OSError, DataError) as exc:
        raise ConfigError(f"{exc}; it would be overwritten; {advice}") from None
    # records from before format_version may lack "kind" (and "command"): detect or copying
    if not isinstance(found, dict) or not {"kind", "format_version", "methods", "copying"} & set(found):
        raise ConfigError(f"{path / 'run.json'} is not a copyprobe run record; it would be overwritten; {advice}")
    other = found["kind"] if "kind" in found else _legacy_kind(found)
    if not isinstance(other, str):
        raise ConfigError(f"{path / 'run.json'} is not a copyprobe run record; it would be overwritten; {advice}")
    if other != kind:
        raise ConfigError(f"{path} holds {article(other)} {other} run; {article(kind)} {kind} run would overwrite it; {advice}")
    recorded = found.get("model") if isinstance(found.get("model"), dict) else {}
    before = recorded.get("spec")
    if spec is not None and isinstance(before, str) and before.strip() and not _same_model(recorded, spec):
        raise ConfigError(f"{path} holds {article(kind)} {kind} run of model {before.strip()}; a run of {spec} would "
                          f"overwrite it; {advice}")


def _same_model(recorded: dict, spec: str) -> bool:
    """Whether ``spec`` names the model of a recorded run: as written, or as loaded (hf:./m
    and hf:/abs/m, an alias and gguf: of its file), each path resolved from the working
    directory of its own run. A record without ``weights_location`` (a remote model, a run
    of an earlier version) is compared as written."""
    if str(recorded.get("spec")).strip() == spec:
        return True
    location = recorded.get("weights_location")
    if not isinstance(location, list):
        return False
    from copyprobe.backends.specs import weights_identity

    identity = weights_identity(spec)
    return identity is not None and list(identity) == location


__all__ = [
    "FORMAT_VERSION", "Run", "RunRecord", "discards_new_out_dir", "load_run", "prepare_out_dir", "read_json",
    "read_jsonl", "utc_now", "versions", "write_json", "write_jsonl", "write_run",
]
