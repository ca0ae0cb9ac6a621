"""Lay out rows of values as aligned plain-text columns.

The layout is computed from the widest cell in each column.  Numbers are
right-aligned and everything else left-aligned unless an alignment string is
given, one character per column: "<" left, ">" right, "^" centre.

    >>> print(layout([["name", "qty"], ["pear", 3], ["fig", 12]]))
    name  qty
    pear    3
    fig    12
"""

__all__ = ["layout", "widths", "rule", "truncate"]

_ALIGN = {"<": str.ljust, ">": str.rjust, "^": str.center}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value, precision):
    if isinstance(value, float) and precision is not None:
        return "%.*f" % (precision, value)
    if value is None:
        return ""
    return str(value)


def truncate(text, width, marker="~"):
    """Shorten text to width characters, ending with marker when cut."""
    if width < len(marker):
        raise ValueError("width is smaller than the marker")
    if len(text) <= width:
        return text
    return text[:width - len(marker)] + marker


def widths(rows, precision=None):
    """The width of each column: its widest cell."""
    result = []
    for row in rows:
        for col, value in enumerate(row):
            size = len(_cell(value, precision))
            if col == len(result):
                result.append(size)
            elif size > result[col]:
                result[col] = size
    return result


def _alignments(rows, count, align):
    if align is not None:
        if len(align) != count:
            raise ValueError("need %d alignment characters, got %r" % (count, align))
        return align
    chosen = []
    for col in range(count):
        values = [row[col] for row in rows[1:] if col < len(row)]
        numeric = values and all(_is_number(v) or v is None for v in values)
        chosen.append(">" if numeric else "<")
    return "".join(chosen)


def layout(rows, gap=2, align=None, precision=None, max_width=None):
    """Return the rows as one string of aligned lines.

    The first row is treated like any other; pass a header as row zero.
    max_width, when set, truncates cells wider than it.
    """
    rows = [list(row) for row in rows]
    if not rows:
        return ""
    sizes = widths(rows, precision)
    if max_width is not None:
        sizes = [min(size, max_width) for size in sizes]
    kinds = _alignments(rows, len(sizes), align)
    lines = []
    for row in rows:
        cells = []
        for col, size in enumerate(sizes):
            text = _cell(row[col], precision) if col < len(row) else ""
            text = truncate(text, size)
            cells.append(_ALIGN[kinds[col]](text, size))
        lines.append((" " * gap).join(cells).rstrip())
    return "\n".join(lines)


def rule(rows, char="-", gap=2, precision=None):
    """A line of char as wide as layout() would make the rows."""
    sizes = widths(rows, precision)
    return char * (sum(sizes) + gap * (len(sizes) - 1))


if __name__ == "__main__":
    table = [["planet", "moons", "day (h)"],
             ["Mercury", 0, 4222.6],
             ["Venus", 0, 2802.0],
             ["Earth", 1, 24.0],
             ["Mars", 2, 24.7]]
    print(layout(table[:1] + table[1:], precision=1))
    print(rule(table, precision=1))
