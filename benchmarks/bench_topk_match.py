"""How topk_loss's text matching reads each word start, against the tokenizer's own tokens.

On a model with full token log-probs (transformers, whose tokenizer is known), for every
word start of the passages (those of bench_topk.py) whose prompt's tokens begin the
passage's tokens: is the tokenizer's own next token among the top k; how often the match
is the lone space candidate (" "), and how often the tokenizer's token is the space
then; and the error of the position's value against the true log-prob for two matching
rules: the method's (the longest candidate that begins the rest) and one that requires
the candidate to reach into the word (a whitespace-only candidate does not count; floor
instead). For each rule, the passages' scores' Pearson correlation with ``loss`` and the
AUC.

    python benchmarks/bench_topk_match.py --model smollm2-135m-instruct --threads 1 \\
        --out benchmarks/results/topk_match.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_topk import passages  # noqa: E402

from copyprobe.backends.base import TokenLogprobsRequest  # noqa: E402
from copyprobe.backends.specs import load_backend  # noqa: E402
from copyprobe.methods.topk import match_next, word_starts  # noqa: E402
from copyprobe.registry import make_method  # noqa: E402


def into_the_word(candidates: dict[str, float], rest: str) -> float:
    """The other rule: a whitespace-only candidate does not count as the word's token."""
    reaching = {piece: value for piece, value in candidates.items() if piece.strip()}
    piece, value = match_next(reaching, rest) if reaching else (None, 0.0)
    return value if piece is not None else min(candidates.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--data", default="wikimia:64")
    parser.add_argument("--per-label", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import numpy as np
    import torch
    from sklearn.metrics import roc_auc_score

    torch.set_num_threads(args.threads)
    backend = load_backend(args.model, device="cpu", dtype="float32")
    method = make_method("topk_loss", k=args.k)
    counts = {"positions": 0, "compared": 0, "true_in_top_k": 0, "whitespace_match": 0,
              "whitespace_match_true_whitespace": 0}
    errors: dict[str, list[float]] = {"longest": [], "into_the_word": []}
    scores: dict[str, list[float]] = {"loss": [], "longest": [], "into_the_word": []}
    labels = []
    for example in passages(args.data, args.per_label):
        requests = method.requests(example)
        answers = backend.answer(requests)
        full = backend.answer([TokenLogprobsRequest(example.text)])[0]
        values: dict[str, list[float]] = {"longest": [], "into_the_word": []}
        for position, request, answer in zip(word_starts(example.text, method.max_words), requests, answers):
            candidates, rest = answer.top_logprobs[0], example.text[position.cut:]
            piece, longest = match_next(candidates, rest)
            other = into_the_word(candidates, rest)
            values["longest"].append(longest)
            values["into_the_word"].append(other)
            counts["positions"] += 1
            ids = backend.tokenizer(request.prompt).input_ids
            if full.token_ids[:len(ids)] != ids:
                continue
            true_piece = backend._token_piece(full.token_ids[len(ids)])
            true_value = full.logprobs[len(ids) - 1]
            counts["compared"] += 1
            counts["true_in_top_k"] += true_piece in candidates
            if piece is not None and not piece.strip():
                counts["whitespace_match"] += 1
                counts["whitespace_match_true_whitespace"] += not true_piece.strip()
            errors["longest"].append(longest - true_value)
            errors["into_the_word"].append(other - true_value)
        scores["loss"].append(float(np.mean(full.logprobs)))
        for rule, listed in values.items():
            scores[rule].append(float(np.mean(listed)))
        labels.append(example.label)
    summary = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
               "model": args.model, "k": args.k, "passages": len(labels), **counts,
               "auc_loss": float(roc_auc_score(labels, scores["loss"]))}
    for rule in errors:
        err = np.asarray(errors[rule])
        summary[rule] = {"mean_error": float(err.mean()), "mean_abs_error": float(np.abs(err).mean()),
                         "pearson_with_loss": float(np.corrcoef(scores["loss"], scores[rule])[0, 1]),
                         "auc": float(roc_auc_score(labels, scores[rule]))}
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    backend.close()


if __name__ == "__main__":
    main()
