"""Operations on half-open numeric spans.

A span is a pair (start, stop) with start <= stop that covers every number x
with start <= x < stop.  Empty spans (start == stop) are allowed and cover
nothing.  The functions here merge overlapping spans, intersect and subtract
collections of them, and measure how much of a range they cover.

Spans are plain tuples so that they sort, hash and print without ceremony.
"""

__all__ = ["merge", "total_length", "intersect", "subtract", "gaps",
           "covers", "clip"]


def _check(span):
    start, stop = span
    if stop < start:
        raise ValueError("span stops before it starts: %r" % (span,))
    return start, stop


def merge(spans, touching=True):
    """Return the union of spans as a sorted list of disjoint spans.

    With touching true (the default), spans that meet end to start, such as
    (1, 3) and (3, 5), are joined into one.
    """
    ordered = sorted(_check(s) for s in spans if s[0] != s[1])
    result = []
    for start, stop in ordered:
        if result:
            last_start, last_stop = result[-1]
            if start < last_stop or (touching and start == last_stop):
                result[-1] = (last_start, max(last_stop, stop))
                continue
        result.append((start, stop))
    return result


def total_length(spans):
    """Length covered by the union of spans (overlaps counted once)."""
    return sum(stop - start for start, stop in merge(spans))


def intersect(first, second):
    """Spans covered by both collections, merged and sorted."""
    a, b = merge(first), merge(second)
    i = j = 0
    out = []
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        stop = min(a[i][1], b[j][1])
        if start < stop:
            out.append((start, stop))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(spans, holes):
    """Parts of spans not covered by any of holes."""
    out = []
    cuts = merge(holes)
    for start, stop in merge(spans):
        pos = start
        for h_start, h_stop in cuts:
            if h_stop <= pos or h_start >= stop:
                continue
            if h_start > pos:
                out.append((pos, h_start))
            pos = max(pos, h_stop)
        if pos < stop:
            out.append((pos, stop))
    return out


def gaps(spans, within=None):
    """Uncovered stretches between spans, optionally limited to a range."""
    merged = merge(spans)
    if within is None:
        if not merged:
            return []
        within = (merged[0][0], merged[-1][1])
    return subtract([within], merged)


def covers(spans, point):
    """True if some span covers point."""
    return any(start <= point < stop for start, stop in spans)


def clip(span, low, high):
    """Restrict span to [low, high); the result may be empty."""
    start, stop = _check(span)
    start = min(max(start, low), high)
    stop = min(max(stop, low), high)
    return (start, stop)


if __name__ == "__main__":
    sample = [(5, 8), (1, 3), (2, 4), (10, 12), (8, 9)]
    print("merged:", merge(sample))
    print("length:", total_length(sample))
    print("gaps:", gaps(sample))
    print("minus (3, 11):", subtract(sample, [(3, 11)]))
