"""CLI options that only some backends take reach them, and only them."""

import json

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main


@pytest.fixture
def captured(monkeypatch):
    calls = []

    def loader(spec, **kwargs):
        calls.append((spec, kwargs))
        return FakeBackend(spec=spec)

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", loader)
    return calls


def data_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "text": f"some words here number {i}", "label": i % 2}) + "\n" for i in range(6)))
    return path


def test_api_options_go_to_openai_models_only(tmp_path, captured):
    args = ["detect", "--data", str(data_file(tmp_path)), "--methods", "loss,reference",
            "--param", "reference.model=gemma-3-270m", "--no-cache", "--no-progress", "--bootstrap", "0",
            "--api-key-env", "MY_PROVIDER_KEY", "--concurrency", "3"]
    assert main([*args, "--model", "openai:some-model@http://127.0.0.1:9/v1", "--out", str(tmp_path / "a")]) == 0
    options = dict(captured)
    assert options["openai:some-model@http://127.0.0.1:9/v1"]["api_key_env"] == "MY_PROVIDER_KEY"
    assert options["openai:some-model@http://127.0.0.1:9/v1"]["concurrency"] == 3
    assert "api_key_env" not in options["gemma-3-270m"]


def test_bad_concurrency_is_a_one_line_error(tmp_path, captured, capsys):
    try:  # checked where the option is declared: argparse's usage line, then one error line
        code = main(["detect", "--model", "openai:m@http://127.0.0.1:9/v1", "--data", str(data_file(tmp_path)),
                     "--methods", "loss", "--out", str(tmp_path / "a"), "--concurrency", "0", "--no-cache"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert "argument --concurrency: must be an integer >= 1, got 0" in capsys.readouterr().err


def test_batch_size_is_auto_by_default_or_a_positive_integer(tmp_path, captured, capsys):
    common = ["detect", "--model", "m", "--data", str(data_file(tmp_path)), "--methods", "loss", "--no-cache",
              "--no-progress", "--bootstrap", "0"]
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--batch-size", "16"]) == 0
    assert main([*common, "--out", str(tmp_path / "c"), "--batch-size", "Auto"]) == 0
    assert [kwargs["batch_size"] for _, kwargs in captured] == ["auto", 16, "auto"]
    for bad, shown in (("0", "0"), ("-2", "-2"), ("1.5", "'1.5'"), ("lots", "'lots'")):
        try:
            code = main([*common, "--out", str(tmp_path / "d"), "--batch-size", bad])
        except SystemExit as exc:
            code = exc.code
        assert code == 2
        err = capsys.readouterr().err
        assert f"argument --batch-size: expected auto or an integer >= 1, got {shown}" in err
        assert len([line for line in err.splitlines() if "error" in line]) == 1


@pytest.mark.parametrize("argv, prog, extra", [
    (["methods", "loss"], "copyprobe methods", "loss"),
    (["datasets", "extra"], "copyprobe datasets", "extra"),
    (["canary", "make", "--doc", "d", "--out", "o", "--bogus", "1"], "copyprobe canary make", "--bogus 1"),
    (["freq", "build", "--tokenizer", "t", "--corpus", "c", "--out", "o", "--bogus"], "copyprobe freq build", "--bogus"),
    (["--bogus"], "copyprobe", "--bogus"),
    (["--bogus", "methods"], "copyprobe", "--bogus"),  # given before the command: the program's
    (["canary", "--bogus", "make", "--doc", "d", "--out", "o"], "copyprobe canary", "--bogus"),
    (["methods", "methods"], "copyprobe methods", "methods"),
])
def test_an_unrecognized_argument_is_named_by_the_command_it_was_given_to(capsys, argv, prog, extra):
    """Before, every unrecognized argument pointed to `copyprobe --help`, which does not list
    a command's options."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{prog}: error: unrecognized arguments: {extra} (see {prog} --help)"
