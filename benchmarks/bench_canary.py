#!/usr/bin/env python
"""Canary benchmark (issues 16 and 27): planted canaries at repetition 1 and 3 (issue 16
ran 1, 10, 100), in documents **reformatted as a publisher would** before training (re-wrapped
at 60 columns with words hyphenated at line ends, curly quotes, dashes, ligatures), tested
after 1 and 3 epochs, next to a plain membership score on the same documents; and the null
(``--stage null``): p-values of >= 1,000 kits a real model never saw, uniform by KS.

1. ``make``: ``--docs-per-level`` base documents per repetition level (by default the
   one_voice letters, ~300 words, written for copyprobe and so unseen by any model; or a
   JSONL such as WikiMIA), each marked by its own kit
   (``copyprobe canary make``: ``--n-candidates`` fictional-sentence candidates, one
   published, inserted ``r`` times; seed ``bench:<r>:<i>``, so the kits are reproducible),
   then published as re-wrapped print text, an HTML page or an EPUB book (by document
   index), the last two read back through copyprobe's book reader: the training text.
2. ``plant``: ``copyprobe plant`` on the directory of marked documents, split by document
   (half members); the split seed is the smallest one that makes half the documents of
   every level members, so each level has member documents (canaries trained on) and
   non-member documents (canaries never seen: a check of the null). One 3-epoch run with
   ``--save-epochs`` gives the 1-epoch model too.
3. ``test``: for each epoch model, ``canary test`` of every kit with each ``--methods``
   (one Session; ``reference`` compares with the un-tuned base model), and ``detect
   --methods loss`` on the plant's passages (the plain membership score: passage loss
   AUC and document mean loss, members vs non-members of the same level).
4. Writes ``--results``/canary.json and canary.md. Each stage reuses what an earlier call
   finished, so the stages can run as separate commands under ``flock``.
5. ``null``: ``--null-kits`` kits (``--null-candidates`` grammatical candidates each, seeds
   ``null:<i>``) scored with ``--null-method`` on the un-tuned ``--null-model``, which never
   saw them; the published canary's rank must be uniform. Writes canary_null.json and
   canary_null.md (KS on the randomised p-values (rank - 1 + U) / n, which are exactly
   Uniform(0, 1) under the null; chi-square on the ranks; rejection rate at alpha with a
   binomial test). Scores are cached and the results rewritten after every chunk of kits,
   so an interrupted run resumes.

    python benchmarks/bench_canary.py --stage make
    python benchmarks/bench_canary.py --stage plant
    python benchmarks/bench_canary.py --stage test --epochs-to-test 1
    python benchmarks/bench_canary.py --stage null --null-kits 1000
    python benchmarks/bench_canary.py --stage null --null-kits 1000 --null-candidates 100 --null-model zlib
"""

from __future__ import annotations

import argparse
import json
import platform
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from copyprobe.files import atomic_write, read_json, utc_now, write_json  # noqa: E402  (after the path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stage", choices=("make", "plant", "test", "all", "null", "table"), default="all",
                   help="table: rewrite canary.md (or canary_null*.md with --null-model) from its json")
    p.add_argument("--base-docs", default=str(ROOT / "benchmarks" / "data" / "one_voice" / "letters"),
                   help="a directory of .txt documents (taken in name order; default: the one_voice letters, "
                        "written for copyprobe, CC0, so no model saw them), or a JSONL of documents, one per row")
    p.add_argument("--text-column", default="input")
    p.add_argument("--repeats", default="1,3")
    p.add_argument("--no-reformat", action="store_true",
                   help="train on the marked documents as written (default: reformatted as a publisher would)")
    p.add_argument("--docs-per-level", type=int, default=4)
    p.add_argument("--n-candidates", type=int, default=100)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--epochs-to-test", default="1,3")
    p.add_argument("--passage-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--methods", default="loss,reference")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--work-dir", default="/tmp/bench_canary")
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--null-kits", type=int, default=1000)
    p.add_argument("--null-candidates", type=int, default=10)
    p.add_argument("--null-model", default="smollm2-135m-instruct",
                   help="model spec, or 'zlib' for a model-free score (compressibility) that runs in seconds")
    p.add_argument("--null-method", default="loss")
    p.add_argument("--null-chunk", type=int, default=250,
                   help="kits scored per call of the scorer (sorted by length across the chunk: less padding)")
    p.add_argument("--null-batch-size", type=int, default=8)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (on a shared machine more threads than free cores make every matrix "
                        "product wait for the slowest thread)")
    p.add_argument("--null-dtype", default="float32", help="the model's dtype for the null (canary test's CPU default)")
    return p.parse_args(argv)


def publisher_format(text: str, width: int | None = 60) -> str:
    """The marked text as a publisher prints it: paragraphs re-wrapped at ``width`` columns
    with long words hyphenated at line ends (one line per paragraph when ``width`` is None),
    curly quotes, en/em dashes, fi/fl ligatures."""
    import re
    import textwrap

    def curly(par: str) -> str:
        par = re.sub(r'"(?=\w)', "\u201c", par).replace('"', "\u201d").replace("'", "\u2019")
        return par.replace(" -- ", "\u2014").replace("--", "\u2013")

    out = []
    for par in re.split(r"\n\s*\n", text.strip()):
        words, lines, line = curly(" ".join(par.split())).split(), [], ""
        for word in words:
            if line and width is not None and len(line) + 1 + len(word) > width:
                room = width - len(line) - 2
                if len(word) >= 8 and room >= 3 and word[:room].isalpha():
                    lines.append(f"{line} {word[:room]}-")  # hyphenated at the line end
                    word = word[room:]
                else:
                    lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
        out.append(textwrap.dedent("\n".join(lines)))
    return ("\n\n".join(out) + "\n").replace("fi", "\ufb01").replace("fl", "\ufb02")


RENDERINGS = ("text", "html", "epub")  # document i of a level is published as RENDERINGS[i % 3]


def _html(text: str) -> str:
    import html

    body = "".join(f"<p>{html.escape(par)}</p>\n" for par in text.split("\n\n") if par.strip())
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>Letters</title></head><body><h1>Letters</h1>\n{body}</body></html>\n")


EPUB_CONTAINER = ('<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                  'version="1.0"><rootfiles><rootfile full-path="OEBPS/book.opf" '
                  'media-type="application/oebps-package+xml"/></rootfiles></container>')
EPUB_PACKAGE = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
                '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
                '<spine><itemref idref="c1"/></spine></package>')


def render(marked: str, rendering: str, where: Path) -> str:
    """What a scraper reads from the published copy: the re-wrapped print text as it is, or
    an HTML page / EPUB book (one paragraph per line, typeset, under a heading) read back
    through copyprobe's book reader (:func:`copyprobe.data.books.read_book`)."""
    import zipfile

    from copyprobe.data.books import read_book

    if rendering == "text":
        return publisher_format(marked)
    page = _html(publisher_format(marked, width=None))
    if rendering == "html":
        path = where.with_suffix(".html")
        atomic_write(path, page)
    else:
        path = where.with_suffix(".epub")
        path.parent.mkdir(parents=True, exist_ok=True)
        members = {"mimetype": "application/epub+zip", "META-INF/container.xml": EPUB_CONTAINER,
                   "OEBPS/book.opf": EPUB_PACKAGE, "OEBPS/c1.xhtml": page}
        with zipfile.ZipFile(path, "w") as zf:
            for member, content in members.items():
                zf.writestr(member, content)
    return read_book(path) + "\n"


def base_texts(args) -> list[str]:
    src = Path(args.base_docs)
    if src.is_dir():
        return [f.read_text(encoding="utf-8") for f in sorted(src.glob("*.txt"))]
    return [json.loads(line)[args.text_column] for line in open(src, encoding="utf-8") if line.strip()]


def levels(args) -> list[int]:
    return [int(r) for r in args.repeats.split(",")]


def doc_names(args) -> list[tuple[int, str]]:
    return [(r, f"r{r:03d}-{i}") for r in levels(args) for i in range(args.docs_per_level)]


def stage_make(args, work: Path) -> None:
    from copyprobe.canary.find import find_in_text
    from copyprobe.canary.kit import MANIFEST, load_kit, make_kit

    texts = base_texts(args)
    names = doc_names(args)
    if len(texts) < len(names):
        raise SystemExit(f"{args.base_docs} has {len(texts)} documents; {len(names)} are needed")
    for (r, name), text in zip(names, texts):
        base = work / "base" / f"{name}.txt"
        atomic_write(base, text.strip() + "\n")
        kit_dir = work / "kits" / name
        if not (kit_dir / MANIFEST).exists():
            make_kit(base, kit_dir, n_candidates=args.n_candidates, style="sentences", repeat=r,
                     seed=f"bench:{r}:{name}", command=["benchmarks/bench_canary.py", "--stage", "make"],
                     bind_to_document=False)  # each seed names its document; the committed kits were drawn so
        marked = (kit_dir / "publish" / f"{name}.txt").read_text(encoding="utf-8")
        rendering = RENDERINGS[int(name.rsplit("-", 1)[1]) % len(RENDERINGS)]
        published = marked if args.no_reformat else render(marked, rendering, work / "published" / name)
        kit = load_kit(kit_dir)
        found = [h for h in find_in_text(published, kit.canaries) if h.published]
        if len(found) != r:  # canary find must see every copy in what the model will train on
            raise SystemExit(f"{name}: canary find sees {len(found)} of {r} copies in the {rendering} rendering")
        atomic_write(work / "corpus" / f"{name}.txt", published)
    print(f"made {len(names)} kits in {work / 'kits'}" + ("" if args.no_reformat else " (corpus reformatted)"))


def balanced_seed(args) -> int:
    """The smallest split seed that makes half of every level's documents members."""
    from copyprobe.plant.split import split_documents

    names = [n for _, n in doc_names(args)]
    ordered = sorted(names)  # plant reads a corpus directory in name order
    for seed in range(10000):
        members, _ = split_documents(ordered, 0.5, seed)
        chosen = {ordered[i] for i in members}
        if all(sum(f"r{r:03d}-{i}" in chosen for i in range(args.docs_per_level)) == args.docs_per_level // 2
               for r in levels(args)):
            return seed
    raise SystemExit("no balanced split seed below 10000")


def plant_dir(work: Path) -> Path:
    return work / "plant"


def stage_plant(args, work: Path) -> dict[str, Any]:
    from copyprobe.plant.finetune import PlantSettings, plant

    seed = balanced_seed(args)
    settings = PlantSettings(model=args.model, corpus=str(work / "corpus"), out=str(plant_dir(work)),
                             passage_tokens=args.passage_tokens, member_fraction=0.5, seed=seed,
                             epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, split_by="document",
                             save_epochs=args.epochs > 1, device=args.device, progress=False)
    record = plant(settings, command=["benchmarks/bench_canary.py", "--stage", "plant"])
    print(f"plant: seed {seed}, {record.get('steps')} steps, timings {record.get('timings')}")
    return record


def model_dir(work: Path, epoch: int, epochs: int) -> Path:
    return plant_dir(work) / ("model" if epoch == epochs else f"epochs/{epoch}")


def stage_test(args, work: Path, epoch: int) -> dict[str, Any]:
    from copyprobe.canary.kit import load_kit
    from copyprobe.canary.normalise import normalise, normalised_text
    from copyprobe.canary.scoring import canary_test
    from copyprobe.canary.stats import combine
    from copyprobe.detect import detect
    from copyprobe.evaluation.metrics import evaluate  # noqa: F401  (sklearn present)
    from copyprobe.session import Session
    from sklearn.metrics import roc_auc_score

    plant_record = read_json(plant_dir(work) / "plant.json", what="plant directory")
    data = [json.loads(line) for line in open(plant_dir(work) / "data.jsonl", encoding="utf-8")]
    member_docs = {row["doc_id"] for row in data if row["label"] == 1}
    spec = f"hf:{model_dir(work, epoch, args.epochs)}"
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    params = {"reference": {"model": args.model}}
    out: dict[str, Any] = {"epoch": epoch, "model": spec, "documents": [], "methods": methods}
    started = time.perf_counter()
    with Session(spec, cache=work / "cache.sqlite", device=args.device, dtype="float32") as session:
        # the plain membership score on the same documents
        det = detect(session, str(plant_dir(work) / "data.jsonl"), ["loss"], n_bootstrap=0,
                     blind_baseline=False, command=["bench_canary"])
        loss_by_id = {r["id"]: r.get("loss") for r in det.rows}
        for r, name in doc_names(args):
            kit = load_kit(work / "kits" / name)
            canary = kit.canaries[0]
            key = normalised_text(canary.text)  # copies in the reformatted passages
            passages = [row for row in data if row["doc_id"] == name]
            losses = [loss_by_id[p["id"]] for p in passages if loss_by_id.get(p["id"]) is not None]
            doc = {"doc": name, "repeat": r, "member": name in member_docs,
                   "rendering": "as written" if args.no_reformat else RENDERINGS[int(name.rsplit("-", 1)[1]) % 3],
                   "intact_copies": sum(len(normalise(p["text"]).find_all(key)) for p in passages),
                   "n_passages": len(passages), "mean_loss_score": sum(losses) / len(losses) if losses else None}
            for method in methods:
                res = canary_test(session, kit, method, params=params.get(method), alpha=args.alpha,
                                  command=["bench_canary"])
                c = res.canary["canaries"][0]
                doc[method] = {"rank": c["rank"], "p": c["p_value"], "n": c["n_candidates"]}
            out["documents"].append(doc)
            print(f"epoch {epoch} {name} member={doc['member']} " +
                  " ".join(f"{m}: rank {doc[m]['rank']}" for m in methods), flush=True)
    # per level: canaries of member docs combined exactly, the same for non-members (null check),
    # and the membership score: passage loss AUC members vs non-members of that level
    out["levels"] = []
    for r in levels(args):
        row: dict[str, Any] = {"repeat": r}
        docs = [d for d in out["documents"] if d["repeat"] == r]
        for kind, is_member in (("member", True), ("nonmember", False)):
            chosen = [d for d in docs if d["member"] == is_member]
            row[f"{kind}_docs"] = [d["doc"] for d in chosen]
            for method in methods:
                ranks = [d[method]["rank"] for d in chosen]
                sizes = [d[method]["n"] for d in chosen]
                row[f"{kind}_{method}_p"] = [d[method]["p"] for d in chosen]
                row[f"{kind}_{method}_combined_p"] = combine(ranks, sizes)["sum_of_ranks_p"] if chosen else None
        level_rows = [p for p in data if p["doc_id"] in {d["doc"] for d in docs}]
        labels = [p["label"] for p in level_rows if loss_by_id.get(p["id"]) is not None]
        scores = [loss_by_id[p["id"]] for p in level_rows if loss_by_id.get(p["id"]) is not None]
        row["loss_passage_auc"] = roc_auc_score(labels, scores) if len(set(labels)) == 2 else None
        row["n_passages"] = len(labels)
        out["levels"].append(row)
    out["loss_auc_all"] = (det.metrics or {}).get("loss", {}).get("auc") if det.metrics else None
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["plant"] = {k: plant_record.get(k) for k in ("split", "training", "steps", "n_train_tokens", "timings",
                                                     "losses_eval")}
    return out


def write_results(args, results_dir: Path, by_epoch: dict[str, Any], command: str) -> None:
    path = results_dir / "canary.json"
    previous = read_json(path, required=False) or {}
    runs = previous.get("runs", {})
    runs.update(by_epoch)
    commands = previous.get("commands", [])
    if not commands and "--stage test" in command:  # the stages before this one, with the same settings
        commands = [command.replace("--stage test", f"--stage {stage}") for stage in ("make", "plant")]
    if command not in commands:
        commands.append(command)
    payload = {"created": utc_now(), "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
               "commands": commands, "settings": {k: v for k, v in vars(args).items() if k != "stage"},
               "runs": runs}
    write_json(path, payload)
    atomic_write(results_dir / "canary.md", render_md(payload))
    print(f"wrote {path} and canary.md")


def _base_words(base_docs: str) -> str:
    if base_docs.rstrip("/").endswith("one_voice/letters"):
        return ("letters of `benchmarks/data/one_voice`, ~300 words each, written for copyprobe on 2026-11-25 "
                "(CC0), so no model saw them before")
    return f"`{base_docs}`"


def _p(p: Any) -> str:
    return "—" if p is None else f"{p:.3g}"


def render_md(payload: dict[str, Any]) -> str:
    s = payload["settings"]
    methods = [m.strip() for m in s["methods"].split(",")]
    lines = [
        "# Canary benchmark: planted canaries, exact p-values",
        "",
        f"Generated by `benchmarks/bench_canary.py` on {payload['created']} ({payload['machine']}). Commands, in order:",
        "",
        *[f"- `{c}`" for c in payload["commands"]],
        "",
        f"Setup: {s['docs_per_level']} documents per repetition level ({_base_words(s['base_docs'])}), "
        f"each marked by its own kit (`canary make --style sentences --n-candidates "
        f"{s['n_candidates']} --repeat r`), then "
        + ("trained on as written. " if s.get("no_reformat") else
           "**reformatted as a publisher would** before training: document i of a level is published as "
           "re-wrapped print text (i mod 3 = 0: 60 columns, words hyphenated at line ends, curly quotes, en/em "
           "dashes, fi/fl ligatures), an HTML page (1) or an EPUB book (2), both typeset the same way under a "
           "heading and read back through copyprobe's book reader (`copyprobe.data.books.read_book`), as a "
           "scraper would get them; `canary find` must see every copy in each, else the benchmark stops. "
           "`canary test` then uses the original kits (manifests) only. ")
        + f"`copyprobe plant` fine-tuned `{s['model']}` (full, AdamW lr {s['lr']}, "
        f"batch {s['batch_size']}, passages of {s['passage_tokens']} tokens) on half of the documents, split by "
        "document so that every level has as many member documents (canary trained on) as non-member ones "
        "(canary never seen). `canary test` ranks each published canary among its candidates; p = rank / n "
        f"(smallest possible p with {s['n_candidates']} candidates: {1 / s['n_candidates']:.3g}); the "
        "combined p is the exact sum-of-ranks test over the level's documents. `reference` = loss minus the "
        "un-tuned base model's loss. *intact copies*: whole copies of the published canary in the plant's "
        "passages of that document, i.e. what one epoch trains on: a copy cut across two passages is seen in two "
        "pieces (a canary on the boundary of two passages is never seen whole). Non-member documents' p-values are draws from the null: they "
        "should look uniform, and about 1 in 20 falls at or below 0.05 by chance.",
        "",
        "The plain membership score beside it: `loss` on the plant's passages of the same documents, as the "
        "passage ROC AUC of members vs non-members of that level. It ranks, but gives no p-value without a "
        "clean baseline from the same distribution, which is what canaries replace.",
        "",
    ]
    for key in sorted(payload["runs"], key=int):
        run = payload["runs"][key]
        lines += [f"## {key} epoch(s): `{run['model']}`", ""]
        header = ["repeat"]
        for m in methods:
            header += [f"{m}: member p (each)", f"{m}: member combined p", f"{m}: non-member p (each)"]
        header += ["loss passage AUC (membership score)"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in run["levels"]:
            cells = [str(row["repeat"])]
            for m in methods:
                cells += [", ".join(_p(p) for p in row[f"member_{m}_p"]), _p(row[f"member_{m}_combined_p"]),
                          ", ".join(_p(p) for p in row[f"nonmember_{m}_p"])]
            cells.append(_p(row["loss_passage_auc"]) + f" ({row['n_passages']} passages)")
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Per document:", "",
                  "| document | published as | repeat | member | intact copies | "
                  + " | ".join(f"{m} rank" for m in methods) + " |",
                  "|" + "---|" * (5 + len(methods))]
        for d in run["documents"]:
            lines.append(f"| {d['doc']} | {d.get('rendering', 'text')} | {d['repeat']} | "
                         f"{'yes' if d['member'] else 'no'} | {d['intact_copies']} | "
                         + " | ".join(f"{d[m]['rank']}/{d[m]['n']}" for m in methods) + " |")
        plant = run.get("plant") or {}
        lines += ["", f"Plant: {plant.get('steps')} steps, split {plant.get('split')}, "
                  f"timings {plant.get('timings')}; scoring {run['seconds']} s.", ""]
    missing = [e for e in payload["settings"]["epochs_to_test"].split(",") if e not in payload["runs"]]
    if missing:
        lines += [f"Missing: epoch setting(s) {', '.join(missing)} not run yet.", ""]
    return "\n".join(lines) + "\n"


NULL_DOC = ("The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed tied to the "
            "wall, and the nets hung drying above the slipway. Nobody expected the storm that came in February.\n")


def stage_null(args, results_dir: Path, command: str) -> dict[str, Any]:
    """Ranks of the published canary over ``--null-kits`` kits on a model that saw none."""
    from copyprobe.canary.kit import draw_kit, kit_from_manifest
    from copyprobe.canary.scoring import canary_summary, kit_examples
    from copyprobe.scoring import build_methods, score_examples
    from copyprobe.session import Session

    stem = "canary_null_zlib" if args.null_model == "zlib" else "canary_null"
    path = results_dir / f"{stem}.json"
    previous = read_json(path, required=False) or {}
    same = {k: previous.get("settings", {}).get(k) for k in ("model", "method", "n_candidates")} == {
        "model": args.null_model, "method": args.null_method, "n_candidates": args.null_candidates}
    ranks: list[int] = list(previous.get("ranks", [])) if same else []
    ties: list[int] = list(previous.get("ties", [0] * len(ranks))) if same else []
    methods = build_methods([args.null_method]) if args.null_model != "zlib" else []
    # wall and CPU time of this call apart: under contention (2 cores, 6 jobs) wall time
    # is several times the CPU time the scoring needs
    timing = {"first_kit": len(ranks), "threads": _threads(), "batch_size": args.null_batch_size,
              "dtype": args.null_dtype}
    calls = list(previous.get("calls", [])) if same else []
    started, cpu_started = time.perf_counter(), time.process_time()
    payload: dict[str, Any] | None = None
    if args.null_model == "zlib":  # a model-free text statistic: the guarantee holds for any score
        from contextlib import nullcontext

        context: Any = nullcontext(None)
    else:
        context = Session(args.null_model, cache=Path(args.work_dir) / "null_cache.sqlite", device=args.device,
                          batch_size=args.null_batch_size, dtype=args.null_dtype)
    with context as session:
        while len(ranks) < args.null_kits:
            first = len(ranks)
            chunk = range(first, min(args.null_kits, first + args.null_chunk))
            kits = [kit_from_manifest(draw_kit(NULL_DOC, "doc.txt", n_candidates=args.null_candidates,
                                               seed=f"null:{i}", bind_to_document=False)[1])  # as committed
                    for i in chunk]
            examples = [e for i, kit in zip(chunk, kits) for e in kit_examples(kit, prefix=f"k{i}:")]
            if session is None:
                rows = [{"id": e.id, args.null_method: zlib_score(e.text)} for e in examples]
            else:
                rows, _ = score_examples(examples, methods, session.backend_for)
            for i, kit in zip(chunk, kits):
                c = canary_summary(kit, rows, args.null_method, args.alpha, prefix=f"k{i}:")["canaries"][0]
                ranks.append(c["rank"])
                ties.append(c["n_ties"] + c["n_unscored"])
            call = {**timing, "kits": len(ranks) - timing["first_kit"],
                    "sentences": (len(ranks) - timing["first_kit"]) * args.null_candidates,
                    "wall_s": round(time.perf_counter() - started, 1),
                    "cpu_s": round(time.process_time() - cpu_started, 1)}
            payload = null_payload(args, ranks, command, time.perf_counter() - started + previous.get("seconds", 0),
                                   ties)
            payload["calls"] = calls + [call]
            write_json(path, payload)
            atomic_write(results_dir / f"{stem}.md", render_null_md(payload))
            print(f"null: {len(ranks)} kits, KS p = {payload['ks_p']:.3g}", flush=True)
    return payload if payload is not None else null_payload(args, ranks, command, previous.get("seconds", 0), ties)


def _threads() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def zlib_score(text: str) -> float:
    """Compressibility (higher = more redundant text): zlib-compressed bytes per byte, negated."""
    import zlib

    raw = text.encode("utf-8")
    return -len(zlib.compress(raw, 9)) / len(raw)


def null_payload(args, ranks: list[int], command: str, seconds: float,
                 ties: list[int] | None = None) -> dict[str, Any]:
    """Summary of the null ranks. The KS test uses the randomised p-value with ties broken
    at random, (rank - 1 - t + U (t + 1)) / n for t tied or unscored held-out candidates,
    which is exactly Uniform(0, 1) under the null; the reported p = rank / n counts ties
    against the published canary, so it can only be larger (conservative)."""
    import numpy as np
    from scipy import stats

    n = args.null_candidates
    r = np.asarray(ranks)
    t = np.asarray(ties if ties is not None else [0] * len(r))
    u = np.random.default_rng(0).random(len(r))
    randomised = (r - 1 - t + u * (t + 1)) / n
    pvals = r / n
    rejected = int((pvals <= args.alpha).sum())
    return {
        "created": utc_now(), "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores", "command": command,
        "settings": {"model": args.null_model, "method": args.null_method, "n_candidates": n,
                     "n_kits_target": args.null_kits, "alpha": args.alpha, "style": "sentences"},
        "n_kits": len(r), "ranks": [int(x) for x in r], "ties": [int(x) for x in t], "seconds": round(seconds, 1),
        "n_kits_with_ties": int((t > 0).sum()),
        "rank_counts": np.bincount(r - 1, minlength=n).tolist(),
        "ks_statistic": float(stats.kstest(randomised, "uniform").statistic),
        "ks_p": float(stats.kstest(randomised, "uniform").pvalue),
        "chisquare_p": float(stats.chisquare(np.bincount(r - 1, minlength=n)).pvalue),
        "rejected_at_alpha": rejected,
        "rejection_rate": rejected / len(r),
        "binomial_p_too_many": float(stats.binomtest(rejected, len(r), args.alpha, alternative="greater").pvalue),
        "mean_p": float(pvals.mean()),
    }


def render_null_md(payload: dict[str, Any]) -> str:
    s = payload["settings"]
    n = s["n_candidates"]
    lines = [
        "# Canary benchmark: p-values under the null",
        "",
        f"Generated by `benchmarks/bench_canary.py` on {payload['created']} ({payload['machine']}):",
        "",
        f"- `{payload['command']}`",
        "",
        f"{payload['n_kits']} kits (target {s['n_kits_target']}), each of {n} grammatical candidates "
        f"(`--style sentences`, seeds `null:<i>`), scored with `{s['method']}` on `{s['model']}`, which never saw "
        f"any of them{' (zlib: a model-free text statistic, compressed bytes per byte)' if s['model'] == 'zlib' else ''}. "
        f"Under the null the published canary's rank is uniform on 1..{n}, so p = rank / {n} has "
        f"P(p <= k/{n}) = k/{n} exactly. {payload['seconds']} s of scoring.",
        "",
        "| check | value |",
        "|---|---|",
        f"| KS test of the randomised p-value (ties broken at random) against Uniform(0, 1) | "
        f"D = {payload['ks_statistic']:.4f}, p = {payload['ks_p']:.3g} |",
        f"| kits with tied or unscored held-out candidates (counted against: p only larger) | "
        f"{payload.get('n_kits_with_ties', 0)} |",
        f"| chi-square test of the rank counts (ties counted against) | p = {payload['chisquare_p']:.3g} |",
        f"| rejections at alpha = {s['alpha']} | {payload['rejected_at_alpha']} of {payload['n_kits']} "
        f"({100 * payload['rejection_rate']:.1f}%; binomial p of too many = {payload['binomial_p_too_many']:.3g}) |",
        f"| mean p-value (uniform: {(n + 1) / (2 * n):.3f}) | {payload['mean_p']:.3f} |",
        "",
        *_calls_md(payload),
        "Rank counts (1 = the model found the published canary the most familiar):",
        "",
        "| rank | " + " | ".join(str(i + 1) for i in range(n)) + " |",
        "|" + "---|" * (n + 1),
        "| kits | " + " | ".join(str(c) for c in payload["rank_counts"]) + " |",
        "",
    ]
    return "\n".join(lines)


def _calls_md(payload: dict[str, Any]) -> list[str]:
    calls = payload.get("calls") or []
    if not calls:
        return []
    lines = ["Timing of the calls that scored kits (one model load and one Session per call; wall time includes "
             "waiting for a core on a shared machine, CPU time is what the scoring itself took):", "",
             "| kits | sentences | torch threads | batch | dtype | wall s | CPU s | CPU ms per sentence |",
             "|---|---|---|---|---|---|---|---|"]
    for c in calls:
        first = c["first_kit"]
        per = f"{1000 * c['cpu_s'] / c['sentences']:.0f}" if c["sentences"] else "—"
        lines.append(f"| {first}..{first + c['kits'] - 1} | {c['sentences']} | {c['threads']} | {c['batch_size']} | "
                     f"{c['dtype']} | {c['wall_s']} | {c['cpu_s']} | {per} |")
    return lines + [""]


READING = "\n## Reading"


def rewrite(path: Path, table: str) -> None:
    """A results page with new tables, keeping the hand-written reading at its end."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    atomic_write(path, table + (old[old.index(READING):] if READING in old else ""))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.work_dir)
    command = "python benchmarks/bench_canary.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.stage in ("plant", "test", "all", "null") and not (args.stage == "null" and args.null_model == "zlib"):
        import torch

        torch.set_num_threads(args.threads)
    if args.stage == "null":
        stage_null(args, Path(args.results), command)
        return 0
    if args.stage == "table":
        results = Path(args.results)
        rewrite(results / "canary.md", render_md(read_json(results / "canary.json", what="canary results")))
        for stem in ("canary_null", "canary_null_zlib"):
            if (results / f"{stem}.json").exists():
                rewrite(results / f"{stem}.md", render_null_md(read_json(results / f"{stem}.json")))
        return 0
    if args.stage in ("make", "all"):
        stage_make(args, work)
    if args.stage in ("plant", "all"):
        stage_plant(args, work)
    if args.stage in ("test", "all"):
        by_epoch = {}
        for epoch in [int(e) for e in args.epochs_to_test.split(",")]:
            by_epoch[str(epoch)] = stage_test(args, work, epoch)
        write_results(args, Path(args.results), by_epoch, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
