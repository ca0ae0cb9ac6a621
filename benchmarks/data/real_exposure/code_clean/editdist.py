"""Distances between strings and the edits that turn one into another.

The edit distance counts the insertions, deletions and substitutions needed
to change one string into another.  The functions keep only two rows of the
usual table in memory, so long strings are cheap in space, and they can stop
early once a distance is known to exceed a limit.

    >>> distance("kitten", "sitting")
    3
    >>> closest("appel", ["apple", "ample", "maple"])
    'apple'
"""

__all__ = ["distance", "within", "closest", "similarity", "edit_script"]


def distance(a, b, limit=None):
    """Edit distance between a and b.

    When limit is given and the distance is larger, limit + 1 is returned as
    soon as that is certain.
    """
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        best = i
        for j, cb in enumerate(b, 1):
            cost = previous[j - 1] + (ca != cb)
            cost = min(cost, previous[j] + 1, current[j - 1] + 1)
            current.append(cost)
            if cost < best:
                best = cost
        if limit is not None and best > limit:
            return limit + 1
        previous = current
    return previous[-1]


def within(a, b, limit):
    """True if a can be turned into b with at most limit edits."""
    return distance(a, b, limit) <= limit


def similarity(a, b):
    """1.0 for equal strings, falling to 0.0 as edits approach the length."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - distance(a, b) / longest


def closest(word, candidates, limit=None):
    """The candidate nearest to word (first one on ties), or None.

    With limit, candidates farther than limit edits are not considered.
    """
    best, best_cost = None, None
    for candidate in candidates:
        bound = limit if best_cost is None else min(best_cost, limit or best_cost)
        cost = distance(word, candidate, bound)
        if limit is not None and cost > limit:
            continue
        if best_cost is None or cost < best_cost:
            best, best_cost = candidate, cost
    return best


def edit_script(a, b):
    """A shortest list of edits turning a into b.

    Each edit is a tuple: ("keep", char), ("sub", old, new), ("del", char) or
    ("ins", char).  This keeps the whole table, so use it on short strings.
    """
    rows, cols = len(a) + 1, len(b) + 1
    table = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        table[i][0] = i
    for j in range(cols):
        table[0][j] = j
    for i in range(1, rows):
        for j in range(1, cols):
            table[i][j] = min(table[i - 1][j - 1] + (a[i - 1] != b[j - 1]),
                              table[i - 1][j] + 1, table[i][j - 1] + 1)
    script = []
    i, j = len(a), len(b)
    while i or j:
        if i and j and table[i][j] == table[i - 1][j - 1] + (a[i - 1] != b[j - 1]):
            same = a[i - 1] == b[j - 1]
            script.append(("keep", a[i - 1]) if same else ("sub", a[i - 1], b[j - 1]))
            i, j = i - 1, j - 1
        elif i and table[i][j] == table[i - 1][j] + 1:
            script.append(("del", a[i - 1]))
            i -= 1
        else:
            script.append(("ins", b[j - 1]))
            j -= 1
    script.reverse()
    return script


if __name__ == "__main__":
    print(distance("flaw", "lawn"), similarity("flaw", "lawn"))
    for step in edit_script("sunday", "saturday"):
        print(step)
