"""Parsers at their edges, one case per kind found by a hostile user: a Parquet text
column that is a struct, an unterminated CSV quote, multi-line CSV rows, a truncated
gzip corpus, a DC-PDD frequency table in another array layout, CopyBench files with
wrong types and JSON beyond Python's limits. Each ends in a Dataset / table / CopySet or
one DataError/ConfigError line naming the file (and the line where there is one)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import warnings

import pytest

from copyprobe.errors import ConfigError, DataError, DataWarning

from rel_util import REPO, env


# -- Parquet --------------------------------------------------------------------------

def _parquet(path, text_values, text_type=None, **extra):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    columns = {"id": [f"r{i}" for i in range(len(text_values))],
               "text": pa.array(text_values, type=text_type), "label": [i % 2 for i in range(len(text_values))]}
    columns.update(extra)
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("values, type_words", [
    ([{"x": "hello there"}, {"x": "second text"}], "struct<x: string>"),
    ([{"a": {"b": "x"}}, None], "struct<a: struct<b: string>>"),
    ([["a", "b"], ["c"]], "list<element: string>"),
    ([1, 2], "int64"),
])
def test_parquet_text_column_of_another_type_is_refused_before_conversion(tmp_path, values, type_words):
    """Checked in a subprocess: the process must end with exit 2 and one line (the
    struct column used to abort the whole process with exit 134)."""
    path = _parquet(tmp_path / "data.parquet", values)
    result = subprocess.run(
        [sys.executable, "-m", "copyprobe.cli.main", "detect", "--model", "smollm2-135m-instruct", "--data",
         str(path), "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--methods", "loss"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env())
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert f"column 'text' is a Parquet {type_words} column, expected text" in lines[0]


def test_parquet_struct_text_column_named_explicitly_and_other_struct_columns_are_fine(tmp_path):
    from copyprobe.data.readers import load_dataset

    path = _parquet(tmp_path / "d.parquet", ["one text here", "another text"], meta=[{"k": 1}, {"k": 2}],
                    body=[{"x": "a"}, {"x": "b"}])
    assert [e.text for e in load_dataset(path).examples] == ["one text here", "another text"]
    with pytest.raises(DataError, match="column 'body' is a Parquet struct"):
        load_dataset(path, text_column="body")


# -- CSV --------------------------------------------------------------------------------

@pytest.mark.parametrize("content, line", [
    (b'id,text,label\np1,"hello there world,1\np2,second row text,0\np3,third row text,1\n', "line 2"),
    (b'id,text,label\np1,fine text,1\np2,second row text,0\np3,"third row text,1', "line 4"),
    (b'id\ttext\tlabel\np1\t"open quote\t1\np2\tb\t0\n', "line 2"),
])
def test_unterminated_csv_quote_is_an_error_naming_its_line(tmp_path, content, line):
    from copyprobe.data.readers import load_dataset

    path = tmp_path / ("d.tsv" if b"\t" in content else "d.csv")
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        load_dataset(path)
    assert f"{line}: a quote opened on this line is never closed" in str(info.value)


def test_multiline_csv_rows_warn_with_lines_and_counts(tmp_path):
    from copyprobe.data.readers import load_dataset

    path = tmp_path / "d.csv"
    path.write_bytes(b'id,text,label\np1,"hello\nthere world",1\np2,second row text,0\np3,third row,1\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_dataset(path)
    assert [e.text for e in data.examples] == ["hello\nthere world", "second row text", "third row"]
    assert [e.id for e in data.examples] == ["p1", "p2", "p3"]
    (warning,) = [w for w in caught if issubclass(w.category, DataWarning)]
    assert "lines 2-3" in str(warning.message) and "3 rows were read from 5 lines" in str(warning.message)


def test_quotes_that_close_give_no_warning(tmp_path):
    from copyprobe.data.readers import load_dataset

    path = tmp_path / "d.csv"
    path.write_bytes(b'id,text,label\np1,"a, quoted ""text""",1\np2,plain,0\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [e.text for e in load_dataset(path).examples] == ['a, quoted "text"', "plain"]


def test_cli_prints_the_csv_warning_as_one_line(tmp_path, capsys):
    from test_reliability_bad_input import fake_loader
    from copyprobe.backends import specs
    from copyprobe.cli.main import main

    path = tmp_path / "d.csv"
    path.write_bytes(b'id,text,label\np1,"hello\nthere world",1\np2,second row text,0\np3,third row,1\np4,more words here,0\n')
    real = specs.load_backend
    specs.__dict__["_real_load_backend"] = real
    specs.load_backend = fake_loader
    try:
        code = main(["detect", "--model", "fake", "--data", str(path), "--out", str(tmp_path / "run"), "--no-cache",
                     "--no-progress", "--methods", "loss", "--bootstrap", "0"])
    finally:
        specs.load_backend = real
    err = capsys.readouterr().err
    assert code == 0
    assert [line for line in err.splitlines() if "warning" in line] == [
        f"copyprobe: warning: {path}: 1 row(s) span several lines (the first at lines 2-3: a quoted field holding "
        "line breaks), so 4 rows were read from 6 lines; check the quotes if that is not intended"]


# -- gzip corpus ---------------------------------------------------------------------------

def _chunks(path):
    from copyprobe.freq import _raw_chunks

    return "".join(_raw_chunks(str(path), 1 << 16))


def test_truncated_and_damaged_gzip_corpora(tmp_path):
    pytest.importorskip("numpy")
    full = gzip.compress(("the quick brown fox " * 5000).encode())
    (tmp_path / "ok.gz").write_bytes(full)
    assert _chunks(tmp_path / "ok.gz") == "the quick brown fox " * 5000
    (tmp_path / "cut.gz").write_bytes(full[: len(full) // 2])
    with pytest.raises(DataError, match="'.*cut.gz' is truncated"):
        _chunks(tmp_path / "cut.gz")
    (tmp_path / "notgz.gz").write_bytes(b"plain text, not gzip")
    with pytest.raises(DataError, match="cannot read corpus file .*notgz.gz"):
        _chunks(tmp_path / "notgz.gz")
    damaged = bytearray(full)
    damaged[len(damaged) // 2: len(damaged) // 2 + 40] = b"\xff" * 40
    (tmp_path / "damaged.gz").write_bytes(bytes(damaged))
    with pytest.raises(DataError, match="damaged.gz"):
        _chunks(tmp_path / "damaged.gz")


# -- frequency table layouts -----------------------------------------------------------------

def _table_arrays(np):
    return {"counts": np.arange(1, 11, dtype=np.int64), "total": np.int64(55), "vocab_size": np.int64(10),
            "name": np.str_("tok"), "vocab_hash": np.str_("h"), "format": np.int64(1)}


@pytest.mark.parametrize("change, words", [
    (lambda np, a: a.update(counts=np.ones((2, 5), dtype=np.int64)), "'counts' must be a 1-D integer array"),
    (lambda np, a: a.update(counts=np.ones(10, dtype=np.float64)), "'counts' must be a 1-D integer array"),
    (lambda np, a: a.update(counts=np.array(["a", "b"])), "'counts' must be a 1-D integer array"),
    (lambda np, a: a.pop("counts"), "'counts' must be a 1-D integer array (one count per vocabulary entry), found missing"),
    (lambda np, a: a.update(format=np.array([1, 1])), "'format' must be one integer"),
    (lambda np, a: a.update(format=np.str_("1")), "'format' must be one integer"),
    (lambda np, a: a.update(name=np.array(["a", "b"])), "'name' must be one string"),
    (lambda np, a: a.update(vocab_hash=np.int64(3)), "'vocab_hash' must be one string"),
    (lambda np, a: a.update(token_crc=np.ones(3, dtype=np.uint32)), "'token_crc' must be a 1-D integer array of 10"),
    (lambda np, a: a.update(counts=-np.ones(10, dtype=np.int64)), "negative counts"),
    (lambda np, a: [a.pop(k) for k in list(a)] and a.update(other=np.ones(3)), "not a copyprobe frequency table"),
])
def test_frequency_table_in_another_layout(tmp_path, change, words):
    np = pytest.importorskip("numpy")
    from copyprobe.freq import FORMAT, load_frequency_table

    arrays = _table_arrays(np)
    arrays["format"] = np.int64(FORMAT)
    change(np, arrays)
    path = tmp_path / "t.npz"
    np.savez(path, **arrays)
    with pytest.raises(ConfigError) as info:
        load_frequency_table(path)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_frequency_table_pickled_object_array_is_refused(tmp_path):
    np = pytest.importorskip("numpy")
    from copyprobe.freq import load_frequency_table

    path = tmp_path / "t.npz"
    np.savez(path, counts=np.array([{"a": 1}], dtype=object), format=np.int64(1))
    with pytest.raises(ConfigError, match="not a copyprobe frequency table"):
        load_frequency_table(path)


# -- CopyBench files -------------------------------------------------------------------------

@pytest.mark.parametrize("rows, reason", [
    ([{"id": "n1", "input": "story", "reference_events": ["e"], "reference_characters": [{"name": "A", "alias": 5}]}],
     "aliases of character 'A' must be a list"),
    ([{"id": "n1", "input": "story", "reference_events": [["nested", ["list"]]], "reference_characters": ["A"]}],
     "must be a list of non-empty texts"),
    ([{"id": "n1", "input": 42, "reference_events": ["e"], "reference_characters": ["A"]}], "must be text, got int"),
    ([{"id": "n1", "input": "s", "reference_events": "[" * 5000 + "]" * 5000, "reference_characters": ["A"]}],
     "neither a list nor a list literal"),
    ([{"id": "n1", "input": "s", "reference_events": 7, "reference_characters": ["A"]}], "must be a list, got int"),
    ([{"id": "n1", "input": "s", "reference_events": ["e"], "reference_characters": [3.5]}], "must hold names"),
])
def test_copybench_rows_with_wrong_types_become_row_errors(tmp_path, rows, reason):
    from copyprobe.copying.data import load_copyset

    path = tmp_path / "data.nonliteral.json"
    path.write_text(json.dumps(rows))
    copyset = load_copyset(path, task="nonliteral")
    assert not copyset.nonliteral and len(copyset.errors) == 1 and reason in copyset.errors[0].reason


@pytest.mark.parametrize("content, words", [
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (b'[{"id": "a", "input": "x", "reference": ' + b"7" * 5000 + b"}]", "more than 4300 digits"),
])
def test_copybench_json_beyond_limits(tmp_path, content, words):
    from copyprobe.copying.data import load_copyset

    for suffix in (".json", ".jsonl"):
        path = tmp_path / f"d{suffix}"
        path.write_bytes(content)
        with pytest.raises(DataError, match=words):
            load_copyset(path)


# -- Parquet reads end without an abort at exit -------------------------------------------------

# reads the files through load_dataset and prints the process's threads before and after
# the reads (-1 where /proc/self/task is missing); pyarrow is imported first, so the
# threads its import starts count before
PARQUET_READER = r"""
import os, sys
import pyarrow.parquet
from copyprobe.data.readers import load_dataset
from copyprobe.errors import CopyprobeError

def threads():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1

before = threads()
for path in sys.argv[1:]:
    try:
        load_dataset(path)
    except CopyprobeError:
        pass
print(before, threads())
"""


def _empty_parquets(tmp_path, n=20):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    paths = []
    for i in range(n):
        pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / f"f{i}.parquet")
        paths.append(str(tmp_path / f"f{i}.parquet"))
    return paths


def test_parquet_reads_leave_no_thread_to_abort_the_process_at_exit(tmp_path):
    """Arrow's parquet reader threads could outlive a read and abort the process at exit
    ("terminate called without an active exception", exit 134; apache/arrow#34314): with
    threads on, 3 of 40 processes reading these 20 empty files aborted (without them, through
    read_table's dataset scanner, about 1 in 160). copyprobe reads through ParquetFile
    without threads; 12 processes in a row end with exit 0."""
    paths = _empty_parquets(tmp_path)
    for _ in range(12):
        result = subprocess.run([sys.executable, "-c", PARQUET_READER, *paths], capture_output=True, text=True,
                                timeout=120, cwd=REPO, env=env())
        assert result.returncode == 0 and not result.stderr.strip(), (result.returncode, result.stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc/self/task")
def test_parquet_reads_start_no_thread_at_all(tmp_path):
    """The deterministic half of the exit abort: no thread that could be alive at exit.
    pq.read_table(use_threads=False) still left one Arrow thread-pool worker (its dataset
    scanner's), and one CI run in many aborted with it; the process must end the reads
    with the threads it had before them (empty, text, damaged and non-text files)."""
    paths = _empty_parquets(tmp_path, n=3)
    paths.append(str(_parquet(tmp_path / "text.parquet", ["one text", "two texts"])))
    paths.append(str(_parquet(tmp_path / "numbers.parquet", [1, 2])))
    (tmp_path / "damaged.parquet").write_bytes((tmp_path / "text.parquet").read_bytes()[:-40])
    paths.append(str(tmp_path / "damaged.parquet"))
    result = subprocess.run([sys.executable, "-c", PARQUET_READER, *paths], capture_output=True, text=True,
                            timeout=120, cwd=REPO, env=env())
    assert result.returncode == 0, result.stderr
    before, after = map(int, result.stdout.split())
    assert after == before


def test_parquet_is_read_without_reader_threads(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from copyprobe.data.readers import load_dataset

    path = _parquet(tmp_path / "d.parquet", ["one text", "two texts"])
    calls = []
    real = pq.ParquetFile.read

    def spy(self, **kwargs):
        calls.append(kwargs)
        return real(self, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("read through the dataset scanner"))
    assert len(load_dataset(path).examples) == 2
    assert calls == [{"use_threads": False}]


def test_parquet_dates_beyond_python_are_one_error(tmp_path):
    pa = pytest.importorskip("pyarrow")
    from copyprobe.data.readers import load_dataset

    path = _parquet(tmp_path / "d.parquet", ["one text", "two"],
                    when=pa.array([2**40, 0], pa.timestamp("s")))
    with pytest.raises(DataError, match="as Parquet"):
        load_dataset(path)
