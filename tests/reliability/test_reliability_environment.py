"""The environment fails under a running command: a disk that fills up mid-run, a
read-only file system, an output path that is a directory, a permission refused, a
frequency table written to a full device. Each ends with one line naming the file and
exit code 2 -- never a traceback -- and the model work done before the failure stays in
the cache, so the same command run again completes without asking the model for it again.

The failures are injected by monkeypatching the lowest write the code does (``os.fdopen``
handles, ``tempfile.mkstemp``, the cache's commit), since a real full disk cannot be
made in a test and the tests run as root (where permission bits do not refuse writes).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import tempfile

import pytest

from copyprobe.backends.cache import ResponseCache
from copyprobe.cli.main import main

from rel_util import assert_cache_entries_decode, make_passages
from test_reliability_bad_input import fake_loader, jsonl, run_cli


@pytest.fixture
def fake_model(monkeypatch):
    """Model specs ``fake*`` answered by a FakeBackend (as in test_reliability_bad_input)."""
    from copyprobe.backends import specs

    monkeypatch.setitem(specs.__dict__, "_real_load_backend", specs.load_backend)
    monkeypatch.setattr(specs, "load_backend", fake_loader)


ROWS = make_passages(30, seed=5, words=12)


def _detect(tmp_path, *extra: str) -> list[str]:
    return ["detect", "--model", "fake", "--data", str(tmp_path / "data.jsonl"), "--out", str(tmp_path / "run"),
            "--methods", "loss,lowercase", "--cache", str(tmp_path / "cache.sqlite"), "--no-progress",
            "--bootstrap", "20", *extra]


def _one_line_error(code: int, out: str, err: str) -> str:
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("copyprobe: error: "), (code, err)
    return lines[0]


class _FullAfter:
    """A file handle whose writes fail with ENOSPC once ``budget`` characters were written."""

    def __init__(self, handle, budget: int):
        self._handle, self._budget = handle, budget

    def write(self, text: str) -> int:
        self._budget -= len(text)
        if self._budget < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._handle.write(text)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def test_disk_full_while_writing_scores_then_rerun_completes_from_the_cache(tmp_path, capsys, fake_model, monkeypatch):
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        return _FullAfter(handle, 500) if ".scores.jsonl." in name else handle

    monkeypatch.setattr(os, "fdopen", fdopen)
    message = _one_line_error(*run_cli(_detect(tmp_path), capsys))
    assert "no space left on device" in message and str(tmp_path / "run" / "scores.jsonl") in message
    assert "run the same command again" in message
    # no half-written file and no temporary file left behind
    assert not (tmp_path / "run" / "scores.jsonl").exists()
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
    n = assert_cache_entries_decode(tmp_path / "cache.sqlite")
    assert n == 2 * len(ROWS)  # every answer (the text and its lowercase form per row) was kept

    monkeypatch.setattr(os, "fdopen", real_fdopen)  # space freed
    code, out, err = run_cli(_detect(tmp_path), capsys)
    assert code == 0, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["cache"]["misses"] == 0 and run["cache"]["hits"] == n
    assert len((tmp_path / "run" / "scores.jsonl").read_text().splitlines()) == len(ROWS)


def test_disk_full_mid_run_in_the_cache_keeps_what_was_committed(tmp_path, capsys, fake_model, monkeypatch):
    """The cache commit fails after 10 answers (SQLite's own 'disk is full'): exit 2 with
    one line; the 10 answers are in the cache and the rerun asks the model only for the rest."""
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    real_put = ResponseCache.put_encoded
    calls = {"n": 0}

    def put_encoded(self, fingerprint, kind, items):
        if calls["n"] >= 10:  # what the real put_encoded makes of SQLite's error
            from copyprobe.errors import BackendError

            raise BackendError(f"cannot write cache file {self.path}: database or disk is full")
        calls["n"] += 1
        return real_put(self, fingerprint, kind, items)

    monkeypatch.setattr(ResponseCache, "put_encoded", put_encoded)
    message = _one_line_error(*run_cli(_detect(tmp_path), capsys))
    assert "disk is full" in message and "cache.sqlite" in message
    assert assert_cache_entries_decode(tmp_path / "cache.sqlite") == 10

    monkeypatch.setattr(ResponseCache, "put_encoded", real_put)
    code, _, err = run_cli(_detect(tmp_path), capsys)
    assert code == 0, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["cache"]["hits"] == 10 and run["cache"]["misses"] == 2 * len(ROWS) - 10


def test_raw_oserror_mid_run_is_one_line(tmp_path, capsys, fake_model, monkeypatch):
    """An OSError from any layer (here: the cache commit, as a raw ENOSPC) reaches the
    command boundary as one line naming the error, exit 2."""
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))

    def put_encoded(self, fingerprint, kind, items):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))

    monkeypatch.setattr(ResponseCache, "put_encoded", put_encoded)
    message = _one_line_error(*run_cli(_detect(tmp_path), capsys))
    assert "no space left on device" in message and "cache.sqlite" in message


@pytest.mark.parametrize("code_, words", [(errno.EROFS, "read-only file system"),
                                          (errno.EACCES, "permission denied")])
def test_output_refused_at_the_end_of_the_run(tmp_path, capsys, fake_model, monkeypatch, code_, words):
    """The output directory passes the start-up check, then becomes unwritable (remounted
    read-only, permissions changed) before the files are written."""
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and str(dir).startswith(str(tmp_path / "run")):
            raise OSError(code_, os.strerror(code_), str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    from copyprobe import record

    real_prepare = record.prepare_out_dir

    def prepare(out, kind=None, model=None):
        path = real_prepare(out, kind, model)
        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
        return path

    monkeypatch.setattr(record, "prepare_out_dir", prepare)
    message = _one_line_error(*run_cli(_detect(tmp_path), capsys))
    assert words in message and str(tmp_path / "run") in message


def test_report_out_is_a_directory(tmp_path, capsys, fake_model):
    (tmp_path / "data.jsonl").write_bytes(jsonl(ROWS))
    assert run_cli(_detect(tmp_path), capsys)[0] == 0
    (tmp_path / "taken").mkdir()
    code, out, err = run_cli(["report", str(tmp_path / "run"), "--out", str(tmp_path / "taken")], capsys)
    message = _one_line_error(code, out, err)
    assert str(tmp_path / "taken") in message and "directory" in message


def test_frequency_table_on_a_full_device(tmp_path, monkeypatch):
    np = pytest.importorskip("numpy")
    from copyprobe.errors import DataError
    from copyprobe.freq import FrequencyTable

    table = FrequencyTable(counts=np.arange(50, dtype=np.int64), name="t", vocab_hash="h")
    target = tmp_path / "freq.npz"
    table.save(target)
    before = target.read_bytes()

    def full(handle, **arrays):
        handle.write(b"x" * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez_compressed", full)
    with pytest.raises(DataError) as info:
        FrequencyTable(counts=np.ones(50, dtype=np.int64), name="t", vocab_hash="h").save(target)
    assert "No space left on device" in str(info.value) and str(target) in str(info.value)
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["freq.npz"]


def test_frequency_table_path_is_a_directory(tmp_path):
    np = pytest.importorskip("numpy")
    from copyprobe.errors import DataError
    from copyprobe.freq import FrequencyTable

    (tmp_path / "t.npz").mkdir()
    with pytest.raises(DataError, match="cannot write frequency table"):
        FrequencyTable(counts=np.ones(5, dtype=np.int64), name="t", vocab_hash="h").save(tmp_path / "t.npz")


def test_main_turns_any_oserror_kind_into_one_line(capsys, monkeypatch):
    """The boundary itself, for every OSError kind it names, through a command whose run raises it."""
    import copyprobe.cli.commands.methods as methods_cmd

    for code_, words in [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only"), (errno.EISDIR, "is a directory"),
                         (errno.EACCES, "permission denied"), (errno.EPERM, "not permitted")]:
        monkeypatch.setattr(methods_cmd, "run", lambda args, c=code_: (_ for _ in ()).throw(
            OSError(c, os.strerror(c), "/some/file")))
        code = main(["methods"])
        message = _one_line_error(code, *capsys.readouterr())
        assert words in message and "/some/file" in message
    for exc, words in [(RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
                       (UnicodeDecodeError("utf-8", b"a\xffb", 1, 2, "invalid start byte"), "0xff")]:
        monkeypatch.setattr(methods_cmd, "run", lambda args, e=exc: (_ for _ in ()).throw(e))
        message = _one_line_error(main(["methods"]), *capsys.readouterr())
        assert words in message


@pytest.mark.parametrize("extra, kept", [([], True), (["--no-cache"], False)])
def test_a_stopped_run_says_resume_only_when_its_cache_kept_the_work(capsys, monkeypatch, extra, kept):
    """Ctrl-C or a full disk in a detect run with --no-cache kept nothing of the model's
    work: the message said 'finished work is in the cache — run the same command again to
    resume' (a sweep found it after a SIGTERM); now it says so only where the cache was on."""
    import copyprobe.cli.commands.detect as detect_cmd

    argv = ["detect", "--model", "m", "--data", "d.jsonl", "--methods", "loss", "--out", "r", *extra]
    monkeypatch.setattr(detect_cmd, "run", lambda args: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main(argv) == 130
    said = capsys.readouterr().err.strip()
    assert said.startswith("copyprobe: interrupted; ") and len(said.splitlines()) == 1
    assert ("run the same command again to resume" in said) is kept
    assert ("nothing the model computed was kept" in said) is not kept
    monkeypatch.setattr(detect_cmd, "run", lambda args: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/some/file")))
    message = _one_line_error(main(argv), *capsys.readouterr())
    assert "no space left on device; free some space" in message
    assert ("run the same command again to resume" in message) is kept


def test_a_command_without_model_work_promises_no_cache():
    import copyprobe.cli.commands.methods as methods_cmd  # noqa: F401  (the command's parser)
    from copyprobe.cli.main import build_parser, describe_os_error, resume_hint

    assert resume_hint(build_parser().parse_args(["methods"])) == "run the same command again"
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/f")
    assert describe_os_error(full, resumable=False) == "/f: no space left on device; free some space"


def test_a_second_interrupt_says_what_the_command_kept(monkeypatch, capfd):
    """The second Ctrl-C stops at once with the same hint as the first (the cache's resume,
    or that --no-cache kept nothing), not always the cache's."""
    from copyprobe.cli import main as cli_main

    def stopped(code):
        raise SystemExit(code)

    monkeypatch.setattr(cli_main.os, "_exit", stopped)
    for argv, kept in ((["detect", "--model", "m", "--data", "d", "--methods", "loss", "--out", "o"], True),
                       (["detect", "--model", "m", "--data", "d", "--methods", "loss", "--out", "o", "--no-cache"],
                        False)):
        interrupts = cli_main._Interrupts()
        interrupts.hint = cli_main.resume_hint(cli_main.build_parser().parse_args(argv))
        with pytest.raises(KeyboardInterrupt):
            interrupts(signal.SIGINT, None)
        with pytest.raises(SystemExit) as stop:
            interrupts(signal.SIGINT, None)
        said = capfd.readouterr().err.strip()
        assert stop.value.code == 130 and said.startswith("copyprobe: interrupted twice; stopped at once — ")
        assert ("run the same command again to resume" in said) is kept
