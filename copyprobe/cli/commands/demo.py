"""copyprobe demo: the whole pipeline offline, on bundled famous vs freshly written passages."""

from __future__ import annotations

import argparse
from pathlib import Path

from copyprobe.cli._common import add_model_options, add_run_options, run_detect, split_names

DEMO_METHODS = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference"


def demo_data_path() -> Path:
    return Path(__file__).resolve().parents[2] / "demo" / "demo.jsonl"


HELP = "run offline on bundled data: famous public-domain passages vs freshly written ones"
DESCRIPTION = (
    "Scores 24 famous public-domain passages (scripture, founding documents, novel "
    "openings, Shakespeare; label 1) against 24 passages written for copyprobe in the same "
    "styles (label 0) with the bundled SmolLM2-135M model, and prints AUC with CIs per method."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default smollm2-135m-instruct)")
    parser.add_argument("--methods", default=DEMO_METHODS, help=f"comma-separated methods (default {DEMO_METHODS})")
    parser.add_argument("--no-copying", action="store_true",
                        help="skip the copying table (literal completions of the famous passages, beside the fresh ones)")
    add_run_options(parser, out_default="runs/demo")
    add_model_options(parser)


def demo_copysets(reference_share: float = 1 / 3):
    """(famous, fresh) literal items from the demo passages: each passage's last third is
    the reference, the rest the prefix. The fresh passages, written for copyprobe, are
    the clean baseline, cut the same way."""
    import json

    from copyprobe.copying.data import CopySet, LiteralItem

    sets: dict[int, list] = {0: [], 1: []}
    with open(demo_data_path(), encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            words = row["text"].split()
            cut = len(words) - max(1, round(len(words) * reference_share))
            sets[int(row["label"])].append(LiteralItem(id=row["id"], title=str(row.get("doc_id", "")),
                                                       input=" ".join(words[:cut]), reference=" ".join(words[cut:])))
    return (CopySet(literal=sets[1], source=str(demo_data_path())),
            CopySet(literal=sets[0], source=str(demo_data_path()) + " (fresh passages)"))


def run_copying(args: argparse.Namespace) -> int:
    from pathlib import Path

    from copyprobe.cli._common import cache_setting
    from copyprobe.progress import progress_bars
    from copyprobe.copying.summary import summary_lines
    from copyprobe.copying.runner import CopyConfig, copying

    famous, fresh = demo_copysets()
    print(f"\ncopying: does {args.model} complete the famous passages more than the fresh ones?")
    with progress_bars(not args.no_progress) as progress:
        result = copying(args.model, famous, CopyConfig(tasks=("literal",), literal_max_tokens=40), clean=fresh,
                         out=Path(args.out) / "copying", cache=cache_setting(args), batch_size=args.batch_size,
                         device=args.device, dtype=args.dtype, progress=progress)
    print("\n".join(summary_lines(result["metrics"], result["run"])))
    print(f"copying run written to {result['out']}")
    from copyprobe.cli._common import copying_exit_code

    return copying_exit_code(result["rows"])  # `copyprobe copying`'s rule: a part that scored nothing exits 2


def explain_reference(result) -> list[str]:
    """Why ``reference`` can rank famous text below fresh text: the reference model knows
    the famous passages too (often better than the target), so the calibrated score asks
    which model knows them better. Said when it happens (AUC below 0.5)."""
    block = ((result.metrics or {}).get("passage") or {}).get("reference") or {}
    auc = block.get("auc")
    if auc is None or auc >= 0.5:
        return []
    model = ((result.record.methods or {}).get("reference") or {}).get("model", "the reference model")
    return [f"note: reference has AUC {auc:.2f}, below chance: the famous passages are in the training data of "
            f"its reference model ({model}) too, which knows them at least as well as the target does, so the "
            f"calibrated score (target minus reference) measures which model knows a text better, not whether "
            f"the target saw it. loss, which asks the target alone, ranks them first. `copyprobe audit` asks the "
            f"reference model as a witness first and tests a text it recognises on the target's own likelihood "
            f"(docs/audit.md, 'When a reference helps and when it hides exposure')."]


def run(args: argparse.Namespace) -> int:
    names = split_names(args.methods)
    print(f"copyprobe demo: {args.model} on {demo_data_path().name} (24 famous vs 24 fresh passages)")
    code = run_detect(args, demo_data_path(), names, explain=explain_reference)
    if code == 0 and not args.no_copying:
        code = run_copying(args)
    return code
