"""Every file of a run directory is read through one validating loader: a hand-edited
or foreign file is one line naming the file and the field, exit code 2, for rescore,
report and canary test; an untouched run still rescores to the same bytes."""

from __future__ import annotations

import json
import shutil

import pytest

import copyprobe
from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.record import DERIVED_FILES

HUGE = 10 ** 400  # json reads it back as an int that no float holds
FOREIGN = {"name": "left-pad", "version": "1.3.0", "dependencies": {}}  # a package.json
FOREIGN_LINE = {"level": "info", "msg": "server started", "time": "2026-01-01T00:00:00Z"}  # a log line


def _rows(n=16):
    return [{"id": f"p{i}", "text": " ".join(f"w{(i * 5 + j) % 30}" for j in range(20)), "label": i % 2,
             "doc_id": f"d{i % 4}"} for i in range(n)]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One run directory of each kind that rescore reads, written by today's code on the fake backend."""
    root = tmp_path_factory.mktemp("runs")
    rows = _rows()
    fake = FakeBackend(spec="fake", member_texts=[r["text"] for r in rows if r["label"] == 1])
    copyprobe.detect(fake, _write(root / "data.jsonl", rows), ["loss", "zlib"], out=root / "detect",
                     cache=False, n_bootstrap=50, seed=1, command=["copyprobe", "detect"])
    copyprobe.audit(fake, _write(root / "suspect.jsonl", rows[1::2]), _write(root / "clean.jsonl", rows[::2]),
                    "loss", alpha=0.2, out=root / "audit", cache=False, command=["copyprobe", "audit"])

    from copyprobe.copying import CopyConfig
    from copyprobe.copying.nonliteral import BackendJudge
    from copyprobe.copying.runner import copying

    echo = FakeBackend(generate_fn=lambda request: "In the beginning God created the heaven and the earth.")
    copying(echo, "kjv", CopyConfig(tasks=("literal", "qa"), judge=BackendJudge(None), literal_max_tokens=30),
            out=root / "copying", cache=False, command=["copyprobe", "copying"])

    from copyprobe.canary.kit import make_kit
    from copyprobe.canary.scoring import canary_test

    (root / "doc.txt").write_text("It was a bright cold day in April. The clocks were striking thirteen.\n")
    make_kit(root / "doc.txt", root / "kit", n_candidates=20, style="words", seed="t")  # p can reach 0.05
    canary_test(fake, root / "kit", "loss", out=root / "canary", cache=False, command=["copyprobe", "canary"])
    return root


def _damage(run_dir, name, at, how):
    """Rewrite ``name`` in ``run_dir``: the value at key path ``at`` (a row number first in
    JSON lines; [] = the whole file or row) made into a list, a string, a 400-digit
    number, the number 5 or -1, removed, or replaced by another tool's JSON. A key the
    file lacks is added with the damaged value (of "x")."""
    path = run_dir / name
    lines = name.endswith(".jsonl")
    data = [json.loads(line) for line in path.read_text().splitlines()] if lines else json.loads(path.read_text())
    if how == "foreign":
        data = [FOREIGN_LINE] * 3 if lines else FOREIGN
    else:
        *parents, last = [None, *at]
        root = holder = {None: data}
        for key in parents:
            holder = holder[key]
        value = holder.get(last, "x") if isinstance(holder, dict) and how != "missing" else holder[last]
        if how == "missing":
            del holder[last]
        else:
            holder[last] = {"list": lambda v: [v], "string": lambda v: str(v), "huge": lambda v: HUGE,
                            "number": lambda v: 5, "negative": lambda v: -1}[how](value)
        data = root[None]
    path.write_text("".join(json.dumps(r) + "\n" for r in data) if lines else json.dumps(data))


# (kind, file, key path, damage): each a field that a reader relies on
CASES = [
    ("detect", "run.json", [], "list"),
    ("detect", "run.json", ["bootstrap"], "list"),
    ("detect", "run.json", ["bootstrap", "n"], "string"),
    ("detect", "run.json", ["bootstrap", "n"], "huge"),
    ("detect", "run.json", ["bootstrap", "seed"], "negative"),  # numpy's traceback before
    ("detect", "run.json", ["seed"], "negative"),
    ("detect", "run.json", ["kind"], "missing"),
    ("detect", "run.json", [], "foreign"),
    ("detect", "scores.jsonl", [0], "list"),
    ("detect", "scores.jsonl", [0, "loss"], "string"),
    ("detect", "scores.jsonl", [0, "loss"], "huge"),
    ("detect", "scores.jsonl", [0, "id"], "missing"),
    ("detect", "scores.jsonl", [3, "zlib"], "missing"),
    ("detect", "scores.jsonl", [], "foreign"),
    ("detect", "examples.jsonl", [2, "label"], "string"),
    ("detect", "examples.jsonl", [2, "text"], "missing"),
    ("detect", "examples.jsonl", [], "foreign"),
    ("detect", "metrics.json", [], "list"),
    ("detect", "metrics.json", ["passage"], "list"),
    ("detect", "metrics.json", ["passage", "loss", "auc"], "string"),
    ("detect", "metrics.json", ["passage", "loss", "auc"], "huge"),
    ("detect", "metrics.json", [], "foreign"),
    ("audit", "run.json", ["audit"], "list"),
    ("audit", "run.json", ["audit", "alpha"], "string"),
    ("audit", "run.json", ["audit", "method"], "missing"),
    ("audit", "verdicts.json", [], "list"),
    ("audit", "verdicts.json", ["documents"], "string"),
    ("audit", "verdicts.json", ["alpha"], "huge"),
    ("audit", "verdicts.json", ["documents", 0, "doc_id"], "missing"),
    ("audit", "verdicts.json", [], "foreign"),
    ("copying", "run.json", ["copying"], "list"),
    ("copying", "run.json", ["copying", "literal_threshold"], "string"),
    ("copying", "run.json", ["copying", "tasks"], "missing"),
    ("copying", "results.jsonl", [0], "list"),
    ("copying", "results.jsonl", [0, "rouge_l"], "string"),
    ("copying", "results.jsonl", [0, "rouge_l"], "huge"),
    ("copying", "results.jsonl", [0, "error"], "missing"),
    ("copying", "results.jsonl", [], "foreign"),
    ("copying", "metrics.json", ["literal"], "list"),
    ("copying", "metrics.json", ["literal", "rate"], "string"),
    ("canary", "canary.json", [], "list"),
    ("canary", "canary.json", ["canaries"], "string"),
    ("canary", "canary.json", ["canaries", 0, "rank"], "string"),
    ("canary", "canary.json", ["p_value"], "huge"),
    ("canary", "canary.json", ["method"], "missing"),
    ("canary", "canary.json", [], "foreign"),
    ("canary", "scores.jsonl", [4, "loss"], "huge"),
    # the sweep beyond the fields above: every file, each field a reader or the report uses
    ("detect", "run.json", ["methods"], "list"),
    ("detect", "run.json", ["methods", "loss"], "string"),
    ("detect", "run.json", ["created"], "missing"),
    ("detect", "run.json", ["format_version"], "huge"),
    ("detect", "run.json", ["format_version"], "string"),
    ("detect", "run.json", ["n_passages"], "string"),
    ("detect", "run.json", ["timings"], "list"),
    ("detect", "run.json", ["model"], "list"),
    ("detect", "run.json", ["command"], "string"),
    ("detect", "run.json", ["notes"], "string"),
    ("detect", "scores.jsonl", [0, "label"], "string"),
    ("detect", "scores.jsonl", [0, "label"], "number"),
    ("detect", "scores.jsonl", [0, "doc_id"], "list"),
    ("detect", "scores.jsonl", [0, "errors"], "list"),
    ("detect", "scores.jsonl", [0, "details"], "list"),
    ("detect", "scores.jsonl", [0, "train"], "string"),
    ("detect", "scores.jsonl", [0, "id"], "list"),
    ("detect", "examples.jsonl", [0], "list"),
    ("detect", "examples.jsonl", [0, "id"], "missing"),
    ("detect", "examples.jsonl", [0, "doc_id"], "huge"),
    ("detect", "metrics.json", ["passage"], "missing"),
    ("detect", "metrics.json", ["document"], "list"),
    ("detect", "metrics.json", ["blind_baseline"], "list"),
    ("detect", "metrics.json", ["notes"], "string"),
    ("detect", "metrics.json", ["passage", "loss"], "list"),
    ("detect", "metrics.json", ["passage", "loss", "n"], "huge"),
    ("audit", "run.json", ["audit", "test"], "list"),
    ("audit", "run.json", ["audit", "test"], "number"),
    ("audit", "run.json", ["audit", "input_files"], "string"),
    ("audit", "verdicts.json", ["documents", 0], "list"),
    ("audit", "verdicts.json", ["documents", 0, "rank"], "string"),
    ("audit", "verdicts.json", ["documents", 0, "score"], "string"),
    ("audit", "verdicts.json", ["documents", 0, "score"], "huge"),
    ("audit", "verdicts.json", ["documents", 0, "verdict"], "list"),
    ("audit", "verdicts.json", ["documents", 0, "style"], "list"),
    ("audit", "verdicts.json", ["test"], "list"),
    ("audit", "verdicts.json", ["guard"], "string"),
    ("audit", "verdicts.json", ["baseline"], "list"),
    ("audit", "verdicts.json", ["collection"], "list"),
    ("audit", "verdicts.json", ["format"], "string"),
    ("audit", "metrics.json", [], "foreign"),
    ("copying", "run.json", [], "list"),
    ("copying", "run.json", [], "foreign"),
    ("copying", "run.json", ["copying", "tasks"], "string"),
    ("copying", "results.jsonl", [0, "task"], "list"),
    ("copying", "results.jsonl", [0, "id"], "missing"),
    ("copying", "metrics.json", [], "list"),
    ("copying", "metrics.json", ["literal", "rate"], "huge"),
    ("copying", "metrics.json", [], "foreign"),
    ("canary", "canary.json", ["canaries", 0, "n_candidates"], "huge"),
    ("canary", "canary.json", ["canaries", 0, "n_candidates"], "string"),
    ("canary", "canary.json", ["canaries", 0, "n_candidates"], "missing"),
    ("canary", "canary.json", ["canaries", 0, "n_candidates"], "negative"),
    ("canary", "canary.json", ["canaries", 0, "index"], "negative"),
    ("canary", "canary.json", ["canaries", 0, "index"], "missing"),
    ("canary", "canary.json", ["canaries", 0], "list"),
    ("canary", "canary.json", ["canaries", 0, "published_score"], "string"),
    ("canary", "canary.json", ["alpha"], "string"),
    ("canary", "canary.json", ["combined"], "list"),
    ("canary", "canary.json", ["combined", "sum_of_ranks_p"], "huge"),
    ("canary", "canary.json", ["kit"], "list"),
    ("canary", "canary.json", ["reason"], "list"),
    ("canary", "canary.json", ["verdict"], "list"),
    ("canary", "run.json", ["canary"], "list"),
    ("canary", "run.json", ["kind"], "number"),
    ("canary", "scores.jsonl", [0, "id"], "missing"),
    ("canary", "scores.jsonl", [], "foreign"),
    ("canary", "examples.jsonl", [], "foreign"),
]
# the report shows runs with scores; rescore reads every kind (and refuses canary runs by name)
COMMANDS = {"detect": ("rescore", "report"), "audit": ("rescore", "report"), "copying": ("rescore", "report"),
            "canary": ("rescore", "report")}


def _one_line_error(capsys, *names):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("copyprobe: error: "), err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kind,name,at,how", CASES, ids=["-".join(map(str, [k, n, *a, h])) for k, n, a, h in CASES])
def test_damaged_run_file_is_one_line_and_exit_2(runs, tmp_path, capsys, kind, name, at, how):
    run_dir = tmp_path / kind
    shutil.copytree(runs / kind, run_dir)
    _damage(run_dir, name, at, how)
    for command in COMMANDS[kind]:
        if command == "rescore" and name in DERIVED_FILES:
            continue  # rescore writes these anew: test_rescore_repairs_a_damaged_derived_file
        assert main([command, str(run_dir)]) == 2
        field = str(at[-1]) if at and how != "foreign" and not isinstance(at[-1], int) else ""
        line = _one_line_error(capsys, name, field)
        if how == "huge":
            assert "float range" in line


@pytest.mark.parametrize("kind,name", [("detect", "metrics.json"), ("audit", "metrics.json"),
                                       ("audit", "verdicts.json"), ("copying", "metrics.json")])
def test_rescore_repairs_a_damaged_derived_file(runs, tmp_path, kind, name):
    run_dir = tmp_path / kind
    shutil.copytree(runs / kind, run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    (run_dir / name).write_text('{"cut short": [1')
    assert main(["report", str(run_dir)]) == 2  # the report reads what is there
    assert main(["rescore", str(run_dir)]) == 0
    (run_dir / "report.html").unlink(missing_ok=True)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


@pytest.mark.parametrize("kind, edit, says", [
    ("detect", lambda lines: [], "no row for"),
    ("detect", lambda lines: lines[1:], "no row for 1 of"),
    ("detect", lambda lines: lines + lines[:1], "has two rows (lines 1 and"),
    ("audit", lambda lines: lines[:-1], "no row for 1 of"),
    ("audit", lambda lines: lines + [json.dumps({**json.loads(lines[0]), "id": "stray"})], "'stray' is not in"),
])
def test_scores_that_do_not_match_the_passages_are_refused_and_nothing_is_rewritten(runs, tmp_path, capsys,
                                                                                     kind, edit, says):
    run_dir = tmp_path / kind
    shutil.copytree(runs / kind, run_dir)
    scores = run_dir / "scores.jsonl"
    scores.write_text("".join(line + "\n" for line in edit(scores.read_text().splitlines())))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    for command in ("rescore", "report"):
        assert main([command, str(run_dir)]) == 2
        _one_line_error(capsys, "scores.jsonl", says)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before  # metrics.json kept, nothing written


@pytest.mark.parametrize("kind", ["detect", "audit"])
def test_without_examples_the_scores_are_counted_against_run_json(runs, tmp_path, capsys, kind):
    """With examples.jsonl gone, a report drew a page of the rows left (5 of 10 passages, or
    0 of an emptied file) with exit 0; the rows are now counted against run.json's
    n_passages, and a run that only lost examples.jsonl still reports."""
    run_dir = tmp_path / kind
    shutil.copytree(runs / kind, run_dir)
    (run_dir / "examples.jsonl").unlink()
    assert main(["report", str(run_dir)]) == 0
    scores = run_dir / "scores.jsonl"
    lines = scores.read_text().splitlines()
    expected = json.loads((run_dir / "run.json").read_text())["n_passages"]
    assert expected == len(lines)
    for kept in (lines[:-1], []):
        scores.write_text("".join(line + "\n" for line in kept))
        assert main(["report", str(run_dir), "--out", str(tmp_path / f"{kind}-{len(kept)}.html")]) == 2
        _one_line_error(capsys, "scores.jsonl", f"has {len(kept)} row{'s' if len(kept) != 1 else ''} where run.json "
                                                f"counts {expected} passages")
        assert not (tmp_path / f"{kind}-{len(kept)}.html").exists()


@pytest.mark.parametrize("kind", ["detect", "audit", "copying"])
def test_untouched_runs_rescore_to_the_same_bytes(runs, tmp_path, kind):
    run_dir = tmp_path / kind
    shutil.copytree(runs / kind, run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert main(["rescore", str(run_dir)]) == 0
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_canary_runs_still_load_and_report(runs, tmp_path):
    run_dir = tmp_path / "canary"
    shutil.copytree(runs / "canary", run_dir)
    assert copyprobe.load_run(run_dir).canary["method"] == "loss"
    assert main(["report", str(run_dir)]) == 0


# hand edits of a kit manifest that keep its checksum right (recomputed): the reader checks
# the shape too, so each is one line, never an OverflowError or TypeError further down
KIT_EDITS = {
    "published-infinite": lambda m: m["canaries"][0].update(published=float("inf")),
    "position-huge": lambda m: m["canaries"][0].update(positions=[HUGE]),
    "position-negative": lambda m: m["canaries"][0].update(positions=[-3]),
    "document-file-number": lambda m: m["document"].update(file=7),
    "document-list": lambda m: m.update(document=[1]),
    "canaries-object": lambda m: m.update(canaries={"0": 1}),
    "candidates-string": lambda m: m["canaries"][0].update(candidates="abc"),
    "style-list": lambda m: m.update(style=["words"]),
    "repeat-string": lambda m: m.update(repeat="1"),
    "repeat-missing": lambda m: m.pop("repeat"),
    "n_candidates-huge": lambda m: m.update(n_candidates=HUGE),
}


@pytest.mark.parametrize("edit", list(KIT_EDITS))
def test_hand_edited_kit_manifest_with_a_valid_checksum(runs, tmp_path, monkeypatch, capsys, edit):
    from copyprobe.canary.kit import MANIFEST, _checksum

    kit = tmp_path / "kit"
    shutil.copytree(runs / "kit", kit)
    manifest = json.loads((kit / MANIFEST).read_text())
    KIT_EDITS[edit](manifest)
    manifest["checksum"] = _checksum(manifest)
    (kit / MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **o: FakeBackend(spec="fake"))
    code = main(["canary", "test", "--model", "fake", "--kit", str(kit), "--out", str(tmp_path / "run"),
                 "--no-cache", "--no-progress"])
    assert code == 2
    _one_line_error(capsys, "manifest.json")
    assert not (tmp_path / "run" / "canary.json").exists()


@pytest.mark.parametrize("content", [[1, 2], FOREIGN, {"format": "copyprobe-canary-kit"}, "not json"],
                         ids=["list", "foreign", "missing-keys", "not-json"])
def test_canary_test_with_a_damaged_manifest(runs, tmp_path, monkeypatch, capsys, content):
    from copyprobe.canary.kit import MANIFEST

    kit = tmp_path / "kit"
    shutil.copytree(runs / "kit", kit)
    (kit / MANIFEST).write_text(content if isinstance(content, str) else json.dumps(content))
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **o: FakeBackend(spec="fake"))
    code = main(["canary", "test", "--model", "fake", "--kit", str(kit), "--out", str(tmp_path / "run"),
                 "--no-cache", "--no-progress"])
    assert code == 2
    _one_line_error(capsys, "manifest.json")
