"""Real exposure: does `copyprobe audit` find text the bundled models certainly trained on,
when nobody planted it? (issue 40, item 1; results in benchmarks/results/audit_real.md)

No fine-tuning: the bundled models as they ship. Each text kind pairs suspects whose
presence in pretraining is certain with clean documents of the same kind that no model
can have seen (written for copyprobe, CC0):

- ``kjv``: ten well-known chapters of the King James Bible (Debian's ``bible-kjv``), against
  the battery's King James pastiche (benchmarks/data/audit_battery/archaic);
- ``licence``: licence texts Debian ships in /usr/share/common-licenses, against the
  battery's legal and technical documents (benchmarks/data/audit_battery/legal);
- ``code``: standard-library modules of this machine's Python 3.11 that every code corpus
  holds, against modules written for copyprobe on 2026-11-27
  (benchmarks/data/real_exposure/code_clean).

Two held-out kinds, ``kjv_heldout`` (ten other chapters) and ``code_heldout`` (ten other
modules), meet the same clean documents: chosen after the witness's level and shares of alpha
were set on the three kinds above, they test those choices on documents they were not chosen
on (``score --kinds kjv_heldout,code_heldout``; kept out of the shipped summary). ``table
--witness-level L --calibrated-share S`` tallies with another choice than copyprobe ships.

Documents are written as .txt files under runs/real_exposure/ and read as `copyprobe audit`
reads them (``copyprobe.load_dataset(dir, passage_words=64)``); of each document the audit's
passages are kept (``passages_to_read``: the same number, evenly spaced, for every document,
here 3). ``score`` runs one model and saves every passage's scores, with their texts, so that
``table`` and ``summary`` rerun with no model (a few minutes here, most of it the audits' style guard):

    python benchmarks/bench_audit_real.py check
    python benchmarks/bench_audit_real.py score --model smollm2-135m-instruct --cache runs/real.sqlite \\
        --out benchmarks/results/audit_real_smollm2-135m-instruct.json
    python benchmarks/bench_audit_real.py table benchmarks/results/audit_real_*.json \\
        --json benchmarks/results/audit_real.json
    python benchmarks/bench_audit_real.py summary benchmarks/results/audit_real.json \\
        --out copyprobe/evaluation/real_exposure.json

Audits are the function `copyprobe audit` runs (``audit_verdicts``) at the audit's defaults
(copyprobe.audit.SETTINGS: t test, alpha 0.01, t guard): each suspect document alone against
all the clean documents of its kind; each clean document as a suspect against the other clean
documents (every ``evidence`` there is a false claim); all suspects together against all clean
documents (the collection verdict). The blind baseline (copyprobe.evaluation.blind, no model)
says how well the text alone separates the suspects' passages from the clean ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

BATTERY = ROOT / "benchmarks" / "data" / "audit_battery"
CODE_CLEAN = ROOT / "benchmarks" / "data" / "real_exposure" / "code_clean"
LICENCES = Path("/usr/share/common-licenses")
STAGE = ROOT / "runs" / "real_exposure"
PASSAGE_WORDS = 64
PASSAGES = 3  # passages a document (the audit's passages_per_document rule, capped here)
RUN_WORDS = 7  # the overlap check: no clean document may share a run of this many words with the suspects' source
LOGIT_METHODS = ("loss", "zlib", "min_k_pp", "reference", "topk_loss", "topk_reference")
# scored together: loss/zlib/min_k_pp read one forward pass; the others are timed on their own
METHOD_GROUPS = (("loss", "zlib", "min_k_pp"), ("reference",), ("topk_loss",), ("topk_reference",))
DEFAULT = "default"  # the row of what `copyprobe audit --method auto` would say (default_report)
# what audit --method auto runs prefix probing with (copyprobe.audit.AUTO_PARAMS)
SCORE_PARAMS = {"prefix_probe": {"similarity": "rouge_l"}}
WITNESS = "+witness"  # a calibrated score as an audit runs it (topk_reference+witness); its plain row: the score alone

# (book, chapter, why it is famous): the first ~200 words (whole verses) of each
KJV_CHAPTERS = (
    ("Ge", 1, "the creation"), ("Ex", 20, "the ten commandments"), ("Ru", 1, "whither thou goest"),
    ("1Sa", 17, "David and Goliath"), ("Ec", 3, "a time to every purpose"), ("Isa", 53, "the suffering servant"),
    ("Mt", 5, "the sermon on the mount"), ("Lk", 2, "the nativity"), ("Jn", 1, "in the beginning was the Word"),
    ("1Co", 13, "faith, hope and charity"),
)
KJV_WORDS = 200
LICENCE_FILES = ("Apache-2.0", "Artistic", "BSD", "CC0-1.0", "GFDL-1.3", "GPL-2", "GPL-3", "LGPL-2.1", "MPL-1.1",
                 "MPL-2.0")
# standard-library modules, all in Python 2.7's library (2010) and in CPython's Lib/ since
STDLIB_MODULES = ("bisect", "colorsys", "fnmatch", "glob", "shlex", "textwrap", "sched", "getopt", "cmd", "calendar")
# held out (2026-12-01): other chapters and modules, chosen after the witness's level (0.05) and
# shares of alpha (a fifth for the calibrated score) were set on the kinds above, to test those
# choices on documents they were not chosen on; audited against the same clean documents
KJV_HELDOUT_CHAPTERS = (
    ("Ge", 3, "the fall"), ("Ex", 14, "the Red Sea"), ("Ps", 91, "he that dwelleth in the secret place"),
    ("Pr", 31, "a virtuous woman"), ("Da", 6, "the lions' den"), ("Mt", 6, "the Lord's prayer"),
    ("Lk", 15, "the prodigal son"), ("Jn", 3, "for God so loved the world"), ("Ro", 8, "more than conquerors"),
    ("Re", 21, "a new heaven and a new earth"),
)
STDLIB_HELDOUT_MODULES = ("heapq", "base64", "pprint", "netrc", "mimetypes", "quopri", "filecmp", "linecache",
                          "codeop", "shelve")
MAIN_KINDS = ("kjv", "licence", "code")  # what the shipped table (real_exposure.json) is made of

KINDS: dict[str, dict[str, str]] = {
    "kjv": {
        "short": "King James chapters",
        "what": "King James Bible: ten well-known chapters, the first ~200 words of each",
        "why": ("the KJV (1611) is public domain and copied across the web, Project Gutenberg, Wikisource and "
                "countless sites: every web-crawl pretraining corpus holds it many times over"),
        "source": "Debian bible-kjv (`bible -f`), benchmarks/kjv_books.py",
        "clean": "benchmarks/data/audit_battery/archaic: the 18 of 24 King James pastiches written for copyprobe on "
                 "2026-11-25 (CC0) that share no 7-word run with the KJV",
    },
    "licence": {
        "short": "licence texts",
        "what": "licence texts Debian ships in /usr/share/common-licenses (base-files): " + ", ".join(LICENCE_FILES),
        "why": ("copied verbatim into millions of source repositories (LICENSE/COPYING files) and web pages: every "
                "web and code corpus holds each of them thousands of times"),
        "source": "/usr/share/common-licenses",
        "clean": "benchmarks/data/audit_battery/legal: 24 legal and technical documents written for copyprobe on "
                 "2026-11-25 (CC0)",
    },
    "code": {
        "short": "standard-library modules",
        "what": "Python 3.11 standard-library modules: " + ", ".join(STDLIB_MODULES),
        "why": ("each is in Python 2.7's standard library (2010) and in CPython's Lib/ ever since: in every public "
                "code corpus (The Stack, GitHub crawls), CPython itself and its many vendored copies"),
        "source": "this machine's Python 3.11 Lib/",
        "clean": "benchmarks/data/real_exposure/code_clean: 17 modules written for copyprobe on 2026-11-27 (CC0), "
                 "after every bundled model's training data ends",
    },
}
KINDS["kjv_heldout"] = {**KINDS["kjv"], "short": "King James chapters (held out)",
                        "what": "King James Bible: ten other well-known chapters, the first ~200 words of each (held "
                                "out from the witness's choices)"}
KINDS["code_heldout"] = {**KINDS["code"], "short": "standard-library modules (held out)",
                         "what": "Python 3.11 standard-library modules (held out from the witness's choices): "
                                 + ", ".join(STDLIB_HELDOUT_MODULES)}


# ---------------------------------------------------------------- documents


def kjv_suspects(stage: Path, chapters: Iterable[tuple[str, int, str]] = KJV_CHAPTERS) -> dict[str, str]:
    """Write each chapter's first ~KJV_WORDS words (whole verses) to stage/<book>-<chapter>.txt."""
    from kjv_books import verses, write_document

    out = {}
    for book, chapter, _ in chapters:
        path = stage / f"{book}-{chapter:03d}.txt"
        write_document(path, verses(book, chapter, chapter)[chapter], max_words=KJV_WORDS)
        out[path.stem] = str(path)
    return out


def licence_suspects(stage: Path) -> dict[str, str]:
    out = {}
    for name in LICENCE_FILES:
        path = stage / f"{name}.txt"
        shutil.copyfile(LICENCES / name, path)
        out[name] = str(path)
    return out


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def code_suspects(stage: Path, modules: Iterable[str] = STDLIB_MODULES) -> dict[str, str]:
    out = {}
    for name in modules:
        path = stage / f"{name}.txt"  # as .txt (lines joined as prose), as the table was measured; bench_code_lines.py reads the .py as written
        shutil.copyfile(stdlib_dir() / f"{name}.py", path)
        out[name] = str(path)
    return out


def clean_sources(kind: str) -> list[Path]:
    kind = kind.removesuffix("_heldout")  # a held-out kind's suspects meet the same clean documents
    if kind == "kjv":
        return sorted((BATTERY / "archaic").glob("*.txt"))
    if kind == "licence":
        return sorted((BATTERY / "legal").glob("*.txt"))
    return sorted(CODE_CLEAN.glob("*.py"))


def clean_documents(kind: str, check: Mapping[str, Any] | None = None) -> list[Path]:
    """The kind's clean documents that share no RUN_WORDS-word run with the suspects' source
    (``check``: :func:`overlap_check`'s result, computed when not given); the others are left
    out (six King James pastiches share stock phrases such as "and it came to pass in the")."""
    sharing = (check or overlap_check([kind]))[kind]["sharing"]
    return [p for p in clean_sources(kind) if p.name not in sharing]


def stage_kind(kind: str, stage: Path = STAGE, check: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """Write the kind's suspect and clean documents as .txt files; (suspect dir, clean dir)."""
    suspect_dir, clean_dir = stage / kind / "suspect", stage / kind / "clean"
    for d in (suspect_dir, clean_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    {"kjv": kjv_suspects, "licence": licence_suspects, "code": code_suspects,
     "kjv_heldout": lambda d: kjv_suspects(d, KJV_HELDOUT_CHAPTERS),
     "code_heldout": lambda d: code_suspects(d, STDLIB_HELDOUT_MODULES)}[kind](suspect_dir)
    for src in clean_documents(kind, check):
        shutil.copyfile(src, clean_dir / f"{src.stem}.txt")
    return suspect_dir, clean_dir


def load_passages(kinds: Iterable[str] = MAIN_KINDS, stage: Path = STAGE,
                  check: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every document's audited passages: id, doc_id, kind, side, text (ids ``kind:side:doc:NNNN``)."""
    import copyprobe
    from copyprobe.evaluation.verdicts import passages_to_read

    out = []
    for kind in kinds:
        suspect_dir, clean_dir = stage_kind(kind, stage, check)
        for side, folder in (("suspect", suspect_dir), ("clean", clean_dir)):
            examples = copyprobe.load_dataset(str(folder), passage_words=PASSAGE_WORDS).examples
            by_doc: dict[str, list] = {}
            for e in examples:
                by_doc.setdefault(e.doc_id, []).append(e)
            keep = passages_to_read({d: len(ps) for d, ps in by_doc.items()}, PASSAGES)
            for doc, ps in by_doc.items():
                if len(ps) < PASSAGES:
                    raise SystemExit(f"{kind} {side} document {doc} has {len(ps)} passages, {PASSAGES} needed")
                for j in keep[doc]:
                    out.append({"id": f"{kind}:{side}:{ps[j].id}", "doc_id": f"{kind}:{side}:{doc}", "kind": kind,
                                "side": side, "text": ps[j].text})
    return out


# ---------------------------------------------------------------- the 7-word check

_NON_WORD = re.compile(r"[^\w\s]")


def words(text: str) -> list[str]:
    """Lowercased words with punctuation stripped (underscores count as punctuation)."""
    return _NON_WORD.sub(" ", text.lower()).replace("_", " ").split()


def runs(text: str, n: int = RUN_WORDS) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def shared_runs(text: str, source: str | set, n: int = RUN_WORDS) -> set[tuple[str, ...]]:
    """The n-word runs ``text`` shares with ``source`` (a text, or its runs already)."""
    other = source if isinstance(source, set) else runs(source, n)
    return runs(text, n) & other


def source_text(kind: str) -> str:
    """The whole source the suspects come from: the KJV, every licence used, every module used."""
    import shutil
    import subprocess

    if kind in ("kjv", "kjv_heldout"):  # the whole KJV either way
        if shutil.which("bible") is None:
            raise SystemExit("the `bible` command is missing: apt-get install bible-kjv")
        return subprocess.run(["bible", "-f", "Ge1:1-Re22:999"], capture_output=True, text=True, check=True).stdout
    if kind == "licence":
        return "\n".join((LICENCES / n).read_text(encoding="utf-8", errors="replace") for n in LICENCE_FILES)
    modules = STDLIB_HELDOUT_MODULES if kind == "code_heldout" else STDLIB_MODULES
    return "\n".join((stdlib_dir() / f"{n}.py").read_text(encoding="utf-8") for n in modules)


def overlap_check(kinds: Iterable[str] = MAIN_KINDS) -> dict[str, Any]:
    """Per kind: how many clean documents share a RUN_WORDS-word run with the suspects' source."""
    out = {}
    for kind in kinds:
        source = source_text(kind)
        source_runs = runs(source)
        found = {}
        for path in clean_sources(kind):
            shared = shared_runs(path.read_text(encoding="utf-8"), source_runs)
            if shared:
                found[path.name] = sorted(" ".join(r) for r in shared)
        out[kind] = {"source": KINDS[kind]["source"], "source_words": len(words(source)),
                     "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
                     "clean_documents": len(clean_sources(kind)), "sharing": found}
    return out


# ---------------------------------------------------------------- scoring


def score(args) -> dict[str, Any]:
    import copyprobe
    from copyprobe.backends.specs import default_reference

    check = overlap_check(args.kinds)
    passages = load_passages(args.kinds, check=check)
    examples = [copyprobe.Example(id=p["id"], text=p["text"], doc_id=p["doc_id"]) for p in passages]
    methods = list(args.methods)
    params = {m: SCORE_PARAMS[m] for m in methods if m in SCORE_PARAMS}
    rows: dict[str, dict[str, Any]] = {p["id"]: {"id": p["id"]} for p in passages}
    timings: dict[str, float] = {}
    earlier = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else None
    if earlier and earlier["model"] == args.model and [p["id"] for p in earlier["passages"]] == list(rows):
        # methods already in --out are kept with their timings, not rescored: a run adds methods
        kept = list(earlier["methods"])
        for p in earlier["passages"]:
            row = rows[p["id"]]
            row.update({m: p.get(m) for m in kept})
            if p.get("details"):
                row["details"] = {m: v for m, v in p["details"].items() if m in kept}
        timings.update(earlier["score_s"])
        params.update(earlier.get("params") or {})
        methods = kept + [m for m in methods if m not in kept]
        todo = [m for m in methods if m not in kept]
    else:
        todo = list(methods)
    groups = [g for g in METHOD_GROUPS if set(g) & set(todo)] + [(m,) for m in todo
                                                                  if not any(m in g for g in METHOD_GROUPS)]
    with copyprobe.Session(args.model, batch_size=args.batch_size, cache=args.cache) as session:
        for group in groups:
            chosen = [m for m in group if m in todo]
            started = time.perf_counter()
            result = copyprobe.detect(session, examples, chosen, params={m: params[m] for m in chosen if m in params},
                                      blind_baseline=False, n_bootstrap=0)
            timings[",".join(chosen)] = round(time.perf_counter() - started, 1)
            print(f"{args.model}: {','.join(chosen)} in {timings[','.join(chosen)]} s", flush=True)
            for r in result.rows:
                row = rows[r["id"]]
                for m in chosen:
                    row[m] = r.get(m)
                details = r.get("details") or {}
                for m in chosen:
                    if m in details:
                        row.setdefault("details", {})[m] = details[m]
            for m in chosen:
                if m in ("reference", "topk_reference"):
                    params[m] = {"model": f"auto ({default_reference(args.model.removeprefix('llamacpp:'))})"}
    failures = {m: sum(1 for r in rows.values() if r.get(m) is None) for m in methods}
    by_method = {m: t for group, t in timings.items() for m in group.split(",")}
    return {"model": args.model, "methods": methods, "params": params, "passage_words": PASSAGE_WORDS,
            "passages_per_document": PASSAGES, "kinds": {k: KINDS[k] for k in args.kinds},
            "score_s": timings, "score_s_by_method": by_method, "failed_scores": failures,
            "overlap_check": {k: {"clean_left_out": sorted(v["sharing"]), "source_words": v["source_words"],
                                  "source_sha256": v["source_sha256"]} for k, v in check.items()}, "command": ["python", *sys.argv],
            "passages": [{**p, **{k: v for k, v in rows[p["id"]].items() if k != "id"}} for p in passages]}


# ---------------------------------------------------------------- audits and the table


def audit_settings() -> dict[str, Any]:
    from copyprobe.audit import SETTINGS

    return {name: SETTINGS.default(name) for name in ("test", "alpha", "guard_test")}


def audit_rows(passages: list[dict], suspects: list[str], clean: list[str]) -> list[dict]:
    """The passages of one audit, labelled and with ``suspect:``/``clean:`` document ids, as
    `copyprobe audit` gives them to its verdicts."""
    by_doc: dict[str, list[dict]] = {}
    for p in passages:
        by_doc.setdefault(p["doc_id"], []).append(p)
    out = []
    for label, docs in ((1, suspects), (0, clean)):
        for d in docs:
            for p in by_doc[d]:
                out.append({**p, "label": label, "doc_id": f"{'suspect' if label else 'clean'}:{d}"})
    return out


def default_report(rows: list[dict], texts: Mapping[str, str], kind_settings: Mapping[str, Any]) -> dict[str, Any]:
    """What `copyprobe audit` (method auto, a model with log-probs) says on one audit: the
    calibrated score with its reference model asked as a witness (a suspect the reference
    recognises is tested on the target's own likelihood; copyprobe.evaluation.witness). The
    rows carry every scored column; the two halves come from ``loss`` and ``reference``
    (the reference model's own mean log-likelihood is loss - reference)."""
    from copyprobe.audit import DEFAULT_LOGIT_METHOD

    return witnessed(rows, texts, DEFAULT_LOGIT_METHOD, kind_settings)


def witnessed(rows: list[dict], texts: Mapping[str, str], method: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A calibrated method's verdicts as an audit gives them: with the witness."""
    from copyprobe.evaluation.verdicts import audit_verdicts
    from copyprobe.evaluation.witness import with_halves

    return audit_verdicts(with_halves(rows, method), method, {}, settings["alpha"], texts, test=settings["test"],
                          guard_test=settings["guard_test"])


def one_audit(passages: list[dict], method: str, suspects: list[str], clean: list[str],
              settings: Mapping[str, Any]) -> dict[str, Any]:
    from copyprobe.evaluation.verdicts import audit_verdicts

    rows = audit_rows(passages, suspects, clean)
    texts = {r["id"]: r["text"] for r in rows}
    if method == DEFAULT:
        return default_report(rows, texts, settings)
    if method.endswith(WITNESS):
        return witnessed(rows, texts, method[:-len(WITNESS)], settings)
    # a calibrated score's own row: the score alone, as before the witness
    return audit_verdicts(rows, method, {}, settings["alpha"], texts, test=settings["test"],
                          guard_test=settings["guard_test"], use_witness=False)


def kind_row(passages: list[dict], kind: str, method: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the table: a method on one text kind of one model's scores."""
    from bench_audit_validity import new_counts, tally

    mine = [p for p in passages if p["kind"] == kind]
    suspects = sorted({p["doc_id"] for p in mine if p["side"] == "suspect"})
    clean = sorted({p["doc_id"] for p in mine if p["side"] == "clean"})
    alpha = settings["alpha"]
    found, ranks = new_counts(), []
    for s in suspects:
        report = one_audit(mine, method, [s], clean, settings)
        tally(found, report, alpha)
        doc = report["documents"][0]
        if doc.get("rank") is not None:
            ranks.append(doc["rank"])
    false = new_counts()
    for c in clean:
        tally(false, one_audit(mine, method, [c], [d for d in clean if d != c], settings), alpha)
    collection = one_audit(mine, method, suspects, clean, settings).get("collection") or {}
    return {"kind": kind, "method": method, "n_suspect": len(suspects), "n_clean": len(clean),
            "found": found["evidence"], "found_unguarded": found["unguarded_claims"],
            "found_cannot_tell": found["cannot tell"],
            "ranks": ranks, "median_rank": statistics.median(ranks) if ranks else None,
            "ranked_first": sum(r == 1 for r in ranks), "of": len(clean) + 1,
            "false_claims": false["evidence"], "false_unguarded": false["unguarded_claims"],
            "false_cannot_tell": false["cannot tell"],
            "collection": collection.get("verdict"), "collection_p": collection.get("p"),
            "collection_tested": collection.get("n_tested")}


def blind_auc(passages: list[dict], kind: str) -> float | None:
    """The model-free classifier's AUC, suspect vs clean passages of the kind, folds by document."""
    from copyprobe.evaluation.blind import blind_baseline

    mine = [p for p in passages if p["kind"] == kind]
    result = blind_baseline([p["text"] for p in mine], [int(p["side"] == "suspect") for p in mine],
                            groups=[p["doc_id"] for p in mine], seed=0, n_bootstrap=200)
    return None if result["auc"] is None else round(float(result["auc"]), 3)


def columns(result: Mapping[str, Any]) -> list[str]:
    """The methods scored without failure everywhere, and the default row when it can be computed."""
    from copyprobe.audit import DEFAULT_LOGIT_METHOD

    from copyprobe.evaluation.witness import CALIBRATED

    scored = [m for m in result["methods"] if result["failed_scores"].get(m, 0) < len(result["passages"])]
    # a calibrated score other than the default's, as an audit runs it (with its raw half scored)
    witnessed = [m + WITNESS for m in scored if m in CALIBRATED and m != DEFAULT_LOGIT_METHOD
                 and CALIBRATED[m] in scored]
    return ([DEFAULT] if DEFAULT_LOGIT_METHOD in scored and "loss" in scored else []) + scored + witnessed


def try_witness(level: float | None, calibrated_share: float | None) -> None:
    """Set the witness's level and the calibrated score's share of alpha for this process's
    tallies: a trial of another choice than copyprobe ships (never written to a shipped file)."""
    from copyprobe.evaluation import witness

    if level is not None:
        if not 0 < level < 1:
            raise SystemExit(f"--witness-level must be between 0 and 1, got {level}")
        witness.LEVEL = level
    if calibrated_share is not None:
        if not 0 < calibrated_share < 1:
            raise SystemExit(f"--calibrated-share must be between 0 and 1, got {calibrated_share}")
        witness.WITNESS_FACTORS.update(calibrated=1 / calibrated_share, own=1 / (1 - calibrated_share))


def tally_results(results: list[dict[str, Any]], settings: Mapping[str, Any] | None = None,
                  only: Iterable[str] | None = None) -> dict[str, Any]:
    settings = dict(settings or audit_settings())
    rows, blind = [], {}
    for result in results:
        for kind in result["kinds"]:
            if kind not in blind:
                blind[kind] = blind_auc(result["passages"], kind)
            for method in columns(result):
                if only is not None and method not in only:
                    continue
                rows.append({"model": result["model"], **kind_row(result["passages"], kind, method, settings),
                             "blind_auc": blind[kind]})
    return {"settings": settings, "blind_auc": blind, "rows": rows}


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def render(table: Mapping[str, Any]) -> str:
    s = table["settings"]
    lines = [f"Audits at the defaults: {s['test']} test, alpha {s['alpha']}, guard {s['guard_test']}. "
             "found: suspect documents with `evidence`, each audited alone against all clean documents of its kind "
             "(in brackets: p <= alpha by the test alone, without the guard); rank: the suspects' median rank among "
             "the clean documents (1 = above all) and how many ranked first; false claims: `evidence` on a clean "
             "document audited against the other clean ones (without the guard in brackets); collection: all "
             "suspects against all clean documents (p; how many suspects the group test kept: those the style guard "
             "finds unlike the clean documents by the text alone are left out of the group); blind AUC: the model-free classifier on the same passages.", "",
             "| model | kind | method | found (no guard) | median rank (first) | false claims (no guard) | "
             "collection (p) | blind AUC |", "|---|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        lines.append(
            f"| {r['model']} | {r['kind']} | {r['method']} | {r['found']}/{r['n_suspect']} ({r['found_unguarded']}) | "
            f"{r['median_rank']:g} of {r['of']} ({r['ranked_first']}) | "
            f"{r['false_claims']}/{r['n_clean']} ({r['false_unguarded']}) | {r['collection']} ({_p(r['collection_p'])}, "
            f"{r['collection_tested'] or 0} in group) "
            f"| {r['blind_auc']} |" if r["median_rank"] is not None else
            f"| {r['model']} | {r['kind']} | {r['method']} | {r['found']}/{r['n_suspect']} | - | "
            f"{r['false_claims']}/{r['n_clean']} | {r['collection']} | {r['blind_auc']} |")
    return "\n".join(lines)


def summary(table: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What copyprobe/evaluation/real_exposure.json holds: per method, one entry per model and kind."""
    from copyprobe.audit import DEFAULT_LOGIT_METHOD
    from copyprobe.evaluation.witness import CALIBRATED

    def audited_as(row_method: str) -> str:
        """The method an audit quoting the row runs: the default row is `reference` (with its
        witness, as every audit runs it), a calibrated score's own row is that score without it."""
        if row_method == DEFAULT:
            return DEFAULT_LOGIT_METHOD
        if row_method.endswith(WITNESS):
            return row_method[:-len(WITNESS)]
        return f"{row_method}[no witness]" if row_method in CALIBRATED else row_method

    methods: dict[str, list[dict]] = {}
    for r in table["rows"]:
        methods.setdefault(audited_as(r["method"]), []).append({
            "params": SCORE_PARAMS.get(r["method"], {}), "model": r["model"], "kind": r["kind"], "found": r["found"], "of": r["n_suspect"],
            "found_unguarded": r["found_unguarded"], "ranked_first": r["ranked_first"],
            "false_claims": r["false_claims"], "of_clean": r["n_clean"],
            "collection": r["collection"], "collection_p": None if r["collection_p"] is None
            else float(f"{r['collection_p']:.3g}"), "blind_auc": r["blind_auc"]})
    return {"source": source, "audit": dict(table["settings"]),
            "kinds": {k: {"short": v["short"], "what": v["what"], "why": v["why"], "clean": v["clean"]}
                      for k, v in KINDS.items() if any(r["kind"] == k for r in table["rows"])},
            "methods": dict(sorted(methods.items()))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    check = sub.add_parser("check", help="the 7-word overlap check and the passages each kind gives (no model)")
    check.add_argument("--out", help="write the check's result as JSON")
    check.add_argument("--kinds", default=",".join(MAIN_KINDS), type=lambda s: [x for x in s.split(",") if x])
    p = sub.add_parser("score", help="score every passage with one model (through the response cache)")
    p.add_argument("--model", required=True)
    p.add_argument("--methods", default=",".join(LOGIT_METHODS), type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--kinds", default=",".join(MAIN_KINDS), type=lambda s: [x for x in s.split(",") if x],
                   help=f"text kinds to score (default {','.join(MAIN_KINDS)}; also: "
                        f"{', '.join(k for k in KINDS if k not in MAIN_KINDS)})")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--cache", default="runs/real.sqlite")
    p.add_argument("--out", required=True)
    t = sub.add_parser("table", help="the markdown table from saved scores (no model)")
    t.add_argument("scores", nargs="+")
    t.add_argument("--json", help="also write the tallied rows as JSON")
    t.add_argument("--methods", type=lambda s: [x for x in s.split(",") if x],
                   help="only these rows (e.g. default,loss), to try a choice quickly")
    # the witness's choices, set here to see what another would give (copyprobe ships one of each)
    t.add_argument("--witness-level", type=float, help="the reference's recognition level (shipped: witness.LEVEL)")
    t.add_argument("--calibrated-share", type=float,
                   help="the calibrated score's share of alpha (shipped: witness.CALIBRATED_SHARE)")
    s = sub.add_parser("summary", help="copyprobe/evaluation/real_exposure.json from saved scores")
    s.add_argument("scores", nargs="+", help="score files, or one table written by table --json")
    s.add_argument("--source", default="benchmarks/results/audit_real.md")
    s.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.part == "check":
        unknown = [k for k in args.kinds if k not in KINDS]
        if unknown:
            raise SystemExit(f"unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)}")
        result = overlap_check(args.kinds)
        passages = load_passages(args.kinds, check=result)
        for kind, r in result.items():
            docs = {p["doc_id"] for p in passages if p["kind"] == kind}
            print(f"{kind}: {sum(d.split(':')[1] == 'suspect' for d in docs)} suspect and "
                  f"{sum(d.split(':')[1] == 'clean' for d in docs)} clean documents, "
                  f"{sum(p['kind'] == kind for p in passages)} passages; {len(r['sharing'])} of "
                  f"{r['clean_documents']} clean documents share a {RUN_WORDS}-word run with {r['source']} "
                  f"({r['source_words']:,} words), left out" + "".join(f"\n  {d}: {runs_}"
                                                                       for d, runs_ in r["sharing"].items()))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        return 0
    if args.part == "score":
        unknown = [k for k in args.kinds if k not in KINDS]
        if unknown:
            raise SystemExit(f"unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)}")
        result = score(args)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps({"score_s": result["score_s"], "failed": result["failed_scores"]}))
        return 0
    if args.part == "table":
        try_witness(args.witness_level, args.calibrated_share)
    results = [json.loads(Path(f).read_text()) for f in args.scores]
    # a table already tallied (table --json) is read as it is
    tallied = len(results) == 1 and "rows" in results[0]
    if tallied and args.part == "table" and (args.methods or args.witness_level or args.calibrated_share):
        raise SystemExit(f"{args.scores[0]} is a tallied table: --methods, --witness-level and --calibrated-share "
                         "need the score files it was tallied from")
    table = results[0] if tallied else tally_results(results, only=getattr(args, "methods", None))
    if args.part == "table":
        print(render(table))
        if args.json:
            Path(args.json).write_text(json.dumps(table, indent=1) + "\n")
        return 0
    Path(args.out).write_text(json.dumps(summary(table, args.source), indent=1) + "\n")
    print(f"{args.out}: {len(table['rows'])} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
