import json
import zipfile

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.copying import data as D
from copyprobe.copying import prompts
from copyprobe.errors import DataError
from copyprobe.drive import Failure, drive


def _write(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_copybench_layouts_and_per_item_errors(tmp_path):
    literal = [
        {"id": "l0", "title": "B", "input": "a b c", "reference": "d e f"},
        {"id": "l1", "title": "B", "input": "a b c"},  # no reference
        {"id": "l2", "title": "B", "input": "", "reference": "x"},  # empty input
        {"id": "l0", "title": "B", "input": "dup", "reference": "dup"},  # duplicate id
    ]
    nonliteral = [
        {"id": "n0", "title": "B", "input": "Scout meets Dill.",
         "reference_events": "['Jem breaks his arm.', 'Tom is tried.']",  # CopyBench stores list literals as text
         "reference_characters": "[['Scout', 'Jean Louise'], ['Jem']]"},
        {"id": "n1", "title": "B", "input": "x", "reference_events": ["e"],
         "reference_characters": [{"name": "Boo", "alias": ["Arthur Radley"]}, "Calpurnia"]},
        {"id": "n2", "title": "B", "input": "x", "reference_characters": [["A"]]},  # no events
        {"id": "n3", "title": "B", "input": "x", "reference_events": "[not a list", "reference_characters": [["A"]]},
        {"id": "n4", "title": "B", "input": "x", "reference_events": [], "reference_characters": [["A"]]},
    ]
    qa = [{"id": "q0", "input": "Who?", "reference": "Jem"}, {"id": "q1", "input": "Who?", "reference": ["a", "b"]},
          {"id": "q2", "input": "Who?", "reference": 5}]
    s = D.load_copyset(_write(tmp_path / "l.json", literal))
    assert [i.id for i in s.literal] == ["l0"]
    assert {(e.id, e.reason) for e in s.errors} == {
        ("l1", "missing field 'reference'"), ("l2", "field 'input' is empty"), ("l0", "duplicate id")}
    s = D.load_copyset(_write(tmp_path / "n.json", nonliteral))
    assert s.nonliteral[0].reference_events == ("Jem breaks his arm.", "Tom is tried.")
    assert s.nonliteral[0].reference_characters == (("Scout", "Jean Louise"), ("Jem",))
    assert s.nonliteral[1].reference_characters == (("Boo", "Arthur Radley"), ("Calpurnia",))
    reasons = {e.id: e.reason for e in s.errors}
    assert reasons == {"n2": "missing field 'reference_events'",
                       "n3": "field 'reference_events' is neither a list nor a list literal",
                       "n4": "field 'reference_events' is empty"}
    s = D.load_copyset(_write(tmp_path / "q.json", qa))
    assert [i.reference for i in s.qa] == [("Jem",), ("a", "b")]
    assert s.errors[0].id == "q2" and "reference" in s.errors[0].reason


def test_bundle_directory_and_jsonl(tmp_path):
    bundle = {"literal": [{"id": "l", "input": "a", "reference": "b"}], "qa": [{"input": "q?", "reference": "r"}],
              "protected": ["the whole protected book"]}
    s = D.load_copyset(_write(tmp_path / "b.json", bundle))
    assert s.counts() == {"literal": 1, "nonliteral": 0, "qa": 1, "errors": 0, "protected": 1}
    assert s.protected_corpus() == ["the whole protected book"]
    assert s.qa[0].id == "qa.0"
    d = tmp_path / "cb"
    d.mkdir()
    _write(d / "data.literal.json", bundle["literal"])
    _write(d / "data.qa.json", bundle["qa"])
    s = D.load_copyset(d)
    assert len(s.literal) == 1 and len(s.qa) == 1
    assert s.protected_corpus() == ["a b"]  # default corpus: the literal sources (B.2)
    (tmp_path / "x.jsonl").write_text('{"id": "1", "input": "p", "reference": "r"}\n\n', encoding="utf-8")
    assert len(D.load_copyset(tmp_path / "x.jsonl").literal) == 1
    with pytest.raises(DataError, match="unknown keys"):
        D.load_copyset(_write(tmp_path / "bad.json", {"stories": []}))
    with pytest.raises(DataError, match="not JSON"):
        (tmp_path / "broken.json").write_text("{", encoding="utf-8")
        D.load_copyset(tmp_path / "broken.json")
    with pytest.raises(DataError, match="does not exist"):
        D.load_copyset(tmp_path / "missing.json")
    with pytest.raises(DataError, match="layout"):
        D.load_copyset(_write(tmp_path / "other.json", [{"text": "x"}]))


def test_builtin_kjv_sets():
    s = D.load_copyset("kjv")
    assert len(s.literal) == 8 and len(s.nonliteral) == 12 and len(s.qa) == 12 and not s.errors
    for item in s.literal:
        assert len(item.input.split()) == 200 and len(item.reference.split()) == 50
    assert all(item.input + " " + item.reference in " ".join(s.protected) for item in s.literal)
    first = s.nonliteral[0]
    assert first.input not in first.reference_events and len(first.reference_events) == 11
    inc = D.load_copyset("kjv_incontext")
    for item in inc.literal:  # the passage is shown, then its beginning again
        passage, prefix = item.input.split("\n\n")
        assert passage == prefix + " " + item.reference


def test_literal_items_from_book_by_word_counts(tmp_path):
    words = [f"w{i}" for i in range(1000)]
    book = tmp_path / "book.txt"
    book.write_text(" ".join(words[:500]) + "\n\n" + " ".join(words[500:]), encoding="utf-8")
    s = D.load_copyset(book)
    assert len(s.literal) == 4 and s.protected == [book.read_text(encoding="utf-8")]
    assert s.literal[1].input.split() == words[250:450] and s.literal[1].reference.split() == words[450:500]
    items = D.literal_items_from_text(" ".join(words), prefix_words=10, reference_words=5, stride=100, max_items=3)
    assert [i.input.split()[0] for i in items] == ["w0", "w100", "w200"]
    with pytest.raises(DataError, match="one item needs"):
        D.literal_items_from_text("too short", prefix_words=10, reference_words=5)


def test_epub_reading(tmp_path):
    path = tmp_path / "b.epub"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("META-INF/container.xml", '<container><rootfiles><rootfile full-path="OEBPS/c.opf"/></rootfiles></container>')
        z.writestr("OEBPS/c.opf", '<package><manifest><item id="a" href="one.xhtml"/><item id="b" href="two.xhtml"/>'
                                  '</manifest><spine><itemref idref="b"/><itemref idref="a"/></spine></package>')
        z.writestr("OEBPS/one.xhtml", "<html><head><title>T</title><style>p{}</style></head><body><p>Second &amp; last.</p></body></html>")
        z.writestr("OEBPS/two.xhtml", "<html><body><h1>Chapter</h1><p>First part.</p></body></html>")
    assert D.read_book(path).split() == ["Chapter", "First", "part.", "Second", "&", "last."]
    (tmp_path / "bad.epub").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="EPUB"):
        D.read_book(tmp_path / "bad.epub")


FIG13_ANSWER = 'Output:\n[\n  "1. Noah builds an ark.",\n  "2. Rain falls for forty days.",\n  "3. A dove returns."\n]'
FIG14_ANSWER = '```\n[\n  {"name": "Noah", "alias": []},\n  {"name": "Shem", "alias": ["son of Noah"]}\n]\n```'


def test_parse_extraction_answers():
    assert D.parse_events(FIG13_ANSWER) == ["Noah builds an ark.", "Rain falls for forty days.", "A dove returns."]
    assert D.parse_characters(FIG14_ANSWER) == [["Noah"], ["Shem", "son of Noah"]]
    # the brace-less form of the paper's own figure
    assert D.parse_characters('[ "name": "Romeo", "alias": ["Romeo Montague"] , "name": "Tybalt", "alias": [] ]') == [
        ["Romeo", "Romeo Montague"], ["Tybalt"]]
    with pytest.raises(Exception, match="no events"):
        D.parse_events("I cannot help with that.")
    assert D.parse_qa_pair("Question: What was built? Answer: an ark\nmore") == ("What was built?", "an ark")


def test_nonliteral_items_from_summary_via_any_backend():
    def gen(req):
        if req.prompt.startswith("### Instruction\nGiven a literary work"):
            return FIG13_ANSWER
        return FIG14_ANSWER

    fb = FakeBackend(generate_fn=gen)
    res = drive({"k": D.nonliteral_from_summary(title="Noah", author="Moses", summary="A flood.", n_beginnings=2)},
                lambda s: fb)["k"]
    assert [i.input for i in res] == ["Noah builds an ark.", "Rain falls for forty days."]
    assert res[0].reference_events == ("Rain falls for forty days.", "A dove returns.")
    assert res[0].reference_characters == (("Noah",), ("Shem", "son of Noah"))
    assert fb.calls["generate"] == 2
    assert "This section is a summary of \u2019Noah\u2019 by Moses:\nA flood." in prompts.fill(
        prompts.EVENTS_EXTRACT, title="Noah", author="Moses", summary="A flood.")


@pytest.mark.parametrize("verdict,ok", [("attributable", True), ("not attributable", False),
                                        ("partially attributable", False), ("???", False)])
def test_qa_pairs_from_passage_three_steps(verdict, ok):
    def gen(req):
        if "generate a question-answer pair" in req.prompt:
            return "Question: What did the dove bring? Answer: an olive leaf"
        if "merges the question and answer" in req.prompt:
            return "The dove brought an olive leaf."
        assert "Claim: The dove brought an olive leaf.\nReference: PASSAGE" in req.prompt
        return verdict

    fb = FakeBackend(generate_fn=gen)
    res = drive({"k": D.qa_from_passage("PASSAGE", title="Genesis")}, lambda s: fb)["k"]
    if ok:
        assert res.input == "What did the dove bring?" and res.reference == ("an olive leaf",)
    else:
        assert isinstance(res, Failure)
    assert fb.calls["generate"] == 3


def test_prompts_keep_braces_of_inserted_text():
    t = prompts.LITERAL_TEMPLATES[1]
    out = t.render("a {output} b", demos=[("{input}", "x")])
    assert out.endswith("Beginning: a {output} b\nCompletion:")
    assert "Beginning: {input}\nCompletion: x" in out
    assert '"Completion: {your completion to the prefix}"' in out


@pytest.mark.parametrize("bad_id, what", [({"a": 1}, "an object"), ([1, 2], "a list"), ([], "a list")])
def test_an_id_that_is_not_a_scalar_is_refused_naming_file_and_row(tmp_path, bad_id, what):
    rows = [{"id": "fine", "input": "a b", "reference": "c d"}, {"id": bad_id, "input": "a b", "reference": "c d"}]
    folder = tmp_path / "copybench"
    folder.mkdir()
    _write(folder / "data.literal.json", rows)
    for path, where in ((_write(tmp_path / "rows.json", rows), "rows.json row 1"),
                        (_write(tmp_path / "bundle.json", {"literal": rows}), "bundle.json: 'literal' row 1"),
                        (folder, "data.literal.json row 1")):
        with pytest.raises(DataError, match="an id must be text or a number") as info:
            D.load_copyset(path)
        assert f"{where}: the id is {what} ({json.dumps(bad_id)})" in str(info.value)
    lines = tmp_path / "rows.jsonl"
    lines.write_text("\n".join(["", json.dumps(rows[0]), "", json.dumps(rows[1])]), encoding="utf-8")
    with pytest.raises(DataError, match=f"rows.jsonl line 4: the id is {what}"):  # the line, blank lines counted
        D.load_copyset(lines)
    # scalar ids are read as text, as before
    numbers = _write(tmp_path / "n.json", [{"id": 7, "input": "a b", "reference": "c"}, {"id": 2.5, "input": "x",
                                                                                        "reference": "y"}])
    assert [item.id for item in D.load_copyset(numbers).literal] == ["7", "2.5"]


@pytest.mark.parametrize("bad_title, what", [({"a": 1}, "an object"), (["B", "C"], "a list"), ([], "a list")])
def test_a_title_that_is_not_a_scalar_is_refused_naming_file_and_row(tmp_path, bad_title, what):
    """str() made "{'a': 1}" the title, shown in results and reports though nobody wrote it;
    the id's rule refuses it, in the id's words."""
    rows = {"literal": [{"id": "l0", "title": "B", "input": "a b", "reference": "c d"},
                        {"id": "l1", "title": bad_title, "input": "a b", "reference": "c d"}],
            "nonliteral": [{"id": "n0", "title": bad_title, "input": "x", "reference_events": ["e"],
                            "reference_characters": [["A"]]}],
            "qa": [{"id": "q0", "title": "B", "input": "Who?", "reference": "Noah"},
                   {"id": "q1", "title": "B", "input": "What?", "reference": "ark"},
                   {"id": "q2", "title": bad_title, "input": "Where?", "reference": "here"}]}
    says = f"the title is {what} ({json.dumps(bad_title)}); a title must be text or a number"
    for task, row in (("literal", 1), ("nonliteral", 0), ("qa", 2)):
        with pytest.raises(DataError) as info:
            D.load_copyset(_write(tmp_path / f"{task}.json", rows[task]), task=task)
        assert str(info.value) == f"{tmp_path / f'{task}.json'} row {row}: {says}"
        with pytest.raises(DataError, match=f"'{task}' row {row}: the title is {what}"):
            D.load_copyset(_write(tmp_path / "bundle.json", {task: rows[task]}))
    lines = tmp_path / "rows.jsonl"
    lines.write_text("\n".join(["", *(json.dumps(r) for r in rows["literal"])]), encoding="utf-8")
    with pytest.raises(DataError, match=f"rows.jsonl line 3: the title is {what}"):  # blank lines counted
        D.load_copyset(lines)


def test_a_title_that_is_a_number_or_absent_is_text():
    # as an id: a number is read as the text it was written as; no title is an empty one
    rows = [{"id": "a", "title": 1984, "input": "a b", "reference": "c"},
            {"id": "b", "title": 2.5, "input": "a b", "reference": "c"},
            {"id": "c", "title": 0, "input": "a b", "reference": "c"},
            {"id": "d", "title": None, "input": "a b", "reference": "c"},
            {"id": "e", "input": "a b", "reference": "c"}]
    out = D.rows_to_set("literal", rows)
    assert [item.title for item in out.literal] == ["1984", "2.5", "0", "", ""] and not out.errors


def test_an_empty_character_list_is_an_item_a_missing_one_an_error(tmp_path):
    rows = [{"id": "n0", "input": "x", "reference_events": ["e"], "reference_characters": "[]"},  # the release's form
            {"id": "n1", "input": "x", "reference_events": ["e"], "reference_characters": []},
            {"id": "n2", "input": "x", "reference_events": ["e"]}]
    s = D.load_copyset(_write(tmp_path / "n.json", rows))
    assert [(i.id, i.reference_characters) for i in s.nonliteral] == [("n0", ()), ("n1", ())]
    assert [(e.id, e.reason) for e in s.errors] == [("n2", "missing field 'reference_characters'")]
