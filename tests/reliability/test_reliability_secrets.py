"""Secrets: the API key comes from the environment only and never reaches the cache, the
run directory, the report, any other file the run writes, or the process output --
including the error message when the server rejects the key (the fake server echoes a
wrong key back in its 401 body, as OpenAI's "Incorrect API key provided" does).

The CLI runs as a real subprocess with HOME, the cache dir and the temp dir inside the
test's directory, so every file it could write is scanned.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from rel_util import cli_cmd, env, make_passages, run, write_jsonl

SECRET = "sk-copyprobe-CANARY-7f3a9c1e5b2d4086-do-not-leak"
WRONG = "sk-copyprobe-WRONG-KEY-1b9e77c04d2a55f3"


def sandbox_env(root: Path, key: str) -> dict[str, str]:
    for name in ("home", "cachedir", "tmp"):
        (root / name).mkdir(exist_ok=True)
    return env(OPENAI_API_KEY=key, HOME=str(root / "home"), COPYPROBE_CACHE_DIR=str(root / "cachedir"),
               XDG_CACHE_HOME=str(root / "home" / ".cache"), TMPDIR=str(root / "tmp"))


def files_holding(root: Path, needles: list[str], min_files: int = 5) -> list[str]:
    hits = []
    scanned = 0
    for path in sorted(root.rglob("*")):
        if path.is_file():
            scanned += 1
            data = path.read_bytes()
            for needle in needles:
                if needle.encode() in data or needle.encode("utf-16-le") in data:
                    hits.append(f"{path.relative_to(root)} holds {needle[:14]}...")
    assert scanned >= min_files, "too little was written: the scan would prove nothing"
    return hits


def fragments(key: str) -> list[str]:
    """The key and its distinctive middle (a truncated or partly masked echo leaks too)."""
    return [key, key[8:30]]


def test_api_key_is_in_no_file_and_no_output(tmp_path, fake_openai):
    rows = make_passages(6, seed=21, words=60)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(corpus=[r["text"] for r in rows if r["label"] == 1], api_key=SECRET)
    want_report = importlib.util.find_spec("copyprobe.reports.html") is not None
    args = ["detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
            "--methods", "prefix_probe,decop", "--param", "decop.mode=blackbox",
            "--out", str(tmp_path / "run"), "--bootstrap", "20", "--no-progress"]
    if want_report:
        args.append("--report")
    result = run(cli_cmd(*args), env=sandbox_env(tmp_path, SECRET))
    assert result.returncode == 0, result.stderr
    # the key was used: the server accepts nothing else, and it got every request
    assert len(server.log) >= 6 * (1 + 24) and all(r["path"].endswith("completions") for r in server.log)
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["model"]["api_key_env"] == "OPENAI_API_KEY" and run_json["model"]["api_key_set"] is True
    assert not run_json["failures"]
    # the default cache (COPYPROBE_CACHE_DIR) was written, WAL included, and is scanned too
    assert list((tmp_path / "cachedir").glob("responses.sqlite*"))
    if want_report:
        assert (tmp_path / "run" / "report.html").is_file()
    assert files_holding(tmp_path, fragments(SECRET)) == []
    for stream in (result.stdout, result.stderr):
        assert not any(f in stream for f in fragments(SECRET))


def test_a_key_the_server_echoes_in_its_answers_is_in_no_file(tmp_path, fake_openai):
    """A server (or a proxy) that writes the request's Authorization header into the text it
    generates: the answer is cached, scored and reported without it."""
    rows = make_passages(4, seed=23, words=60)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(api_key=SECRET)
    plain = server.answer

    def echoing(path, body):
        out = plain(path, body)
        for choice in out["choices"]:
            if "text" in choice:
                choice["text"] = f"Sure! your Bearer {SECRET} and {SECRET[8:30]}... " + choice["text"]
        return out

    server.answer_fn = echoing
    result = run(cli_cmd("detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
                         "--methods", "prefix_probe", "--out", str(tmp_path / "run"), "--bootstrap", "20",
                         "--no-progress", "--report"),
                 env=sandbox_env(tmp_path, SECRET))
    assert result.returncode == 0, result.stderr
    scores = (tmp_path / "run" / "scores.jsonl").read_text()
    assert "Sure! your Bearer ***" in scores  # the answer was kept, less the key
    assert files_holding(tmp_path, fragments(SECRET)) == []
    for stream in (result.stdout, result.stderr):
        assert not any(f in stream for f in fragments(SECRET))


def test_rejected_key_is_not_echoed(tmp_path, fake_openai):
    rows = make_passages(4, seed=22, words=60)
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    server = fake_openai(api_key=SECRET)
    result = run(cli_cmd("detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
                         "--methods", "prefix_probe", "--out", str(tmp_path / "run"), "--no-progress"),
                 env=sandbox_env(tmp_path, WRONG))
    assert result.returncode == 2, result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "401" in lines[0] and "Traceback" not in result.stderr, result.stderr
    # the server did echo the wrong key (to the look for it before work, GET /models, which
    # goes on, and to the first request); the client did not pass it on
    assert server.gets == ["/v1/models"] and any(r["path"].endswith("completions") for r in server.log)
    for stream in (result.stdout, result.stderr):
        assert not any(f in stream for f in fragments(WRONG) + fragments(SECRET))
    assert list((tmp_path / "cachedir").glob("responses.sqlite*"))
    assert files_holding(tmp_path, fragments(WRONG), min_files=2) == []


# -- a property over generated keys ----------------------------------------------------------

import os  # noqa: E402
import string  # noqa: E402

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# (no NUL: an environment variable cannot hold one; test_key_refusals covers it directly)
DECORATIONS = st.sampled_from(["", "", "\n", "\r\n", " ", "\t", "\u00a0", "\u2028", "\u3000", "\x01", "\x7f", "é",
                               "\U0001f511", "\ufeff", "\x0b"])
CORE = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=20, max_size=40).map(lambda t: "sk-" + t)


@st.composite
def api_keys(draw) -> str:
    core = draw(CORE)
    cut = draw(st.integers(4, len(core) - 4))
    return draw(DECORATIONS) + core[:cut] + draw(DECORATIONS) + core[cut:] + draw(DECORATIONS)


def key_forms(key: str) -> list[str]:
    """The key and every stripped form of it a client could send or a file could hold:
    itself, stripped, without any whitespace, its whitespace-separated parts (10+ chars),
    each also JSON-escaped (how run.json / scores.jsonl would spell it)."""
    forms = {key, key.strip(), "".join(key.split()), *(p for p in key.split() if len(p) >= 10)}
    forms |= {json.dumps(f)[1:-1] for f in forms}
    forms |= {json.dumps(f, ensure_ascii=False)[1:-1] for f in forms}
    return sorted(f for f in forms if len(f) >= 10)


def _sendable(key: str) -> bool:
    return all(0x21 <= ord(c) <= 0x7E for c in key)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(key=api_keys())
def test_no_output_file_holds_any_form_of_a_generated_key(tmp_path_factory, capsys, key):
    """Keys with whitespace, newlines, control or non-ASCII characters are refused with one
    line that does not repeat them; usable keys are sent and reach no file: run.json,
    scores.jsonl, the cache (and its WAL), the report, the process output."""
    from fake_openai import FakeOpenAIServer

    from copyprobe.cli.main import main

    root = tmp_path_factory.mktemp("key")
    rows = make_passages(4, seed=23, words=40)
    data = write_jsonl(root / "data.jsonl", rows)
    server = FakeOpenAIServer(api_key=key)
    saved = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = key
    try:
        code = main(["detect", "--model", f"openai:tiny-model@{server.base_url}", "--data", str(data),
                     "--methods", "prefix_probe", "--out", str(root / "run"), "--cache", str(root / "cache.sqlite"),
                     "--bootstrap", "5", "--no-progress", "--report"])
    finally:
        server.close()
        if saved is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = saved
    out, err = capsys.readouterr()
    forms = key_forms(key)
    if _sendable(key):
        assert code == 0, err
        assert server.log and (root / "run" / "report.html").is_file()
        assert files_holding(root, forms, min_files=5) == []
    else:
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "the API key in $OPENAI_API_KEY contains" in lines[0], err
        assert not server.log  # refused before anything was sent
        assert files_holding(root, forms, min_files=1) == []
    for stream in (out, err):
        assert not any(f in stream for f in forms)


@pytest.mark.parametrize("key, words", [
    ("sk-abcdefghijklmnop\n", "a newline at its end"), ("\tsk-abcdefghijklmnop", "a tab at its start"),
    ("sk-abcdefgh ijklmnop", "a space at character 12 of 20"), ("sk-abcdefgh\x00ijkl", "U+0000 at character 12"),
    ("sk-abcdéfgh", "U+00E9"), ("sk-abcdefgh\u2028", "whitespace U+2028"),
])
def test_key_refusals(key, words):
    from copyprobe.backends.openai_compat import _checked_key
    from copyprobe.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        _checked_key(key, "MY_KEY")
    message = str(info.value)
    assert words in message and "$MY_KEY" in message and "\n" not in message
    assert not any(f in message for f in key_forms(key)) and "abcdefgh" not in message


def test_scrub_removes_every_form_and_long_fragments():
    from copyprobe.backends.openai_compat import scrub_key

    key = "sk-proj-Zq8/x+Y2=abcDEF1234567890"
    text = (f"a {key} b {key.replace('/', chr(92) + '/')} c "
            f"{__import__('urllib.parse').parse.quote(key, safe='')} d sk-proj-Zq8...7890 e DEF12345 f DEF1234")
    scrubbed = scrub_key(text, key)
    assert scrubbed.count("***") >= 5 and "DEF1234 " not in scrubbed.replace("DEF1234567890", "")
    for piece in (key, "abcDEF12", "DEF12345", "x+Y2=abc"):
        assert piece not in scrubbed
    assert scrubbed.endswith("f DEF1234")  # 7 characters: too short to be told from other text
