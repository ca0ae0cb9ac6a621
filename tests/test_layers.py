"""The package's layers: no module imports (at the top or inside a function) from a layer
above its own. Methods and evaluation are peers that do not import each other; the CLI
is the top and no command imports another command."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "copyprobe"

# unit (module or package under copyprobe) -> layer; a unit may import its own modules and
# any unit of a lower layer
LAYERS: dict[str, float] = {
    "errors": 0, "_version": 0, "params": 0.1, "files": 0.1, "registry": 0.2,
    "text": 1, "data": 1, "backends": 1, "freq": 1,
    "methods": 2, "evaluation": 2,
    "runner": 3, "session": 3.1, "scoring": 3.2, "record": 3.3,
    "detect": 4, "copying": 4.1, "plant": 4.1, "audit": 4.2, "rescore": 4.3, "canary": 4.3, "demo": 4.3,
    "reports": 5,
    "cli": 6,
    "__init__": 7,
}


def unit_of(module: str) -> str:
    parts = module.split(".")
    assert parts[0] == "copyprobe"
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported copyprobe module) for every import statement in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("copyprobe")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "copyprobe":
                # `from copyprobe import record` names a module; other names come from __init__
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                    found.append((node.lineno, f"copyprobe.{alias.name}" if is_module else "copyprobe"))
            elif node.module.startswith("copyprobe."):
                found.append((node.lineno, node.module))
    return found


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert units <= set(LAYERS), f"give these a layer: {sorted(units - set(LAYERS))}"


def test_no_import_reaches_up_a_layer():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        source = unit_of(module) if module != "copyprobe" else "__init__"
        for line, target in imports_of(path):
            dest = unit_of(target)
            if dest == source:
                continue
            if LAYERS[dest] >= LAYERS[source]:
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({source}) imports {target} ({dest})")
    assert not problems, "\n".join(problems)


def test_commands_do_not_import_each_other():
    commands = PACKAGE / "cli" / "commands"
    for path in commands.glob("*.py"):
        for line, target in imports_of(path):
            assert not target.startswith("copyprobe.cli.commands"), f"{path.name}:{line} imports {target}"


def test_import_copyprobe_loads_no_heavy_library():
    # what makes `import copyprobe` slow (seconds each); the time itself is measured in
    # benchmarks/bench_import.py, not asserted here
    import subprocess
    import sys

    code = ("import sys, copyprobe; heavy = ('pandas', 'sklearn', 'scipy', 'torch', 'transformers', 'numpy'); "
            "print(','.join(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, check=True)
    assert out.stdout.strip() == "", f"import copyprobe loads {out.stdout.strip()}"
