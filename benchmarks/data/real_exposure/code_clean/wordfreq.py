"""Count words in text and show the counts as a bar chart of characters.

The tokenizer is simple: runs of letters, with an apostrophe allowed inside a
word, lowercased.  It suits quick looks at prose; it knows nothing of
languages that do not separate words by spaces.

    >>> top(count_words("the cat and the hat"), 1)
    [('the', 2)]
"""

import re
from collections import Counter

__all__ = ["tokens", "count_words", "top", "bar_chart", "share"]

_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def tokens(text):
    """The lowercased words of text, in order."""
    return [match.group(0).lower() for match in _TOKEN.finditer(text)]


def count_words(text, ignore=()):
    """A Counter of the words of text, leaving out those in ignore."""
    skip = {w.lower() for w in ignore}
    return Counter(w for w in tokens(text) if w not in skip)


def top(counts, n=10):
    """The n most common (word, count) pairs; ties in alphabetical order."""
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return ranked[:n]


def share(counts, word):
    """The fraction of all counted words that are word."""
    total = sum(counts.values())
    return counts.get(word, 0) / total if total else 0.0


def bar_chart(pairs, width=40, char="#"):
    """Lines of "word  count  ####", bars scaled to the largest count."""
    pairs = list(pairs)
    if not pairs:
        return ""
    largest = max(count for _, count in pairs)
    label = max(len(word) for word, _ in pairs)
    digits = len(str(largest))
    lines = []
    for word, count in pairs:
        bar = char * max(1, round(width * count / largest)) if count else ""
        lines.append("%-*s  %*d  %s" % (label, word, digits, count, bar))
    return "\n".join(lines)


def read_counts(path, encoding="utf-8", ignore=()):
    """Count the words of a text file, reading it line by line."""
    counts = Counter()
    skip = {w.lower() for w in ignore}
    with open(path, encoding=encoding) as handle:
        for line in handle:
            counts.update(w for w in tokens(line) if w not in skip)
    return counts


if __name__ == "__main__":
    import sys
    if len(sys.argv) > 1:
        counts = read_counts(sys.argv[1], ignore=("the", "a", "and", "of"))
    else:
        counts = count_words("It's a small world, and a small world it isn't, "
                             "said the small voice in the small room.")
    print(bar_chart(top(counts, 8)))
