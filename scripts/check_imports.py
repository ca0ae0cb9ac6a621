"""Measure copyprobe's import structure from its source: circular imports between
modules, and imports that reach up a layer. Prints the numbers; exits 1 when either is
not zero (a cycle listed in KNOWN_CYCLES is reported but allowed while its fix lands).

    python scripts/check_imports.py

Every import statement counts, at the top of a module or inside a function: a lazy
import still ties the two modules together. tests/test_layers.py runs this in CI.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "copyprobe"

# unit (module or package directly under copyprobe) -> layer; a unit may import its own
# modules and any unit of a lower layer, never one of its own layer or above
LAYERS: dict[str, float] = {
    "errors": 0, "_version": 0, "params": 0.1, "files": 0.1, "hub": 0.1, "run_files": 0.15, "registry": 0.2, "progress": 0.2,
    "text": 1, "data": 1, "backends": 1, "freq": 1,
    "methods": 2, "evaluation": 2,
    "drive": 3, "session": 3.1, "scoring": 3.2, "record": 3.3, "engine": 3.5,
    "detect": 4, "copying": 4.1, "plant": 4.1, "audit": 4.2, "canary": 4.3, "demo": 4.3,
    "testing": 4.4, "kinds": 4.45, "rescore": 4.5,
    "reports": 5,
    "cli": 6,
    "__init__": 7, "__main__": 7,
}

# cycles that are known and being removed elsewhere (sorted module names -> why allowed)
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module of the package that ``name`` (a module, or a module's attribute) is in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """(line, copyprobe module) for every import statement in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]  # a submodule, or an attribute of base
        for name in names:
            if name.split(".")[0] == "copyprobe":
                target = _resolve(name, modules)
                if target is not None:
                    found.append((node.lineno, target))
    return found


def graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, inside the package only."""
    paths = {module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = set(paths)
    edges: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in paths.items():
        for line, target in imports_of(path, modules):
            if target != module and not module.startswith(target + "."):  # a package's own __init__ is no tie
                edges[module].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[tuple[str, ...]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(tuple(sorted(group)))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def upward(edges: dict[str, dict[str, int]]) -> list[str]:
    """Imports from a unit to one of its own layer or above, as 'file:line (unit) imports module (unit)'."""
    problems = []
    for module in sorted(edges):
        source = unit_of(module)
        for target, line in sorted(edges[module].items()):
            dest = unit_of(target)
            if dest != source and LAYERS[dest] >= LAYERS[source]:
                problems.append(f"{module}:{line} ({source}) imports {target} ({dest})")
    return problems


def unlayered() -> list[str]:
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    return sorted(units - set(LAYERS))


def measure() -> dict[str, object]:
    edges = graph()
    found = cycles(edges)
    return {
        "modules": len(edges),
        "imports": sum(len(v) for v in edges.values()),
        "cycles": [c for c in found if c not in KNOWN_CYCLES],
        "known_cycles": [c for c in found if c in KNOWN_CYCLES],
        "upward": upward(edges) if not unlayered() else [],
        "unlayered": unlayered(),
    }


def main() -> int:
    m = measure()
    print(f"{m['modules']} modules, {m['imports']} imports between them")
    print(f"circular imports: {len(m['cycles'])}" + (f" (and {len(m['known_cycles'])} known, being removed)"
                                                     if m["known_cycles"] else ""))
    for group in m["cycles"] + m["known_cycles"]:
        print("  " + " <-> ".join(group) + (f"  [known: {KNOWN_CYCLES[group]}]" if group in KNOWN_CYCLES else ""))
    print(f"imports that reach up a layer: {len(m['upward'])}")
    for line in m["upward"]:
        print("  " + line)
    if m["unlayered"]:
        print(f"units without a layer (give them one in LAYERS): {', '.join(m['unlayered'])}")
    return 1 if m["cycles"] or m["upward"] or m["unlayered"] else 0


if __name__ == "__main__":
    sys.exit(main())
