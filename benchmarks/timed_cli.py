"""Run the copyprobe command line of a given source tree under ``/usr/bin/time -v``: wall
time, CPU time and peak memory (maximum resident set size) of the whole process, for the
audit benchmarks (bench_catalogue.py, bench_audit_cost.py). ``code`` is the directory put
first on PYTHONPATH, so a "before" measurement can run an older tree (``git archive COMMIT
| tar -x -C DIR``) beside the current one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

_TIME_FIELDS = {
    "max_rss_mb": (r"Maximum resident set size \(kbytes\): (\d+)", lambda v: round(int(v) / 1024, 1)),
    "user_s": (r"User time \(seconds\): ([\d.]+)", float),
    "system_s": (r"System time \(seconds\): ([\d.]+)", float),
}


# the command line with every model replaced by the model-free FakeBackend (memory and
# driver costs without a model's)
FAKE_MODEL = ("import copyprobe.backends.specs as specs; from copyprobe.backends.fake import FakeBackend; "
              "specs.load_backend = lambda spec, **options: FakeBackend(spec=spec); ")


def cli_command(args: list[str], fake_model: bool = False, prelude: str = "") -> list[str]:
    prelude = (FAKE_MODEL if fake_model else "") + prelude
    return ["/usr/bin/time", "-v", "python", "-c", prelude + "from copyprobe.cli.main import entry; entry()", *args]


def run_timed(code: Path, args: list[str], *, threads: int, kill_after: float | None = None,
              log: Path | None = None, fake_model: bool = False, prelude: str = "",
              cache_dir: Path | None = None) -> dict[str, Any]:
    """Run ``copyprobe ARGS`` from ``code`` (its working directory, so that ``python -c``
    imports that tree), with a cache directory of its own (``cache_dir``, else a new one:
    :func:`cold_cache_dir`); with ``kill_after``, SIGKILL it after that
    many seconds (a crash, not a Ctrl-C). Returns exit code, wall/CPU seconds, peak RSS,
    stdout and the load average before and after. ``fake_model``: every model is the
    model-free FakeBackend; ``prelude``: Python statements run before the command line."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "COPYPROBE_TEST_THREADS": str(threads),
           "COPYPROBE_CACHE_DIR": str(cache_dir or cold_cache_dir())}
    command = cli_command(args, fake_model, prelude)
    # `python -c` puts its working directory first on sys.path: run in the tree measured
    imported = subprocess.run(command[2:4] + ["import copyprobe; print(copyprobe.__file__)"], env=env, cwd=code,
                              capture_output=True, text=True).stdout.strip()
    load_before = os.getloadavg()
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=code, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    killed = False
    try:
        stdout, stderr = process.communicate(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the whole group: time and the python under it
        stdout, stderr = process.communicate()
        killed = True
    wall = time.perf_counter() - started
    if log is not None:
        log.write_text(stdout + "\n--- stderr ---\n" + stderr, encoding="utf-8")
    result: dict[str, Any] = {"exit": process.returncode, "killed": killed, "wall_s": round(wall, 1),
                              "copyprobe_imported_from": imported,
                              "load_before": [round(x, 2) for x in load_before],
                              "load_after": [round(x, 2) for x in os.getloadavg()]}
    for name, (pattern, convert) in _TIME_FIELDS.items():
        found = re.search(pattern, stderr)
        result[name] = convert(found.group(1)) if found else None
    # lines "BENCH name value" a prelude printed on stderr
    result["measured"] = {parts[1]: float(parts[2]) for parts in (line.split() for line in stderr.splitlines())
                          if len(parts) == 3 and parts[0] == "BENCH"}
    result["stdout"] = stdout
    if not killed and process.returncode != 0:
        result["stderr_tail"] = stderr.strip().splitlines()[-5:]
    return result


def cold_cache_dir() -> Path:
    """A cache directory of its own for one run, so that nothing a run derives (the blind
    baseline) is read from an earlier run, with the converted bundled models of the user's
    cache directory linked in (loading them again would measure a conversion)."""
    import tempfile

    shared = Path(os.environ.get("COPYPROBE_CACHE_DIR") or _user_cache_dir())
    fresh = Path(tempfile.mkdtemp(prefix="copyprobe-bench-cache-"))
    for name in ("bundled", "models", "file-hashes.json"):
        if (shared / name).exists():
            (fresh / name).symlink_to(shared / name)
    return fresh


def _user_cache_dir() -> str:
    from platformdirs import user_cache_dir

    return user_cache_dir("copyprobe")


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Add one row to a JSON list file (a new row per run, never overwriting earlier ones;
    runs finishing at once take turns through a lock file in the temporary directory)."""
    import fcntl
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(Path(tempfile.gettempdir()) / f"copyprobe-bench-{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
        rows.append(row)
        path.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def add_checkout_option(parser: Any) -> None:
    """``--root``: the checkout whose copyprobe (and benchmarks) a benchmark imports, for an
    A/B against a git worktree of another commit; this one by default."""
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]),
                        help="the checkout whose copyprobe (and benchmarks) to import")


def use_checkout(root: str) -> Path:
    """Put ``root``'s copyprobe and benchmarks first on the import path; call it before
    importing either."""
    import sys

    resolved = Path(root).resolve()
    sys.path.insert(0, str(resolved))
    sys.path.insert(0, str(resolved / "benchmarks"))
    return resolved


def add_block(path: Path, label: str, block: dict[str, Any]) -> dict[str, Any]:
    """Set ``label``'s block in the results file ``path`` (a JSON object of blocks, kept
    in order); returns every block."""
    report = json.loads(path.read_text()) if path.exists() else {}
    report[label] = block
    path.write_text(json.dumps(report, indent=1) + "\n")
    return report


def code_version(code: Path) -> str:
    """The commit of ``code`` when it is a git checkout (with "+changes" when the package
    has uncommitted changes), else the directory's name."""
    try:
        commit = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no", "--",
                                "copyprobe"], capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("+changes" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return code.name
