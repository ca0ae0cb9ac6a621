"""A run's output directory: the same command again reuses it; anything else in it is never overwritten."""

import json
import re
from pathlib import Path

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.data.readers import load_dataset
from copyprobe.errors import ConfigError, CopyprobeError, DataError


@pytest.fixture
def demo():
    from copyprobe.cli.commands.demo import demo_data_path

    return load_dataset(demo_data_path())


def detect_into(out, demo, tmp_path):
    backend = FakeBackend(member_texts=[e.text for e in demo.examples if e.label == 1])
    return copyprobe.detect(backend, demo, ["loss"], out=out, cache=tmp_path / "c.sqlite")


def test_the_same_command_again_reuses_its_directory(tmp_path, demo):
    detect_into(tmp_path / "run", demo, tmp_path)
    first = (tmp_path / "run" / "scores.jsonl").read_text()
    detect_into(tmp_path / "run", demo, tmp_path)
    assert (tmp_path / "run" / "scores.jsonl").read_text() == first


def test_a_run_whose_writing_failed_is_resumed(tmp_path, demo, monkeypatch):
    import copyprobe.record as record

    real = record.write_json

    def full_disk_at_run_json(path, content):  # run.json is written last
        if Path(path).name == "run.json":
            raise OSError(28, "No space left on device")
        return real(path, content)

    monkeypatch.setattr(record, "write_json", full_disk_at_run_json)
    with pytest.raises(OSError):
        detect_into(tmp_path / "run", demo, tmp_path)
    monkeypatch.setattr(record, "write_json", real)
    assert (tmp_path / "run" / "scores.jsonl").is_file() and not (tmp_path / "run" / "run.json").exists()
    detect_into(tmp_path / "run", demo, tmp_path)  # the same command again: its files are replaced
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["examples.jsonl", "metrics.json", "run.json",
                                                                   "scores.jsonl"]  # the marker is gone


@pytest.mark.parametrize("name", ["scores.jsonl", "examples.jsonl", "metrics.json", "verdicts.json", "report.html"])
def test_files_a_run_would_write_without_run_json_are_not_overwritten(tmp_path, demo, name):
    out = tmp_path / "run"
    out.mkdir()
    (out / name).write_text("mine")  # a user's file, or a run whose writing failed: no run.json says which
    backend = FakeBackend(member_texts=[])
    with pytest.raises(ConfigError, match=f"^{re.escape(str(out))} holds {name} but no run.json .*a detect run would overwrite it"):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0  # refused before any model work
    assert [p.name for p in out.iterdir()] == [name] and (out / name).read_text() == "mine"


@pytest.mark.parametrize("kind, name", [("audit", "scores.jsonl"), ("copying", "results.jsonl"),
                                        ("canary", "canary.json"), ("detect", "examples.jsonl")])
def test_every_kind_refuses_its_files_without_run_json(tmp_path, kind, name):
    from copyprobe.record import prepare_out_dir

    (tmp_path / name).write_text("mine")
    with pytest.raises(ConfigError, match=f"holds {name} but no run.json"):
        prepare_out_dir(tmp_path, kind, "fake")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_out_dir(empty, kind, "fake") == empty  # an empty directory is used
    assert prepare_out_dir(tmp_path / "new", kind, "fake").is_dir()  # a new path is made


def test_a_directory_of_other_files_is_fine(tmp_path, demo):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    detect_into(tmp_path / "run", demo, tmp_path)
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("files, expected", [
    ({"run.json": {"kind": "copying", "command": ["copyprobe", "copying"]}}, "holds a copying run"),
    ({"run.json": {"name": "another tool's record"}}, "not a copyprobe run record"),
    ({"run.json": "{not json"}, "not valid JSON"),
    ({"run.json": [1, 2]}, "not a copyprobe run record"),
])
def test_files_of_another_run_or_tool_are_not_overwritten(tmp_path, demo, files, expected):
    out = tmp_path / "run"
    out.mkdir()
    for name, content in files.items():
        (out / name).write_text(content if isinstance(content, str) else json.dumps(content))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    backend = FakeBackend(member_texts=[])
    with pytest.raises(ConfigError, match=expected):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0  # refused before any model work
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_the_cli_says_it_in_one_line(tmp_path, demo, capsys):
    from copyprobe.cli.main import main

    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "audit", "command": []}))
    code = main(["detect", "--model", "fake", "--data", "demo", "--methods", "loss", "--out", str(out), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "holds an audit run" in err[0]
    (out / "run.json").unlink()
    (out / "scores.jsonl").write_text("mine")
    code = main(["detect", "--model", "fake", "--data", "demo", "--methods", "loss", "--out", str(out), "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds scores.jsonl but no run.json" in err[0]


@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_output_directory_is_refused_not_taken_for_the_working_directory(tmp_path, demo, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    backend = FakeBackend()
    with pytest.raises(ConfigError, match="output directory's path is empty"):
        copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
    assert backend.calls["token_logprobs"] == 0 and list(tmp_path.iterdir()) == []


# a run refused after its directory was made: bad data is found only after the directory
# check, an unknown model only when the engine opens the session
NO_TEXT = '{"id": "a", "body": "no column is called text"}\n'


def _refused_run(kind, tmp_path, out, demo):
    from copyprobe.copying import CopyConfig
    from copyprobe.copying.runner import copying

    bad = tmp_path / "bad.jsonl"
    bad.write_text(NO_TEXT)
    runs = {
        "detect, bad data": lambda: copyprobe.detect(FakeBackend(), bad, ["loss"], out=out, cache=False),
        "detect, unknown model": lambda: copyprobe.detect("no-such-model", demo, ["loss"], out=out, cache=False),
        "copying, bad data": lambda: copying(FakeBackend(), bad, CopyConfig(tasks=("literal",), baseline=False),
                                             out=out, cache=False),
        "copying, unknown model": lambda: copying("no-such-model", "kjv", CopyConfig(tasks=("literal",),
                                                                                     baseline=False),
                                                  out=out, cache=False),
    }
    expected = {"detect, bad data": "has no text column", "copying, bad data": "cannot tell the layout of the rows"}
    with pytest.raises(CopyprobeError, match=expected.get(kind, "unknown model spec 'no-such-model'")):
        runs[kind]()


KINDS = ["detect, bad data", "detect, unknown model", "copying, bad data", "copying, unknown model"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_run_removes_the_directories_it_made(tmp_path, demo, kind):
    _refused_run(kind, tmp_path, tmp_path / "runs" / "first", demo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]  # neither runs/first nor runs/


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("held", [{}, {"notes.txt": b"mine"}, {"sub/deeper.txt": b"mine too"}])
def test_a_refused_run_leaves_a_directory_that_existed_as_it_was(tmp_path, demo, kind, held):
    out = tmp_path / "run"
    out.mkdir()
    for name, content in held.items():
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_bytes(content)
    _refused_run(kind, tmp_path, out, demo)
    assert out.is_dir() and {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == held


def test_a_refused_run_into_an_earlier_run_loses_nothing_of_it(tmp_path, demo):
    out = tmp_path / "run"
    detect_into(out, demo, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(NO_TEXT)
    backend = FakeBackend(member_texts=[e.text for e in demo.examples if e.label == 1])  # the same model: reusable
    with pytest.raises(DataError, match="text column"):
        copyprobe.detect(backend, bad, ["loss"], out=out, cache=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("command", ["detect", "copying"])
def test_the_cli_refuses_bad_data_in_one_line_and_leaves_no_directory(tmp_path, capsys, command):
    from copyprobe.cli.main import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(NO_TEXT)
    argv = [command, "--model", "fake", "--data", str(bad), "--no-cache", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "runs" / "first")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    assert main([*argv, "--out", str(tmp_path / "kept")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]


# Two runs into one directory at once: each directory is locked while a run writes it
# (fcntl is imported inside the helpers: Windows has no such lock, and skips these tests)


def _locked_elsewhere(path):
    """An advisory lock on ``path`` taken as another process would (its own open
    descriptor: flock locks conflict between descriptors, even of one process)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _is_free(path) -> bool:
    import fcntl
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(__import__("os"), "O_DIRECTORY"), reason="no directory locks on this system")
def test_a_run_into_a_directory_another_run_writes_is_refused_before_any_model_work(tmp_path, demo):
    import os

    from copyprobe.rescore import rescore

    out = tmp_path / "run"
    detect_into(out, demo, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    fd = _locked_elsewhere(out)
    try:
        backend = FakeBackend(member_texts=[e.text for e in demo.examples if e.label == 1])
        with pytest.raises(ConfigError, match=f"^another copyprobe run is writing to {re.escape(str(out))}; wait"):
            copyprobe.detect(backend, demo, ["loss"], out=out, cache=False)
        assert backend.calls["token_logprobs"] == 0
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        with pytest.raises(ConfigError, match="another copyprobe run is writing to .*run this again when it has ended"):
            rescore(out)
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    finally:
        os.close(fd)
    rescore(out)  # free again: nothing of this process kept it
    assert _is_free(out)


@pytest.mark.skipif(not hasattr(__import__("os"), "O_DIRECTORY"), reason="no directory locks on this system")
def test_a_run_holds_its_directory_while_it_runs_and_lets_go_after(tmp_path, demo):
    from copyprobe import record

    out = tmp_path / "run"
    seen = []

    @record.discards_new_out_dir
    def run(fail):
        record.prepare_out_dir(out, "detect")
        record.prepare_out_dir(out, "detect")  # prepared again inside (detect, then the engine): not refused
        seen.append(_is_free(out))
        if fail:
            raise DataError("refused")

    run(False)
    with pytest.raises(DataError):
        run(True)
    assert seen == [False, False] and _is_free(out)
    record.prepare_out_dir(tmp_path / "alone", "detect")  # no run around it: checked, not held
    assert _is_free(tmp_path / "alone")
    assert record._held == {}


@pytest.mark.skipif(not hasattr(__import__("os"), "O_DIRECTORY"), reason="no directory locks on this system")
def test_the_cli_says_another_run_writes_there_in_one_line(tmp_path, capsys):
    import os

    from copyprobe.cli.commands.demo import demo_data_path
    from copyprobe.cli.main import main

    out = tmp_path / "run"
    out.mkdir()
    fd = _locked_elsewhere(out)
    try:
        code = main(["detect", "--model", "fake", "--data", str(demo_data_path()), "--methods", "loss", "--out", str(out),
                     "--no-cache", "--no-progress"])
    finally:
        os.close(fd)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "another copyprobe run is writing to" in err[0]
    assert list(out.iterdir()) == []


@pytest.mark.skipif(not hasattr(__import__("os"), "O_DIRECTORY"), reason="no directory locks on this system")
def test_a_run_on_another_thread_is_refused_as_another_process_would_be(tmp_path):
    import threading

    from copyprobe import record

    out = tmp_path / "run"
    inside, leave = threading.Event(), threading.Event()
    errors = []

    @record.discards_new_out_dir
    def holds():
        record.prepare_out_dir(out, "detect")
        inside.set()
        leave.wait(30)

    worker = threading.Thread(target=holds)
    worker.start()
    try:
        assert inside.wait(30)

        @record.discards_new_out_dir
        def second():
            record.prepare_out_dir(out, "detect")

        try:
            second()
        except ConfigError as exc:
            errors.append(str(exc))
    finally:
        leave.set()
        worker.join(30)
    assert len(errors) == 1 and errors[0].startswith(f"another copyprobe run is writing to {out}")
    assert out.is_dir() and _is_free(out) and record._held == {}


@pytest.mark.skipif(not hasattr(__import__("os"), "fork") or not hasattr(__import__("os"), "O_DIRECTORY"),
                    reason="no fork or no directory locks on this system")
def test_a_forked_child_does_not_keep_the_directory_locked(tmp_path):
    """A forked child (a data loader's worker) shared the run's lock: while it lived, the
    directory stayed locked after the run let go, and the next run there was refused."""
    import os
    import time

    from copyprobe import record

    out = tmp_path / "run"
    out.mkdir()
    key = record.holding(out)
    key.__enter__()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: says what it holds, then outlives the parent's run
        try:
            os.close(read)
            os.write(write, b"1" if record._held else b"0")
            time.sleep(5)
        finally:
            os._exit(0)
    try:
        os.close(write)
        assert os.read(read, 1) == b"0"  # the child holds no directory
        key.__exit__(None, None, None)  # the parent's run ends; the child lives on
        assert _is_free(out)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
        os.close(read)
