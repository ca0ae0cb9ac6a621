"""Order items so that each comes after the items it depends on.

Dependencies are given as a mapping from each item to the items it needs.
order() returns one valid order and raises CycleError, naming the items of
one cycle, when there is none.  layers() groups the items into stages whose
members can be handled at the same time.

    >>> order({"b": ["a"], "c": ["b", "a"]})
    ['a', 'b', 'c']
    >>> layers({"b": ["a"], "c": ["a"]})
    [['a'], ['b', 'c']]
"""

__all__ = ["order", "layers", "CycleError", "dependents"]


class CycleError(ValueError):
    """The dependencies contain a cycle; `cycle` lists its items in order."""

    def __init__(self, cycle):
        super().__init__("dependency cycle: " + " -> ".join(map(str, cycle)))
        self.cycle = cycle


def _normalise(needs):
    graph = {}
    for item, required in needs.items():
        graph.setdefault(item, set()).update(required)
        for other in required:
            graph.setdefault(other, set())
    return graph


def _find_cycle(graph, remaining):
    start = next(iter(sorted(remaining, key=str)))
    path, seen = [start], {start: 0}
    node = start
    while True:
        node = next(n for n in sorted(graph[node], key=str) if n in remaining)
        if node in seen:
            return path[seen[node]:] + [node]
        seen[node] = len(path)
        path.append(node)


def layers(needs):
    """Items grouped into stages; each stage needs only earlier stages.

    Items inside a stage are sorted so that the result does not depend on
    the order of the mapping.
    """
    graph = _normalise(needs)
    waiting = {item: len(req) for item, req in graph.items()}
    users = dependents(graph)
    ready = sorted((item for item, n in waiting.items() if n == 0), key=str)
    result = []
    done = 0
    while ready:
        result.append(ready)
        done += len(ready)
        following = []
        for item in ready:
            for user in users.get(item, ()):
                waiting[user] -= 1
                if waiting[user] == 0:
                    following.append(user)
        ready = sorted(following, key=str)
    if done != len(graph):
        remaining = {item for item, n in waiting.items() if n > 0}
        raise CycleError(_find_cycle(graph, remaining))
    return result


def order(needs):
    """One order of all items in which every item follows what it needs."""
    return [item for stage in layers(needs) for item in stage]


def dependents(needs):
    """The reverse mapping: for each item, the items that need it."""
    reverse = {}
    for item, required in needs.items():
        for other in required:
            reverse.setdefault(other, set()).add(item)
    return reverse


if __name__ == "__main__":
    build = {"app": ["lib", "config"], "lib": ["core"], "tests": ["app"],
             "config": []}
    print(order(build))
    print(layers(build))
    try:
        order({"x": ["y"], "y": ["z"], "z": ["x"]})
    except CycleError as exc:
        print(exc)
