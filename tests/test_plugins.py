"""Methods from other packages: the `copyprobe.methods` entry point group brings them into
`copyprobe methods`, `--param` and `detect`; the guide's example file is that plugin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "trimmed_loglik.py"


def make_plugin(root: Path, entry: str) -> None:
    """An installed distribution as importlib.metadata finds it: a package + dist-info."""
    package = root / "cp_plugin_demo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, package / "trimmed_loglik.py")
    info = root / "cp_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cp-plugin-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[copyprobe.methods]\n{entry}\n")


def run_python(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(root)]))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120, cwd=root)


def test_the_guide_example_is_at_most_40_lines():
    assert len(EXAMPLE.read_text().splitlines()) <= 40
    assert "docs/examples/trimmed_loglik.py" in (REPO / "docs" / "write-a-method.md").read_text()


def test_entry_point_method_is_listed_validated_and_scored(tmp_path):
    make_plugin(tmp_path, "trimmed_loglik = cp_plugin_demo.trimmed_loglik:TrimmedLoglik")
    listed = run_python(tmp_path, "-m", "copyprobe.cli.main", "methods", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["trimmed_loglik"]["module"] == "cp_plugin_demo.trimmed_loglik"
    assert rows["trimmed_loglik"]["params"]["trim"] == {
        "default": 0.1, "accepts": "a number in [0, 1)", "help": "share of the least likely tokens to drop"}
    # its constraint guards --param before any data or model is touched
    bad = run_python(tmp_path, "-m", "copyprobe.cli.main", "detect", "--model", "nope", "--data", "nope.jsonl",
                     "--out", str(tmp_path / "run"), "--methods", "trimmed_loglik", "--param", "trimmed_loglik.trim=1")
    assert bad.returncode == 2 and "trimmed_loglik.trim must be a number in [0, 1)" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    # scored through detect next to loss: with trim=0 it is the mean log-likelihood, i.e. loss
    script = (
        "import copyprobe, json\n"
        "from copyprobe.backends.fake import FakeBackend\n"
        "texts = ['the cat sat on the mat today', 'a dog ran far away from home', 'one']\n"
        "r = copyprobe.detect(FakeBackend(), texts, ['trimmed_loglik', 'loss'],\n"
        "                     params={'trimmed_loglik': {'trim': 0.0}}, cache=False)\n"
        "print(json.dumps(r.rows))\n"
    )
    scored = run_python(tmp_path, "-c", script)
    assert scored.returncode == 0, scored.stderr
    rows = json.loads(scored.stdout)
    assert rows[0]["trimmed_loglik"] == pytest.approx(rows[0]["loss"], abs=1e-12)
    assert rows[1]["trimmed_loglik"] == pytest.approx(rows[1]["loss"], abs=1e-12)
    assert rows[2]["trimmed_loglik"] is None and "nothing to score" in rows[2]["errors"]["trimmed_loglik"]


def test_a_broken_plugin_is_reported_and_the_rest_still_works(tmp_path):
    make_plugin(tmp_path, "ghost = cp_plugin_demo.not_there:Ghost")
    listed = run_python(tmp_path, "-m", "copyprobe.cli.main", "methods")
    assert listed.returncode == 0, listed.stderr
    assert "loss" in listed.stdout
    assert "method plugin ghost could not be loaded" in listed.stdout
