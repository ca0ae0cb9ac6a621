"""Candidate canaries from a cryptographically seeded random process.

Every random choice of a kit (the candidates, which one is published, where it goes)
comes from :class:`Drbg`, a deterministic random bit generator built on HMAC-SHA256 in
counter mode (the construction of NIST SP 800-108's counter-mode KDF, used here as a
stream): the same seed gives the same kit on every machine and Python version, and
without the seed the draws cannot be predicted. The seed is 32 bytes from
``os.urandom`` unless the author gives one (``--seed``, for reproducible kits); it is
recorded in the private manifest only.

Styles:

* ``sentences``: a grammatical, past-tense narrative sentence from a fixed generator: one
  of 12 templates (:data:`TEMPLATES`) with every slot drawn uniformly from fixed word
  lists: names, invented places, objects, animals, colours, rooms, dates and a number
  ("Orla Vantreck kept 481 brass lanterns in the cellar of an amber house in
  Quelmoor."). Articles follow the next word, nouns after a number are plural, subjects
  agree with their verb, each sentence starts with a capital and ends with one full
  stop (checked over 1,000 kits in tests/canary/test_canary_generate.py). About 2^45
  distinct sentences. Every candidate of a kit is an independent draw of the same
  generator, so the exact p-value holds.
* ``words``: a sequence of ``n_words`` words drawn uniformly from a list of common
  English words (low-probability text, far from anything a model has seen).
* ``trap``: a longer random-word sequence (Meeus et al. 2024, "Copyright traps for
  large language models", inject synthetic sequences many times; they found that
  longer sequences repeated often are what a model memorises). The kit inserts it
  ``--repeat`` times (default 10 for this style). Meeus et al. generate their traps with
  an LLM at a chosen perplexity; here they are uniform word draws, which need no model
  and give the highest perplexity, the easiest case for detection in their results.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Callable, Sequence, TypeVar

from copyprobe.errors import ConfigError
from copyprobe.text import article

T = TypeVar("T")

STYLES = ("sentences", "words", "trap")
WORDS_LENGTH = 12
TRAP_LENGTH = 25


class Drbg:
    """HMAC-SHA256 counter-mode stream; ``randbelow`` is exact (rejection sampling)."""

    def __init__(self, seed: bytes, label: str = "copyprobe-canary"):
        if not seed:
            raise ValueError("the seed must not be empty")
        self._key = hmac.new(seed, label.encode(), hashlib.sha256).digest()
        self._counter = 0
        self._buffer = b""

    def child(self, label: str) -> "Drbg":
        """An independent stream for one part of the kit (e.g. one canary)."""
        return Drbg(self._key, label)

    def bytes(self, n: int) -> bytes:
        while len(self._buffer) < n:
            block = hmac.new(self._key, self._counter.to_bytes(8, "big"), hashlib.sha256).digest()
            self._counter += 1
            self._buffer += block
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def randbelow(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        if n < 1:
            raise ValueError("randbelow needs n >= 1")
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        nbytes = (k + 7) // 8
        while True:
            value = int.from_bytes(self.bytes(nbytes), "big") >> (8 * nbytes - k)
            if value < n:
                return value

    def choice(self, items: Sequence[T]) -> T:
        return items[self.randbelow(len(items))]

    def sample(self, n_items: int, k: int) -> list[int]:
        """``k`` distinct indices of ``range(n_items)`` (partial Fisher-Yates), in draw order."""
        if not 0 <= k <= n_items:
            raise ValueError(f"cannot draw {k} distinct items from {n_items}")
        pool = list(range(n_items))
        for i in range(k):
            j = i + self.randbelow(n_items - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


def new_seed() -> bytes:
    return os.urandom(32)


def check_seed(seed: str | int | None) -> None:
    """Refuse an empty seed (it would let anyone draw the kit's candidates again) and a
    ``hex:`` seed that is not whole bytes in hexadecimal; None (32 bytes from the OS) is fine."""
    if seed is None:
        return
    text = str(seed)
    if text.startswith("hex:"):
        try:
            whole = bool(bytes.fromhex(text[4:]))
        except ValueError:
            whole = False
        if not whole:
            raise ConfigError(f"seed {text!r} is not hex: followed by whole bytes in hexadecimal "
                              "(e.g. hex:9f3a0c...; leave the seed out for 32 random bytes)")
    elif not text.strip():
        raise ConfigError("the seed is empty; leave it out for 32 random bytes from the OS, or give a secret one")


def weak_seed(seed: str | int | None) -> str | None:
    """What makes a given seed guessable, or None: fewer than 16 bytes (128 bits) in hex, a
    number below 10**38, or text shorter than 20 characters. Anyone who reads the marked
    document can try seeds until one draws a candidate that is in it. Long text can still be
    guessable (a phrase): this is a floor, not a proof."""
    if seed is None:
        return None
    text = str(seed)
    if text.startswith("hex:"):
        n = len(bytes.fromhex(text[4:]))
        return f"it holds {n} byte{'' if n == 1 else 's'}, fewer than 16" if n < 16 else None
    if text.strip().isdigit() and len(text.strip()) < 39:
        return "it is a number someone can count up to"
    if len(text) < 20:
        return f"it is {len(text)} character{'' if len(text) == 1 else 's'} of text"
    return None


def seed_bytes(seed: str | int | None) -> tuple[bytes, str]:
    """(seed bytes, its record in the manifest). None draws 32 bytes from the OS."""
    check_seed(seed)
    if seed is None:
        raw = new_seed()
        return raw, "hex:" + raw.hex()
    text = str(seed)
    if text.startswith("hex:"):
        return bytes.fromhex(text[4:]), text
    return hashlib.sha256(f"copyprobe-canary-seed:{text}".encode()).digest(), text


# ---------------------------------------------------------------- vocabularies

FIRST = (
    "Orla Tamsin Ivo Bertil Calla Dorian Elsbeth Fenwick Greer Hollis Ines Jorah Kestrel Linnea Marek Nerys "
    "Osric Perpetua Quill Rosamund Silas Thora Ulric Vesna Wystan Xanthe Yorick Zelda Anselm Brigid Cormac "
    "Delphine Emrys Faustine Gideon Hester Idris Juniper Leopold Maud"
).split()
LAST = (
    "Vantreck Ollenby Marchetti Quarrington Haskell Ibbotson Penhallow Strandberg Calloway Druce Fairweather "
    "Gorringe Holloway Inchbald Jessop Kettering Lindqvist Merriweather Nettleship Oakhurst Pemberton Rookwood "
    "Sallow Threlkeld Underhill Varga Whitlock Yelverton Zabriskie Ashgrove Brackwell Cheverell Dunmore "
    "Elphick Fothergill Grimshaw Hartigan Ivesdale Kilbride Loxley"
).split()
SYLLABLES = "qu el mo or ve tr an th is ka ro bel wyn dor ash fen gar lin mar nor pel ros tam ul var zen".split()
PLACE_ENDINGS = ("moor", "ford", "wick", "holm", "stead", "by", "mere", "combe", "haven", "ton")
# (singular, plural): regular nouns written out, so no rule can go wrong; none starts
# with a letter whose article is not the usual one ("a unicorn", "an hour")
OBJECTS = (
    ("brass lantern", "brass lanterns"), ("glass marble", "glass marbles"), ("copper kettle", "copper kettles"),
    ("wool blanket", "wool blankets"), ("clay pot", "clay pots"), ("silver spoon", "silver spoons"),
    ("paper kite", "paper kites"), ("oak barrel", "oak barrels"), ("tin soldier", "tin soldiers"),
    ("linen map", "linen maps"), ("iron key", "iron keys"), ("wax candle", "wax candles"),
    ("horn button", "horn buttons"), ("pewter bell", "pewter bells"), ("cedar box", "cedar boxes"),
    ("felt hat", "felt hats"), ("apple crate", "apple crates"), ("jade bead", "jade beads"),
    ("straw basket", "straw baskets"), ("slate tile", "slate tiles"), ("enamel jug", "enamel jugs"),
    ("ash walking stick", "ash walking sticks"),
)
ANIMALS = (
    ("heron", "herons"), ("badger", "badgers"), ("otter", "otters"), ("raven", "ravens"), ("stoat", "stoats"),
    ("hare", "hares"), ("kestrel", "kestrels"), ("newt", "newts"), ("owl", "owls"), ("wren", "wrens"),
    ("eel", "eels"), ("goat", "goats"),
)
ROOMS = ("cellar", "attic", "barn", "boathouse", "pantry", "workshop", "greenhouse", "stable", "chapel", "mill",
         "orchard", "kitchen")
COLOURS = ("amber", "crimson", "teal", "ochre", "violet", "grey", "saffron", "emerald", "russet", "ivory",
           "indigo", "olive")
MONTHS = ("January February March April May June July August September October November December").split()

# Past-tense narrative sentences. Slots: {name} (first + last name), {place}/{place2}
# (two different invented places), {num} (an integer 12..999, so nouns after it are
# always plural), {object}/{objects} and {object2}/{objects2} (two different object
# nouns), {animal}/{animals}, {colour}, {room}, {month}, {ordinal} (1st..28th),
# {year} (1700..1999). "a~" is the indefinite article, resolved to "a" or "an" by the
# word after it. Subjects of "was" are singular and of "were" plural, by construction.
TEMPLATES = (
    "{name} kept {num} {objects} in the {room} of a~ {colour} house in {place}.",
    "In {month} {year}, {name} walked {num} miles from {place} to {place2} with a~ {colour} {animal}.",
    "The {colour} {animal} of {place} was counted {num} times by {name} before the {ordinal} of {month}.",
    "{name} sold {num} {objects} at the {place} fair on the {ordinal} of {month}, {year}.",
    "Nobody in {place} believed that {name} had painted the {room} {colour} {num} times.",
    "On the {ordinal} of {month}, the mayor of {place2} gave {name} {num} {objects} and a~ {animal}.",
    "{name} of {place} wrote {num} letters about a~ {colour} {animal} that lived in the {room}.",
    "The ferry from {place} to {place2} carried {num} {objects} and {name} in {month} {year}.",
    "Every winter {name} counted the {objects} in the {room} and found exactly {num} of them.",
    "{name} once traded a~ {colour} {object} for {num} {objects2} at the market in {place}.",
    "The {animals} that nested behind the {room} in {place} were fed by {name} for {num} days.",
    "By the spring of {year}, {name} had mended {num} {objects} for the people of {place}.",
)


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


COMMON_WORDS = (
    "able acid aged also area army away baby back ball band bank base bath bear beat bell belt bird blow blue "
    "boat body bone book boot born both bowl burn bush busy cake call calm camp card care cart case cash cast "
    "cell chat chip city clay club coal coat code cold cook cool copy corn cost crew crop dark data date dawn "
    "deal dear debt deck deep desk dial diet dirt dish dock door dose down draw drop drum dust duty earn east "
    "edge else even exit face fact fail fair fall farm fast fate fear feed feel fence file fill film find fine "
    "fire firm fish flag flat flow foam fold folk food foot fork form fort fuel full fund gain game gate gear "
    "gift girl glad glow goal gold golf good gown grab gray grid grip grow gulf hair half hall hand hang hard "
    "harm hat head heat herb hero hide high hill hint hold hole home hook hope horn host hour huge hunt idea "
    "inch iron item jail joke jump jury keen kick kind king kite knee knot lake lamp land lane last lawn lead "
    "leaf lean left lens life lift limb line link lion list load loan lock loft long loop lord loud luck lung "
    "mail main make mark mask meal meat menu mild milk mill mind mine mint mode mood moon moss most move nail "
    "name neck nest news nose note oven pace pack page pain pair palm park part path peak pear pile pine pink "
    "pipe plan plot pole pond pool port pose post pour pull pump pure push rail rain rank rare rate read rear "
    "rent rest rice rich ride ring rise risk road rock role roof room root rope rose rule rush safe sail salt "
    "sand seal seat seed self sell ship shoe shop shot side sign silk sing sink site size skin slip slow snow "
    "soap sock soft soil song sort soup spin spot star stem step stir suit swim tail tale tank tape task team "
    "tent term test text tide tile time tone tool tour town tray tree trip tube tune turn twin unit vase vest "
    "view vote wage walk wall ward warm wave weed well west whip wide wife wild wind wine wing wire wise wolf "
    "wood wool word work yard yarn year zone"
).split()


def _place(rng: Drbg) -> str:
    n = 1 + rng.randbelow(2)
    stem = "".join(rng.choice(SYLLABLES) for _ in range(n))
    return (stem + rng.choice(PLACE_ENDINGS)).capitalize()


def _two(rng: Drbg, draw) -> tuple:
    first = draw()
    second = draw()
    while second == first:
        second = draw()
    return first, second


def sentence(rng: Drbg) -> str:
    """One draw of the ``sentences`` style: a template and its slots, each uniform."""
    template = rng.choice(TEMPLATES)
    place, place2 = _two(rng, lambda: _place(rng))
    obj, obj2 = _two(rng, lambda: rng.choice(OBJECTS))
    animal = rng.choice(ANIMALS)
    text = template.format(
        name=f"{rng.choice(FIRST)} {rng.choice(LAST)}", num=12 + rng.randbelow(988),
        object=obj[0], objects=obj[1], object2=obj2[0], objects2=obj2[1], animal=animal[0], animals=animal[1],
        room=rng.choice(ROOMS), place=place, place2=place2, month=rng.choice(MONTHS),
        ordinal=ordinal(1 + rng.randbelow(28)), year=1700 + rng.randbelow(300), colour=rng.choice(COLOURS),
    )
    return re.sub(r"\ba~ (\w+)", lambda m: f"{article(m.group(1))} {m.group(1)}", text)


def word_sequence(rng: Drbg, n_words: int) -> str:
    return " ".join(rng.choice(COMMON_WORDS) for _ in range(n_words))


def candidate(rng: Drbg, style: str, n_words: int | None = None) -> str:
    if style == "sentences":
        return sentence(rng)
    if style in ("words", "trap"):
        words = word_sequence(rng, n_words or (WORDS_LENGTH if style == "words" else TRAP_LENGTH))
        return words[0].upper() + words[1:] + "."  # a "sentence", so it sits in running text
    raise ValueError(f"unknown canary style {style!r} (one of {', '.join(STYLES)})")


def candidates(rng: Drbg, style: str, n: int, n_words: int | None = None,
               reject: Callable[[str], bool] | None = None) -> list[str]:
    """``n`` candidates, i.i.d. draws conditioned on being distinct after normalisation
    (two candidates that differ only in case or punctuation cannot be told apart in a
    reformatted copy) and on ``reject`` being false (e.g. already in the document). The
    conditions apply to every draw alike, which keeps the candidates exchangeable: the
    published one is still a uniform choice among them."""
    from copyprobe.canary.normalise import normalised_text

    seen: set[str] = set()
    out: list[str] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            length = "" if n_words is None else f" of {n_words} word{'s' * (n_words != 1)}"
            raise ConfigError(f"could not draw {n} distinct {style} candidates{length}: the style has too few "
                              "different texts of that length (fewer candidates, or longer ones)")
        text = candidate(rng, style, n_words)
        key = normalised_text(text)
        if key not in seen and not (reject is not None and reject(text)):
            seen.add(key)
            out.append(text)
    return out
