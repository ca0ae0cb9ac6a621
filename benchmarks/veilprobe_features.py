"""Do VeilProbe's sampled suffixes separate the members before any learning? (issue 28)

Re-runs VeilProbe's requests for every passage from the response cache of a
``bench_blackbox_planted.py`` run (no model call when the cache is complete: same
parameters, same cache file) and scores three model-free statistics of its features,
each oriented so that higher = more likely member:

* ``self_similarity``: mean pairwise ROUGE-L F1 among the text's own sampled suffixes (a
  memorised continuation comes back the same way each time; SaMIA's idea without the
  true continuation);
* ``perturbation_drop``: self_similarity minus the mean ROUGE-L between the text's
  suffixes and its perturbed text's suffixes (VeilProbe's premise: a member's suffixes
  change more when its key words are replaced);
* ``-perturbed_similarity``: minus the mean ROUGE-L between the two sets of suffixes.

AUC over all passages (no training rows: nothing is fitted), with 95% bootstrap CIs over
letters, beside the learned VeilProbe score of the same run.

    python benchmarks/veilprobe_features.py --model llamacpp:runs/gguf/epoch3-q8_0.gguf \\
        --cache /work/runs/veil_epoch3.sqlite --param veilprobe.proxies=... (as the run)
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_blackbox import parse_params  # noqa: E402
from bench_blackbox_planted import load_examples, metrics  # noqa: E402

from copyprobe.drive import Failure, drive  # noqa: E402
from copyprobe.methods.prefix_probe import rouge_l  # noqa: E402  prefix probing's own (one scorer)
from copyprobe.scoring import build_methods  # noqa: E402


def mean_pairwise(texts) -> float:
    pairs = list(itertools.combinations(texts, 2))
    return float(np.mean([rouge_l(a, b) for a, b in pairs])) if pairs else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--data", default=str(ROOT / "benchmarks/data/one_voice/planted_passages.jsonl"))
    parser.add_argument("--param", action="append", default=[])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from copyprobe.backends.specs import load_backend
    from copyprobe.session import Session

    examples = load_examples(args.data, None)
    backend = load_backend(args.model, device="cpu", n_threads=args.threads)
    session = Session(backend, cache=args.cache)
    method = build_methods(["veilprobe"], parse_params(args.param))[0].resolve(session.target_spec)
    features = drive({i: method.run(e) for i, e in enumerate(examples)}, session.backend_for)
    session.close()
    stats: dict[str, list[float]] = {"self_similarity": [], "perturbation_drop": [], "-perturbed_similarity": []}
    keep = []
    for i, example in enumerate(examples):
        f = features[i]
        if isinstance(f, Failure):
            continue
        own = mean_pairwise(f.suffixes)
        across = float(np.mean([rouge_l(a, b) for a in f.suffixes for b in f.perturbed_suffixes]))
        stats["self_similarity"].append(own)
        stats["perturbation_drop"].append(own - across)
        stats["-perturbed_similarity"].append(-across)
        keep.append(example)
    labels = [e.label for e in keep]
    groups = [e.doc_id for e in keep]
    out = {"model": args.model, "n": len(keep)}
    for name, values in stats.items():
        m = metrics(labels, values, groups)
        out[name] = {k: m[k] for k in ("auc", "ci_documents", "doc_auc")}
        out[name]["mean_members"] = round(float(np.mean([v for v, y in zip(values, labels) if y == 1])), 4)
        out[name]["mean_non_members"] = round(float(np.mean([v for v, y in zip(values, labels) if y == 0])), 4)
    print(json.dumps(out, default=lambda v: round(v, 4) if isinstance(v, float) else v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
