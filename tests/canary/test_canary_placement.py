"""Canaries go between sentences of narrative prose only, and `canary make` shows where."""

from __future__ import annotations

import json
import re

import pytest

from copyprobe.canary.kit import MANIFEST, draw_kit
from copyprobe.canary.placement import paragraphs, prose_boundaries
from copyprobe.cli.main import main
from copyprobe.errors import DataError

NARRATIVE = ("The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to "
             "the wall, and the nets hung drying above the slipway. Mr. Fielding kept the chandlery at the end "
             "of the quay.")
BOOK = f"""# Chapter One

{NARRATIVE}

"It will blow hard tonight," he said. "You had best put the shutters up before the tide turns."

She looked at him for a long while. 'Go home,' she said at last, and turned back to the ledgers on her desk.

THE SECOND PART OF THE STORY BEGINS HERE WITH A LONG TITLE IN CAPITAL LETTERS FOR THE READER

- rope, tar and lamp oil for the boats of the harbour, sold by the yard and by the gallon
- biscuits and candles for the winter, kept in the back room of the shop on the quay

| item | price | notes on the item and where it was kept in the shop by the harbour |
|------|-------|------|

```
def storm(): return "the wind rattled the shutters of every house in the village that night."

print("nobody in the village expected the storm that came in the second week of February.")
```

    indented code block that looks like a sentence of prose but is code in the document.
    second indented line of the same code block, with a full stop at its end too.

> A quoted block from another book, long enough to pass for a paragraph of prose in the text.

By evening the whole village had gathered on the harbour wall to watch the waves. The old pier shuddered with every breaker.
"""


def _prose_spans(text):
    return [(p.start, p.end) for p in paragraphs(text) if p.prose]


def test_only_narrative_paragraphs_are_prose():
    spans = _prose_spans(BOOK)
    texts = [BOOK[s:e] for s, e in spans]
    assert texts[0] == NARRATIVE
    assert texts[-1].startswith("By evening")
    # the dialogue paragraphs are prose, but no boundary touches their sentences (below)
    assert all(not t.startswith(("#", "-", "|", "`", ">", " ", "THE SECOND")) for t in texts)
    assert not any("def storm" in t or "print(" in t or "indented code" in t for t in texts)


def test_boundaries_are_sentence_starts_or_paragraph_ends_away_from_dialogue():
    spots = prose_boundaries(BOOK)
    narrative = BOOK.index(NARRATIVE)
    assert narrative in spots  # before the first sentence
    assert narrative + NARRATIVE.index("The fishing") in spots
    assert narrative + NARRATIVE.index("Mr. Fielding") in spots
    assert narrative + NARRATIVE.index("Fielding kept") not in spots  # "Mr." does not end a sentence
    assert narrative + len(NARRATIVE) in spots  # after the last sentence
    for pos in spots:
        line_start = BOOK.rfind("\n", 0, pos) + 1
        line = BOOK[line_start:BOOK.find("\n", pos)]
        assert not re.search(r"[\"'\u201c]", line), line  # never in or next to dialogue
        assert line.startswith(("The harbour", "By evening")), line


def test_a_document_without_prose_is_refused():
    with pytest.raises(DataError, match="no narrative prose"):
        draw_kit("# Title\n\n- a list\n- of items\n", "doc.md", n_candidates=5, seed=1)


def test_many_kits_put_the_canary_only_at_prose_boundaries():
    spots = set(prose_boundaries(BOOK))
    for i in range(40):
        marked, manifest = draw_kit(BOOK, "book.md", n_candidates=5, seed=f"place:{i}", n_canaries=2)
        for item in manifest["canaries"]:
            canary = item["candidates"][item["published"]]
            for pos in item["positions"]:
                assert marked[pos:pos + len(canary)] == canary
                # the marked text without this canary is the original around this place
                other = sum(len(c["candidates"][c["published"]]) + 1 for c in manifest["canaries"]
                            for p in c["positions"] if p < pos)
                assert pos - other in spots or pos - other - 1 in spots


def test_make_prints_and_records_each_place_with_a_preview(tmp_path, capsys):
    doc = tmp_path / "book.md"
    doc.write_text(BOOK, encoding="utf-8")
    assert main(["canary", "make", "--doc", str(doc), "--out", str(tmp_path / "kit"), "--n-candidates", "5",
                 "--repeat", "2", "--seed", "preview"]) == 0
    out = capsys.readouterr().out
    manifest = json.loads((tmp_path / "kit" / MANIFEST).read_text())
    marked = (tmp_path / "kit" / "publish" / "book.md").read_text()
    item = manifest["canaries"][0]
    canary = item["candidates"][item["published"]]
    assert [p["offset"] for p in item["placements"]] == item["positions"] and len(item["positions"]) == 2
    for place in item["placements"]:
        pos = place["offset"]
        assert re.sub(r"\s+", " ", marked[max(0, pos - 80):pos]).strip() == place["before"]
        assert marked[pos + len(canary):].replace("\n", " ").lstrip().startswith(place["after"].strip()[:20])
        assert f"at offset {pos}: ...{place['before']} [{canary}]" in out
