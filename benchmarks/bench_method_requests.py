"""Requests and tokens per passage of each method: the numbers docs/scale.md gives to size
a job against a server, counted on a small run instead of trusted from the code.

Each method runs through ``copyprobe.detect`` on ``--passages`` WikiMIA-128 passages (half
members) with the model-free FakeBackend (every capability; other models named by a
method are fakes too), its default parameters except where a setting is needed to run at
all (named in the output). From the run record: requests per passage by kind and model
(``requests.by_model_kind`` / passages, after de-duplication, as a server receives them).
From every request the backend answered, with SmolLM2's tokenizer: the prompt tokens
(the text scored, plus a context; a prompt, or the chat messages' contents without the
chat template) and the generation budget (``max_tokens``; a token log-prob request sent
to a server asks for 1 generated token, counted as 0 here).

    python benchmarks/bench_method_requests.py [--passages 60] [--out benchmarks/results/method_requests.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import copyprobe  # noqa: E402
from copyprobe.backends.fake import FakeBackend  # noqa: E402
from copyprobe.files import write_json  # noqa: E402

# method -> (parameters, why they are set); default parameters otherwise
RUNS = {
    "loss": ({}, ""), "zlib": ({}, ""), "lowercase": ({}, ""), "min_k": ({}, ""), "min_k_pp": ({}, ""),
    "surp": ({}, ""), "slope": ({}, ""),
    "slope ngram=5": ({"ngram": 5}, "the n-gram variant"),
    "reference": ({"model": "fake-reference"}, "a reference model"),
    "pac": ({}, ""), "recall": ({}, ""), "con_recall": ({}, ""),
    "neighborhood": ({}, ""),
    "feature_agg": ({}, ""),
    "gradnorm": ({}, ""),
    "prefix_probe": ({}, ""), "name_cloze": ({"tagger": "rule"}, "spaCy not needed"),
    "samia": ({}, ""),
    "decop": ({"paraphraser": "fake-paraphraser"}, "a paraphrasing model (the fake writes parseable paraphrases)"),
    "decop logit": ({"paraphraser": "fake-paraphraser", "mode": "logit"}, "logit mode"),
    "info_probe": ({"reference": "fake-reference", "logprob_threshold": -6.0},
                   "threshold -6 (the fake's log-probs lie in [-9, -1]; -12 finds no word)"),
    "veilprobe": ({"reference": "fake-reference"}, "a reference model"),
}


def fake_generation(request) -> str:
    text = request.prompt or request.messages[-1][1]
    if "Example B" in text or "paraphrase" in text.lower():
        return ("Example B: the first retelling of the passage.\nExample C: a second, different retelling.\n"
                "Example D: a third retelling in other words.")
    return "A"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "method_requests.json")
    args = parser.parse_args()

    from copyprobe.backends.hf.loading import load_gguf_tokenizer
    from copyprobe.backends.specs import alias_path

    tokenizer = load_gguf_tokenizer(alias_path("smollm2-135m-instruct"))

    def n_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    data = copyprobe.load_dataset("wikimia:128")
    members = [e for e in data.examples if e.label == 1][: args.passages // 2]
    others = [e for e in data.examples if e.label == 0][: args.passages - len(members)]
    examples = members + others
    passage_tokens = sum(n_tokens(e.text) for e in examples) / len(examples)
    seen: dict[str, dict[str, float]] = {}

    class Counting(FakeBackend):
        def answer(self, requests, progress=None, on_result=None):
            for request in requests:
                label = f"{request.kind} ({request.model or 'target'})"
                totals = seen.setdefault(label, defaultdict(float))
                if request.kind == "token_logprobs":
                    totals["prompt_tokens"] += n_tokens(request.context + request.text)
                elif request.kind in ("generate", "choice_logprobs"):
                    prompt = request.prompt or "\n".join(content for _, content in request.messages or ())
                    totals["prompt_tokens"] += n_tokens(prompt)
                    totals["generated_tokens"] += getattr(request, "max_tokens", 1)
                else:
                    totals["prompt_tokens"] += n_tokens(request.text)
            return super().answer(requests, progress, on_result)

        def _generate(self, request):
            generation = super()._generate(request)
            if request.top_logprobs:  # neighbourhood's proposals: a few candidate next words
                words = [" harbour", " market", " river", " garden", " bridge", " station"]
                top = [{w: -0.5 - k for k, w in enumerate(words[: request.top_logprobs])}]
                generation = dataclasses.replace(generation, top_logprobs=top)
            return generation

    def backend(spec: str = "fake") -> Counting:
        return Counting(spec=spec, member_texts=[e.text for e in members], generate_fn=fake_generation)

    import copyprobe.backends.specs as specs

    specs.load_backend = lambda spec, **options: backend(spec)
    rows = {}
    for name, (params, why) in RUNS.items():
        method = name.split()[0]
        seen.clear()
        with tempfile.TemporaryDirectory() as tmp:
            result = copyprobe.detect(backend(), examples, [method], params={method: params} if params else None,
                                      cache=False, n_bootstrap=0, blind_baseline=False, out=Path(tmp) / "run")
        requests = result.record.requests
        failed = sum(1 for r in result.rows if r.get(method) is None)
        rows[name] = {
            "parameters": params, "why": why, "rounds": requests["rounds"], "rows_failed": failed,
            "requests_per_passage": {k: round(v / len(examples), 2) for k, v in requests["by_model_kind"].items()},
            "prompt_tokens_per_passage": {k: round(v["prompt_tokens"] / len(examples), 1) for k, v in seen.items()},
            "generated_tokens_per_passage": {k: round(v["generated_tokens"] / len(examples), 1)
                                             for k, v in seen.items() if v.get("generated_tokens")},
        }
        print(f"{name:15s} {json.dumps(rows[name]['requests_per_passage'])} prompt tokens "
              f"{json.dumps(rows[name]['prompt_tokens_per_passage'])} generated "
              f"{json.dumps(rows[name]['generated_tokens_per_passage'])}" + (f" failed {failed}" if failed else ""))
    write_json(args.out, {"passages": len(examples), "data": "wikimia:128 (first members and non-members)",
                          "passage_tokens_mean": round(passage_tokens, 1), "tokenizer": "smollm2-135m-instruct",
                          "command": "python benchmarks/bench_method_requests.py " + " ".join(sys.argv[1:]),
                          "methods": rows})
    print(f"mean passage: {passage_tokens:.1f} tokens; written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
