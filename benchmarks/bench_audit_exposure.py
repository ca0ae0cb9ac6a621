"""What does `copyprobe audit` find at realistic exposure, and what does "no evidence" rule out?
(issue 35; results in benchmarks/results/audit_exposure.md)

A plant (``copyprobe plant --split-by document`` on the 24 one-voice letters,
benchmarks/data/one_voice/letters, optionally diluted with ``--background`` text and
``--member-repeats``) gives models whose training documents are known. For each model
(the plant's final model and its ``epochs/<k>`` snapshots) and each method, every passage
of the 24 letters is scored once (through the response cache ``--cache``, so a cell is
recomputed from its command and the cache with no model work), then audited as
`copyprobe audit` audits (the same verdict function):

* each of the 12 member letters alone against 6 clean letters (the first 6 non-members by
  name): members found at ``--alpha`` (default 0.01);
* each of the other 6 non-members against the same 6 clean letters: false claims;
* the collection-level verdict: all 12 members as one suspect set against the 6 clean
  letters (what a publisher auditing a catalogue gets), and the 6 other non-members as
  one set (a false collection claim);
* the passage AUC of members against non-members with its 95% CI over letters
  (``copyprobe detect``'s metrics: documents resampled).

Each result row keeps every passage's score (and the file each plant's passages), so the
audits are recomputed from the JSON alone with the current verdict code (``retally``), as
are the tables (``table``) and the summary that ships with the package and ends every
``no evidence`` verdict (``summary``: copyprobe/evaluation/exposure_power.json).

    python benchmarks/bench_audit_exposure.py score --plant runs/plant_voice --epochs 1,3 \\
        --methods loss,zlib,min_k_pp,reference --cache runs/exposure.sqlite \\
        --out benchmarks/results/audit_exposure.json
    python benchmarks/bench_audit_exposure.py retally --results benchmarks/results/audit_exposure.json
    python benchmarks/bench_audit_exposure.py table --results benchmarks/results/audit_exposure.json
    python benchmarks/bench_audit_exposure.py summary --results benchmarks/results/audit_exposure.json \\
        --out copyprobe/evaluation/exposure_power.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_blackbox import parse_params  # noqa: E402
ALPHA = 0.01
N_CLEAN = 6
# what a row's audits are computed with; "t"/"rank" guard: evaluation.guard.rank_standing
TEST = "t"
GUARDS = ("rank", "t")
# what each method needs of the model, for the table (others: --access)
ACCESS = {"topk_loss": "top-k log-probs", "topk_reference": "top-k log-probs + a local model",
          "prefix_probe": "generation", "samia": "generation",
          "decop": "generation", "name_cloze": "generation"}


def plant_models(plant: Path, epochs: list[int] | None) -> dict[int, Path]:
    """epoch -> model directory of a plant (epochs/<k> snapshots and the final model/)."""
    record = json.loads((plant / "plant.json").read_text())
    last = int(record["training"]["epochs"])
    models = {int(p.name): p for p in (plant / "epochs").glob("*") if (p / "config.json").is_file()} \
        if (plant / "epochs").is_dir() else {}
    if (plant / "model" / "config.json").is_file():
        models[last] = plant / "model"
    if epochs:
        missing = [e for e in epochs if e not in models]
        if missing:
            raise SystemExit(f"{plant} has no model after epoch(s) {missing} (has {sorted(models)})")
        models = {e: models[e] for e in epochs}
    return dict(sorted(models.items()))


def exposure(plant: Path, epoch: int) -> dict[str, Any]:
    """What the model after ``epoch`` saw, from plant.json (its ``exposure`` and
    ``background`` blocks; a plant without them trained on the members alone)."""
    record = json.loads((plant / "plant.json").read_text())
    training = record.get("training", {})
    seen = record.get("exposure") or {}
    background = record.get("background") or {}
    repeats = int(seen.get("member_repeats") or 1)
    return {
        "base_model": record["base_model"]["spec"],
        "training": training.get("method"),
        "lr": training.get("lr"),
        "epochs": epoch,
        "member_repeats": repeats,
        "exposures": epoch * repeats,
        "dilution": float(seen.get("dilution") or 0.0),
        "background_tokens": int(background.get("n_tokens") or 0),
        "background_source": background.get("path"),
    }


def audit_cells(rows: list[dict], method: str, texts: dict[str, str], alpha: float, guard_test: str) -> dict:
    """Members found, false claims and collection verdicts of one score column."""
    from copyprobe.evaluation.verdicts import audit_verdicts

    label = {r["doc_id"]: r["label"] for r in rows}
    members = sorted(d for d, v in label.items() if v == 1)
    nonmembers = sorted(d for d, v in label.items() if v == 0)
    clean, held = nonmembers[:N_CLEAN], nonmembers[N_CLEAN:]
    by_doc: dict[str, list[dict]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], []).append(r)

    def run(suspects: list[str]) -> dict:
        subset = [{**r, "label": 1, "doc_id": f"suspect:{d}"} for d in suspects for r in by_doc[d]]
        subset += [{**r, "label": 0, "doc_id": f"clean:{d}"} for d in clean for r in by_doc[d]]
        return audit_verdicts(subset, method, {}, alpha, texts, test=TEST, guard_test=guard_test)

    found, p_members = [], {}
    for m in members:
        doc = run([m])["documents"][0]
        p_members[m] = doc["p"]
        if doc["verdict"] == "evidence":
            found.append(m)
    false = [n for n in held if run([n])["documents"][0]["verdict"] == "evidence"]
    group = run(members).get("collection") or {}
    null_group = run(held).get("collection") or {}
    return {"members_found": len(found), "n_members": len(members), "found": found,
            "false_claims": len(false), "n_nonmembers": len(held),
            "member_p": p_members,
            "collection": {"verdict": group.get("verdict"), "p": group.get("p")},
            "null_collection": {"verdict": null_group.get("verdict"), "p": null_group.get("p")}}


def subset(examples: list, members: int | None, held: int | None, per_letter: int | None) -> list:
    """For a method too slow for all 24 letters: the 6 clean letters, the first ``members``
    member letters and the first ``held`` other non-members (by name), the first
    ``per_letter`` passages of each."""
    if members is None and held is None and per_letter is None:
        return examples
    docs: dict[int, list[str]] = {}
    for e in examples:
        if str(e.doc_id) not in docs.setdefault(e.label, []):
            docs[e.label].append(str(e.doc_id))
    nonmembers = sorted(docs.get(0, []))
    keep = set(sorted(docs.get(1, []))[:members]) | set(nonmembers[:N_CLEAN]) | \
        set(nonmembers[N_CLEAN:][:held])
    out, count = [], {}
    for e in examples:
        d = str(e.doc_id)
        if d in keep and (per_letter is None or count.get(d, 0) < per_letter):
            count[d] = count.get(d, 0) + 1
            out.append(e)
    return out


def with_paraphrases(examples: list, csv_path: Path) -> list:
    """The passages a BookTection-layout CSV (id, Example_A..D, Answer) has paraphrases
    for, with them, so DE-COP asks no model to write any."""
    import csv
    from dataclasses import replace

    with open(csv_path, newline="", encoding="utf-8") as handle:
        given = {row["id"]: row for row in csv.DictReader(handle)}
    keys = ("Example_A", "Example_B", "Example_C", "Example_D", "Answer")
    out = [replace(e, meta={**(e.meta or {}), **{k: given[e.id][k] for k in keys}}) for e in examples if e.id in given]
    if not out:
        raise SystemExit(f"{csv_path} has paraphrases for none of the plant's passages")
    return out


def score(args) -> tuple[list[dict], dict[str, dict[str, str]]]:
    import copyprobe

    plant = Path(args.plant)
    data = copyprobe.load_dataset(str(plant / "data.jsonl"))
    examples = subset(data.examples, args.members, args.held, args.passages_per_letter)
    if args.paraphrases:
        examples = with_paraphrases(examples, Path(args.paraphrases))
    if args.passages_from:  # the same passages as a paraphrase CSV, but DE-COP's paraphraser writes them
        import csv

        with open(args.passages_from, newline="", encoding="utf-8") as handle:
            wanted = {row["id"] for row in csv.DictReader(handle)}
        examples = [e for e in examples if e.id in wanted]
    texts = {e.id: e.text for e in examples}
    passages = data_key(plant / "data.jsonl")
    params = parse_params(args.param)
    specs = dict(item.split("=", 1) for item in args.spec)
    models = {e: f"hf:{d}" for e, d in plant_models(plant, [e for e in args.epochs or [] if e > 0] or None).items()}
    if args.epochs:
        models = {e: m for e, m in models.items() if e in args.epochs}
        if 0 in args.epochs:  # the un-tuned base model: the control
            models = {0: specs.get("0") or json.loads((plant / "plant.json").read_text())["base_model"]["spec"],
                      **models}
    models = {e: specs.get(str(e), m) for e, m in models.items()}
    out = []
    for epoch, model_spec in models.items():
        model_dir = model_spec
        started = time.perf_counter()
        with copyprobe.Session(model_spec, cache=args.cache, batch_size=args.batch_size) as session:
            result = copyprobe.detect(session, examples, args.methods, params=params, blind_baseline=False,
                                      n_bootstrap=args.n_bootstrap, seed=0)
        seconds = time.perf_counter() - started
        metrics = (result.metrics or {}).get("passage", {})
        for method, method_params, value_of in columns(args.methods, params):
            rows = [{"id": r["id"], "doc_id": r["doc_id"], "label": r["label"], method: value_of(r)}
                    for r in result.rows]
            m = (metrics.get(method) or {}) if method_params == params.get(method, {}) else passage_auc(rows, method)
            out.append({
                "plant": str(plant), "model": str(model_dir), "data": passages, **exposure(plant, epoch),
                "access": ACCESS.get(method, args.access), "method": method, "params": method_params,
                "subset": {"members": args.members, "held": args.held, "passages_per_letter": args.passages_per_letter,
                           "paraphrases": args.paraphrases, "passages_from": args.passages_from},
                "auc": m.get("auc"), "auc_ci": [m.get("auc_low"), m.get("auc_high")],
                "audits": {g: audit_cells(rows, method, texts, args.alpha, g) for g in GUARDS},
                "alpha": args.alpha, "test": TEST, "score_s": round(seconds, 1),
                "scores": [{"id": r["id"], "doc_id": r["doc_id"], "label": r["label"], "value": r[method]}
                           for r in rows],
                "command": shlex.join(["python", *sys.argv]),
            })
    return out, {passages: {e.id: e.text for e in data.examples}}


def columns(methods: list[str], params: dict[str, dict]) -> list[tuple[str, dict, Any]]:
    """(method, params, row -> value) per score column: each method's score, and prefix
    probing's other similarities, computed from the same generations (its details)."""
    out = []
    for method in methods:
        mine = params.get(method, {})
        out.append((method, mine, lambda r, m=method: r.get(m)))
        if method == "prefix_probe":
            chosen = mine.get("similarity", "token_sort")
            for other in ("token_sort", "rouge_l", "lcs"):
                if other != chosen:
                    out.append((method, {**mine, "similarity": other},
                                lambda r, o=other: None if r.get("prefix_probe") is None
                                else r["details"]["prefix_probe"][o]))
        if method == "decop" and mine.get("mode") == "logit":
            # accuracy and the verbatim option's mean probability come from the same answers
            other = "probability" if mine.get("score", "accuracy") == "accuracy" else "accuracy"
            out.append((method, {**mine, "score": other}, lambda r, o=other: decop_value(r, o)))
    return out


def decop_value(row: dict, score: str) -> float | None:
    """A DE-COP row's value under the other ``score`` (probability or accuracy), from its details."""
    if row.get("decop") is None:
        return None
    details = row["details"]["decop"]
    return details["p_correct"] if score == "probability" else details["n_correct"] / details["n_orderings"]


def passage_auc(rows: list[dict], method: str) -> dict[str, Any]:
    """Passage AUC with a 95% bootstrap CI over documents (as detect's metrics) for a column
    detect did not compute metrics for."""
    from copyprobe.evaluation.metrics import bootstrap_ci, roc_auc

    kept = [r for r in rows if r[method] is not None]
    labels, values, groups = [r["label"] for r in kept], [r[method] for r in kept], [r["doc_id"] for r in kept]
    ci = bootstrap_ci(labels, values, roc_auc, groups=groups, n_resamples=1000, seed=0)
    return {"auc": roc_auc(labels, values), "auc_low": ci.low, "auc_high": ci.high}


def data_key(path: Path) -> str:
    """The passages a plant cut (its data.jsonl), named by their sha256: plants of the same
    letters and base tokenizer cut the same passages."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def row_key(r: dict) -> tuple:
    """What makes a row: plant, epoch, method, params and the passages it scored (a subset's
    settings; rows saved before subsets were recorded count as all passages)."""
    subset = {k: v for k, v in (r.get("subset") or {}).items() if v is not None}
    return (r["plant"], r["epochs"], r["method"], json.dumps(r["params"], sort_keys=True),
            json.dumps(subset, sort_keys=True))


def merge(path: Path, new: list[dict], texts: dict[str, dict[str, str]]) -> dict[str, Any]:
    """New rows replace old rows of the same plant, epoch, method, params and subset of
    passages; each plant's passages are kept once, under the sha256 of its data.jsonl
    (``texts``: key -> id -> text)."""
    key = row_key
    saved = json.loads(path.read_text()) if path.exists() else {}
    old = saved.get("rows", [])
    fresh = {key(r) for r in new}
    return {"texts": {**saved.get("texts", {}), **texts}, "rows": [r for r in old if key(r) not in fresh] + new}


def retally(results: dict[str, Any], alpha: float | None = None) -> None:
    """Recompute every row's audits from its saved scores and the saved texts, with the
    verdict code of this checkout (no model). A row saved before the texts were: its
    plant's data.jsonl, where it still is."""
    stored = results.setdefault("texts", {})
    for r in results["rows"]:
        if "data" not in r:
            data = Path(r["plant"]) / "data.jsonl"
            if not data.is_file():
                raise SystemExit(f"a row of {r['plant']} has no saved texts and {data} is not there")
            r["data"] = data_key(data)
            stored.setdefault(r["data"], {e["id"]: e["text"] for e in map(json.loads, data.read_text().splitlines())})
        texts = stored[r["data"]]
        rows = [{"id": s["id"], "doc_id": s["doc_id"], "label": s["label"], r["method"]: s["value"]}
                for s in r["scores"]]
        rows = with_target_half(results["rows"], r, rows)
        r["alpha"] = alpha if alpha is not None else r.get("alpha", ALPHA)
        r["audits"] = {g: audit_cells(rows, r["method"], texts, r["alpha"], g) for g in GUARDS}


def with_target_half(all_rows: list[dict], row: dict, passages: list[dict]) -> list[dict]:
    """A calibrated score's passages with both halves (the target's own score from the same
    model's row of it), so the audit asks the reference model as a witness, as
    `copyprobe audit` does; other methods' passages as they are."""
    from copyprobe.evaluation.witness import CALIBRATED, with_halves

    raw = CALIBRATED.get(row["method"])
    partner = next((o for o in all_rows if raw and o["method"] == raw and o["model"] == row["model"]
                    and o.get("data") == row.get("data") and not o.get("params")), None)
    if partner is None:
        return passages
    own = {s["id"]: s["value"] for s in partner["scores"]}
    return with_halves([{**p, raw: own.get(p["id"])} for p in passages], row["method"])


def summary(results: dict[str, Any], guard: str, source: str) -> dict[str, Any]:
    """What copyprobe/evaluation/exposure.py reads: per method and parameter set (those that
    differ from the method's defaults, ``params``), per trained model and exposure, the
    member letters its audits found and the false claims."""
    from copyprobe.audit import non_default_params

    methods: dict[str, list[dict]] = {}
    for r in results["rows"]:
        if r["exposures"] == 0 or r["auc"] is None:  # the base-model control; a run with no score
            continue
        a = r["audits"][guard]
        methods.setdefault(r["method"], []).append({
            "params": non_default_params(r["method"], r["params"]),
            "model": r["base_model"], "training": r["training"], "epochs": r["epochs"],
            "member_repeats": r["member_repeats"], "exposures": r["exposures"], "dilution": r["dilution"],
            "found": a["members_found"], "of": a["n_members"],
            "false_claims": a["false_claims"], "of_nonmembers": a["n_nonmembers"],
            "auc": round(r["auc"], 3) if r["auc"] is not None else None})
    for name, rows in methods.items():
        # the same exposure scored on several subsets of passages: the one that audited the most members
        best: dict[tuple, dict] = {}
        for x in rows:
            k = (json.dumps(x["params"], sort_keys=True), x["model"], x["training"], x["dilution"], x["exposures"])
            if k not in best or x["of"] > best[k]["of"]:
                best[k] = x
        methods[name] = sorted(best.values(), key=lambda x: (json.dumps(x["params"], sort_keys=True), x["model"],
                                                             x["dilution"], x["exposures"]))
    first = results["rows"][0] if results["rows"] else {}
    return {"source": source,
            "audit": {"clean_documents": N_CLEAN, "test": first.get("test", TEST), "guard_test": guard,
                      "alpha": first.get("alpha", ALPHA)},
            "methods": dict(sorted(methods.items()))}


def _pct(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{lo:.2f}, {hi:.2f}]"


def subset_note(subset: dict) -> str:
    """' [the committed paraphrases]', ' [1 passage a letter]' ...: which passages a row scored."""
    notes = []
    if subset.get("paraphrases"):
        notes.append("the committed paraphrases")
    if subset.get("passages_from"):
        notes.append("the committed set's passages, model-written paraphrases")
    if subset.get("passages_per_letter"):
        n = subset["passages_per_letter"]
        notes.append(f"{n} passage{'s' if n != 1 else ''} a letter")
    return f" [{'; '.join(notes)}]" if notes else ""


def render(rows: list[dict], guard: str) -> str:
    """One line per model x exposure x method."""
    lines = ["| model | training | epochs | dilution | repeats | exposures | access | method | members found "
             f"(alpha {ALPHA}, {N_CLEAN} clean) | false claims | collection (12 members) | false collection | "
             "passage AUC [95% CI over letters] |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = sorted(rows, key=lambda r: (r["base_model"], r["dilution"], r["member_repeats"], r["epochs"],
                                        r["access"], r["method"]))
    for r in order:
        a = r["audits"][guard]
        params = ", ".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
        method = r["method"] + (f" ({params})" if params else "") + subset_note(r.get("subset") or {})
        coll = a["collection"]
        null = a["null_collection"]
        p_value = "" if coll["p"] is None else f" (p = {coll['p']:.2g})"
        auc = "no score" if r["auc"] is None else f"{r['auc']:.2f}"  # every passage failed (see the command)
        lines.append(
            f"| {r['base_model']} | {r['training']} | {r['epochs']} | {r['dilution']:g}x | {r['member_repeats']} | "
            f"{r['exposures']} | {r['access']} | {method} | {a['members_found']}/{a['n_members']} | "
            f"{a['false_claims']}/{a['n_nonmembers']} | {coll['verdict']}{p_value} | "
            f"{null['verdict']} | {auc} {_pct(*r['auc_ci'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    p = sub.add_parser("score", help="score a plant's models and audit every letter")
    p.add_argument("--plant", required=True)
    p.add_argument("--epochs", type=lambda s: [int(x) for x in s.split(",") if x], default=None,
                   help="the models after these epochs (0 = the un-tuned base model, the control)")
    p.add_argument("--spec", action="append", default=[],
                   help="EPOCH=SPEC: score that epoch's model through another spec (e.g. a GGUF conversion for "
                        "llama.cpp: 3=llamacpp:runs/gguf/epoch3.gguf)")
    p.add_argument("--methods", required=True, type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--param", action="append", default=[], help="METHOD.NAME=VALUE")
    p.add_argument("--access", default="log-probs", help="the access the methods need, for the table")
    p.add_argument("--members", type=int, help="only the first N member letters (a slow method)")
    p.add_argument("--held", type=int, help="only the first N non-members beyond the 6 clean ones")
    p.add_argument("--passages-per-letter", type=int, help="only the first N passages of each letter")
    p.add_argument("--paraphrases", help="a BookTection CSV: only its passages, with its paraphrases (DE-COP)")
    p.add_argument("--passages-from", help="a BookTection CSV: only its passages, without its paraphrases "
                   "(DE-COP writes its own: compare with --paraphrases on the same passages)")
    p.add_argument("--alpha", type=float, default=ALPHA)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--n-bootstrap", type=int, default=1000)
    p.add_argument("--cache", required=True, help="response cache (SQLite); a rerun is answered from it")
    p.add_argument("--out", required=True)
    t = sub.add_parser("table", help="markdown table from saved results")
    t.add_argument("--results", required=True)
    t.add_argument("--guard", choices=GUARDS, default="t")
    r = sub.add_parser("retally", help="recompute the audits from the saved scores with this checkout (no model)")
    r.add_argument("--results", required=True)
    r.add_argument("--alpha", type=float, default=None)
    m = sub.add_parser("summary", help="the summary copyprobe ships (evaluation/exposure_power.json)")
    m.add_argument("--results", required=True)
    m.add_argument("--guard", choices=GUARDS, default="t")
    m.add_argument("--source", default="benchmarks/results/audit_exposure.md")
    m.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.part == "table":
        print(render(json.loads(Path(args.results).read_text())["rows"], args.guard))
        return 0
    if args.part == "retally":
        path = Path(args.results)
        results = json.loads(path.read_text())
        retally(results, args.alpha)
        path.write_text(json.dumps(results, indent=1) + "\n")
        print(render(results["rows"], "t"))
        return 0
    if args.part == "summary":
        table = summary(json.loads(Path(args.results).read_text()), args.guard, args.source)
        Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
        print(f"{args.out}: {', '.join(f'{k} ({len(v)} exposures)' for k, v in table['methods'].items())}")
        return 0
    out = Path(args.out)
    new, texts = score(args)
    results = merge(out, new, texts)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(render([r for r in results["rows"] if r["plant"] == args.plant], "t"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
