"""copyprobe.engine: one execute() for every run kind, and derive again with no model.

A toy run kind, declared as the docs say (a Collection and a RunKind), runs through the
same path as detect: the session is opened and closed (also when the run is interrupted),
the record holds what every kind records, derive sees the collected files, and the
directory is written with run.json last."""

from __future__ import annotations

import json

import pytest

from copyprobe.backends.base import TokenLogprobsRequest
from copyprobe.backends.fake import FakeBackend
from copyprobe.engine import Collected, Derived, RunKind, as_run, derive_run, execute, register
from copyprobe.errors import ConfigError
from copyprobe.errors import Interrupted as StopSaid
from copyprobe.kinds import KINDS
from copyprobe.record import load_run
from copyprobe.session import Session

TEXTS = ["the cat sat", "a dog ran far", "birds fly south"]


class MeanLogprob:
    """collect: the token log-probs of each text; the mean per text is the collected row."""

    def plan(self, session):
        def one(text):
            (response,) = yield [TokenLogprobsRequest(text=text)]
            return sum(response.logprobs) / len(response.logprobs)
        return {i: one(text) for i, text in enumerate(TEXTS)}

    def finish(self, results, stats):
        rows = [{"id": str(i), "mean": results[i]} for i in range(len(TEXTS))]
        return Collected(files={"scores.jsonl": rows},
                         record={"data": {"n": len(rows)}, "notes": ["collected"], "toy": {"texts": len(TEXTS)}})


def derive_best(run):
    best = max(run.scores, key=lambda r: r["mean"])
    return Derived({"best.json": {"best": best["id"]}}, ["derived"])


TOY = RunKind("detect", {"scores.jsonl": True}, derive_best)  # detect's name: load_run reads it back


def test_execute_collects_derives_and_writes(tmp_path):
    fake = FakeBackend()
    done = execute(TOY, fake, MeanLogprob(), out=tmp_path / "run", cache=False, command=["toy"])
    answers = FakeBackend().answer([TokenLogprobsRequest(text=t) for t in TEXTS])
    expected = [sum(a.logprobs) / len(a.logprobs) for a in answers]
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert [r["mean"] for r in rows] == pytest.approx(expected)
    best = max(range(len(TEXTS)), key=lambda i: expected[i])
    assert json.loads((tmp_path / "run" / "best.json").read_text()) == {"best": str(best)}
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["command"] == ["toy"] and run["notes"] == ["collected", "derived"]
    assert run["requests"]["unique"] == len(TEXTS) and run["data"] == {"n": len(TEXTS)}
    assert done.record.kind == "detect" and done.files["best.json"] == {"best": str(best)}


def test_derive_again_from_the_directory_needs_no_model(tmp_path):
    execute(TOY, FakeBackend(), MeanLogprob(), out=tmp_path / "run", cache=False)
    again = derive_run(TOY, load_run(tmp_path / "run"))
    assert again.files == {"best.json": json.loads((tmp_path / "run" / "best.json").read_text())}
    with pytest.raises(ConfigError, match="n_bootstrap"):  # this kind has no resamples to change
        derive_run(TOY, load_run(tmp_path / "run"), n_bootstrap=10)


def test_in_memory_run_matches_the_one_read_back(tmp_path):
    done = execute(TOY, FakeBackend(), MeanLogprob(), out=tmp_path / "run", cache=False)
    in_memory = as_run(done.record, done.files)
    read_back = load_run(tmp_path / "run")
    assert in_memory.scores == read_back.scores and in_memory.record.to_json() == read_back.record.to_json()


class Interrupted(MeanLogprob):
    def finish(self, results, stats):
        raise KeyboardInterrupt  # Ctrl-C after the model work


def test_an_interrupted_run_closes_its_session_and_writes_nothing(tmp_path, monkeypatch):
    closed = []
    monkeypatch.setattr(Session, "close", lambda self, wait=True: closed.append(wait))
    with pytest.raises(KeyboardInterrupt):
        execute(TOY, FakeBackend(), Interrupted(), out=tmp_path / "run", cache=False)
    assert closed == [True]
    assert not (tmp_path / "run").exists()  # nor the directory it made, left empty


def test_a_run_refused_at_the_model_leaves_no_directory_it_made(tmp_path):
    from copyprobe.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown model spec 'no-such-model'"):
        execute(TOY, "no-such-model", MeanLogprob(), out=tmp_path / "runs" / "run", cache=False)
    assert list(tmp_path.iterdir()) == []


def _cache_closes_when_derive_runs(monkeypatch):
    """ResponseCache's close made to wait (up to 5 s) for derive to begin; returns the
    events: whether derive had begun when the close ended, and derive's own."""
    import threading

    from copyprobe.backends.cache import ResponseCache

    events, deriving = [], threading.Event()
    real_close_now = ResponseCache._close_now

    def close_now(self):
        events.append(("close saw derive", deriving.wait(5)))
        real_close_now(self)

    monkeypatch.setattr(ResponseCache, "_close_now", close_now)
    return events, deriving


def test_the_cache_file_closes_while_the_run_is_derived(tmp_path, monkeypatch):
    """SQLite's last checkpoint (at close) overlaps derive instead of delaying it; the run
    returns once the file is closed, with its answers in it."""
    import threading

    from copyprobe.backends.cache import ResponseCache

    events, deriving = _cache_closes_when_derive_runs(monkeypatch)

    def derive(run):
        deriving.set()
        events.append("derive")
        return derive_best(run)

    path = tmp_path / "c.sqlite"
    execute(RunKind("detect", {"scores.jsonl": True}, derive), FakeBackend(), MeanLogprob(), cache=path)
    assert ("close saw derive", True) in events and "derive" in events
    assert not [t for t in threading.enumerate() if t.name == "copyprobe-cache-close"]
    assert not path.with_name(path.name + "-wal").exists()  # the last connection closed: the log moved in
    assert ResponseCache(path).count() == len(TEXTS)


def test_a_run_whose_derive_fails_still_closes_its_cache_file(tmp_path, monkeypatch):
    import threading

    events, deriving = _cache_closes_when_derive_runs(monkeypatch)

    def derive(run):
        deriving.set()
        raise ZeroDivisionError("derive failed")

    with pytest.raises(ZeroDivisionError):
        execute(RunKind("detect", {"scores.jsonl": True}, derive), FakeBackend(), MeanLogprob(),
                cache=tmp_path / "c.sqlite")
    assert events == [("close saw derive", True)]  # ended before execute raised
    assert not [t for t in threading.enumerate() if t.name == "copyprobe-cache-close"]


def test_a_session_given_in_stays_open(tmp_path):
    with Session(FakeBackend(), cache=False) as session:
        execute(TOY, session, MeanLogprob(), cache=False)
        assert not session.closed
        execute(TOY, session, MeanLogprob(), cache=False)  # and serves a second run


def test_every_run_kind_writing_results_is_registered():
    from copyprobe.record import RESULT_FILES

    assert set(KINDS) == {kind for kind, files in RESULT_FILES.items() if files}
    assert all(KINDS[name].name == name for name in KINDS)


def test_a_new_kind_is_one_module_and_one_registration(tmp_path, monkeypatch):
    """Registered (the line copyprobe/kinds.py holds per kind), a kind of a new name is
    read back by load_run and derived again by rescore, with no other edit."""
    from copyprobe import kinds, record, run_files
    from copyprobe.rescore import rescore

    monkeypatch.setattr(run_files, "KINDS", list(run_files.KINDS))  # registration is global: undo it after
    monkeypatch.setattr(record, "RESULT_FILES", dict(record.RESULT_FILES))
    toy = RunKind("toy", {"scores.jsonl": True}, derive_best)
    with pytest.raises(Exception, match="kind"):  # unregistered, its run.json is another tool's
        execute(toy, FakeBackend(), MeanLogprob(), out=tmp_path / "before", cache=False)
        load_run(tmp_path / "before")
    monkeypatch.setitem(kinds.KINDS, "toy", register(toy))
    execute(toy, FakeBackend(), MeanLogprob(), out=tmp_path / "run", cache=False)
    written = (tmp_path / "run" / "best.json").read_text()
    (tmp_path / "run" / "best.json").unlink()
    saved = load_run(tmp_path / "run").record
    assert saved.kind == "toy" and saved.extra == {"toy": {"texts": len(TEXTS)}}  # its settings section
    rescore(tmp_path / "run")
    assert (tmp_path / "run" / "best.json").read_text() == written


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_a_run_whose_metrics_fail_keeps_the_model_answers_for_rescore(tmp_path, monkeypatch, failure):
    """With no cache the scores exist only in the run: a derive that fails (out of memory,
    Ctrl-C during the bootstrap) must not take them with it."""
    import copyprobe
    from copyprobe.rescore import rescore

    from copyprobe.data.example import Example

    data = [Example(id=f"p{i}", text=f"passage {i} " + "word " * (5 + i), label=i % 2) for i in range(12)]
    reference = copyprobe.detect(FakeBackend(), data, ["loss", "zlib"], out=tmp_path / "whole", cache=False,
                                 n_bootstrap=50)
    assert reference.metrics
    backend = FakeBackend()

    def fails(*args, **kwargs):
        raise failure()

    import sys

    monkeypatch.setattr(sys.modules["copyprobe.detect"], "summarize", fails)  # the module, not copyprobe.detect()
    with pytest.raises(failure) as raised:
        copyprobe.detect(backend, data, ["loss", "zlib"], out=tmp_path / "run", cache=False, n_bootstrap=50)
    if failure is KeyboardInterrupt:  # said where the work is, not "nothing kept (the cache was off)"
        assert isinstance(raised.value, StopSaid) and f"copyprobe rescore {tmp_path / 'run'}" in str(raised.value)
    answered = backend.calls["token_logprobs"]
    assert answered > 0
    run_dir = tmp_path / "run"
    assert not (run_dir / "metrics.json").exists()
    assert (run_dir / "scores.jsonl").read_bytes() == (tmp_path / "whole" / "scores.jsonl").read_bytes()
    assert any("could not be computed" in n and failure.__name__ in n for n in load_run(run_dir).record.notes)
    monkeypatch.undo()
    rescore(run_dir)  # no model: the metrics come from the saved answers
    assert json.loads((run_dir / "metrics.json").read_text()) == json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert backend.calls["token_logprobs"] == answered
    assert not any("could not be computed" in n for n in load_run(run_dir).record.notes)  # computed now
