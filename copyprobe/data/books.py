"""Reading books: plain text, Markdown, HTML, EPUB, PDF and DOCX files as cleaned text.

:func:`read_book` is the one entry point: ``read_book(path) -> str`` gives the text of
any supported file, cleaned, with paragraphs separated by a blank line and no line
breaks inside a paragraph. Every problem with a file (empty, binary, not UTF-8, a
scanned or encrypted PDF, a damaged archive, an unsupported type) is a one-line
:class:`~copyprobe.errors.DataError` naming the file. docs/input-files.md describes the
formats and the cleaning; in short:

* ``.txt``/``.text`` (UTF-8): blank lines separate paragraphs, the lines inside one are
  joined. A file without blank lines is read one paragraph per line when its lines are
  long (median over 100 characters), else as hard-wrapped text (the PDF rule below).
* ``.md``/``.markdown``: as text, after the Markdown syntax is taken out (front matter,
  heading and list markers, emphasis, links keep their text, images and HTML tags go).
* ``.html``/``.htm``/``.xhtml``: the visible text; every block element (p, div, li, h1 ...)
  is a paragraph. UTF-8, or the charset the file declares.
* ``.epub``: the chapters in spine order, each read as HTML; DRM-encrypted chapters are
  refused.
* ``.pdf`` (pypdf, text layer only): running headers and footers, page numbers removed;
  two-column pages read column by column; lines unwrapped into paragraphs (a new paragraph after a blank line, at an indented
  line, or after a short line).
* ``.docx`` (python-docx): the body paragraphs and table rows in order (headers,
  footers and footnotes are not part of the body).

A Project Gutenberg file keeps only the book: what stands between its "*** START OF THE
PROJECT GUTENBERG EBOOK ..." and "*** END OF ..." lines (:func:`strip_gutenberg`).

Then, for every format: Unicode fixed with ftfy (mojibake, ligatures, character width;
quotes are left as they are) and NFKC-normalised; in PDF and text files a word broken
across lines with a hyphen is joined ("exam-/ple" -> "example") unless the hyphen is
real ("well-/known" -> "well-known"); soft hyphens and zero-width spaces removed;
runs of spaces collapsed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import re
import statistics
import warnings
import zipfile
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator
from xml.etree import ElementTree

from copyprobe.data.tables import _decode, _utf16_without_mark
from copyprobe.errors import DataError, DataWarning, one_line
from copyprobe.files import binary_controls, too_many_controls

TEXT_SUFFIXES = (".txt", ".text", ".md")  # plain-text books of `copyprobe plant` corpora
EPUB_SUFFIXES = (".epub",)
PLAIN_SUFFIXES = (".txt", ".text")
MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
PDF_SUFFIXES = (".pdf",)
DOCX_SUFFIXES = (".docx",)
BOOK_SUFFIXES = PLAIN_SUFFIXES + MARKDOWN_SUFFIXES + HTML_SUFFIXES + EPUB_SUFFIXES + PDF_SUFFIXES + DOCX_SUFFIXES
BOOK_TYPES = ".txt, .md, .epub, .pdf, .docx, .html/.htm"  # for messages
# source files: read as written (line breaks and indentation are what a model trained on),
# cut at line ends by copyprobe.data.passages.cut_code, not into paragraphs
CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".js", ".mjs", ".jsx", ".ts", ".tsx", ".java", ".kt",
                 ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".swift",
                 ".m", ".r", ".jl", ".lua", ".pl", ".sh", ".bash", ".sql", ".hs", ".ml", ".ex", ".erl", ".dart")
CODE_TYPES = "source code (.py, .js, .ts, .java, .c, .cpp, .go, .rs and more)"  # for messages

_BLOCK_TAGS = {
    "p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "blockquote",
    "section", "article", "pre", "hr", "dd", "dt", "table", "ul", "ol",
}
_SKIP_TAGS = {"script", "style", "head", "title", "nav"}


class _TextExtractor(HTMLParser):
    def __init__(self, collapse: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0
        # collapse: source line breaks are spaces (paragraphs come from block elements only)
        self.collapse = collapse

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
            self.parts.append(re.sub(r"\s+", " ", data) if self.collapse else data)


def html_to_text(markup: str) -> str:
    """Visible text of an (X)HTML document; block elements become line breaks."""
    parser = _TextExtractor()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.parts)
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def html_paragraphs(markup: str) -> list[str]:
    """The paragraphs of an (X)HTML document: one per block element, whitespace collapsed."""
    parser = _TextExtractor(collapse=True)
    parser.feed(markup)
    parser.close()
    return [p.strip() for p in "".join(parser.parts).split("\n") if p.strip()]


# -- EPUB ------------------------------------------------------------------------------

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


def _encrypted_members(zf: zipfile.ZipFile) -> set[str]:
    """Archive members that META-INF/encryption.xml lists as encrypted (DRM, or fonts
    obfuscated by the IDPF/Adobe scheme, which only matters for chapters)."""
    try:
        root = ElementTree.fromstring(zf.read("META-INF/encryption.xml"))
    except (KeyError, ElementTree.ParseError):
        return set()
    return {posixpath.normpath(el.attrib["URI"]) for el in root.iter()
            if el.tag.endswith("CipherReference") and "URI" in el.attrib}


def _epub_chapters(source, name: str) -> list[str]:
    """The (X)HTML markup of each chapter in reading order."""
    try:
        with zipfile.ZipFile(source) as zf:
            spine = _spine(zf)
            locked = _encrypted_members(zf) & set(spine)
            if locked:
                raise DataError(f"EPUB {name} is DRM-protected ({len(locked)} of {len(spine)} chapters are "
                                f"encrypted, e.g. {sorted(locked)[0]}); use a copy without DRM")
            return [zf.read(n).decode("utf-8", errors="replace") for n in spine]
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, UnicodeDecodeError, NotImplementedError,
            RuntimeError, ValueError) as exc:  # damaged archive, member names or compressed data; encrypted
        raise DataError(f"cannot read EPUB {name}: {one_line(exc)}") from None


def read_epub(path: str | Path) -> str:
    """The text of an EPUB book, chapters in reading order separated by blank lines
    (lines as :func:`html_to_text` gives them; not cleaned, see :func:`read_book`)."""
    p = Path(path)
    chapters = [html_to_text(markup) for markup in _epub_chapters(p, str(p))]
    text = "\n\n".join(c for c in chapters if c)
    if not text.strip():
        raise DataError(f"EPUB {p} has no text (no XHTML chapters found)")
    return text


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's content, without a byte-order mark."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {p}: {exc.strerror or exc}") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or _utf16_without_mark(raw):
        raise DataError(f"{p} is UTF-16 encoded; save it as UTF-8")  # "not UTF-8 text (byte 0)" before
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)  # utf-8-sig counts after its mark
        raise DataError(f"{p} is not UTF-8 text (byte 0x{raw[offset]:02x} at byte offset {offset})") from None
    return _refuse_binary(text, str(p))


def _refuse_binary(text: str, name: str) -> str:
    """``text``, or one DataError when it is binary data that happens to decode (NUL bytes
    are valid UTF-8): the one rule of every reader of text files."""
    controls = binary_controls(text)
    if too_many_controls(controls, len(text)):
        raise DataError(f"{name} looks like a binary file, not text ({controls} control characters)")
    return text


# -- decoding text files ----------------------------------------------------------------

def _decode_text(raw: bytes, name: str, fallback: str | None = None) -> str:
    """UTF-8 text (as data files are read), or ``fallback`` (an HTML file's declared
    charset) when it is not UTF-8; binary content is refused."""
    try:
        text = _decode(raw, name)
    except DataError:
        if not fallback or b"\x00" in raw or raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise
        try:
            text = raw.decode(fallback)
        except (LookupError, UnicodeDecodeError):
            raise DataError(f"{name} is neither UTF-8 nor the {fallback!r} it declares") from None
    return _refuse_binary(text, name).replace("\r\n", "\n").replace("\r", "\n")  # Windows and old Mac line ends


def _declared_charset(raw: bytes) -> str | None:
    match = re.search(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", raw[:4096], re.I)
    return match.group(1).decode("ascii") if match else None


# -- Markdown --------------------------------------------------------------------------

_MD_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_MD_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_MD_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$")
_MD_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_MD_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")


def _md_inline(line: str) -> str:
    line = re.sub(r"!\[([^\]]*)\]\([^)]*\)", "", line)  # images
    line = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", line)  # links keep their text
    line = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", line)  # reference links
    line = re.sub(r"<[^>\n]+>", "", line)  # inline HTML
    line = re.sub(r"`+([^`]*)`+", r"\1", line)
    line = re.sub(r"(\*\*|__)(\S(?:.*?\S)?)\1", r"\2", line)
    line = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])", r"\1", line)
    line = re.sub(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)", r"\1", line)  # not inside snake_case words
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!>])", r"\1", line)


def markdown_to_text(text: str) -> str:
    """Markdown as plain text, blank lines between paragraphs (headings and list items
    are paragraphs of their own)."""
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            lines = lines[end + 1:]
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        m = _MD_FENCE.match(line)
        if m:
            fence = None if fence and m.group(1)[0] == fence else (fence or m.group(1)[0])
            out.append("")
            continue
        if fence:
            out.append(line)
            continue
        line = re.sub(r"^\s{0,3}(>\s?)+", "", line)  # block quotes
        if _MD_RULE.match(line) or _MD_REFDEF.match(line):
            out.append("")
            continue
        if _MD_SETEXT.match(line) and out and out[-1].strip():
            out.append("")  # the underline of a heading written on the line above
            continue
        heading = _MD_HEADING.match(line)
        if heading:
            out += ["", _md_inline(heading.group(1)), ""]
            continue
        item = _MD_ITEM.match(line)
        if item:
            out += ["", _md_inline(line[item.end():])]
            continue
        out.append(_md_inline(line))
    return "\n".join(out)


# -- PDF -------------------------------------------------------------------------------

@contextlib.contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """pypdf reports damaged-but-readable files through logging and warnings; those would
    reach the terminal as multi-line noise, so they are silenced while a PDF is read."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _pdf_pages(raw: bytes, name: str) -> list[str]:
    """The text of each page (pypdf's layout mode: lines in reading order with their
    indentation, top to bottom, so headers come first and footers last)."""
    if b"%PDF-" not in raw[:1024]:
        raise DataError(f"{name} is not a PDF file (no %PDF header)")
    import pypdf
    from pypdf.errors import DependencyError

    with _quiet_pypdf():
        try:
            reader = pypdf.PdfReader(io.BytesIO(raw))
            if reader.is_encrypted:
                try:
                    opened = reader.decrypt("")  # only restricts printing/copying: readable
                except DependencyError:
                    raise DataError(f"{name} is an encrypted PDF that needs the 'cryptography' package to "
                                    f"open (pip install cryptography)") from None
                if not opened:
                    raise DataError(f"{name} is an encrypted (password-protected) PDF; save a copy "
                                    f"without the password and read that")
            pages = []
            for page in reader.pages:
                try:
                    text = page.extract_text(extraction_mode="layout")
                except Exception:  # layout mode fails on some fonts; plain mode still reads the text
                    text = page.extract_text()
                pages.append(text or "")
        except DataError:
            raise
        except Exception as exc:  # pypdf raises many types (and plain KeyError/ValueError) on damaged files
            raise DataError(f"cannot read PDF {name}: {one_line(exc)}") from None
    if not pages:
        raise DataError(f"PDF {name} has no pages")
    if not any(p.strip() for p in pages):
        raise DataError(f"{name} has no text layer (a scanned or image-only PDF); run OCR first")
    blank = [i + 1 for i, p in enumerate(pages) if not p.strip()]
    if blank and len(pages) > 1:
        warnings.warn(DataWarning(
            f"{name}: {len(blank)} of {len(pages)} pages have no text layer (e.g. page {blank[0]}; "
            f"scanned pages?); their text is missing"), stacklevel=4)
    return pages


_ROMAN = re.compile(r"m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})", re.I)
_PAGE_NUMBER = re.compile(r"^[\s\-–—|]*(?:page\s+)?(\w+)(?:\s*(?:of|/)\s*\d{1,5})?[\s\-–—|]*$", re.I)
EDGE_LINES = 3  # lines looked at, at the top and at the bottom of a page
NEIGHBOURS = 2  # pages either side where a running header/footer must repeat


def _is_page_number(line: str, top: bool) -> bool:
    """A bare page number: "12", "- 12 -", "Page 3", "Page 3 of 10", "3 / 10", "xii".
    Upper-case roman numerals count only at the bottom (at the top they name chapters)."""
    m = _PAGE_NUMBER.match(line)
    if not m:
        return False
    core = m.group(1)
    if core.isdigit():
        return len(core) <= 5
    if not _ROMAN.fullmatch(core):
        return False
    return core.islower() or not top


def _edge_key(line: str) -> str:
    """A line as compared between pages: case, spacing and numbers ignored."""
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


def strip_page_furniture(pages: list[list[str]]) -> list[list[str]]:
    """Pages without running headers/footers and page numbers.

    At each edge (top, bottom) of a page, up to ``EDGE_LINES`` non-blank lines are removed
    while each is a page number or a running line: the same line (numbers, case and
    spacing ignored) is among the ``EDGE_LINES`` lines at the same edge of a page at most
    ``NEIGHBOURS`` pages away (so headers that alternate between left and right pages count).
    """
    def edge(lines: list[str], top: bool) -> list[int]:
        idx = [i for i, line in enumerate(lines) if line.strip()]
        return idx[:EDGE_LINES] if top else idx[::-1][:EDGE_LINES]

    keys = {top: [{_edge_key(p[i]) for i in edge(p, top)} for p in pages] for top in (True, False)}
    out = []
    for n, lines in enumerate(pages):
        drop: set[int] = set()
        for top in (True, False):
            near = set().union(*(keys[top][j] for j in range(max(0, n - NEIGHBOURS),
                                                            min(len(pages), n + NEIGHBOURS + 1)) if j != n))
            for i in edge(lines, top):
                if i in drop:
                    break
                if _is_page_number(lines[i], top) or _edge_key(lines[i]) in near:
                    drop.add(i)
                else:
                    break
        out.append([line for i, line in enumerate(lines) if i not in drop])
    return out


COLUMN_GAP = 3  # spaces between the columns of a two-column page, at least
COLUMN_SHARE = 0.6  # of the page's lines that must show the gap at the same place


def split_columns(lines: list[str]) -> list[str]:
    """A page's layout-mode lines in reading order: when most lines have a run of spaces
    covering the same position (a two-column page), the left column's lines come first,
    then the right column's (dedented); other pages come back as they are."""
    body = [line for line in lines if line.strip()]
    if len(body) < 4:
        return lines
    votes: Counter[int] = Counter()
    for line in body:
        for gap in re.finditer(r"(?<=\S) {%d,}(?=\S)" % COLUMN_GAP, line):
            votes.update(range(gap.start(), gap.end()))
    if not votes:
        return lines
    most = max(votes.values())
    if most < COLUMN_SHARE * len(body):
        return lines
    where = [x for x, n in votes.items() if n == most]
    cut = where[len(where) // 2]
    left = [line[:cut].rstrip() for line in lines]
    right = [line[cut:] for line in lines]
    indent = min(len(r) - len(r.lstrip()) for r in right if r.strip())
    return left + [r[indent:].rstrip() for r in right]


# -- lines to paragraphs ---------------------------------------------------------------

_HYPHEN_END = re.compile(r"([^\W\d_]+)([-\u2010\u00ad])$")
# first parts of common hyphenated compounds: "well-/known" keeps its hyphen when the
# document itself does not say otherwise
COMPOUND_HEADS = frozenset(
    "well self ill half all ever never long short high low non ex great full much far near so "
    "one two three four five six seven eight nine ten twenty thirty forty fifty sixty seventy "
    "eighty ninety first second third old new open free cross semi quasi vice".split())


def _vocabulary(lines: list[str]) -> Counter[str]:
    """Words (and hyphenated compounds) of the document as written inside lines."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(re.findall(r"[^\W\d_]+(?:[-\u2010][^\W\d_]+)*", line.lower()))
    return counts


def _join_hyphenated(first: str, hyphen: str, second: str, vocab: Counter[str]) -> bool:
    """Whether "first-" at a line end and "second" on the next line are one word broken
    by typesetting (True) or a real compound (False): a soft hyphen always joins; else
    the document's own spelling decides; else compounds of COMPOUND_HEADS keep the hyphen."""
    if hyphen == "\u00ad":
        return True
    joined, compound = (first + second).lower(), f"{first}-{second}".lower()
    if vocab[joined] != vocab[compound]:
        return vocab[joined] > vocab[compound]
    return first.lower() not in COMPOUND_HEADS


def _join_lines(lines: list[str], vocab: Counter[str] | None) -> str:
    """One paragraph from its lines; with ``vocab`` (hard-wrapped sources) hyphenated
    line breaks are resolved."""
    text = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        hyphen = _HYPHEN_END.search(text) if vocab is not None else None
        if hyphen and line[0].isalpha() and line[0].islower():
            second = re.match(r"[^\W\d_]+", line).group(0)
            if _join_hyphenated(hyphen.group(1), hyphen.group(2), second, vocab):
                text = text[: hyphen.end(1)] + line
            else:
                text = text[: hyphen.end(1)] + "-" + line
        elif hyphen and not line[0].isspace() and line[0].isalnum():
            text = text[: hyphen.end(1)] + "-" + line  # "Anglo-/Saxon", "pre-/1990"
        else:
            text = f"{text} {line}" if text else line
    return text


def _wrapped_paragraphs(lines: list[str], vocab: Counter[str]) -> list[list[str]]:
    """Hard-wrapped lines (a PDF, a text file without blank lines) grouped into paragraphs:
    a paragraph ends at a blank line, before a line indented beyond the usual left margin,
    and after a line shorter than 70% of a full line (the 75th percentile of lengths);
    never after a line that ends in a word and a hyphen when the next starts in lower case."""
    texts = [" ".join(line.split()) for line in lines]
    lengths = sorted(len(t) for t in texts if t)
    if not lengths:
        return []
    full = lengths[int(0.75 * (len(lengths) - 1))]
    indents = [len(line) - len(line.lstrip()) for line in lines]
    margin = Counter(i for i, t in zip(indents, texts) if t).most_common(1)[0][0]
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for k, text in enumerate(texts):
        if not text:
            if current:
                paragraphs.append(current)
                current = []
            continue
        if current:
            prev = current[-1]
            continued = _HYPHEN_END.search(prev) and text[0].islower()
            if not continued and (indents[k] > margin + 1 or len(prev) < 0.7 * full):
                paragraphs.append(current)
                current = []
        current.append(text)
    if current:
        paragraphs.append(current)
    return paragraphs


def _blank_line_paragraphs(text: str) -> list[list[str]]:
    """Paragraphs separated by blank lines; a text without any is read one paragraph per
    line when its lines are long, else as hard-wrapped lines."""
    lines = text.split("\n")
    body = [line for line in lines if line.strip()]
    has_blank = any(not line.strip() for line in text.strip().split("\n"))
    if has_blank:
        blocks = re.split(r"\n[ \t\f\v]*\n", text)
        return [[line for line in block.split("\n") if line.strip()] for block in blocks if block.strip()]
    if body and statistics.median(len(line.strip()) for line in body) > 100:
        return [[line] for line in body]
    return _wrapped_paragraphs(lines, _vocabulary(lines))


# -- Unicode ---------------------------------------------------------------------------

def fix_unicode(text: str) -> str:
    """ftfy's fixes (mojibake, HTML entities left in text, ligatures, full-width forms,
    line-break characters) with NFKC normalisation; curly quotes stay curly."""
    import ftfy

    return ftfy.fix_text(text, uncurl_quotes=False, normalization="NFKC")


def _finish(paragraph: str) -> str:
    paragraph = paragraph.replace("\u00ad", "").replace("\u200b", "").replace("\ufeff", "")
    return " ".join(paragraph.split())


# -- per format ------------------------------------------------------------------------

def _pdf_text(raw: bytes, name: str) -> list[str]:
    pages = [fix_unicode(p).split("\n") for p in _pdf_pages(raw, name)]
    lines: list[str] = []
    for page in strip_page_furniture(pages):
        body = [line.rstrip() for line in split_columns(page)]
        while body and not body[-1]:  # the space above a removed footer is no paragraph break
            body.pop()
        lines += body[next((i for i, line in enumerate(body) if line), len(body)):]
    vocab = _vocabulary(lines)
    return [_join_lines(p, vocab) for p in _wrapped_paragraphs(lines, vocab)]


def _docx_text(raw: bytes, name: str) -> list[str]:
    if raw.startswith(b"\xd0\xcf\x11\xe0"):
        raise DataError(f"{name} is a password-protected or old-format (.doc) Word file, not a .docx; "
                        f"save it as .docx without a password")
    if not raw.startswith(b"PK"):
        raise DataError(f"{name} is not a DOCX file (not a zip archive)")
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(raw))
        paragraphs = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                for row in block.rows:
                    cells: list[str] = []
                    for cell in row.cells:  # a merged cell repeats in each column it spans
                        if not cells or cell.text != cells[-1]:
                            cells.append(cell.text)
                    paragraphs.append(" ".join(cells))
            else:
                paragraphs.append(block.text)
    except Exception as exc:  # python-docx/lxml raise many types on a damaged package
        raise DataError(f"cannot read DOCX {name}: {one_line(exc)}") from None
    return [fix_unicode(p) for p in paragraphs]


def _html_text(markup: str) -> list[str]:
    return [fix_unicode(p) for p in html_paragraphs(markup)]


def _plain_text(text: str) -> list[str]:
    text = fix_unicode(text)
    blocks = _blank_line_paragraphs(text)
    vocab = _vocabulary([line for block in blocks for line in block])
    return [_join_lines(block, vocab) for block in blocks]


def empty_file_error(raw: bytes, name: str) -> DataError:
    """"notes.txt is empty (0 bytes)" / "(only whitespace)", for a book or a source file."""
    return DataError(f"{name} is empty" + (" (0 bytes)" if not raw else " (only whitespace)"))


def book_paragraphs(raw: bytes, name: str) -> list[str]:
    """The cleaned paragraphs of a book file's content (``name`` gives its type and is
    used in messages)."""
    suffix = Path(name).suffix.lower()
    if suffix not in BOOK_SUFFIXES:
        raise DataError(f"{name}: unsupported book file type {suffix or '(no extension)'!r}; "
                        f"books: {BOOK_TYPES}")
    if not raw.strip():
        raise empty_file_error(raw, name)
    if suffix in PDF_SUFFIXES:
        paragraphs = _pdf_text(raw, name)
    elif suffix in DOCX_SUFFIXES:
        paragraphs = _docx_text(raw, name)
    elif suffix in EPUB_SUFFIXES:
        paragraphs = [p for markup in _epub_chapters(io.BytesIO(raw), name) for p in _html_text(markup)]
    elif suffix in HTML_SUFFIXES:
        paragraphs = _html_text(_decode_text(raw, name, _declared_charset(raw)))
    elif suffix in MARKDOWN_SUFFIXES:
        paragraphs = _plain_text(markdown_to_text(_decode_text(raw, name)))
    else:
        paragraphs = _plain_text(_decode_text(raw, name))
    paragraphs = strip_gutenberg([p for p in (_finish(p) for p in paragraphs) if p], name)
    if not paragraphs:
        raise DataError(f"{name} has no text")
    return paragraphs


_GUTENBERG_START = re.compile(r"\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK", re.IGNORECASE)
_GUTENBERG_END = re.compile(r"\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK", re.IGNORECASE)


def strip_gutenberg(paragraphs: list[str], name: str) -> list[str]:
    """The paragraphs between a Project Gutenberg file's START and END lines, said in a
    warning; all of them when there is no START line. The header and the licence after
    the book are the same words in tens of thousands of files, which every model trained
    on the web has read many times: left in, they would be passages "found" in any
    Gutenberg book (an audit's evidence of training that is the licence's, not the
    book's), and a copying test's first items would be the header."""
    start = next((i for i, p in enumerate(paragraphs) if _GUTENBERG_START.search(p)), None)
    if start is None:
        return paragraphs
    end = next((i for i in range(start + 1, len(paragraphs)) if _GUTENBERG_END.search(paragraphs[i])),
               len(paragraphs))
    warnings.warn(DataWarning(f"{name}: a Project Gutenberg file: its header ({start + 1} paragraph(s)) and what "
                              f"follows its END line ({len(paragraphs) - end} paragraph(s)) are left out"))
    return paragraphs[start + 1:end]


def code_text(raw: bytes, name: str) -> str:
    """A source file's text as written (UTF-8, a byte-order mark dropped, line ends made
    ``\n``; binary content refused), for :func:`copyprobe.data.passages.cut_code`; "" when
    it holds nothing but whitespace (the caller says what that means)."""
    if not raw:
        return ""
    text = _decode_text(raw, name)
    return text if text.strip() else ""


def read_book(path: str | Path) -> str:
    """The cleaned text of a book file of any supported type (see the module doc):
    paragraphs separated by a blank line, none empty. Problems are one-line DataErrors."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {p}: {exc.strerror or exc}") from None
    return "\n\n".join(book_paragraphs(raw, str(p)))
