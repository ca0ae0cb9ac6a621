"""copyprobe canary make / canary test: canaries drawn before publication, tested with an
exact p-value (docs/canary.md). Thin: the work is in :mod:`copyprobe.canary`."""

from __future__ import annotations

import argparse
import sys

from copyprobe.cli._common import (
    add_model_options,
    add_run_options,
    add_settings,
    api_options,
    cache_setting,
    check_batch_size,
    parse_params,
    setting_values,
)
from copyprobe.progress import progress_bars
from copyprobe.params import Integer, option_type

HELP = "canary audits: mark a document before publishing it, later test a model with an exact p-value"
DESCRIPTION = (
    "`canary make` draws candidate canaries at random, inserts one chosen at random into a document "
    "and writes the marked document (publish it) and a private manifest (keep it secret). "
    "`canary test` later ranks the published canary among the held-out ones with any method; "
    "the rank gives an exact p-value that needs no clean baseline. "
    "`canary find` locates the canaries in copies of the document; `canary verify` shows the kit is the draw "
    "of its seed (nothing changed after the draw)."
)
MAKE_HELP = "draw canaries and write the marked document (to publish) and the private manifest"
TEST_HELP = "test a model with a kit: rank of the published canary, exact p-value, canary.json"
VERIFY_HELP = ("draw the kit again from its seed and the document as it was before marking: the candidates, the "
               "published one and the places must be the seed's (the checksum alone does not stop a deliberate edit)")
FIND_HELP = ("where the kit's canaries appear in copies of the document (txt, md, html, epub, ...), "
             "after normalising quotes, dashes, ligatures, case, hyphenation and line wrapping")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("canary", help=HELP, description=DESCRIPTION)
    actions = parser.add_subparsers(dest="canary_action", metavar="ACTION")
    make = actions.add_parser("make", help=MAKE_HELP, description=MAKE_HELP)
    add_make_arguments(make)
    make.set_defaults(func=run_make)
    test = actions.add_parser("test", help=TEST_HELP, description=TEST_HELP)
    add_test_arguments(test)
    test.set_defaults(func=run_test)
    find = actions.add_parser("find", help=FIND_HELP, description=FIND_HELP)
    find.add_argument("manifest", metavar="MANIFEST", help="kit directory, or its private/manifest.json")
    find.add_argument("files", metavar="FILE", nargs="+", help="files to search")
    find.add_argument("--context", type=option_type(Integer(0), "--context"), default=60,
                      help="characters of context either side (default 60)")
    find.add_argument("--json", action="store_true", help="one JSON object per occurrence instead of text")
    find.set_defaults(func=run_find)
    verify = actions.add_parser("verify", help=VERIFY_HELP, description=VERIFY_HELP)
    verify.add_argument("manifest", metavar="KIT", help="kit directory, or its private/manifest.json")
    verify.add_argument("--source", required=True, help="the document as it was before `canary make` marked it")
    verify.add_argument("--published", help="the marked document as it was made public: text, HTML, EPUB, PDF or DOCX, "
                        "compared with case, punctuation and layout set aside (default: the kit's copy, which "
                        "whoever holds the manifest can rewrite with it)")
    verify.set_defaults(func=run_verify)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def add_make_arguments(parser: argparse.ArgumentParser) -> None:
    from copyprobe.canary.kit import MAX_CANARIES, MAX_CANDIDATES, MAX_REPEAT, MAX_WORDS

    parser.add_argument("--doc", required=True, help="the document to mark (UTF-8 text)")
    parser.add_argument("--out", required=True, help="kit directory to write (must not hold a kit yet)")
    parser.add_argument("--n-candidates", type=option_type(Integer(2, MAX_CANDIDATES), "--n-candidates"), default=100,
                        help="candidates per canary, published one included (default 100: smallest p = 0.01)")
    parser.add_argument("--n-canaries", type=option_type(Integer(1, MAX_CANARIES), "--n-canaries"), default=1,
                        help="independent canaries in the document (default 1)")
    parser.add_argument("--style", choices=("sentences", "words", "trap"), default="sentences",
                        help="fictional sentences (default), random words, or trap sequences (Meeus et al. 2024)")
    parser.add_argument("--repeat", type=option_type(Integer(1, MAX_REPEAT), "--repeat"), default=None,
                        help="copies of each published canary in the document (default 1; 10 for trap)")
    parser.add_argument("--n-words", type=option_type(Integer(1, MAX_WORDS), "--n-words"), default=None,
                        help="words per words/trap candidate (default 12 / 25)")
    parser.add_argument("--seed", default=None,
                        help="seed of the random draws, for a reproducible kit (default: 32 bytes from the OS); "
                        "recorded only in the private manifest")


def add_test_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec (e.g. smollm2-135m-instruct, hf:DIR, openai:M@URL)")
    parser.add_argument("--kit", required=True, help="kit directory written by `copyprobe canary make`")
    from copyprobe.canary.scoring import SETTINGS

    parser.add_argument("--doc", help="check this copy of the published document instead of the kit's")
    add_settings(parser, SETTINGS)
    parser.add_argument("--param", action="append", metavar="METHOD.NAME=VALUE", help="method parameter, repeatable")
    add_run_options(parser)
    add_model_options(parser)


def run_make(args: argparse.Namespace) -> int:
    from copyprobe.canary.generate import weak_seed
    from copyprobe.canary.kit import MANIFEST, make_kit
    from copyprobe.errors import Interrupted

    try:
        kit = make_kit(args.doc, args.out, n_candidates=args.n_candidates, style=args.style, repeat=args.repeat,
                       seed=args.seed, n_canaries=args.n_canaries, n_words=args.n_words,
                       command=["copyprobe", *sys.argv[1:]])
    except KeyboardInterrupt:
        # a kit has no cache to resume from: the default words ("run again to resume") would mislead
        raise Interrupted(f"interrupted; no kit was made (anything written to {args.out} is incomplete: "
                          f"remove it before making a kit there)") from None
    copies = sum(len(c.positions) for c in kit.canaries)
    print(f"{len(kit.canaries)} canar{'y' if len(kit.canaries) == 1 else 'ies'} of {args.n_candidates} candidates "
          f"({kit.style}), {copies} cop{'y' if copies == 1 else 'ies'} inserted")
    for item in kit.manifest["canaries"]:
        for place in item.get("placements", []):
            print(f"  canary {item['index']} at offset {place['offset']}: ...{place['before']} "
                  f"[{item['candidates'][item['published']]}] {place['after']}...")
    print("check each place above before publishing (also in the private manifest, under placements)")
    print(f"PUBLISH this file (and only this one): {kit.document}")
    print(f"KEEP PRIVATE: {kit.dir / MANIFEST} — it names the held-out candidates and the seed; "
          "if it leaks, or the model is trained on it, the test is void")
    print(f"KEEP the document as it was before marking ({args.doc}), unchanged: `canary verify` draws the kit "
          "again from it and the seed, to show the kit was not changed after the draw")
    print(f"later: copyprobe canary test --model MODEL --kit {kit.dir} --out RUN_DIR")
    weak = weak_seed(args.seed)
    if weak:
        print(f"WARNING: the seed can be guessed ({weak}): anyone who reads the marked document can try seeds until "
              "one draws a candidate in it, and then knows which canary was published. Make the kit again with "
              "--seed hex:$(openssl rand -hex 32), or without --seed, before publishing", file=sys.stderr)
    return 0


def run_test(args: argparse.Namespace) -> int:
    from copyprobe.canary.scoring import SETTINGS, canary_test

    check_batch_size(args.batch_size)
    params = parse_params(args.param, [args.method], "--method")
    with progress_bars(not args.no_progress) as progress:
        result = canary_test(
            args.model, args.kit, params=params.get(args.method),
            document=args.doc, out=args.out, cache=cache_setting(args), batch_size=args.batch_size,
            device=args.device, dtype=args.dtype, progress=progress,
            command=["copyprobe", *sys.argv[1:]], api_options=api_options(args), **setting_values(args, SETTINGS),
        )
    summary = result.canary
    for c in summary["canaries"]:
        print(f"canary {c['index']}: rank {c['rank']} of {c['n_candidates']}, p = {c['p_value']:.4g}"
              + (f" ({c['n_ties']} ties, counted against)" if c["n_ties"] else "")
              + (f" ({c['n_unscored']} unscored candidates, counted against)" if c["n_unscored"] else ""))
    if len(summary["canaries"]) > 1:
        comb = summary["combined"]
        print(f"combined: sum of ranks {comb['sum_of_ranks']}, exact p = {comb['sum_of_ranks_p']:.4g} "
              f"(min-p test: {comb['min_p_p']:.4g})")
    print(summary["explanation"])
    print(f"verdict: {summary['verdict']} — {summary['reason']}")
    if args.report:
        from copyprobe.reports.html import write_report

        print(f"report written to {write_report(result.out)}")
    print(f"run written to {result.out}")
    from copyprobe.cli._common import scored_exit_code

    return scored_exit_code(result.rows, [args.method])  # the rule of a run that produced nothing


def run_find(args: argparse.Namespace) -> int:
    """Prints every occurrence; exit 0 when every published canary was found in some file, 1 when not."""
    import json

    from copyprobe.canary.find import find_canaries
    from copyprobe.canary.kit import read_manifest

    _, _, canaries = read_manifest(args.manifest)
    hits = find_canaries(args.manifest, args.files, context=args.context)
    for h in hits:
        if args.json:
            print(json.dumps(h.to_json(), ensure_ascii=False))
            continue
        what = "published canary" if h.published else "HELD-OUT candidate (the manifest leaked: the test is void)"
        print(f"{h.file}:{h.start}-{h.end}: {what} {h.canary}.{h.candidate}: {h.context}")
    missing = [c.index for c in canaries if not any(h.canary == c.index and h.published for h in hits)]
    if not args.json:
        for k in missing:
            print(f"published canary {k} not found in {', '.join(map(str, args.files))}")
    return 1 if missing else 0


def run_verify(args: argparse.Namespace) -> int:
    """Exit 0 when the kit is the draw of its seed, 1 when it differs."""
    from copyprobe.canary.kit import verify_kit
    from copyprobe.files import versions

    redraw = verify_kit(args.manifest, args.source, args.published)
    if not redraw.differences:
        copy = args.published or "the kit's copy of the published text (give --published to check the public one)"
        if redraw.as_words:
            copy += " (its words: case, punctuation, dashes, line breaks and markup set aside)"
        print(f"the kit is what its seed draws from {args.source}: every candidate, published choice and place, "
              f"and {copy}")
        return 0
    for line in redraw.differences:
        print(f"DIFFERS: {line}")
    if redraw.copy_only:
        print("the manifest is what its seed draws; the published copy is not the text it marks. If publishing "
              "added words (front matter, page numbers, running heads), cut them and verify again; if this is the "
              "copy as published, canaries were dropped from the manifest or another text was published, and a "
              "test with this kit is not evidence")
    elif redraw.other_version:
        print(f"the kit was made by copyprobe {redraw.made_by} and this is {versions()['copyprobe']}: a generator "
              "changed since would also draw another kit; check with the version that made it")
    elif redraw.other_version is None:
        print("the kit does not say which copyprobe made it: it was changed after it was drawn, or drawn by another "
              "version; check with the version that made it")
    else:
        print("the kit was changed after it was drawn: a test with it is not evidence")
    return 1
