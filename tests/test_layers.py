"""The package's layers, measured by scripts/check_imports.py: no circular import, no
module importing (at the top or inside a function) from a layer above its own. Methods
and evaluation are peers that do not import each other; the CLI is the top and no
command imports another command."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "copyprobe"
_spec = importlib.util.spec_from_file_location("check_imports", ROOT / "scripts" / "check_imports.py")
check_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_imports)


def test_the_script_measures_no_cycle_and_no_import_up_a_layer():
    """scripts/check_imports.py as CI runs it: prints the numbers, exits 0 only at 0 and 0."""
    out = subprocess.run([sys.executable, "scripts/check_imports.py"], capture_output=True, text=True, cwd=ROOT)
    print(out.stdout)
    assert "circular imports: 0" in out.stdout and "imports that reach up a layer: 0" in out.stdout, out.stdout
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_unit_has_a_layer():
    assert check_imports.unlayered() == []


def test_cycles_are_found_through_any_number_of_modules():
    edges = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {"e2": 1}, "e2": {}}
    assert check_imports.cycles(edges) == [("a", "b", "c")]
    assert check_imports.cycles({"x": {"y": 1}, "y": {"x": 1}, "z": {"z2": 1}, "z2": {"z": 1}}) == [("x", "y"), ("z", "z2")]


def test_an_import_up_a_layer_or_across_peers_is_reported():
    edges = {"copyprobe.errors": {"copyprobe.cli.main": 3}, "copyprobe.cli.main": {"copyprobe.errors": 1},
             "copyprobe.methods.loss": {"copyprobe.evaluation.metrics": 7}, "copyprobe.evaluation.metrics": {}}
    assert check_imports.upward(edges) == [
        "copyprobe.errors:3 (errors) imports copyprobe.cli.main (cli)",
        "copyprobe.methods.loss:7 (methods) imports copyprobe.evaluation.metrics (evaluation)",
    ]


def test_imports_resolve_to_modules_whether_they_name_a_module_or_an_attribute():
    modules = set(check_imports.graph())
    # audit.py: `from copyprobe import record` (a module), `from copyprobe.engine import execute`
    # (an attribute), and a lazy `from copyprobe.evaluation.verdicts import audit_verdicts` inside a function
    found = {t for _, t in check_imports.imports_of(PACKAGE / "audit.py", modules)}
    assert {"copyprobe.record", "copyprobe.engine", "copyprobe.evaluation.verdicts"} <= found
    assert "copyprobe" not in found


def test_commands_do_not_import_each_other():
    commands = PACKAGE / "cli" / "commands"
    modules = set(check_imports.graph())
    for path in commands.glob("*.py"):
        for line, target in check_imports.imports_of(path, modules):
            assert not target.startswith("copyprobe.cli.commands"), f"{path.name}:{line} imports {target}"


def test_import_copyprobe_loads_no_heavy_library():
    # what makes `import copyprobe` slow (seconds each); the time itself is measured in
    # benchmarks/bench_import.py, not asserted here
    code = ("import sys, copyprobe; heavy = ('pandas', 'sklearn', 'scipy', 'torch', 'transformers', 'numpy'); "
            "print(','.join(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, check=True)
    assert out.stdout.strip() == "", f"import copyprobe loads {out.stdout.strip()}"
