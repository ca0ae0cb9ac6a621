"""Name the bits of an integer and convert between names and numbers.

A FlagSet is built from a sequence of names; the first name is bit 0, the
second bit 1, and so on.  It turns collections of names into integers and
back, and formats an integer as a readable list of the flags it has set.

    >>> perms = FlagSet(["read", "write", "execute"])
    >>> perms.value(["read", "execute"])
    5
    >>> perms.names(6)
    ['write', 'execute']
    >>> perms.describe(7)
    'read|write|execute'
"""

__all__ = ["FlagSet", "count_bits", "lowest_bit"]


def count_bits(number):
    """The number of set bits in a non-negative integer."""
    if number < 0:
        raise ValueError("negative numbers have no finite bit count")
    return bin(number).count("1")


def lowest_bit(number):
    """The index of the lowest set bit, or -1 for zero."""
    if number == 0:
        return -1
    return (number & -number).bit_length() - 1


class FlagSet:
    """Map flag names to bit positions."""

    def __init__(self, names):
        names = list(names)
        if len(set(names)) != len(names):
            raise ValueError("flag names must be unique")
        self._names = names
        self._bits = {name: 1 << pos for pos, name in enumerate(names)}
        self.all = (1 << len(names)) - 1

    def __len__(self):
        return len(self._names)

    def __repr__(self):
        return "FlagSet(%r)" % self._names

    def bit(self, name):
        """The integer with only name's bit set."""
        try:
            return self._bits[name]
        except KeyError:
            raise ValueError("unknown flag %r" % name) from None

    def value(self, names):
        """The integer with the bits of every name in names set."""
        total = 0
        for name in names:
            total |= self.bit(name)
        return total

    def names(self, number):
        """The names of the bits set in number, lowest bit first."""
        if number & ~self.all:
            raise ValueError("%d has bits no flag names" % number)
        return [name for name in self._names if number & self._bits[name]]

    def describe(self, number, sep="|", none="none"):
        """The names joined by sep, or none for zero."""
        return sep.join(self.names(number)) or none

    def parse(self, text, sep="|"):
        """Read back a string written by describe()."""
        text = text.strip()
        if not text or text == "none":
            return 0
        return self.value(part.strip() for part in text.split(sep))

    def toggle(self, number, name):
        """number with name's bit flipped."""
        return number ^ self.bit(name)


if __name__ == "__main__":
    modes = FlagSet(["bold", "italic", "underline", "strike"])
    for n in (0, 3, 9, 15):
        print(n, modes.describe(n), count_bits(n), lowest_bit(n))
    print(modes.parse("italic | strike"))
