"""Passage cutting, EPUB reading and corpus loading for `copyprobe plant`."""

from __future__ import annotations

import json
import zipfile

import pytest

from copyprobe.errors import DataError
from copyprobe.plant.corpus import cut_passages, html_to_text, load_corpus, read_epub


def chars(text: str) -> int:
    """Toy tokenizer for hand-checked cases: one token per character, leading space free."""
    return len(text.strip())


def test_cut_by_whitespace_tokens_hand_checked():
    ps = cut_passages("a b c d e f g h i j", 4)
    assert [p.text for p in ps] == ["a b c d", "e f g h", "i j"]  # tail of 2 >= 4 // 2 is kept
    assert [p.n_tokens for p in ps] == [4, 4, 2]
    ps = cut_passages("a b c d e f g h i", 4)
    assert [p.text for p in ps] == ["a b c d", "e f g h"]  # tail of 1 < 2 is dropped


def test_cut_counts_tokens_per_word_hand_checked():
    # aaa(3) + bb(2) = 5 fits; c(1) + dddd(4) = 5 fits; ee(2) alone: 2 < 5 // 2? no, 2 == 2 -> kept
    ps = cut_passages("aaa bb c dddd ee", 5, chars)
    assert [p.text for p in ps] == ["aaa bb", "c dddd", "ee"]
    assert [p.n_tokens for p in ps] == [5, 5, 2]
    # a word longer than the passage becomes a passage of its own, never split
    ps = cut_passages("xxxxxxx yy zz", 5, chars, min_tokens=1)
    assert [p.text for p in ps] == ["xxxxxxx", "yy zz"]


def test_cut_collapses_whitespace_and_names_passages():
    ps = cut_passages("one\n\n two\tthree   four", 2, doc_id="book")
    assert [p.text for p in ps] == ["one two", "three four"]
    assert [p.id for p in ps] == ["book-0000", "book-0001"]
    assert {p.doc_id for p in ps} == {"book"}
    assert cut_passages("", 4) == []


def test_cut_rejects_zero_length():
    with pytest.raises(DataError):
        cut_passages("a b", 0)


def test_html_to_text_strips_tags_scripts_and_entities():
    html = ("<html><head><title>T</title><style>p {color: red}</style></head><body>"
            "<h1>Chapter One</h1><p>Fish &amp; chips,<br/>said <i>she</i>.</p>"
            "<script>var x = 1;</script><p>End</p></body></html>")
    assert html_to_text(html) == "Chapter One\nFish & chips,\nsaid she.\nEnd"


def _xhtml(body: str) -> str:
    return (f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>x</title></head><body>{body}</body></html>")


def make_epub(path, chapters: dict[str, str], spine: list[str] | None, opf: bool = True) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        if opf:
            zf.writestr("META-INF/container.xml",
                        '<?xml version="1.0"?><container version="1.0" '
                        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                        '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                        "</rootfiles></container>")
            items = "".join(f'<item id="{n}" href="{n}.xhtml" media-type="application/xhtml+xml"/>'
                            for n in chapters)
            refs = "".join(f'<itemref idref="{n}"/>' for n in spine or [])
            zf.writestr("OEBPS/content.opf",
                        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                        f"<manifest>{items}</manifest><spine>{refs}</spine></package>")
        for name, body in chapters.items():
            zf.writestr(f"OEBPS/{name}.xhtml", _xhtml(body))


def test_read_epub_follows_the_spine(tmp_path):
    book = tmp_path / "book.epub"
    # manifest order (and name order) differs from the reading order in the spine
    make_epub(book, {"a_end": "<p>The end.</p>", "b_start": "<h1>One</h1><p>It began.</p>"},
              spine=["b_start", "a_end"])
    assert read_epub(book) == "One\nIt began.\n\nThe end."


def test_read_epub_without_package_file_uses_name_order(tmp_path):
    book = tmp_path / "book.epub"
    make_epub(book, {"ch2": "<p>second</p>", "ch1": "<p>first</p>"}, spine=None, opf=False)
    assert read_epub(book) == "first\n\nsecond"


def test_read_epub_errors(tmp_path):
    bad = tmp_path / "bad.epub"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(DataError, match="cannot read EPUB"):
        read_epub(bad)
    empty = tmp_path / "empty.epub"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
    with pytest.raises(DataError, match="no text"):
        read_epub(empty)


def test_load_corpus_directory_mixes_books_and_data_files(tmp_path):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "alpha.txt").write_text("a1 a2 a3 a4 a5 a6 a7 a8")
    make_epub(tmp_path / "books" / "beta.epub", {"c": "<p>b1 b2 b3 b4</p>"}, spine=["c"])
    rows = [{"id": "r1", "text": "row one text", "doc_id": "D"}, {"id": "r2", "text": "row two text", "doc_id": "E"},
            {"id": "r3", "text": "a1 a2 a3 a4", "doc_id": "E"}]  # same text as a cut passage: dropped as duplicate
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / ".hidden.txt").write_text("should not be read")
    corpus = load_corpus(tmp_path, passage_tokens=4)
    got = [(p.id, p.text, p.doc_id) for p in corpus.passages]
    assert got == [
        ("books/alpha-0000", "a1 a2 a3 a4", "books/alpha"),
        ("books/alpha-0001", "a5 a6 a7 a8", "books/alpha"),
        ("books/beta-0000", "b1 b2 b3 b4", "books/beta"),
        ("r1", "row one text", "D"),
        ("r2", "row two text", "E"),
    ]
    assert corpus.n_duplicates == 1 and corpus.cut
    # the hash identifies the passages: same input, same hash; changed text, other hash
    assert load_corpus(tmp_path, passage_tokens=4).sha256 == corpus.sha256
    (tmp_path / "books" / "alpha.txt").write_text("a1 a2 a3 a4 a5 a6 a7 a9")
    assert load_corpus(tmp_path, passage_tokens=4).sha256 != corpus.sha256


def test_load_corpus_single_text_file_uses_stem(tmp_path):
    f = tmp_path / "My Book.txt"
    f.write_text("a b c d e f g h i j")
    corpus = load_corpus(f, passage_tokens=5)
    assert [p.id for p in corpus.passages] == ["My Book-0000", "My Book-0001"]
    assert {p.doc_id for p in corpus.passages} == {"My Book"}
    # identical passages are kept once, so a text can never be both member and non-member
    f.write_text("w " * 10)
    corpus = load_corpus(f, passage_tokens=5)
    assert [p.text for p in corpus.passages] == ["w w w w w"] and corpus.n_duplicates == 1


def test_load_corpus_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_corpus(tmp_path / "missing")
    with pytest.raises(DataError, match="holds no"):
        load_corpus(tmp_path)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        load_corpus(latin)
    other = tmp_path / "x.pdf"
    other.write_text("x")
    with pytest.raises(DataError, match="unsupported corpus file type"):
        load_corpus(other)
    d = tmp_path / "dups"
    d.mkdir()
    (d / "a.jsonl").write_text('{"id": "same", "text": "one"}\n')
    (d / "b.jsonl").write_text('{"id": "same", "text": "two"}\n')
    with pytest.raises(DataError, match="duplicate passage id 'same'"):
        load_corpus(d)
