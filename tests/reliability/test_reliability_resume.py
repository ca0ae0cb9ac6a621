"""Resume: `copyprobe detect` killed with SIGKILL at 10 seeded random moments and rerun
each time ends with the same scores.jsonl / metrics.json as an uninterrupted run; work
committed to the cache before a kill is never computed again; Ctrl-C exits 130 with a
resume hint and no traceback.

The CLI runs in a subprocess (``fake_cli.py``: the real CLI with the model loader swapped
for a slow FakeBackend that logs every request it answers), so kills hit the real
runner, cache and run-record code at arbitrary points: import, model work, cache
commits, metrics, file writes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from rel_util import assert_cache_entries_decode, cache_rows, env, fake_cli_cmd, make_passages, run, write_jsonl

N_PASSAGES = 200
METHODS = "loss,zlib,lowercase,min_k,min_k_pp,reference"
# Answers are stored in the cache as each one finishes, so a kill can lose only what was
# in flight: one request of the sequential fake model; for an API run, the `concurrency`
# (8) requests being served plus the answers finished but not yet written: the main thread
# commits them from as_completed while each worker has already taken its next request, so on
# a loaded machine up to another 8 can wait (seen: 28 resent over three kills, above 3 x 9).
IN_FLIGHT_FAKE = 1
IN_FLIGHT_API = 8 + 8


def default_sigint() -> None:
    """A shell that starts a job in the background (`bash .ci/run &`) sets SIGINT to ignored,
    and children inherit that: Python would then never see Ctrl-C. Give the child the
    default disposition so the test checks copyprobe, not how the suite was launched."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def detect_args(data: Path, out: Path, cache: Path) -> list[str]:
    return ["detect", "--model", "fake", "--data", str(data), "--out", str(out), "--cache", str(cache),
            "--methods", METHODS, "--param", "reference.model=fake-ref", "--bootstrap", "200",
            "--no-progress"]


def log_lines(path: Path) -> list[tuple[str, str, str, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:  # a line cut by a kill is never complete: ignore it
            out.append(tuple(parts))
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    return write_jsonl(root / "data.jsonl", make_passages(N_PASSAGES, seed=3))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, dataset):
    """An uninterrupted run: the outputs every resumed run must reproduce."""
    root = tmp_path_factory.mktemp("reference")
    log = root / "model.log"
    result = run(fake_cli_cmd(*detect_args(dataset, root / "run", root / "cache.sqlite")),
                 env=env(FAKE_LOG=str(log), FAKE_DELAY="0"))
    assert result.returncode == 0, result.stderr
    answered = [l[1:] for l in log_lines(log)]
    # a clean run answers every unique request exactly once
    assert len(answered) == len(set(answered)) > N_PASSAGES
    return root / "run", len(answered)


def test_sigkill_at_ten_random_moments_then_resume(tmp_path, dataset, reference_run):
    ref_dir, n_unique = reference_run
    out, cache, log = tmp_path / "run", tmp_path / "cache.sqlite", tmp_path / "model.log"
    cmd = fake_cli_cmd(*detect_args(dataset, out, cache))
    rng = random.Random(20261121)
    kills: list[dict] = []
    committed_before: list[set] = []  # cache keys present right after each kill
    answered_by_run: list[list] = []
    deadline = time.monotonic() + 600

    while len(kills) < 10:
        assert time.monotonic() < deadline, "resume stress test ran too long"
        before = len(log_lines(log))
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(Path(__file__).parents[2]),
                                env=env(FAKE_LOG=str(log), FAKE_DELAY="0.02"))
        if rng.random() < 0.3:
            # a moment measured from the start: may land in start-up, model work or the writes
            moment = ("time", rng.uniform(0.05, 1.5))
            time.sleep(moment[1])
        else:
            # a moment inside model work: after n more answers plus a fraction of one
            moment = ("answers", rng.randint(1, 90), rng.uniform(0, 0.02))
            while len(log_lines(log)) - before < moment[1] and proc.poll() is None:
                time.sleep(0.002)
            time.sleep(moment[2])
        if proc.poll() is not None:
            pytest.fail(f"run finished before kill {len(kills) + 1} ({moment}); the workload is too small")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        lines = log_lines(log)
        answered_by_run.append(lines[before:])
        committed_before.append({(fp, kind, key) for fp, kind, key, _ in cache_rows(cache)} if cache.exists() else set())
        kills.append({"moment": moment, "answered": len(lines) - before, "committed": len(committed_before[-1])})

    before = len(log_lines(log))
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(Path(__file__).parents[2]),
                           env=env(FAKE_LOG=str(log), FAKE_DELAY="0"))
    assert final.returncode == 0, final.stderr
    assert "Traceback" not in final.stderr
    answered_by_run.append(log_lines(log)[before:])

    # 1. the outputs equal those of an uninterrupted run, byte for byte
    for name in ("scores.jsonl", "metrics.json", "examples.jsonl"):
        assert (out / name).read_bytes() == (ref_dir / name).read_bytes(), name

    # 2. nothing committed to the cache before a kill was ever computed again
    for i, committed in enumerate(committed_before):
        later = {l[1:] for run_lines in answered_by_run[i + 1:] for l in run_lines}
        recomputed = committed & later
        assert not recomputed, f"{len(recomputed)} cached answers recomputed after kill {i + 1}"

    # 3. each kill lost at most the request in flight
    all_answers = Counter(l[1:] for run_lines in answered_by_run for l in run_lines)
    assert len(all_answers) == n_unique
    repeated = sum(c - 1 for c in all_answers.values())
    assert repeated <= IN_FLIGHT_FAKE * len(kills), (repeated, kills)

    # 4. the cache holds exactly one decodable entry per unique request
    assert assert_cache_entries_decode(cache) == n_unique
    # at least one kill fell mid-work with committed progress, and the work was spread over the runs
    assert sum(1 for k in kills if k["answered"]) >= 5
    assert len(committed_before[-1]) > 0
    print(f"kills={kills} unique={n_unique} answered_total={sum(all_answers.values())} repeated={repeated}")


@pytest.mark.parametrize("signum,code,said", [(signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_ctrl_c_or_sigterm_ends_with_a_resume_hint_and_no_traceback(tmp_path, dataset, reference_run, signum, code, said):
    # SIGTERM (a batch scheduler's stop, `kill`, `timeout`) ends the run as Ctrl-C does; it ended it silently
    ref_dir, _ = reference_run
    out, cache, log = tmp_path / "run", tmp_path / "cache.sqlite", tmp_path / "model.log"
    cmd = fake_cli_cmd(*detect_args(dataset, out, cache))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).parents[2]), env=env(FAKE_LOG=str(log), FAKE_DELAY="0.01"),
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while len(log_lines(log)) < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "run ended before it could be interrupted"
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"copyprobe: {said}; ") and "run the same command again" in lines[0], \
        stderr
    # the answers committed before Ctrl-C are kept and not asked again
    kept = {(fp, kind, key) for fp, kind, key, _ in cache_rows(cache)}
    assert len(kept) >= 30  # at least 40 answered before Ctrl-C, each stored as it finished
    before = len(log_lines(log))
    again = run(cmd, env=env(FAKE_LOG=str(log), FAKE_DELAY="0"))
    assert again.returncode == 0, again.stderr
    asked_again = {l[1:] for l in log_lines(log)[before:]}
    assert not (kept & asked_again)
    assert (out / "scores.jsonl").read_bytes() == (ref_dir / "scores.jsonl").read_bytes()
    assert (out / "metrics.json").read_bytes() == (ref_dir / "metrics.json").read_bytes()


def test_ctrl_c_during_api_requests_exits_promptly(tmp_path, fake_openai, monkeypatch):
    """Ctrl-C while API requests are in flight ends after the requests in flight, without
    first sending the rest of the queued chunk (a slow or hung server must not hold the
    user's Ctrl-C for minutes)."""
    from rel_util import cli_cmd

    rows = make_passages(40, seed=2, words=70)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai()
    server.delay = 4.0  # each answer takes 4 s; 8 requests run at once
    proc = subprocess.Popen(
        cli_cmd("detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data), "--methods",
                "prefix_probe", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"), "--no-progress"),
        cwd=str(Path(__file__).parents[2]), env=env(OPENAI_API_KEY=""), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while len(server.log) < 8 and time.monotonic() < deadline:  # the first round is in flight
        time.sleep(0.01)
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    waited = time.monotonic() - interrupted
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    # the round in flight (8 requests, 4 s) is not waited for, and none queued is sent
    assert len(server.log) <= 8, len(server.log)
    assert waited < 5, waited


def test_second_ctrl_c_exits_130_at_once_with_one_line(tmp_path, fake_openai):
    """The first Ctrl-C no longer waits for the API requests in flight (4 s each here: their
    worker threads are daemons and stop retrying); a second one, sent at once, still ends
    the run with exit 130 and one line, no traceback from the cleanup it cut short."""
    from rel_util import cli_cmd

    data = write_jsonl(tmp_path / "data.jsonl", make_passages(40, seed=2, words=70))
    server = fake_openai()
    server.delay = 4.0
    proc = subprocess.Popen(
        cli_cmd("detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data), "--methods",
                "prefix_probe", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"),
        cwd=str(Path(__file__).parents[2]), env=env(OPENAI_API_KEY=""), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while len(server.log) < 8 and time.monotonic() < deadline:  # the first round is in flight
        time.sleep(0.01)
    first = time.monotonic()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted" in lines[0], stderr
    assert time.monotonic() - first < 3  # not after the 4 s answers in flight


def test_black_box_run_killed_three_times_resends_nothing_committed(tmp_path, fake_openai):
    """The same with an API model, counted in the server's own log: prompts whose answers
    were committed before a kill never reach the server again."""
    from copyprobe.methods.prefix_probe import PrefixProbe
    from rel_util import cli_cmd

    rows = make_passages(96, seed=4, words=70)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1])
    server.delay = 0.05
    model = f"openai:tiny-model@{server.base_url}"

    def cmd(out: str, cache: str) -> list[str]:
        return cli_cmd("detect", "--model", model, "--data", str(data), "--methods", "prefix_probe", "--out",
                       str(tmp_path / out), "--cache", str(tmp_path / cache), "--bootstrap", "100", "--no-progress")

    reference = run(cmd("ref", "ref.sqlite"), env=env(OPENAI_API_KEY=""))
    assert reference.returncode == 0, reference.stderr
    n_unique = len(server.log)
    assert n_unique == 96
    probe = PrefixProbe()
    key_of = lambda body: probe.request(body["prompt"]).key()  # noqa: E731  the cache key of a logged request

    rng = random.Random(7)
    start = len(server.log)
    committed: list[set] = []
    cuts: list[int] = []
    for _ in range(3):
        before = len(server.log)
        proc = subprocess.Popen(cmd("run", "c.sqlite"), cwd=str(Path(__file__).parents[2]), env=env(OPENAI_API_KEY=""),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = rng.randint(10, 50)
        deadline = time.monotonic() + 120
        while len(server.log) - before < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        assert proc.poll() is None, "the run ended before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        cuts.append(len(server.log))
        committed.append({key for _, _, key, _ in cache_rows(tmp_path / "c.sqlite")})
    final = run(cmd("run", "c.sqlite"), env=env(OPENAI_API_KEY=""))
    assert final.returncode == 0, final.stderr
    for name in ("scores.jsonl", "metrics.json"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    log = server.requests_for("/completions")
    for i, keys in enumerate(committed):
        resent = {key_of(r["body"]) for r in log[cuts[i]:]} & keys
        assert not resent, f"{len(resent)} committed answers were requested again after kill {i + 1}"
    sent = [key_of(r["body"]) for r in log[start:]]
    assert set(sent) == {key_of(r["body"]) for r in log[:start]}
    assert len(sent) - n_unique <= IN_FLIGHT_API * 3
    assert assert_cache_entries_decode(tmp_path / "c.sqlite") == n_unique
    print(f"sent={len(sent)} unique={n_unique} committed_at_kills={[len(k) for k in committed]}")
