import hashlib
import json
import os

import pandas as pd
import pytest

from copyprobe.data import Dataset, Example, load_dataset, write_jsonl
from copyprobe.errors import ConfigError, DataError, DataWarning

ROWS = [
    {"id": "a", "text": "The quick brown fox.", "label": 1, "doc_id": "d1", "title": "Fox"},
    {"id": "b", "text": "Jumps over the lazy dog.", "label": 0, "doc_id": "d2", "title": "Dog"},
    {"id": "c", "text": "Ünïcödé — text, with \"quotes\"\nand a newline", "label": 1,
     "doc_id": "d1", "title": "Fox"},
]
EXPECTED = [
    Example(id=r["id"], text=r["text"], label=r["label"], doc_id=r["doc_id"],
            meta={"title": r["title"]})
    for r in ROWS
]


def _write(path, fmt, rows):
    frame = pd.DataFrame(rows)
    if fmt in ("jsonl", "json-lines"):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                        encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    elif fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif fmt == "parquet":
        frame.to_parquet(path, index=False)
    else:
        raise AssertionError(fmt)


def _lines(path, *objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


# -- every format round-trips -----------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "json-lines", "json", "csv", "tsv", "parquet"])
def test_formats_round_trip(tmp_path, fmt):
    path = tmp_path / f"data.{fmt}"
    _write(path, fmt, ROWS)
    if fmt in ("csv", "tsv"):  # a row's quoted field holds a line break: said, and read right
        with pytest.warns(DataWarning, match=r"1 row\(s\) span several lines \(the first at lines 4-5"):
            ds = load_dataset(path)
    else:
        ds = load_dataset(path)
    assert isinstance(ds, Dataset)
    assert [(e.id, e.text, e.label, e.doc_id) for e in ds.examples] == \
        [(e.id, e.text, e.label, e.doc_id) for e in EXPECTED]
    assert [e.meta for e in ds.examples] == [e.meta for e in EXPECTED]
    assert ds.n_rows == 3 and ds.n_skipped == 0
    assert ds.has_labels and ds.has_documents
    assert ds.columns == {"text": "text", "label": "label", "doc_id": "doc_id", "id": "id"}
    assert ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ds.path == str(path)


def _save_hf(tmp_path, splits):
    datasets = pytest.importorskip("datasets")
    parts = {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    target = tmp_path / "hf"
    if list(splits) == [None]:
        parts[None].save_to_disk(str(target))
    else:
        datasets.DatasetDict(parts).save_to_disk(str(target))
    return target


def test_hf_dataset_round_trip(tmp_path):
    path = _save_hf(tmp_path, {None: ROWS})
    ds = load_dataset(path)
    assert ds.examples == EXPECTED
    assert [e.meta for e in ds.examples] == [e.meta for e in EXPECTED]
    assert ds.has_labels and ds.has_documents and ds.n_rows == 3
    # the digest covers the directory's files: changing one changes it
    before = ds.sha256
    assert len(before) == 64
    (path / "dataset_info.json").write_text(
        (path / "dataset_info.json").read_text() + " ", encoding="utf-8")
    assert load_dataset(path).sha256 != before


def test_hf_dataset_dict_splits(tmp_path):
    path = _save_hf(tmp_path, {"train": ROWS[:2], "test": ROWS[2:]})
    with pytest.raises(DataError, match=r"several splits \((train, test|test, train)\)"):
        load_dataset(path)
    assert [e.id for e in load_dataset(path, split="test").examples] == ["c"]
    assert [e.id for e in load_dataset(path, split="train").examples] == ["a", "b"]
    # the files of the chosen split only, each with its size and sha256
    files = load_dataset(path, split="test").files
    on_disk = sorted(f for f in (path / "test").rglob("*") if f.is_file())
    assert [f["path"] for f in files] == [str(f) for f in on_disk]
    assert [(f["bytes"], f["sha256"]) for f in files] == [(f.stat().st_size, hashlib.sha256(f.read_bytes()).hexdigest())
                                                         for f in on_disk]
    with pytest.raises(DataError, match="no split 'dev'; splits: "):
        load_dataset(path, split="dev")


def test_hf_dataset_dict_single_split_is_used(tmp_path):
    path = _save_hf(tmp_path, {"validation": ROWS})
    assert [e.id for e in load_dataset(path).examples] == ["a", "b", "c"]


def test_split_on_plain_file_is_a_config_error(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "x"})
    with pytest.raises(ConfigError, match="split='train'"):
        load_dataset(path, split="train")


def test_directory_that_is_not_a_dataset(tmp_path):
    (tmp_path / "x.xlsx").write_text("hi")  # neither a saved dataset nor a book
    with pytest.raises(DataError, match="not a Hugging Face dataset saved with save_to_disk"):
        load_dataset(tmp_path)


# -- column discovery ----------------------------------------------------------------------

def test_decop_style_columns(tmp_path):
    path = _lines(tmp_path / "d.jsonl",
                  {"ID": "book1", "Example_A": "passage one", "Example_B": "para",
                   "Label": 1},
                  {"ID": "book2", "Example_A": "passage two", "Example_B": "para2",
                   "Label": 0})
    ds = load_dataset(path)
    assert ds.columns == {"text": "Example_A", "label": "Label", "doc_id": "ID", "id": None}
    assert [(e.id, e.doc_id, e.label) for e in ds.examples] == [("0", "book1", 1),
                                                                 ("1", "book2", 0)]
    assert ds.examples[0].meta == {"Example_B": "para"}


def test_first_matching_name_wins_and_explicit_overrides(tmp_path):
    path = _lines(tmp_path / "d.jsonl",
                  {"input": "from input", "snippet": "from snippet", "book": "B", "book_id": 7})
    ds = load_dataset(path)
    assert ds.examples[0].text == "from input"
    assert ds.examples[0].doc_id == "7"  # book_id precedes book
    assert ds.examples[0].meta == {"snippet": "from snippet", "book": "B"}
    ds = load_dataset(path, text_column="snippet", doc_column="book")
    assert ds.examples[0].text == "from snippet" and ds.examples[0].doc_id == "B"
    assert ds.columns["text"] == "snippet"
    # "doc" names the document too (an audit's clean file with a doc column was one document)
    ds = load_dataset(_lines(tmp_path / "doc.jsonl", {"text": "t", "doc": "letter 3", "book": "B"}))
    assert ds.examples[0].doc_id == "letter 3" and ds.columns["doc_id"] == "doc"


def test_explicit_column_that_does_not_exist(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "x", "y": 1})
    with pytest.raises(DataError, match=r"label_column='lab' is not a column; columns: text, y"):
        load_dataset(path, label_column="lab")


def test_no_text_column_lists_columns_and_names_tried(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"body": "x", "label": 1})
    with pytest.raises(DataError) as err:
        load_dataset(path)
    msg = str(err.value)
    assert "no text column" in msg and "columns found: body, label" in msg
    assert "names tried: text, input, snippet, Example_A" in msg
    assert "\n" not in msg


def test_no_labels_no_documents(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "x"}, {"text": "y"})
    ds = load_dataset(path)
    assert not ds.has_labels and not ds.has_documents
    assert [e.label for e in ds.examples] == [None, None]
    assert list(ds.to_frame().columns) == ["id", "text"]


def test_to_frame(tmp_path):
    path = tmp_path / "d.jsonl"
    _write(path, "jsonl", ROWS)
    ds = load_dataset(path)
    frame = ds.to_frame()
    assert list(frame.columns) == ["id", "text", "label", "doc_id"]
    assert frame["label"].tolist() == [1, 0, 1]
    assert frame["label"].dtype == "int64"
    assert list(ds.to_frame(meta=True).columns) == ["id", "text", "label", "doc_id", "title"]


# -- skipping and labels -----------------------------------------------------------------

def test_empty_whitespace_and_null_texts_are_skipped_and_counted(tmp_path):
    path = _lines(tmp_path / "d.jsonl",
                  {"text": "keep", "label": 1}, {"text": "", "label": 0},
                  {"text": "  \n\t", "label": "yes"}, {"text": None, "label": 1},
                  {"label": 0}, {"text": "also", "label": 0})
    ds = load_dataset(path)
    assert ds.n_rows == 6 and ds.n_skipped == 4
    # default ids are row numbers, stable whatever is skipped
    assert [e.id for e in ds.examples] == ["0", "5"]
    assert ds.first_skipped == "line 2"  # the run's note names it, so the row can be found


def test_a_run_notes_how_many_rows_it_skipped_and_where_the_first_is(tmp_path):
    import copyprobe
    from copyprobe.backends.fake import FakeBackend

    path = _lines(tmp_path / "d.jsonl", {"text": "keep this"}, {"text": "and this"}, {"label_note": "no text"})
    run = copyprobe.detect(FakeBackend(), path, ["loss"], cache=False, n_bootstrap=0)
    assert "1 row with empty or no text was skipped (the first: line 3)" in run.record.notes
    assert run.record.data["first_skipped"] == "line 3"


def test_a_row_as_long_as_a_book_is_named_with_its_length(tmp_path):
    """A whole book pasted into one row is one passage, scored whole and slowly: said before
    any model loads, with the longest row's place and length; rows up to the limit are quiet."""
    import warnings

    from copyprobe.data.tables import LONG_ROW_WORDS
    from copyprobe.errors import DataWarning

    limit = " ".join(["word"] * LONG_ROW_WORDS)
    path = _lines(tmp_path / "d.jsonl", {"text": "short"}, {"text": limit + " one"}, {"text": limit},
                  {"text": limit + " one two three"}, {"text": limit + " one two six"})  # a tie: the first
    with pytest.warns(DataWarning) as caught:
        data = load_dataset(path)
    assert len(caught) == 1 and len(data.examples) == 5  # read all the same
    message = str(caught[0].message)
    assert f"3 row(s) hold more than {LONG_ROW_WORDS:,} words (the longest: line 4, {LONG_ROW_WORDS + 3:,} words)" \
        in message and "\n" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(_lines(tmp_path / "ok.jsonl", {"text": limit}, {"text": "x" * (3 * LONG_ROW_WORDS)}))  # long, 1 word


def test_what_reading_warned_of_is_in_the_run_notes_and_said_once(tmp_path, monkeypatch, capsys):
    """A file left out is said on the terminal (once) and kept in run.json's notes, so the
    record says what the data was; an audit keeps its sides' warnings too."""
    import copyprobe
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.cli.main import main
    from copyprobe.errors import DataWarning

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "walk.py").write_text("def walk(top):\n    return top\n")
    said = "1 source file(s) left out: pkg/__init__.py (empty)"
    with pytest.warns(DataWarning, match=r"pkg/__init__\.py \(empty\)"):
        run = copyprobe.detect(FakeBackend(), repo, ["loss"], cache=False, n_bootstrap=0)
    assert f"{repo}: {said}" in run.record.notes
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: FakeBackend(spec="f"))
    code = main(["detect", "--model", "fake", "--data", str(repo), "--methods", "loss", "--out", str(tmp_path / "o"),
                 "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0 and capsys.readouterr().err.count(said) == 1
    assert f"{repo}: {said}" in json.loads((tmp_path / "o" / "run.json").read_text())["notes"]
    clean = _lines(tmp_path / "c.jsonl", *({"text": f"clean text {k}", "doc_id": f"c{k}"} for k in range(4)),
                   {"text": "w " * 10_001, "doc_id": "c9"})
    with pytest.warns(DataWarning):
        audit = copyprobe.audit(FakeBackend(), repo, clean, method="loss", test="rank", alpha=0.25, cache=False)
    assert any(n.startswith(f"{repo}: {said}") for n in audit.detect.notes)
    assert any(n.startswith(f"{clean}: 1 row(s) hold more than 10,000 words") for n in audit.detect.notes)


def test_said_while_reading_keeps_what_is_shown_and_leaves_the_display_as_it_was():
    import warnings

    from copyprobe.data.readers import said_while_reading
    from copyprobe.errors import DataWarning

    shown = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *rest, **kw: shown.append(str(message))
        display = warnings.showwarning
        with said_while_reading() as said:
            warnings.warn(DataWarning("a file left out"))
            warnings.warn(UserWarning("not the data's"))
        assert said == ["a file left out"] and shown == ["a file left out", "not the data's"]
        assert warnings.showwarning is display
        with pytest.raises(DataError, match="bad row"), said_while_reading() as said:
            warnings.warn(DataWarning("before the error"))
            raise DataError("bad row")
        assert said == ["before the error"] and warnings.showwarning is display
        warnings.simplefilter("ignore", DataWarning)
        with said_while_reading() as said:
            warnings.warn(DataWarning("ignored"))
        assert said == [] and "ignored" not in shown  # filtered out: neither shown nor a note
        warnings.simplefilter("error", DataWarning)
        with pytest.raises(DataWarning, match="as an error"), said_while_reading():
            warnings.warn(DataWarning("as an error"))  # the filters act as they would without it


def test_all_rows_empty(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": " "}, {"text": None})
    with pytest.raises(DataError, match=r"all 2 rows have empty text in column 'text'"):
        load_dataset(path)


@pytest.mark.parametrize("value,expected", [
    (1, 1), (0, 0), (True, 1), (False, 0), (1.0, 1), (0.0, 0), ("1", 1), ("0", 0),
])
def test_accepted_label_spellings(tmp_path, value, expected):
    path = _lines(tmp_path / "d.jsonl", {"text": "x", "label": value})
    assert load_dataset(path).examples[0].label == expected


@pytest.mark.parametrize("value,shown", [("yes", "'yes'"), (2, "2"), (-1, "-1"),
                                         (0.5, "0.5"), (float("nan"), "nan")])
def test_rejected_labels_name_row_id_and_value(tmp_path, value, shown):
    path = _lines(tmp_path / "d.jsonl", {"id": "r1", "text": "x", "label": 1},
                  {"id": "r2", "text": "y", "label": value})
    with pytest.raises(DataError) as err:
        load_dataset(path)
    msg = str(err.value)
    assert "line 2" in msg and "id 'r2'" in msg
    assert f"label must be 0 or 1, got {shown}" in msg


def test_csv_labels_as_strings_and_bools(tmp_path):
    path = tmp_path / "d.csv"
    pd.DataFrame({"text": ["a", "b"], "label": [True, False]}).to_csv(path, index=False)
    assert [e.label for e in load_dataset(path).examples] == [1, 0]


def test_single_class_loads(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "a", "label": 1}, {"text": "b", "label": 1})
    ds = load_dataset(path)
    assert ds.has_labels and {e.label for e in ds.examples} == {1}


def test_mix_of_labelled_and_unlabelled_rows(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "a", "label": 1}, {"text": "b", "label": None},
                  {"text": "c"})
    with pytest.raises(DataError, match="some rows have a label and some do not"):
        load_dataset(path)


def test_mix_in_csv_with_empty_cells(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\na,1\nb,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 3 id '1' has none in column 'label'"):
        load_dataset(path)


def test_all_null_labels_means_unlabelled(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "a", "label": None}, {"text": "b"})
    ds = load_dataset(path)
    assert not ds.has_labels and ds.columns["label"] is None


def test_mix_of_rows_with_and_without_document(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": "a", "doc_id": "x"}, {"text": "b"})
    with pytest.raises(DataError, match="some rows have a document id and some do not"):
        load_dataset(path)


# -- ids --------------------------------------------------------------------------------

def test_duplicate_ids_are_named(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"id": "p1", "text": "a"}, {"id": "p2", "text": "b"},
                  {"id": "p1", "text": "c"})
    with pytest.raises(DataError, match=r"duplicate id 'p1' \(line 1 and line 3\)"):
        load_dataset(path)


def test_numeric_ids_become_strings(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame({"id": [10.0, 11.0], "text": ["a", "b"]}).to_parquet(path)
    assert [e.id for e in load_dataset(path).examples] == ["10", "11"]


def test_missing_id_value(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"id": "p1", "text": "a"}, {"text": "b"})
    with pytest.raises(DataError, match=r"line 2 has no id in column 'id'"):
        load_dataset(path)


# -- file-level errors -------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"data file not found: .*nope\.jsonl"):
        load_dataset(tmp_path / "nope.jsonl")


MALFORMED = [
    ("d.xlsx", b"whatever", r"unsupported data file type '\.xlsx'.*supported: \.jsonl"),
    ("d.jsonl", b'{"text": "ok"}\n\n{"text": broken}\n', r"invalid JSON on line 3"),
    ("d.jsonl", b'{"text": "ok"}\n["a"]\n', r"line 2 is a JSON list, expected an object"),
    ("d.json", b'[{"text": "a"},\n {"text": }]', r"invalid JSON on line 2"),
    ("d.json", b'{"data": [{"text": "a"}]}', "expected a JSON list of objects"),
    ("d.jsonl", b'{"text": "a"}\n\x00\x01\x02', r"looks like a binary file.*byte offset 14"),
    ("d.parquet", b"text\nhello\n", r"cannot read .*d\.parquet as Parquet"),
    ("d.csv", "text\nhello\n".encode("utf-16"), "UTF-16"),
    # no byte-order mark: was "looks like a binary file (NUL byte at byte offset 1)"
    ("d.jsonl", '{"text": "hello there"}\n'.encode("utf-16-le"), "looks UTF-16 encoded .without a byte-order mark"),
    ("d.csv", "text,label\nhello there,1\n".encode("utf-16-be"), "looks UTF-16 encoded"),
    ("d.csv", b"text,label\na,1\nb,0,extra\n", r"line 3 has 3 fields but the header has 2"),
    ("d.jsonl", b"", "has no rows"),
]


@pytest.mark.parametrize("name, content, message", MALFORMED)
def test_malformed_files_are_one_data_error(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match=message):
        load_dataset(path)


def test_json_file_holding_json_lines(tmp_path):
    path = _lines(tmp_path / "d.json", {"text": "a"}, {"text": "b"})
    assert [e.text for e in load_dataset(path).examples] == ["a", "b"]


def test_invalid_utf8_names_file_and_offset(tmp_path):
    path = tmp_path / "d.csv"
    good = "text\ncafé\n".encode("utf-8")
    path.write_bytes(good + "naïve\n".encode("latin-1"))
    offset = len(good) + len(b"na")  # where the latin-1 ï starts
    with pytest.raises(DataError) as err:
        load_dataset(path)
    msg = str(err.value)
    assert str(path) in msg and "not valid UTF-8" in msg
    assert f"byte offset {offset} (line 3)" in msg


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b"\xef\xbb\xbftext,label\nhi,1\n")
    ds = load_dataset(path)
    assert ds.columns["text"] == "text" and ds.examples[0].text == "hi"


def test_text_of_wrong_type(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"text": ["a", "b"]})
    with pytest.raises(DataError, match=r"line 1: column 'text' holds a list"):
        load_dataset(path)


def test_meta_values_are_json_friendly(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": ["a"], "when": [pd.Timestamp("2024-01-02")], "n": [3],
                  "refs": [["x", "y"]], "score": [float("nan")]}).to_parquet(path)
    meta = load_dataset(path).examples[0].meta
    json.dumps(meta, allow_nan=False)  # must not raise
    assert meta["n"] == 3 and meta["refs"] == ["x", "y"] and meta["score"] is None
    assert meta["when"].startswith("2024-01-02")


# -- write_jsonl ---------------------------------------------------------------------------

def test_write_jsonl_round_trip_and_atomic(tmp_path):
    np = pytest.importorskip("numpy")
    path = tmp_path / "out" / "scores.jsonl"
    rows = [{"id": "a", "x": np.float64(0.5), "n": np.int64(3), "bad": float("nan"),
             "t": "ü"}, {"id": "b", "x": 1.0, "n": 1, "bad": None, "t": "x"}]
    assert write_jsonl(path, rows) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": "a", "x": 0.5, "n": 3, "bad": None, "t": "ü"},
        {"id": "b", "x": 1.0, "n": 1, "bad": None, "t": "x"}]
    assert os.listdir(path.parent) == ["scores.jsonl"]  # no temp file left behind
    # loads back as a dataset
    path2 = tmp_path / "texts.jsonl"
    write_jsonl(path2, ROWS)
    assert load_dataset(path2).examples == EXPECTED


def test_write_jsonl_failure_keeps_old_file(tmp_path):
    path = tmp_path / "scores.jsonl"
    write_jsonl(path, [{"id": "old"}])

    def rows():
        yield {"id": "new"}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_jsonl(path, rows())
    assert json.loads(path.read_text()) == {"id": "old"}
    assert os.listdir(tmp_path) == ["scores.jsonl"]


def test_csv_with_a_very_long_field(tmp_path):
    long_text = "word " * 60_000  # 300k characters, over the csv module's default limit
    path = tmp_path / "d.csv"
    pd.DataFrame({"text": [long_text, "short"], "label": [1, 0]}).to_csv(path, index=False)
    with pytest.warns(DataWarning, match="1 row\\(s\\) hold more than 10,000 words \\(the longest: line 2, 60,000"):
        assert [e.text for e in load_dataset(path).examples] == [long_text, "short"]


def test_skipped_rows_are_not_validated(tmp_path):
    path = _lines(tmp_path / "d.jsonl", {"id": "x", "text": "a", "label": 1},
                  {"id": "x", "text": "", "label": "junk"}, {"id": "y", "text": "b", "label": 0})
    ds = load_dataset(path)
    assert [e.id for e in ds.examples] == ["x", "y"] and ds.n_skipped == 1
