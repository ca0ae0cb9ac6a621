"""Approximate phases of the Moon for calendar printing.

The phase is computed from the mean length of the synodic month and one known
new moon, which places it within about a day for dates in recent centuries.
That is enough to print a symbol in a calendar; it is not meant for
astronomy.

    >>> import datetime
    >>> phase_name(datetime.date(2000, 1, 6))
    'new moon'
"""

import datetime
import math

__all__ = ["age", "fraction", "illumination", "phase_name", "next_full",
           "SYNODIC_MONTH", "PHASES"]

SYNODIC_MONTH = 29.530588853
_KNOWN_NEW = datetime.datetime(2000, 1, 6, 18, 14)

PHASES = (
    "new moon", "waxing crescent", "first quarter", "waxing gibbous",
    "full moon", "waning gibbous", "last quarter", "waning crescent",
)


def _as_datetime(when):
    if isinstance(when, datetime.datetime):
        return when.replace(tzinfo=None)
    return datetime.datetime(when.year, when.month, when.day, 12)


def age(when):
    """Days since the last new moon, in [0, SYNODIC_MONTH)."""
    delta = _as_datetime(when) - _KNOWN_NEW
    days = delta.total_seconds() / 86400.0
    return days % SYNODIC_MONTH


def fraction(when):
    """Position in the cycle: 0.0 new, 0.5 full, approaching 1.0 at the end."""
    return age(when) / SYNODIC_MONTH


def illumination(when):
    """Share of the visible disc that is lit, from 0.0 to 1.0."""
    return (1 - math.cos(2 * math.pi * fraction(when))) / 2


def phase_name(when):
    """One of the eight PHASES names for the date or time given."""
    index = int(fraction(when) * 8 + 0.5) % 8
    return PHASES[index]


def next_full(when):
    """The approximate date and time of the next full moon after when."""
    start = _as_datetime(when)
    wait = (0.5 - fraction(start)) % 1.0 * SYNODIC_MONTH
    if wait == 0:
        wait = SYNODIC_MONTH
    return start + datetime.timedelta(days=wait)


def month_table(year, month):
    """(day, phase name) for each day of the month where the name changes."""
    day = datetime.date(year, month, 1)
    rows, last = [], None
    while day.month == month:
        name = phase_name(day)
        if name != last:
            rows.append((day.day, name))
            last = name
        day += datetime.timedelta(days=1)
    return rows


if __name__ == "__main__":
    today = datetime.date(2026, 11, 27)
    print(today, phase_name(today), "%.0f%% lit" % (100 * illumination(today)))
    print("next full moon about", next_full(today).strftime("%Y-%m-%d %H:%M"))
    for day, name in month_table(2026, 12):
        print("%2d %s" % (day, name))
