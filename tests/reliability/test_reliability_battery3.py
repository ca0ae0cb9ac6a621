"""The third reliability battery (issue 42): APIs that only generate, servers that hang,
runs that scored nothing, folders with files that cannot be read, options a backend would
ignore, overflowing plant settings and answers fixed before any scoring."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from copyprobe.cli.main import main
from rel_util import cli_cmd, env, make_passages, write_jsonl

REPO = Path(__file__).resolve().parents[2]
SYLLABLES = "ka lo mi nu pe ra si to vu we ba de fi go hu ja ke li mo na".split()


def pseudo_text(rng: random.Random, words: int = 30) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(words))


def audit_files(tmp_path: Path, n_clean: int = 4, n_suspect: int = 2, seed: int = 2) -> tuple[Path, Path]:
    rng = random.Random(seed)
    suspect = write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{d}-{p}", "text": pseudo_text(rng, 60), "doc_id": f"book{d}"}
                                                for d in range(n_suspect) for p in range(2)])
    clean = write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}-{p}", "text": pseudo_text(rng, 60), "doc_id": f"c{k}"}
                                              for k in range(n_clean) for p in range(2)])
    return suspect, clean


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- 1. a capability probed before a method is chosen ------------------------------------

def test_audit_auto_on_a_generation_only_server_runs_prefix_probing(tmp_path, fake_openai, monkeypatch, capsys):
    """The fake server gives no prompt log-probs (``logprobs: null`` on an echoed prompt),
    like most hosted chat APIs: auto must ask before it chooses, and run prefix probing."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    suspect, clean = audit_files(tmp_path)
    out = tmp_path / "run"
    code = main(["audit", "--model", f"openai:tiny-model@{server.base_url}", "--suspect", str(suspect),
                 "--clean", str(clean), "--method", "auto", "--out", str(out), "--no-cache", "--no-progress",
                 "--bootstrap", "0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    run = json.loads((out / "run.json").read_text())
    assert run["audit"]["method"] == "prefix_probe"
    assert any(n.startswith("method auto -> prefix_probe") for n in run["notes"])
    assert run["model"]["prompt_logprobs"] is False
    # one probe of prompt log-probs, then generations only
    echoed = [r for r in server.log if r["body"].get("echo")]
    assert len(echoed) == 1
    assert not (out / "scores.jsonl").read_text().count('"prefix_probe": null')


def test_an_audit_auto_whose_answers_are_cached_reruns_with_the_server_down(tmp_path, fake_openai, monkeypatch,
                                                                               capsys):
    """auto asked the server whether it gives prompt log-probs even when the cache held
    every answer, so a rerun of a finished audit failed once the server was gone; the
    stored answers show it gives them."""
    import hashlib

    from copyprobe.backends import specs
    from copyprobe.backends.fake import FakeBackend

    def echoed(path: str, body: dict) -> dict:
        if not body.get("echo"):
            return server.answer(path, body)
        words = body["prompt"].split(" ")
        tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
        logprobs = [None] + [-1 - hashlib.sha256(t.encode()).digest()[0] / 64 for t in tokens[1:]]
        offsets = [sum(map(len, tokens[:i])) for i in range(len(tokens))]
        return {"choices": [{"text": body["prompt"], "finish_reason": "length", "logprobs": {
            "tokens": tokens, "token_logprobs": logprobs, "text_offset": offsets, "top_logprobs": None}}]}

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai(answer=echoed)
    real = specs.load_backend
    monkeypatch.setattr(specs, "load_backend", lambda spec, **options: real(spec, **options)
                        if spec.startswith("openai:") else FakeBackend(spec=spec))
    suspect, clean = audit_files(tmp_path, n_clean=6)
    args = ["audit", "--model", f"openai:tiny-model@{server.base_url}", "--suspect", str(suspect), "--clean",
            str(clean), "--param", "reference.model=fake", "--cache", str(tmp_path / "c.sqlite"), "--no-progress",
            "--bootstrap", "0", "--test", "rank", "--alpha", "0.25"]
    assert main(args + ["--out", str(tmp_path / "first")]) == 0, capsys.readouterr().err
    server.close()
    code = main(args + ["--out", str(tmp_path / "again")])
    assert code == 0, capsys.readouterr().err
    runs = [json.loads((tmp_path / name / "run.json").read_text()) for name in ("first", "again")]
    assert [run["audit"]["method"] for run in runs] == ["reference", "reference"]
    assert (tmp_path / "again" / "scores.jsonl").read_text() == (tmp_path / "first" / "scores.jsonl").read_text()


# -- 2. one interruption path that stops retries; --request-timeout ---------------------

def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may have ignored it


def test_one_ctrl_c_during_a_hung_server_ends_within_5_s_and_loses_nothing(tmp_path, fake_openai):
    from rel_util import cache_rows

    rows = make_passages(40, seed=3, words=40)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    cache = tmp_path / "c.sqlite"
    server = fake_openai()
    model = f"openai:tiny-model@{server.base_url}"

    def detect(*extra: str) -> list[str]:
        return cli_cmd("detect", "--model", model, "--data", str(data), "--methods", "prefix_probe",
                       "--out", str(tmp_path / "run"), "--cache", str(cache), "--no-progress", "--bootstrap", "0",
                       *extra)

    first = subprocess.run(detect("--limit", "10"), cwd=REPO, env=env(OPENAI_API_KEY=""), capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    kept = len(cache_rows(cache))
    assert kept == 10
    server.delay = 3600  # the server now hangs: no answer ever comes
    proc = subprocess.Popen(detect(), cwd=REPO, env=env(OPENAI_API_KEY=""), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while len(server.log) < 10 + 8 and time.monotonic() < deadline:  # a round of 8 hangs in flight
        time.sleep(0.01)
    assert len(server.log) == 18
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    waited = time.monotonic() - interrupted
    assert proc.returncode == 130, stderr
    line = one_error_line(stderr)
    assert "interrupted" in line and "run the same command again" in line
    assert waited < 5, waited
    time.sleep(0.5)
    assert len(server.log) == 18  # nothing sent after Ctrl-C
    assert len(cache_rows(cache)) == kept  # nothing lost
    server.delay = 0
    before = len(server.log)
    again = subprocess.run(detect(), cwd=REPO, env=env(OPENAI_API_KEY=""), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert len(server.log) - before == 30  # only the requests never answered


def test_an_interrupted_run_tries_no_request_again(fake_openai):
    """The retry loop stops on interruption: a worker waiting out a backoff sends no further
    attempt once the run is interrupted (the Python API: the caller caught KeyboardInterrupt)."""
    import threading

    from copyprobe.backends.base import GenerateRequest
    from copyprobe.backends.openai_compat import OpenAIBackend

    server = fake_openai()
    server.script = [("status", 500, {}, "{}")] * 40
    backend = OpenAIBackend.from_spec(f"openai:tiny-model@{server.base_url}", concurrency=4, backoff=2.0)
    import _thread

    # interrupt_main does nothing where SIGINT is ignored, as in a suite started in the
    # background (`bash .ci/run &`): the test checks copyprobe, not how pytest was launched
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, _thread.interrupt_main).start()  # Ctrl-C while every worker waits out a backoff
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            backend.answer([GenerateRequest(prompt=f"p{i}", max_tokens=2) for i in range(8)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 3
    sent = len(server.log)
    assert sent == 4  # the first attempts of the 4 in flight, each then waiting a backoff of 1-3 s
    time.sleep(3.5)  # every backoff is over: an attempt not stopped would have been sent by now
    assert len(server.log) == sent


def test_request_timeout_bounds_each_wait(fake_openai, monkeypatch, capsys):
    from copyprobe.backends.base import GenerateRequest, RequestFailed
    from copyprobe.backends.openai_compat import OpenAIBackend

    server = fake_openai()
    server.delay = 5
    backend = OpenAIBackend.from_spec(f"openai:tiny-model@{server.base_url}", request_timeout=0.3, max_retries=1)
    backend._sleep = lambda s: None
    started = time.monotonic()
    [answer] = backend.answer([GenerateRequest(prompt="p", max_tokens=2)])
    assert time.monotonic() - started < 3
    assert isinstance(answer, RequestFailed) and "timed out after 0.3s" in answer.reason
    assert "gave up after 2 attempts" in answer.reason
    assert backend.info()["timeout_s"] == 0.3
    for bad in ("0", "-1", "nan", "inf", "soon"):
        code = main(["detect", "--model", "openai:m@http://127.0.0.1:9/v1", "--data", "x.jsonl", "--out", "o",
                     "--request-timeout", bad])
        assert code == 2
        assert "argument --request-timeout" in capsys.readouterr().err


# -- 5. options checked against the backend that uses them --------------------------------

@pytest.mark.parametrize("extra, env_set, words", [
    (["--api-key-env", ""], {}, "argument --api-key-env: is empty"),
    (["--api-key-env", "NAME_NOT_SET_42"], {}, "names NAME_NOT_SET_42, and that environment variable is not set"),
    (["--api-key-env", "EMPTY_KEY_42"], {"EMPTY_KEY_42": ""}, "and that environment variable is empty"),
    # a key pasted for the variable's name is not repeated on the terminal
    (["--api-key-env", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"], {}, "is not the name of a set environment variable "
                                                               "(32 characters, not repeated here"),
    (["--api-key-env", "hf_Ab3dEf6hIj9kLm2nOp5qRs8t"], {}, "is not the name of a set environment variable"),
    (["--api-key-env", "AKIAAb3dEf6hIj9kLm2n"], {}, "is not the name of a set environment variable"),
    (["--dtype", "float8"], {}, "argument --dtype: float8 does not apply to openai:"),
    (["--device", "cpu"], {}, "argument --device: cpu does not apply to openai:"),
    (["--batch-size", "8"], {}, "argument --batch-size: 8 does not apply to openai:"),
])
def test_options_an_api_model_would_ignore_are_refused(tmp_path, fake_openai, monkeypatch, capsys, extra, env_set,
                                                      words):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback-key-that-must-not-be-used")
    for name, value in env_set.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NAME_NOT_SET_42", raising=False)
    server = fake_openai()
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(4))
    code = main(["detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data), "--methods",
                 "prefix_probe", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert words in one_error_line(err)
    assert "sk-fallback" not in err and "Ab3dEf6h" not in err
    assert not server.log  # refused before any request
    assert not (tmp_path / "run" / "scores.jsonl").exists()


def test_api_options_with_only_local_models_say_they_had_no_effect(tmp_path, monkeypatch, capsys):
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(4))
    code = main(["detect", "--model", "fake", "--data", str(data), "--methods", "loss", "--out", str(tmp_path / "r"),
                 "--no-cache", "--no-progress", "--bootstrap", "0", "--concurrency", "3", "--request-timeout", "5"])
    assert code == 0
    err = capsys.readouterr().err
    assert "copyprobe: warning: the options of OpenAI-compatible models (concurrency, timeout) had no effect" in err


# -- 3. one rule for a run that produced nothing -----------------------------------------

def _detect_api(tmp_path, server, n=8, *extra):
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(n, seed=5, words=60))
    return main(["detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data), "--methods",
                 "prefix_probe", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0",
                 *extra])


def test_a_run_that_scored_nothing_exits_2_with_the_cause(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("copyprobe.backends.openai_compat.random.uniform", lambda a, b: 0.0)  # no backoff wait
    server = fake_openai()
    server.script = [("status", 500, {}, '{"error": {"message": "boom"}}')] * 48  # 8 passages x 6 attempts
    code = _detect_api(tmp_path, server)
    err = capsys.readouterr().err
    assert code == 2
    line = [ln for ln in err.splitlines() if ln.startswith("copyprobe: error:")]
    assert len(line) == 1 and "Traceback" not in err
    assert "prefix_probe scored none of 8 passages" in line[0]
    assert "HTTP 500" in line[0] and "gave up after 6 attempts" in line[0] and "8 of them" in line[0]
    # nothing computed is lost: the run is written with every failure recorded
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert len(run["failures"]) == 8


def test_a_partial_run_exits_0_and_says_how_many_failed_and_why(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    server.script = [("status", 400, {}, '{"error": {"message": "prompt too long"}}')] * 3  # not retried
    code = _detect_api(tmp_path, server)
    err = capsys.readouterr().err
    assert code == 0, err
    warning = [ln for ln in err.splitlines() if ln.startswith("copyprobe: warning:")]
    assert len(warning) == 1, err
    assert "prefix_probe: 3 of 8 passages have no score" in warning[0] and "prompt too long" in warning[0]


def test_the_rule_counts_reasons():
    from copyprobe.detect import unscored

    rows = [{"id": "a", "m": 1.0, "n": None, "errors": {"n": "x"}}, {"id": "b", "m": None, "n": None,
                                                                       "errors": {"m": "y", "n": "x"}}]
    [m, n] = unscored(rows, ["m", "n"])
    assert (m.n_failed, m.nothing, n.nothing, n.reasons) == (1, False, True, (("x", 2),))
    assert unscored([{"id": "a", "m": 0.5}], ["m"]) == []


def test_an_audit_that_scored_nothing_exits_2(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    server.script = [("status", 400, {}, '{"error": {"message": "model overloaded"}}')] * 100
    suspect, clean = audit_files(tmp_path)
    code = main(["audit", "--model", f"openai:tiny-model@{server.base_url}", "--suspect", str(suspect),
                 "--clean", str(clean), "--method", "prefix_probe", "--out", str(tmp_path / "run"), "--no-cache",
                 "--no-progress", "--bootstrap", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = [ln for ln in err.splitlines() if ln.startswith("copyprobe: error:")]
    assert "prefix_probe scored none of 12 passages" in line and "model overloaded" in line
    assert (tmp_path / "run" / "verdicts.json").is_file()


# -- 4. one walker of user folders, reporting what it skipped ------------------------------

CHAPTER = ("The lantern swung in the harbour wind while the fishermen counted their nets. " * 12).strip()


def book_folder(tmp_path: Path, name: str = "book") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for k in range(3):
        (folder / f"ch{k}.txt").write_text(f"Chapter {k}.\n\n{CHAPTER} Part {k} {name}.\n")
    (folder / "ch3.txt").symlink_to(tmp_path / "missing-chapter.txt")  # a missing chapter
    os.mkfifo(folder / "pipe.txt")  # not a regular file: reading it would hang
    (folder / ".hidden.txt").write_text("left out on purpose, not reported")
    return folder


def test_walk_folder_reports_what_it_skipped_and_why(tmp_path):
    from copyprobe.files import walk_folder

    folder = book_folder(tmp_path)
    (folder / "sub").mkdir()
    (folder / "sub" / "ch9.txt").write_text("nine")
    (folder / "loop").symlink_to(folder, target_is_directory=True)
    walk = walk_folder(folder)
    assert [p.relative_to(folder).as_posix() for p in walk.files] == ["ch0.txt", "ch1.txt", "ch2.txt", "sub/ch9.txt"]
    reasons = {p.name: why for p, why in walk.skipped}
    assert reasons["ch3.txt"].startswith("a link to a missing file")
    assert reasons["pipe.txt"] == "not a regular file"
    assert reasons["loop"] == "a link to a directory, not followed"
    assert ".hidden.txt" not in reasons


def test_detect_on_a_book_folder_with_a_missing_chapter_warns_and_records_it(tmp_path, monkeypatch, capsys):
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    folder = book_folder(tmp_path)
    code = main(["detect", "--model", "fake", "--data", str(folder), "--methods", "loss", "--out",
                 str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    err = capsys.readouterr().err
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if "skipped" in line]
    assert warning.startswith("copyprobe: warning:") and "2 entries skipped" in warning
    assert "ch3.txt (a link to a missing file" in warning and "pipe.txt (not a regular file)" in warning
    files = json.loads((tmp_path / "run" / "run.json").read_text())["data"]["files"]
    skipped = {Path(f["path"]).name: f["skipped"] for f in files if "skipped" in f}
    assert set(skipped) == {"ch3.txt", "pipe.txt"}
    assert len([f for f in files if "sha256" in f]) == 3


def test_audit_book_folders_list_what_they_skipped(tmp_path, monkeypatch, capsys):
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    suspect = book_folder(tmp_path, "suspect")
    clean = tmp_path / "clean"
    clean.mkdir()
    for k in range(4):
        (clean / f"c{k}.txt").write_text(f"{CHAPTER} Clean {k}.\n")
    code = main(["audit", "--model", "fake", "--suspect", str(suspect), "--clean", str(clean), "--method", "loss",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert any(line.startswith("copyprobe: warning:") and "2 entries skipped" in line for line in err.splitlines())
    files = json.loads((tmp_path / "run" / "run.json").read_text())["audit"]["input_files"]["suspect"]
    assert {Path(f["path"]).name for f in files if "skipped" in f} == {"ch3.txt", "pipe.txt"}


def test_plant_corpus_and_background_folders_warn_and_record_what_they_skipped(tmp_path):
    from copyprobe.plant.background import load_background
    from copyprobe.plant.corpus import load_corpus

    folder = book_folder(tmp_path, "bg")
    with pytest.warns(Warning, match=r"2 entries skipped: ch3.txt \(a link to a missing file"):
        corpus = load_corpus(folder, passage_tokens=32)
    assert {Path(s["path"]).name for s in corpus.skipped} == {"ch3.txt", "pipe.txt"}
    with pytest.warns(Warning, match="2 entries skipped"):
        background = load_background(folder, 32, lambda text: len(text.split()), ["unrelated corpus text"])
    assert {Path(s["path"]).name: s["skipped"] for s in background.skipped}["pipe.txt"] == "not a regular file"


def test_canary_find_refuses_a_binary_file_like_canary_test(tmp_path, capsys):
    doc = tmp_path / "book.txt"
    doc.write_text(CHAPTER + "\n\n" + CHAPTER + "\n")
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "10",
                 "--seed", "s"]) == 0
    capsys.readouterr()
    binary = tmp_path / "nul.txt"
    binary.write_bytes(b"\x00" * 4096)
    code = main(["canary", "find", str(tmp_path / "kit"), str(binary)])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "looks like a binary file" in line


# -- 7. answers fixed before scoring, self-references, messages ---------------------------

@pytest.mark.parametrize("test, n_clean, words", [
    ("rank", 4, "the rank test cannot reach alpha 0.01 (its smallest p-value with 4 clean documents is 1/5"),
    ("t", 2, "the t test cannot reach alpha 0.01 (it needs a standard deviation of at least 3 clean documents"),
])
def test_an_audit_whose_answer_is_fixed_says_so_before_any_request(tmp_path, fake_openai, monkeypatch, capsys,
                                                                    test, n_clean, words):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    suspect, clean = audit_files(tmp_path, n_clean=n_clean, n_suspect=1)
    code = main(["audit", "--model", f"openai:tiny-model@{server.base_url}", "--suspect", str(suspect),
                 "--clean", str(clean), "--method", "prefix_probe", "--test", test, "--out", str(tmp_path / "run"),
                 "--no-cache", "--no-progress"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "the answer is fixed before any scoring" in line and words in line and "nothing was scored" in line
    assert not server.log  # not one request


def test_a_group_that_can_still_reach_alpha_is_scored(tmp_path, monkeypatch, capsys):
    """The rank test cannot reach alpha for one document with 4 clean ones, but 5 suspect
    documents against 4 clean ones as a group can (1/C(9, 5) = 1/126): scored."""
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    suspect, clean = audit_files(tmp_path, n_clean=4, n_suspect=5)
    code = main(["audit", "--model", "fake", "--suspect", str(suspect), "--clean", str(clean), "--method", "loss",
                 "--test", "rank", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("method", ["topk_reference", "reference"])
def test_the_target_as_its_own_reference_is_refused(tmp_path, fake_openai, monkeypatch, capsys, method):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    spec = f"openai:tiny-model@{server.base_url}"
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(4, words=40))
    code = main(["detect", "--model", spec, "--data", str(data), "--methods", method, "--param",
                 f"{method}.model={spec}", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and f"{method}.model is the target model itself" in line
    assert not server.log


def test_messages_name_real_options(tmp_path, monkeypatch, capsys):
    from copyprobe.backends.fake import FakeBackend

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    suspect, clean = audit_files(tmp_path)
    common = ["--suspect", str(suspect), "--clean", str(clean), "--no-cache", "--no-progress", "--bootstrap", "0"]
    code = main(["audit", "--model", "fake", *common, "--method", "loss", "--param", "min_k.k=0.1",
                 "--out", str(tmp_path / "a")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "but --method is loss" in line and "--methods" not in line
    # a detect run directory reused by an audit: "an audit run", not "a audit run"
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(4))
    assert main(["detect", "--model", "fake", "--data", str(data), "--methods", "loss", "--out", str(tmp_path / "d"),
                 "--no-cache", "--no-progress", "--bootstrap", "0"]) == 0
    capsys.readouterr()
    assert main(["audit", "--model", "fake", *common, "--method", "loss", "--out", str(tmp_path / "d")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "an audit run would overwrite it" in line
    # no text column: the option's name, not the Python keyword
    bad = write_jsonl(tmp_path / "b.jsonl", [{"id": "1", "body": "words here", "label": 1}])
    assert main(["detect", "--model", "fake", "--data", str(bad), "--methods", "loss", "--out", str(tmp_path / "b"),
                 "--no-cache", "--no-progress"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "argument --text-column: is not given" in line and "no text column" in line and "text_column=" not in line


def test_canary_make_finds_sentence_boundaries_inside_one_long_paragraph(tmp_path, capsys):
    """3,500 words of narrative with no blank line and the last sentence cut off: the
    heading rule (a paragraph that does not end a sentence) must not throw away every
    sentence boundary inside it."""
    rng = random.Random(7)
    names = ["Mara", "Tobias", "Ilse", "Corin"]
    verbs = ["walked past", "looked at", "thought about", "carried", "remembered"]
    things = ["the old mill", "a copper kettle", "the harbour wall", "the winter orchard", "a silver lantern"]
    sentences = []
    words = 0
    while words < 3500:
        sentence = (f"{rng.choice(names)} {rng.choice(verbs)} {rng.choice(things)} while the wind moved "
                    f"through {rng.choice(things)} and the evening grew quiet.")
        sentences.append(sentence)
        words += len(sentence.split())
    text = " ".join(sentences) + " And then Mara turned toward the"  # cut off mid-sentence
    doc = tmp_path / "one-paragraph.txt"
    doc.write_text(text)
    code = main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "10",
                 "--seed", "s"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    from copyprobe.canary.placement import prose_boundaries

    spots = prose_boundaries(text)
    assert len(spots) > 100
    assert len(text) not in spots  # never after the sentence cut off
    assert text.rindex("And then") in spots  # before it is fine


def test_damaged_json_messages_do_not_stutter(tmp_path):
    """json's own message can end in "at" ("Unterminated string starting at"): the place
    follows in brackets, never as "... at at line 3"."""
    from copyprobe.errors import DataError
    from copyprobe.files import read_json, read_jsonl

    damaged = tmp_path / "run.json"
    damaged.write_text('{"a": 1,\n "b": "unterminated')
    with pytest.raises(DataError) as exc:
        read_json(damaged)
    assert str(exc.value).endswith("is not valid JSON: Unterminated string starting at (line 2, column 7)")
    rows = tmp_path / "scores.jsonl"
    rows.write_text('{"id": "a"}\n{"id": "b')
    with pytest.raises(DataError) as exc:
        read_jsonl(rows)
    assert str(exc.value).endswith("line 2 is not valid JSON: Unterminated string starting at (column 8)")


@pytest.mark.server
def test_audit_auto_against_a_llama_server_without_logprobs(tmp_path, monkeypatch, capsys):
    """llama-cpp-python's server started without logits_all answers every log-prob request
    with an error, as a generation-only API does: auto probes, then runs prefix probing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_server_conftest_42", REPO / "tests" / "server" / "conftest.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    reason = helpers._server_importable()
    if reason:
        pytest.skip(reason)
    with helpers.running_server(logits_all=False, log_path=tmp_path / "server.log") as (base_url, proc):
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setattr("copyprobe.backends.openai_compat.random.uniform", lambda a, b: 0.0)  # no backoff wait
        suspect, clean = audit_files(tmp_path, n_clean=3, n_suspect=1)
        out = tmp_path / "run"
        code = main(["audit", "--model", f"openai:smollm2@{base_url}", "--suspect", str(suspect), "--clean",
                     str(clean), "--passages-per-document", "1", "--out", str(out), "--no-cache", "--no-progress",
                     "--bootstrap", "0", "--param", "prefix_probe.max_tokens=16"])
        captured = capsys.readouterr()
        if code != 0 and proc.poll() is not None:  # the server itself died (a llama.cpp build that crashes here)
            pytest.skip(f"llama_cpp.server exited with {proc.returncode} during the run: {captured.err.strip()}")
        assert code == 0, captured.err + (tmp_path / "server.log").read_text()[-1500:]
        run = json.loads((out / "run.json").read_text())
        assert run["audit"]["method"] == "prefix_probe" and run["model"]["prompt_logprobs"] is False


def test_plant_refuses_a_lora_rank_without_lora(tmp_path, capsys):
    out = tmp_path / "p"
    code = main(["plant", "--model", "smollm2-135m-instruct", "--corpus", str(tmp_path / "none.txt"), "--out", str(out),
                 "--lora-r", "4"])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and "argument --lora-r: 4 applies only to LoRA training" in line
    assert not out.exists()


@pytest.mark.parametrize("extra, words", [
    (["--dtype", "float16"], "argument --dtype: float16 does not apply to llamacpp:"),
    (["--device", "cuda"], "argument --device"),
])
def test_options_llama_cpp_would_ignore_are_refused(tmp_path, monkeypatch, capsys, extra, words):
    def never(spec, **options):
        raise AssertionError("loaded")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", never)
    data = write_jsonl(tmp_path / "d.jsonl", make_passages(4))
    code = main(["detect", "--model", "llamacpp:smollm2-135m-instruct", "--data", str(data), "--methods", "loss",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", *extra])
    assert code == 2
    assert words in one_error_line(capsys.readouterr().err)


def test_check_model_options_names_what_each_backend_ignores():
    from copyprobe.backends.specs import check_model_options
    from copyprobe.errors import SettingError

    check_model_options("llamacpp:x", device="cpu")
    check_model_options("smollm2-135m-instruct", device="cuda", dtype="float16", batch_size=8)  # a local model uses them
    for spec, option in (("llamacpp:x", {"device": "cuda:0"}), ("openai:m@http://h/v1", {"device": "cuda"}),
                         ("openai:m@http://h/v1", {"batch_size": 4})):
        with pytest.raises(SettingError) as exc:
            check_model_options(spec, **option)
        assert exc.value.setting == next(iter(option))


def test_a_canary_test_that_scored_nothing_exits_2(tmp_path, fake_openai, monkeypatch, capsys):
    """`canary test` that can score nothing: prefix probing cannot score canary sentences (each
    far shorter than its 32-word prefix); one error line, exit 2, before the model is asked
    anything and before the run directory is made."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    doc = tmp_path / "book.txt"
    doc.write_text(CHAPTER + "\n\n" + CHAPTER + "\n")
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "10",
                 "--seed", "s"]) == 0
    capsys.readouterr()
    code = main(["canary", "test", "--model", f"openai:tiny-model@{server.base_url}", "--kit", str(tmp_path / "kit"),
                 "--method", "prefix_probe", "--alpha", "0.1",  # 1 canary of 10: p >= 0.1
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    line = one_error_line(err)
    assert line.startswith("copyprobe: error:") and "cannot score this kit's candidates" in line
    assert server.requests_for() == [] and not (tmp_path / "run").exists()


def test_the_python_api_default_batch_size_is_not_refused_for_an_api_model(tmp_path, monkeypatch):
    """detect()/audit() in Python leave batch_size unset (8 texts a pass for a local model):
    that is no option given, so an openai: target is not refused; an explicit one still is."""
    from copyprobe.errors import SettingError
    from copyprobe.session import Session

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    session = Session("openai:m@http://127.0.0.1:9/v1", cache=False, batch_size=None)
    assert session.batch_size == 8
    session.close()
    with pytest.raises(SettingError, match="batch_size 8 does not apply"):
        Session("openai:m@http://127.0.0.1:9/v1", cache=False, batch_size=8)
