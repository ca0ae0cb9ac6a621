"""Canary kits: make one before publishing a document, load and verify it before a test.

A kit directory holds

* ``publish/<document name>``: the marked document, the only file to publish;
* ``private/manifest.json``: every candidate of every canary, which one was published,
  where it was inserted, the seed, versions and the sha256 of the marked document. It
  must stay private: whoever knows which candidates were held out can no longer be
  tested fairly, and a model trained on the manifest would see every candidate.

The manifest carries a checksum of its own content, so an edited manifest is refused
(an edit to the candidates after the fact would void the p-value).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copyprobe.canary.generate import (
    STYLES,
    TRAP_LENGTH,
    WORDS_LENGTH,
    Drbg,
    candidates,
    check_seed,
    seed_bytes,
)
from copyprobe.canary.normalise import contains, normalise
from copyprobe.canary.placement import MIN_WORDS, preview, prose_boundaries
from copyprobe.errors import ConfigError, DataError
from copyprobe.files import atomic_write, read_json, refuse_empty_path, refuse_special_file, utc_now, versions, write_json
from copyprobe.run_files import KIT_MANIFEST, check

KIT_FORMAT = "copyprobe-canary-kit"
KIT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: before the grammatical generator and prose-only placement
MANIFEST = Path("private") / "manifest.json"
PUBLISH = Path("publish")
PRIVATE_WARNING = (
    "PRIVATE. Publish only the marked document in publish/. Keep this manifest (and the seed in it) "
    "secret: it names the held-out candidates, and the test is only valid if nobody outside can tell "
    "them from the published canary."
)
DEFAULT_REPEAT = {"sentences": 1, "words": 1, "trap": 10}


@dataclass
class Canary:
    index: int
    candidates: list[str]
    published: int
    positions: list[int]  # character offsets of each inserted copy in the marked document

    @property
    def text(self) -> str:
        return self.candidates[self.published]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "published": self.published, "positions": self.positions,
                "candidates": self.candidates}


@dataclass
class Kit:
    dir: Path
    manifest: dict[str, Any]
    canaries: list[Canary]
    document: Path

    @property
    def style(self) -> str:
        return self.manifest["style"]

    def public_summary(self) -> dict[str, Any]:
        """What a test record may say about the kit (no seed)."""
        m = self.manifest
        # absolute: a rescore from another folder looked for a relative kit there and
        # said it had moved
        return {"kit": os.path.abspath(self.dir), "style": m["style"], "repeat": m["repeat"],
                "n_canaries": len(self.canaries),
                "n_candidates": [len(c.candidates) for c in self.canaries],
                "document_sha256": m["document"]["sha256"], "manifest_checksum": m.get("checksum")}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def insert(text: str, places: list[tuple[int, int, str]]) -> tuple[str, list[tuple[int, int]]]:
    """Insert ``(offset in text, canary index, canary text)`` items; returns the marked
    text and (canary index, offset of the copy in the marked text) per item."""
    pieces: list[str] = []
    where: list[tuple[int, int]] = []
    cursor = 0
    length = 0
    for offset, index, canary in sorted(places, key=lambda p: p[0]):
        pieces.append(text[cursor:offset])
        length += offset - cursor
        cursor = offset
        before = "" if offset == 0 or text[offset - 1].isspace() else " "
        after = "" if offset < len(text) and text[offset].isspace() else " "
        if offset == len(text):
            after = "\n"
        pieces.append(before + canary + after)
        where.append((index, length + len(before)))
        length += len(before) + len(canary) + len(after)
    pieces.append(text[cursor:])
    return "".join(pieces), where


RNG = "HMAC-SHA256 counter-mode DRBG (copyprobe.canary.generate.Drbg)"
# how a kit's generator is keyed since 2026-12-02: by the seed and the source document together
BOUND_RNG = RNG + ", keyed by sha256(seed bytes + the source document's sha256)"


def document_bound(raw_seed: bytes, text: str) -> bytes:
    """The generator's key for ``text``: one seed given for two documents draws two
    unrelated kits. Without it, a publisher who marks every book with one secret seed
    publishes the same canary in each, and a model trained on one book "finds" it in all."""
    return hashlib.sha256(b"copyprobe-canary-document:" + raw_seed + bytes.fromhex(sha256_text(text))).digest()


def draw_kit(text: str, name: str, *, n_candidates: int = 100, style: str = "sentences", repeat: int = 1,
             seed: str | int | None = None, n_canaries: int = 1,
             n_words: int | None = None, bind_to_document: bool = True) -> tuple[str, dict[str, Any]]:
    """The random part of a kit, in memory: (marked text, manifest without checksum).
    ``bind_to_document``: key the generator by the seed and ``text`` together
    (:func:`document_bound`); False only where each document has a seed of its own by
    construction (the benchmark's seeds name their document, and its committed draws
    were made so)."""
    raw_seed, seed_record = seed_bytes(seed)
    root = Drbg(document_bound(raw_seed, text) if bind_to_document else raw_seed)
    drawn: list[tuple[list[str], int]] = []
    source = normalise(text)
    for k in range(n_canaries):
        rng = root.child(f"canary:{k}")
        # a candidate already in the document would be "found" whatever was published
        cands = candidates(rng, style, n_candidates, n_words, reject=lambda c: contains(source, c))
        drawn.append((cands, rng.randbelow(n_candidates)))
    spots = prose_boundaries(text)
    if not spots:
        raise DataError("the document has no narrative prose to hide a canary in (canaries go only between "
                        f"sentences of paragraphs of at least {MIN_WORDS} words, away from dialogue, headings, "
                        "lists, tables and code)")
    place_rng = root.child("positions")
    total = n_canaries * repeat
    if total <= len(spots):
        chosen = [spots[i] for i in place_rng.sample(len(spots), total)]
    else:
        chosen = [spots[place_rng.randbelow(len(spots))] for _ in range(total)]
    places = [(chosen[k * repeat + r], k, drawn[k][0][drawn[k][1]]) for k in range(n_canaries) for r in range(repeat)]
    marked, where = insert(text, places)

    canaries = [Canary(index=k, candidates=cands, published=pub,
                       positions=sorted(pos for idx, pos in where if idx == k))
                for k, (cands, pub) in enumerate(drawn)]
    canary_json = []
    for c in canaries:
        item = c.to_json()
        # for the author to check each place before publishing (the manifest stays private)
        item["placements"] = [{"offset": pos, **preview(marked, pos, pos + len(c.text))} for pos in c.positions]
        canary_json.append(item)
    marked_norm = normalise(marked)
    for cands, pub in drawn:
        if len(marked_norm.find_all(normalise(cands[pub]).text)) != repeat:
            raise DataError("a canary joins the surrounding text when normalised; choose another seed")
    doc_rel = PUBLISH / name
    manifest: dict[str, Any] = {
        "format": KIT_FORMAT, "format_version": KIT_VERSION, "warning": PRIVATE_WARNING,
        "seed": seed_record, "style": style, "repeat": repeat, "n_words": n_words,
        "n_candidates": n_candidates, "rng": BOUND_RNG if bind_to_document else RNG,
        "normalisation": "copyprobe.canary.normalise v1 (markup, NFKD without accents, lower case, dashes, "
                         "punctuation and whitespace)",
        "document": {"file": doc_rel.as_posix(), "sha256": sha256_text(marked), "n_chars": len(marked)},
        "placement": "sentence/paragraph boundaries in narrative prose (copyprobe.canary.placement)",
        "canaries": canary_json,
    }
    return marked, manifest


def kit_from_manifest(manifest: dict[str, Any], kit_dir: str | os.PathLike = ".",
                      document: str | os.PathLike | None = None) -> Kit:
    """A Kit object from a manifest already checked (or just drawn, in memory)."""
    canaries = [Canary(index=int(c["index"]), candidates=list(c["candidates"]), published=int(c["published"]),
                       positions=list(c["positions"])) for c in manifest["canaries"]]
    path = Path(kit_dir)
    return Kit(dir=path, manifest=manifest, canaries=canaries,
               document=Path(document) if document is not None else path / manifest["document"]["file"])


# upper bounds of a kit: past them a kit takes minutes to draw and hours to test (a test
# scores every candidate), and the smallest p-value, 1 / n_candidates, is already 1e-5
MAX_CANDIDATES = 100_000
MAX_CANARIES = 1_000
MAX_REPEAT = 1_000
MAX_WORDS = 500
# words drawn for a whole kit (candidates x canaries x words a candidate): 10 million take
# about a minute and a half and 50 MB here; 100,000 candidates of 500 words took 8 minutes
MAX_KIT_WORDS = 10_000_000


def _read_document(source: Path, what: str, give: str) -> str:
    """The UTF-8 text of the one document ``source`` (``what`` it is, and what to ``give``
    instead of a folder, for the messages)."""
    refuse_special_file(source, what)
    try:
        return source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{source} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"{source} is a directory; give {give}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{source} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start}); "
                        "give the document as plain UTF-8 text") from None
    except OSError as exc:
        raise DataError(f"cannot read {source}: {exc.strerror or exc}") from None


def make_kit(doc: str | os.PathLike, out: str | os.PathLike, *, n_candidates: int = 100, style: str = "sentences",
             repeat: int | None = None, seed: str | int | None = None, n_canaries: int = 1,
             n_words: int | None = None, command: list[str] | None = None, bind_to_document: bool = True) -> Kit:
    """Draw the canaries, mark the document, write the kit; returns the loaded kit
    (``bind_to_document``: see :func:`draw_kit`)."""
    if style not in STYLES:
        raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    repeat = DEFAULT_REPEAT[style] if repeat is None else repeat
    for name, value, low, high in (("n_candidates", n_candidates, 2, MAX_CANDIDATES),
                                   ("n_canaries", n_canaries, 1, MAX_CANARIES), ("repeat", repeat, 1, MAX_REPEAT),
                                   ("n_words", n_words, 1, MAX_WORDS)):
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{name} must be in [{low}, {high:,}], got {value}")
    # a fictional sentence has about 16 words (generate.sentence)
    per_candidate = n_words or {"words": WORDS_LENGTH, "trap": TRAP_LENGTH}.get(style, 16)
    if n_candidates * n_canaries * per_candidate > MAX_KIT_WORDS:
        raise ConfigError(f"{n_canaries} canar{'y' if n_canaries == 1 else 'ies'} of {n_candidates:,} candidates of "
                          f"{per_candidate} words draw {n_candidates * n_canaries * per_candidate:,} words; at most "
                          f"{MAX_KIT_WORDS:,} (fewer candidates or shorter ones)")
    check_seed(seed)  # before the document is read
    refuse_empty_path(doc, "the document's", "name the one document to mark")
    source = Path(doc)
    text = _read_document(source, "the document to mark", "the one document to mark")
    if not text.strip():
        raise DataError(f"{source} is empty: there is nothing to mark")
    refuse_empty_path(out, "the kit's output directory's", "name a directory for the kit", ConfigError)
    out_dir = Path(out)
    if (out_dir / MANIFEST).exists():
        raise ConfigError(f"{out_dir} already holds a kit; choose another output directory (a kit is never overwritten)")

    marked, manifest = draw_kit(text, source.name, n_candidates=n_candidates, style=style, repeat=repeat,
                                seed=seed, n_canaries=n_canaries, n_words=n_words, bind_to_document=bind_to_document)
    manifest.update({"created": utc_now(), "command": command or [], "versions": versions(),
                     "source": {"path": str(source), "sha256": sha256_text(text), "n_chars": len(text)}})
    manifest["checksum"] = _checksum(manifest)
    doc_rel = Path(manifest["document"]["file"])
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / doc_rel, marked)
    # the seed and which candidate was published: readable by its owner alone (the kit's
    # test is void once anyone else knows them)
    (out_dir / MANIFEST).parent.mkdir(mode=0o700, exist_ok=True)
    write_json(out_dir / MANIFEST, manifest, mode=0o600)
    return load_kit(out_dir)


def read_manifest(path: str | os.PathLike) -> tuple[Path, dict[str, Any], list[Canary]]:
    """(kit directory, manifest, canaries) from a kit directory or its manifest.json,
    checked: right format, unaltered (checksum), consistent candidates."""
    given = Path(path)
    if given.is_file():
        where = given
        kit_dir = given.parent.parent if given.parent.name == MANIFEST.parent.name else given.parent
    elif given.is_dir():
        where, kit_dir = given / MANIFEST, given
    else:
        raise DataError(f"{given} does not exist (give the kit directory that `copyprobe canary make` wrote, "
                        "or its private/manifest.json)")
    manifest = read_json(where, what="canary kit (private/manifest.json missing)")
    if not isinstance(manifest, dict) or manifest.get("format") != KIT_FORMAT:
        raise DataError(f"{where} is not a copyprobe canary manifest")
    if manifest.get("format_version") not in READABLE_VERSIONS:
        raise DataError(f"{where} has format_version {manifest.get('format_version')!r}; "
                        f"this copyprobe reads {', '.join(map(str, READABLE_VERSIONS))}")
    if manifest.get("checksum") != _checksum(manifest):
        raise DataError(f"{where} was altered after it was made (its checksum does not match): "
                        "a changed manifest voids the test")
    check(manifest, KIT_MANIFEST, where)
    canaries: list[Canary] = []
    try:
        for k, item in enumerate(manifest["canaries"]):
            canary = Canary(index=int(item["index"]), candidates=[str(c) for c in item["candidates"]],
                            published=int(item["published"]), positions=[int(p) for p in item["positions"]])
            if canary.index != k or not 0 <= canary.published < len(canary.candidates) or len(canary.candidates) < 2:
                raise ValueError(f"canary {k} is inconsistent")
            if len(set(canary.candidates)) != len(canary.candidates):
                raise ValueError(f"canary {k} has duplicate candidates")
            canaries.append(canary)
        manifest["document"]["file"], manifest["document"]["sha256"]
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{where} is malformed: {exc}") from None
    if not canaries:
        raise DataError(f"{where} has no canaries")
    return kit_dir, manifest, canaries


def load_kit(kit_dir: str | os.PathLike, document: str | os.PathLike | None = None) -> Kit:
    """Read and verify a kit: manifest present and unaltered, candidates and positions
    consistent, and the marked document (or ``document``, another copy of it in any
    format :func:`copyprobe.data.books.read_book` reads, reformatted or not) holding the
    published canaries, compared after :func:`copyprobe.canary.normalise.normalise`.
    Any problem is one DataError line."""
    path = Path(kit_dir)
    if not path.is_dir():
        raise DataError(f"{path} is not a directory (give the kit directory that `copyprobe canary make` wrote)")
    path, manifest, canaries = read_manifest(path)
    doc_file = path / manifest["document"]["file"]
    expected_sha = manifest["document"]["sha256"]
    if document is None:
        if not doc_file.exists():
            raise DataError(f"{doc_file} (the marked document) is missing from the kit")
        try:
            marked = doc_file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:  # e.g. re-saved in Latin-1 by an editor
            raise DataError(f"{doc_file} (the marked document) is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                            f"at offset {exc.start}): it is not the document the kit marked") from None
        except OSError as exc:
            raise DataError(f"cannot read {doc_file} (the marked document): {exc.strerror or exc}") from None
        if sha256_text(marked) != expected_sha:
            raise DataError(f"{doc_file} is not the document the kit marked (sha256 differs)")
        for canary in canaries:
            for pos in canary.positions:
                if marked[pos:pos + len(canary.text)] != canary.text:
                    raise DataError(f"{doc_file} does not hold canary {canary.index} at offset {pos}")
        checked = doc_file
    else:
        from copyprobe.data.books import read_book

        checked = Path(document)
        marked = read_book(checked)
    norm = normalise(marked)
    for canary in canaries:
        if not contains(norm, canary.text):
            raise DataError(f"{checked} does not contain published canary {canary.index}, even after "
                            "normalising quotes, dashes, case and line wrapping: this is not the document the kit marked")
    return Kit(dir=path, manifest=manifest, canaries=canaries, document=checked)


@dataclass
class Redraw:
    """How a kit differs from the draw its seed makes (``differences``; none: it is that
    draw) and the copyprobe version that made it (``made_by``; None if not recorded)."""

    differences: list[str]
    made_by: str | None
    as_words: bool = False  # the published copy equals the draw's text in its words only (reformatted)
    copy_only: bool = False  # the manifest is the draw; only the published copy differs from what it marks

    @property
    def other_version(self) -> bool | None:
        """Made by another copyprobe (a generator changed since also draws another kit);
        None when the kit does not say which made it."""
        return None if self.made_by is None else self.made_by != versions()["copyprobe"]


def verify_kit(kit_dir: str | os.PathLike, source: str | os.PathLike,
               published: str | os.PathLike | None = None) -> Redraw:
    """Draw the kit again from its seed and the unmarked ``source`` document, and say how
    the kit differs from that draw and from the document as ``published`` (the marked text
    as it was made public; default: the kit's own copy).

    The manifest's checksum catches an accidental edit, not a deliberate one: anyone can
    recompute it. The candidates, the published one among them and the places follow from
    the seed and the document alone, so a kit whose held-out candidates were swapped after
    the test (for ones a model ranks low, to make the published canary stand out), or
    whose published choice was changed, differs from the draw. Dropping canaries (those
    that ranked badly) with their manifest entries is found by the published text: the
    draw of fewer canaries marks another text. That check is as strong as the copy it
    reads: the kit's own can be rewritten with its manifest, a copy that was made public
    cannot. Whoever checks needs the private manifest (its seed) and the document as it
    was before marking; both can be handed over once the test is done. A seed chosen,
    before publication, among many for a canary that any model finds likely is not seen
    by this check."""
    kit_path, manifest, canaries = read_manifest(kit_dir)
    where = kit_path / MANIFEST
    if manifest["format_version"] != KIT_VERSION:
        raise DataError(f"{where} has format_version {manifest['format_version']}: it was drawn by an earlier "
                        "generator and placement, which this copyprobe cannot draw again (check with the version "
                        "that made it)")
    if manifest.get("rng") not in (RNG, BOUND_RNG):
        raise DataError(f"{where} was drawn with a generator this copyprobe does not have ({manifest.get('rng')!r})")
    if not isinstance(manifest.get("seed"), str):
        raise DataError(f"{where} records no seed, so the kit cannot be drawn again")
    recorded = (manifest.get("source") or {}).get("sha256")
    if recorded is None:
        raise DataError(f"{where} records no sha256 of the document it marked, so no draw can be checked against it")
    text = _read_document(Path(source), "the unmarked document", "the document as it was before it was marked")
    if sha256_text(text) != recorded:
        raise DataError(f"{source} is not the document the kit was made from (sha256 differs; give the document as "
                        "it was before marking, not the marked copy)")
    public = Path(published) if published is not None else kit_path / manifest["document"]["file"]
    public_text = _published_text(public, Path(manifest["document"]["file"]).suffix)
    marked, drawn = draw_kit(text, Path(manifest["document"]["file"]).name,
                             n_candidates=len(canaries[0].candidates), style=manifest["style"],
                             repeat=int(manifest["repeat"]), seed=manifest["seed"], n_canaries=len(canaries),
                             n_words=manifest.get("n_words"), bind_to_document=manifest["rng"] == BOUND_RNG)
    differences: list[str] = []
    for kept, fresh in zip(manifest["canaries"], drawn["canaries"]):
        k = kept["index"]
        changed = [j for j, (a, b) in enumerate(zip(kept["candidates"], fresh["candidates"])) if a != b]
        if len(kept["candidates"]) != len(fresh["candidates"]):
            differences.append(f"canary {k} has {len(kept['candidates'])} candidates; the seed draws "
                               f"{len(fresh['candidates'])}")
        elif changed:
            differences.append(f"canary {k}: {len(changed)} of its {len(kept['candidates'])} candidates are not the "
                               f"ones the seed draws (first: candidate {changed[0]})")
        if kept["published"] != fresh["published"]:
            differences.append(f"canary {k}: the published candidate is {kept['published']}; the seed chooses "
                               f"{fresh['published']}")
        if kept["positions"] != fresh["positions"]:
            differences.append(f"canary {k}: placed at {kept['positions']}; the seed places it at {fresh['positions']}")
    if drawn["document"]["sha256"] != manifest["document"]["sha256"]:
        differences.append("the manifest records another marked document than the one the seed makes")
    in_manifest = bool(differences)
    if public_text != marked:
        places = word_differences(normalise(marked).text.split(), normalise(public_text).text.split())
        if places:
            n = len(canaries)
            missing = [c["index"] for c in drawn["canaries"]
                       if not contains(public_text, c["candidates"][c["published"]])]
            differences.append(
                f"{public} is not the marked document the seed makes from this document with {n} "
                f"canar{'y' if n == 1 else 'ies'}, even with case, punctuation, dashes, line breaks and markup "
                f"set aside: it differs in {len(places)} place{'' if len(places) == 1 else 's'} ("
                + "; ".join(places[:SHOWN_PLACES]) + (", ..." if len(places) > SHOWN_PLACES else "") + ")"
                + (f"; the seed's canar{'y' if len(missing) == 1 else 'ies'} {', '.join(map(str, missing))} "
                   f"{'is' if len(missing) == 1 else 'are'} not in it" if missing else "")
                + ". Canaries dropped from the manifest, or another text; a published copy with front matter, "
                "page numbers or running heads must be given as the text that was marked")
    return Redraw(differences, (manifest.get("versions") or {}).get("copyprobe"), as_words=public_text != marked,
                  copy_only=bool(differences) and not in_manifest)


SHOWN_PLACES = 3  # places of a published copy's difference named in a message
_EXCERPT_WORDS = 8


def _excerpt(words: list[str]) -> str:
    shown = " ".join(words[:_EXCERPT_WORDS])
    return f"'{shown}{' ...' if len(words) > _EXCERPT_WORDS else ''}' ({len(words)} word{'' if len(words) == 1 else 's'})"


def word_differences(drawn: list[str], published: list[str]) -> list[str]:
    """Where the ``published`` words differ from the ``drawn`` ones, one phrase a place
    (word numbers are the draw's, from 1)."""
    from difflib import SequenceMatcher

    places = []
    if drawn == published:
        return []
    # autojunk (words in over 1% of a long text are no anchors) keeps a book's diff fast; the
    # equal stretches it finds are still equal, the places it names only coarser
    for op, i1, i2, j1, j2 in SequenceMatcher(None, drawn, published).get_opcodes():
        if op == "insert":
            where = ("before the text" if i1 == 0 else "after its end" if i1 == len(drawn)
                     else f"after word {i1} of the draw")
            places.append(f"adds {_excerpt(published[j1:j2])} {where}")
        elif op == "delete":
            places.append(f"lacks {_excerpt(drawn[i1:i2])} at word {i1 + 1}")
        elif op == "replace":
            places.append(f"has {_excerpt(published[j1:j2])} where the draw has {_excerpt(drawn[i1:i2])} "
                          f"at word {i1 + 1}")
    return places


def _published_text(path: Path, marked_suffix: str) -> str:
    """The text of the published copy: HTML, EPUB, PDF and DOCX through the audit's
    readers (the words survive, the layout does not: the comparison is normalised),
    unless the marked document was a file of that type itself (an HTML page marked as
    written: its copy is compared as written too); anything else as UTF-8 text."""
    from copyprobe.data import books

    suffix = path.suffix.lower()
    rendered = set(books.BOOK_SUFFIXES) - set(books.TEXT_SUFFIXES + books.MARKDOWN_SUFFIXES)
    if suffix in rendered and suffix != marked_suffix.lower():
        refuse_special_file(path, "the published document")
        return books.read_book(path)
    return _read_document(path, "the published document", "the marked document as it was published")
