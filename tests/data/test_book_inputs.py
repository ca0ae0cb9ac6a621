"""Books as input: every supported file type read and cleaned (running headers, footers
and page numbers removed, hyphenated line breaks joined), cut into passages by the
documented rule, and every bad file refused with one line naming it (also through the
CLI, exit code 2). Fixture files are written here, in tmp_path."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import re
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from copyprobe.cli.main import main
from copyprobe.data.books import (
    _is_page_number,
    book_paragraphs,
    markdown_to_text,
    read_book,
    strip_page_furniture,
)
from copyprobe.data.passages import cut_code, cut_passages, document_ids, sentences
from copyprobe.data.readers import load_dataset
from copyprobe.errors import ConfigError, DataError, DataWarning

# -- fixture writers ---------------------------------------------------------------------

# (indented?, line) per page; the paragraph on page 1 runs on to page 2 through "voy-/age"
PAGES = [
    [(1, "The lighthouse keeper counted the ships every evening and wrote"),
     (0, "their names in a blue ledger that his father had left him. It was an"),
     (0, "exam-"),
     (0, "ple of patience that the village admired, a well-"),
     (0, "known habit that nobody questioned."),
     (1, "In the winter the ledger grew thin, because the storms kept the"),
     (0, "boats in the harbour for weeks, and the keeper spent his nights on the"),
     (0, "long voy-")],
    [(0, "age of his own thoughts, which took him to cities he had never seen."),
     (1, "When spring came he painted the railings white and mended the lamp,"),
     (0, "and the first schooner of the year rounded the headland on a Tuesday."),
     (1, "Its captain waved a red flag, and the keeper wrote the name with"),
     (0, "a trembling hand, as if the whole season depended on that single line.")],
    [(1, "Years later his daughter found the ledger in a trunk under the stairs,"),
     (0, "with pressed flowers between the pages and a map of the coast drawn"),
     (0, "in pencil, and she read every entry aloud to her own children."),
     (1, "They laughed at the odd names of the ships and asked which of them"),
     (0, "had sunk, and she said that none had, not while their grandfather watched.")],
]
PDF_PARAGRAPHS = [
    "The lighthouse keeper counted the ships every evening and wrote their names in a blue ledger that his "
    "father had left him. It was an example of patience that the village admired, a well-known habit that "
    "nobody questioned.",
    "In the winter the ledger grew thin, because the storms kept the boats in the harbour for weeks, and the "
    "keeper spent his nights on the long voyage of his own thoughts, which took him to cities he had never seen.",
    "When spring came he painted the railings white and mended the lamp, and the first schooner of the year "
    "rounded the headland on a Tuesday.",
    "Its captain waved a red flag, and the keeper wrote the name with a trembling hand, as if the whole season "
    "depended on that single line.",
    "Years later his daughter found the ledger in a trunk under the stairs, with pressed flowers between the "
    "pages and a map of the coast drawn in pencil, and she read every entry aloud to her own children.",
    "They laughed at the odd names of the ships and asked which of them had sunk, and she said that none had, "
    "not while their grandfather watched.",
]
HEADER = ("THE SALT ROAD", "Chapter Two")
FOOTER = "Draft manuscript, not for circulation"


def write_pdf(path: Path, pages=PAGES) -> Path:
    """A PDF with a running header (title left, chapter right), a running footer and
    "Page N of M" under it, and the body lines as given."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    width, height = A4
    for n, lines in enumerate(pages, start=1):
        c.setFont("Helvetica", 9)
        # drawn before the body: the footer comes first in the content stream, last on the page
        c.drawCentredString(width / 2, 42, FOOTER)
        c.drawCentredString(width / 2, 28, f"Page {n} of {len(pages)}")
        c.drawString(72, height - 40, HEADER[0])
        c.drawRightString(width - 72, height - 40, HEADER[1])
        c.setFont("Times-Roman", 11)
        y = height - 80
        for indented, line in lines:
            c.drawString(72 + 18 * indented, y, line)
            y -= 14
        c.showPage()
    c.save()
    return path


def write_image_pdf(path: Path) -> Path:
    """A 'scanned' PDF: one page holding an image and no text."""
    from PIL import Image
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = Image.new("RGB", (60, 20), "white")
    image.paste((0, 0, 0), (5, 5, 55, 15))
    c = canvas.Canvas(str(path))
    c.drawImage(ImageReader(image), 72, 600, width=300, height=100)
    c.showPage()
    c.save()
    return path


def write_encrypted_pdf(path: Path, source: Path, user_password: str) -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(str(source)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret")
    with open(path, "wb") as handle:
        writer.write(handle)
    return path


DOCX_PARAGRAPHS = ["Chapter One", "The orchard behind the mill had not been pruned in years.",
                   "Every branch leaned toward the river, heavy with small sour apples."]


def write_docx(path: Path) -> Path:
    """Paragraphs, a table, and a page header/footer (which are not body text)."""
    import docx

    document = docx.Document()
    section = document.sections[0]
    section.header.paragraphs[0].text = "RUNNING HEADER OF THE DOCX"
    section.footer.paragraphs[0].text = "Footer text 7"
    document.add_heading(DOCX_PARAGRAPHS[0], level=1)
    for text in DOCX_PARAGRAPHS[1:]:
        document.add_paragraph(text)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Apples"
    table.rows[0].cells[1].text = "sour"
    document.save(str(path))
    return path


CONTAINER = ('<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="OPS/book.opf"/></rootfiles></container>')
OPF = ('<package><manifest><item id="c1" href="one.xhtml"/><item id="c2" href="two.xhtml"/></manifest>'
       '<spine><itemref idref="c2"/><itemref idref="c1"/></spine></package>')


def write_epub(path: Path, extra: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr("META-INF/container.xml", CONTAINER)
        zf.writestr("OPS/book.opf", OPF)
        zf.writestr("OPS/one.xhtml", "<html><body><p>Second in the\nspine, &amp; last.</p></body></html>")
        zf.writestr("OPS/two.xhtml", "<html><head><title>T</title></head><body><nav>Contents</nav>"
                                     "<h1>Opening</h1><p>First   paragraph <i>read</i>.</p></body></html>")
        for name, content in (extra or {}).items():
            zf.writestr(name, content)
    return path


# -- every type read and cleaned ----------------------------------------------------------

def test_pdf_loses_headers_footers_and_page_numbers_and_joins_broken_words(tmp_path):
    text = read_book(write_pdf(tmp_path / "salt.pdf"))
    assert text.split("\n\n") == PDF_PARAGRAPHS
    for furniture in (*HEADER, FOOTER, "Page"):
        assert furniture not in text


def test_running_lines_alternate_and_page_numbers_take_many_forms():
    def page(n, top, body):
        return [top, "", *body, "", str(n)]

    words = "oak ash elm yew fir box ivy bay fig lime pine teak".split()
    bodies = [[f"the {words[2 * n]} grew", f"and the {words[2 * n + 1]} fell"] for n in range(6)]
    pages = [page(n + 1, "THE SALT ROAD" if n % 2 else f"{n + 1}    Chapter Two", bodies[n]) for n in range(6)]
    cleaned = strip_page_furniture(pages)
    # even and odd pages carry different headers, each repeating two pages on
    assert [[line for line in p if line] for p in cleaned] == bodies
    for line in ("12", "- 12 -", "— 7 —", "Page 3", "page 3 of 10", "3 / 10", "xii", "XII"):
        assert _is_page_number(line, top=False), line
    assert not _is_page_number("IV", top=True)  # a chapter number at the top of a page
    for line in ("1850 was a hard year", "civil", "Page three", "123456"):
        assert not _is_page_number(line, top=False), line
    # a single page: no repetition to see, but a bare page number still goes
    assert strip_page_furniture([["Body of a one-page letter.", "", "  1  "]]) == [["Body of a one-page letter.", ""]]


COLUMNS = [  # (left column, right column) of each page
    (["In the beginning the river was narrow", "and the town on its banks was small,", "with one bridge and a mill that",
      "ground the corn of every farm along", "the valley for many miles around."],
     ["His son kept the accounts and drove", "the cart to market each week, and", "he came home late with news from",
      "the city that nobody believed, so", "the village laughed at him until"]),
    (["the day the soldiers came over the", "hill with their drums and banners", "and asked for bread and beds, and",
      "the miller gave them both without", "a word of complaint or of thanks"],
     ["because he had seen soldiers once", "before, when he was a boy, and he", "knew that they would leave in the",
      "spring as they always did, taking", "the best horses and the youngest men."]),
]


def test_two_column_pages_read_left_column_then_right(tmp_path):
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    path = tmp_path / "two.pdf"
    c = canvas.Canvas(str(path), pagesize=A4)
    width, height = A4
    for n, (left, right) in enumerate(COLUMNS, start=1):
        c.setFont("Helvetica", 9)
        c.drawString(50, height - 40, "THE RIVER")
        c.drawRightString(width - 50, height - 40, str(n))
        c.setFont("Times-Roman", 10)
        for i, (a, b) in enumerate(zip(left, right)):  # drawn line by line across both columns
            c.drawString(50, height - 80 - 12 * i, a)
            c.drawString(310, height - 80 - 12 * i, b)
        c.showPage()
    c.save()
    words = " ".join(line for left, right in COLUMNS for line in left + right).split()
    text = read_book(path)
    assert text.split() == words and "RIVER" not in text


def test_docx_body_paragraphs_and_tables_without_header_or_footer(tmp_path):
    text = read_book(write_docx(tmp_path / "orchard.docx"))
    assert text.split("\n\n") == [*DOCX_PARAGRAPHS, "Apples sour"]
    assert "RUNNING HEADER" not in text and "Footer" not in text


def test_epub_in_spine_order_as_paragraphs(tmp_path):
    text = read_book(write_epub(tmp_path / "b.epub"))
    assert text.split("\n\n") == ["Opening", "First paragraph read.", "Second in the spine, & last."]


def test_html_visible_text_in_its_declared_charset(tmp_path):
    page = tmp_path / "page.htm"
    page.write_bytes('<html><head><meta charset="iso-8859-1"><style>p {}</style></head><body>'
                     '<p>Caf\xe9 &eacute;t\xe9\n  line two</p><script>var x = "<p>no</p>";</script>'
                     '<div>final flag</div></body></html>'.encode("latin-1"))
    assert read_book(page).split("\n\n") == ["Café été line two", "final flag"]


def test_markdown_syntax_is_taken_out(tmp_path):
    md = tmp_path / "notes.md"
    md.write_text("---\ntitle: Notes\n---\n# The *first* chapter\n\nSome **bold** words and a "
                  "[link](http://x.org)\nthat wraps, with snake_case_names kept.\n\n![cover](c.png)\n\n"
                  "- item one\n- item two\n\n> quoted line\n\n```\ncode stays\n```\n")
    assert read_book(md).split("\n\n") == [
        "The first chapter", "Some bold words and a link that wraps, with snake_case_names kept.",
        "item one", "item two", "quoted line", "code stays"]
    assert markdown_to_text("Title\n=====\nbody") == "Title\n\nbody"


def test_text_unwrapped_dehyphenated_and_unicode_fixed(tmp_path):
    book = tmp_path / "plain.txt"
    book.write_text("The ﬁrst line of a hard-\nwrapped paragraph goes on and\non. A well-\nknown "
                    "exam-\nple; the hard-wrapped form also appears.\n\n"
                    "Second paragraph with mojibake: donâ€™t.\n", encoding="utf-8")
    # "hard-/wrapped": the document writes "hard-wrapped" elsewhere, so the hyphen stays
    assert read_book(book).split("\n\n") == [
        "The first line of a hard-wrapped paragraph goes on and on. A well-known example; the hard-wrapped "
        "form also appears.",
        "Second paragraph with mojibake: don’t."]
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"# Head\r\n\r\nOne exam-\r\nple line\r\nwrapped.\r\n")
    assert read_book(crlf) == "Head\n\nOne example line wrapped."
    long_lines = tmp_path / "lines.txt"
    rows = [" ".join(f"w{i}x{j}" for j in range(30)) for i in range(3)]  # one paragraph per line, no blank lines
    long_lines.write_text("\n".join(rows))
    assert read_book(long_lines).split("\n\n") == rows


def test_soft_hyphen_and_document_spelling_decide_joins(tmp_path):
    book = tmp_path / "s.txt"
    book.write_text("A co-\noperative farm, as the co-operative people say, and a self-\nmade plan and\n"
                    "a dic\u00ad\ntionary.")
    assert read_book(book) == "A co-operative farm, as the co-operative people say, and a self-made plan and a dictionary."


# -- passages ------------------------------------------------------------------------------

def _words(n, tag):
    return " ".join(f"{tag}{i}" for i in range(n))


def test_passages_pack_paragraphs_and_fill_with_sentences():
    n = 20
    paras = [_words(8, "a"), _words(8, "b"), _words(8, "c"),  # 16 fit, 24 do not: cut at the paragraph
             _words(3, "d") + ". " + "E " + _words(12, "e") + ". F " + _words(5, "f") + ".",
             _words(4, "g")]
    out = cut_passages(paras, n)
    assert [p.split() for p in out][0] == (paras[0] + " " + paras[1]).split()
    # c (8 words, under half of 20 when the next paragraph comes) is filled with the d
    # sentence (4 words) but not with the 13-word e sentence
    assert out[1].split() == (paras[2] + " " + _words(3, "d") + ".").split()
    assert out[1] == paras[2] + "\n" + _words(3, "d") + "."
    # the g paragraph (4 words, < 20/4) is a tail merged into the passage before
    assert out[2].split() == ("E " + _words(12, "e") + ". F " + _words(5, "f") + ". " + paras[4]).split()
    assert out[2].endswith("\n" + paras[4]) and len(out) == 3
    assert " ".join(out).split() == " ".join(paras).split()  # nothing lost, nothing twice


def test_passage_rule_bounds_on_a_long_document():
    import random

    rng = random.Random(5)
    paras = []
    for p in range(60):
        sents = [" ".join(f"w{p}_{s}_{i}" for i in range(rng.randint(1, 40))) + "." for s in range(rng.randint(1, 6))]
        paras.append(" ".join(s[0].upper() + s[1:] for s in sents))
    for n in (16, 50, 128):
        out = cut_passages(paras, n)
        sizes = [len(p.split()) for p in out]
        assert " ".join(out).split() == " ".join(paras).split()
        assert max(sizes[:-1]) <= n and sizes[-1] < n + n / 4
        assert sizes[-1] >= n / 4 or len(out) == 1


def test_overlong_sentences_are_cut_every_n_words_and_sentences_split():
    out = cut_passages([_words(44, "x")], 20)
    assert [len(p.split()) for p in out] == [20, 24]  # 20 + 20 + 4, the 4-word tail (< 20/4) merged
    assert [len(p.split()) for p in cut_passages([_words(45, "x")], 20)] == [20, 20, 5]  # 5 is not < 5
    assert sentences('He said "Go." Then 3 men left! Why? e.g. this') == ['He said "Go."', "Then 3 men left!",
                                                                        "Why? e.g. this"]
    with pytest.raises(ConfigError, match="passage_words"):
        cut_passages(["a b"], 0)


# -- source code, read as written ----------------------------------------------------------

CODE = """import os


def walk(top):
    \"\"\"Every file under top.\"\"\"
    for root, dirs, files in os.walk(top):
        for name in files:
            yield os.path.join(root, name)
"""


def test_code_is_cut_at_line_ends_with_every_line_as_written():
    # words a line: 2, 0, 0, 2, 4, 6, 4, 3, 0; at most 8 words a passage
    out = cut_code(CODE, 8)
    assert out == ["import os\n\n\ndef walk(top):\n    \"\"\"Every file under top.\"\"\"",
                   "    for root, dirs, files in os.walk(top):",
                   "        for name in files:\n            yield os.path.join(root, name)"]
    assert cut_code(CODE, 200) == [CODE.strip("\n")]  # one passage, blank lines and indentation kept
    assert cut_code("x = [" + " 1," * 30 + "]\ny = 2\n", 8) == ["x = [" + " 1," * 30 + "]", "y = 2"]
    with pytest.raises(ConfigError, match="passage_words"):
        cut_code(CODE, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 12)), max_size=40), st.integers(1, 20))
def test_code_passages_keep_every_line_once_in_order_within_the_limit(shape, n):
    lines = [" " * indent + " ".join(f"t{i}_{j}" for j in range(words)) for i, (indent, words) in enumerate(shape)]
    out = cut_code("\n".join(lines), n)
    kept = [line for passage in out for line in passage.split("\n")]
    assert [line for line in kept if line.strip()] == [line for line in lines if line.strip()]
    for passage in out:
        assert passage.split("\n")[0].strip() and passage.split("\n")[-1].strip()  # no blank line at an end
        assert len(passage.split()) <= n or "\n" not in passage  # over the limit: one long line alone


def test_source_files_are_documents_beside_books(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "walk.py").write_text(CODE)
    (repo / "README.txt").write_text(_words(12, "r") + ".")
    (repo / "logo.png").write_bytes(b"\x89PNG")
    (repo / "pkg" / "__init__.py").write_text("")  # every package has one: left out, said
    with pytest.warns(DataWarning) as caught:
        data = load_dataset(repo, passage_words=8)
    said = [str(w.message) for w in caught]
    assert any(".png" in m for m in said)
    assert f"{repo}: 1 source file(s) left out: pkg/__init__.py (empty)" in said
    assert any(m.startswith(f"{repo}: 1 source file(s) read as documents beside 1 book(s) (e.g. pkg/walk.py)")
               for m in said)  # a build script among chapters would be audited: said
    assert {"path": str(repo / "pkg" / "__init__.py"), "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest(),
            "skipped": "empty"} in data.files
    walk = [e for e in data.examples if e.doc_id == "walk"]
    assert [e.text for e in walk] == cut_code(CODE, 8) and walk[0].id == "walk:0001"
    assert {e.doc_id for e in data.examples} == {"walk", "README"}
    (tmp_path / "hollow").mkdir()
    (tmp_path / "hollow" / "__init__.py").write_text("\n")
    with pytest.raises(DataError, match=r"hollow: every file in it was left out \(1 source file, e\.g\. "
                                        r"__init__\.py: empty\)"), pytest.warns(DataWarning):
        load_dataset(tmp_path / "hollow")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf\n\xc2\xa0\n")  # an editor's "empty" file
    with pytest.raises(DataError, match=r"bom\.py is empty \(only whitespace\)"):
        load_dataset(tmp_path / "bom.py")


def test_in_a_folder_a_binary_file_with_a_source_suffix_is_left_out(tmp_path):
    """.ts is TypeScript and MPEG video: in a folder of books, the video is left out, said."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "book.txt").write_text(_words(30, "b") + ".")
    (shelf / "clip.ts").write_bytes(b"\x47\x40\x00\x10" + bytes(184))
    with pytest.warns(DataWarning, match=r"1 source file\(s\) left out: clip\.ts \(not text, though its suffix is a "
                                         r"source file's: looks like a binary file"):
        data = load_dataset(shelf)
    assert {e.doc_id for e in data.examples} == {"book"}
    with pytest.raises(DataError, match="binary"):  # named on its own, it is the user's file: refused
        load_dataset(shelf / "clip.ts")


def test_document_ids_stay_unique_when_a_stem_is_another_files_path(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    for name in ("x.py", "x.txt", "x.py.md", "y.py"):
        (folder / name).write_text(_words(5, name[0]) + ".")
    with pytest.warns(DataWarning, match=r"2 source file\(s\) read as documents beside 2 book\(s\)"):
        data = load_dataset(folder)
    by_source = {Path(e.meta["source"]).name: e.doc_id for e in data.examples}
    assert by_source == {"x.py": "x.py", "x.txt": "x.txt", "x.py.md": "x.py.md", "y.py": "y"}
    files = [folder / n for n in ("a/b.txt", "b.txt", "a/b.txt.md", "c.md")]
    ids = document_ids(files, folder)
    assert len(set(ids)) == 4 and ids[3] == "c"


def test_a_minified_line_is_named_as_a_slow_passage(tmp_path):
    from copyprobe.data.tables import LONG_ROW_WORDS

    (tmp_path / "app.min.js").write_text("var a;\n" + "x=1; " * (LONG_ROW_WORDS + 1) + "\nvar b;\n")
    with pytest.warns(DataWarning, match=rf"passage app\.min:0002 holds {LONG_ROW_WORDS + 1:,} words, one line"):
        data = load_dataset(tmp_path / "app.min.js")
    assert [len(e.text.split()) for e in data.examples] == [2, LONG_ROW_WORDS + 1, 2]
    many = tmp_path / "many.py"
    many.write_text("a = b + c\n" * 4000)  # 20,000 words in short lines: no long line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_dataset(many, passage_words=3 * LONG_ROW_WORDS).examples) == 1
    windows = tmp_path / "crlf.js"
    windows.write_bytes(b"\xef\xbb\xbfif (a) {\r\n\tb();\r\n}\r\n")
    assert [e.text for e in load_dataset(windows).examples] == ["if (a) {\n\tb();\n}"]
    (tmp_path / "empty.go").write_text("\n  \n")
    with pytest.raises(DataError, match=r"empty\.go is empty \(only whitespace\)"):
        load_dataset(tmp_path / "empty.go")
    (tmp_path / "blob.c").write_bytes(b"int x;\x00\x01\x02")
    with pytest.raises(DataError, match=r"blob\.c looks like a binary file"):
        load_dataset(tmp_path / "blob.c")


# -- directories, ids, fingerprints -----------------------------------------------------------

def test_directory_of_books_as_a_dataset(tmp_path):
    shelf = tmp_path / "shelf"
    (shelf / "vol2").mkdir(parents=True)
    write_pdf(shelf / "salt.pdf")
    write_docx(shelf / "orchard.docx")
    (shelf / "notes.txt").write_text(_words(50, "n") + ".")
    (shelf / "vol2" / "notes.md").write_text(_words(10, "m"))
    (shelf / "cover.jpg").write_bytes(b"\xff\xd8\xff")
    (shelf / ".hidden.txt").write_text("never read")
    with pytest.warns(DataWarning, match=r"1 file\(s\) of other types were left out \(\.jpg"):
        data = load_dataset(shelf, passage_words=40)
    docs = {e.doc_id for e in data.examples}
    assert docs == {"salt", "orchard", "notes.txt", "vol2/notes.md"}  # clashing stems get their path
    salt = [e for e in data.examples if e.doc_id == "salt"]
    assert [e.id for e in salt] == [f"salt:{i:04d}" for i in range(1, len(salt) + 1)]
    assert " ".join(e.text for e in salt).split() == " ".join(PDF_PARAGRAPHS).split()
    assert all(e.meta["source"] == str(shelf / "salt.pdf") for e in salt)
    assert data.has_documents and not data.has_labels and data.passage_words == 40
    files = {Path(f["path"]).relative_to(shelf).as_posix(): f for f in data.files}
    assert set(files) == {"salt.pdf", "orchard.docx", "notes.txt", "vol2/notes.md"}
    raw = (shelf / "orchard.docx").read_bytes()
    assert files["orchard.docx"] == {"path": str(shelf / "orchard.docx"), "bytes": len(raw),
                                     "sha256": hashlib.sha256(raw).hexdigest()}
    single = load_dataset(shelf / "notes.txt")
    assert single.sha256 == hashlib.sha256((shelf / "notes.txt").read_bytes()).hexdigest()
    assert [e.id for e in single.examples] == ["notes:0001"] and single.passage_words == 128


def test_data_files_know_their_fingerprint_too(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "one two"}\n')
    data = load_dataset(path)
    assert data.files == [{"path": str(path), "bytes": path.stat().st_size,
                           "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}]
    with pytest.raises(ConfigError, match="passage_words applies only to books"):
        load_dataset(path, passage_words=64)
    book = tmp_path / "b.txt"
    book.write_text("some words")
    with pytest.raises(ConfigError, match="text_column does not apply to the book file"):
        load_dataset(book, text_column="text")


def test_data_modules_import_one_way():
    """readers imports datasets, passages, books and tables; none of those imports readers,
    and datasets does not import passages or books (no cycle, issue 26)."""
    package = Path(__file__).resolve().parents[2] / "copyprobe" / "data"
    graph = {}
    for path in package.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("copyprobe.data"):
                target = node.module.removeprefix("copyprobe.data").lstrip(".")
                found |= {target} if target else {a.name for a in node.names}
        graph[path.stem] = found & {p.stem for p in package.glob("*.py")}

    def reaches(start, goal, seen=()):
        return any(t == goal or (t not in seen and reaches(t, goal, (*seen, t))) for t in graph.get(start, ()))

    assert not any(reaches(module, module) for module in graph if module != "__init__")
    assert "readers" not in graph["datasets"]


# -- bad files ------------------------------------------------------------------------------

def _zip(entries: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, content in entries.items():
            zf.writestr(name, content)
    return buffer.getvalue()


def _bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    good_pdf = write_pdf(tmp_path / "good.pdf")
    bad = tmp_path / "bad"
    bad.mkdir()
    files = {
        "scan.pdf": write_image_pdf(bad / "scan.pdf").read_bytes(),
        "locked.pdf": write_encrypted_pdf(bad / "locked.pdf", good_pdf, "reader-secret").read_bytes(),
        "empty.txt": b"",
        "blank.md": b" \n\t\n",
        "binary.txt": b"abc\x00\x01\x02\xff" * 10,
        "garbage.pdf": b"this is not a pdf at all",
        "truncated.pdf": good_pdf.read_bytes()[:300],
        "broken.epub": b"PK\x03\x04 not really a zip",
        "drm.epub": write_epub(bad / "drm.epub", {"META-INF/encryption.xml":
                    '<encryption><EncryptedData><CipherData><CipherReference URI="OPS/one.xhtml"/>'
                    '</CipherData></EncryptedData></encryption>'}).read_bytes(),
        "broken.docx": _zip({"[Content_Types].xml": "<Types/>"}),
        "old.docx": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100,
        "notes.xyz": b"some text",
    }
    messages = {
        "scan.pdf": "has no text layer .*run OCR first", "locked.pdf": "encrypted .*password",
        "empty.txt": r"is empty \(0 bytes\)", "blank.md": "is empty", "binary.txt": "binary file",
        "garbage.pdf": "not a PDF file", "truncated.pdf": "PDF", "broken.epub": "cannot read EPUB",
        "drm.epub": "DRM-protected", "broken.docx": "cannot read DOCX", "old.docx": "old-format",
        "notes.xyz": r"unsupported data file type '\.xyz'.*books \(\.txt.*or source code \(\.py",
    }
    out = []
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content)
        out.append((path, messages[name]))
    return out


def test_each_bad_file_is_one_line_naming_it(tmp_path):
    for path, message in _bad_files(tmp_path):
        with pytest.raises(DataError) as info:
            load_dataset(path)
        text = str(info.value)
        assert "\n" not in text and str(path) in text, text
        assert re.search(message, text), (path.name, text)


def test_owner_only_encryption_is_still_readable(tmp_path):
    locked = write_encrypted_pdf(tmp_path / "owner.pdf", write_pdf(tmp_path / "a.pdf"), "")
    assert read_book(locked).split("\n\n") == PDF_PARAGRAPHS


def test_empty_and_bookless_directories(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no book or source files"):
        load_dataset(empty)
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "a.txt").write_text("fine words here")
    (shelf / "b.pdf").write_bytes(b"%PDF-1.4 broken")
    with pytest.raises(DataError, match=r"b\.pdf"):
        load_dataset(shelf)  # one bad book fails the whole directory, naming it


@pytest.fixture
def fake_model(monkeypatch):
    from copyprobe.backends.fake import FakeBackend

    fake = FakeBackend(spec="fake-books")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)
    return fake


def test_bad_files_through_the_cli_exit_2_with_one_line(tmp_path, capsys, fake_model):
    for path, message in _bad_files(tmp_path):
        out = tmp_path / f"run-{path.name}"
        code = main(["detect", "--model", "fake", "--data", str(path), "--methods", "loss", "--out", str(out),
                     "--no-cache", "--no-progress", "--bootstrap", "0"])
        err = capsys.readouterr().err
        assert code == 2, (path.name, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("copyprobe: error:") and str(path) in lines[0], err
        assert "Traceback" not in err
        assert not out.exists() or not any(out.iterdir())  # nothing written
    assert fake_model.calls == {}


def test_detect_on_a_directory_of_a_pdf_and_a_docx(tmp_path, capsys, fake_model):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    write_pdf(shelf / "salt.pdf")
    write_docx(shelf / "orchard.docx")
    out = tmp_path / "run"
    code = main(["detect", "--model", "fake", "--data", str(shelf), "--methods", "loss,zlib", "--passage-words", "30",
                 "--out", str(out), "--no-cache", "--no-progress", "--bootstrap", "0"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    ids = [r["id"] for r in rows]
    expected_salt = cut_passages(PDF_PARAGRAPHS, 30)
    assert ids == [f"orchard:{i:04d}" for i in range(1, 2)] + [f"salt:{i:04d}" for i in range(1, len(expected_salt) + 1)]
    assert all(r["loss"] is not None for r in rows)
    assert fake_model.calls["token_logprobs"] == len(rows)
    code = main(["detect", "--model", "fake", "--data", str(shelf), "--passage-words", "0", "--out", str(out)])
    assert code == 2 and "--passage-words" in capsys.readouterr().err


# -- damaged files never raise anything but a one-line DataError ---------------------------------

@functools.cache
def good_books() -> dict[str, bytes]:
    """Valid files of each type, written once (a hypothesis test cannot take tmp_path)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        return {".pdf": write_pdf(root / "a.pdf").read_bytes(), ".docx": write_docx(root / "a.docx").read_bytes(),
                ".epub": write_epub(root / "a.epub").read_bytes(),
                ".html": b"<html><body><p>Chapter one.</p><div>Two &amp; three</div></body></html>",
                ".md": "# Title\n\nSome *text* [x](y) here,\nwrapped.\n".encode(),
                ".txt": b"A hard-\nwrapped line.\n\nNext."}


@pytest.mark.filterwarnings("ignore::copyprobe.errors.DataWarning")  # pages left without text
@given(suffix=st.sampled_from([".pdf", ".docx", ".epub", ".html", ".md", ".txt"]),
       edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 64), st.binary(max_size=16)), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_damaged_books_give_text_or_one_line(suffix, edits):
    data = bytearray(good_books()[suffix])
    for where, cut, piece in edits:  # replace `cut` bytes at a point with `piece`
        at = int(where * len(data))
        data[at:at + cut] = piece
    name = f"damaged{suffix}"
    try:
        paragraphs = book_paragraphs(bytes(data), name)
    except DataError as exc:
        assert "\n" not in str(exc) and name in str(exc)
    else:
        assert paragraphs and all(p and "\n" not in p and p == p.strip() for p in paragraphs)


def test_a_book_named_with_bytes_that_are_not_utf8_is_a_document_with_a_printable_id(tmp_path):
    """Python reads such a name (a Latin-1 file on a Linux disk) as lone surrogates, which
    neither the listing's hash nor pandas' strings take: the folder failed to load, or the
    run failed after scoring, with 'cannot encode or decode text'."""
    import os

    import copyprobe
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.data.passages import read_books

    folder = tmp_path / "books"
    folder.mkdir()
    try:
        (folder / os.fsdecode(b"caf\xe9.txt")).write_text("The lamp keeper climbed the stair at night. " * 30)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    (folder / "plain.txt").write_text("Waves broke on the rocks below the light. " * 30)
    dataset = read_books(folder, passage_words=32)
    assert sorted({e.doc_id for e in dataset.examples}) == ["caf\\xe9", "plain"]
    assert len(dataset.sha256) == 64
    result = copyprobe.detect(FakeBackend(), folder, ["loss"], out=tmp_path / "run", cache=False, progress=False)
    assert result.scores.shape[0] == len(read_books(folder).examples)  # at detect's default length
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert any(f["path"].endswith(os.fsdecode(b"caf\xe9.txt")) for f in run["data"]["files"])
    (folder / "caf\\xe9.txt").write_text("A name spelled as the other one prints. " * 30)
    with pytest.raises(DataError, match=r"two files give the document id 'caf.*xe9.txt'.*rename one"):
        read_books(folder)  # their passages would have been pooled as one document


def test_read_text_names_the_byte_it_cannot_decode_after_a_byte_order_mark(tmp_path):
    from copyprobe.data.books import read_text
    from copyprobe.errors import DataError

    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfab\xe9cd")
    with pytest.raises(DataError, match=r"bom\.txt is not UTF-8 text \(byte 0xe9 at byte offset 5\)"):
        read_text(tmp_path / "bom.txt")  # utf-8-sig counts after the mark: it said 0xbf at 2
    (tmp_path / "plain.txt").write_bytes(b"ab\xe9cd")
    with pytest.raises(DataError, match=r"byte 0xe9 at byte offset 2\)"):
        read_text(tmp_path / "plain.txt")
