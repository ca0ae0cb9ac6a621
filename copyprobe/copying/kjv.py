"""A small offline copy-eval set from the King James Bible (public domain).

``python -m copyprobe.copying.kjv`` rebuilds the shipped files from Debian's ``bible-kjv``
(``apt-get install bible-kjv``; the ``bible`` command prints verses):

* ``data/kjv.json`` — CopyBench's layout: literal items (200-word prefixes of famous
  chapters, the next 50 words as reference), non-literal items (hand-written event and
  character lists of six Genesis/Exodus/Samuel stories; each of the first events is one
  beginning, the other events its references, as in CopyBench's release), QA items, and
  the protected texts for MemFree (the chapters used).
* ``data/kjv_incontext.json`` — a literal prompt set on which even a very small model
  copies: the passage is shown in full earlier in the prompt, then its first words again,
  so completing it means reproducing the protected text (in-context, not memorised,
  copying). It is the check that MemFree drives the literal rate to zero.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from copyprobe.copying.data import (
    CopySet,
    LiteralItem,
    QAItem,
    literal_items_from_text,
    nonliteral_items,
)
from copyprobe.errors import DataError

DATA_DIR = Path(__file__).parent / "data"

# (id, title, verse range for `bible -f`)
LITERAL_PASSAGES = [
    ("genesis_1", "Genesis 1", "Ge1:1-31"),
    ("genesis_3", "Genesis 3", "Ge3:1-24"),
    ("exodus_20", "Exodus 20", "Ex20:1-26"),
    ("psalm_103", "Psalm 103", "Ps103:1-22"),
    ("john_1", "John 1", "Jn1:1-34"),
    ("corinthians_13", "1 Corinthians 13", "1Co13:1-13"),
    ("ecclesiastes_3", "Ecclesiastes 3", "Ec3:1-22"),
    ("matthew_5", "Matthew 5", "Mt5:1-20"),
]

INCONTEXT_PASSAGES = [
    ("genesis_1", "Genesis 1", "Ge1:1-8"),
    ("psalm_23", "Psalm 23", "Ps23:1-6"),
    ("matthew_6", "Matthew 6", "Mt6:5-13"),
    ("john_1", "John 1", "Jn1:1-9"),
    ("corinthians_13", "1 Corinthians 13", "1Co13:1-7"),
    ("ecclesiastes_3", "Ecclesiastes 3", "Ec3:1-8"),
]

# Hand-written from the public-domain text: events in order, characters with aliases.
STORIES: list[dict[str, Any]] = [
    {
        "title": "Genesis 1-3 (Creation and Eden)",
        "events": [
            "God creates the heaven and the earth.",
            "God makes light and divides it from the darkness.",
            "God forms the man from the dust of the ground.",
            "God plants a garden in Eden and puts the man there.",
            "God forbids the man to eat from the tree of knowledge of good and evil.",
            "God makes a woman from the man's rib.",
            "The serpent persuades the woman to eat the forbidden fruit.",
            "The woman and the man eat the fruit and see that they are naked.",
            "They sew fig leaves together and hide from God.",
            "God curses the serpent to crawl on its belly.",
            "God drives the man and the woman out of the garden.",
            "Cherubims and a flaming sword guard the way to the tree of life.",
        ],
        "characters": [["God", "LORD", "LORD God"], ["Adam"], ["Eve"], ["serpent"]],
    },
    {
        "title": "Genesis 6-9 (Noah and the flood)",
        "events": [
            "God sees that the wickedness of man is great on the earth.",
            "God tells Noah to build an ark of gopher wood.",
            "Noah brings his family and pairs of every animal into the ark.",
            "Rain falls for forty days and forty nights.",
            "The flood covers the mountains and every living thing on land dies.",
            "The ark rests on the mountains of Ararat.",
            "Noah sends out a raven and then a dove.",
            "The dove returns with an olive leaf.",
            "Noah leaves the ark and builds an altar.",
            "God sets a rainbow in the cloud as a covenant never to flood the earth again.",
        ],
        "characters": [["Noah"], ["God", "LORD"], ["Shem"], ["Ham"], ["Japheth"]],
    },
    {
        "title": "Genesis 37-45 (Joseph)",
        "events": [
            "Jacob gives his son Joseph a coat of many colours.",
            "Joseph dreams that his brothers bow down to him.",
            "The jealous brothers throw Joseph into a pit.",
            "The brothers sell Joseph to merchants going to Egypt.",
            "The brothers show their father the coat dipped in goat's blood.",
            "Joseph serves in the house of Potiphar in Egypt.",
            "Potiphar's wife falsely accuses Joseph and he is put in prison.",
            "Joseph interprets the dreams of the butler and the baker.",
            "Joseph interprets Pharaoh's dream of seven fat and seven lean cattle.",
            "Pharaoh makes Joseph ruler over all the land of Egypt.",
            "Joseph's brothers come to Egypt to buy corn during the famine.",
            "Joseph reveals himself to his brothers and forgives them.",
        ],
        "characters": [["Joseph"], ["Jacob", "Israel"], ["Reuben"], ["Judah"], ["Benjamin"],
                       ["Potiphar"], ["Pharaoh"]],
    },
    {
        "title": "Exodus 1-14 (Moses)",
        "events": [
            "Pharaoh orders every Hebrew baby boy to be cast into the river.",
            "A Hebrew mother hides her baby in an ark of bulrushes on the river.",
            "Pharaoh's daughter finds the baby and names him Moses.",
            "Moses kills an Egyptian and flees to Midian.",
            "God speaks to Moses from a burning bush.",
            "Moses and Aaron ask Pharaoh to let the people go.",
            "God sends plagues on Egypt, turning the river to blood.",
            "The firstborn of Egypt die on the night of the passover.",
            "The Israelites leave Egypt.",
            "Moses stretches his hand over the sea and the waters divide.",
            "The Egyptian army drowns in the Red Sea.",
        ],
        "characters": [["Moses"], ["Aaron"], ["Pharaoh"], ["Miriam"], ["Jethro"], ["God", "LORD"]],
    },
    {
        "title": "1 Samuel 17 (David and Goliath)",
        "events": [
            "The Philistines and Israel gather their armies for battle.",
            "Goliath, a giant of Gath, challenges Israel to send a man to fight him.",
            "Saul and the Israelites are afraid.",
            "Jesse sends young David with food for his brothers in the army.",
            "David offers to fight the giant.",
            "Saul gives David his armour, but David takes it off.",
            "David chooses five smooth stones from the brook.",
            "David slings a stone that sinks into Goliath's forehead.",
            "David cuts off Goliath's head with the giant's own sword.",
            "The Philistines flee and Israel pursues them.",
        ],
        "characters": [["David"], ["Goliath"], ["Saul"], ["Jesse"], ["Eliab"], ["Abner"]],
    },
    {
        "title": "Genesis 22 (Abraham and Isaac)",
        "events": [
            "God tests Abraham by asking him to offer his son Isaac.",
            "Abraham rises early and saddles his ass.",
            "Abraham and Isaac travel to the land of Moriah.",
            "Isaac carries the wood for the burnt offering.",
            "Isaac asks where the lamb is.",
            "Abraham builds an altar and binds Isaac on it.",
            "An angel calls out and stops Abraham's hand.",
            "Abraham sees a ram caught in a thicket by its horns.",
            "Abraham offers the ram instead of his son.",
            "The angel promises that Abraham's seed will be as the stars of heaven.",
        ],
        "characters": [["Abraham", "Abram"], ["Isaac"], ["God", "LORD"], ["Sarah", "Sarai"]],
    },
]

QA_PAIRS = [
    ("According to Genesis, what did God create in the beginning?", ["the heaven and the earth"]),
    ("According to Genesis, what did God call the light?", ["Day"]),
    ("According to Genesis, from what did God form the man?", ["the dust of the ground", "dust"]),
    ("According to Genesis, on which day did God rest?", ["the seventh day", "seventh"]),
    ("According to Genesis, what was the ark made of?", ["gopher wood"]),
    ("According to Genesis, what did the dove bring back to Noah?", ["an olive leaf", "olive leaf"]),
    ("According to Genesis, what did Jacob give Joseph?", ["a coat of many colours", "coat of many colours"]),
    ("According to Exodus, from what did God speak to Moses?", ["a burning bush", "burning bush"]),
    ("According to 1 Samuel, how many smooth stones did David choose?", ["five"]),
    ("According to Psalm 23, who is my shepherd?", ["the LORD", "LORD"]),
    ("According to 1 Corinthians 13, what is the greatest of faith, hope and charity?", ["charity"]),
    ("According to John, what was in the beginning?", ["the Word", "Word"]),
]


def verses(ref: str) -> str:
    """The text of a verse range from the ``bible`` command, verse numbers removed."""
    exe = shutil.which("bible")
    if exe is None:
        raise DataError("the `bible` command is missing: apt-get install bible-kjv")
    out = subprocess.run([exe, "-f", ref], capture_output=True, text=True, check=False).stdout
    lines = [re.sub(r"^\S+\d+:\d+\s+", "", line).strip() for line in out.splitlines() if line.strip()]
    text = " ".join(lines)
    if not text:
        raise DataError(f"no verses for {ref!r}")
    return text


def build_kjv(prefix_words: int = 200, reference_words: int = 50) -> CopySet:
    literal, protected = [], []
    for pid, title, ref in LITERAL_PASSAGES:
        text = verses(ref)
        protected.append(text)
        literal += literal_items_from_text(text, title=title, prefix_words=prefix_words,
                                           reference_words=reference_words, max_items=1,
                                           id_prefix=f"kjv.{pid}")
    nonliteral = []
    for n, story in enumerate(STORIES):
        nonliteral += nonliteral_items(story["events"], story["characters"], title=story["title"],
                                       n_beginnings=2, id_prefix=f"kjv.story{n}")
    qa = [QAItem(f"kjv.qa.{i}", "KJV", q, tuple(a)) for i, (q, a) in enumerate(QA_PAIRS)]
    return CopySet(literal=literal, nonliteral=nonliteral, qa=qa, protected=protected)


def build_kjv_incontext(prefix_words: int = 40, reference_words: int = 50) -> CopySet:
    literal, protected = [], []
    for pid, title, ref in INCONTEXT_PASSAGES:
        text = verses(ref)
        words = text.split()
        if len(words) < prefix_words + reference_words:
            raise DataError(f"{ref} is too short")
        passage = " ".join(words[: prefix_words + reference_words])
        protected.append(passage)
        prefix = " ".join(words[:prefix_words])
        literal.append(LiteralItem(
            id=f"kjv_incontext.{pid}", title=title,
            input=f"{passage}\n\n{prefix}",
            reference=" ".join(words[prefix_words : prefix_words + reference_words]),
        ))
    return CopySet(literal=literal, protected=protected)


def main() -> None:
    DATA_DIR.mkdir(exist_ok=True)
    for name, data in (("kjv", build_kjv()), ("kjv_incontext", build_kjv_incontext())):
        path = DATA_DIR / f"{name}.json"
        path.write_text(json.dumps(data.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path}: {data.counts()}")


if __name__ == "__main__":
    main()
