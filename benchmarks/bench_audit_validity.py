"""Does `copyprobe audit` ever claim training on text no model has seen? And how often
does it find documents a model was trained on? (issue 25; results in
benchmarks/results/audit_validity.md)

Null battery (``battery``): 160 documents in seven styles written for copyprobe in 2026
(benchmarks/data/audit_battery, CC0), a short version of each and long ones joined from
them (326 documents; the 186 that some scenario reads) are scored once with every candidate score; then
scenarios in which NO suspect document was trained on (archaic vs modern prose both
ways, verse vs prose, legal/technical vs narrative, dialogue vs description, many vs
many in one style, one vs one, short documents, encyclopedic vs a mixed clean set) are
audited from those scores, as `copyprobe audit` would (the same verdict function), for
both document tests and two alphas. Every "evidence" verdict there is a false claim.

Power (``power``): a plant made with ``copyprobe plant --split-by document`` on the 24
one-voice letters (benchmarks/data/one_voice); each member document is audited against
non-member documents, and each non-member against the other non-members.

    python benchmarks/bench_audit_validity.py battery --out benchmarks/results/audit_battery.json
    copyprobe plant --model smollm2-135m-instruct --corpus benchmarks/data/one_voice/letters \\
        --split-by document --epochs 3 --save-epochs --seed 0 --out runs/plant_voice
    python benchmarks/bench_audit_validity.py power --plant runs/plant_voice \\
        --out benchmarks/results/audit_power.json

Model calls go through the response cache, so a rerun recomputes the tables in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
BATTERY = ROOT / "benchmarks" / "data" / "audit_battery"
STYLES = ("archaic", "modern", "description", "legal", "verse", "dialogue", "encyclopedic")
SCORES = ("loss", "zlib", "min_k_pp", "reference", "neighborhood")
TESTS = ("rank", "t")
ALPHAS = (0.01, 0.05)
GUARDS = ("rank", "t")  # evaluation.guard.rank_standing: how the guard's p-values are computed
SHORT_WORDS = 48  # the "short documents" scenario: the first ~48 words of each document


def _docs(style: str, numbers) -> list[str]:
    return [f"{style}-{n:02d}" for n in numbers]


def scenarios(names: list[str] | None = None) -> list[dict[str, Any]]:
    """(name, audits): each audit is (suspect documents, clean documents); none of the
    suspects was trained on by anyone. ``names``: only these scenarios (a slow method)."""
    every = _all_scenarios()
    if names is None:
        return every
    known = [sc["name"] for sc in every]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown[0]!r}; choose from: {', '.join(known)}")
    return [sc for sc in every if sc["name"] in names]


def _all_scenarios() -> list[dict[str, Any]]:
    six = range(1, 7)
    out = []

    def one_each(name, s_style, c_docs, what):
        out.append({"name": name, "what": what,
                    "audits": [([s], c_docs) for s in _docs(s_style, six)]})

    one_each("archaic vs modern", "archaic", _docs("modern", range(1, 25)),
             "King James pastiche suspects, modern narrative clean")
    one_each("modern vs archaic", "modern", _docs("archaic", range(1, 25)),
             "modern narrative suspects, King James pastiche clean")
    one_each("verse vs prose", "verse", _docs("modern", range(1, 25)), "poems vs modern narrative prose")
    one_each("prose vs verse", "modern", _docs("verse", range(1, 21)), "modern narrative prose vs poems")
    one_each("legal vs narrative", "legal", _docs("modern", range(1, 25)),
             "legal and technical prose vs modern narrative")
    one_each("narrative vs legal", "modern", _docs("legal", range(1, 25)),
             "modern narrative vs legal and technical prose")
    one_each("dialogue vs description", "dialogue", _docs("description", range(1, 25)),
             "scenes in dialogue vs description")
    one_each("description vs dialogue", "description", _docs("dialogue", range(1, 21)),
             "description vs scenes in dialogue")
    out.append({"name": "many vs many, one style", "what": "8 description suspects vs 16 description clean; "
                "8 modern suspects vs 16 modern clean (one audit each, all suspects together)",
                "audits": [(_docs("description", range(1, 9)), _docs("description", range(9, 25))),
                           (_docs("modern", range(1, 9)), _docs("modern", range(9, 25)))]})
    out.append({"name": "one vs one", "what": "one pastiche / verse / legal document vs one modern draft",
                "audits": [([a], [b]) for a, b in zip(_docs("archaic", six) + _docs("verse", six) + _docs("legal", six),
                                                       _docs("modern", range(1, 19)))]})
    out.append({"name": "short documents", "what": f"first ~{SHORT_WORDS} words: encyclopedic and archaic "
                "suspects vs modern clean",
                "audits": [([f"short:{s}"], [f"short:{c}" for c in _docs("modern", range(1, 25))])
                           for s in _docs("encyclopedic", range(1, 4)) + _docs("archaic", range(1, 4))]})
    # a long document (eight drafts of one style read as one) against single drafts, and one
    # draft against long ones: the test reads the same number of passages of every document
    out.append({"name": "long vs short", "what": "a document of 8 modern drafts joined vs 16 single modern drafts; "
                "the same with description",
                "audits": [([f"long:{s}-a"], _docs(s, range(9, 25))) for s in ("modern", "description")]})
    out.append({"name": "short vs long", "what": "one modern draft vs 6 documents of 4 modern drafts joined; "
                "the same with description",
                "audits": [([d], [f"long:{s}-{j}" for j in "bcdefg"]) for s in ("modern", "description")
                           for d in _docs(s, range(1, 4))]})
    mixed = [d for style in ("modern", "description", "dialogue", "legal", "archaic", "verse")
             for d in _docs(style, range(21, 25) if style not in ("dialogue", "verse") else range(17, 21))]
    one_each("encyclopedic vs mixed clean", "encyclopedic", mixed,
             "reference-work articles vs a clean set of 24 documents from six other styles")
    one_each("encyclopedic vs modern", "encyclopedic", _docs("modern", range(1, 25)),
             "reference-work articles (a style models read a lot) vs modern narrative")
    return out


def _params(args) -> dict[str, Any]:
    from bench_blackbox import parse_params

    params = {"neighborhood": {"n_neighbours": args.neighbours}} if "neighborhood" in args.scores else {}
    for method, values in parse_params(args.param).items():
        params.setdefault(method, {}).update(values)
    return params


def load_battery(passage_words: int):
    import copyprobe

    examples = []
    for style in STYLES:
        dataset = copyprobe.load_dataset(str(BATTERY / style), passage_words=passage_words)
        examples += dataset.examples
    short = []
    first: dict[str, str] = {}
    for e in examples:
        first.setdefault(e.doc_id, e.text)
    for doc, text in first.items():
        words = text.split()[:SHORT_WORDS]
        short.append(copyprobe.Example(id=f"short:{doc}:1", text=" ".join(words), doc_id=f"short:{doc}"))
    long_docs = []
    for style in ("modern", "description"):
        # "-a": drafts 1-8 as one document; "-b".."-g": drafts 1-24 in six documents of four
        groups = {"a": range(1, 9), **{c: range(1 + 4 * i, 5 + 4 * i) for i, c in enumerate("bcdefg")}}
        for tag, numbers in groups.items():
            for n in numbers:
                long_docs += [copyprobe.Example(id=f"long:{style}-{tag}:{e.id}", text=e.text, doc_id=f"long:{style}-{tag}")
                              for e in examples if e.doc_id == f"{style}-{n:02d}"]
    return examples + short + long_docs


def new_counts() -> dict[str, int]:
    return {"audits": 0, "documents": 0, "evidence": 0, "no evidence": 0, "cannot tell": 0,
            "unguarded_claims": 0, "guard_withheld": 0, "collections": 0, "collection_claims": 0}


def tally(counts: dict[str, int], report: dict[str, Any], alpha: float) -> None:
    """Add one audit's verdicts.json to the counts (a claim the test alone makes is 'unguarded')."""
    counts["audits"] += 1
    for doc in report["documents"]:
        counts["documents"] += 1
        counts[doc["verdict"]] += 1
        p = doc.get("p_adjusted")
        if p is not None and p <= alpha:
            counts["unguarded_claims"] += 1
            counts["guard_withheld"] += doc["verdict"] != "evidence"
    if report.get("collection"):
        counts["collections"] += 1
        counts["collection_claims"] += report["collection"]["verdict"] == "evidence"


def verdict_counts(rows, texts, method, audits, alpha, test, guard_test="rank"):
    from copyprobe.evaluation.verdicts import audit_verdicts
    from copyprobe.evaluation.witness import CALIBRATED, with_halves

    if method in CALIBRATED:  # the saved columns hold both halves: the audit asks the reference as a witness
        rows = with_halves(rows, method)
    by_doc: dict[str, list[dict]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], []).append(r)
    counts = new_counts()
    for suspects, clean in audits:
        subset = []
        for label, docs in ((1, suspects), (0, clean)):
            for d in docs:
                for r in by_doc[d]:
                    subset.append({**r, "label": label, "doc_id": f"{'suspect' if label else 'clean'}:{d}"})
        report = audit_verdicts(subset, method, {}, alpha, texts, test=test, guard_test=guard_test)
        tally(counts, report, alpha)
    return counts


def di_counts(session, examples, audits, seed: int = 0) -> dict[tuple[str, float], dict[str, int]]:
    """The dataset-inference combination (feature_agg, Maini et al.): it learns from the
    audit's own suspect and clean documents, so each audit fits it anew (`copyprobe audit
    --method feature_agg`: whole documents since 2026-11-30, before that passages); its
    fitted rows are left out of the verdicts, and an audit it cannot fit counts as cannot tell."""
    import copyprobe
    from copyprobe.evaluation.verdicts import audit_verdicts

    by_doc: dict[str, list] = {}
    for e in examples:
        by_doc.setdefault(e.doc_id, []).append(e)
    out: dict[tuple[str, float], dict[str, int]] = {}
    for suspects, clean in audits:
        s_ex = [e for d in suspects for e in by_doc[d]]
        c_ex = [e for d in clean for e in by_doc[d]]
        try:
            result = copyprobe.audit(session, s_ex, c_ex, "feature_agg",
                                     params={"n_train": max(4, (len(s_ex) + len(c_ex)) // 2)},
                                     blind_baseline=False, n_bootstrap=0, seed=seed)
        except copyprobe.CopyprobeError:  # too few suspect passages to fit on and test: no claim possible
            for test in TESTS:
                for alpha in ALPHAS:
                    c = out.setdefault((test, alpha), new_counts())
                    c["audits"] += 1
                    c["documents"] += len(suspects)
                    c["cannot tell"] += len(suspects)
            continue
        texts = {e.id: e.text for e in result.detect.examples}
        for test in TESTS:
            for alpha in ALPHAS:
                report = audit_verdicts(result.detect.rows, "feature_agg", result.detect.record.train_ids, alpha, texts,
                                        test=test)
                tally(out.setdefault((test, alpha), new_counts()), report, alpha)
    return out


def score_columns(rows: list[dict], methods: list[str]) -> list[dict]:
    """id, doc_id and one column per score; prefix probing's other similarities (in its
    details, from the same generations) become columns ``prefix_probe[rouge_l]`` etc."""
    out = []
    for r in rows:
        row = {"id": r["id"], "doc_id": r["doc_id"], **{m: r.get(m) for m in methods}}
        details = (r.get("details") or {}).get("prefix_probe") if "prefix_probe" in methods else None
        for name in ("token_sort", "rouge_l", "lcs"):
            if details and r.get("prefix_probe") is not None and name in details:
                row[f"prefix_probe[{name}]"] = details[name]
        out.append(row)
    return out


def battery_table(rows: list[dict], texts: dict[str, str], columns: list[str], guards=GUARDS,
                  names: list[str] | None = None) -> list[dict]:
    table = []
    for sc in scenarios(names):
        for method in columns:
            for test in TESTS:
                for alpha in ALPHAS:
                    for guard_test in guards:
                        counts = verdict_counts(rows, texts, method, sc["audits"], alpha, test, guard_test)
                        table.append({"scenario": sc["name"], "method": method, "test": test, "alpha": alpha,
                                      "guard": guard_test, **counts})
    return table


def battery_examples(passage_words: int, names: list[str] | None = None,
                     per_document: int | None = None) -> list:
    """The battery's passages: only the documents the named scenarios audit (None: every
    scenario; runs before 2026-11-27 also scored 126 short versions and 14 encyclopedic
    articles no scenario reads),
    and of each document only ``per_document`` evenly spaced passages (the ones an audit
    reading that many would read; all: None)."""
    from copyprobe.evaluation.verdicts import evenly_spaced

    needed = {d for sc in scenarios(names) for suspects, clean in sc["audits"] for d in suspects + clean}
    examples = [e for e in load_battery(passage_words) if e.doc_id in needed]
    if per_document:
        by_doc: dict[str, list] = {}
        for e in examples:
            by_doc.setdefault(e.doc_id, []).append(e)
        keep = {ps[j].id for ps in by_doc.values() for j in evenly_spaced(len(ps), per_document)}
        examples = [e for e in examples if e.id in keep]
    return examples


def run_battery(args) -> dict[str, Any]:
    import copyprobe

    chosen = scenarios(args.scenarios)
    examples = battery_examples(args.passage_words, args.scenarios, args.passages_per_document)
    methods = list(args.scores)
    started = time.perf_counter()
    with copyprobe.Session(args.model, batch_size=args.batch_size, cache=args.cache or True) as session:
        result = copyprobe.detect(session, examples, methods, blind_baseline=False, n_bootstrap=0,
                                  params=_params(args))
        score_s = time.perf_counter() - started
        di = {sc["name"]: di_counts(session, examples, sc["audits"]) for sc in chosen} if args.di else {}
    rows = score_columns(result.rows, methods)
    columns = [c for c in rows[0] if c not in ("id", "doc_id")] if rows else methods
    texts = {e.id: e.text for e in examples}
    table = []
    for name, per in di.items():
        for (test, alpha), counts in per.items():
            table.append({"scenario": name, "method": "feature_agg", "test": test, "alpha": alpha, "guard": "rank",
                          **counts})
    table += battery_table(rows, texts, columns, names=args.scenarios)
    failures = sum(1 for r in rows for m in methods if r.get(m) is None)
    return {"model": args.model, "passage_words": args.passage_words, "n_documents": len({e.doc_id for e in examples}),
            "scenario_names": args.scenarios, "passages_per_document": args.passages_per_document,
            "n_passages": len(examples), "methods": methods, "params": _params(args), "columns": columns,
            "neighbours": args.neighbours, "score_s": round(score_s, 1),
            "failed_scores": failures, "scenarios": [{k: v for k, v in sc.items() if k != "audits"} |
                                                     {"n_audits": len(sc["audits"])} for sc in chosen],
            "table": table, "scores": rows, "command": ["python", *sys.argv]}


def run_power(args) -> dict[str, Any]:
    import copyprobe
    from copyprobe.evaluation.verdicts import audit_verdicts
    from scipy.stats import binomtest

    plant = Path(args.plant)
    data = copyprobe.load_dataset(str(plant / "data.jsonl"))
    examples = data.examples
    docs: dict[str, int] = {}
    for e in examples:
        docs[e.doc_id] = e.label
    members = sorted(d for d, lab in docs.items() if lab == 1)
    nonmembers = sorted(d for d, lab in docs.items() if lab == 0)
    half = len(nonmembers) // 2
    clean_pool, held_nonmembers = nonmembers[:half], nonmembers[half:]
    models = {}
    for sub in sorted((plant / "epochs").glob("*")) if (plant / "epochs").exists() else []:
        models[f"{sub.name} epoch{'s' if sub.name != '1' else ''}"] = sub
    if (plant / "model").exists():  # the last epoch (a plant still training has only epochs/)
        epochs = json.loads((plant / "plant.json").read_text()).get("training", {}).get("epochs", "all")
        models[f"{epochs} epochs"] = plant / "model"
    if args.only:
        models = {k: v for k, v in models.items() if k == args.only}
    if not models:
        raise SystemExit(f"{plant} holds no trained model (model/ or epochs/N)")
    out = {"plant": str(plant), "members": members, "nonmembers": nonmembers, "clean_pool": clean_pool,
           "methods": list(args.scores), "rows": [], "command": ["python", *sys.argv]}
    for label, model_dir in models.items():
        started = time.perf_counter()
        stripped = [replace(e, label=None) for e in examples]
        with copyprobe.Session(f"hf:{model_dir}", batch_size=args.batch_size) as session:
            result = copyprobe.detect(session, stripped, list(args.scores), blind_baseline=False, n_bootstrap=0,
                                      params=_params(args))
        score_s = time.perf_counter() - started
        texts = {e.id: e.text for e in examples}
        by_doc: dict[str, list[dict]] = {}
        for r in result.rows:
            by_doc.setdefault(r["doc_id"], []).append(r)

        def audit(suspects, clean, method, alpha, test):
            subset = [{**r, "label": 1, "doc_id": f"suspect:{d}"} for d in suspects for r in by_doc[d]]
            subset += [{**r, "label": 0, "doc_id": f"clean:{d}"} for d in clean for r in by_doc[d]]
            return audit_verdicts(subset, method, {}, alpha, texts, test=test)

        for method in args.scores:
            for test in TESTS:
                for alpha in ALPHAS:
                    for setting, clean_of in (
                        (f"{len(clean_pool)} clean", lambda d: clean_pool),
                        (f"{len(nonmembers) - 1} clean (all other non-members)",
                         lambda d: [n for n in nonmembers if n != d]),
                    ):
                        found = sum(audit([m], clean_of(m), method, alpha, test)["documents"][0]["verdict"] == "evidence"
                                    for m in members)
                        others = held_nonmembers if "all" not in setting else nonmembers
                        false = 0
                        for n in others:
                            clean = [c for c in (clean_pool if "all" not in setting else nonmembers) if c != n]
                            false += audit([n], clean, method, alpha, test)["documents"][0]["verdict"] == "evidence"
                        ci = binomtest(found, len(members)).proportion_ci(method="exact")
                        out["rows"].append({"model": label, "method": method, "test": test, "alpha": alpha,
                                            "setting": setting, "members_found": found, "n_members": len(members),
                                            "found_ci": [round(ci.low, 3), round(ci.high, 3)],
                                            "nonmember_claims": false, "n_nonmembers": len(others),
                                            "score_s": round(score_s, 1)})
    return out


def render(battery: dict[str, Any] | None, power: dict[str, Any] | None) -> str:
    """Markdown tables of the results (what benchmarks/results/audit_validity.md shows)."""
    lines: list[str] = []
    if battery:
        part = ""
        if battery.get("scenario_names") and len(battery["scenario_names"]) < len(scenarios()):
            part += f", {len(battery['scenario_names'])} of the scenarios"
        if battery.get("passages_per_document"):
            part += f", {battery['passages_per_document']} evenly spaced passage(s) a document"
        lines += [f"### Null battery: {battery['n_documents']} documents, {battery['n_passages']} passages, "
                  f"{battery['model']}, passages of at most {battery['passage_words']} words{part}", "",
                  "False claims (`evidence` on a document nobody trained on) over all scenarios; in brackets the "
                  "claims the test alone would make without the guard; then `cannot tell` verdicts and false "
                  "collection-level claims.", "",
                  "| score | test | alpha | guard | documents audited | false claims (without guard) | cannot tell | "
                  "collection claims |", "|---|---|---|---|---|---|---|---|"]
        for key, t in summarise(battery).items():
            method, test, alpha, guard_test = key.split(" ")
            lines.append(f"| {method} | {test} | {alpha.split('=')[1]} | {guard_test.split('=')[1]} | "
                         f"{t['documents']} | {t['false_claims']} ({t['unguarded']}) | {t['cannot_tell']} | "
                         f"{t['collection_claims']} |")
        lines += ["", "Per scenario, t test at alpha 0.01 with the t guard (the default), false claims (without "
                  "guard) per score:", ""]
        methods = sorted({r["method"] for r in battery["table"]})
        lines += ["| scenario | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
        for sc in battery["scenarios"]:
            cells = []
            for m in methods:
                row = next((r for r in battery["table"] if r["scenario"] == sc["name"] and r["method"] == m
                            and r["test"] == "t" and r["alpha"] == 0.01 and r.get("guard", "rank") == "t"), None)
                cells.append("-" if row is None else f"{row['evidence']} ({row['unguarded_claims']}) of {row['documents']}")
            lines.append(f"| {sc['name']} | " + " | ".join(cells) + " |")
        lines.append("")
    if power:
        lines += [f"### Power: plant {power['plant']} ({len(power['members'])} member and "
                  f"{len(power['nonmembers'])} non-member documents)", "",
                  "| model | score | test | alpha | clean documents | members found [95% CI] | false claims on "
                  "non-members |", "|---|---|---|---|---|---|---|"]
        for r in power["rows"]:
            lines.append(f"| {r['model']} | {r['method']} | {r['test']} | {r['alpha']} | {r['setting']} | "
                         f"{r['members_found']}/{r['n_members']} [{r['found_ci'][0]:.2f}, {r['found_ci'][1]:.2f}] | "
                         f"{r['nonmember_claims']}/{r['n_nonmembers']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    for name in ("battery", "power"):
        p = sub.add_parser(name)
        p.add_argument("--model", default="smollm2-135m-instruct")
        p.add_argument("--scores", default=",".join(SCORES), type=lambda s: [x for x in s.split(",") if x])
        p.add_argument("--passage-words", type=int, default=64)
        p.add_argument("--neighbours", type=int, default=10)
        p.add_argument("--batch-size", type=int, default=8)
        p.add_argument("--di", action="store_true", help="also the dataset-inference combination (feature_agg), "
                       "fitted per audit")
        p.add_argument("--param", action="append", default=[], help="METHOD.NAME=VALUE")
        p.add_argument("--cache", help="response cache file (default: the user cache)")
        p.add_argument("--out", required=True)
        if name == "battery":
            p.add_argument("--scenarios", type=lambda s: [x.strip() for x in s.split(";") if x.strip()],
                           help="only these scenarios, separated by ';' (their names hold commas); a slow "
                                "method; default: all")
            p.add_argument("--passages-per-document", type=int,
                           help="score only N evenly spaced passages of each document (default: all)")
        if name == "power":
            p.add_argument("--plant", required=True, help="a plant directory (copyprobe plant --split-by document)")
            p.add_argument("--only", help="one of the plant's models, e.g. '1 epoch' or '3 epochs'")
    table = sub.add_parser("table", help="markdown tables from saved results")
    table.add_argument("--battery")
    table.add_argument("--power")
    again = sub.add_parser("retally", help="recompute a battery's verdict counts from its saved passage scores "
                           "(no model), e.g. after a change to the verdict rule")
    again.add_argument("--battery", required=True)
    again.add_argument("--columns-from", action="append",
                       help="another battery file whose score columns the passages take too (the target's own score "
                            "of a calibrated one, for the witness); repeatable")
    summ = sub.add_parser("summary", help="the null battery's false claims per method at the audit's defaults, for "
                          "copyprobe/evaluation/validity.json (what an evidence verdict quotes)")
    summ.add_argument("--battery", action="append", required=True, help="a battery JSON (repeat for several)")
    summ.add_argument("--source", default="benchmarks/results/audit_validity.md")
    summ.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.part == "summary":
        table = validity_summary([json.loads(Path(b).read_text()) for b in args.battery], args.source)
        Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
        print(f"{args.out}: " + ", ".join(f"{m} ({sum(r['false_claims'] for r in rows)} false claims)"
                                          for m, rows in table["methods"].items()))
        return 0
    if args.part == "retally":
        path = Path(args.battery)
        battery = json.loads(path.read_text())
        if not isinstance(battery, dict) or "scores" not in battery:  # dataset inference's: verdicts, not scores
            print(f"{path} holds no passage scores to retally (rerun its battery to recount it)", file=sys.stderr)
            return 2
        for other in args.columns_from or []:  # e.g. topk_loss beside topk_reference: the witness's halves
            add_columns(battery, json.loads(Path(other).read_text()))
        texts = {e.id: e.text for e in load_battery(battery["passage_words"])}
        kept = [r for r in battery["table"] if r["method"] == "feature_agg"]
        battery["table"] = kept + battery_table(battery["scores"], texts, battery["columns"],
                                                names=battery.get("scenario_names"))
        path.write_text(json.dumps(battery, indent=1) + "\n")
        print(json.dumps(summarise(battery), indent=1))
        return 0
    if args.part == "table":
        load = lambda path: json.loads(Path(path).read_text()) if path else None  # noqa: E731
        print(render(load(args.battery), load(args.power)))
        return 0
    result = run_battery(args) if args.part == "battery" else run_power(args)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summarise(result), indent=1))
    return 0


def add_columns(battery: dict[str, Any], other: dict[str, Any]) -> None:
    """The score columns of ``other`` that ``battery`` lacks, added to its passages by id
    (kept out of its own columns: they are read, not tallied)."""
    extra = [c for c in other.get("columns") or [] if c not in battery["columns"]]
    by_id = {r["id"]: r for r in other["scores"]}
    for row in battery["scores"]:
        for c in extra:
            if row["id"] in by_id and c not in row:
                row[c] = by_id[row["id"]].get(c)


def column_params(battery: dict[str, Any], column: str) -> tuple[str, dict[str, Any]]:
    """A battery column's method and the parameters it was scored with that differ from the
    method's defaults: ``prefix_probe[lcs]`` is prefix_probe with similarity=lcs (the same
    generations read with another similarity)."""
    from copyprobe.audit import non_default_params

    method, _, similarity = column.partition("[")
    params = dict((battery.get("params") or {}).get(method) or {})
    if similarity:
        params["similarity"] = similarity.rstrip("]")
    return method, non_default_params(method, params, target_spec=battery.get("model"))


def weights_name(spec: str) -> str:
    """The weights a model spec runs, whichever engine runs them: llamacpp:gemma-3-270m and
    gemma-3-270m are one model (the GGUF of one package), and so are llamacpp:f.gguf,
    gguf:./f.gguf and gguf:/abs/f.gguf. An alias is not resolved to its file (that would
    join a chunked package's GGUF on disk), so gguf: of an alias's own file is another name."""
    from copyprobe.backends.specs import ALIASES

    name = str(spec).strip()
    for engine in ("llamacpp:", "gguf:"):
        if name.startswith(engine):
            name = name[len(engine):].strip()
            return name if name in ALIASES else str(Path(name).expanduser().resolve())
    return name  # an alias, hf: and remote models: as written


def validity_summary(batteries: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """What copyprobe/evaluation/validity.py reads: per method and parameter set, the null
    battery's false claims at the audit's defaults (t test, alpha 0.01, t guard), document
    and collection verdicts, and how much of the battery was run, per model and passage
    length (a battery cut at 128 words is another test of the same documents). One model read
    through two engines (llama.cpp and transformers) is one model: its second row is left out."""
    from copyprobe.audit import SETTINGS

    test, alpha, guard = (SETTINGS.default(name) for name in ("test", "alpha", "guard_test"))
    methods: dict[str, list[dict]] = {}
    for battery in batteries:
        totals = summarise(battery)
        columns = battery.get("columns") or sorted({r["method"] for r in battery["table"]})  # older files
        for column in columns:
            t = totals.get(f"{column} {test} alpha={alpha} guard={guard}")
            if t is None:
                continue
            method, params = column_params(battery, column)
            earlier = next((r for r in methods.get(method, []) if r["params"] == params
                            and weights_name(r["model"]) == weights_name(battery["model"])
                            and r["passage_words"] == battery["passage_words"]), None)
            if earlier is not None:
                if earlier["model"] != battery["model"]:
                    # one model's audits read through two engines are not a second model's
                    print(f"{column} of {battery['model']} left out: the same weights as {earlier['model']}, "
                          "whose row is kept", file=sys.stderr)
                continue  # the same score in an earlier battery file
            methods.setdefault(method, []).append({
                "params": params, "model": battery["model"], "documents": t["documents"],
                "false_claims": t["false_claims"], "cannot_tell": t["cannot_tell"],
                "collections": sum(r["collections"] for r in battery["table"] if r["method"] == column
                                   and r["test"] == test and r["alpha"] == alpha and r.get("guard") == guard),
                "collection_claims": t["collection_claims"],
                "scenarios": len(battery["scenarios"]),
                "passages_per_document": battery.get("passages_per_document"),
                "passage_words": battery["passage_words"]})
    return {"source": source, "audit": {"test": test, "alpha": alpha, "guard_test": guard},
            "methods": dict(sorted(methods.items()))}


def summarise(result: dict[str, Any]) -> Any:
    """False claims per (method, test, alpha) over the whole battery, or power rows."""
    if "table" not in result:
        return result["rows"]
    totals: dict[tuple, dict[str, int]] = {}
    for row in result["table"]:
        key = (row["method"], row["test"], row["alpha"], row.get("guard", "rank"))
        t = totals.setdefault(key, {"documents": 0, "false_claims": 0, "unguarded": 0, "cannot_tell": 0,
                                    "collection_claims": 0})
        t["documents"] += row["documents"]
        t["false_claims"] += row["evidence"]
        t["unguarded"] += row["unguarded_claims"]
        t["cannot_tell"] += row["cannot tell"]
        t["collection_claims"] += row["collection_claims"]
    return {f"{m} {t} alpha={a} guard={g}": v for (m, t, a, g), v in sorted(totals.items())}


if __name__ == "__main__":
    sys.exit(main())
