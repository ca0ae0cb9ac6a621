"""Run-length helpers for sequences and strings.

A run is a maximal stretch of equal neighbouring items.  This module turns a
sequence into (item, count) pairs and back again, and offers a compact text
form for strings, where each run is written as a count followed by the
character ("3a2b" for "aaabb").

    >>> list(runs("aaabccdd"))
    [('a', 3), ('b', 1), ('c', 2), ('d', 2)]
    >>> pack_text("wwwwbbbw")
    '4w3b1w'
    >>> unpack_text('4w3b1w')
    'wwwwbbbw'
"""

__all__ = ["runs", "expand", "pack_text", "unpack_text", "longest_run",
           "PackError"]


class PackError(ValueError):
    """Raised when a packed string cannot be read back."""


def runs(iterable, key=None):
    """Yield (item, count) for each run of equal neighbouring items.

    When key is given, neighbours are compared by key(item) and the first
    item of each run is the one reported.
    """
    it = iter(iterable)
    try:
        first = next(it)
    except StopIteration:
        return
    marker = first if key is None else key(first)
    count = 1
    for item in it:
        k = item if key is None else key(item)
        if k == marker:
            count += 1
            continue
        yield first, count
        first, marker, count = item, k, 1
    yield first, count


def expand(pairs):
    """Inverse of runs(): yield each item count times."""
    for item, count in pairs:
        if count < 0:
            raise ValueError("negative run length: %r" % (count,))
        for _ in range(count):
            yield item


def pack_text(text):
    """Return text in count-then-character form.

    Digits in the input would make the result ambiguous, so they are refused.
    """
    parts = []
    for ch, count in runs(text):
        if ch.isdigit():
            raise PackError("cannot pack a digit: %r" % ch)
        parts.append("%d%s" % (count, ch))
    return "".join(parts)


def unpack_text(packed):
    """Read back a string written by pack_text()."""
    out = []
    number = ""
    for pos, ch in enumerate(packed):
        if ch.isdigit():
            number += ch
            continue
        if not number:
            raise PackError("missing count before %r at offset %d" % (ch, pos))
        out.append(ch * int(number))
        number = ""
    if number:
        raise PackError("packed text ends with a count and no character")
    return "".join(out)


def longest_run(iterable, key=None):
    """Return (item, count) of the first longest run, or None when empty."""
    best = None
    for item, count in runs(iterable, key):
        if best is None or count > best[1]:
            best = (item, count)
    return best


def ratio(text):
    """How much shorter the packed form is: len(packed) / len(text).

    An empty string has ratio 1.0.  Values above 1.0 mean packing made the
    text longer, which is the usual case for ordinary prose.
    """
    if not text:
        return 1.0
    return len(pack_text(text)) / len(text)


def _selftest():
    samples = ["", "a", "aaabccdd", "xyz", "mmmmmmmmmmmmq"]
    for s in samples:
        assert unpack_text(pack_text(s)) == s, s
        assert "".join(expand(runs(s))) == s, s
    assert longest_run("abbbcc") == ("b", 3)
    assert longest_run([]) is None
    assert list(runs([1, 1, 2, 2, 2])) == [(1, 2), (2, 3)]
    try:
        unpack_text("3")
    except PackError:
        pass
    else:
        raise AssertionError("a trailing count was accepted")
    print("runlength: all checks passed")


if __name__ == "__main__":
    _selftest()
