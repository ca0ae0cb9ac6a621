"""Turn titles into short identifiers for file names and web addresses.

A slug keeps letters and digits, lowercases them and joins the words with a
separator.  Accented letters are reduced to their base letter where Unicode
gives one.  Words can be dropped when they carry little meaning, and the
result can be cut to a length without breaking a word in half.

    >>> slugify("The Quick Brown Fox!")
    'the-quick-brown-fox'
    >>> slugify("Crème brûlée, a new edition", stop_words=("a",))
    'creme-brulee-new-edition'
"""

import re
import unicodedata

__all__ = ["slugify", "unique_slug", "words_of", "DEFAULT_STOP_WORDS"]

DEFAULT_STOP_WORDS = ()
_WORD = re.compile(r"[a-z0-9]+")


def _fold(text):
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words_of(text):
    """The lowercase letter-and-digit words of text, accents removed."""
    return _WORD.findall(_fold(text).lower())


def slugify(text, sep="-", max_length=None, stop_words=DEFAULT_STOP_WORDS):
    """Return a slug for text.

    max_length cuts the slug at a word boundary; a single word longer than
    max_length is cut at max_length.  An empty result becomes "untitled".
    """
    stop = {w.lower() for w in stop_words}
    words = [w for w in words_of(text) if w not in stop]
    if not words:
        return "untitled"
    if max_length is None:
        return sep.join(words)
    kept = []
    size = 0
    for word in words:
        extra = len(word) + (len(sep) if kept else 0)
        if size + extra > max_length:
            break
        kept.append(word)
        size += extra
    if not kept:
        return words[0][:max_length]
    return sep.join(kept)


def unique_slug(text, taken, sep="-", max_length=None):
    """A slug for text not in the collection taken.

    A number is added when needed: "report", "report-2", "report-3" ...
    The new slug is not added to taken; the caller decides when it is used.
    """
    base = slugify(text, sep, max_length)
    if base not in taken:
        return base
    number = 2
    while True:
        suffix = "%s%d" % (sep, number)
        stem = base
        if max_length is not None and len(stem) + len(suffix) > max_length:
            stem = stem[:max_length - len(suffix)].rstrip(sep)
        candidate = stem + suffix
        if candidate not in taken:
            return candidate
        number += 1


def is_slug(text, sep="-"):
    """True if text is already a slug made with sep."""
    if not text:
        return False
    parts = text.split(sep)
    return all(part and _WORD.fullmatch(part) for part in parts)


if __name__ == "__main__":
    seen = set()
    for title in ["Annual Report", "Annual report", "Annual  REPORT!!",
                  "Über die Zahlen", "  "]:
        slug = unique_slug(title, seen, max_length=12)
        seen.add(slug)
        print("%-20r -> %s" % (title, slug))
