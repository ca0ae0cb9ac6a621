"""Run the copying tasks over a CopySet with :func:`copyprobe.drive.drive`.

Every (task, item, template) is one generator; the driver batches, de-duplicates and
caches all their generations (and the judges' requests, which name their judge model).
Fluency, when asked, is a second stage of the literal and non-literal generators: the
judge grades the same output that was scored for copying.

The result is one row per (task, item, template) — with ``error`` set when the item could
not be scored — and metrics computed from those rows only (so they can be recomputed from
``results.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from copyprobe.copying import literal as lit
from copyprobe.copying import nonliteral as nl
from copyprobe.copying import prompts
from copyprobe.copying import qa as qa_mod
from copyprobe.copying.common import GenConfig
from copyprobe.copying.data import CopySet
from copyprobe.data.sampling import sample_items
from copyprobe.copying.fluency import FluencyJudge, fluency_judge_failed
from copyprobe.engine import Collected, Derived, RunKind, execute
from copyprobe.errors import ConfigError, DataError, SettingError
from copyprobe.params import (
    BOOTSTRAP_COUNT,
    COUNT,
    NON_NEGATIVE_INT,
    POSITIVE,
    PROBABILITY,
    SEED,
    Boolean,
    Constraint,
    Integer,
    Items,
    OneOf,
    Optional,
    Setting,
    Settings,
    comma_items,
)
from copyprobe.record import DAMAGED, Run, RunRecord, discards_new_out_dir
from copyprobe.drive import DriveStats, Failure, drive
from copyprobe.progress import check_progress

TASKS = ("literal", "nonliteral", "qa", "fluency")


class Tasks(Constraint):
    """Copying tasks: at least one of literal, nonliteral, qa; fluency grades their outputs."""

    def parse(self, text: str) -> tuple[str, ...]:
        return tuple(comma_items(text))

    def describe(self) -> str:
        return f"comma-separated tasks from {', '.join(TASKS)}"

    def reason(self, value: Any) -> str | None:
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            return f"must be a sequence of task names, got {value!r}"
        if not value:
            return f"is empty (choose from {', '.join(TASKS)})"
        unknown = [t for t in value if t not in TASKS]
        if unknown:
            # repr: a name with a line break or an escape sequence stays one printable line
            return f"has unknown copying task(s) {', '.join(map(repr, unknown))} (choose from {', '.join(TASKS)})"
        if set(value) == {"fluency"}:
            return "is only fluency: fluency grades the outputs of literal/nonliteral, add one of them"
        return None


class Templates(Items):
    """Indices into the prompt templates of Fig. 5 / Fig. 6."""

    def __init__(self) -> None:
        super().__init__(Integer(0, 2))

    def reason(self, value: Any) -> str | None:
        if isinstance(value, (tuple, list)) and value and all(isinstance(t, int) for t in value):
            wrong = [t for t in value if t not in (0, 1, 2)]
            if wrong:
                return f"has template index {wrong[0]} out of range (0, 1, 2)"
            # a template given twice asks each item once (its rows have one key), then the
            # run's own count of rows called its files damaged, after all the generation
            twice = next((t for i, t in enumerate(value) if t in value[:i]), None)
            return f"names template {twice} twice: the second has no effect; give each once" if twice is not None \
                else None
        return super().reason(value)


# copying's settings, declared once: CopyConfig checks them (once), the command line makes
# its options from them, run.json's copying section records them (CopyConfig.describe)
SETTINGS = Settings(
    Setting("tasks", TASKS, Tasks(), "copying tasks: literal, nonliteral, qa, fluency"),
    Setting("mitigation", "none", OneOf("none", "memfree", "system_prompt"), "inference-time mitigation"),
    Setting("templates", (0,), Templates(),
            "prompt templates of Fig. 5/6 to use, comma-separated from 0,1,2 (the paper uses all three)"),
    Setting("chat", False, Boolean(), "send prompts as chat messages (system reminder as system message)"),
    Setting("literal_threshold", lit.DEFAULT_THRESHOLD, PROBABILITY, "ROUGE-L threshold for literal copying"),
    Setting("event_threshold", nl.EVENT_THRESHOLD, NON_NEGATIVE_INT, "events for non-literal copying"),
    Setting("character_threshold", nl.CHARACTER_THRESHOLD, NON_NEGATIVE_INT, "characters for non-literal copying"),
    Setting("repetition_penalty", 1.1, POSITIVE, "repetition penalty of generations (1.1 as the paper)"),
    Setting("literal_max_tokens", 100, COUNT, "max new tokens of literal completions"),
    Setting("nonliteral_max_tokens", 1024, COUNT, "max new tokens of stories (1024 as the paper)"),
    Setting("limit", None, Optional(COUNT),
            "only N items of each task, a seeded random sample kept in data order (a quick try-out)"),
    Setting("sample_seed", 0, SEED, "seed of the random sample of items that a limit keeps"),
    Setting("baseline", True, Boolean(), "also score literal copying on clean text"),
    Setting("n_bootstrap", 1000, BOOTSTRAP_COUNT, "bootstrap resamples of the CI of the difference to the baseline"),
)

# the settings of the MemFree filter, which copying() builds into the backend
MEMFREE_SETTINGS = Settings(
    Setting("memfree_n", 10, Integer(2), "MemFree n-gram length in tokens"),
    Setting("memfree_index", "set", OneOf("set", "bloom"), "MemFree n-gram index"),
)


def parse_tasks(text: str | Sequence[str]) -> tuple[str, ...]:
    """Task names (a comma-separated string or a sequence), checked, without repeats."""
    tasks = SETTINGS["tasks"].constraint
    names = tasks.convert(text, "tasks") if isinstance(text, str) else tasks.validate(tuple(text), "tasks")
    return tuple(dict.fromkeys(names))


@dataclass
class CopyConfig:
    tasks: tuple[str, ...] = SETTINGS.default("tasks")
    gen: GenConfig = field(default_factory=GenConfig)
    templates: tuple[int, ...] = SETTINGS.default("templates")  # indices into Fig. 5 / Fig. 6
    literal_max_tokens: int = SETTINGS.default("literal_max_tokens")
    nonliteral_max_tokens: int = SETTINGS.default("nonliteral_max_tokens")  # B.1
    qa_max_tokens: int = 32
    literal_threshold: float = SETTINGS.default("literal_threshold")
    literal_words: int = lit.DEFAULT_WORDS
    event_threshold: int = SETTINGS.default("event_threshold")
    character_threshold: int = SETTINGS.default("character_threshold")
    chunk_tokens: int = nl.CHUNK_TOKENS
    judge: Any = None  # an EmbeddingJudge / BackendJudge; default EmbeddingJudge()
    fluency_judge: FluencyJudge | None = None  # default: the evaluated model itself
    demos: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    limit: int | None = SETTINGS.default("limit")  # at most this many items per task (sample_items)
    sample_seed: int = SETTINGS.default("sample_seed")
    baseline: bool = SETTINGS.default("baseline")  # literal copying also on clean text (copying.baseline)
    n_bootstrap: int = SETTINGS.default("n_bootstrap")  # resamples of the CI of the difference to the baseline
    bootstrap_seed: int = 0

    def __post_init__(self):
        if isinstance(self.tasks, str):
            self.tasks = SETTINGS["tasks"].constraint.convert(self.tasks, "tasks")
        self.tasks, self.templates = tuple(self.tasks), tuple(self.templates)
        SETTINGS.check({**{s.name: getattr(self, s.name) for s in SETTINGS if hasattr(self, s.name)},
                        "mitigation": self.gen.mitigation, "chat": self.gen.chat,
                        "repetition_penalty": self.gen.repetition_penalty})
        self.tasks = tuple(dict.fromkeys(self.tasks))

    def describe(self) -> dict[str, Any]:
        judge = self.judge.describe() if self.judge is not None and "nonliteral" in self.tasks else None
        fj = (self.fluency_judge or FluencyJudge()).describe() if "fluency" in self.tasks else None
        return {
            "tasks": list(self.tasks), "mitigation": self.gen.mitigation, "chat": self.gen.chat,
            "repetition_penalty": self.gen.repetition_penalty, "temperature": 0.0,
            "templates": list(self.templates), "literal_max_tokens": self.literal_max_tokens,
            "nonliteral_max_tokens": self.nonliteral_max_tokens, "qa_max_tokens": self.qa_max_tokens,
            "literal_threshold": self.literal_threshold, "literal_words": self.literal_words,
            "event_threshold": self.event_threshold, "character_threshold": self.character_threshold,
            "chunk_tokens": self.chunk_tokens, "event_judge": judge, "fluency_judge": fj,
            "n_demos": {k: len(v) for k, v in self.demos.items()}, "limit": self.limit,
            "sample_seed": self.sample_seed,
            "baseline": self.baseline, "n_bootstrap": self.n_bootstrap, "bootstrap_seed": self.bootstrap_seed,
        }


    @classmethod
    def from_description(cls, described: dict[str, Any]) -> "CopyConfig":
        """The settings that decide the metrics, from a run record's ``copying`` section
        (judges and demos are not needed to recompute metrics from saved results)."""
        keys = ("literal_threshold", "literal_words", "event_threshold", "character_threshold",
                "literal_max_tokens", "nonliteral_max_tokens", "qa_max_tokens", "chunk_tokens", "limit",
                "sample_seed", "baseline", "n_bootstrap", "bootstrap_seed")
        return cls(tasks=tuple(described["tasks"]), templates=tuple(described.get("templates", (0,))),
                   **{k: described[k] for k in keys if k in described})


def _with_fluency(inner, judge: FluencyJudge | None):
    result = yield from inner
    if judge is not None:
        result.update((yield from judge.judge(result["output"])))
    return result


def build_runs(data: CopySet, config: CopyConfig,
               clean: Sequence[lit.LiteralItem] = ()) -> tuple[dict[tuple, Any], dict[tuple, dict]]:
    """(key -> generator, key -> row skeleton); ``clean`` literal items are the baseline
    (rows with ``set`` = "clean")."""
    if config.judge is None and "nonliteral" in config.tasks:
        config.judge = nl.EmbeddingJudge()
    fj = (config.fluency_judge or FluencyJudge()) if "fluency" in config.tasks else None
    gen = config.gen
    runs: dict[tuple, Any] = {}
    rows: dict[tuple, dict] = {}

    def sample(items: Sequence[Any]) -> list[Any]:
        return sample_items(items, config.limit, config.sample_seed)

    if "literal" in config.tasks:
        g = GenConfig(config.literal_max_tokens, gen.repetition_penalty, gen.chat, gen.mitigation)
        literal = [(item, "suspect") for item in sample(data.literal)] + [(item, "clean") for item in clean]
        for item, which in literal:
            for t in config.templates:
                key = ("literal", item.id, t)
                rows[key] = {"task": "literal", "id": item.id, "title": item.title,
                             "template": prompts.LITERAL_TEMPLATES[t].name, "set": which,
                             "prefix_tail": " ".join(item.input.split()[-40:]), "reference": item.reference}
                runs[key] = _with_fluency(
                    lit.run_literal(item, g, template=t, demos=config.demos.get("literal", ()),
                                    words=config.literal_words, threshold=config.literal_threshold), fj)
    if "nonliteral" in config.tasks:
        g = GenConfig(config.nonliteral_max_tokens, gen.repetition_penalty, gen.chat, gen.mitigation)
        for item in sample(data.nonliteral):
            for t in config.templates:
                key = ("nonliteral", item.id, t)
                rows[key] = {"task": "nonliteral", "id": item.id, "title": item.title,
                             "template": prompts.NONLITERAL_TEMPLATES[t].name}
                runs[key] = _with_fluency(
                    nl.run_nonliteral(item, g, config.judge, template=t, demos=config.demos.get("nonliteral", ()),
                                      event_threshold=config.event_threshold,
                                      character_threshold=config.character_threshold,
                                      chunk_tokens=config.chunk_tokens), fj)
    if "qa" in config.tasks:
        g = GenConfig(config.qa_max_tokens, gen.repetition_penalty, gen.chat, gen.mitigation)
        for item in sample(data.qa):
            key = ("qa", item.id, 0)
            rows[key] = {"task": "qa", "id": item.id, "title": item.title, "template": prompts.QA_TEMPLATE.name,
                         "reference": list(item.reference)}
            runs[key] = qa_mod.run_qa(item, g, demos=config.demos.get("qa", ()), max_tokens=config.qa_max_tokens)
    return runs, rows


def run_copying(
    data: CopySet,
    backend_for: Callable[[str | None], Any],
    config: CopyConfig,
    progress=None,
    stats: DriveStats | None = None,
    clean: Sequence[lit.LiteralItem] = (),
) -> tuple[list[dict], dict[str, Any]]:
    """Run the tasks (and the literal task on the ``clean`` baseline items); returns (rows, metrics)."""
    runs, skeleton = build_runs(data, config, clean)
    kwargs = {"progress": progress} if progress is not None else {}
    results = drive(runs, backend_for, stats=stats, **kwargs) if runs else {}
    rows = result_rows(data, config, skeleton, results)
    return rows, compute_metrics(rows, config)


def result_rows(data: CopySet, config: CopyConfig, skeleton: dict[tuple, dict],
                results: dict[Any, Any]) -> list[dict]:
    """results.jsonl: one row per (task, item, template), ``error`` set when it could not be scored."""
    from copyprobe.copying.baseline import longest_common_span

    rows = []
    for key, base in skeleton.items():
        res = results.get(key)
        row = dict(base)
        if isinstance(res, Failure):
            row["error"] = res.reason
        elif isinstance(res, dict):
            row.update(res)
            row.setdefault("error", None)
            if row["task"] == "literal" and row["error"] is None:
                row["longest_span_words"], row["longest_span"] = longest_common_span(row["output"], row["reference"])
        else:
            row["error"] = "no result"
        rows.append(row)
    wanted = {t for t in config.tasks if t != "fluency"}
    for err in data.errors:
        if err.task in wanted:
            rows.append({"task": err.task, "id": err.id, "title": "", "template": None,
                         "error": f"bad input: {err.reason}"})
    return rows


def _mean(values: list[float]) -> float | None:
    return mean(values) if values else None


def _fluency_block(rows: list[dict]) -> dict[str, Any]:
    judged = [r for r in rows if r.get("error") is None and ("fluency" in r)]
    scores = [r["fluency"] for r in judged if r["fluency"] is not None]
    failed = sum(1 for r in judged if r["fluency"] is None and fluency_judge_failed(r))
    block = {"mean": _mean(scores), "n": len(scores), "n_unparseable": sum(1 for r in judged if r["fluency"] is None)
             - failed}
    if failed:  # only then: a run recorded before the count existed rescores to the same file
        block["n_judge_failed"] = failed
    return block


def _literal_block(ok: list[dict], config: CopyConfig) -> dict[str, Any]:
    return {
        "rate": _mean([float(r["rouge_l"] >= config.literal_threshold) for r in ok]),
        "threshold": config.literal_threshold,
        "mean_rouge_l": _mean([r["rouge_l"] for r in ok]),
        "mean_lcs": _mean([r["lcs"] for r in ok]),
    }


def _nonliteral_block(ok: list[dict], config: CopyConfig) -> dict[str, Any]:
    ev = [r for r in ok if r.get("event_copied") is not None]
    ch = [r for r in ok if r.get("character_overlap") is not None]
    undetermined = len(ok) - len(ev)
    copied = sum(bool(r["event_copied"]) for r in ev)
    return {
        "event_rate": _mean([float(r["event_copied"]) for r in ev]),
        # an item is undetermined only while its count is below the threshold (one at or
        # above it is copied whatever the unreadable answers say), so the rate over the
        # determined ones leans high: its bounds count the undetermined as not copied / copied
        "event_rate_bounds": [copied / len(ok), (copied + undetermined) / len(ok)] if ok else None,
        "event_threshold": config.event_threshold,
        "character_rate": _mean([float(r["character_overlap"] >= config.character_threshold) for r in ch]),
        "character_threshold": config.character_threshold,
        "mean_event_overlap": _mean([r["event_overlap"] for r in ev if r.get("event_overlap") is not None]),
        "mean_character_overlap": _mean([r["character_overlap"] for r in ch]),
        "n_events_scored": len(ev), "n_characters_scored": len(ch),
        "n_event_undetermined": sum(1 for r in ok if r.get("event_copied") is None),
    }


def _qa_block(ok: list[dict], _config: CopyConfig) -> dict[str, Any]:
    return {
        "exact_match": _mean([r["exact_match"] for r in ok]),
        "f1": _mean([r["f1"] for r in ok]),
        "format_ok_rate": _mean([float(r["format_ok"]) for r in ok]),
    }


_TASK_BLOCKS = {"literal": _literal_block, "nonliteral": _nonliteral_block, "qa": _qa_block}
_FLUENCY_TASKS = ("literal", "nonliteral")  # QA answers are too short to judge for fluency


def compute_metrics(rows: list[dict], config: CopyConfig, n_bootstrap: int | None = None) -> dict[str, Any]:
    """Metrics of the suspect rows per task, and ``baseline`` (literal copying on the clean
    rows, with the bootstrap CI of the difference) when the run has clean rows."""
    out: dict[str, Any] = {}
    by_task: dict[str, list[dict]] = {}
    clean = [r for r in rows if r.get("set") == "clean"]
    rows = [r for r in rows if r.get("set") != "clean"]
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    for task, block_of in _TASK_BLOCKS.items():
        if task not in config.tasks:
            continue
        rs = by_task.get(task, [])
        ok = [r for r in rs if r.get("error") is None]
        block = {**block_of(ok, config), "n": len(ok), "n_errors": len(rs) - len(ok)}
        if task in _FLUENCY_TASKS and "fluency" in config.tasks:
            block["fluency"] = _fluency_block(rs)
        out[task] = block
    if clean and "literal" in config.tasks:
        from copyprobe.copying.baseline import comparison

        ok_clean = [r for r in clean if r.get("error") is None]
        ok = [r for r in by_task.get("literal", []) if r.get("error") is None]
        out["baseline"] = {
            **comparison(ok, ok_clean, config.literal_threshold,
                         config.n_bootstrap if n_bootstrap is None else n_bootstrap, config.bootstrap_seed),
            "clean_literal": {**_literal_block(ok_clean, config), "n": len(ok_clean),
                              "n_errors": len(clean) - len(ok_clean)},
        }
    return out


# ------------------------------------------------------------------ the run kind
class CopyingCollection:
    """collect for ``copying``: one generator per (task, item, template)."""

    def __init__(self, data: CopySet, config: CopyConfig, clean: Sequence[lit.LiteralItem],
                 fields: dict[str, Any], memfree: tuple[dict[str, Any], Any] | None = None):
        self.data, self.config, self.clean, self.fields, self.memfree = data, config, clean, fields, memfree
        self.skeleton: dict[tuple, dict] = {}

    def plan(self, session: Any) -> dict[tuple, Any]:
        runs, self.skeleton = build_runs(self.data, self.config, self.clean)
        return runs

    def finish(self, results: dict[Any, Any], stats: DriveStats) -> Collected:
        rows = result_rows(self.data, self.config, self.skeleton, results)
        fields = dict(self.fields, copying=self.config.describe(),
                      failures=[{"task": r["task"], "id": r["id"], "template": r.get("template"),
                                 "error": r["error"]} for r in rows if r.get("error")],
                      partial_failures=partial_failures(rows))
        if self.memfree is not None:  # every generation is done: the filter's count is final
            info, proc = self.memfree
            info["rejections"] = proc.n_rejections
        return Collected(files={"results.jsonl": rows}, record=fields)


def partial_failures(rows: list[dict]) -> list[dict]:
    """run.json's ``partial_failures``: the scored rows that lost one of their scores to a
    failed judge: the event score of a non-literal row (its character score stands) or the
    fluency score of a graded row (its copying scores stand).
    Apart from ``failures``, which lists the rows without any score (``n_errors``); nothing
    derived reads it, so a run written before it existed rescores as before."""
    out = [{"task": r["task"], "id": r["id"], "template": r.get("template"), "missing": "event score",
            "error": r["event_error"]} for r in rows if nl.event_judge_failed(r)]
    return out + [{"task": r["task"], "id": r["id"], "template": r.get("template"), "missing": "fluency score",
                   "error": r["fluency_error"]} for r in rows if r.get("error") is None and fluency_judge_failed(r)]


def derive_copying(run: Run) -> Derived:
    """metrics.json from results.jsonl and the copying settings in run.json."""
    if run.results is None or not run.record.copying:
        raise DataError(f"{run.dir} lacks results.jsonl or the copying settings in run.json")
    _check_results_match(run)  # a hand-edited run.json was checked by rescore (recorded_config)
    return Derived({"metrics.json": compute_metrics(run.results, CopyConfig.from_description(run.record.copying))})


def recorded_config(run: Run) -> CopyConfig:
    """The settings run.json's copying section records, each checked as the command line
    checks it; a hand-edited value is one DataError naming run.json and the key (never the
    option of the command that reads the run: it was not given there)."""
    where = run.dir / "run.json"
    SETTINGS.check_recorded(run.record.copying, f"{where}: 'copying")
    try:
        return CopyConfig.from_description(run.record.copying)
    except SettingError as exc:  # what check_recorded cannot see, e.g. a section without its tasks
        raise DataError(f"{where}: 'copying.{exc.setting}' {exc.problem}") from None


def _check_results_match(run: Run) -> None:
    """One results row per (task, item, template, set) that run.json says was asked for:
    metrics recomputed from a file that lost or repeated rows would be wrong without a sign
    of it. Rows for bad input (one per input error) are not counted."""
    where = run.dir / "results.jsonl"
    line_of: dict[tuple, int] = {}
    asked: dict[str, int] = {}
    for line, row in enumerate(run.results or [], 1):
        if row.get("template") is None and str(row.get("error") or "").startswith("bad input"):
            continue
        key = (row["task"], row["id"], row.get("template"), row.get("set"))
        if key in line_of:
            raise DataError(f"{where}: {row['task']} item {row['id']!r} (template {row.get('template')}) has two "
                            f"rows (lines {line_of[key]} and {line}): {DAMAGED}")
        line_of[key] = line
        asked[row["task"]] = asked.get(row["task"], 0) + 1
    counts = (run.record.data or {}).get("counts")
    if not isinstance(counts, dict):  # a record without the data's counts: nothing to hold the rows against
        return
    described = run.record.copying
    limit = described.get("limit")
    templates = len(described.get("templates") or ())
    n_clean = ((run.record.data or {}).get("clean") or {}).get("n_literal", 0)
    for task in ("literal", "nonliteral", "qa"):
        if task not in described.get("tasks", ()):
            continue
        items = counts.get(task, 0) if limit is None else min(limit, counts.get(task, 0))
        expected = items if task == "qa" else (items + (n_clean if task == "literal" else 0)) * templates
        if asked.get(task, 0) != expected:
            raise DataError(f"{where} has {asked.get(task, 0)} {task} rows where run.json asked for {expected}: "
                            f"{DAMAGED}")


def _resample(rec: RunRecord, n_bootstrap: int | None) -> None:
    if n_bootstrap is not None and rec.copying:
        rec.copying = {**rec.copying, "n_bootstrap": n_bootstrap}


def _check_recorded(run: Run) -> None:
    if run.record.copying:  # missing: derive says so
        recorded_config(run)  # before the rows are counted against what it asked for


KIND = RunKind("copying", {"results.jsonl": True, "metrics.json": False}, derive_copying, _resample, _check_recorded)


@discards_new_out_dir  # a run refused after making its directory leaves none behind
def copying(
    model: Any,
    data: Any,
    config: CopyConfig,
    *,
    out: Any = None,
    cache: Any = True,
    batch_size: int | str = "auto",
    device: str = "auto",
    dtype: str = "auto",
    memfree_n: int = MEMFREE_SETTINGS.default("memfree_n"),
    memfree_index: str = MEMFREE_SETTINGS.default("memfree_index"),
    progress=None,
    command: list[str] | None = None,
    book_options: dict[str, Any] | None = None,
    clean: Any = None,
) -> dict[str, Any]:
    """Evaluate copying of ``model`` (spec or Backend) on ``data`` (path, built-in name or
    CopySet) and, with ``out``, write the run directory. Returns {"rows", "metrics", "run"}.
    Literal copying is also scored on ``clean`` text (a path or CopySet; None: the default
    clean set) unless ``config.baseline`` is false."""
    import hashlib
    import sys
    import time
    from pathlib import Path

    from copyprobe import record
    from copyprobe.copying.data import load_copyset
    from copyprobe.copying.memfree import memfree_backend

    started = time.perf_counter()
    MEMFREE_SETTINGS.check({"memfree_n": memfree_n, "memfree_index": memfree_index})
    check_progress(progress)  # execute checks it too, but MemFree loads the model before it
    out_dir = record.prepare_out_dir(out, "copying", model) if out is not None else None
    copyset = data if isinstance(data, CopySet) else load_copyset(data, **(book_options or {}))
    notes: list[str] = []
    data_info: dict[str, Any] = {"path": copyset.source or None, "counts": copyset.counts()}
    if copyset.source and Path(copyset.source).is_file():
        data_info["sha256"] = hashlib.sha256(Path(copyset.source).read_bytes()).hexdigest()
    wanted = [t for t in config.tasks if t != "fluency"]
    if not any(getattr(copyset, t) for t in wanted):
        raise DataError(f"the data has no items for the tasks asked ({', '.join(wanted)}); it has {copyset.counts()}")
    clean_items: list = []
    if config.baseline and "literal" in config.tasks and copyset.literal:
        from copyprobe.copying.baseline import DEFAULT_CLEAN, matched_clean_items

        matched = matched_clean_items(clean, sample_items(copyset.literal, config.limit, config.sample_seed),
                                      seed=config.sample_seed)
        clean_items = matched.items
        source = clean.source if isinstance(clean, CopySet) else str(clean if clean is not None else DEFAULT_CLEAN)
        data_info["clean"] = {"path": source, "default": clean is None, "n_literal": len(clean_items)}
        if matched.note:
            notes.append(matched.note)
    memfree = None
    load_start = time.perf_counter()
    target: Any = model
    if config.gen.mitigation == "memfree":
        corpus = copyset.protected_corpus()
        if not corpus:
            notes.append("MemFree: the data has no protected texts (no 'protected' list and no literal items)")
        if isinstance(model, str):
            target, proc = memfree_backend(model, corpus, n=memfree_n, kind=memfree_index,
                                           batch_size=batch_size, device=device, dtype=dtype)
        else:
            raise ConfigError("with mitigation memfree give a model spec (the backend is built with the filter)")
        memfree = ({"n": memfree_n, "index": memfree_index, "protected_texts": len(corpus),
                    "protected_ngrams": proc.index.n_ngrams, "fingerprint": proc.fingerprint()}, proc)
    fields = {"mitigation": {"name": config.gen.mitigation, "memfree": memfree[0] if memfree else None},
              "data": data_info, "notes": notes}
    collection = CopyingCollection(copyset, config, clean_items, fields, memfree)
    try:
        done = execute(KIND, target, collection, out=out_dir, cache=cache, batch_size=batch_size, device=device,
                       dtype=dtype, progress=progress, command=command if command is not None else list(sys.argv),
                       started=started, load_s=time.perf_counter() - load_start)
    finally:
        if target is not model:  # the MemFree backend is ours to release
            target.close()
    return {"rows": done.files["results.jsonl"], "metrics": done.files["metrics.json"],
            "run": done.record.to_json(), "out": out_dir}
