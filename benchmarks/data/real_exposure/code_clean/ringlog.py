"""A fixed-size ring of recent records.

RingLog keeps the last N records appended to it and forgets older ones.  It is
meant for diagnostics: a program can append every event cheaply and dump only
the recent history when something goes wrong.

    >>> log = RingLog(3)
    >>> for word in "one two three four".split():
    ...     log.append(word)
    >>> list(log)
    ['two', 'three', 'four']
    >>> log.dropped
    1
"""

import time

__all__ = ["RingLog"]


class RingLog:
    """Keep the most recent `size` records, oldest first when iterated."""

    def __init__(self, size, clock=None):
        if size < 1:
            raise ValueError("size must be at least 1")
        self._size = size
        self._items = [None] * size
        self._stamps = [0.0] * size
        self._next = 0
        self._count = 0
        self._clock = clock or time.monotonic
        self.dropped = 0

    def __len__(self):
        return self._count

    def __repr__(self):
        return "<RingLog %d/%d records, %d dropped>" % (
            self._count, self._size, self.dropped)

    def append(self, record):
        """Add a record, forgetting the oldest one when the ring is full."""
        if self._count == self._size:
            self.dropped += 1
        else:
            self._count += 1
        self._items[self._next] = record
        self._stamps[self._next] = self._clock()
        self._next = (self._next + 1) % self._size

    def _order(self):
        start = (self._next - self._count) % self._size
        for offset in range(self._count):
            yield (start + offset) % self._size

    def __iter__(self):
        for index in self._order():
            yield self._items[index]

    def timed(self):
        """Return (timestamp, record) pairs, oldest first."""
        return [(self._stamps[i], self._items[i]) for i in self._order()]

    def since(self, seconds):
        """Records appended within the last `seconds` seconds."""
        limit = self._clock() - seconds
        return [item for stamp, item in self.timed() if stamp >= limit]

    def last(self, n=1):
        """The n most recent records, oldest of them first."""
        if n <= 0:
            return []
        return list(self)[-n:]

    def clear(self):
        """Forget every record; the dropped count is kept."""
        self._items = [None] * self._size
        self._next = 0
        self._count = 0

    def dump(self, file, fmt="%(stamp).3f %(record)s"):
        """Write one line per record to an open text file."""
        for stamp, record in self.timed():
            file.write(fmt % {"stamp": stamp, "record": record} + "\n")

    def resize(self, size):
        """Change the capacity, keeping as many recent records as fit."""
        kept = self.timed()[-size:]
        self.__init__(size, self._clock)
        for stamp, record in kept:
            self._items[self._next] = record
            self._stamps[self._next] = stamp
            self._next = (self._next + 1) % self._size
            self._count += 1


if __name__ == "__main__":
    import sys
    ring = RingLog(4)
    for n in range(10):
        ring.append("event %d" % n)
    ring.dump(sys.stdout)
    print(ring)
