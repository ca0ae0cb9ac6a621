"""Copy-evaluation data: CopyBench's JSON layouts, and the same built from your own book.

CopyBench publishes three lists (``data/data.literal.json`` ...):

* literal: ``id``, ``title``, ``input`` (a ~200-word prefix), ``reference`` (the next ~50 words)
* non-literal: ``id``, ``title``, ``input`` (a story beginning), ``reference_events`` (list of
  event sentences), ``reference_characters`` (list of name lists: a name and its aliases). The
  released file stores these two lists as Python-literal *strings*; both forms are read. The
  character list may be empty (a few of the released items, works whose summary names no
  character): such an item still gets its event score, and 0 characters of 0.
* QA: ``id``, ``title``, ``input`` (a question), ``reference`` (the answer, or a list of answers)

A file may hold one of these lists (the layout is recognised by its keys), or a bundle
``{"literal": [...], "nonliteral": [...], "qa": [...], "protected": [text, ...]}``; a
directory is read as CopyBench's ``data.literal.json`` / ``data.nonliteral.json`` /
``data.qa.json``. A row that lacks a field becomes a per-item error (kept in the results,
never silently dropped); a file that cannot be read at all is a :class:`DataError`.

``protected`` texts form the MemFree corpus; when absent it is each literal item's ``input``
and ``reference`` joined as one text (see :meth:`CopySet.protected_corpus`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Callable, Generator, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.copying import prompts
from copyprobe.copying.common import text_of
from copyprobe.data.books import BOOK_SUFFIXES, read_book
from copyprobe.data.tables import id_problem
from copyprobe.errors import DataError, RowError
from copyprobe.files import json_problem

TASK_FILES = {"literal": "data.literal.json", "nonliteral": "data.nonliteral.json", "qa": "data.qa.json"}


@dataclass(frozen=True)
class LiteralItem:
    id: str
    title: str
    input: str
    reference: str


@dataclass(frozen=True)
class NonLiteralItem:
    id: str
    title: str
    input: str
    reference_events: tuple[str, ...]
    reference_characters: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class QAItem:
    id: str
    title: str
    input: str
    reference: tuple[str, ...]  # one or more acceptable answers


@dataclass(frozen=True)
class ItemError:
    """A row that could not be read; it is reported per item, with the reason."""

    task: str
    id: str
    reason: str


@dataclass
class CopySet:
    literal: list[LiteralItem] = field(default_factory=list)
    nonliteral: list[NonLiteralItem] = field(default_factory=list)
    qa: list[QAItem] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)
    source: str = ""

    def protected_corpus(self) -> list[str]:
        """The MemFree corpus: the ``protected`` texts, else per literal item its prefix and
        reference as one text.

        Deviation: the paper (B.2) protects "the collection of all reference texts", and the
        released code (scripts/generate.py) the references alone. Protected alone, a
        reference's n-grams start at its own first token, so a model continuing the prefix
        could still copy the reference's first n - 1 tokens (and with many tokenizers the
        reference's first word is a different token at a text's start than after the
        prefix). Joined to its prefix, the n-grams that run from the prefix into the
        reference are protected too; copyprobe's filter looks at the prompt's tokens as well
        (:mod:`copyprobe.copying.memfree`), so where the prompt ends with the prefix (the
        first template) the reference is blocked from the first generated token. The cost:
        the model cannot repeat n-token spans of its own prompt either (book text too,
        though no score compares the output with it).
        """
        if self.protected:
            return list(self.protected)
        return [f"{it.input} {it.reference}" for it in self.literal]

    def counts(self) -> dict[str, int]:
        return {"literal": len(self.literal), "nonliteral": len(self.nonliteral), "qa": len(self.qa),
                "errors": len(self.errors), "protected": len(self.protected_corpus())}

    def to_json(self) -> dict[str, Any]:
        return {
            "literal": [asdict(i) for i in self.literal],
            "nonliteral": [
                {**asdict(i), "reference_events": list(i.reference_events),
                 "reference_characters": [list(c) for c in i.reference_characters]}
                for i in self.nonliteral
            ],
            "qa": [{**asdict(i), "reference": list(i.reference)} for i in self.qa],
            "protected": list(self.protected),
        }


# ------------------------------------------------------------------------ reading rows
def _text_field(row: dict, name: str) -> str:
    if name not in row or row[name] is None:
        raise RowError(f"missing field {name!r}")
    value = row[name]
    if not isinstance(value, str):
        raise RowError(f"field {name!r} must be text, got {type(value).__name__}")
    if not value.strip():
        raise RowError(f"field {name!r} is empty")
    return value


def _list_field(row: dict, name: str, may_be_empty: bool = False) -> list:
    if name not in row or row[name] is None:
        raise RowError(f"missing field {name!r}")
    value = row[name]
    if isinstance(value, str):  # CopyBench stores these lists as Python-literal strings
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise RowError(f"field {name!r} is neither a list nor a list literal") from None
    if not isinstance(value, (list, tuple)):
        raise RowError(f"field {name!r} must be a list, got {type(value).__name__}")
    if not value and not may_be_empty:
        raise RowError(f"field {name!r} is empty")
    return list(value)


def _row_id(row: Any, task: str, index: int, where: str) -> str:
    if isinstance(row, dict) and row.get("id") not in (None, ""):
        problem = id_problem(row["id"])
        if problem is not None:
            raise DataError(f"{where}: the id {problem}")
        return str(row["id"])
    return f"{task}.{index}"


def _check_title(row: dict, where: str) -> None:
    # a title shows in results and reports as written: an object's repr is nothing anyone wrote
    problem = id_problem(row.get("title"), "a title")
    if problem is not None:
        raise DataError(f"{where}: the title {problem}")


def _title(row: dict) -> str:
    # a number is a title as text, as a number is an id (0 is "0", not no title)
    value = row.get("title")
    return "" if value is None else str(value)


def parse_literal(row: dict, rid: str) -> LiteralItem:
    return LiteralItem(rid, _title(row), _text_field(row, "input"), _text_field(row, "reference"))


def parse_nonliteral(row: dict, rid: str) -> NonLiteralItem:
    events = _list_field(row, "reference_events")
    if not all(isinstance(e, str) and e.strip() for e in events):
        raise RowError("field 'reference_events' must be a list of non-empty texts")
    # a work whose summary names no character (4 released items) still has events to score
    chars_raw = _list_field(row, "reference_characters", may_be_empty=True)
    chars: list[tuple[str, ...]] = []
    for entry in chars_raw:
        if isinstance(entry, str):
            names = [entry]
        elif isinstance(entry, dict):  # the Fig. 14 layout {"name": ..., "alias": [...]}
            aliases = entry.get("alias") or entry.get("aliases") or []
            if isinstance(aliases, str):
                aliases = [aliases]
            if not isinstance(aliases, (list, tuple)):
                raise RowError(f"the aliases of character {entry.get('name')!r} must be a list of names, "
                               f"got {type(aliases).__name__}")
            names = [entry.get("name", "")] + list(aliases)
        elif isinstance(entry, (list, tuple)):
            names = list(entry)
        else:
            raise RowError("field 'reference_characters' must hold names or lists of names")
        names = [n.strip() for n in names if isinstance(n, str) and n.strip()]
        if not names:
            raise RowError("a character in 'reference_characters' has no name")
        chars.append(tuple(names))
    return NonLiteralItem(rid, _title(row), _text_field(row, "input"),
                          tuple(e.strip() for e in events), tuple(chars))


def parse_qa(row: dict, rid: str) -> QAItem:
    question = _text_field(row, "input")
    if "reference" not in row or row["reference"] is None:
        raise RowError("missing field 'reference'")
    ref = row["reference"]
    answers = [ref] if isinstance(ref, str) else list(ref) if isinstance(ref, (list, tuple)) else None
    if answers is None or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise RowError("field 'reference' must be a non-empty answer or list of answers")
    return QAItem(rid, _title(row), question, tuple(answers))


PARSERS = {"literal": parse_literal, "nonliteral": parse_nonliteral, "qa": parse_qa}


def detect_task(rows: list) -> str:
    """Which CopyBench layout a list of rows follows (by the keys of its rows)."""
    keys: set[str] = set()
    for row in rows[:50]:
        if isinstance(row, dict):
            keys |= set(row)
    if {"reference_events", "reference_characters"} & keys:
        return "nonliteral"
    if "reference" in keys:
        ids = [str(r.get("id", "")) for r in rows[:50] if isinstance(r, dict)]
        questions = [r.get("input", "") for r in rows[:50] if isinstance(r, dict)]
        if any("qa" in i.lower() for i in ids) or (
            questions and sum(isinstance(q, str) and q.rstrip().endswith("?") for q in questions) > len(questions) / 2
        ):
            return "qa"
        return "literal"
    raise DataError(
        "cannot tell the layout of the rows: expected CopyBench fields "
        "(literal: input, reference; non-literal: input, reference_events, reference_characters; "
        "QA: input, reference)"
    )


def rows_to_set(task: str, rows: Iterable[Any], into: CopySet | None = None,
                where: Callable[[int], str] | None = None) -> CopySet:
    """The rows of one task into ``into``; ``where(index)`` names a row in messages
    (default: its place among the task's rows)."""
    out = into if into is not None else CopySet()
    if task not in PARSERS:
        raise DataError(f"unknown copying task {task!r} (known: {', '.join(PARSERS)})")
    seen: set[str] = set()
    for index, row in enumerate(rows):
        place = where(index) if where else f"{task} row {index}"
        rid = _row_id(row, task, index, place)
        if isinstance(row, dict):
            _check_title(row, place)
        if rid in seen:
            out.errors.append(ItemError(task, rid, "duplicate id"))
            continue
        seen.add(rid)
        if not isinstance(row, dict):
            out.errors.append(ItemError(task, rid, f"row is {type(row).__name__}, not an object"))
            continue
        try:
            item = PARSERS[task](row, rid)
        except RowError as exc:
            out.errors.append(ItemError(task, rid, str(exc)))
            continue
        getattr(out, task).append(item)
    return out


def _read_json_any(path: Path) -> tuple[Any, Callable[[int], str]]:
    """The parsed file, and how its list's rows are named in messages (a JSON-lines row
    by its line number, a JSON list's by its index)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text") from None
    if path.suffix == ".jsonl":
        rows, lines = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                lines.append(n)  # blank lines are skipped: a row's index is not its line
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{n}: not JSON ({exc.msg})") from None
                except (ValueError, RecursionError) as exc:  # 4300+ digit numbers, deep nesting
                    raise DataError(f"{path}:{n}: cannot read it ({_beyond_limits(exc)})") from None
        return rows, lambda index: f"{path} line {lines[index]}"
    try:
        return json.loads(text), lambda index: f"{path} row {index}"
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({json_problem(exc)})") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path}: cannot read it ({_beyond_limits(exc)})") from None


def _beyond_limits(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return "a number with more than 4300 digits" if "digits" in str(exc) else str(exc).splitlines()[0]


def builtin_path(name: str) -> Path | None:
    """Package data sets by name (``kjv``)."""
    path = Path(__file__).parent / "data" / f"{name}.json"
    return path if path.is_file() else None


def load_copyset(path: str | Path, task: str | None = None, **book_options: Any) -> CopySet:
    """Read a copy-eval data set (see the module docstring). A ``.txt``/``.epub`` file is a
    book: literal items are cut from it by word counts and the whole book is protected."""
    p = Path(path)
    if not p.exists():
        builtin = builtin_path(str(path))
        if builtin is None:
            from copyprobe.data import datasets

            if datasets.is_dataset_name(str(path)):
                file, named_task = datasets.load_named(str(path), command="copying")
                return load_copyset(file, task=named_task)
            raise DataError(f"data file {path} does not exist (built-in sets: kjv, kjv_incontext; "
                            f"datasets: copybench:literal|nonliteral|qa)")
        p = builtin
    if p.is_dir():
        out = CopySet(source=str(p))
        found = False
        for name, fname in TASK_FILES.items():
            if (p / fname).is_file():
                found = True
                rows, where = _read_json_any(p / fname)
                if not isinstance(rows, list):
                    raise DataError(f"{p / fname}: expected a JSON list of rows")
                rows_to_set(name, rows, out, where)
        if not found:
            raise DataError(f"{p}: no {', '.join(TASK_FILES.values())} in this directory")
        return out
    if p.suffix.lower() in BOOK_SUFFIXES:
        text = read_book(p)
        items = literal_items_from_text(text, title=book_options.pop("title", p.stem), **book_options)
        return CopySet(literal=items, protected=[text], source=str(p))
    data, where = _read_json_any(p)
    out = CopySet(source=str(p))
    if isinstance(data, dict):
        known = set(TASK_FILES) | {"protected", "meta"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DataError(f"{p}: unknown keys {unknown} (a bundle has literal, nonliteral, qa, protected)")
        for name in TASK_FILES:
            if name in data:
                if not isinstance(data[name], list):
                    raise DataError(f"{p}: {name!r} must be a list of rows")
                rows_to_set(name, data[name], out, lambda index, name=name: f"{p}: {name!r} row {index}")
        protected = data.get("protected") or []
        if not isinstance(protected, list) or not all(isinstance(t, str) for t in protected):
            raise DataError(f"{p}: 'protected' must be a list of texts")
        out.protected = list(protected)
        return out
    if isinstance(data, list):
        if not data:
            raise DataError(f"{p}: no rows")
        rows_to_set(task or detect_task(data), data, out, where)
        return out
    raise DataError(f"{p}: expected a JSON list of rows or a bundle object")


# --------------------------------------------------------------------------- books
def literal_items_from_text(
    text: str,
    *,
    title: str = "",
    prefix_words: int = 200,
    reference_words: int = 50,
    stride: int | None = None,
    max_items: int | None = None,
    id_prefix: str = "literal",
) -> list[LiteralItem]:
    """Cut (prefix, reference) pairs by whitespace word counts, as CopyBench: ``prefix_words``
    words of context, the next ``reference_words`` words as the reference. Windows start every
    ``stride`` words (default: prefix + reference, i.e. non-overlapping)."""
    if prefix_words < 1 or reference_words < 1:
        raise DataError("prefix_words and reference_words must be at least 1")
    words = text.split()
    span = prefix_words + reference_words
    step = stride or span
    if len(words) < span:
        raise DataError(f"the text has {len(words)} words; one item needs {span} ({prefix_words} words of prefix "
                        f"and the {reference_words} words compared with the completion): a shorter prefix or "
                        "reference would fit it")
    items = []
    for start in range(0, len(words) - span + 1, step):
        items.append(
            LiteralItem(
                id=f"{id_prefix}.{start}",
                title=title,
                input=" ".join(words[start : start + prefix_words]),
                reference=" ".join(words[start + prefix_words : start + span]),
            )
        )
        if max_items is not None and len(items) >= max_items:
            break
    return items


# ------------------------------------- events, characters and QA pairs with any backend
def _extract_json(text: str) -> Any:
    """The first JSON array in a model's answer (inside ``` fences or not)."""
    start = text.find("[")
    while start != -1:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "[":
                depth += 1
            elif text[i] == "]":
                depth -= 1
                if depth == 0:
                    chunk = text[start : i + 1]
                    try:
                        return json.loads(chunk)
                    except ValueError:
                        try:
                            return ast.literal_eval(chunk)
                        except (ValueError, SyntaxError):
                            break
        start = text.find("[", start + 1)
    raise RowError("the answer holds no JSON list")


def parse_events(text: str) -> list[str]:
    """Fig. 13 answers: a JSON list of "1. event" strings; numbering is removed."""
    try:
        raw = _extract_json(text)
        events = [str(e) for e in raw if isinstance(e, (str, int, float))]
    except RowError:
        events = [line for line in text.splitlines() if re.match(r"\s*\"?\d+\.\s", line)]
    cleaned = []
    for e in events:
        e = re.sub(r'^\s*"?\s*\d+\.\s*', "", e).strip().strip('",').strip()
        if e:
            cleaned.append(e)
    if not cleaned:
        raise RowError("no events could be read from the answer")
    return cleaned


def parse_characters(text: str) -> list[list[str]]:
    """Fig. 14 answers: a JSON list of {"name": ..., "alias": [...]} objects."""
    raw = None
    try:
        raw = _extract_json(text)
    except RowError:
        pass
    chars: list[list[str]] = []
    if isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names = [entry["name"]] + [a for a in entry.get("alias") or [] if isinstance(a, str)]
                chars.append([n.strip() for n in names if n.strip()])
    if not chars:  # models often drop the braces, as the paper's own figure does
        for m in re.finditer(r'"name"\s*:\s*"([^"]+)"\s*,\s*"alias"\s*:\s*\[([^\]]*)\]', text):
            aliases = re.findall(r'"([^"]+)"', m.group(2))
            chars.append([m.group(1).strip()] + [a.strip() for a in aliases if a.strip()])
    chars = [c for c in chars if c]
    if not chars:
        raise RowError("no characters could be read from the answer")
    return chars


def parse_qa_pair(text: str) -> tuple[str, str]:
    m = re.search(r"Question:\s*(.+?)\s*Answer:\s*(.+)", text, flags=re.DOTALL)
    if not m:
        raise RowError("the answer is not 'Question: ... Answer: ...'")
    question = m.group(1).strip()
    answer = m.group(2).strip().splitlines()[0].strip()
    if not question or not answer:
        raise RowError("empty question or answer")
    return question, answer


def nonliteral_from_summary(
    *, title: str, author: str, summary: str, n_beginnings: int = 5, max_tokens: int = 1024,
    model: str | None = None, id_prefix: str | None = None,
) -> Generator[list[GenerateRequest], list[Any], list[NonLiteralItem]]:
    """A runner generator: extract events (Fig. 13) and characters (Fig. 14) from a summary.
    As in CopyBench's release, each of the first ``n_beginnings`` events is the beginning of
    one item, whose reference events are all the other events. Characters named in a
    beginning stay in the list: the metric excludes them per item."""
    values = {"title": title, "author": author, "summary": summary}
    ev_req = GenerateRequest(prompt=prompts.fill(prompts.EVENTS_EXTRACT, **values), max_tokens=max_tokens, model=model)
    ch_req = GenerateRequest(prompt=prompts.fill(prompts.CHARACTERS_EXTRACT, **values), max_tokens=max_tokens, model=model)
    ev_ans, ch_ans = yield [ev_req, ch_req]
    events = parse_events(text_of(ev_ans))
    chars = parse_characters(text_of(ch_ans))
    return nonliteral_items(events, chars, title=title, n_beginnings=n_beginnings, id_prefix=id_prefix)


def nonliteral_items(
    events: list[str], characters: list[list[str]], *, title: str = "", n_beginnings: int = 5,
    id_prefix: str | None = None,
) -> list[NonLiteralItem]:
    """One item per beginning event (the first ``n_beginnings``); the rest are its references."""
    if len(events) < 2:
        raise RowError("need at least two events (one beginning, one reference)")
    chars = tuple(tuple(c) for c in characters if c)
    prefix = id_prefix or f"nonliteral.{re.sub(r'[^A-Za-z0-9]+', '_', title).strip('_') or 'work'}"
    items = []
    for i, beginning in enumerate(events[:n_beginnings]):
        rest = tuple(e for j, e in enumerate(events) if j != i)
        items.append(NonLiteralItem(f"{prefix}.{i}", title, beginning, rest, chars))
    return items


def qa_from_passage(
    passage: str, *, title: str = "", model: str | None = None, item_id: str | None = None,
    keep_partial: bool = False,
) -> Generator[list[GenerateRequest], list[Any], QAItem]:
    """A runner generator for A.1's three steps: a QA pair (Fig. 10), its claim (Fig. 11), and
    the check that the passage supports the claim (Fig. 12); unsupported pairs are a RowError."""
    (gen,) = yield [GenerateRequest(prompt=prompts.fill(prompts.QA_GENERATE, passage=passage), max_tokens=96, model=model)]
    question, answer = parse_qa_pair(text_of(gen))
    (claim,) = yield [GenerateRequest(prompt=prompts.fill(prompts.QA_CLAIM, question=question, answer=answer),
                                      max_tokens=96, model=model)]
    claim_text = text_of(claim).strip().splitlines()[0].strip() if text_of(claim).strip() else ""
    if not claim_text:
        raise RowError("the claim step gave an empty answer")
    (verdict,) = yield [GenerateRequest(prompt=prompts.fill(prompts.QA_VERIFY, claim=claim_text, passage=passage),
                                        max_tokens=8, model=model)]
    label = text_of(verdict).strip().lower()
    if label.startswith("not"):
        raise RowError(f"the passage does not support the pair ({question!r} -> {answer!r})")
    if label.startswith("partially") and not keep_partial:
        raise RowError(f"the passage only partially supports the pair ({question!r} -> {answer!r})")
    if not label.startswith(("attributable", "partially")):
        raise RowError(f"the verification answer cannot be read: {label[:60]!r}")
    rid = item_id or "qa." + hashlib.sha256(passage.encode()).hexdigest()[:10]
    return QAItem(rid, title, question, (answer,))
