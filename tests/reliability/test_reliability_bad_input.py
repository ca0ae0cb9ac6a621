"""Bad input through the CLI: every malformed input of the table gives one line
``copyprobe: error: <problem>`` and exit code 2 (argparse's own errors: its usage line
plus one error line), never a traceback -- or, where only some passages are bad, an
explicit per-row error in scores.jsonl. A response cache that already holds work keeps
every entry through each failure.

``copyprobe.cli.main.main(argv)`` runs in-process with the model loader replaced by a
FakeBackend (the model does not matter for these rows); the ``model`` rows at the end
use the real smollm2 (missing model file, corrupt GGUF, a text longer than the context).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main

from rel_util import assert_cache_entries_decode, make_passages

GOOD = make_passages(8, seed=1, words=12)


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@dataclass
class Case:
    name: str
    files: dict[str, bytes | Callable[[Path], None]]  # relative path -> content (or a builder)
    args: list[str]  # {tmp} is replaced by the case's directory
    expect: str  # substring of the one-line error (case-insensitive); "" for per-row cases
    check: Callable[[Path], None] | None = None  # per-row cases: inspect the run directory
    data: str = "data.jsonl"


def _per_row(method: str, row_id: str, reason: str):
    def check(tmp: Path) -> None:
        rows = {r["id"]: r for r in map(json.loads, (tmp / "run" / "scores.jsonl").read_text().splitlines())}
        assert rows[row_id][method] is None and reason in rows[row_id]["errors"][method]
        others = [r for k, r in rows.items() if k != row_id]
        assert others and all(r[method] is not None for r in others)
        run = json.loads((tmp / "run" / "run.json").read_text())
        assert row_id in {f["id"] for f in run["failures"]}
    return check


def _no_metrics_with_note(tmp: Path) -> None:
    assert (tmp / "run" / "scores.jsonl").is_file() and not (tmp / "run" / "metrics.json").exists()
    run = json.loads((tmp / "run" / "run.json").read_text())
    assert any("both classes" in n for n in run["notes"])


def _skipped(n: int):
    def check(tmp: Path) -> None:
        run = json.loads((tmp / "run" / "run.json").read_text())
        assert run["data"]["n_skipped"] == n
        assert len((tmp / "run" / "scores.jsonl").read_text().splitlines()) == len(GOOD)
    return check


def _row(i, **changes):
    row = dict(GOOD[i])
    row.update(changes)
    return row


def _mkdir(name):
    return lambda tmp: (tmp / name).mkdir()


def _corrupt_parquet(tmp: Path) -> None:
    (tmp / "data.parquet").write_bytes(b"PAR1" + b"\x00garbage" * 20 + b"PAR1")


def _foreign_sqlite(tmp: Path) -> None:
    db = sqlite3.connect(tmp / "other.sqlite")
    db.execute("CREATE TABLE responses (a, b, c)")
    db.commit()
    db.close()


def _truncated_cache(tmp: Path) -> None:
    """A real cache file cut in half (e.g. a partial copy)."""
    db = sqlite3.connect(tmp / "half.sqlite")
    db.execute("CREATE TABLE responses (fingerprint TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,"
               " response TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (fingerprint, kind, key))")
    db.executemany("INSERT INTO responses VALUES (?, ?, ?, ?, 0)",
                   [("f", "token_logprobs", str(i), json.dumps({"x": "y" * 500})) for i in range(400)])
    db.commit()
    db.close()
    raw = (tmp / "half.sqlite").read_bytes()
    (tmp / "half.sqlite").write_bytes(raw[: len(raw) // 2])


CASES = [
    # -- data files ---------------------------------------------------------------
    Case("empty file", {"data.jsonl": b""}, [], "has no rows"),
    Case("whitespace-only file", {"data.jsonl": b"\n\n  \n"}, [], "has no rows"),
    Case("empty csv", {"data.csv": b""}, [], "empty", data="data.csv"),
    Case("binary file", {"data.jsonl": bytes(range(256)) * 4}, [], "binary"),
    Case("invalid json line", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "x", "text": "oops\n' + jsonl(GOOD[2:])}, [], "invalid JSON on line 3"),
    Case("json line not an object", {"data.jsonl": jsonl(GOOD[:2]) + b'["a", "b"]\n'}, [], "line 3 is a JSON list"),
    Case("mixed encodings", {"data.jsonl": jsonl(GOOD[:3]) + json.dumps({"id": "l1", "text": "caf\u00e9 au lait"}).encode().replace(b"\\u00e9", "\u00e9".encode("latin-1"))}, [], "not valid UTF-8"),
    Case("utf-16 file", {"data.jsonl": jsonl(GOOD).decode().encode("utf-16")}, [], "UTF-16"),
    Case("missing text column", {"data.jsonl": jsonl([{"id": r["id"], "body": r["text"], "label": r["label"]} for r in GOOD])}, [], "no text column"),
    Case("explicit text column absent", {"data.jsonl": jsonl(GOOD)}, ["--text-column", "passage"], "text_column='passage' is not a column"),
    Case("explicit label column absent", {"data.jsonl": jsonl(GOOD)}, ["--label-column", "member"], "label_column='member' is not a column"),
    Case("all texts null", {"data.jsonl": jsonl([_row(i, text=None) for i in range(3)])}, [], "all 3 rows have empty text"),
    Case("one null text is skipped and counted", {"data.jsonl": jsonl([*GOOD, {"id": "n", "text": None, "label": 1}])}, [], "", _skipped(1)),
    Case("text is a number", {"data.jsonl": jsonl([*GOOD[:2], _row(2, text=12345)])}, [], "holds a int"),
    Case("text is an object", {"data.jsonl": jsonl([*GOOD[:2], _row(2, text={"a": 1})])}, [], "expected text"),
    Case("duplicate ids", {"data.jsonl": jsonl([*GOOD, _row(0, text="another text entirely here")])}, [], "duplicate id 'p000'"),
    Case("label yes", {"data.jsonl": jsonl([*GOOD[:3], _row(3, label="yes")])}, [], "label must be 0 or 1, got 'yes'"),
    Case("label 2", {"data.jsonl": jsonl([*GOOD[:3], _row(3, label=2)])}, [], "label must be 0 or 1, got 2"),
    Case("label NaN", {"data.jsonl": jsonl(GOOD[:3]) + b'{"id": "q", "text": "some words here", "label": NaN}\n'}, [], "label must be 0 or 1, got nan"),
    Case("label -1", {"data.jsonl": jsonl([*GOOD[:3], _row(3, label=-1)])}, [], "label must be 0 or 1"),
    Case("labels on some rows only", {"data.jsonl": jsonl([*GOOD[:3], {"id": "u", "text": "no label on this row"}])}, [], "some rows have a label and some do not"),
    Case("one class only", {"data.jsonl": jsonl([_row(i, label=1) for i in range(len(GOOD))])}, [], "", _no_metrics_with_note),
    Case("text shorter than two tokens", {"data.jsonl": jsonl([*GOOD, {"id": "tiny", "text": "Hello", "label": 0}])}, [], "", _per_row("loss", "tiny", "fewer than two tokens")),
    Case("csv with too many fields", {"data.csv": b"id,text,label\np1,hello there world,1\np2,a,b,c,d\n"}, [], "has 5 fields but the header has 3", data="data.csv"),
    Case("csv duplicate header", {"data.csv": b"id,text,text\n1,a b,c d\n"}, [], "column 'text' appears twice", data="data.csv"),
    Case("json object instead of list", {"data.json": b'{"text": "a b c", "label": 1}'}, [], "expected a JSON list", data="data.json"),
    Case("corrupt parquet", {"data.parquet": _corrupt_parquet}, [], "as Parquet", data="data.parquet"),
    Case("unsupported extension", {"data.xlsx": b"hello world\n"}, [], "unsupported data file type '.xlsx'", data="data.xlsx"),
    Case("missing data file", {}, [], "data file not found", data="nope.jsonl"),
    Case("directory that is not a dataset", {"folder": _mkdir("folder")}, [], "not a Hugging Face dataset", data="folder"),
    Case("split on a plain file", {"data.jsonl": jsonl(GOOD)}, ["--split", "train"], "applies only to a saved Hugging Face dataset"),
    Case("lone surrogate escape in text", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "s", "text": "broken emoji \\ud83d here", "label": 1}\n'}, [], "line 3: column 'text' holds an unpaired surrogate \\ud83d"),
    Case("lone surrogate escape in id", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "x\\udc00", "text": "fine text here", "label": 1}\n'}, [], "the id holds an unpaired surrogate"),
    # an object or list id was made a Python repr ("{'a': 1}"), an id nobody wrote
    Case("object as id", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": {"a": 1}, "text": "fine text here", "label": 1}\n'}, [], "line 3: column 'id' is an object ({\"a\": 1}); an id must be text or a number"),
    Case("list as document", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "l", "doc_id": [1, 2], "text": "fine text here", "label": 1}\n'}, [], "column 'doc_id' is a list ([1, 2]); an id must be text or a number"),
    Case("deeply nested JSON line", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "d", "text": ' + b"[" * 100_000 + b"]" * 100_000 + b', "label": 1}\n'}, [], "line 3: JSON nested too deeply"),
    Case("deeply nested JSON list", {"data.json": b"[" * 100_000 + b"]" * 100_000}, [], "JSON nested too deeply", data="data.json"),
    Case("label with 5000 digits", {"data.jsonl": jsonl(GOOD[:2]) + b'{"id": "h", "text": "some words", "label": ' + b"1" * 5000 + b"}\n"}, [], "line 3: a number with thousands of digits"),
    Case("missing id value", {"data.jsonl": jsonl([*GOOD[:2], _row(2, id=None)])}, [], "has no id in column 'id'"),
    # -- methods and parameters ------------------------------------------------------
    Case("unknown method", {"data.jsonl": jsonl(GOOD)}, ["--methods", "loss,min_kk"], "unknown method 'min_kk'"),
    Case("empty methods", {"data.jsonl": jsonl(GOOD)}, ["--methods", " "], "--methods is empty"),
    Case("only a comma in methods", {"data.jsonl": jsonl(GOOD)}, ["--methods", " , "], "--methods ' , ': an empty item between commas"),
    Case("empty name between commas", {"data.jsonl": jsonl(GOOD)}, ["--methods", "loss,,zlib"], "--methods 'loss,,zlib': an empty item between commas"),
    Case("trailing comma in a list parameter", {"data.jsonl": jsonl(GOOD)}, ["--methods", "feature_agg", "--param", "feature_agg.ks=0.1,"], "bad value '0.1,' for feature_agg.ks: an empty item between commas"),
    Case("empty model between commas", {"data.jsonl": jsonl(GOOD)}, ["--methods", "veilprobe", "--param", "veilprobe.proxies=reference,,gemma-3-270m"], "veilprobe.proxies has an empty item between commas, got 'reference,,gemma-3-270m'"),
    Case("method given twice", {"data.jsonl": jsonl(GOOD)}, ["--methods", "loss,loss"], "given twice"),
    Case("bad --param syntax", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k=0.1"], "bad --param 'min_k=0.1'"),
    Case("--param without value", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k"], "bad --param"),
    Case("--param unknown name", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.kk=0.1"], "has no parameter 'kk'"),
    Case("--param not a number", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k=abc"], "bad value 'abc' for min_k.k"),
    Case("--param given twice with two values", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k=0.1", "--param", "min_k.k=0.3"], "--param min_k.k is given twice, as 0.1 and 0.3"),
    Case("--param for a method not run", {"data.jsonl": jsonl(GOOD)}, ["--methods", "loss", "--param", "min_k.k=0.1"], "not in --methods"),
    Case("k = 0", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k=0"], "min_k.k must be a number in (0, 1], got 0.0"),
    Case("k > 1", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k_pp", "--param", "min_k_pp.k=1.5"], "min_k_pp.k must be a number in (0, 1], got 1.5"),
    Case("k negative", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k=-0.2"], "in (0, 1], got -0.2"),
    Case("k nan", {"data.jsonl": jsonl(GOOD)}, ["--methods", "min_k", "--param", "min_k.k=nan"], "in (0, 1], got nan"),
    Case("slope ngram out of range", {"data.jsonl": jsonl(GOOD)}, ["--methods", "slope", "--param", "slope.ngram=9"], "slope.ngram must be an integer in [0, 5]"),
    Case("slope normalize unknown", {"data.jsonl": jsonl(GOOD)}, ["--methods", "slope", "--param", "slope.normalize=bogus"], "bogus"),
    # -- options, output, cache, model --------------------------------------------------
    Case("batch size 0", {"data.jsonl": jsonl(GOOD)}, ["--batch-size", "0"], "argument --batch-size: expected auto or an integer >= 1, got 0"),
    Case("batch size not a number", {"data.jsonl": jsonl(GOOD)}, ["--batch-size", "8x"], "argument --batch-size: expected auto or an integer >= 1, got '8x'"),
    Case("concurrency 0", {"data.jsonl": jsonl(GOOD)}, ["--concurrency", "0"], "argument --concurrency: must be an integer >= 1, got 0"),
    Case("negative bootstrap", {"data.jsonl": jsonl(GOOD)}, ["--bootstrap", "-5"], "argument --bootstrap: must be an integer in [0, 10000]"),
    Case("seed not an integer", {"data.jsonl": jsonl(GOOD)}, ["--seed", "one"], "argument --seed: expected an integer in [0, 4294967295]"),
    Case("negative seed", {"data.jsonl": jsonl(GOOD)}, ["--seed", "-1"], "argument --seed: must be an integer in [0, 4294967295], got -1"),
    Case("seed 2^32", {"data.jsonl": jsonl(GOOD)}, ["--seed", str(2**32)], "argument --seed: must be an integer in [0, 4294967295]"),
    Case("seed with 5000 digits", {"data.jsonl": jsonl(GOOD)}, ["--seed", "9" * 5000], "argument --seed: expected an integer"),
    Case("negative --param seed", {"data.jsonl": jsonl(GOOD)}, ["--methods", "neighborhood", "--param", "neighborhood.seed=-3"], "neighborhood.seed must be an integer in [0, 4294967295], got -3"),
    Case("device mps (no Apple GPU, and scoring does not use it)", {"data.jsonl": jsonl(GOOD)}, ["--device", "mps"], "argument --device: is 'mps', which scoring cannot use"),
    Case("device cuda:7", {"data.jsonl": jsonl(GOOD)}, ["--device", "cuda:7"], "argument --device: is 'cuda:7', but"),
    Case("device unknown", {"data.jsonl": jsonl(GOOD)}, ["--device", "gpu0"], "argument --device: must be one of auto, cpu, cuda, cuda:N, got 'gpu0'"),
    Case("openai url with an unclosed IPv6 bracket", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@http://[::1/v1", "--methods", "prefix_probe"], "Invalid IPv6 URL"),
    Case("openai url port not a number", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@http://127.0.0.1:80a/v1", "--methods", "prefix_probe"], "has port '80a', which must be an integer in [1, 65535]"),
    Case("openai url port out of range", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@http://127.0.0.1:99999/v1", "--methods", "prefix_probe"], "has port '99999'"),
    Case("openai url with a password", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@http://me:hunter2@127.0.0.1:8080/v1", "--methods", "prefix_probe"], "holds a user name or password"),
    Case("openai url with a space", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@http://127.0.0.1:8080/v 1", "--methods", "prefix_probe"], "without spaces"),
    Case("unwritable output dir", {"data.jsonl": jsonl(GOOD), "blocker": b"a file"}, ["--out", "{tmp}/blocker/run"], "cannot write to output directory"),
    Case("output dir is a file", {"data.jsonl": jsonl(GOOD), "taken": b"a file"}, ["--out", "{tmp}/taken"], "cannot write to output directory"),
    Case("corrupt cache file", {"data.jsonl": jsonl(GOOD), "bad.sqlite": b"this is not a database" * 100}, ["--cache", "{tmp}/bad.sqlite"], "corrupt"),
    Case("sqlite file of another program as cache", {"data.jsonl": jsonl(GOOD), "o": _foreign_sqlite}, ["--cache", "{tmp}/other.sqlite"], "not a copyprobe response cache"),
    Case("truncated cache file", {"data.jsonl": jsonl(GOOD), "h": _truncated_cache}, ["--cache", "{tmp}/half.sqlite"], "half.sqlite is unreadable or corrupt"),
    Case("cache path is a directory", {"data.jsonl": jsonl(GOOD), "cachedir": _mkdir("cachedir")}, ["--cache", "{tmp}/cachedir"], "is a directory"),
    Case("cache under a file", {"data.jsonl": jsonl(GOOD), "blocker": b"a file"}, ["--cache", "{tmp}/blocker/c.sqlite"], "cannot create cache directory"),
    Case("unknown model spec", {"data.jsonl": jsonl(GOOD)}, ["--model", "smollm3-135m"], "unknown model spec"),
    Case("bad openai url", {"data.jsonl": jsonl(GOOD)}, ["--model", "openai:m@ftp://127.0.0.1/v1", "--methods", "prefix_probe"], "bad base URL"),
    Case("model fails mid-run", {"data.jsonl": jsonl(make_passages(80, seed=4, words=12))}, ["--model", "fake-crash"], "out of memory"),
]


class CrashingFake(FakeBackend):
    """Answers 40 requests, then fails like a model running out of memory."""

    def answer(self, requests, progress=None, on_result=None):
        from copyprobe.errors import BackendError

        self.answered = getattr(self, "answered", 0)
        out = []
        for request in requests:
            if self.answered == 40:
                raise BackendError("out of memory on cpu at batch size 8: lower --batch-size")
            (response,) = super().answer([request], progress)
            self.answered += 1
            out.append(response)
            if on_result is not None:  # streamed: the cache stores it at once
                on_result(len(out) - 1, response)
        return out


def fake_loader(spec, **kwargs):
    if spec == "fake-crash":
        return CrashingFake(spec="fake")  # the same model as "fake", so its cache entries serve it
    if spec.startswith("fake"):
        return FakeBackend(spec=spec)
    from copyprobe.backends import specs

    return specs.__dict__["_real_load_backend"](spec, **kwargs)


@pytest.fixture
def fake_model(monkeypatch):
    from copyprobe.backends import specs

    monkeypatch.setitem(specs.__dict__, "_real_load_backend", specs.load_backend)
    monkeypatch.setattr(specs, "load_backend", fake_loader)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache that already holds work (of an earlier run); every failure must keep it."""
    root = tmp_path_factory.mktemp("warm")
    data = root / "data.jsonl"
    data.write_bytes(jsonl(make_passages(80, seed=2, words=12)))
    import copyprobe

    copyprobe.detect(FakeBackend(spec="fake"), str(data), ["loss", "lowercase"], cache=root / "cache.sqlite")
    db = sqlite3.connect(root / "cache.sqlite")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything into the main file, to copy it
    db.close()
    n = assert_cache_entries_decode(root / "cache.sqlite")
    assert n == 160
    return root / "cache.sqlite", n


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_has_at_least_30_cases():
    assert len(CASES) >= 30 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, tmp_path, capsys, fake_model, warm_cache):
    cache_src, n_cached = warm_cache
    for rel, content in case.files.items():
        if callable(content):
            content(tmp_path)
        else:
            (tmp_path / rel).write_bytes(content)
    cache = tmp_path / "cache.sqlite"
    shutil.copy(cache_src, cache)
    args = {"--model": "fake", "--data": str(tmp_path / case.data), "--out": str(tmp_path / "run"),
            "--methods": "loss,lowercase", "--cache": str(cache)}
    extra = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    passthrough = []
    i = 0
    while i < len(extra):  # a case's option replaces the default one, others are added
        if extra[i] in args and i + 1 < len(extra):
            args[extra[i]] = extra[i + 1]
            i += 2
        else:
            passthrough.append(extra[i])
            i += 1
    argv = ["detect", "--no-progress", "--bootstrap", "50", *passthrough]
    for key, value in args.items():
        argv += [key, value]

    code, out, err = run_cli(argv, capsys)
    assert "Traceback" not in err and "Traceback" not in out
    if case.expect:
        lines = [l for l in err.splitlines() if l.strip()]
        assert code == 2, (code, err)
        message = lines[-1]
        if message.startswith("copyprobe: error:"):
            assert len(lines) == 1, err  # our own errors are exactly one line
        else:  # argparse: usage line(s) then one error line
            assert "error:" in message
        assert case.expect.lower() in message.lower(), message
    else:
        assert code == 0, err
        case.check(tmp_path)
    # the work already in the cache is kept, entry for entry, and decodes
    if case.name != "corrupt cache file":
        assert assert_cache_entries_decode(cache) >= n_cached


def test_failure_mid_run_keeps_the_work_done_before_it(tmp_path, capsys, fake_model):
    """A model error after 40 answers: exit 2, one line, and every answer given before the
    error is in the cache, so the rerun starts from them."""
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(make_passages(80, seed=2, words=12)))
    cache = tmp_path / "cache.sqlite"
    code, _, err = run_cli(["detect", "--model", "fake-crash", "--data", str(data), "--out", str(tmp_path / "run"),
                            "--methods", "loss", "--cache", str(cache), "--no-progress"], capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "out of memory" in err
    assert assert_cache_entries_decode(cache) == 40  # each answer was stored as it finished
    code, _, err = run_cli(["detect", "--model", "fake", "--data", str(data), "--out", str(tmp_path / "run"),
                            "--methods", "loss", "--cache", str(cache), "--no-progress"], capsys)
    assert code == 0, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["cache"]["hits"] == 40 and run["cache"]["misses"] == 40


# -- the real model ------------------------------------------------------------------------

def _corrupt_gguf_truncated(tmp: Path) -> None:
    from copyprobe.backends.specs import alias_path

    raw = alias_path("smollm2-135m-instruct").read_bytes()[:4096]
    (tmp / "truncated.gguf").write_bytes(raw)


MODEL_CASES = [
    Case("missing model file", {"data.jsonl": jsonl(GOOD)}, ["--model", "gguf:{tmp}/missing.gguf"], "not found"),
    Case("corrupt gguf (not gguf)", {"data.jsonl": jsonl(GOOD), "bad.gguf": b"NOTGGUF" + bytes(4000)}, ["--model", "gguf:{tmp}/bad.gguf"], "not a valid GGUF file"),
    Case("corrupt gguf (truncated)", {"data.jsonl": jsonl(GOOD), "t": _corrupt_gguf_truncated}, ["--model", "gguf:{tmp}/truncated.gguf"], "truncated.gguf"),
]


@pytest.mark.model
@pytest.mark.parametrize("case", MODEL_CASES, ids=[c.name for c in MODEL_CASES])
def test_bad_model_files(case: Case, tmp_path, capsys):
    for rel, content in case.files.items():
        if callable(content):
            content(tmp_path)
        else:
            (tmp_path / rel).write_bytes(content)
    model = case.args[1].replace("{tmp}", str(tmp_path))
    code, out, err = run_cli(["detect", "--model", model, "--data", str(tmp_path / "data.jsonl"), "--out",
                              str(tmp_path / "run"), "--methods", "loss", "--no-cache", "--no-progress",
                              "--device", "cpu"], capsys)
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    # one error line, last; an informational line before it (e.g. "converting X.gguf") is fine
    errors = [l for l in lines if "error" in l.lower()]
    assert code == 2 and errors == [lines[-1]] and lines[-1].startswith("copyprobe: error:"), err
    assert case.expect.lower() in lines[-1].lower(), lines[-1]


@pytest.mark.model
def test_text_longer_than_the_context_is_scored(tmp_path, capsys):
    """A passage far longer than the model's window gets a score (sliding window), or an
    explicit per-row error -- never a traceback or a silent null."""
    # ~3,080 tokens: SmolLM2's windows of 2,048 at a stride of 1,024 make a first window, a
    # middle one and a last, partial one
    long_text = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 220)
    rows = [{"id": "long", "text": long_text, "label": 1}, {"id": "short", "text": "A short passage of text.", "label": 0}]
    (tmp_path / "data.jsonl").write_bytes(jsonl(rows))
    code, out, err = run_cli(["detect", "--model", "smollm2-135m-instruct", "--data", str(tmp_path / "data.jsonl"),
                              "--out", str(tmp_path / "run"), "--methods", "loss,min_k", "--no-cache",
                              "--no-progress", "--device", "cpu", "--bootstrap", "20"], capsys)
    assert code == 0 and "Traceback" not in err, err
    scored = {r["id"]: r for r in map(json.loads, (tmp_path / "run" / "scores.jsonl").read_text().splitlines())}
    for name in ("loss", "min_k"):
        value = scored["long"][name]
        assert value is not None or scored["long"]["errors"][name]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["n_tokens"] > 3000  # every token of the long text was scored, not a truncated prefix


@pytest.mark.parametrize("argv, says", [
    (["detect", "--model", "fake", "--data", "", "--methods", "loss"], "the data path is empty (''"),
    (["audit", "--model", "fake", "--suspect", "", "--clean", "c", "--method", "loss"], "the suspect path is empty"),
    (["audit", "--model", "fake", "--suspect", "s", "--clean", " ", "--method", "loss"], "the clean path is empty (' '"),
    # both unset: before, "suspect and clean are the same file" (two empty paths resolve alike)
    (["audit", "--model", "fake", "--suspect", "", "--clean", "", "--method", "loss"], "the suspect path is empty"),
    (["canary", "make", "--doc", "", "--out", "kit"], "the document's path is empty"),
    (["canary", "find", "kit", ""], "the searched file's path is empty"),
])
def test_an_empty_path_is_refused_not_read_as_the_working_folder(argv, says, tmp_path, capsys, fake_model,
                                                                  monkeypatch):
    """``--data "$DATA"`` with the variable unset read whatever the working folder held (a
    verdict about its files); Path('') is '.'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("A note in the working folder, no data of the user's. " * 20)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "book.txt").write_text("The lamp keeper climbed the stair. " * 40)
    if argv[:2] == ["canary", "find"]:
        assert main(["canary", "make", "--doc", "notes.txt", "--out", "kit"]) == 0
        capsys.readouterr()
    code, _, err = run_cli([*argv, *(["--out", "run", "--no-cache"] if argv[0] in ("detect", "audit") else [])],
                           capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, says", [
    (["rescore", "nope"], "nope does not exist (give the run directory"),  # was "is not a directory"
    (["rescore", ""], "the run directory's path is empty"),
    (["report", "run", "--out", ""], "the report's path is empty"),  # was "cannot write the report to .: a directory"
    (["audit", "--model", "fake", "--suspect", "s", "--clean", "s2", "--method", "loss,zlib", "--out", "a"],
     "an audit tests one method, got 'loss,zlib'"),  # was "unknown method 'loss,zlib'; did you mean 'zlib'?"
])
def test_messages_say_what_is_wrong_with_the_path_or_the_method(argv, says, tmp_path, capsys, fake_model,
                                                               monkeypatch):
    from copyprobe.reports.sample import write_sample_run

    monkeypatch.chdir(tmp_path)
    write_sample_run(tmp_path / "run", failures=False)
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "run" / "report.html").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("argv, says", [
    # a named pipe as data, document or searched file waited for a writer, for ever
    (["detect", "--model", "fake", "--data", "pipe.jsonl", "--methods", "loss", "--out", "run", "--no-cache"],
     "cannot read the data pipe.jsonl: it is a named pipe, not a file or folder"),
    (["audit", "--model", "fake", "--suspect", "pipe.txt", "--clean", "s", "--method", "loss", "--out", "run",
      "--no-cache"], "cannot read the data pipe.txt: it is a named pipe"),
    (["canary", "make", "--doc", "pipe.txt", "--out", "kit2"], "cannot read the document to mark pipe.txt: it is a "
                                                                "named pipe"),
    (["canary", "find", "kit", "pipe.txt"], "cannot read the file to search pipe.txt: it is a named pipe"),
    # was "cannot write to output directory ...: File exists"
    (["detect", "--model", "fake", "--data", "s", "--methods", "loss", "--out", "pipe.txt", "--no-cache"],
     "cannot write to output directory pipe.txt: it is a named pipe, not a directory"),
    (["detect", "--model", "fake", "--data", "s", "--methods", "loss", "--out", "notes.txt", "--no-cache"],
     "cannot write to output directory notes.txt: it is a file, not a directory"),
    (["detect", "--model", "fake", "--data", "s", "--methods", "loss", "--out", os.devnull, "--no-cache"],
     f"cannot write to output directory {os.devnull}: it is a device, not a directory"),
    # was SQLite's "disk I/O error"
    (["detect", "--model", "fake", "--data", "s", "--methods", "loss", "--out", "run", "--cache", "pipe.txt"],
     "cache path pipe.txt is a named pipe, not a file"),
])
def test_a_named_pipe_or_device_is_refused_not_waited_on(argv, says, tmp_path, capsys, fake_model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("A note in the working folder, no data of the user's. " * 20)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "book.txt").write_text("The lamp keeper climbed the stair. " * 40)
    os.mkfifo(tmp_path / "pipe.jsonl")
    os.mkfifo(tmp_path / "pipe.txt")
    if argv[:2] == ["canary", "find"]:
        assert main(["canary", "make", "--doc", "notes.txt", "--out", "kit"]) == 0
        capsys.readouterr()
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "kit2").exists()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("texts", [["😀 😃", "😄 😁", "😆 😀", "😃 😄"], ["!! ??", "?? !!", "... ;;", ";; ..."],
                                   ["שלום עולם", "😀 ́ ‍", "Привет мир", "‍ ‍"]])
def test_text_without_words_scores_and_rescores(texts, tmp_path, capsys, fake_model):
    """Rows of emoji or punctuation only ended detect (and rescore) in scikit-learn's 'empty
    vocabulary' traceback from the blind baseline, after the scoring."""
    data = tmp_path / "quiet.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 2}, ensure_ascii=False) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    code, _, err = run_cli(["detect", "--model", "fake", "--data", str(data), "--methods", "loss,zlib",
                            "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"], capsys)
    assert code == 0 and "Traceback" not in err, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["blind_baseline"]["signal"] is False
    assert run_cli(["rescore", str(tmp_path / "run")], capsys)[0] == 0
