"""`canary verify`: a kit is drawn again from its seed and the unmarked document; a kit
edited after the draw, with its checksum recomputed as anyone can, is found out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from copyprobe.canary.kit import MANIFEST, _checksum, draw_kit, make_kit, read_manifest, verify_kit
from copyprobe.cli.main import main
from copyprobe.errors import DataError

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "saved_runs"
DOC = ("The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to the "
       "wall, and the nets hung drying above the slipway. Nobody in the village expected the storm that came "
       "in the second week of February.\n\nBy the morning of the fourteenth the wind had turned. The old men "
       "on the bench outside the chandler's said it would blow itself out by noon, and they were wrong.\n")


@pytest.fixture()
def kit(tmp_path):
    doc = tmp_path / "book.txt"
    doc.write_text(DOC)
    return make_kit(doc, tmp_path / "kit", n_candidates=20, n_canaries=3, style="words", seed="verify"), doc


def _edit(kit_dir: Path, change) -> None:
    """Change the manifest and recompute its checksum, as anyone with the file can."""
    path = kit_dir / MANIFEST
    manifest = json.loads(path.read_text())
    change(manifest)
    manifest["checksum"] = _checksum(manifest)
    path.write_text(json.dumps(manifest))
    read_manifest(kit_dir)  # the checksum check passes: it cannot tell


def test_a_kit_as_drawn_verifies(kit, capsys):
    made, doc = kit
    assert verify_kit(made.dir, doc).differences == []
    assert main(["canary", "verify", str(made.dir), "--source", str(doc), "--published", str(made.document)]) == 0
    assert "the kit is what its seed draws" in capsys.readouterr().out


def test_canaries_dropped_from_the_manifest_are_found_by_the_published_text(kit, tmp_path):
    """The last canary ranked badly, so it is dropped: the manifest is rewritten as the
    draw of two canaries (each canary's candidates are drawn on their own, so the two kept
    are still the seed's; their places are the two-canary draw's) and the checksum
    recomputed. The published text, which holds all three, is what gives it away; the
    kit's own copy only while it is not rewritten too."""
    made, doc = kit
    public = tmp_path / "as-published.txt"
    public.write_text(made.document.read_text())
    marked, two = draw_kit(DOC, "book.txt", n_candidates=20, n_canaries=2, style="words", seed="verify")

    def drop(manifest):
        assert [c["candidates"] for c in two["canaries"]] == [c["candidates"] for c in manifest["canaries"][:2]]
        manifest["canaries"], manifest["document"] = two["canaries"], two["document"]

    _edit(made.dir, drop)
    redraw = verify_kit(made.dir, doc)
    (differs,) = redraw.differences
    assert differs.startswith(f"{made.document} is not the marked document the seed makes from this document with "
                              "2 canaries")
    assert redraw.copy_only  # the rewritten manifest is a draw; the text gives it away
    made.document.write_text(marked)  # the kit's copy rewritten as well: only the public copy tells
    assert verify_kit(made.dir, doc).differences == []
    (differs,) = verify_kit(made.dir, doc, published=public).differences
    assert differs.startswith(f"{public} is not the marked document")


def test_a_kit_made_by_0_1_0_without_document_binding_verifies():
    """The committed golden kit (copyprobe 0.1.0, the generator keyed by the seed alone)
    is drawn again identically: the generator has not changed since."""
    redraw = verify_kit(SAVED / "canary-kit", SAVED / "canary-kit-source.txt")
    assert redraw.differences == [] and redraw.made_by == "0.1.0"


def test_swapped_held_out_candidates_are_found(kit, capsys):
    made, doc = kit
    published = made.canaries[1].published
    swapped = [j for j in range(20) if j != published][:3]

    def swap(manifest):
        for j in swapped:  # e.g. for candidates a model ranks low, so the published one stands out
            manifest["canaries"][1]["candidates"][j] = f"quiet harbour number {j}"

    _edit(made.dir, swap)
    assert verify_kit(made.dir, doc).differences == [
        f"canary 1: 3 of its 20 candidates are not the ones the seed draws (first: candidate {swapped[0]})"]
    assert main(["canary", "verify", str(made.dir), "--source", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS: canary 1: 3 of its 20" in out and "a test with it is not evidence" in out


def test_a_changed_published_choice_is_found(kit):
    made, doc = kit
    chosen = made.canaries[0].published
    other = (chosen + 1) % 20
    _edit(made.dir, lambda m: m["canaries"][0].update(published=other))
    assert verify_kit(made.dir, doc).differences == [
        f"canary 0: the published candidate is {other}; the seed chooses {chosen}"]


def test_another_version_is_named_when_the_draw_differs(kit, capsys):
    made, doc = kit

    def older(manifest):
        manifest["versions"]["copyprobe"] = "0.0.1"
        manifest["canaries"][0]["candidates"][0] += " again"

    _edit(made.dir, older)
    assert main(["canary", "verify", str(made.dir), "--source", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "made by copyprobe 0.0.1" in out and "check with the version that made it" in out


@pytest.mark.parametrize("which, says", [
    ("marked", "is not the document the kit was made from (sha256 differs"),
    ("missing", "does not exist"),
])
def test_the_wrong_source_is_one_line_and_exit_2(kit, tmp_path, capsys, which, says):
    made, _ = kit
    source = made.document if which == "marked" else tmp_path / "nope.txt"
    with pytest.raises(DataError, match=re.escape(says)):
        verify_kit(made.dir, source)
    assert main(["canary", "verify", str(made.dir), "--source", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


def test_a_manifest_without_the_optional_count_verifies_and_one_without_a_seed_is_one_line(kit, capsys):
    made, doc = kit
    _edit(made.dir, lambda m: m.pop("n_candidates"))  # optional in a manifest: read from the candidates
    assert verify_kit(made.dir, doc).differences == []
    _edit(made.dir, lambda m: m.pop("seed"))
    assert main(["canary", "verify", str(made.dir), "--source", str(doc)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "records no seed, so the kit cannot be drawn again" in err


def test_a_kit_of_the_first_format_is_refused_not_accused(kit):
    made, doc = kit
    _edit(made.dir, lambda m: m.update(format_version=1))
    with pytest.raises(DataError, match="format_version 1: it was drawn by an earlier generator"):
        verify_kit(made.dir, doc)


def test_a_kit_that_does_not_say_which_version_made_it_is_not_accused(kit, capsys):
    made, doc = kit

    def anonymous(manifest):
        manifest.pop("versions")
        manifest["canaries"][0]["candidates"][0] += " again"

    _edit(made.dir, anonymous)
    assert main(["canary", "verify", str(made.dir), "--source", str(doc)]) == 1
    out = capsys.readouterr().out
    assert "does not say which copyprobe made it" in out and "not evidence" not in out


def _as_html(text: str) -> str:
    """The marked text as a publisher's HTML: paragraphs as <p>, curly apostrophes as
    entities, a heading's case changed and lines wrapped anew."""
    import html
    import textwrap

    paragraphs = [textwrap.fill(html.escape(p, quote=False).replace("'", "&rsquo;"), 37)
                  for p in text.split("\n\n") if p.strip()]
    return "<html><body>\n" + "\n".join(f"<p>{p}</p>" for p in paragraphs) + "\n</body></html>\n"


def test_a_reformatted_published_copy_verifies(kit, tmp_path, capsys):
    made, doc = kit
    public = tmp_path / "as-published.html"
    public.write_text(_as_html(made.document.read_text()))
    redraw = verify_kit(made.dir, doc, published=public)
    assert redraw.differences == [] and redraw.as_words
    assert main(["canary", "verify", str(made.dir), "--source", str(doc), "--published", str(public)]) == 0
    assert f"and {public} (its words: case, punctuation" in capsys.readouterr().out
    assert not verify_kit(made.dir, doc).as_words  # the kit's own copy is the marked text itself


@pytest.mark.parametrize("suffix", [".pdf", ".docx"])
def test_a_published_pdf_or_docx_verifies(kit, tmp_path, suffix):
    made, doc = kit
    public = tmp_path / f"as-published{suffix}"
    paragraphs = [p for p in made.document.read_text().split("\n\n") if p.strip()]
    if suffix == ".pdf":
        pytest.importorskip("reportlab")
        from reportlab.platypus import Paragraph, SimpleDocTemplate
        from reportlab.lib.styles import getSampleStyleSheet

        style = getSampleStyleSheet()["BodyText"]
        SimpleDocTemplate(str(public)).build([Paragraph(p.replace("&", "&amp;"), style) for p in paragraphs])
    else:
        docx = pytest.importorskip("docx")
        document = docx.Document()
        for p in paragraphs:
            document.add_paragraph(p)
        document.save(str(public))
    assert verify_kit(made.dir, doc, published=public).differences == []


def test_words_added_in_publishing_are_named_not_forgiven(kit, tmp_path, capsys):
    """Front matter is refused, because a canary dropped from the manifest may stand at
    the document's first boundary and would read as front matter; the message says where."""
    made, doc = kit
    public = tmp_path / "as-published.html"
    public.write_text(_as_html("Copyright 2026 Kellmouth Press.\n\n" + made.document.read_text()))
    redraw = verify_kit(made.dir, doc, published=public)
    (differs,) = redraw.differences
    assert "differs in 1 place (adds 'copyright 2026 kellmouth press' (4 words) before the text)" in differs
    assert "is not in it" not in differs  # every canary is still there
    # the manifest is the draw: the last line must not say the kit was changed
    assert redraw.copy_only
    assert main(["canary", "verify", str(made.dir), "--source", str(doc), "--published", str(public)]) == 1
    out = capsys.readouterr().out
    assert "the manifest is what its seed draws; the published copy is not the text it marks" in out
    assert "the kit was changed after it was drawn" not in out


def test_a_canary_missing_from_a_reformatted_copy_is_named(kit, tmp_path):
    made, doc = kit
    gone = made.canaries[1].text
    marked = made.document.read_text()
    assert marked.count(gone) == 1
    public = tmp_path / "as-published.html"
    public.write_text(_as_html(marked.replace(gone, "")))
    (differs,) = verify_kit(made.dir, doc, published=public).differences
    n = len(gone.split())
    assert re.search(rf"differs in 1 place \(lacks '[^']*' \({n} words\) at word \d+\); the seed's canary 1 is not "
                     "in it", differs), differs


def test_canaries_dropped_from_the_manifest_are_found_in_a_reformatted_public_copy(kit, tmp_path):
    made, doc = kit
    public = tmp_path / "as-published.html"
    public.write_text(_as_html(made.document.read_text()))
    marked, two = draw_kit(DOC, "book.txt", n_candidates=20, n_canaries=2, style="words", seed="verify")
    _edit(made.dir, lambda m: m.update(canaries=two["canaries"], document=two["document"]))
    made.document.write_text(marked)
    assert verify_kit(made.dir, doc).differences == []
    (differs,) = verify_kit(made.dir, doc, published=public).differences
    assert differs.startswith(f"{public} is not the marked document the seed makes from this document with 2 "
                              "canaries, even with case, punctuation")


def test_word_differences_name_each_place_in_the_draws_words():
    from copyprobe.canary.kit import word_differences

    drawn = "the boats stayed tied to the wall all winter".split()
    assert word_differences(drawn, list(drawn)) == []
    assert word_differences(drawn, ["press"] + drawn + ["end"]) == [
        "adds 'press' (1 word) before the text", "adds 'end' (1 word) after its end"]
    assert word_differences(drawn, drawn[:3] + drawn[5:]) == ["lacks 'tied to' (2 words) at word 4"]
    assert word_differences(drawn, drawn[:2] + ["were"] + drawn[3:]) == [
        "has 'were' (1 word) where the draw has 'stayed' (1 word) at word 3"]
    assert word_differences(drawn, drawn[:4] + ["near"] + drawn[4:]) == ["adds 'near' (1 word) after word 4 of the draw"]


def test_a_kit_of_an_html_page_verifies_against_its_own_copy(tmp_path):
    """An HTML page marked as written (head, title and all) is compared as written, not
    through the book reader, which would drop its head and call the kit changed."""
    page = tmp_path / "page.html"
    page.write_text("<html><head><title>Kellmouth notes</title><style>p {margin: 0}</style></head><body>\n\n"
                    + DOC.strip() + "\n\n</body></html>\n")  # prose paragraphs between tag lines
    made = make_kit(page, tmp_path / "kit", n_candidates=20, n_canaries=1, style="words", seed="page")
    assert verify_kit(made.dir, page).differences == []
    assert verify_kit(made.dir, page, published=made.document).differences == []
