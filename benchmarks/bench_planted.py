#!/usr/bin/env python
"""Planted-membership benchmark: every method against known members.

1. Build an offline corpus (King James Bible + fortunes-min literature, see
   scripts/build_plant_corpus.py), ``--passages`` passages of ~``--passage-tokens`` tokens.
2. Plant ``--model`` once for ``max(--epochs)`` epochs with ``--save-epochs``: with the
   constant learning rate and the seeded per-epoch order, the snapshot after epoch k is
   exactly the model a k-epoch plant would give (tests/plant check this), so the 1- and
   3-epoch plants cost one 3-epoch training run.
3. For each plant, run ``copyprobe detect`` once per method (one Session, so the model
   loads once; the response cache is shared, so a method whose requests another method
   already made costs nothing: ``seconds`` is the marginal time in this order,
   ``model_calls`` the requests the method needs, ``new_model_calls`` the cache misses).
4. Write ``--results``/planted.json and planted.md.

Rerunning reuses the plant (same settings) and every cached model response.

    python benchmarks/bench_planted.py                       # the issue's scale (slow on CPU)
    python benchmarks/bench_planted.py --passages 40 --passage-tokens 64 --methods loss,zlib
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.files import atomic_write, write_json, write_jsonl  # noqa: E402  (after the path)

GREY_DEFAULT = "loss,zlib,lowercase,min_k,min_k_pp,slope,reference,feature_agg"


def build_corpus(path: Path, passages: int, passage_tokens: int, seed: int) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_plant_corpus

    code = build_plant_corpus.main(["--out", str(path), "--passage-tokens", str(passage_tokens),
                                    "--max-passages", str(passages), "--seed", str(seed)])
    if code:
        raise SystemExit(f"corpus build failed (exit {code})")


def method_list(text: str) -> list[str]:
    from copyprobe.registry import method_names

    if text == "all":
        return list(method_names())
    return [m.strip() for m in text.split(",") if m.strip()]


def run_methods(spec: str, data: Path, methods: list[str], params: dict[str, dict[str, Any]], out: Path,
                cache: Path, batch_size: int, device: str, bootstrap: int, seed: int,
                on_result=lambda results: None) -> dict[str, Any]:
    from copyprobe.detect import detect
    from copyprobe.session import Session
    from copyprobe.errors import CopyprobeError

    t = time.perf_counter()
    session = Session(spec, cache=cache, batch_size=batch_size, device=device)
    load_s = time.perf_counter() - t
    results: dict[str, Any] = {}
    for name in methods:
        before = session.cache_counts()["misses"]
        t = time.perf_counter()
        try:
            res = detect(session, str(data), [name], params={name: params[name]} if name in params else None,
                         out=out / name, seed=seed, n_bootstrap=bootstrap, progress=None,
                         command=["bench_planted.py", spec, name])
        except CopyprobeError as exc:
            results[name] = {"error": str(exc)}
            print(f"  {name}: skipped: {exc}", file=sys.stderr)
            continue
        except Exception as exc:  # noqa: BLE001 - one broken method must not end the benchmark
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
            continue
        seconds = time.perf_counter() - t
        metrics = res.metrics or {}
        entry: dict[str, Any] = dict(metrics.get("passage", {}).get(name) or {})
        entry["seconds"] = round(seconds, 2)
        entry["model_calls"] = res.run["requests"]["total"]
        entry["new_model_calls"] = session.cache_counts()["misses"] - before
        notes = [n for n in metrics.get("notes", []) if n.startswith(name)]
        if notes:
            entry["notes"] = notes
        blind = metrics.get("blind_baseline") or {}
        if blind.get("auc") is not None:
            entry["blind_baseline_auc"] = blind["auc"]
            entry["blind_baseline_ci"] = [blind.get("auc_low"), blind.get("auc_high")]
            entry["blind_baseline_signal"] = blind.get("signal")
        doc = (metrics.get("document") or {}).get(name)
        if doc:
            entry["document"] = doc
        failures = len(res.run.get("failures") or [])
        if failures:
            entry["failed_rows"] = failures
        results[name] = entry
        on_result(results)
        auc = entry.get("auc")
        print(f"  {name}: AUC {auc if auc is None else round(auc, 3)} ({seconds:.1f} s, "
              f"{entry['model_calls']} requests, {entry['new_model_calls']} new)", file=sys.stderr)
    return {"methods": results, "load_s": round(load_s, 2)}


def write_subset(data: Path, out: Path, size: int, seed: int) -> Path:
    """A seeded subset with size // 2 members and size - size // 2 non-members."""
    import random

    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    members = [r for r in rows if r["label"] == 1]
    others = [r for r in rows if r["label"] == 0]
    if size // 2 > len(members) or size - size // 2 > len(others):
        raise SystemExit(f"--subset {size} needs {size // 2} members and {size - size // 2} non-members")
    chosen = rng.sample(members, size // 2) + rng.sample(others, size - size // 2)
    chosen.sort(key=lambda r: r["id"])
    write_jsonl(out, chosen)
    return out


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def blind_cell(plant: dict[str, Any]) -> str:
    entry = next((m for m in plant["methods"].values() if m.get("blind_baseline_auc") is not None), None)
    if entry is None:
        return ""
    low, high = entry.get("blind_baseline_ci") or (None, None)
    ci = f" [{fmt(low)}, {fmt(high)}]" if low is not None else ""
    verdict = ": no signal" if entry.get("blind_baseline_signal") is False else ""
    return f"; blind baseline (model-free text classifier, folds by book){verdict}, AUC {fmt(entry['blind_baseline_auc'])}{ci}"


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    lines = ["# Planted-membership benchmark", "",
             *([] if report.get("complete") else ["**Partial results: the run had not finished when this was written.**", ""]),
             f"Generated by `benchmarks/bench_planted.py` on {report['created']} "
             f"({report['machine']}). Command: `{' '.join(report['command'])}`"
             + "".join(f"; earlier, merged: `{' '.join(c)}`" for c in report.get("earlier_commands") or []) + ".", "",
             "Members are known by construction: the base model was fine-tuned on a random half of the "
             "passages (`copyprobe plant`). AUC: passage-level ROC AUC with a 95% bootstrap CI "
             f"({report['bootstrap']} resamples); TPR at 1% / 5% FPR; document AUC over pseudo-documents "
             "(each book's member passages vs its non-member passages); seconds: marginal scoring time "
             "with the shared response cache (methods run in the order listed); model calls: requests "
             "the method needs (new: cache misses). `reference` uses the un-tuned base model as its "
             "reference.", ""]
    pl = report.get("plant") or {}
    le = pl.get("losses_eval") or {}
    curve = (pl.get("loss_curve") or {}).get("epoch_mean") or {}
    lines += ["## The plant", "",
              f"- corpus: {report['corpus']['n_passages']} passages of ~{report['corpus']['passage_tokens']} tokens "
              f"({report['corpus']['description']})",
              f"- training: {pl.get('steps')} optimizer steps over {pl.get('n_train_tokens')} member tokens per "
              f"epoch, {fmt(pl.get('train_s'), 0)} s ({', '.join(fmt(x, 0) for x in pl.get('epoch_s') or [])} s per "
              f"epoch), loss evaluation {fmt(pl.get('eval_s'), 0)} s, whole plant {fmt(pl.get('total_s'), 0)} s"
              + (" (reused from an earlier run)" if pl.get("reused") else ""),
              f"- mean training loss per epoch: {', '.join(f'{k}: {v:.3f}' for k, v in curve.items())}",
              f"- loss in nats/token: members {fmt(le.get('members_before'))} before, "
              f"{fmt(le.get('members_after'))} after the last epoch; non-members {fmt(le.get('nonmembers_after'))} after",
              ""]
    for plant in report["plants"]:
        lines += [f"## {plant['epochs']} epoch(s): {plant['base_model']}, {plant['n_members']} members / "
                  f"{plant['n_nonmembers']} non-members", "",
                  f"Model `{plant['model']}`; passages of ~{report['corpus']['passage_tokens']} tokens "
                  f"({report['corpus']['description']}); training: {plant['training']}"
                  + blind_cell(plant) + ".", "",
                  "| method | passages | passage AUC [95% CI] | TPR@1%FPR | TPR@5%FPR | document AUC [95% CI] | seconds | model calls (new) |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, m in plant["methods"].items():
            if "error" in m:
                lines.append(f"| {name} | | not run: {m['error']} | | | | | |")
                continue
            doc = m.get("document") or {}
            doc_cell = (f"{fmt(doc.get('auc'))} [{fmt(doc.get('auc_low'))}, {fmt(doc.get('auc_high'))}]"
                        if doc else "-")
            total = plant["n_members"] + plant["n_nonmembers"]
            lines.append(
                f"| {name} | {m.get('passages', total)} | {fmt(m.get('auc'))} [{fmt(m.get('auc_low'))}, {fmt(m.get('auc_high'))}] | "
                f"{fmt(m.get('tpr_at_1pct_fpr'))} | {fmt(m.get('tpr_at_5pct_fpr'))} | {doc_cell} | "
                f"{fmt(m.get('seconds'), 1)} | {m.get('model_calls')} ({m.get('new_model_calls')}) |")
        lines.append("")
    if report.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    atomic_write(path, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planted-membership benchmark")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="base model to plant")
    parser.add_argument("--passages", type=int, default=300, help="corpus size (default 300)")
    parser.add_argument("--passage-tokens", type=int, default=128, help="passage length (default 128)")
    parser.add_argument("--corpus", help="use this corpus file instead of building one")
    parser.add_argument("--epochs", default="1,3", help="plants to evaluate, by epochs (default 1,3)")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=GREY_DEFAULT,
                        help=f"comma-separated, or 'all' (default: the grey-box set {GREY_DEFAULT})")
    parser.add_argument("--dc-pdd-freq", help="frequency table for dc_pdd (copyprobe freq build); adds dc_pdd to the table")
    parser.add_argument("--reference", default=None, help="reference model for `reference` (default: the base model)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--work-dir", default=str(ROOT / "benchmarks" / ".work"), help="plants, runs, cache")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "results"), help="where planted.md/json go")
    parser.add_argument("--note", action="append", default=[], help="extra note for the results")
    parser.add_argument("--markdown-only", action="store_true", help="re-render planted.md from planted.json")
    parser.add_argument("--subset", type=int, default=0,
                        help="score a seeded, label-balanced subset of this many passages (for costly methods)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the methods already in planted.json and add (or replace) these")
    parser.add_argument("--score-epochs", default=None,
                        help="score only these plants (comma list, a subset of --epochs; default: all)")
    parser.add_argument("--param", action="append", default=[], metavar="METHOD.KEY=VALUE",
                        help="method parameter, as for copyprobe detect (repeatable)")
    args = parser.parse_args(argv)
    if args.markdown_only:
        results = Path(args.results)
        write_markdown(results / "planted.md", json.loads((results / "planted.json").read_text()))
        return 0

    import platform

    from copyprobe.plant.finetune import PlantSettings, plant

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    epochs = sorted({int(e) for e in args.epochs.split(",")})
    if args.corpus:
        corpus = Path(args.corpus)
        description = str(corpus)
    else:
        corpus = work / f"corpus-{args.passages}x{args.passage_tokens}-s{args.seed}.jsonl"
        if not corpus.exists():
            build_corpus(corpus, args.passages, args.passage_tokens, args.seed)
        description = (f"{args.passages} passages drawn from the KJV Bible (12 books) and fortunes-min "
                       "literature by scripts/build_plant_corpus.py")
    plant_dir = work / f"plant-{corpus.stem}-e{max(epochs)}-lr{args.lr:g}-b{args.batch_size}-s{args.seed}"
    settings = PlantSettings(model=args.model, corpus=str(corpus), out=str(plant_dir), epochs=max(epochs),
                             lr=args.lr, batch_size=args.batch_size, seed=args.seed,
                             passage_tokens=args.passage_tokens, save_epochs=len(epochs) > 1,
                             device=args.device)
    t = time.perf_counter()
    record = plant(settings, command=["bench_planted.py", *(argv if argv is not None else sys.argv[1:])])
    plant_s = time.perf_counter() - t
    print(f"plant: {record.get('timings')}", file=sys.stderr)

    methods = method_list(args.methods)
    params: dict[str, dict[str, Any]] = {"reference": {"model": args.reference or args.model}}
    n = record["split"]["n_members"] + record["split"]["n_nonmembers"]
    params["feature_agg"] = {"n_train": max(4, min(50, n // 3))}
    if args.dc_pdd_freq:
        # DC-PDD needs a token frequency table from text that holds none of the passages
        params["dc_pdd"] = {"freq": args.dc_pdd_freq}
    elif "dc_pdd" in methods:
        raise SystemExit("dc_pdd needs --dc-pdd-freq FILE (copyprobe freq build on text disjoint from the corpus)")
    from copyprobe.cli._common import parse_params

    for name, values in parse_params(args.param, methods).items():
        params.setdefault(name, {}).update(values)
    data = plant_dir / "data.jsonl"
    if args.subset:
        data = write_subset(data, work / f"subset-{args.subset}-s{args.seed}.jsonl", args.subset, args.seed)
    previous: dict[int, dict[str, Any]] = {}
    earlier: dict[str, Any] = {}
    results_json = Path(args.results) / "planted.json"
    if args.merge and results_json.exists():
        earlier = json.loads(results_json.read_text())
        previous = {pl["epochs"]: pl for pl in earlier["plants"]}
    losses = record.get("losses_eval") or {}
    plants: list[dict[str, Any]] = []
    from copyprobe.record import utc_now, versions

    timings = record.get("timings") or {}
    report = {
        "created": utc_now(),
        "command": ["python", "benchmarks/bench_planted.py", *(argv if argv is not None else sys.argv[1:])],
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPU cores, device {record.get('device')}",
        "corpus": {"path": str(corpus), "passage_tokens": args.passage_tokens, "n_passages": n,
                   "description": description},
        "plant": {"dir": str(plant_dir), "train_s": timings.get("train_s"), "epoch_s": timings.get("epoch_s"),
                  "eval_s": timings.get("eval_s"), "total_s": timings.get("total_s"),
                  "reused": bool(record.get("reused")), "this_run_s": round(plant_s, 1),
                  "steps": record.get("steps"), "n_train_tokens": record.get("n_train_tokens"),
                  "loss_curve": record.get("loss_curve"), "losses_eval": losses},
        "bootstrap": args.bootstrap,
        "versions": versions(),
        "plants": plants,
        "complete": False,
        "notes": (earlier.get("notes") or []) + args.note,
        "earlier_commands": (earlier.get("earlier_commands") or []) + ([earlier["command"]] if earlier else []),
    }
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        write_json(results / "planted.json", report)
        write_markdown(results / "planted.md", report)

    score_epochs = epochs if not args.score_epochs else sorted({int(e) for e in args.score_epochs.split(",")})
    if not set(score_epochs) <= set(epochs):
        raise SystemExit(f"--score-epochs {args.score_epochs} is not a subset of --epochs {args.epochs}")
    for e in epochs:
        if e not in score_epochs:
            if e in previous:  # --merge: keep that plant's table as it was
                plants.append(previous[e])
            continue
        spec = record["model"] if e == max(epochs) else record["epoch_models"][str(e)]
        print(f"detect on the {e}-epoch plant ({spec})", file=sys.stderr)
        entry = {
            "epochs": e, "base_model": args.model, "model": spec,
            "n_members": record["split"]["n_members"], "n_nonmembers": record["split"]["n_nonmembers"],
            "training": f"full fine-tuning, AdamW lr {args.lr:g}, batch {args.batch_size}, seed {args.seed}",
            "methods": {},
        }
        if e == max(epochs):
            entry.update(loss_members_before=losses.get("members_before"),
                         loss_members_after=losses.get("members_after"),
                         loss_nonmembers_after=losses.get("nonmembers_after"))
        else:
            entry.update(loss_members_before=losses.get("members_before"))
        kept = dict((previous.get(e) or {}).get("methods") or {})
        entry["methods"] = dict(kept)
        plants.append(entry)

        def update(results_so_far: dict[str, Any], entry=entry, kept=kept) -> None:
            entry["methods"] = {**kept, **results_so_far}
            save()

        got = run_methods(spec, data, methods, params, work / "runs" / f"e{e}",
                          work / "responses.sqlite", args.batch_size, args.device, args.bootstrap, args.seed,
                          on_result=update)
        for got_entry in got["methods"].values():
            got_entry.setdefault("passages", args.subset or n)
        entry["methods"] = {**kept, **got["methods"]}
        entry["model_load_s"] = got["load_s"]
        save()

    report["complete"] = True
    save()
    print(f"wrote {results / 'planted.json'} and {results / 'planted.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
