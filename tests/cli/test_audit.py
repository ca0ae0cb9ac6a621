"""copyprobe audit: verdict arithmetic against scipy, and the command end to end with a
fake model that knows the suspect documents."""

from __future__ import annotations

import json

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.errors import ConfigError


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


SYLLABLES = "ka lo mi nu pe ra si to vu we ba de fi go hu ja ke li mo na".split()


def pseudo_text(rng, words=30):
    """Words of one made-up language: every document has the same style, none shares words."""
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(words))


def test_audit_command_end_to_end(tmp_path, monkeypatch, capsys):
    """Two documents the fake model knows and one it does not, against 40 clean documents
    of the same made-up style: evidence for the known ones, none for the other."""
    import random

    rng = random.Random(4)
    suspect = [{"id": f"{d}-{p}", "text": pseudo_text(rng), "doc_id": d}
               for d in ("famous0", "famous1", "fresh") for p in range(2)]
    clean = [{"id": f"c{k}-{p}", "text": pseudo_text(rng), "doc_id": f"clean{k}"} for k in range(40) for p in range(2)]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    fake = FakeBackend(spec="fake-audit", member_texts=[r["text"] for r in suspect if r["doc_id"] != "fresh"])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    out = tmp_path / "run"
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "loss", "--test", "rank",
                 "--alpha", "0.1", "--out", str(out), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    report = json.loads((out / "verdicts.json").read_text())
    rows = {r["doc_id"]: r for r in report["documents"]}
    assert set(rows) == {"famous0", "famous1", "fresh"}
    # the smallest p a document can get after Holm's adjustment over 3 suspects: 3/41
    assert report["test"]["n_clean_documents"] == 40 and report["test"]["min_p"] == pytest.approx(3 / 41)
    for name in ("famous0", "famous1"):
        assert rows[name]["rank"] == 1 and rows[name]["p"] == pytest.approx(1 / 41)
        assert rows[name]["verdict"] == "evidence", rows[name]["reason"]
    assert rows["fresh"]["verdict"] == "no evidence"
    run = json.loads((out / "run.json").read_text())
    files = run["audit"]["input_files"]
    assert files["suspect"][0]["bytes"] == (tmp_path / "suspect.jsonl").stat().st_size
    assert len(files["clean"][0]["sha256"]) == 64
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == report["summary"]
    assert printed.startswith("Of 3 suspect documents, 2 with evidence, 1 without, 0 cannot tell")


def test_audit_notes_the_rows_each_side_skipped(tmp_path, monkeypatch, capsys):
    """Rows with no text are left out of an audit as of detect, and the note says on which
    side and where the first one is, so the row can be found."""
    import random

    rng = random.Random(5)
    suspect = [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": "book"} for p in range(2)]
    suspect.insert(1, {"id": "gap", "text": "  ", "doc_id": "book"})
    clean = [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"clean{k}"} for k in range(20)]
    clean[3:3] = [{"id": "n1", "text": None, "doc_id": "x"}, {"id": "n2", "text": "", "doc_id": "x"}]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec="f"))
    out = tmp_path / "run"
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "loss", "--test", "rank",
                 "--alpha", "0.1", "--out", str(out), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    printed = capsys.readouterr().out
    assert f"suspect {tmp_path / 'suspect.jsonl'}: 1 row with empty or no text was skipped (the first: line 2)" \
        in printed
    assert f"clean {tmp_path / 'clean.jsonl'}: 2 rows with empty or no text were skipped (the first: line 4)" \
        in printed
    data = json.loads((out / "run.json").read_text())["data"]
    assert data["n_skipped"] == 3
    assert data["skipped"]["suspect"]["first_skipped"] == "line 2"
    assert data["skipped"]["clean"] == {"n_skipped": 2, "first_skipped": "line 4",
                                        "path": str(tmp_path / "clean.jsonl")}


def test_audit_default_method_is_chosen_by_access(tmp_path, monkeypatch, capsys):
    import random

    rng = random.Random(2)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": "book"} for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"c{k}"} for k in range(4)])
    fake = FakeBackend(spec="fake-audit")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean", str(tmp_path / "c.jsonl"),
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0",
                 "--param", "reference.model=fake", "--test", "rank", "--alpha", "0.25"])
    assert code == 0, capsys.readouterr().err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    from copyprobe.audit import DEFAULT_LOGIT_METHOD

    assert run["audit"]["method"] == DEFAULT_LOGIT_METHOD and run["audit"]["test"] == "rank"
    chose = [n for n in run["notes"] if n.startswith("method auto ->")]
    assert len(chose) == 1 and run["notes"][0] == chose[0]  # said once, first
    capsys.readouterr()
    # alpha 0.01, rank test, 4 clean documents: the answer is fixed, said before any scoring
    # the same model again (the spec the first run recorded, as a real loader records the one named)
    code = main(["audit", "--model", "fake-audit", "--suspect", str(tmp_path / "s.jsonl"), "--clean",
                 str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "run"), "--no-cache", "--no-progress",
                 "--bootstrap", "0", "--param", "reference.model=fake", "--test", "rank"])
    assert code == 2 and "Give at least 99 clean documents" in capsys.readouterr().err

    # a model that does not score text: top-k log-probs of generations, else generations alone
    from copyprobe.audit import DEFAULT_GENERATION_METHOD

    # passages long enough for prefix probing (a 32-word prefix and a continuation)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng, 60), "doc_id": "book"} for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng, 60), "doc_id": f"c{k}"} for k in range(4)])
    # top-k log-probs do not change the choice: topk_loss failed the null battery's bar
    for name, capabilities, want in (("topk", {"generate", "top_logprobs"}, DEFAULT_GENERATION_METHOD),
                                     ("generate", {"generate"}, DEFAULT_GENERATION_METHOD)):
        backend = FakeBackend(spec=f"fake-{name}", capabilities=capabilities)
        monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: backend)
        code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"),
                     "--clean", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / f"run-{name}"), "--no-cache",
                     "--no-progress", "--bootstrap", "0"])
        assert code == 0, capsys.readouterr().err
        run = json.loads((tmp_path / f"run-{name}" / "run.json").read_text())
        assert run["audit"]["method"] == want
        assert run["notes"][0].startswith(f"method auto -> {want}: ")
        verdicts = json.loads((tmp_path / f"run-{name}" / "verdicts.json").read_text())
        assert verdicts["method"] == want and [d["n_used"] for d in verdicts["documents"]] == [1]
        if want == "prefix_probe":  # run with the similarity the exposure benchmark chose
            assert run["methods"]["prefix_probe"]["similarity"] == "rouge_l"
        capsys.readouterr()


def test_decop_refused_before_work_without_paraphrases(tmp_path, monkeypatch, capsys):
    write_jsonl(tmp_path / "s.jsonl", [{"id": "s0", "text": "one two three four", "doc_id": "book"}])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": f"five six seven eight {k}", "doc_id": f"c{k}"}
                                       for k in range(3)])
    code = main(["audit", "--model", "smollm2-135m-instruct", "--suspect", str(tmp_path / "s.jsonl"),
                 "--clean", str(tmp_path / "c.jsonl"), "--method", "decop", "--out", str(tmp_path / "run"),
                 "--no-cache", "--no-progress"])
    # the first load of the bundled GGUF in a fresh environment notes its one-time conversion
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if "(once; later loads" not in line]
    assert code == 2 and len(lines) == 1 and "cannot write them" in lines[0]


def test_suspect_identical_to_clean_is_an_error(tmp_path, capsys):
    rows = [{"id": "a", "text": "the same text here", "doc_id": "book"}]
    write_jsonl(tmp_path / "s.jsonl", rows)
    write_jsonl(tmp_path / "c.jsonl", rows + [{"id": "b", "text": "another one", "doc_id": "other"}])
    for clean in ("c.jsonl", "s.jsonl"):
        code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"),
                     "--clean", str(tmp_path / clean), "--method", "loss", "--out", str(tmp_path / "run"),
                     "--no-cache", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "identical" in err or "same file" in err or "also in the clean set" in err
    assert not (tmp_path / "run" / "run.json").exists()


def test_one_document_given_twice_on_a_side_is_an_error(tmp_path, capsys):
    """A book given as .txt and .md, or clean files copied under other names, would count
    one document as several: the group test sees three suspects, the rank test a clean set
    three times its size. Refused before any model work, naming both copies."""
    text = "The harbour at Kellmouth had been quiet for most of that winter, and the boats stayed tied."
    (tmp_path / "suspect").mkdir()
    (tmp_path / "suspect" / "book.txt").write_text(text + "\n")
    (tmp_path / "suspect" / "book.md").write_text(text + "\n")
    (tmp_path / "clean").mkdir()
    for k in range(4):
        (tmp_path / "clean" / f"c{k}.txt").write_text(f"Fresh text number {k} about a lamp keeper and a ship.\n")
    (tmp_path / "clean2").mkdir()
    (tmp_path / "clean2" / "x.txt").write_text("A wholly other text.\n")
    for k in range(4):
        body = f"Fresh text number {k} about a lamp keeper and a ship.\n"
        (tmp_path / "clean2" / f"c{k}.txt").write_text(body)
        (tmp_path / "clean2" / f"copy{k}.txt").write_text(body)
    for suspect, clean, says in (("suspect", "clean", "suspect documents book.md and book.txt have the same text"),
                                 ("suspect/book.txt", "clean2", "clean documents c0 and copy0 have the same text")):
        code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / suspect), "--clean", str(tmp_path / clean),
                     "--method", "loss", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.strip().splitlines() == [f"copyprobe: error: {says}: give each document once (the test would "
                                                          "count it as two documents)"], err
    assert not (tmp_path / "run" / "run.json").exists()


def test_audit_bad_alpha(tmp_path, capsys):
    code = main(["audit", "--model", "fake", "--suspect", "x.jsonl", "--clean", "y.jsonl", "--alpha", "2",
                 "--out", str(tmp_path / "r")])
    assert code == 2 and "--alpha" in capsys.readouterr().err


def test_feature_agg_audit_trains_on_whole_documents_and_tests_the_others(tmp_path, monkeypatch, capsys):
    """Dataset inference (Maini et al.): feature_agg is fitted on some suspect and clean
    documents, whole, and only the others are tested. Fitted on passages of a suspect
    document, it would learn that document, and its other passages would score as suspect."""
    suspect = [{"id": f"s{i}", "text": " ".join(f"book{i % 4}w{j}" for j in range(20)) + f" s{i}", "doc_id": f"book{i % 4}"}
               for i in range(16)]
    clean = [{"id": f"c{i}", "text": " ".join(f"fresh{i}x{j}" for j in range(20)), "doc_id": f"fresh{i % 4}"} for i in range(16)]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    fake = FakeBackend(spec="fake-audit", member_texts=[r["text"] for r in suspect])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    out = tmp_path / "run"
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "feature_agg",
                 "--param", "feature_agg.n_train=8", "--alpha", "0.2", "--out", str(out),
                 "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    report = json.loads((out / "verdicts.json").read_text())
    trained = set(json.loads((out / "run.json").read_text())["train_ids"]["feature_agg"])
    passages_of = {}
    for role, rows in (("suspect", suspect), ("clean", clean)):
        for r in rows:
            passages_of.setdefault(f"{role}:{r['doc_id']}", set()).add(f"{role}:{r['id']}")
    trained_docs = {doc for doc, ids in passages_of.items() if ids & trained}
    assert all(passages_of[doc] <= trained for doc in trained_docs)  # whole documents, nothing less
    assert {d.split(":")[0] for d in trained_docs} == {"suspect", "clean"}
    tested = [r["doc_id"] for r in report["documents"]] + [d["doc_id"] for d in report["baseline"]["documents"]]
    assert tested and not set(tested) & {d.split(":", 1)[1] for d in trained_docs}
    used = sum(r["n_passages"] for r in report["documents"]) + sum(d["n_passages"] for d in report["baseline"]["documents"])
    assert used == 32 - len(trained)
    assert report["test"]["n_clean_documents"] == 4 - sum(d.startswith("clean:") for d in trained_docs)
    assert all(r["verdict"] == "cannot tell" for r in report["documents"])  # 3 clean documents can show nothing
    printed = capsys.readouterr().out
    assert printed.startswith(f"Of {4 - sum(d.startswith('suspect:') for d in trained_docs)} suspect documents")
    assert "trained on whole documents" in printed


def test_feature_agg_audit_of_one_suspect_document_is_refused_before_the_model_runs(tmp_path, monkeypatch, capsys):
    suspect = [{"id": f"s{i}", "text": f"the one book passage {i} " * 5, "doc_id": "book"} for i in range(8)]
    clean = [{"id": f"c{i}", "text": f"a clean passage {i} " * 5, "doc_id": f"fresh{i % 4}"} for i in range(16)]
    write_jsonl(tmp_path / "suspect.jsonl", suspect)
    write_jsonl(tmp_path / "clean.jsonl", clean)
    fake = FakeBackend(spec="fake-audit")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "suspect.jsonl"),
                 "--clean", str(tmp_path / "clean.jsonl"), "--method", "feature_agg",
                 "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "at least 2 suspect and 2 clean documents; the audit has 1 suspect document" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sum(fake.calls.values()) == 0


def test_audit_limit_takes_the_first_passages_of_each_side(tmp_path, monkeypatch):
    import random

    rng = random.Random(3)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": f"b{p // 3}"} for p in range(9)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"c{k}"} for k in range(8)])
    fake = FakeBackend(spec="fake-audit")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean", str(tmp_path / "c.jsonl"),
                 "--method", "loss", "--limit", "4", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress",
                 "--bootstrap", "0"])
    assert code == 0
    scored = [json.loads(line)["id"] for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    # the first 4 of each side: b0 (s0-s2), b1 (s3) and c0-c3; every document is read at 1
    # passage (b1 and the clean documents have one), so b0 is scored at its middle passage only
    assert scored == ["suspect:s1", "suspect:s3"] + [f"clean:c{k}" for k in range(4)]
    audit = json.loads((tmp_path / "run" / "run.json").read_text())["audit"]
    assert audit["limit"] == 4
    assert audit["selection"] == {"passages_per_document": 1, "n_passages": 8, "n_scored": 6,
                                  "set_by": ["b1", "c0", "c1", "c2", "c3"]}


def test_audit_scores_only_the_passages_its_test_reads(tmp_path, monkeypatch):
    """A 40-passage book beside clean documents of 3 passages: the test reads 3 evenly
    spaced passages of every document, and only those are scored (asked of the model)."""
    import random

    from copyprobe.evaluation.verdicts import evenly_spaced

    rng = random.Random(8)
    book = [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": "book"} for p in range(40)]
    write_jsonl(tmp_path / "s.jsonl", book)
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}-{p}", "text": pseudo_text(rng), "doc_id": f"c{k}"}
                                       for k in range(6) for p in range(3)])
    asked = []
    fake = FakeBackend(spec="fake-audit")
    original = fake.answer

    def answer(requests, *args, **kwargs):
        asked.extend(r.text for r in requests)
        return original(requests, *args, **kwargs)

    monkeypatch.setattr(fake, "answer", answer)
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean", str(tmp_path / "c.jsonl"),
                 "--method", "loss", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    read = [book[i]["text"] for i in evenly_spaced(40, 3)]
    assert sorted(t for t in asked if t in {b["text"] for b in book}) == sorted(read)
    assert len(asked) == 3 + 18
    report = json.loads((tmp_path / "run" / "verdicts.json").read_text())
    assert report["test"]["passages_per_document"] == 3 and report["documents"][0]["n_used"] == 3
    selection = json.loads((tmp_path / "run" / "run.json").read_text())["audit"]["selection"]
    assert selection["n_passages"] == 58 and selection["n_scored"] == 21


def test_audit_default_test_is_t(tmp_path, monkeypatch, capsys):
    import random

    rng = random.Random(6)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": "book"} for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"c{k // 2}"}
                                       for k in range(12)])
    fake = FakeBackend(spec="fake-audit")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean", str(tmp_path / "c.jsonl"),
                 "--method", "loss", "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0
    report = json.loads((tmp_path / "run" / "verdicts.json").read_text())
    assert report["test"]["name"] == "t" and "normal" in report["test"]["assumptions"]
    assert report["documents"][0]["p"] is not None


def test_decop_paraphrasers_are_judged_per_style_and_probability_scores_are_refused():
    from copyprobe.audit import choose_method
    from copyprobe.data.example import Example

    examples = [Example(id="s0", text="one two three four", doc_id="book")]
    generate_only = {"generate"}
    qwen15 = "llamacpp:qwen2.5-coder-1.5b-instruct"
    with pytest.raises(ConfigError, match="with decop.paraphrase_style=one_per_request, qwen2.5-coder-1.5b"):
        choose_method("decop", generate_only, qwen15, examples, {})
    # one rewrite a request: the 1.5B model can; the 0.5B model cannot, and is not told to try it
    assert choose_method("decop", generate_only, qwen15, examples, {"paraphrase_style": "one_per_request"}) == \
        ("decop", None)
    with pytest.raises(ConfigError, match="cannot write them \\(one per request") as info:
        choose_method("decop", generate_only, "qwen2.5-coder-0.5b-instruct", examples,
                      {"paraphrase_style": "one_per_request"})
    assert "with decop.paraphrase_style" not in str(info.value)
    with pytest.raises(ConfigError, match="claimed 4 of 5 never-seen letters"):
        choose_method("decop", generate_only, qwen15, examples,
                      {"paraphrase_style": "one_per_request", "score": "probability", "mode": "logit"})


def fake_audit(tmp_path, monkeypatch, seed: int, n_books: int, n_clean: int) -> list[str]:
    """Suspect books and clean documents of two passages each, every model a FakeBackend:
    the audit command's arguments without --out."""
    import random

    rng = random.Random(seed)
    books = ["book"] if n_books == 1 else [f"book{d}" for d in range(n_books)]
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{b}-{p}", "text": pseudo_text(rng), "doc_id": b}
                                       for b in books for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}-{p}", "text": pseudo_text(rng), "doc_id": f"c{k}"}
                                       for k in range(n_clean) for p in range(2)])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec=spec))
    return ["audit", "--model", "smollm2-135m-instruct", "--suspect", str(tmp_path / "s.jsonl"),
            "--clean", str(tmp_path / "c.jsonl"), "--no-cache", "--no-progress", "--bootstrap", "0"]


def test_default_audit_reason_reads_the_default_rows_though_the_reference_model_is_recorded_resolved(
        tmp_path, monkeypatch, capsys):
    from copyprobe.evaluation.exposure import rules_out

    code = main(fake_audit(tmp_path, monkeypatch, seed=5, n_books=1, n_clean=8) + ["--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["audit"]["method"] == "reference" and run["methods"]["reference"] == {"model": "gemma-3-270m"}
    report = json.loads((tmp_path / "run" / "verdicts.json").read_text())
    (doc,) = report["documents"]
    assert doc["verdict"] == "no evidence"  # the fake scores every text alike: the suspect does not stand out
    clause = report["no_evidence_rules_out"]  # said once for the audit
    assert rules_out("reference") in clause and "with its default parameters" not in clause


def test_an_audit_notes_before_work_what_the_null_battery_says_of_its_method(tmp_path, monkeypatch, capsys):
    """topk_loss made false claims on the null battery (the shipped table) and min_k has
    no count there: each audit's notes say so; zlib made none and gets no note."""
    import random

    from copyprobe.evaluation.validity import null_record, null_records

    rng = random.Random(3)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng, 60), "doc_id": "book"} for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng, 60), "doc_id": f"c{k}"} for k in range(4)])
    backend = FakeBackend(spec="fake-notes", capabilities={"token_logprobs", "generate", "top_logprobs"})
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: backend)
    notes = {}
    for method in ("topk_loss", "min_k", "zlib"):
        code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "s.jsonl"), "--clean",
                     str(tmp_path / "c.jsonl"), "--out", str(tmp_path / method), "--no-cache", "--no-progress",
                     "--bootstrap", "0", "--method", method])
        assert code == 0, capsys.readouterr().err
        notes[method] = json.loads((tmp_path / method / "run.json").read_text())["notes"]
        printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
        assert printed == [f"note: {n}" for n in notes[method]]
    # the note names the counts above alpha, at whichever passage lengths they are
    above = [r for r in null_records("topk_loss").values() if r["false_claims"] > 0.01 * r["documents"]]
    assert above, "the shipped table no longer has topk_loss above alpha: this test needs another method"
    quoted = [f"{r['false_claims']} of {r['documents']} {'audits of ' if r.get('by_model') else ''}documents no "
              "model has seen" for r in above]
    assert any(n.startswith("topk_loss claimed training on ") and all(q in n for q in quoted)
               for n in notes["topk_loss"]), notes["topk_loss"]
    assert any(n.startswith("min_k has no count on the null battery") for n in notes["min_k"])
    assert null_record("zlib")["false_claims"] == 0 and not any("null battery" in n for n in notes["zlib"])


def test_the_printed_verdicts_say_when_tied_clean_scores_sent_the_t_test_to_ranks(capsys):
    from copyprobe.cli.commands.audit import _print
    from copyprobe.evaluation.verdicts import verdicts

    scores = {"s:0": 0.5, **{f"c{i}:0": 0.25 if i else 0.0 for i in range(6)}}
    docs = {i: i.split(":")[0] for i in scores}
    labels = {i: int(i.startswith("s")) for i in scores}
    texts = {i: f"passage {i} about the lamp and the sea and the ship" for i in scores}
    _print(verdicts(scores, docs, labels, 0.01, texts, test="t", method="decop"))
    out = capsys.readouterr().out
    assert "p-values from the rank test: 5 clean documents share their score" in out
    assert "smallest attainable p 0.143" in out


def test_the_demo_explains_an_upside_down_reference_row():
    """reference below chance on the demo's famous passages is said to be the reference
    model knowing them too; at or above chance nothing is added."""
    from types import SimpleNamespace

    from copyprobe.cli.commands.demo import explain_reference

    def result(auc):
        return SimpleNamespace(metrics={"passage": {"reference": {"auc": auc}, "loss": {"auc": 0.93}}},
                               record=SimpleNamespace(methods={"reference": {"model": "gemma-3-270m"}}))

    (line,) = explain_reference(result(0.057))
    assert "AUC 0.06, below chance" in line and "(gemma-3-270m)" in line and "witness" in line
    assert explain_reference(result(0.7)) == []
    assert explain_reference(SimpleNamespace(metrics=None, record=SimpleNamespace(methods={}))) == []


def test_an_audit_of_ten_documents_says_the_shared_clauses_once_and_a_short_line_a_document(
        tmp_path, monkeypatch, capsys):
    """The issue-40 report: 10 documents printed about 9,000 characters, the same 600-character
    'on planted models...' clause once per document. Now each document is one line and the
    clauses shared by all are printed once."""
    code = main(fake_audit(tmp_path, monkeypatch, seed=7, n_books=10, n_clean=8)
                + ["--out", str(tmp_path / "run"), "--method", "loss"])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads((tmp_path / "run" / "verdicts.json").read_text())
    assert {r["verdict"] for r in report["documents"]} == {"no evidence"}
    clause = report["no_evidence_rules_out"]
    assert clause and out.count(clause) == 1 and out.count("on planted models") == 1
    lines = out.splitlines()
    for d in range(10):  # one table line a document, and no sentence repeating its reason
        assert sum(line.startswith(f"book{d} ") for line in lines) == 1
        assert not any(line.startswith(f"- No evidence that the model was trained on book{d}") for line in lines)
    assert len(out) < 4000


def test_published_is_recorded_and_decides_whether_the_models_could_have_seen_the_text(
        tmp_path, monkeypatch, capsys):
    args = fake_audit(tmp_path, monkeypatch, seed=11, n_books=1, n_clean=6)
    assert main(args + ["--out", str(tmp_path / "run"), "--published", "2025-06"]) == 0
    out = capsys.readouterr().out
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    report = json.loads((tmp_path / "run" / "verdicts.json").read_text())
    assert run["audit"]["published"] == "2025-06" and report["published"] == "2025-06"
    # SmolLM2 (released 2024-11-01) and its reference Gemma-3-270M (data to August 2024) predate it
    assert report["target"]["could_have_seen"] is False and report["witness"]["could_have_seen"] is False
    assert "cannot have been trained on a text first published 2025-06" in out
    assert "the reference model (gemma-3-270m) cannot have seen the suspect text" in out
    assert main(args + ["--out", str(tmp_path / "bad"), "--published", "June 2025"]) == 2
    err = capsys.readouterr().err
    assert "argument --published: must be a date YYYY, YYYY-MM or YYYY-MM-DD" in err and "Traceback" not in err
    assert not (tmp_path / "bad" / "run.json").exists()


def test_the_witness_s_factor_is_counted_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """Rank test, alpha 0.2, 5 clean documents: 1/6 reaches alpha alone, but the witness
    multiplies a reference audit's p by at least 1.25 (0.208): refused before loading. A
    method the witness does not judge, and a reference that cannot have seen the text
    (published after its data ends: nothing multiplied), are scored."""
    import random

    rng = random.Random(4)
    write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{p}", "text": pseudo_text(rng), "doc_id": "book"} for p in range(2)])
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"c{k}"} for k in range(5)])

    def no_loading(spec, **options):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", no_loading)
    base = ["audit", "--model", "smollm2-135m-instruct", "--suspect", str(tmp_path / "s.jsonl"), "--clean",
            str(tmp_path / "c.jsonl"), "--no-cache", "--no-progress", "--bootstrap", "0", "--test", "rank",
            "--alpha", "0.2"]
    code = main(base + ["--method", "reference", "--out", str(tmp_path / "refused")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "1/6 = 0.167, times 1.25 for the reference model's choice of test" in err and "nothing was scored" in err
    assert "Give at least 6 clean documents" in err  # 1/7 x 1.25 = 0.179
    assert not (tmp_path / "refused").exists()  # made before the documents were read, removed again
    fake = FakeBackend(spec="smollm2-135m-instruct")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    for name, extra in (("loss", ["--method", "loss"]),
                        ("published", ["--method", "reference", "--param", "reference.model=gemma-3-270m",
                                       "--published", "2025-06"])):
        assert main(base + extra + ["--out", str(tmp_path / name)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # auto chooses reference once the model is known to give log-probs: refused then, unscored
    fake = FakeBackend(spec="fake-auto")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    code = main(base + ["--param", "reference.model=fake", "--out", str(tmp_path / "auto")])
    err = capsys.readouterr().err
    assert code == 2 and "times 1.25 for the reference model's choice of test" in err
    assert sum(fake.calls.values()) == 0 and not (tmp_path / "auto").exists()


def test_an_audit_records_the_length_it_cut_books_at_and_none_for_given_passages(tmp_path, monkeypatch, capsys):
    """What an evidence verdict's null-battery count is read at: books cut by copyprobe
    record their --passage-words; passages given as a table, or sides cut differently,
    record none. The note before the audit (topk_loss claimed more than alpha allows on the
    battery, at 64 words only) says when the battery never ran at the audit's length."""
    import random

    rng = random.Random(9)
    (tmp_path / "clean").mkdir()
    (tmp_path / "book.txt").write_text("\n\n".join(pseudo_text(rng, 40) for _ in range(3)))
    for k in range(6):
        (tmp_path / "clean" / f"c{k}.txt").write_text("\n\n".join(pseudo_text(rng, 40) for _ in range(3)))
    write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}", "text": pseudo_text(rng), "doc_id": f"c{k}"} for k in range(6)])
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(
        spec=spec, capabilities={"token_logprobs", "generate", "top_logprobs"}))
    recorded, notes = {}, {}
    for name, clean, words in (("books", "clean", ["--passage-words", "30"]), ("mixed", "c.jsonl", [])):
        code = main(["audit", "--model", "fake", "--suspect", str(tmp_path / "book.txt"), "--clean",
                     str(tmp_path / clean), "--method", "topk_loss", "--out", str(tmp_path / name), "--no-cache",
                     "--no-progress", "--bootstrap", "0", *words])
        assert code == 0, capsys.readouterr().err
        run = json.loads((tmp_path / name / "run.json").read_text())
        recorded[name] = run["audit"]["passage_words"]
        notes[name] = " ".join(n for n in run["notes"] if "null battery" in n)
    assert recorded == {"books": 30, "mixed": None}
    assert "topk_loss claimed training on" in notes["books"] and "(passages of at most 64 words)" in notes["books"]
    assert notes["books"].endswith("never run with passages of at most 30 words, this audit's length")
    assert "topk_loss claimed training on" in notes["mixed"] and "this audit's length" not in notes["mixed"]
