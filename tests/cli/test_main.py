"""The program's exit (``copyprobe.cli.main.entry``) when background threads are still at work."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]

# A daemon thread inside C++ code (scipy's pybind11 FFT, which releases the GIL) when the
# program exits: Python (<=3.13) ends it with pthread_exit as it wakes during finalization,
# and C++ turns that into "terminate called without an active exception" (SIGABRT).
# That is what the blind baseline's fit can be doing when a run is interrupted.
_PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    import numpy as np, scipy.fft
    import copyprobe.cli.main as cli

    x = np.random.default_rng(0).random(1 << 21)

    def spin():
        while True:
            scipy.fft.fft(x)

    for _ in range(2):
        threading.Thread(target=spin, daemon=True).start()
    time.sleep(0.3)
    atexit.register(lambda: sys.stderr.write("exit handler ran\\n"))
    sys.stdout.write("buffered line")  # not flushed yet: the exit must not lose it
    cli.main = lambda argv: {code}
    cli.entry([])
""")


@pytest.mark.parametrize("code", [130, 2, 0])
def test_exit_code_survives_daemon_threads_inside_native_code(code):
    pytest.importorskip("scipy")
    for _ in range(3):  # the abort it guards against came every time in 5 of 5 tries here
        proc = subprocess.run([sys.executable, "-c", _PROGRAM.format(code=code)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == code, proc.stderr
        assert "terminate called" not in proc.stderr, proc.stderr
        assert proc.stdout == "buffered line"
        assert proc.stderr.splitlines() == ["exit handler ran"], proc.stderr


def test_exit_waits_for_threads_that_are_not_daemons():
    """A non-daemon thread is still joined by a normal interpreter exit, as Python promises."""
    program = textwrap.dedent("""
        import sys, threading, time
        import copyprobe.cli.main as cli

        def slow():
            time.sleep(0.5)
            sys.stdout.write("joined")
            sys.stdout.flush()

        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # not waited for
        threading.Thread(target=slow).start()
        cli.main = lambda argv: 3
        cli.entry([])
    """)
    proc = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "joined"


def test_the_program_does_not_wait_for_the_blind_baselines_fit():
    """A library's exit waits for the baseline's step in progress (finish_prefetches); the
    program ends with os._exit, where nothing is finalized, so it need not wait."""
    pytest.importorskip("scipy")
    program = textwrap.dedent("""
        import sys, threading
        import numpy as np, scipy.fft
        import copyprobe.cli.main as cli
        from copyprobe.evaluation import blind

        x = np.random.default_rng(0).random(1 << 20)
        inside = threading.Event()

        def endless_step(batch):  # a fit that would not stop when asked
            inside.set()
            while True:
                scipy.fft.fft(x)

        blind.text_features = endless_step
        blind.prefetch([f"text {i}" for i in range(20)], [i % 2 for i in range(20)], None, 0, cache_dir=sys.argv[1])
        inside.wait(60)
        cli.main = lambda argv: 130
        cli.entry([])
    """)
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        # finish_prefetches would wait its full 60 s here
        proc = subprocess.run([sys.executable, "-c", program, cache], cwd=REPO, capture_output=True,
                              text=True, timeout=45)
    assert proc.returncode == 130, proc.stderr
    assert "terminate called" not in proc.stderr


@pytest.mark.parametrize("argv", [
    ["detect", "--model", "fake", "--data", "d.jsonl", "--methods", "loss", "--out", "o", "--bootstrap", "10001"],
    ["copying", "--model", "fake", "--data", "d.jsonl", "--out", "o", "--bootstrap", "100000000"],
    ["rescore", "run", "--bootstrap", "20000"],
])
def test_bootstrap_resamples_are_bounded_before_any_work(argv, capsys):
    from copyprobe.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--bootstrap" in err and "10000" in err


def test_a_run_record_asking_for_more_resamples_is_refused_by_rescore(tmp_path, capsys):
    import json

    from copyprobe.cli.main import main
    from copyprobe.reports.sample import write_sample_run

    run_dir = write_sample_run(tmp_path / "run")
    record = json.loads((run_dir / "run.json").read_text())
    record["bootstrap"]["n"] = 10**12
    (run_dir / "run.json").write_text(json.dumps(record))
    before = (run_dir / "metrics.json").read_bytes()
    assert main(["rescore", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bootstrap" in err and "at most 10,000" in err
    assert (run_dir / "metrics.json").read_bytes() == before
    assert main(["report", str(run_dir)]) == 0  # such a run is still read: only recomputing is bounded
    assert main(["rescore", str(run_dir), "--bootstrap", "50"]) == 0
    assert json.loads((run_dir / "run.json").read_text())["bootstrap"]["n"] == 50


@pytest.mark.parametrize("argv, named, not_named", [
    (["rescore", "run"], "--bootstrap", "--batch-size"),
    (["detect", "--model", "fake", "--data", "d.jsonl", "--methods", "loss", "--out", "o"], "--batch-size", None),
])
def test_out_of_memory_names_only_what_the_command_can_lower(monkeypatch, capsys, argv, named, not_named):
    from copyprobe.cli import main as cli_main

    real = cli_main.build_parser

    def parser_whose_command_runs_out_of_memory():
        parser = real()
        parser.set_defaults(func=None)
        parsed = parser.parse_known_args

        def parse(args=None, namespace=None):
            out, extra = parsed(args, namespace)
            out.func = lambda _: (_ for _ in ()).throw(MemoryError())
            return out, extra
        parser.parse_known_args = parse
        return parser

    monkeypatch.setattr(cli_main, "build_parser", parser_whose_command_runs_out_of_memory)
    assert cli_main.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("copyprobe: error: out of memory; try a smaller") and named in err
    assert not_named is None or not_named not in err


def test_python_dash_m_copyprobe_is_the_program(tmp_path):
    # for an environment whose scripts folder is not on PATH: the same program, the same exit codes
    import subprocess
    import sys

    import copyprobe

    done = subprocess.run([sys.executable, "-m", "copyprobe", "--version"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and copyprobe.__version__ in done.stdout
    bad = subprocess.run([sys.executable, "-m", "copyprobe", "rescore", str(tmp_path / "no-such-run")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "does not exist" in bad.stderr
