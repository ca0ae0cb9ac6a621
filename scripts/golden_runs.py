"""Golden runs: every run kind on small fixtures with the model-free fake backend, and a
comparison of two such outputs. Written for issue 26 (one engine): the refactor must
leave every output file as it was.

    python scripts/golden_runs.py run /tmp/golden_before      # on the code before a change
    python scripts/golden_runs.py run /tmp/golden_after       # after it
    python scripts/golden_runs.py compare /tmp/golden_before /tmp/golden_after

``run`` drives the real CLI (``copyprobe.cli.main.main``) with ``load_backend`` replaced
by a deterministic FakeBackend, so argument parsing, settings records and file writing are
all exercised: demo, detect (with a learning and a hold-out method), audit, copying (all
tasks, the baseline), canary make + test, plant (a tiny random Llama, CPU), and rescore of
a copy of every run. ``compare`` diffs every JSON/JSONL file of the two trees, ignoring
what differs between any two runs (timestamps, durations, versions, the output root).
Exit code 0 when identical, 1 with the differences listed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from pathlib import Path

# volatile keys: they change between any two runs of the same code (clock times and
# durations, versions, and hashes over a kit's creation time or the output path)
IGNORED_KEYS = {"created", "started", "finished", "seconds", "timings", "versions", "copyprobe_version",
                "manifest_checksum", "settings_key"}
ROOT_TOKEN = "<ROOT>"
REAL_MODEL = "smollm2-135m-instruct"  # the bundled model, for the one case run on a real model

SYLLABLES = "ka lo mi nu pe ra si to vu we ba de fi go hu ja ke li mo na".split()


def _pseudo(rng: random.Random, words: int = 30) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(words))


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _copying_gen(refs: dict[str, str]):
    def gen(req):
        p = req.prompt or req.messages[-1][1]
        if p.startswith("### Instruction:\nPlease solely verify"):
            return "attributable" if "ark" in p.split("Reference:")[1] else "not attributable"
        if p.startswith("You are a fair judge"):
            return "Feedback: fine. [RESULT] 3"
        if "Question:" in p:
            return " [Output_Start] gopher wood [Output_End]"
        for prefix, ref in refs.items():
            if prefix in p and prefix.startswith("In the beginning God"):
                return ref
        if "Continue the text" in p:
            return "Noah and Shem built an ark; Ham watched. The rain came and the ark floated."
        return "Something else entirely, with no relation to the source text at all."
    return gen


def run_all(root: Path, only: set[str] | None = None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import copyprobe.backends.specs as specs
    from copyprobe.backends.fake import FakeBackend
    from copyprobe.cli.commands.demo import demo_data_path
    from copyprobe.cli.main import main

    root.mkdir(parents=True, exist_ok=True)
    inputs = root / "inputs"
    inputs.mkdir(exist_ok=True)
    backend = {"now": None}
    real_load = specs.load_backend

    def load(spec, **options):
        if spec.startswith("hf:") or spec == REAL_MODEL:
            return real_load(spec, **options)
        return backend["now"]

    specs.load_backend = load

    def step(name: str, fake, argv: list[str]) -> None:
        if only and name.split("-")[0] not in only:
            return
        backend["now"] = fake
        code = main(argv)
        print(f"{name}: exit {code}", file=sys.stderr)
        if code != 0:
            raise SystemExit(f"golden run {name} failed with exit {code}")

    demo_rows = [json.loads(line) for line in demo_data_path().read_text().splitlines() if line.strip()]
    members = [r["text"] for r in demo_rows if r.get("label") == 1]
    demo_fake = lambda: FakeBackend(spec="fake-demo", member_texts=members)  # noqa: E731
    common = ["--no-cache", "--no-progress"]

    step("demo", demo_fake(), ["demo", "--model", "fake-demo", "--out", str(root / "demo"), *common])
    step("detect", demo_fake(), ["detect", "--model", "fake-demo", "--data", str(demo_data_path()),
                                 "--methods", "loss,zlib,lowercase,min_k,min_k_pp,slope,recall,feature_agg",
                                 "--param", "min_k.k=0.3", "--param", "feature_agg.n_train=20", "--bootstrap", "50", "--out", str(root / "detect"),
                                 *common])
    step("detect-limit", demo_fake(), ["detect", "--model", "fake-demo", "--data", str(demo_data_path()),
                                       "--methods", "loss,zlib", "--limit", "10",
                                       "--out", str(root / "detect-limit"), *common])

    rng = random.Random(4)
    suspect = [{"id": f"{d}-{p}", "text": _pseudo(rng), "doc_id": d}
               for d in ("famous0", "famous1", "fresh") for p in range(2)]
    clean = [{"id": f"c{k}-{p}", "text": _pseudo(rng), "doc_id": f"clean{k}"} for k in range(40) for p in range(2)]
    _write_jsonl(inputs / "suspect.jsonl", suspect)
    _write_jsonl(inputs / "clean.jsonl", clean)
    known = [r["text"] for r in suspect if r["doc_id"] != "fresh"]
    audit_fake = lambda: FakeBackend(spec="fake-audit", member_texts=known)  # noqa: E731
    step("audit", audit_fake(), ["audit", "--model", "fake-audit", "--suspect", str(inputs / "suspect.jsonl"),
                                 "--clean", str(inputs / "clean.jsonl"), "--out", str(root / "audit"), *common])
    step("audit-loss", audit_fake(), ["audit", "--model", "fake-audit", "--suspect", str(inputs / "suspect.jsonl"),
                                      "--clean", str(inputs / "clean.jsonl"), "--method", "loss", "--test", "rank",
                                      "--alpha", "0.05", "--out", str(root / "audit-loss"), *common])

    from copyprobe.copying import load_copyset

    refs = {i.input: i.reference for i in load_copyset("kjv").literal}
    copy_fake = lambda: FakeBackend(spec="fake-copy", generate_fn=_copying_gen(refs))  # noqa: E731
    step("copying", copy_fake(), ["copying", "--model", "fake-copy", "--data", "kjv", "--judge", "target",
                                  "--literal-tokens", "60", "--story-tokens", "60", "--bootstrap", "100",
                                  "--out", str(root / "copying"), *common])
    step("copying-lit", copy_fake(), ["copying", "--model", "fake-copy", "--data", "kjv", "--tasks", "literal,qa",
                                      "--templates", "0,1", "--no-baseline", "--out", str(root / "copying-lit"),
                                      *common])

    doc = inputs / "book.txt"
    doc.write_text("It was a bright cold day in April. The clocks were striking thirteen! Winston hurried home.\n\n"
                   "A new paragraph begins here. It has two sentences. And a third one, at the end.\n")
    kit = root / "kit"
    if not only or "canary" in only:
        shutil.rmtree(kit, ignore_errors=True)
        code = main(["canary", "make", "--doc", str(doc), "--out", str(kit), "--n-candidates", "30",
                     "--n-canaries", "2", "--style", "words", "--seed", "golden"])
        if code != 0:
            raise SystemExit("canary make failed")
        manifest = json.loads((kit / "private" / "manifest.json").read_text()) \
            if (kit / "private" / "manifest.json").exists() else None
        from copyprobe.canary.kit import load_kit

        loaded = load_kit(kit)
        published = [c.candidates[c.published] for c in loaded.canaries]
        del manifest
        step("canary", FakeBackend(spec="fake-canary", member_texts=published, boost=6.0),
             ["canary", "test", "--model", "fake-canary", "--kit", str(kit), "--out", str(root / "canary"), *common])
        step("canary-min_k", FakeBackend(spec="fake-canary", member_texts=published[:1], boost=1.0),
             ["canary", "test", "--model", "fake-canary", "--kit", str(kit), "--method", "min_k",
              "--param", "min_k.k=0.5", "--alpha", "0.01", "--out", str(root / "canary-min_k"), *common])

    if not only or "plant" in only:
        _plant(root, inputs, main)
    if only and "model" in only:  # opt-in: a real model (CPU, one thread, about a minute)
        step("model", None, ["detect", "--model", REAL_MODEL, "--data", str(demo_data_path()),
                             "--methods", "loss,zlib,min_k,min_k_pp", "--bootstrap", "100", "--batch-size", "4",
                             "--out", str(root / "model"), *common])

    # rescore a copy of every scoring run: derive from the saved files alone
    for name in ("demo", "detect", "detect-limit", "audit", "audit-loss", "copying", "copying-lit", "canary",
                 "canary-min_k", "model"):
        src = root / name
        if not (src / "run.json").exists():
            continue
        dst = root / f"rescored-{name}"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        code = main(["rescore", str(dst)])
        print(f"rescore {name}: exit {code}", file=sys.stderr)
        if code != 0:
            (dst / "RESCORE_FAILED").write_text(f"exit {code}\n")


def _plant(root: Path, inputs: Path, main) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.set_num_threads(1)
    words = [f"w{i}" for i in range(60)]
    model_dir = inputs / "tiny-model"
    if not model_dir.exists():
        vocab = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}
        for w in words:
            vocab.setdefault(w, len(vocab))
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                       eos_token="[EOS]")
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                          tie_word_embeddings=True, pad_token_id=1, eos_token_id=2, bos_token_id=2)
        LlamaForCausalLM(cfg).save_pretrained(model_dir)
        fast.save_pretrained(model_dir)
    rng = random.Random(1)
    (inputs / "corpus.txt").write_text(" ".join(rng.choice(words) for _ in range(16 * 12)))
    out = root / "plant"
    shutil.rmtree(out, ignore_errors=True)
    code = main(["plant", "--model", f"hf:{model_dir}", "--corpus", str(inputs / "corpus.txt"),
                 "--passage-tokens", "16", "--epochs", "2", "--lr", "1e-2", "--batch-size", "2",
                 "--no-progress", "--out", str(out)])
    print(f"plant: exit {code}", file=sys.stderr)
    if code != 0:
        raise SystemExit("plant failed")
    shutil.rmtree(out / "model", ignore_errors=True)  # weights: large, and their losses are recorded


# ------------------------------------------------------------------------- compare
def _normalise(value, root: str):
    if isinstance(value, dict):
        return {k: _normalise(v, root) for k, v in value.items() if k not in IGNORED_KEYS}
    if isinstance(value, list):
        return [_normalise(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, ROOT_TOKEN)
    return value


def _load(path: Path, root: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        data = json.loads(text)
    return _normalise(data, str(root))


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and p.suffix in (".json", ".jsonl") and "inputs" not in p.relative_to(root).parts
            and "kit" not in p.relative_to(root).parts[:1]}


def _diff(a, b, where: str, out: list[str]) -> None:
    if len(out) > 50:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'after' if key not in a else 'before'}")
            else:
                _diff(a[key], b[key], f"{where}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: {a!r} -> {b!r}")


def compare(before: Path, after: Path) -> int:
    names_a, names_b = _files(before), _files(after)
    problems: list[str] = []
    for name in sorted(names_a ^ names_b):
        problems.append(f"{name}: only {'before' if name in names_a else 'after'}")
    for name in sorted(names_a & names_b):
        diffs: list[str] = []
        _diff(_load(before / name, before), _load(after / name, after), name, diffs)
        problems.extend(diffs)
    for line in problems:
        print(line)
    n = len(names_a & names_b)
    print(f"{n} files compared, {len(problems)} differences")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="write the golden runs into DIR")
    run.add_argument("dir")
    run.add_argument("--only", help="comma-separated: demo, detect, audit, copying, canary, plant, and model "
                                    "(smollm2 on the demo data, only when named)")
    cmp_ = sub.add_parser("compare", help="diff two golden trees")
    cmp_.add_argument("before")
    cmp_.add_argument("after")
    args = parser.parse_args()
    if args.action == "run":
        run_all(Path(args.dir).resolve(), set(args.only.split(",")) if args.only else None)
        return 0
    return compare(Path(args.before).resolve(), Path(args.after).resolve())


if __name__ == "__main__":
    sys.exit(main())
