"""`copyprobe freq build|show`: token frequency tables for DC-PDD."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from copyprobe.errors import BackendError, ConfigError
from copyprobe.params import COUNT, option_type


def load_tokenizer(spec: str) -> Any:
    """The tokenizer of a model spec. ``hf:DIR`` (a local folder with tokenizer files)
    loads only the tokenizer; any other spec goes through
    ``copyprobe.backends.specs.load_backend`` and takes the backend's ``.tokenizer``."""
    if spec.startswith("hf:") and os.path.isdir(spec[3:]):
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(spec[3:], local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load a tokenizer from {spec[3:]!r}: {str(exc).splitlines()[0]}") from None
    try:
        from copyprobe.backends import specs
    except ImportError:
        raise ConfigError(f"cannot load model spec {spec!r}: no model loader installed") from None
    loader = getattr(specs, "load_tokenizer", None)
    if loader is not None:
        return loader(spec)
    backend = specs.load_backend(spec)
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        raise BackendError(f"model {spec!r} exposes no tokenizer; use an hf: spec")
    return tokenizer


def _build(args: argparse.Namespace) -> int:
    from copyprobe.freq import build_frequency_table

    out = args.out
    if not out.endswith(".npz"):
        raise ConfigError(f"--out must end with .npz, got {out!r}")
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        raise ConfigError(f"cannot write {out!r}: folder {out_dir} does not exist")
    for path in args.corpus:
        if path != "-" and not os.path.exists(path):
            raise ConfigError(f"corpus file {path!r} not found")
    tokenizer = load_tokenizer(args.tokenizer)
    done = [0]
    start = time.time()

    def progress(n: int) -> None:
        done[0] += n
        if not args.quiet and sys.stderr.isatty():
            print(f"\r{done[0] / 1e6:,.1f}M characters", end="", file=sys.stderr, flush=True)

    table = build_frequency_table(
        tokenizer, args.corpus, name=args.tokenizer, chunk_chars=args.chunk_chars, progress=progress
    )
    table.save(out)
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    seen = int((table.counts > 0).sum())
    print(
        f"{out}: {table.total:,} tokens from {done[0]:,} characters in {time.time() - start:.1f}s; "
        f"{seen:,} of {table.vocab_size:,} vocabulary entries seen (tokenizer {table.name})"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from copyprobe.freq import load_frequency_table

    table = load_frequency_table(args.table)
    seen = int((table.counts > 0).sum())
    print(f"tokenizer:   {table.name}")
    print(f"vocabulary:  {table.vocab_size:,} entries ({seen:,} seen), hash {table.vocab_hash[:16]}")
    print(f"tokens:      {table.total:,}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "freq",
        help="token frequency tables of a reference corpus (for the dc_pdd method)",
        description="Build or inspect token frequency tables (for the dc_pdd method).",
    )
    sub = parser.add_subparsers(dest="freq_command", metavar="ACTION")
    build = sub.add_parser(
        "build",
        help="count a tokenizer's tokens over plain-text files, streaming",
        description="Count a tokenizer's tokens over plain-text files (streamed in chunks, so "
        "the corpus may be larger than memory; '-' reads standard input, .gz files are read "
        "compressed) and save the table for `--methods dc_pdd --param dc_pdd.freq=FREQ`.",
    )
    build.add_argument("--tokenizer", required=True, metavar="SPEC",
                       help="model spec whose tokenizer to use (an alias, or hf:DIR for a local folder)")
    build.add_argument("--corpus", required=True, nargs="+", metavar="FILE", help="plain-text files")
    build.add_argument("--out", required=True, metavar="FREQ", help="output table (.npz)")
    build.add_argument("--chunk-chars", type=option_type(COUNT, "--chunk-chars"), default=1 << 20, metavar="N",
                       help="characters read per step (default %(default)s)")
    build.add_argument("--quiet", action="store_true", help="no progress line")
    build.set_defaults(func=_build)
    show = sub.add_parser("show", help="describe a frequency table")
    show.add_argument("table", metavar="FREQ")
    show.set_defaults(func=_show)

    def _usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=_usage)
