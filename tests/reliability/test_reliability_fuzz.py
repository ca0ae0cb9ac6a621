"""Readers fuzzed with hypothesis: generated malformed JSONL / JSON / CSV / TSV / Parquet /
EPUB / HTML / gzip / CopyBench inputs end in a result or one copyprobe error
(DataError / ConfigError), never another exception, a traceback or an abort.

Inputs are valid files damaged by random edits (bytes inserted, deleted, truncated,
duplicated), so the fuzzer spends its examples near the formats' grammar instead of on
noise a first check refuses. Parquet files are read in a separate process (a native
abort would otherwise end the test run), a batch of files per process to keep the cost
down. max_examples stays modest (CI cost): about 40-60 per reader.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import warnings
import zipfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from copyprobe.errors import CopyprobeError  # noqa: E402

from rel_util import REPO, env  # noqa: E402

import os  # noqa: E402

# COPYPROBE_FUZZ_EXAMPLES=2000 for a deeper run than CI's
EXAMPLES = int(os.environ.get("COPYPROBE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])

# -- damaging valid bytes ---------------------------------------------------------------------

EDIT = st.tuples(st.sampled_from(["insert", "delete", "truncate", "duplicate", "replace"]),
                 st.floats(0, 1), st.binary(min_size=1, max_size=12) | st.sampled_from(
                     [b'"', b",", b"\n", b"{", b"}", b"[", b"]", b"\\", b"\x00", b"\xff", b"\r\n", b'\\ud800',
                      b"9" * 5000, b"[" * 3000, b"\t", b"\xef\xbb\xbf"]))


def damage(raw: bytes, edits) -> bytes:
    data = bytearray(raw)
    for kind, where, piece in edits:
        at = int(where * len(data))
        if kind == "insert":
            data[at:at] = piece
        elif kind == "delete":
            del data[at: at + len(piece)]
        elif kind == "truncate":
            del data[at:]
        elif kind == "duplicate":
            data[at:at] = data[at: at + 64]
        else:
            data[at: at + len(piece)] = piece
    return bytes(data)


CELL = st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
ROW = st.fixed_dictionaries({"id": CELL, "text": CELL, "label": CELL}, optional={"doc_id": CELL, "x": CELL})


def _good_rows():
    return [{"id": f"r{i}", "text": f"passage number {i} with some words", "label": i % 2} for i in range(6)]


def _accepts_or_explains(path, **options) -> None:
    from copyprobe.data.readers import load_dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            load_dataset(path, **options)
        except CopyprobeError as exc:
            assert str(exc).strip() and "\n" not in str(exc).strip(), str(exc)


@FUZZ
@given(rows=st.lists(ROW, min_size=0, max_size=6), edits=st.lists(EDIT, max_size=4),
       suffix=st.sampled_from([".jsonl", ".json"]))
def test_fuzzed_json_files(tmp_path, rows, edits, suffix):
    if suffix == ".json":
        raw = json.dumps(_good_rows() + rows).encode()
    else:
        raw = "".join(json.dumps(r) + "\n" for r in _good_rows() + rows).encode()
    path = tmp_path / f"data{suffix}"
    path.write_bytes(damage(raw, edits))
    _accepts_or_explains(path)


@FUZZ
@given(rows=st.lists(st.lists(st.text(max_size=15), min_size=0, max_size=5), max_size=6),
       edits=st.lists(EDIT, max_size=4), suffix=st.sampled_from([".csv", ".tsv"]))
def test_fuzzed_csv_files(tmp_path, rows, edits, suffix):
    import csv

    out = io.StringIO()
    writer = csv.writer(out, delimiter="," if suffix == ".csv" else "\t")
    writer.writerow(["id", "text", "label"])
    for row in _good_rows():
        writer.writerow([row["id"], row["text"], row["label"]])
    for row in rows:
        writer.writerow(row)
    path = tmp_path / f"data{suffix}"
    path.write_bytes(damage(out.getvalue().encode(), edits))
    _accepts_or_explains(path)


# -- Parquet, in a subprocess ---------------------------------------------------------------------

PARQUET_READER = r"""
import sys, traceback, warnings
warnings.simplefilter("ignore")
from copyprobe.data.readers import load_dataset
from copyprobe.errors import CopyprobeError
for path in sys.argv[1:]:
    print("START", path, flush=True)
    try:
        load_dataset(path)
        print("OK", flush=True)
    except CopyprobeError as exc:
        print("ERROR", str(exc).replace("\n", "\\n"), flush=True)
    except BaseException:
        print("BAD", path, traceback.format_exc().replace("\n", " | "), flush=True)
"""


def _column(draw, n: int):
    import pyarrow as pa

    kind = draw(st.sampled_from(["string", "int", "float", "bool", "null", "struct", "list", "map", "binary",
                                 "dict", "nested", "large_string", "timestamp", "decimal"]))
    texts = st.one_of(st.none(), st.text(max_size=10))
    if kind == "string":
        return pa.array(draw(st.lists(texts, min_size=n, max_size=n)), pa.string())
    if kind == "large_string":
        return pa.array(draw(st.lists(texts, min_size=n, max_size=n)), pa.large_string())
    if kind == "int":
        return pa.array(draw(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=n, max_size=n)))
    if kind == "float":
        return pa.array(draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)), pa.float64())
    if kind == "bool":
        return pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if kind == "null":
        return pa.nulls(n)
    if kind == "struct":
        return pa.array([{"x": t} for t in draw(st.lists(texts, min_size=n, max_size=n))])
    if kind == "list":
        return pa.array(draw(st.lists(st.lists(st.text(max_size=4), max_size=3), min_size=n, max_size=n)))
    if kind == "map":
        return pa.array([[("k", t or "")] for t in draw(st.lists(texts, min_size=n, max_size=n))],
                        type=pa.map_(pa.string(), pa.string()))
    if kind == "binary":
        return pa.array(draw(st.lists(st.binary(max_size=8), min_size=n, max_size=n)), pa.binary())
    if kind == "dict":
        return pa.array(draw(st.lists(st.text(max_size=5), min_size=n, max_size=n))).dictionary_encode()
    if kind == "nested":
        return pa.array([{"a": [{"b": t}]} for t in draw(st.lists(texts, min_size=n, max_size=n))])
    if kind == "timestamp":
        return pa.array(draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)), pa.timestamp("s"))
    import decimal

    return pa.array([decimal.Decimal(v) for v in draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n))],
                    pa.decimal128(12, 2))


@st.composite
def parquet_files(draw) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = draw(st.integers(0, 4))
    names = draw(st.lists(st.sampled_from(["text", "id", "label", "doc_id", "input", "other"]), min_size=1, max_size=4))
    table = pa.Table.from_arrays([_column(draw, n) for _ in names], names=names)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return damage(buffer.getvalue(), draw(st.lists(EDIT, max_size=2)))


@settings(max_examples=max(3, EXAMPLES // 20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files=st.lists(parquet_files(), min_size=20, max_size=20))
def test_fuzzed_parquet_files_never_abort(tmp_path_factory, files):
    pytest.importorskip("pyarrow")
    folder = tmp_path_factory.mktemp("pq")
    paths = []
    for i, raw in enumerate(files):
        path = folder / f"f{i}.parquet"
        path.write_bytes(raw)
        paths.append(str(path))
    result = subprocess.run([sys.executable, "-c", PARQUET_READER, *paths], capture_output=True, text=True,
                            timeout=300, cwd=REPO, env=env())
    lines = result.stdout.splitlines()
    started = [line.split(" ", 1)[1] for line in lines if line.startswith("START ")]
    assert result.returncode == 0, f"exit {result.returncode} while reading {started[-1] if started else '?'}"
    assert not [line for line in lines if line.startswith("BAD ")], "\n".join(lines)
    assert len(started) == len(paths)


# -- EPUB, HTML, gzip ------------------------------------------------------------------------------

MEMBER_NAMES = st.sampled_from(["mimetype", "META-INF/container.xml", "OEBPS/content.opf", "content.opf",
                                "OEBPS/ch1.xhtml", "ch1.xhtml", "ch2.html", "../evil.xhtml", "x.htm", "img.png"])
XMLISH = st.one_of(
    st.binary(max_size=60),
    st.just(b'<?xml version="1.0"?><container><rootfiles><rootfile full-path="OEBPS/content.opf"/></rootfiles></container>'),
    st.just(b'<package><manifest><item id="c1" href="ch1.xhtml"/></manifest><spine><itemref idref="c1"/></spine></package>'),
    st.just(b'<package><manifest><item id="c1"/></manifest><spine><itemref idref="c1"/><itemref/></spine></package>'),
    st.just(b"<html><body><p>Chapter one text.</p><script>x</script></body></html>"),
    st.just(b'<!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><p>&b;</p>'),
    st.text(max_size=40).map(lambda t: f"<p>{t}</p>".encode("utf-8", "surrogatepass")),
)


@FUZZ
@given(members=st.lists(st.tuples(MEMBER_NAMES, XMLISH, st.booleans()), max_size=6), edits=st.lists(EDIT, max_size=2))
def test_fuzzed_epub_files(tmp_path, members, edits):
    from copyprobe.data.books import read_book

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate member names
        with zipfile.ZipFile(buffer, "w") as zf:
            for name, content, compress in members:
                zf.writestr(name, content, compress_type=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    path = tmp_path / "book.epub"
    path.write_bytes(damage(buffer.getvalue(), edits))
    try:
        assert isinstance(read_book(path), str)
    except CopyprobeError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(markup=st.text(max_size=200) | st.lists(st.sampled_from(
    ["<p>", "</p>", "<script>", "</script>", "<br/>", "&amp;", "&#xD800;", "&#99999999;", "<!--", "-->", "<![CDATA[",
     "]]>", "<", ">", "text", "\x00", "<style", "<div class='a", "&", "&#", "<?pi"]), max_size=30).map("".join))
def test_fuzzed_html_never_raises(markup):
    from copyprobe.data.books import html_to_text

    assert isinstance(html_to_text(markup), str)


@FUZZ
@given(text=st.text(max_size=300), edits=st.lists(EDIT, max_size=3))
def test_fuzzed_gzip_corpora(tmp_path, text, edits):
    pytest.importorskip("numpy")
    from copyprobe.freq import _raw_chunks

    path = tmp_path / "corpus.txt.gz"
    path.write_bytes(damage(gzip.compress(text.encode("utf-8", "surrogatepass")), edits))
    try:
        out = "".join(_raw_chunks(str(path), 64))
        assert isinstance(out, str)
    except CopyprobeError as exc:
        assert "\n" not in str(exc)


# -- CopyBench files --------------------------------------------------------------------------------

ANY = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
                   lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                   max_leaves=8)
COPY_ROW = st.one_of(ANY, st.fixed_dictionaries({}, optional={
    "id": ANY, "title": ANY, "input": ANY | st.text(max_size=20), "reference": ANY,
    "reference_events": ANY | st.just('["e1", "e2"]') | st.just("['a', ['b']]"),
    "reference_characters": ANY | st.just([{"name": "A", "alias": ["B"]}]) | st.just([{"name": 3, "alias": {"x": 1}}]),
}))


@FUZZ
@given(rows=st.lists(COPY_ROW, max_size=6), task=st.sampled_from([None, "literal", "nonliteral", "qa"]),
       bundle=st.booleans())
def test_fuzzed_copybench_files(tmp_path, rows, task, bundle):
    from copyprobe.copying.data import load_copyset

    path = tmp_path / "set.json"
    path.write_text(json.dumps({task or "literal": rows, "protected": []} if bundle else rows))
    try:
        copyset = load_copyset(path, task=None if bundle else task)
    except CopyprobeError as exc:
        assert "\n" not in str(exc)
        return
    counted = len(copyset.literal) + len(copyset.nonliteral) + len(copyset.qa) + len(copyset.errors)
    assert counted == len(rows)  # every row is an item or an explained error
