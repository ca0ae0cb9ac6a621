"""Reading books: plain text and EPUB, for ``copyprobe plant`` corpora and copying
evaluations built from a book. Standard library only.

EPUB files are zip archives of XHTML: the chapters are read in spine order (from the
OPF package file; all (X)HTML files in name order when there is none) and their tags
stripped with the standard library's HTML parser; block elements become line breaks and
chapters are separated by a blank line. Text files must be UTF-8 (a byte-order mark is
dropped).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

from copyprobe.errors import DataError, one_line

TEXT_SUFFIXES = (".txt", ".text", ".md")
EPUB_SUFFIXES = (".epub",)

_BLOCK_TAGS = {
    "p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "blockquote",
    "section", "article", "pre", "hr", "dd", "dt", "table", "ul", "ol",
}
_SKIP_TAGS = {"script", "style", "head", "title"}


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        tag = tag.lower()
        if tag in _SKIP_TAGS:
            self.skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_startendtag(self, tag, attrs):
        if tag.lower() in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        tag = tag.lower()
        if tag in _SKIP_TAGS:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """Visible text of an (X)HTML document; block elements become line breaks."""
    parser = _TextExtractor()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _spine(zf: zipfile.ZipFile) -> list[str]:
    """Chapter file names in reading order."""
    names = set(zf.namelist())
    try:
        container = ElementTree.fromstring(zf.read("META-INF/container.xml"))
        rootfile = next(el for el in container.iter() if el.tag.endswith("rootfile"))
        opf_path = rootfile.attrib["full-path"]
        opf = ElementTree.fromstring(zf.read(opf_path))
        base = posixpath.dirname(opf_path)
        manifest = {
            el.attrib.get("id"): el.attrib.get("href", "")
            for el in opf.iter() if el.tag.endswith("}item") or el.tag == "item"
        }
        order = []
        for el in opf.iter():
            if el.tag.endswith("itemref") and el.attrib.get("idref") in manifest:
                href = manifest[el.attrib["idref"]].split("#")[0]
                path = posixpath.normpath(posixpath.join(base, href)) if base else posixpath.normpath(href)
                if path in names:
                    order.append(path)
        if order:
            return order
    except (KeyError, StopIteration, ElementTree.ParseError):
        pass
    return sorted(n for n in names if n.lower().endswith((".xhtml", ".html", ".htm")))


def read_epub(path: str | Path) -> str:
    """The text of an EPUB book, chapters in reading order separated by blank lines."""
    p = Path(path)
    try:
        with zipfile.ZipFile(p) as zf:
            chapters = []
            for name in _spine(zf):
                raw = zf.read(name)
                chapters.append(html_to_text(raw.decode("utf-8", errors="replace")))
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, UnicodeDecodeError, NotImplementedError,
            RuntimeError, ValueError) as exc:  # damaged archive, member names or compressed data; encrypted
        raise DataError(f"cannot read EPUB {p}: {one_line(exc)}") from None
    text = "\n\n".join(c for c in chapters if c)
    if not text.strip():
        raise DataError(f"EPUB {p} has no text (no XHTML chapters found)")
    return text


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's content, without a byte-order mark."""
    p = Path(path)
    try:
        return p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{p} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"cannot read {p}: {exc.strerror or exc}") from None


def read_book(path: str | Path) -> str:
    """The text of a book: an ``.epub`` file by its chapters, anything else as UTF-8 text.
    A book without text is an error."""
    p = Path(path)
    if p.suffix.lower() in EPUB_SUFFIXES:
        return read_epub(p)
    text = read_text(p)
    if not text.strip():
        raise DataError(f"{p} is empty")
    return text
