"""A set of strings stored as a prefix tree.

TrieSet supports the usual set operations on strings and, unlike a plain set,
can list every member that starts with a given prefix and find the longest
member that is a prefix of a given string.  Nodes are dictionaries, so the
structure is easy to inspect in a debugger.

    >>> words = TrieSet(["car", "cart", "cat", "dog"])
    >>> sorted(words.starting_with("ca"))
    ['car', 'cart', 'cat']
    >>> words.longest_prefix_of("cartwheel")
    'cart'
"""

__all__ = ["TrieSet"]

_END = object()


class TrieSet:
    """A mutable set of strings with prefix queries."""

    def __init__(self, iterable=()):
        self._root = {}
        self._size = 0
        for word in iterable:
            self.add(word)

    def __len__(self):
        return self._size

    def __repr__(self):
        return "TrieSet(%r)" % sorted(self)

    def add(self, word):
        """Add word; adding a member again changes nothing."""
        node = self._root
        for ch in word:
            node = node.setdefault(ch, {})
        if _END not in node:
            node[_END] = True
            self._size += 1

    def _node(self, prefix):
        node = self._root
        for ch in prefix:
            node = node.get(ch)
            if node is None:
                return None
        return node

    def __contains__(self, word):
        node = self._node(word)
        return node is not None and _END in node

    def discard(self, word):
        """Remove word if present, pruning branches left empty."""
        path = [self._root]
        for ch in word:
            nxt = path[-1].get(ch)
            if nxt is None:
                return
            path.append(nxt)
        if _END not in path[-1]:
            return
        del path[-1][_END]
        self._size -= 1
        for ch, node in zip(reversed(word), reversed(path)):
            if node:
                break
            del path[path.index(node) - 1][ch]

    def _walk(self, node, prefix):
        if _END in node:
            yield prefix
        for ch in sorted(k for k in node if k is not _END):
            yield from self._walk(node[ch], prefix + ch)

    def __iter__(self):
        return self._walk(self._root, "")

    def starting_with(self, prefix):
        """Iterate over the members that begin with prefix, in sorted order."""
        node = self._node(prefix)
        if node is None:
            return iter(())
        return self._walk(node, prefix)

    def longest_prefix_of(self, text):
        """The longest member that text starts with, or None."""
        node, best = self._root, None
        for pos, ch in enumerate(text):
            if _END in node:
                best = text[:pos]
            node = node.get(ch)
            if node is None:
                return best
        return text if _END in node else best


if __name__ == "__main__":
    t = TrieSet("tea ten to inn in tent".split())
    print(t, len(t))
    t.discard("ten")
    print(list(t.starting_with("te")), t.longest_prefix_of("inner"))
