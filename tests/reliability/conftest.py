"""Fixtures for the reliability tests: the real llama.cpp server fixture of
tests/server/conftest.py (reused, not copied); the fake OpenAI-compatible server is the
``fake_openai`` fixture of tests/conftest.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent))

_server_conftest = Path(__file__).parents[1] / "server" / "conftest.py"
if _server_conftest.is_file():
    _spec = importlib.util.spec_from_file_location("_copyprobe_server_conftest", _server_conftest)
    _module = importlib.util.module_from_spec(_spec)
    try:
        _spec.loader.exec_module(_module)
        llama_server = _module.llama_server
    except Exception:  # the black-box engineer's fixture is still being written
        pass
