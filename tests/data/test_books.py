"""The book reader shared by `copyprobe plant` corpora and copying evaluations."""

from __future__ import annotations

import zipfile

import pytest

from copyprobe.data.books import html_to_text, read_book, read_epub
from copyprobe.errors import DataError

CONTAINER = ('<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="{opf}"/></rootfiles></container>')


def write_epub(path, files: dict[str, str], opf_path: str | None = None) -> None:
    """A zip with the given members; with ``opf_path``, a container.xml pointing at it."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        if opf_path:
            zf.writestr("META-INF/container.xml", CONTAINER.format(opf=opf_path))
        for name, content in files.items():
            zf.writestr(name, content)


def test_text_books_are_utf8_without_a_byte_order_mark(tmp_path):
    book = tmp_path / "book.txt"
    book.write_bytes("\ufeffÉtude\n\nsecond paragraph".encode("utf-8"))
    assert read_book(book) == "Étude\n\nsecond paragraph"
    latin = tmp_path / "latin.txt"
    latin.write_bytes("abc caf\xe9".encode("latin-1"))
    with pytest.raises(DataError, match=r"not valid UTF-8: byte 0xe9 at byte offset 7"):
        read_book(latin)
    blank = tmp_path / "blank.md"
    blank.write_text(" \n\n\t")
    with pytest.raises(DataError, match="is empty"):
        read_book(blank)
    with pytest.raises(DataError, match="cannot read"):
        read_book(tmp_path / "missing.txt")


def test_html_entities_are_decoded_once_and_void_tags_break_lines_once():
    markup = "<BODY><P>1 &lt; 2 &amp;amp; &#233;t&eacute;<BR/>next</P><p>a <b>bold</b>  word</p></BODY>"
    # "&amp;amp;" is the literal text "&amp;": decoding twice would make it "&"
    assert html_to_text(markup) == "1 < 2 &amp; été\nnext\na bold word"


def test_nested_skipped_elements_hide_all_their_text():
    markup = "<head><title>T</title><style>x</style></head><div>kept<script>if (a<b) hidden()</script> too</div>"
    assert html_to_text(markup) == "kept too"


def test_spine_paths_resolve_relative_to_the_package_file(tmp_path):
    book = tmp_path / "book.epub"
    opf = ('<package><manifest><item id="one" href="../Text/one.xhtml#start"/>'
           '<item id="two" href="two.html"/></manifest>'
           '<spine><itemref idref="two"/><itemref idref="ghost"/><itemref idref="one"/></spine></package>')
    write_epub(book, {"OPS/pkg/book.opf": opf, "OPS/Text/one.xhtml": "<p>from one</p>",
                      "OPS/pkg/two.html": "<p>from two</p>", "OPS/Text/unlisted.xhtml": "<p>never read</p>"},
               opf_path="OPS/pkg/book.opf")
    # spine order; an itemref missing from the manifest and a file outside the spine are skipped
    assert read_epub(book) == "from two\n\nfrom one"
    assert read_book(book) == read_epub(book)


def test_unreadable_package_file_falls_back_to_name_order(tmp_path):
    book = tmp_path / "book.epub"
    write_epub(book, {"c.opf": "<package><manifest>not xml", "b.htm": "<p>B</p>", "a.xhtml": "<p>A</p>"},
               opf_path="c.opf")
    assert read_epub(book) == "A\n\nB"


GUTENBERG = """The Project Gutenberg eBook of A Tale, by Someone

This eBook is for the use of anyone anywhere in the United States and most other parts
of the world at no cost and with almost no restrictions whatsoever.

*** START OF THE PROJECT GUTENBERG EBOOK A TALE ***

Chapter One

It was a quiet morning in the valley, and the river ran slow and brown.

*** END OF THE PROJECT GUTENBERG EBOOK A TALE ***

Section 1. General Terms of Use and Redistributing Project Gutenberg electronic works
"""


def test_a_gutenberg_file_keeps_only_the_book(tmp_path):
    from copyprobe.errors import DataWarning

    book = tmp_path / "tale.txt"
    book.write_text(GUTENBERG, encoding="utf-8")
    with pytest.warns(DataWarning, match=r"tale.txt: a Project Gutenberg file: its header \(3 paragraph\(s\)\) and "
                                          r"what follows its END line \(2 paragraph\(s\)\) are left out"):
        text = read_book(book)
    assert text == "Chapter One\n\nIt was a quiet morning in the valley, and the river ran slow and brown."
    # no START line: nothing is left out, whatever the words
    plain = tmp_path / "plain.txt"
    plain.write_text(GUTENBERG.replace("*** START", "START"), encoding="utf-8")
    assert "Section 1. General Terms" in read_book(plain) and "This eBook is for" in read_book(plain)
    # a START line without an END line: the book runs to the file's end
    open_ended = tmp_path / "open.txt"
    open_ended.write_text(GUTENBERG.split("*** END")[0], encoding="utf-8")
    with pytest.warns(DataWarning):
        assert read_book(open_ended).endswith("river ran slow and brown.")
