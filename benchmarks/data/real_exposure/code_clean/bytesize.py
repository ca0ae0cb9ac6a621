"""Format byte counts for people and read them back.

Two systems of units are in use: decimal (kB, MB, GB: powers of 1000) and
binary (KiB, MiB, GiB: powers of 1024).  format_size() writes either; parse_size()
reads both, and also the bare letters "K", "M", "G" that many command line
tools accept, which it treats as binary.

    >>> format_size(1536)
    '1.5 KiB'
    >>> format_size(1536, binary=False)
    '1.5 kB'
    >>> parse_size("2M")
    2097152
"""

import re

__all__ = ["format_size", "parse_size", "SizeError"]

_DECIMAL = ["B", "kB", "MB", "GB", "TB", "PB"]
_BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*$")


class SizeError(ValueError):
    """Text that does not give a size."""


def _factors():
    table = {"": 1, "b": 1}
    for power, (dec, bin_) in enumerate(zip(_DECIMAL, _BINARY)):
        if power == 0:
            continue
        table[dec.lower()] = 1000 ** power
        table[bin_.lower()] = 1024 ** power
        table[bin_[0].lower()] = 1024 ** power
    return table


_FACTORS = _factors()


def format_size(count, binary=True, precision=1, strip_zeros=True):
    """Return count bytes as a short string such as "1.5 KiB"."""
    if count < 0:
        return "-" + format_size(-count, binary, precision, strip_zeros)
    base = 1024 if binary else 1000
    units = _BINARY if binary else _DECIMAL
    value = float(count)
    unit = units[0]
    for unit in units:
        if value < base or unit == units[-1]:
            break
        value /= base
    if unit == "B":
        return "%d B" % count
    text = "%.*f" % (precision, value)
    if strip_zeros and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "%s %s" % (text, unit)


def parse_size(text):
    """Return the number of bytes written in text, as an int."""
    match = _SIZE.match(text)
    if match is None:
        raise SizeError("not a size: %r" % text)
    number, unit = match.groups()
    factor = _FACTORS.get(unit.lower())
    if factor is None:
        raise SizeError("unknown unit %r in %r" % (unit, text))
    return int(round(float(number) * factor))


def ratio_text(part, whole):
    """Describe part of whole as "12.0 MiB of 1 GiB (1.2%)"."""
    share = 100.0 * part / whole if whole else 0.0
    return "%s of %s (%.1f%%)" % (format_size(part), format_size(whole), share)


if __name__ == "__main__":
    for n in (0, 999, 1000, 1024, 1536, 10 ** 6, 3 * 1024 ** 3):
        print("%12d  %-10s %s" % (n, format_size(n), format_size(n, binary=False)))
    for s in ("512", "1.5k", "2 MiB", "3GB", "4 parsecs"):
        try:
            print(s, "->", parse_size(s))
        except SizeError as exc:
            print(s, "->", exc)
