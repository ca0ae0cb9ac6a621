"""A GGUF file's first load (de-quantized by transformers, then kept in copyprobe's
conversion cache) against its second (read from that cache), per bundled alias, each in a
fresh process with an empty ``COPYPROBE_CACHE_DIR``. The README quotes these numbers.

    python benchmarks/bench_gguf_first_load.py [--models smollm2-135m-instruct,gemma-3-270m]

Prints one line per model and, with ``--json FILE``, writes them. Wall seconds include
importing torch and transformers in the fresh process (a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
start = time.perf_counter()
from copyprobe.backends.specs import load_backend
backend = load_backend(sys.argv[1], device="cpu")
first = time.perf_counter() - start
backend.close()
start = time.perf_counter()
load_backend(sys.argv[1], device="cpu").close()
print(json.dumps({"model": sys.argv[1], "first_s": round(first, 1), "second_s": round(time.perf_counter() - start, 1)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m-instruct,gemma-3-270m")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = []
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        with tempfile.TemporaryDirectory() as cache:
            done = subprocess.run([sys.executable, "-c", CHILD, model], capture_output=True, text=True,
                                  env={**os.environ, "COPYPROBE_CACHE_DIR": cache})
        if done.returncode != 0:
            sys.exit(f"{model}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(row)
        print(f"{model}: first load {row['first_s']} s (de-quantized), second {row['second_s']} s (from the cache)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu_count": os.cpu_count(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
