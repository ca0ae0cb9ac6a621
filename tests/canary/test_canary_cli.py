"""`copyprobe canary make` and `canary test` end to end on the fake backend."""

from __future__ import annotations

import json

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.canary.kit import MANIFEST
from copyprobe.cli.main import main
from copyprobe.record import load_run

DOC = ("It was a bright cold day in April. The clocks were striking thirteen! Winston hurried home.\n\n"
       "A new paragraph begins here. It has two sentences. And a third one, at the end.\n")


@pytest.fixture
def kit(tmp_path, capsys):
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    code = main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "30",
                 "--n-canaries", "2", "--style", "words", "--seed", "cli"])
    out = capsys.readouterr().out
    assert code == 0
    assert "PUBLISH" in out and "KEEP PRIVATE" in out and "manifest.json" in out
    assert "KEEP the document as it was before marking" in out
    return tmp_path / "kit"


def _patch(monkeypatch, backend):
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: backend)


def test_canary_test_on_a_model_that_saw_the_document(kit, tmp_path, monkeypatch, capsys):
    manifest = json.loads((kit / MANIFEST).read_text())
    published = [c["candidates"][c["published"]] for c in manifest["canaries"]]
    _patch(monkeypatch, FakeBackend(spec="saw-it", member_texts=published, boost=6.0))
    run_dir = tmp_path / "run"
    code = main(["canary", "test", "--model", "saw-it", "--kit", str(kit), "--out", str(run_dir), "--no-cache",
                 "--no-progress", "--report"])
    out = capsys.readouterr().out
    assert code == 0
    assert "canary 0: rank" in out and "combined: sum of ranks" in out
    assert "If the model never saw this document, the chance of a result at least this extreme" in out
    run = load_run(run_dir)
    assert run.record.kind == "canary" and run.record.canary["method"] == "loss"
    assert len(run.scores) == 60 and run.canary["test"] == "sum_of_ranks"
    # the rank in canary.json is the published one's place among its candidates' scores
    for c, item in zip(run.canary["canaries"], manifest["canaries"]):
        scores = [r["loss"] for r in run.scores if r["doc_id"] == f"canary-{c['index']}"]
        pub = scores[item["published"]]
        assert c["rank"] == 1 + sum(s >= pub for j, s in enumerate(scores) if j != item["published"])
        assert c["p_value"] == c["rank"] / 30
    assert run.canary["combined"]["sum_of_ranks"] == sum(c["rank"] for c in run.canary["canaries"])
    assert "seed" not in json.dumps(run.record.canary)  # the run does not copy the private seed
    html = (run_dir / "report.html").read_text()
    assert 'id="canary"' in html and "at most p =" in html


def test_canary_test_with_another_method_and_param(kit, tmp_path, monkeypatch, capsys):
    _patch(monkeypatch, FakeBackend(spec="never"))
    code = main(["canary", "test", "--model", "never", "--kit", str(kit), "--out", str(tmp_path / "r"), "--no-cache",
                 "--no-progress", "--method", "min_k", "--param", "min_k.k=0.5", "--alpha", "0.01"])
    assert code == 0
    summary = json.loads((tmp_path / "r" / "canary.json").read_text())
    assert summary["method"] == "min_k" and summary["alpha"] == 0.01
    assert load_run(tmp_path / "r").record.methods["min_k"]["k"] == 0.5


@pytest.mark.parametrize("damage", ["manifest", "document", "altered"])
def test_bad_kits_exit_2_with_one_line(kit, tmp_path, monkeypatch, capsys, damage):
    backend = FakeBackend(spec="never")
    _patch(monkeypatch, backend)
    if damage == "manifest":
        (kit / MANIFEST).unlink()
    elif damage == "document":
        (kit / "publish" / "book.txt").write_text(DOC)
    else:
        data = json.loads((kit / MANIFEST).read_text())
        data["canaries"][1]["candidates"][0] = "something else entirely"
        (kit / MANIFEST).write_text(json.dumps(data))
    code = main(["canary", "test", "--model", "never", "--kit", str(kit), "--out", str(tmp_path / "r"),
                 "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("copyprobe: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not backend.calls  # refused before any model work


def test_a_kit_that_cannot_reach_alpha_is_refused_before_the_model_loads(kit, tmp_path, monkeypatch, capsys):
    """2 canaries of 30 candidates give at best p = 1/900 = 0.00111: at alpha 0.001 every
    test is 'cannot tell' whatever the scores, so nothing is scored (it was, then said so)."""
    def refuse(spec, **options):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", refuse)
    code = main(["canary", "test", "--model", "never", "--kit", str(kit), "--alpha", "0.001",
                 "--out", str(tmp_path / "r"), "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "smallest possible p-value is 0.00111, above alpha 0.001" in err and "nothing was scored" in err
    assert not (tmp_path / "r").exists()  # refused before the run directory was made
    _patch(monkeypatch, FakeBackend(spec="never"))  # at 0.002 the kit can answer: it runs
    assert main(["canary", "test", "--model", "never", "--kit", str(kit), "--alpha", "0.002",
                 "--out", str(tmp_path / "r2"), "--no-cache", "--no-progress"]) == 0


@pytest.mark.parametrize("method, why", [
    ("feature_agg", "cannot score canaries: it learns from labelled passages, and a kit's candidates have no labels"),
    ("recall", "cannot score canaries as set: it draws labelled passages from the data for its prefix, and a kit's "
               "candidates have no labels; give it a prefix file instead"),
    # the kit's candidates are 12 words; the probe continues 32
    ("prefix_probe", "cannot score this kit's candidates, so nothing was scored: prefix_probe: passage has 12 words"),
])
def test_a_method_that_cannot_score_canaries_is_refused_before_the_model_loads(kit, tmp_path, monkeypatch, capsys,
                                                                                method, why):
    """Before: prefix_probe sent all 60 candidates to the model, then failed on the
    published canary's missing score; feature_agg and recall said what the data lacked in
    detect's words (train on 50, lower n_prefix), not that a kit has no labels."""
    def refuse(spec, **options):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", refuse)
    code = main(["canary", "test", "--model", "never", "--kit", str(kit), "--method", method,
                 "--out", str(tmp_path / "r"), "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"copyprobe: error: method {method!r} {why}"), err
    assert not (tmp_path / "r").exists()


def test_scores_too_coarse_to_rank_the_canary_say_so_on_the_console(kit, tmp_path, monkeypatch, capsys):
    """name_cloze scores 0 or 1; the fake model fills in no masked word, so every candidate
    scores 0 and each published canary ties with all 29 of its held-out candidates."""
    _patch(monkeypatch, FakeBackend(spec="never"))
    code = main(["canary", "test", "--model", "never", "--kit", str(kit), "--method", "name_cloze",
                 "--out", str(tmp_path / "r"), "--no-cache", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    run = load_run(tmp_path / "r")
    published = {c["index"]: c["published"] for c in json.loads((kit / MANIFEST).read_text())["canaries"]}
    scores = {r["id"]: r["name_cloze"] for r in run.scores}
    ties = sum(scores[f"c{k}:{j}"] == scores[f"c{k}:{p}"] for k, p in published.items() for j in range(30) if j != p)
    assert ties == 58
    assert (f"verdict: cannot tell — {ties} of the 58 held-out candidates tie with the published canaries by "
            "name_cloze, whose scores are too coarse to rank them") in out
    assert "not significant only because of ties" in out


def test_a_model_that_cannot_load_leaves_no_run_directory(kit, tmp_path, capsys):
    """The kit passes and the run directory is made; the model is refused when the run
    opens it: the directory, still empty, goes again (a second run finds nothing in the way)."""
    code = main(["canary", "test", "--model", "no-such-model", "--kit", str(kit), "--out", str(tmp_path / "runs" / "r"),
                 "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unknown model spec 'no-such-model'" in err, err
    assert not (tmp_path / "runs").exists()


def test_make_refuses_bad_input_with_exit_2(tmp_path, capsys):
    assert main(["canary", "make", "--doc", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "k")]) == 2
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    assert main(["canary", "make", "--doc", str(empty), "--out", str(tmp_path / "k")]) == 2
    assert main(["canary", "make", "--doc", str(empty), "--out", str(tmp_path / "k"), "--n-candidates", "1"]) == 2
    assert "must be an integer in [2, 100000], got 1" in capsys.readouterr().err


@pytest.mark.parametrize("seed, says", [
    ("hex:zz", "seed 'hex:zz' is not hex: followed by whole bytes in hexadecimal"),
    ("hex:abc", "seed 'hex:abc' is not hex:"),  # half a byte
    ("hex:", "seed 'hex:' is not hex:"),
    ("", "the seed is empty; leave it out for 32 random bytes"),
    ("   ", "the seed is empty"),
])
def test_make_refuses_a_bad_seed_in_one_line_before_reading_the_document(tmp_path, capsys, seed, says):
    """Before: hex:zz and hex:abc were a ValueError traceback, and an empty seed made a kit
    whose held-out candidates anyone could draw again."""
    code = main(["canary", "make", "--doc", str(tmp_path / "not-read.txt"), "--out", str(tmp_path / "k"),
                 "--seed", seed])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err and "Traceback" not in err
    assert not (tmp_path / "k").exists()


def test_make_names_a_document_it_cannot_read(tmp_path, capsys):
    binary = tmp_path / "scan.txt"
    binary.write_bytes(b"\xb9\x00\xff text")
    assert main(["canary", "make", "--doc", str(binary), "--out", str(tmp_path / "k")]) == 2
    assert f"{binary} is not UTF-8 text (byte 0xb9 at position 0)" in capsys.readouterr().err
    assert main(["canary", "make", "--doc", str(tmp_path), "--out", str(tmp_path / "k")]) == 2
    assert f"{tmp_path} is a directory; give the one document to mark" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["--n-candidates", "100000001"], "argument --n-candidates: must be an integer in [2, 100000], got 100000001"),
    (["--n-canaries", "1001"], "argument --n-canaries: must be an integer in [1, 1000], got 1001"),
    (["--repeat", "1001"], "argument --repeat: must be an integer in [1, 1000], got 1001"),
    (["--n-words", "501"], "argument --n-words: must be an integer in [1, 500], got 501"),
    (["--n-candidates", "9" * 400], "argument --n-candidates: expected an integer in [2, 100000], got '999"),
    (["--n-candidates", "100000", "--style", "words", "--n-words", "101"], "draw 10,100,000 words; at most 10,000,000"),
    (["--n-candidates", "1000", "--n-canaries", "401", "--style", "trap"], "draw 10,025,000 words"),
    (["--n-candidates", "100000", "--n-canaries", "7"], "7 canaries of 100,000 candidates of 16 words"),
])
def test_make_refuses_a_kit_too_large_to_draw_before_drawing(tmp_path, capsys, args, says):
    doc = tmp_path / "doc.txt"
    doc.write_text("A plain paragraph of prose that could hold a canary or two. " * 40)
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "k"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err
    assert not (tmp_path / "k").exists()


def test_make_interrupted_says_no_kit_was_made(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("copyprobe.canary.kit.make_kit", interrupted)
    doc = tmp_path / "doc.txt"
    doc.write_text("Some prose. " * 50)
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "k")]) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("copyprobe: interrupted; no kit was made") and "cache" not in err


@pytest.mark.model
def test_make_and_test_on_smollm2_offline(tmp_path, capsys):
    """The two commands on the bundled smollm2, loaded by the CLI itself (no network)."""
    from copyprobe.backends.specs import alias_path
    from copyprobe.errors import BackendError

    try:
        alias_path("smollm2-135m-instruct")
    except BackendError as exc:
        pytest.skip(str(exc))
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "8",
                 "--seed", "smol"]) == 0
    code = main(["canary", "test", "--model", "smollm2-135m-instruct", "--kit", str(tmp_path / "kit"),
                 "--alpha", "0.2",  # one canary of 8 gives p >= 1/8: a smaller alpha is refused
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--device", "cpu", "--dtype", "float32"])
    assert code == 0
    summary = json.loads((tmp_path / "run" / "canary.json").read_text())
    assert 1 <= summary["canaries"][0]["rank"] <= 8 and summary["p_value"] == summary["canaries"][0]["rank"] / 8
    assert all(r["loss"] is not None for r in load_run(tmp_path / "run").scores)


def test_a_kit_given_by_a_relative_path_is_found_by_a_rescore_from_another_folder(kit, tmp_path, monkeypatch, capsys):
    """run.json kept the kit as given ('kit'), so a rescore from elsewhere looked for it
    there and said the kit had moved."""
    _patch(monkeypatch, FakeBackend(spec="m"))
    monkeypatch.chdir(tmp_path)
    assert main(["canary", "test", "--model", "m", "--kit", "kit", "--out", "run", "--no-cache", "--no-progress"]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["canary"]["kit"] == str(kit) and run["canary"]["document"].startswith(str(tmp_path) + "/")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["rescore", str(tmp_path / "run")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_find_names_a_utf16_file_as_such(kit, tmp_path, capsys, encoding):
    """canary find said "is not UTF-8 text (byte 0)" where the other readers name UTF-16."""
    page = tmp_path / "page.txt"
    page.write_bytes("A page that quotes the book, saved by Notepad.\n".encode(encoding))
    assert main(["canary", "find", str(kit), str(page)]) == 2
    err = capsys.readouterr().err
    assert f"{page} is UTF-16 encoded; save it as UTF-8" in err and len(err.strip().splitlines()) == 1


def test_the_private_manifest_is_readable_by_its_owner_alone(kit):
    """Files took the umask's mode (0o644 here) once they stopped being mkstemp's 0o600:
    the manifest names the held-out candidates and the seed, which void the test if known."""
    import os
    import stat

    assert stat.S_IMODE(os.stat(kit / MANIFEST).st_mode) == 0o600
    assert stat.S_IMODE(os.stat((kit / MANIFEST).parent).st_mode) == 0o700
    published = next((kit / "publish").iterdir())
    assert stat.S_IMODE(os.stat(published).st_mode) & 0o044 == 0o044 & ~os.umask(os.umask(0))  # to publish


def test_a_kit_made_on_the_command_line_verifies_there(kit, tmp_path, capsys):
    """make, then verify with the document make was given, as its last lines say to keep it."""
    assert main(["canary", "verify", str(kit), "--source", str(tmp_path / "book.txt")]) == 0
    assert "the kit is what its seed draws" in capsys.readouterr().out


@pytest.mark.parametrize("seed, weak", [
    ("5", "it is a number someone can count up to"),
    ("hex:00", "it holds 1 byte, fewer than 16"),
    ("harbour", "it is 7 characters of text"),
    ("hex:" + "ab" * 16, None),
    ("a long passphrase of many words, 40 chars", None),
    (None, None),
])
def test_make_warns_of_a_seed_that_can_be_guessed(tmp_path, capsys, seed, weak):
    """docs/canary.md asks for a seed as hard to guess as 128 bits; a small number or a
    word is found within minutes by trying seeds against the marked document."""
    from copyprobe.canary.generate import weak_seed

    assert weak_seed(seed) == weak
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    code = main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "k"), "--n-candidates", "5",
                 *(["--seed", seed] if seed is not None else [])])
    err = capsys.readouterr().err
    assert code == 0 and (f"WARNING: the seed can be guessed ({weak})" in err if weak else "WARNING" not in err)
