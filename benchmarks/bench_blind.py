"""What the blind baseline costs (issue 34, item 3), before and after, on the 1,650 WikiMIA
passages (all four lengths, as one labelled data set without documents).

In one process, interleaved ``--repeats`` times: the blind baseline of the commit given
by ``--before`` (its ``copyprobe/evaluation/blind.py``, read with ``git show``), today's
(counts once, fits on threads), today's with the fits on one thread, and a read from the
cache (``cached_blind_baseline`` after one computation). Each is timed in CPU seconds of
the process (all threads; what the baseline takes from a machine) and wall seconds, and
its result is compared with the before result (every field). The scikit-learn modules the
baseline imports are imported first and timed apart (``metrics.py`` already imports
``sklearn.metrics`` in every run that has labels).

Then the CPU seconds of each step of today's baseline (fits on one thread), and how fast a
pure-Python thread runs beside its logistic fits (whether they release the GIL). Then, the
baseline on the critical path: ``copyprobe.detect`` on the same passages with a
fake model slowed to take ``--critical-path-s`` seconds to score, with the baseline
started before the model (as detect does) and without: how long derive waits for it.

``--scoring-run DIR`` names a ``copyprobe detect --methods loss`` run on the same passages
(its ``run.json`` timings and, with ``--scoring-time FILE``, the ``/usr/bin/time -v``
output of it) so the baseline's cost is printed as a share of the scoring time.

    python benchmarks/bench_blind.py --before 9324ce4 [--repeats 3] [--scoring-run DIR --scoring-time FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def wikimia_all() -> tuple[list[str], list[int]]:
    from copyprobe.data.readers import load_dataset

    texts, labels = [], []
    for split in ("32", "64", "128", "256"):
        for example in load_dataset(f"wikimia:{split}").examples:
            texts.append(example.text)
            labels.append(example.label)
    return texts, labels


def module_at(commit: str):
    """copyprobe/evaluation/blind.py as it was at ``commit``, as a module."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:copyprobe/evaluation/blind.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / f"blind_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"blind_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(function):
    cpu, wall = time.process_time(), time.perf_counter()
    result = function()
    return result, round(time.process_time() - cpu, 3), round(time.perf_counter() - wall, 3)


def scoring_time(run_dir: Path, time_file: Path | None) -> dict:
    record = json.loads((run_dir / "run.json").read_text())
    out = {"run": str(run_dir), "n_passages": record.get("n_passages"), "n_tokens": record.get("n_tokens"),
           "timings": record.get("timings")}
    if time_file is not None and time_file.exists():
        text = time_file.read_text()
        for name, pattern in (("user_s", r"User time \(seconds\): ([\d.]+)"),
                              ("system_s", r"System time \(seconds\): ([\d.]+)")):
            found = re.search(pattern, text)
            out[name] = float(found.group(1)) if found else None
    return out


def steps(texts: list[str], labels: list[int]) -> dict[str, float]:
    """CPU seconds of each step of today's baseline, the fits on one thread."""
    import numpy as np

    from copyprobe.evaluation import blind

    y = np.asarray(labels)
    out = {}
    meta, out["text_and_date_features"] = timed(lambda: (blind.text_features(texts), blind.date_features(texts)))[:2]
    counts, out["ngram_counts"] = timed(lambda: blind.ngram_counts(texts))[:2]
    splits = blind._splits(y, None, 5, 0)
    _, out["fold_tfidf"] = timed(lambda: [blind._fold_tfidf(c, train, test) for train, test in splits
                                          for c in counts])[:2]
    cpus = os.cpu_count
    os.cpu_count = lambda: 1
    try:
        oof, total = timed(lambda: blind._out_of_fold(texts, meta[0], meta[1], y, splits, 0))[:2]
    finally:
        os.cpu_count = cpus
    out["logistic_fits"] = round(total - out["ngram_counts"] - out["fold_tfidf"], 3)  # _out_of_fold's rest
    fold_of = np.empty(len(y), dtype=int)
    for k, (_, test) in enumerate(splits):
        fold_of[test] = k
    _, out["bootstrap_interval"] = timed(lambda: blind._within_fold_ci(y, oof["combined"], fold_of, None, 1000, 0))[:2]
    return out


def gil_share(texts: list[str], labels: list[int]) -> float:
    """Speed of a pure-Python thread while the combined feature set's logistic fits run in
    another thread, as a share of its speed beside a sleeping thread: near 1 when the fits
    release the GIL, near 0.5 or less when they hold it."""
    import threading

    import numpy as np
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    from copyprobe.evaluation import blind

    y = np.asarray(labels)
    train, test = blind._splits(y, None, 5, 0)[0]
    chars, words = (blind._fold_tfidf(c, train, test)[0] for c in blind.ngram_counts(texts))
    x = sparse.hstack([chars, words, blind.date_features(texts)[train]]).tocsr()

    def speed(work) -> float:
        stop, count = threading.Event(), [0]

        def spin() -> None:
            while not stop.is_set():
                count[0] += 1
        thread = threading.Thread(target=spin)
        start = time.perf_counter()
        thread.start()
        work()
        stop.set()
        thread.join()
        return count[0] / (time.perf_counter() - start)

    fits = speed(lambda: [LogisticRegression(C=1.0, max_iter=2000, random_state=0).fit(x, y[train])
                          for _ in range(3)])
    idle = speed(lambda: time.sleep(2))
    return round(fits / idle, 2)


def critical_path(texts: list[str], labels: list[int], scoring_s: float) -> dict:
    """How long derive waits for the baseline after scoring, with the baseline started on a
    thread before the model (prefetch) and without: ``copyprobe.detect`` with a FakeBackend
    slowed to score the passages in about ``scoring_s`` seconds, an empty cache each time.
    The wait is the wall time of derive's call to ``cached_blind_baseline``."""
    import copyprobe
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.detect import ScoringCollection
    from copyprobe.evaluation import blind

    delay = scoring_s / len(texts)

    class Slow(FakeBackend):
        def _token_logprobs(self, request):
            time.sleep(delay)  # a model that is busy elsewhere (a GPU): the CPU is free meanwhile
            return super()._token_logprobs(request)

    examples = [copyprobe.Example(id=str(i), text=t, label=y) for i, (t, y) in enumerate(zip(texts, labels))]
    real_cached, real_begin = blind.cached_blind_baseline, ScoringCollection.begin
    out = {}
    for name in ("prefetch", "no_prefetch"):
        waits = []

        def timed_call(*a, **k):
            start = time.perf_counter()
            try:
                return real_cached(*a, **k)
            finally:
                waits.append(time.perf_counter() - start)

        blind.cached_blind_baseline = timed_call
        if name == "no_prefetch":
            ScoringCollection.begin = lambda self: None
        os.environ["COPYPROBE_CACHE_DIR"] = tempfile.mkdtemp()
        try:
            result = copyprobe.detect(Slow(), examples, ["loss"], cache=False, n_bootstrap=0)
        finally:
            blind.cached_blind_baseline, ScoringCollection.begin = real_cached, real_begin
        out[name] = {"derive_wait_for_baseline_s": round(sum(waits), 3), "timings": result.record.timings}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="9324ce4", help="commit whose blind baseline is the 'before'")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scoring-run", type=Path, help="a detect --methods loss run directory on the same passages")
    parser.add_argument("--scoring-time", type=Path, help="/usr/bin/time -v output of that run")
    parser.add_argument("--critical-path-s", type=float, default=10.0,
                        help="scoring time of the slowed fake model in the critical-path measurement (0: skip)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "blind.json")
    args = parser.parse_args()

    started, load_before = time.perf_counter(), os.getloadavg()
    import sklearn.metrics  # noqa: F401  (every labelled run imports it before the baseline)

    _, import_cpu, import_wall = timed(lambda: [__import__(m) for m in (
        "sklearn.linear_model", "sklearn.feature_extraction.text", "sklearn.model_selection",
        "sklearn.preprocessing", "scipy.sparse")])
    from copyprobe.evaluation import blind

    before = module_at(args.before)
    texts, labels = wikimia_all()
    cpus = os.cpu_count()
    rows: dict[str, list] = {"before": [], "after": [], "after_one_thread": [], "after_cached": []}
    reference = None
    equal = {}
    cache = Path(tempfile.mkdtemp())
    for repeat in range(args.repeats):
        result, cpu, wall = timed(lambda: before.blind_baseline(texts, labels, seed=0))
        rows["before"].append({"cpu_s": cpu, "wall_s": wall})
        reference = reference or result
        result, cpu, wall = timed(lambda: blind.blind_baseline(texts, labels, seed=0))
        rows["after"].append({"cpu_s": cpu, "wall_s": wall})
        equal["after"] = result == reference
        os.cpu_count = lambda: 1  # the fits on one thread
        try:
            result, cpu, wall = timed(lambda: blind.blind_baseline(texts, labels, seed=0))
        finally:
            os.cpu_count = lambda: cpus
        rows["after_one_thread"].append({"cpu_s": cpu, "wall_s": wall})
        equal["after_one_thread"] = result == reference
        if repeat == 0:
            blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=cache)  # fills the cache
        result, cpu, wall = timed(lambda: blind.cached_blind_baseline(texts, labels, None, 0, cache_dir=cache))
        rows["after_cached"].append({"cpu_s": cpu, "wall_s": wall})
        equal["after_cached"] = result == reference
        print(f"repeat {repeat}: " + ", ".join(f"{k} cpu {v[-1]['cpu_s']} s wall {v[-1]['wall_s']} s"
                                               for k, v in rows.items()))
    best = {k: {"cpu_s": min(r["cpu_s"] for r in v), "wall_s": min(r["wall_s"] for r in v)} for k, v in rows.items()}
    out = {
        "command": "python benchmarks/bench_blind.py " + " ".join(sys.argv[1:]),
        "passages": len(texts), "members": sum(labels), "before_commit": args.before,
        "cpu_count": cpus, "load_before": [round(x, 2) for x in load_before],
        "sklearn_import_after_metrics": {"cpu_s": import_cpu, "wall_s": import_wall},
        "runs": rows, "fastest": best, "equal_to_before": equal,
        "result": {k: reference[k] for k in ("auc", "auc_low", "auc_high", "components", "n", "folds")},
        "speedup_cpu": round(best["before"]["cpu_s"] / best["after"]["cpu_s"], 2),
        "speedup_wall": round(best["before"]["wall_s"] / best["after"]["wall_s"], 2),
    }
    out["steps_cpu_s"] = steps(texts, labels)
    out["python_thread_speed_beside_fits"] = gil_share(texts, labels)
    print(json.dumps({k: out[k] for k in ("steps_cpu_s", "python_thread_speed_beside_fits")}, indent=1))
    if args.critical_path_s:
        out["critical_path"] = critical_path(texts, labels, args.critical_path_s)
        print(json.dumps(out["critical_path"], indent=1))
    if args.scoring_run:
        out["scoring"] = scoring_time(args.scoring_run, args.scoring_time)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["seconds"] = round(time.perf_counter() - started, 1)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("fastest", "equal_to_before", "speedup_cpu", "speedup_wall",
                                          "sklearn_import_after_metrics", "load_before", "load_after")}, indent=1))
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
