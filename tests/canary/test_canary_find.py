"""A marked document reformatted as a publisher would still gives the canary's position
(`canary find`) and the same `canary test` result: one test per transformation and per
file type."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import textwrap
import zipfile

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.canary.find import file_text, find_canaries, find_in_text
from copyprobe.canary.kit import make_kit
from copyprobe.canary.normalise import normalise, normalised_text
from copyprobe.canary.scoring import canary_test
from copyprobe.cli.main import main

PARAGRAPHS = [
    "The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to "
    "the wall, and the nets hung drying in long grey rows above the slipway. Nobody in the village "
    "expected the storm that came in the second week of February.",
    "Margaret Fielding kept the chandlery at the end of the quay. She sold rope, tar, lamp oil and "
    "biscuits, and she knew the name of every boat that had ever been built on that coast. In the "
    "evenings she wrote up her ledgers by the stove while the wind rattled the shutters.",
    "It was her brother who first noticed the change in the weather. He had come down from the farm to "
    "fetch a coil of rope, and he stood for a long time at the door, looking at the sky over the "
    "headland. The gulls had gone inland before noon, and the swell was running higher than the "
    "fishermen liked.",
    '"It will blow hard tonight," he said at last. "You\'d best put the shutters up on the sea-facing side."',
    "Margaret didn't argue with him. She closed the shop early, carried the lamp-oil into the back room "
    "and barred the door against the sea-wind.",
    "By evening the whole village had gathered on the harbour wall to watch the waves. The old pier "
    "shuddered with every breaker, and the spray reached the windows of the chapel. Somebody fetched "
    "lanterns, somebody else fetched ropes, and the boats were hauled higher up the slipway.",
]
DOC = "\n\n".join(PARAGRAPHS) + "\n"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    root = tmp_path_factory.mktemp("find")
    doc = root / "book.txt"
    doc.write_text(DOC, encoding="utf-8")
    return make_kit(doc, root / "kit", n_candidates=20, n_canaries=2, seed="find-tests")


def _marked(kit) -> str:
    return kit.document.read_text(encoding="utf-8")


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def rewrap(text: str, width: int = 60) -> str:
    return "\n\n".join(textwrap.fill(p, width) for p in _paragraphs(text)) + "\n"


def curly_quotes(text: str) -> str:
    out, opening = [], True
    for ch in text:
        if ch == '"':
            out.append("\u201c" if opening else "\u201d")
            opening = not opening
        else:
            out.append("\u2019" if ch == "'" else ch)
    return "".join(out)


def dashes(text: str) -> str:
    # hyphens typeset as en dashes, and an em dash set between two sentences
    return text.replace("-", "\u2013").replace(". ", ".\u2014", 3)


def ligatures(text: str) -> str:
    return text.replace("ffi", "\ufb03").replace("fi", "\ufb01").replace("fl", "\ufb02").replace("ff", "\ufb00")


def hyphenated(text: str) -> str:
    # every long word split at a line end, as a justified print layout does
    return re.sub(r"\b([A-Za-z]{4})([a-z]{3,})\b", r"\1-\n\2", text)


def upper_case(text: str) -> str:
    return text.upper()


TRANSFORMS = {"rewrap": rewrap, "curly_quotes": curly_quotes, "dashes": dashes, "ligatures": ligatures,
              "hyphenated": hyphenated, "upper_case": upper_case,
              "everything": lambda t: hyphenated(ligatures(dashes(curly_quotes(rewrap(t, 50)))))}


def _check_found(kit, path, text=None):
    """Every published canary is found, and the reported offsets hold it in the file's text."""
    text = file_text(path) if text is None else text
    hits = find_canaries(kit.dir, [path])
    for canary in kit.canaries:
        mine = [h for h in hits if h.canary == canary.index and h.published]
        assert len(mine) == len(canary.positions), (canary.index, hits)
        for h in mine:
            assert normalised_text(text[h.start:h.end]) == normalised_text(canary.text)
            assert h.found == text[h.start:h.end]
            assert "[" + re.sub(r"\s+", " ", h.found) + "]" in h.context
    assert not [h for h in hits if not h.published]  # no held-out candidate is in the document
    return hits


def _test_result(kit, document=None):
    published = [c.text for c in kit.canaries]
    backend = FakeBackend(spec="saw-it", member_texts=published, boost=6.0)
    result = canary_test(backend, kit.dir, document=document, cache=False)
    return [(c["rank"], c["p_value"]) for c in result.canary["canaries"]], result.canary["p_value"]


@pytest.fixture(scope="module")
def original_result(kit):
    return _test_result(kit)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_a_transformed_text_copy_still_gives_position_and_test_result(kit, original_result, tmp_path, name):
    copy = tmp_path / "copy.txt"
    copy.write_text(TRANSFORMS[name](_marked(kit)), encoding="utf-8")
    assert copy.read_text(encoding="utf-8") != _marked(kit)
    _check_found(kit, copy)
    assert _test_result(kit, copy) == original_result


@pytest.mark.skipif(shutil.which("fmt") is None, reason="needs the fmt command")
def test_fmt_w_60_rewrapped_copy(kit, original_result, tmp_path):
    copy = tmp_path / "fmt.txt"
    copy.write_text(subprocess.run(["fmt", "-w", "60", str(kit.document)], capture_output=True, text=True,
                                   check=True).stdout, encoding="utf-8")
    _check_found(kit, copy)
    assert _test_result(kit, copy) == original_result


def _html(text: str) -> str:
    body = "".join(f"<p class=\"body\">{html.escape(p).replace('.', '.<!-- s -->')}</p>\n"
                   for p in _paragraphs(curly_quotes(text)))
    return f"<!DOCTYPE html><html><head><title>Book</title></head><body><h1>Chapter One</h1>\n{body}</body></html>"


def test_html_rendering(kit, original_result, tmp_path):
    copy = tmp_path / "book.html"
    copy.write_text(_html(_marked(kit)), encoding="utf-8")
    _check_found(kit, copy)
    assert _test_result(kit, copy) == original_result


def test_epub_rendering(kit, original_result, tmp_path):
    copy = tmp_path / "book.epub"
    with zipfile.ZipFile(copy, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr("META-INF/container.xml",
                    '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                    'version="1.0"><rootfiles><rootfile full-path="OEBPS/book.opf" '
                    'media-type="application/oebps-package+xml"/></rootfiles></container>')
        zf.writestr("OEBPS/book.opf",
                    '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                    '<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
                    '<spine><itemref idref="c1"/></spine></package>')
        zf.writestr("OEBPS/c1.xhtml", _html(ligatures(_marked(kit))))
    _check_found(kit, copy)
    assert _test_result(kit, copy) == original_result


def _write_pdf(path, text: str) -> None:
    pytest.importorskip("reportlab")
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    style = getSampleStyleSheet()["BodyText"]
    story = [Paragraph(html.escape(p), style) for p in _paragraphs(text)]  # justified line breaks by reportlab
    SimpleDocTemplate(str(path), pagesize=A5).build(story)


def _write_docx(path, text: str) -> None:
    pytest.importorskip("docx")
    import docx

    document = docx.Document()
    document.add_heading("CHAPTER ONE", level=1)
    for p in _paragraphs(text):
        document.add_paragraph(p)
    document.save(str(path))


@pytest.mark.parametrize("suffix,writer", [(".pdf", _write_pdf), (".docx", _write_docx)], ids=["pdf", "docx"])
def test_pdf_and_docx_renderings(kit, original_result, tmp_path, suffix, writer):
    copy = tmp_path / f"book{suffix}"
    writer(copy, curly_quotes(_marked(kit)))
    _check_found(kit, copy)
    assert _test_result(kit, copy) == original_result


def test_find_cli_prints_file_offset_and_context(kit, tmp_path, capsys):
    copy = tmp_path / "wrapped.txt"
    copy.write_text(rewrap(_marked(kit), 40), encoding="utf-8")
    code = main(["canary", "find", str(kit.dir / "private" / "manifest.json"), str(copy)])
    out = capsys.readouterr().out
    assert code == 0
    text = copy.read_text(encoding="utf-8")
    for canary in kit.canaries:
        line = next(x for x in out.splitlines() if f"published canary {canary.index}." in x)
        start, end = map(int, re.match(rf"{re.escape(str(copy))}:(\d+)-(\d+):", line).groups())
        assert normalised_text(text[start:end]) == normalised_text(canary.text)
        assert text[start:end].endswith(".") and text[start:end].split()[0] == canary.text.split()[0]
        assert "[" in line and "]" in line


def test_find_cli_says_what_is_missing_and_refuses_bad_input(kit, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text(DOC, encoding="utf-8")
    assert main(["canary", "find", str(kit.dir), str(other)]) == 1
    assert "published canary 0 not found" in capsys.readouterr().out
    assert main(["canary", "find", str(tmp_path / "nope"), str(other)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
    assert main(["canary", "find", str(kit.dir), str(tmp_path / "missing.txt")]) == 2


def test_a_leaked_held_out_candidate_is_reported(kit):
    held = kit.canaries[0].candidates[(kit.canaries[0].published + 1) % 20]
    hits = find_in_text("Some text. " + held.upper() + " More text.", kit.canaries)
    assert [(h.canary, h.published) for h in hits] == [(0, False)]


def test_normalised_offsets_map_back_to_the_original():
    text = "“Orla’s ﬁne\nlan-\nterns” &mdash; <em>said</em> Café"
    norm = normalise(text)
    assert norm.text == "orla s fine lanternssaid cafe"
    start, end = norm.span(norm.text.index("fine"), norm.text.index("fine") + len("fine lanterns"))
    assert text[start:end] == "ﬁne\nlan-\nterns"
    assert normalised_text("CAFE\u0301") == normalised_text("café") == "cafe"
    assert normalised_text("a < b and c > d") == "a b and c d"  # a lone "<" is not markup
