"""Parse and format short duration strings such as "1h30m" or "2d 4h".

The units understood are weeks (w), days (d), hours (h), minutes (m) and
seconds (s).  Numbers may carry a decimal fraction ("1.5h").  A bare number
is read as seconds.  Formatting goes the other way and drops zero parts.

    >>> parse("1h30m")
    5400.0
    >>> describe(93784)
    '1d 2h 3m 4s'
"""

import re

__all__ = ["parse", "describe", "DurationError", "UNITS"]

UNITS = (
    ("w", 7 * 24 * 3600),
    ("d", 24 * 3600),
    ("h", 3600),
    ("m", 60),
    ("s", 1),
)

_FACTOR = dict(UNITS)
_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)")


class DurationError(ValueError):
    """The text is not a duration this module can read."""


def parse(text):
    """Return the number of seconds written in text, as a float."""
    text = text.strip()
    if not text:
        raise DurationError("empty duration")
    sign = 1
    if text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    total = 0.0
    pos = 0
    seen = set()
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None or match.end() == pos:
            raise DurationError("cannot read %r at offset %d" % (text, pos))
        number, unit = match.groups()
        unit = unit.lower() or "s"
        if unit not in _FACTOR:
            raise DurationError("unknown unit %r" % unit)
        if unit in seen:
            raise DurationError("unit %r given twice" % unit)
        seen.add(unit)
        total += float(number) * _FACTOR[unit]
        pos = match.end()
    return sign * total


def split(seconds):
    """Return [(unit, count), ...] for whole units, largest first."""
    remaining = int(round(abs(seconds)))
    parts = []
    for unit, size in UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append((unit, count))
    return parts


def describe(seconds, largest=None, sep=" "):
    """Format seconds as "1d 2h 3m 4s".

    With largest set to a number, only that many of the biggest parts are
    kept, the rest rounded away: describe(93784, 2) gives "1d 2h".
    """
    parts = split(seconds)
    if not parts:
        return "0s"
    if largest is not None:
        parts = parts[:largest]
    text = sep.join("%d%s" % (count, unit) for unit, count in parts)
    return "-" + text if seconds < 0 else text


def clamp(seconds, low=0.0, high=None):
    """Keep seconds within [low, high] (high None means no upper bound)."""
    if seconds < low:
        return low
    if high is not None and seconds > high:
        return high
    return seconds


def _main(argv):
    for arg in argv:
        try:
            value = parse(arg)
        except DurationError as exc:
            print("%s: %s" % (arg, exc))
        else:
            print("%s = %g seconds = %s" % (arg, value, describe(value)))


if __name__ == "__main__":
    import sys
    _main(sys.argv[1:] or ["90m", "1.5h", "2w 3d", "7x"])
