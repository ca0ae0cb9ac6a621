"""Stage timings of one ``detect`` that need no GPU (issue 41): each stage of the logit
methods' path timed on its own, with a model whose forward pass costs next to nothing
(bench_gpu.py's ``micro`` random Llama on CPU: hidden size 32, two layers, SmolLM2's 49,152-token
vocabulary), in milliseconds per 1,000 passages and
per 100k tokens, plus the host calls that stall a GPU counted under cProfile.

    python benchmarks/bench_stages.py --label before      # adds/replaces that label's block
    python benchmarks/bench_stages.py --label after
    python benchmarks/bench_stages.py --label LABEL --methods recall,con_recall   # requests with a context

Stages (each function's own time, nested stages subtracted, so they add up to the call):

* **tokenization**: the tokenizer's calls (texts to ids; ``batch_token_ids`` since 86d2c2f);
* **planning/padding**: the backend's answer call outside every other stage (windows,
  batches, padded input tensors, masks, targets);
* **forward**: the decoder's forward pass (the model; not host work);
* **statistics**: log p, mu, sigma and rank off the LM head (on CPU this is compute; on a
  GPU kernels);
* **to host/rows**: the statistics copied to the host and into each request's rows, the
  answers built;
* **token strings**: ``convert_ids_to_tokens`` (token strings for word-level methods);
* **cache writes**: answers encoded and written to the SQLite cache (the ``+cache`` run),
  on the main thread; what the cache's writer thread spends is its own row (``cache
  writes, background thread``), overlapping the others;
* **answers handed over (methods' scores)**: what runs on each answer as the backend hands
  it over between batches (``on_result``: the cache's queue, the driver, the methods' scores);
* **zlib lengths**: the zlib method's compressed text lengths, made while scoring and
  carved out of the row above (in a4aab4a and f95a5ee, tried and not kept, a thread of
  their own made them: ``zlib lengths, background thread``);
* **derive**: metrics, bootstrap, records (the blind baseline off, as in bench_gpu.py);
* **methods and the rest of collect**: the rest of the collect part (the driver,
  de-duplication, the scores of answers not handed over).

Blocks measured before e062230 took another path than a real run: the
wrappers hid ``answer``'s ``on_result`` from ``hands_over``, so the answers were not
handed over as they finished (the methods ran after the backend, the cache committed chunk
by chunk on the main thread); their rows are not comparable with later blocks.

``host outside the forward`` is the detect call's time less forward and statistics. The
timing wrappers add their own time to the call (two clock readings of each kind and the
bookkeeping, about 2 us a call, some 5,000 calls for WikiMIA): counted and measured here,
the row ``less the timing wrappers`` takes it out, an estimate of the host's time in a run
without them.
``before the first forward`` and ``after the last statistics``: the wall time from the call's
start to the first forward pass, and from the last statistics to the call's end (least of
the repeats). Between the two, a GPU runs one batch while the host hands over the one
before; at either end it has nothing to do.
``tokenizer alone``: the tokenizer's call on all the texts outside detect, least of the
repeats: the floor under the tokenization stage on this machine.
cProfile counts, around one warm detect at batch 32 without the cache: tensors built
from Python lists (``torch.tensor``), host copies (``Tensor.cpu/.tolist/.item/.numpy``)
and token-string look-ups (``id_to_token``, ``convert_ids_to_tokens``).

Writes ``benchmarks/results/gpu_stages.json`` (one block per ``--label``) and the table
``benchmarks/results/gpu_stages.md`` from every block in it.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu as B  # noqa: E402
from timed_cli import add_block, code_version  # noqa: E402

HANDED_OVER = "answers handed over (methods' scores)"
ZLIB = "zlib lengths"
STAGES = ["tokenization", "planning/padding", "forward", "statistics", "to host/rows", "token strings",
          "cache writes", HANDED_OVER, ZLIB, "methods and the rest of collect", "derive"]
LATER_STAGES = {HANDED_OVER, ZLIB}  # rows that blocks measured before they were timed lack


def _set(owner, attr: str, value) -> None:
    try:
        setattr(owner, attr, value)
    except AttributeError:  # a frozen dataclass (the run kind)
        object.__setattr__(owner, attr, value)


BACKGROUND = ", background thread"  # suffix of a stage's time spent off the calling thread
DEVICE_STAGES = ("forward", "statistics")  # the work a GPU does (on a CPU, the host does it too)
BEFORE, AFTER = "before the first forward", "after the last statistics"


class Stages:
    """Exclusive wall and CPU time per stage of wrapped functions. Time on another thread
    than the main one (the cache's writer) is kept under the stage's name plus
    ``BACKGROUND``: it overlaps the main thread's and is not part of the detect call's
    critical path, so it is neither a share of that call nor subtracted from its rest."""

    def __init__(self):
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.local = threading.local()  # each thread's own stack of nested stages
        self.undo: list = []
        # perf_counter at the first start and the last end of the device's stages (forward,
        # statistics): the host's work before and after them is what a GPU cannot hide
        self.device_first: float | None = None
        self.device_last: float | None = None
        self.calls = 0  # wrapped calls on the main thread: each adds the wrapper's own time to the call

    @property
    def stack(self) -> list[list[float]]:
        if not hasattr(self.local, "stack"):
            self.local.stack = []
        return self.local.stack

    def timed(self, real, stage: str):
        """``real`` with its calls' time counted in ``stage``. functools.wraps: callers that
        read the signature (``hands_over``, which picks the path where answers are handed over
        as they finish and the cache commits on its writer thread) must see the real one."""
        stages = self

        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            stack = stages.stack
            if threading.current_thread() is threading.main_thread():
                name = stage
                stages.calls += 1
            else:
                name = stage + BACKGROUND
            stack.append([0.0, 0.0])
            # thread_time: process_time would add the other threads' CPU to this one's stage
            wall, cpu = time.perf_counter(), time.thread_time()
            if stage in DEVICE_STAGES and stages.device_first is None:
                stages.device_first = wall
            try:
                return real(*args, **kwargs)
            finally:
                end = time.perf_counter()
                if stage in DEVICE_STAGES:
                    stages.device_last = end
                wall, cpu = end - wall, time.thread_time() - cpu
                child = stack.pop()
                stages.wall[name] += wall - child[0]
                stages.cpu[name] += cpu - child[1]
                if stack:
                    stack[-1][0] += wall
                    stack[-1][1] += cpu

        return wrapper

    def wrap(self, owner, attr: str, stage: str, callback: str | None = None, callback_stage: str = "") -> None:
        """Count ``owner.attr``'s calls in ``stage``; with ``callback``, the function its
        caller passes as that argument (``on_result``) is counted in ``callback_stage``
        instead: work the caller does inside the call is not the callee's."""
        if attr not in owner.__dict__ and not hasattr(owner, attr):
            return
        raw = owner.__dict__.get(attr, getattr(owner, attr))
        real = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        if callback is not None:
            signature = inspect.signature(real)
            inner = real

            @functools.wraps(inner)
            def real(*args, **kwargs):
                bound = signature.bind(*args, **kwargs)
                if bound.arguments.get(callback) is not None:
                    bound.arguments[callback] = self.timed(bound.arguments[callback], callback_stage)
                return inner(*bound.args, **bound.kwargs)

        wrapper = self.timed(real, stage)
        if isinstance(raw, staticmethod):
            wrapper = staticmethod(wrapper)
        elif isinstance(raw, classmethod):
            wrapper = classmethod(wrapper)
        had = attr in owner.__dict__
        _set(owner, attr, wrapper)
        self.undo.append((owner, attr, raw, had))

    def restore(self) -> None:
        for owner, attr, raw, had in reversed(self.undo):
            if had:
                _set(owner, attr, raw)
            else:
                delattr(owner, attr)
        self.undo.clear()

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.device_first = self.device_last = None
        self.calls = 0


def wrapper_cost(repeats: int = 5, calls: int = 20_000) -> float:
    """Seconds one wrapped call adds to the call itself (least of ``repeats``): the timing
    wrappers' own time is in the detect call's, on the main thread, ``Stages.calls`` times."""
    stages = Stages()

    def nothing() -> None:
        pass

    wrapped = stages.timed(nothing, "to host/rows")

    def seconds(call) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls

    return max(0.0, min(seconds(wrapped) for _ in range(repeats)) - min(seconds(nothing) for _ in range(repeats)))


def hook(stages: Stages, backend) -> None:
    """Wrap the functions of each stage (names of the code before and after issue 41)."""
    import importlib

    detect_module = importlib.import_module("copyprobe.detect")
    from copyprobe.backends import cache
    from copyprobe.backends.base import Response
    from copyprobe.backends.hf import backend as hf_backend
    from copyprobe.backends.hf import scoring

    tok = type(backend.tokenizer)
    stages.wrap(tok, "__call__", "tokenization")
    if hasattr(scoring, "batch_token_ids"):  # since 86d2c2f the backend's batch call goes past __call__
        stages.wrap(scoring, "batch_token_ids", "tokenization")
    stages.wrap(tok, "convert_ids_to_tokens", "token strings")
    hf = hf_backend.HFBackend
    # the answers handed over as each finishes (on_result: the cache's queue and the methods'
    # scores) run inside answer, between batches: counted apart from the backend's own work
    stages.wrap(hf, "answer", "planning/padding", callback="on_result", callback_stage=HANDED_OVER)
    stages.wrap(hf, "_hidden", "forward")
    # passes after a context's KV cache (ReCaLL's prefix) call the decoder without _hidden
    stages.wrap(type(backend._decoder), "forward", "forward")
    stages.wrap(scoring, "score_stats", "statistics")
    for name in ("QueuedScores", "StackedScores"):
        cls = getattr(scoring, name, None)
        if cls is not None:
            for attr in ("lists", "arrays", "wait"):
                if attr in cls.__dict__:
                    stages.wrap(cls, attr, "to host/rows")
    for name in ("ScoreBuffer", "ArrayBuffer"):
        cls = getattr(scoring, name, None)
        for attr in ("put", "put_at", "lists"):
            if cls is not None and attr in cls.__dict__:
                stages.wrap(cls, attr, "to host/rows")
    stages.wrap(scoring.TokenLogprobsMixin, "_token_answer", "to host/rows")
    stages.wrap(cache.ResponseCache, "put_encoded", "cache writes")
    stages.wrap(cache.ResponseCache, "encode", "cache writes")
    if hasattr(cache, "entry_text"):  # the writer's stored text since 2afe4f6 (no encode call)
        stages.wrap(cache, "entry_text", "cache writes")
    stages.wrap(Response, "to_json", "cache writes")
    stages.wrap(detect_module.KIND, "derive", "derive")
    from copyprobe.methods import likelihood

    stages.wrap(likelihood, "zlib_length", ZLIB)  # the zlib method's compressed lengths


def stand_in_statistics() -> None:
    """``score_stats`` returns random values of the right shapes and types at once (a GPU
    computes them while the host does the rest): what is left is the host's work."""
    import torch

    from copyprobe.backends.hf import scoring

    generator = torch.Generator().manual_seed(0)

    def stand_in(hidden, targets, head, softcap=None):
        n = hidden.shape[0]
        logprobs = -5 * torch.rand(n, dtype=torch.float64, generator=generator)
        return {"logprobs": logprobs, "mu": logprobs - 1, "sigma": logprobs.abs() + 0.1,
                "rank": torch.randint(1, 100, (n,), generator=generator)}

    scoring.score_stats = stand_in


def timed_detect(backend, examples, cache, stages: Stages, methods) -> dict:
    stages.reset()
    start = time.perf_counter()
    timer, collect = B.detect_pass(backend, examples, cache, methods)
    end = time.perf_counter()
    out = {"detect_s": timer.wall, "detect_cpu_s": timer.cpu, "collect_s": collect, "wrapped_calls": stages.calls}
    if stages.device_first is not None:  # the host's work a GPU would wait on (the call's ends)
        out["edges_s"] = {BEFORE: stages.device_first - start, AFTER: end - stages.device_last}

    def on_main(times: dict[str, float]) -> float:
        return sum(v for k, v in times.items() if not k.endswith(BACKGROUND))

    out["stages_wall_s"] = dict(stages.wall)
    # the rest = the detect call less every named stage of the main thread (derive is one of them)
    out["stages_wall_s"]["methods and the rest of collect"] = max(0.0, timer.wall - on_main(stages.wall))
    out["stages_cpu_s"] = dict(stages.cpu)
    # the call's CPU time is the whole process's (every thread's): less all the stages
    out["stages_cpu_s"]["methods and the rest of collect"] = max(0.0, timer.cpu - sum(stages.cpu.values()))
    return out


def host_counts(backend, examples, methods) -> dict:
    """bench_gpu's host calls of one warm detect (no cache), and per passage."""
    counts = B.host_calls(backend, examples, methods)
    n = len(examples)
    counts["tensors + host copies per passage"] = round(
        sum(counts[k] for k in ("torch.tensor", *B.HOST_COPIES)) / n, 3)
    counts["token-string look-ups per passage"] = round(counts["id_to_token"] / n, 3)
    return counts


def tokenizer_floor(backend, examples, repeats: int) -> dict:
    """Seconds (least of ``repeats``) the tokenizer alone takes for the texts, outside
    detect: what tokenization costs here however little else the host does. ``call`` is the
    transformers call (what detect made before 86d2c2f); ``rust`` the tokenizers library's
    own batch call without offsets (``encode_batch_fast``), where it has one: what detect
    makes since (``batch_token_ids``) for a tokenizer whose call comes to it."""
    texts = [e.text for e in examples]
    calls = {"call": lambda: backend.tokenizer(texts).input_ids}
    rust = getattr(getattr(backend.tokenizer, "_tokenizer", None), "encode_batch_fast", None)
    if rust is not None:
        calls["rust"] = lambda: rust(texts)
    def seconds(call) -> float:
        with B.Timer() as timer:
            call()
        return timer.wall

    return {name: min(seconds(call) for _ in range(max(1, repeats))) for name, call in calls.items()}


def best(runs: list[dict]) -> dict:
    """Per stage the least time over the repeats (each stage its own minimum)."""
    out = {"detect_s": min(r["detect_s"] for r in runs), "collect_s": min(r["collect_s"] for r in runs),
           "detect_cpu_s": min(r["detect_cpu_s"] for r in runs), "stages_wall_s": {}, "stages_cpu_s": {}}
    for key in ("stages_wall_s", "stages_cpu_s"):
        names = {n for r in runs for n in r[key]}
        out[key] = {n: min(r[key].get(n, 0.0) for r in runs) for n in names}
    def host(r: dict) -> float:  # the call's wall time outside forward and statistics
        return r["detect_s"] - r["stages_wall_s"].get("forward", 0.0) - r["stages_wall_s"].get("statistics", 0.0)

    out["host_outside_forward_s"] = min(host(r) for r in runs)
    if all("wrappers_s" in r for r in runs):  # blocks before the wrappers were counted lack it
        out["wrappers_s"] = min(r["wrappers_s"] for r in runs)
        out["wrapped_calls"] = min(r["wrapped_calls"] for r in runs)
        out["host_less_wrappers_s"] = min(host(r) - r["wrappers_s"] for r in runs)
    edges = [r["edges_s"] for r in runs if "edges_s" in r]
    if edges:
        out["edges_s"] = {name: min(e[name] for e in edges) for name in (BEFORE, AFTER)}
    out["host_outside_forward_cpu_s"] = min(
        r["detect_cpu_s"] - r["stages_cpu_s"].get("forward", 0.0) - r["stages_cpu_s"].get("statistics", 0.0)
        for r in runs)
    return out


def _methods(block: dict) -> str:
    """The block's methods when they are not bench_gpu's 5 logit methods (blocks before
    the option ran those)."""
    methods = block.get("methods", B.LOGIT_METHODS)
    return "" if list(methods) == list(B.LOGIT_METHODS) else f"methods {', '.join(methods)}, "


def render(report: dict) -> str:
    lines = ["# Stage timings of detect on CPU (issue 41)", "",
             "`python benchmarks/bench_stages.py --label LABEL` (see its docstring for what each stage holds).",
             "Milliseconds per 1,000 passages / per 100k tokens, each stage's least wall time over the repeats",
             "(exclusive: nested stages subtracted); the 5 logit methods unless a block names others, no cache unless",
             "named, blind baseline off.",
             "",
             "Blocks measured before e062230 (those without an `answers handed over` row) ran another path than a",
             "real run: the timing wrappers hid `answer`'s `on_result`, so answers were not handed over as they",
             "finished (methods after the backend; the cache committed chunk by chunk on the main thread).",
             ""]
    for label, block in report.items():
        m = block["machine"]
        lines += [f"## {label}", "",
                  f"{block['model']}, {_methods(block)}{block['passages']} passages ({block['tokens']} tokens), batch "
                  f"{block['batch_size']}, {m['torch_threads']} torch thread(s), torch {m['torch']}, "
                  f"{m['cpu_count']} CPUs, load {m.get('loadavg')}; commit {block.get('commit', '?')}; "
                  f"{block['repeats']} repeats; {block['date']}", ""]
        k_pass, k_tok = 1000 / block["passages"], 100_000 / block["tokens"]
        lines += ["| stage | ms / 1,000 passages | ms / 100k tokens | +cache: ms / 1,000 passages |",
                  "|---|---:|---:|---:|"]
        plain, cached = block["detect"], block["detect+cache"]
        for stage in STAGES:
            if stage in LATER_STAGES and not any(stage in run["stages_wall_s"] for run in (plain, cached)):
                continue  # a block measured before the stage was timed (see the note above)
            a = plain["stages_wall_s"].get(stage, 0.0)
            c = cached["stages_wall_s"].get(stage, 0.0)
            lines.append(f"| {stage} | {a * 1000 * k_pass:.1f} | {a * 1000 * k_tok:.1f} | {c * 1000 * k_pass:.1f} |")
        background = sorted({k for run in (plain, cached) for k in run["stages_wall_s"] if k.endswith(BACKGROUND)})
        for stage in background:  # overlaps the rows above; not part of the detect call's time
            a = plain["stages_wall_s"].get(stage, 0.0)
            c = cached["stages_wall_s"].get(stage, 0.0)
            lines.append(f"| ({stage}: overlaps the rest) | {a * 1000 * k_pass:.1f} | {a * 1000 * k_tok:.1f} | "
                         f"{c * 1000 * k_pass:.1f} |")
        for name, key in (("detect call", "detect_s"), ("collect part", "collect_s"),
                          ("host outside forward and statistics", "host_outside_forward_s")):
            lines.append(f"| **{name}** | {plain[key] * 1000 * k_pass:.1f} | {plain[key] * 1000 * k_tok:.1f} | "
                         f"{cached[key] * 1000 * k_pass:.1f} |")
        if "host_less_wrappers_s" in plain:
            cost = block["wrapper_s_per_call"] * 1e6
            lines.append(f"| timing wrappers' own time (estimated: {plain['wrapped_calls']} wrapped calls on the "
                         f"main thread x {cost:.2f} us, measured here) | {plain['wrappers_s'] * 1000 * k_pass:.1f} | "
                         f"{plain['wrappers_s'] * 1000 * k_tok:.1f} | {cached['wrappers_s'] * 1000 * k_pass:.1f} |")
            key = "host_less_wrappers_s"
            lines.append(f"| **host outside forward and statistics, less the timing wrappers** | "
                         f"{plain[key] * 1000 * k_pass:.1f} | {plain[key] * 1000 * k_tok:.1f} | "
                         f"{cached[key] * 1000 * k_pass:.1f} |")
        if "edges_s" in plain:  # blocks before the rows existed lack them
            for name in (BEFORE, AFTER):
                a, c = plain["edges_s"][name], cached.get("edges_s", {}).get(name, 0.0)
                lines.append(f"| {name} (host only: a GPU waits) | {a * 1000 * k_pass:.1f} | "
                             f"{a * 1000 * k_tok:.1f} | {c * 1000 * k_pass:.1f} |")
        floor = block.get("tokenizer_floor_s")
        if floor:
            rust = (f"; tokenizers' encode_batch_fast, no wrapper or offsets: {floor['rust'] * 1000 * k_pass:.1f}"
                    if "rust" in floor else "")
            lines.append(f"| tokenizer alone, outside detect (least of {block['repeats']}{rust}) | "
                         f"{floor['call'] * 1000 * k_pass:.1f} | {floor['call'] * 1000 * k_tok:.1f} | |")
        bare = block.get("bare_s")
        if bare is not None:
            lines.append(f"| bare forward (bench_gpu.py's) | {bare * 1000 * k_pass:.1f} | "
                         f"{bare * 1000 * k_tok:.1f} | |")
        counts = block["counts"]
        lines += ["", "cProfile around one warm detect (batch "
                  f"{block['batch_size']}, no cache, {block['passages']} passages): "
                  + ", ".join(f"{k} {v}" for k, v in counts.items()), ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="name of this block (before, after, ...)")
    parser.add_argument("--params", default="micro", choices=sorted(B.PRESETS))
    parser.add_argument("--passages", default="256")
    parser.add_argument("--methods", default=",".join(B.LOGIT_METHODS),
                        help="comma-separated methods detect runs (default: the 5 logit methods; "
                        "recall,con_recall for the path of requests with a context)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "gpu_stages.json"))
    parser.add_argument("--no-statistics", action="store_true",
                        help="replace the LM head's statistics with a stand-in of the same shapes (random "
                        "values, no vocabulary pass): the host's stages without the CPU's 97%% of the time "
                        "that a GPU does (its noise hid differences of 100 ms here); scores are then random")
    args = parser.parse_args()
    methods = [name.strip() for name in args.methods.split(",") if name.strip()]
    if args.no_statistics:
        stand_in_statistics()

    import torch

    import copyprobe

    torch.set_num_threads(args.threads)
    out = Path(args.json)
    with tempfile.TemporaryDirectory() as tmp:
        directory = B.random_model_dir(args.params, torch.float32, Path(tmp))
        backend = B.make_backend(f"hf:{directory}", "cpu", "float32", args.batch_size)
        examples = B.load_texts(args.passages)
        token_ids = [list(ids) for ids in backend.tokenizer([e.text for e in examples]).input_ids]
        B.detect_pass(backend, examples[:64], False, methods)  # warm-up
        B.bare_pass(backend, token_ids[:64], args.batch_size)
        counts = host_counts(backend, examples, methods)
        floor = tokenizer_floor(backend, examples, args.repeats)
        cost = wrapper_cost()
        stages = Stages()
        hook(stages, backend)
        runs: dict[str, list[dict]] = {"detect": [], "detect+cache": []}
        bare = []
        try:
            for _ in range(args.repeats):
                if not args.no_statistics:  # the bare pass builds whole logits: nothing to compare with then
                    bare.append(B.bare_pass(backend, token_ids, args.batch_size).wall)
                runs["detect"].append(timed_detect(backend, examples, False, stages, methods))
                cache = str(Path(tmp) / f"cache-{time.time_ns()}.sqlite")
                runs["detect+cache"].append(timed_detect(backend, examples, cache, stages, methods))
                for run in (runs["detect"][-1], runs["detect+cache"][-1]):
                    run["wrappers_s"] = run["wrapped_calls"] * cost
                print(f"  bare {bare[-1] if bare else float('nan'):.3f} s, detect {runs['detect'][-1]['detect_s']:.3f} s, "
                      f"+cache {runs['detect+cache'][-1]['detect_s']:.3f} s", file=sys.stderr, flush=True)
        finally:
            stages.restore()
    commit = code_version(Path(copyprobe.__file__).resolve().parents[1])  # the copyprobe this run imported
    block = {"model": f"random-weight Llama {args.params} (SmolLM2's tokenizer), float32, CPU"
             + (", statistics replaced by a stand-in" if args.no_statistics else ""),
             "methods": methods,
             "passages": len(examples), "tokens": sum(map(len, token_ids)), "batch_size": args.batch_size,
             "repeats": args.repeats, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
             "machine": B.machine("cpu"), "bare_s": min(bare) if bare else None, "counts": counts,
             "tokenizer_floor_s": floor, "wrapper_s_per_call": cost,
             "detect": best(runs["detect"]), "detect+cache": best(runs["detect+cache"]),
             "runs": runs, "command": ["python", "benchmarks/bench_stages.py", *sys.argv[1:]]}
    report = add_block(out, args.label, block)
    out.with_suffix(".md").write_text(render(report))
    print(render({args.label: block}))
    print(f"written to {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
