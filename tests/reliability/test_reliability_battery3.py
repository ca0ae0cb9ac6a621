"""The third reliability battery (issue 42): APIs that only generate, servers that hang,
runs that scored nothing, folders with files that cannot be read, options a backend would
ignore, overflowing plant settings and answers fixed before any scoring."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from copyprobe.cli.main import main
from rel_util import cli_cmd, env, make_passages, write_jsonl

REPO = Path(__file__).resolve().parents[2]
SYLLABLES = "ka lo mi nu pe ra si to vu we ba de fi go hu ja ke li mo na".split()


def pseudo_text(rng: random.Random, words: int = 30) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(words))


def audit_files(tmp_path: Path, n_clean: int = 4, n_suspect: int = 2, seed: int = 2) -> tuple[Path, Path]:
    rng = random.Random(seed)
    suspect = write_jsonl(tmp_path / "s.jsonl", [{"id": f"s{d}-{p}", "text": pseudo_text(rng), "doc_id": f"book{d}"}
                                                for d in range(n_suspect) for p in range(2)])
    clean = write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{k}-{p}", "text": pseudo_text(rng), "doc_id": f"c{k}"}
                                              for k in range(n_clean) for p in range(2)])
    return suspect, clean


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- 1. a capability probed before a method is chosen ------------------------------------

def test_audit_auto_on_a_generation_only_server_runs_prefix_probing(tmp_path, fake_openai, monkeypatch, capsys):
    """The fake server gives no prompt log-probs (``logprobs: null`` on an echoed prompt),
    like most hosted chat APIs: auto must ask before it chooses, and run prefix probing."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = fake_openai()
    suspect, clean = audit_files(tmp_path)
    out = tmp_path / "run"
    code = main(["audit", "--model", f"openai:tiny-model@{server.base_url}", "--suspect", str(suspect),
                 "--clean", str(clean), "--method", "auto", "--out", str(out), "--no-cache", "--no-progress",
                 "--bootstrap", "0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    run = json.loads((out / "run.json").read_text())
    assert run["audit"]["method"] == "prefix_probe"
    assert any(n.startswith("method auto -> prefix_probe") for n in run["notes"])
    assert run["model"]["prompt_logprobs"] is False
    # one probe of prompt log-probs, then generations only
    echoed = [r for r in server.log if r["body"].get("echo")]
    assert len(echoed) == 1
    assert not (out / "scores.jsonl").read_text().count('"prefix_probe": null')
