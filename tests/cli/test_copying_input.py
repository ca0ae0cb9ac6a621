"""`copyprobe copying`: options that would have no effect, ids that are not scalars, and
setting errors in the words the user typed, all refused in one line before any model loads."""

from __future__ import annotations

import json

import pytest

from copyprobe.cli.main import main

# a model that cannot load: a run that gets past the up-front checks ends with this error
NO_MODEL = "hf:/nonexistent-copyprobe-model"
NO_MODEL_ERROR = "model directory not found"


def _copying(tmp_path, *extra: str) -> list[str]:
    return ["copying", "--model", NO_MODEL, "--data", "kjv", "--out", str(tmp_path / "run"), "--no-cache",
            "--no-progress", *extra]


def _book(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"word{i}" for i in range(600)), encoding="utf-8")
    return str(book)


@pytest.mark.parametrize("extra, says", [
    (["--no-baseline", "--clean", "mine.txt"], "--clean has no effect: the clean text is read only for the baseline, "
                                               "and --no-baseline turns it off"),
    (["--no-baseline", "--bootstrap", "50"], "--bootstrap has no effect: the resamples are drawn only for the "
                                             "baseline, and --no-baseline turns it off"),
    (["--tasks", "qa", "--clean", "mine.txt"], "--clean has no effect: the baseline scores literal copying, and "
                                               "literal is not among --tasks (qa)"),
    (["--tasks", "qa", "--no-baseline"], "--no-baseline has no effect: the baseline scores literal copying"),
    (["--memfree-n", "5"], "--memfree-n has no effect: it sets MemFree decoding, and --mitigation is none"),
    (["--mitigation", "system_prompt", "--memfree-index", "bloom"],
     "--memfree-index has no effect: it sets MemFree decoding, and --mitigation is system_prompt"),
    (["--tasks", "literal,literal"], "--tasks names literal twice: the second has no effect; give each task once"),
    (["--tasks", "qa,literal,qa"], "--tasks names qa twice"),
    (["--templates", "1,1"], "names template 1 twice: the second has no effect"),  # generated, then "damaged"
    (["--tasks", "literal", "--story-tokens", "64"], "--story-tokens has no effect: nonliteral is not among --tasks "
                                                     "(literal)"),
    (["--tasks", "literal,qa", "--judge", "target"], "--judge has no effect: nonliteral is not among --tasks"),
    (["--tasks", "literal", "--event-threshold", "2"], "--event-threshold has no effect"),
    (["--tasks", "literal", "--character-threshold", "2"], "--character-threshold has no effect"),
    (["--tasks", "literal", "--embedding-threshold", "0.5"], "--embedding-threshold has no effect: nonliteral is not"),
    (["--tasks", "nonliteral", "--judge", "target", "--embedding-threshold", "0.5"],
     "--embedding-threshold has no effect: --judge is target, not embedding"),
    (["--tasks", "literal,qa", "--fluency-judge", "hf:/judge"], "--fluency-judge has no effect: fluency is not among "
                                                               "--tasks (literal,qa)"),
    (["--tasks", "qa", "--threshold", "0.5"], "--threshold has no effect: literal is not among --tasks (qa)"),
    (["--tasks", "qa", "--literal-tokens", "20"], "--literal-tokens has no effect: literal is not among --tasks (qa)"),
    (["--tasks", "qa", "--templates", "1"], "--templates has no effect: templates are the prompts of literal and "
                                            "nonliteral, and neither is among --tasks (qa)"),
    (["--prefix-words", "100"], "--prefix-words has no effect: it cuts a book into items, and --data kjv is not a "
                                "book file"),
    (["--reference-words", "20"], "--reference-words has no effect: it cuts a book into items"),
])
def test_an_option_without_effect_is_refused_before_any_model_loads(tmp_path, capsys, extra, says):
    assert main(_copying(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert NO_MODEL_ERROR not in err  # refused before the model was asked for
    assert not (tmp_path / "run").exists()  # nothing written


def test_book_options_are_refused_when_the_book_gives_no_task_they_shape(tmp_path, capsys):
    assert main(_copying(tmp_path, "--tasks", "qa", "--prefix-words", "100") + ["--data", _book(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--prefix-words has no effect: a book gives literal items only, and literal is not among --tasks (qa)" \
        in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("extra", [
    ["--mitigation", "memfree", "--memfree-n", "5", "--memfree-index", "bloom"],
    ["--memfree-n", "10", "--memfree-index", "set"],  # the defaults, written out: nothing changes
    ["--tasks", "literal", "--clean", "BOOK", "--bootstrap", "50", "--threshold", "0.5", "--literal-tokens", "20"],
    ["--tasks", "nonliteral", "--judge", "embedding", "--embedding-threshold", "0.5", "--story-tokens", "64",
     "--event-threshold", "2", "--character-threshold", "2"],
    ["--tasks", "literal,fluency", "--fluency-judge", "hf:/judge", "--templates", "1"],
    ["--tasks", "qa", "--judge", "embedding", "--threshold", "0.8"],
    ["--tasks", "qa", "--judge", "", "--fluency-judge", ""],  # "" means the default judge: nothing given
    ["--no-baseline", "--bootstrap", "0"],  # no resamples, as the run without the baseline draws anyway
    ["--tasks", "qa", "--bootstrap", "0"],
    ["--tasks", "literal", "--prefix-words", "100", "--reference-words", "20", "--data", "BOOK"],
])
def test_options_that_shape_the_run_pass_the_check(tmp_path, capsys, extra):
    extra = [_book(tmp_path) if item == "BOOK" else item for item in extra]
    assert main(_copying(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert NO_MODEL_ERROR in err and "no effect" not in err, err


def test_a_demonstration_for_a_task_not_asked_is_refused(tmp_path, capsys):
    demos = tmp_path / "demos.json"
    demos.write_text(json.dumps({"literal": [{"input": "a", "output": "b"}], "qa": [{"input": "q?", "output": "a"}]}))
    assert main(_copying(tmp_path, "--tasks", "literal", "--demos", str(demos))) == 2
    err = capsys.readouterr().err
    assert f"--demos {demos} has qa demonstrations, which have no effect: qa is not among --tasks (literal)" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["0", "-5"])
def test_literal_tokens_error_names_the_option_not_the_library_keyword(tmp_path, capsys, value):
    assert main(_copying(tmp_path, "--literal-tokens", value)) == 2
    err = capsys.readouterr().err
    assert f"argument --literal-tokens: must be an integer >= 1, got {value}" in err, err
    assert "max_tokens" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name, content, says", [
    ("d.json", [{"id": {"a": 1}, "input": "x y", "reference": "z"}],
     'd.json row 0: the id is an object ({"a": 1}); an id must be text or a number'),
    ("d.jsonl", "\n" + json.dumps({"id": "ok", "input": "x", "reference": "y"}) + "\n\n"
     + json.dumps({"id": [1, 2], "input": "x", "reference": "y"}) + "\n",
     "d.jsonl line 4: the id is a list ([1, 2]); an id must be text or a number"),
    ("b.json", {"qa": [{"id": "q", "input": "Who?", "reference": "Noah"},
                       {"id": {"nested": [1]}, "input": "What?", "reference": "ark"}]},
     "b.json: 'qa' row 1: the id is an object"),
])
def test_an_id_that_is_not_a_scalar_is_one_line_naming_file_and_row(tmp_path, capsys, name, content, says):
    data = tmp_path / name
    data.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    args = _copying(tmp_path, "--tasks", "qa" if name == "b.json" else "literal")
    args[args.index("--data") + 1] = str(data)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert "{'" not in err  # no Python repr of the id


@pytest.mark.parametrize("title, says", [
    ({"a": 1}, 'd.json row 1: the title is an object ({"a": 1}); a title must be text or a number'),
    (["B", "C"], 'd.json row 1: the title is a list (["B", "C"]); a title must be text or a number'),
])
def test_a_title_that_is_not_a_scalar_is_one_line_naming_file_and_row(tmp_path, capsys, title, says):
    data = tmp_path / "d.json"
    data.write_text(json.dumps([{"id": "a", "title": "B", "input": "x y", "reference": "z"},
                                {"id": "b", "title": title, "input": "x y", "reference": "z"}]), encoding="utf-8")
    args = _copying(tmp_path, "--tasks", "literal")
    args[args.index("--data") + 1] = str(data)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert "{'" not in err and "['" not in err  # no Python repr of the title
    assert not (tmp_path / "run").exists()
