"""Named benchmark datasets: ``--data wikimia:64`` instead of a path.

A name is ``NAME[:SPLIT]``. WikiMIA ships with the package (MIT, see
``copyprobe/data/wikimia/README.md``); the others load from the user's copy under
``$COPYPROBE_DATA_DIR`` (default ``~/.cache/copyprobe/data``), and DE-COP's sets also
from the Hugging Face hub when the machine has network. Missing data raises a
:class:`~copyprobe.errors.DataError` whose one line says which file to put where.

=====================  ===========================================================
name                   where the data comes from
=====================  ===========================================================
wikimia:32|64|128|256  bundled (Shi et al. 2024)
arxivtection           ``$COPYPROBE_DATA_DIR/arxivtection.csv`` or hub avduarte333/arXivTection
booktection            ``$COPYPROBE_DATA_DIR/booktection.csv`` or hub avduarte333/BookTection
copybench:TASK         ``$COPYPROBE_DATA_DIR/copybench/data.TASK.json`` (for ``copyprobe copying``)
mimir:SUBSET[:SPLIT]   ``$COPYPROBE_DATA_DIR/mimir/SUBSET/SPLIT.jsonl`` (rows ``member``, ``nonmember``)
=====================  ===========================================================

DE-COP rows (``Example_A..Example_D``, ``Answer``, ``ID``, ``Label``) become one passage
per row: the text is the verbatim option (the one ``Answer`` names), all four options and
the answer stay in ``meta`` (so ``decop`` uses them and sends no generation request), and
the document is ``ID``. :func:`~copyprobe.data.tables.apply_decop_layout` does the same to any
file read by path. This module reads files with :mod:`copyprobe.data.tables` and never imports
:mod:`copyprobe.data.readers` (which imports it): the dependency runs one way.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from copyprobe.data.example import Example
from copyprobe.data.tables import (
    DECOP_COLUMNS,  # noqa: F401 - datasets' names for them, kept
    LETTERS,  # noqa: F401
    Dataset,
    _build,
    _union_columns,
    apply_decop_layout,
    file_record,
    read_table,
)
from copyprobe.errors import ConfigError, DataError
from copyprobe.hub import hub_unreachable, offline_by_env

DATA_DIR_ENV = "COPYPROBE_DATA_DIR"
WIKIMIA_DIR = Path(__file__).parent / "wikimia"
MIMIR_SUBSETS = ("arxiv", "dm_mathematics", "github", "hackernews", "pile_cc", "pubmed_central",
                 "wikipedia_(en)", "full_pile")
MIMIR_DEFAULT_SPLIT = "ngram_13_0.8"
COPYBENCH_FILES = {"literal": "data.literal.json", "nonliteral": "data.nonliteral.json", "qa": "data.qa.json"}


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    splits: tuple[str, ...]  # accepted SPLITs; () = none; ("*",) = any (mimir subsets)
    default_split: str | None
    command: str  # which command reads it: "detect" (passages) or "copying"
    size: str
    license: str
    source: str
    member: str  # what label 1 means, and for which models
    caveats: str
    loader: Callable[[str | None, str | None], Any]  # (split, split2) -> Dataset / CopySet

    @property
    def spelled(self) -> str:
        if self.name == "mimir":
            return "mimir:SUBSET[:SPLIT]"
        if self.splits:
            return f"{self.name}:{'|'.join(self.splits)}"
        return self.name


def data_dir() -> Path:
    """Where the user's copies of non-bundled datasets live."""
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else Path("~/.cache/copyprobe/data").expanduser()


def _where(rel: str) -> str:
    if os.environ.get(DATA_DIR_ENV):
        return f"${DATA_DIR_ENV}/{rel} (= {data_dir() / rel})"
    return f"{data_dir() / rel} (or under ${DATA_DIR_ENV})"


# -- loaders -------------------------------------------------------------------------

def _load_wikimia(split: str | None, _extra: str | None):
    path = WIKIMIA_DIR / f"{split}.jsonl"
    dataset = read_table(path)
    return replace(dataset, path=f"wikimia:{split}")


def _hub_allowed() -> bool:
    return not offline_by_env("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "COPYPROBE_OFFLINE") and hub_unreachable() is None


def _hub_rows(hub_id: str, name: str | None = None, split: str = "train") -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise DataError(f"loading {hub_id} from the Hugging Face hub needs the 'datasets' package "
                        f"(pip install datasets)") from None
    try:
        ds = datasets.load_dataset(hub_id, name, split=split)
    except Exception as exc:  # the hub raises many types
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot load {hub_id} from the Hugging Face hub: {first}") from None
    return ds.to_list()


def _decop_loader(name: str, hub_id: str):
    def load(_split: str | None, _extra: str | None):
        local = [data_dir() / f"{name}.csv", data_dir() / name / f"{name}.csv",
                 data_dir() / f"{name}.parquet"]
        for path in local:
            if path.is_file():
                dataset = apply_decop_layout(read_table(path))
                return replace(dataset, path=f"{name} ({path})")
        if not _hub_allowed():
            raise DataError(f"{name} is not on this machine: put its CSV (columns Example_A..Example_D, "
                            f"Answer, ID, Label) at {_where(name + '.csv')}, or allow network to load "
                            f"the hub dataset {hub_id}")
        raw = _hub_rows(hub_id)
        digest = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()
        rows = [(f"row {i}", r) for i, r in enumerate(raw)]
        dataset = _build(rows, _union_columns(raw), f"{name} (hub {hub_id})", digest, None, None, None, None)
        return apply_decop_layout(dataset)

    return load


def _load_copybench(split: str | None, _extra: str | None) -> tuple[Path, str]:
    """(file, task): copyprobe.copying reads it (the data layer does not import copying)."""
    fname = COPYBENCH_FILES[split]
    path = data_dir() / "copybench" / fname
    if not path.is_file():
        raise DataError(f"copybench:{split} is not on this machine: put {fname} (from the data/ folder "
                        f"of github.com/chentong0/copy-bench) at {_where('copybench/' + fname)}")
    return path, split


def _load_mimir(subset: str | None, split: str | None):
    split = split or MIMIR_DEFAULT_SPLIT
    candidates = [data_dir() / "mimir" / subset / f"{split}{ext}" for ext in (".jsonl", ".json")]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise DataError(f"mimir:{subset}:{split} is not on this machine: put a JSON lines file with "
                        f"fields member and nonmember (the hub dataset iamgroot42/mimir, subset "
                        f"{subset}, split {split}) at {_where(f'mimir/{subset}/{split}.jsonl')}")
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="strict")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
            records = ([{"member": m, "nonmember": None} for m in data.get("member", [])]
                       + [{"member": None, "nonmember": n} for n in data.get("nonmember", [])]
                       if isinstance(data, dict) else data)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, AttributeError) as exc:
        raise DataError(f"{path}: not MIMIR JSON ({exc})") from None
    examples = []
    for i, record in enumerate(records):
        if not isinstance(record, dict) or not ({"member", "nonmember"} & set(record)):
            raise DataError(f"{path}: row {i} has no member / nonmember field")
        for key, label in (("member", 1), ("nonmember", 0)):
            value = record.get(key)
            if isinstance(value, str) and value.strip():
                examples.append(Example(id=f"{key}:{i}", text=value, label=label))
    if not examples:
        raise DataError(f"{path}: no member or nonmember texts")
    return Dataset(examples=examples, path=f"mimir:{subset}:{split}", sha256=hashlib.sha256(raw).hexdigest(),
                   n_rows=len(records), n_skipped=0,
                   columns={"text": "member/nonmember", "label": "member/nonmember", "doc_id": None, "id": None},
                   has_labels=True, has_documents=False, files=[file_record(str(path), raw)])


_DECOP_MEMBER = ("label 1 = {what} published before 2022 (possible members, DE-COP section 3); 0 = "
                 "published in 2023 or later (non-members for models with a cut-off before 2023, e.g. "
                 "LLaMA-2, Mistral, GPT-3.5)")

REGISTRY: dict[str, DatasetInfo] = {
    "wikimia": DatasetInfo(
        name="wikimia", splits=("32", "64", "128", "256"), default_split=None, command="detect",
        size="776 / 542 / 250 / 82 passages (32 / 64 / 128 / 256 words), about half members",
        license="MIT (nlp-titech/samia redistribution of swj0419/WikiMIA), bundled",
        source="Shi et al. 2024, Detecting Pretraining Data from Large Language Models",
        member="label 1 = Wikipedia event pages from before 2017; 0 = events from 2023 on; built for "
               "models trained before 2023 (Pythia, LLaMA, OPT, GPT-NeoX)",
        caveats="members and non-members differ in time: a model-free classifier separates them "
                "(Das, Zhang & Tramer 2024: AUC 0.99), so AUCs may measure the date shift; models "
                "trained after 2023 (SmolLM2, Gemma 3) may have seen the 'non-members'",
        loader=_load_wikimia,
    ),
    "arxivtection": DatasetInfo(
        name="arxivtection", splits=(), default_split=None, command="detect",
        size="50 arXiv papers (half from 2023, half from before 2022), passages of about 128 tokens",
        license="see the hub card of avduarte333/arXivTection (not shipped)",
        source="DE-COP (Duarte et al., ICML 2024); hub avduarte333/arXivTection",
        member=_DECOP_MEMBER.format(what="arXiv papers"),
        caveats="members and non-members differ in publication date and topic; passage = the "
                "verbatim option, the 3 paraphrases are used by decop (no generation)",
        loader=_decop_loader("arxivtection", "avduarte333/arXivTection"),
    ),
    "booktection": DatasetInfo(
        name="booktection", splits=(), default_split=None, command="detect",
        size="passages of 165 books (DE-COP section 3), each with 3 paraphrases",
        license="copyrighted book excerpts; see the hub card of avduarte333/BookTection (not shipped)",
        source="DE-COP (Duarte et al., ICML 2024); hub avduarte333/BookTection",
        member=_DECOP_MEMBER.format(what="books"),
        caveats="members and non-members differ in publication date; passage = the verbatim option, "
                "the 3 paraphrases are used by decop (no generation)",
        loader=_decop_loader("booktection", "avduarte333/BookTection"),
    ),
    "copybench": DatasetInfo(
        name="copybench", splits=("literal", "nonliteral", "qa"), default_split=None, command="copying",
        size="literal / non-literal / QA items on 16 copyrighted books (CopyBench)",
        license="see github.com/chentong0/copy-bench (not shipped; excerpts of copyrighted books)",
        source="Chen et al., EMNLP 2024, CopyBench",
        member="not a membership set: copyprobe copying measures reproduction of the protected books",
        caveats="for `copyprobe copying`, not `detect`",
        loader=_load_copybench,
    ),
    "mimir": DatasetInfo(
        name="mimir", splits=("*",), default_split=None, command="detect",
        size="about 1000 members and 1000 non-members per subset and split (Duan et al. 2024)",
        license="subsets of the Pile, see the hub card of iamgroot42/mimir (not shipped)",
        source="Duan et al. 2024, Do Membership Inference Attacks Work on LLMs?; hub iamgroot42/mimir",
        member="label 1 = the Pile train split, 0 = its test split: members for Pythia / GPT-NeoX "
               "(trained on the Pile); SUBSET: " + ", ".join(MIMIR_SUBSETS)
               + f"; SPLIT default {MIMIR_DEFAULT_SPLIT} (13-gram overlap < 0.8)",
        caveats="same distribution by construction (low blind AUC expected); means little for "
                "models not trained on the Pile",
        loader=_load_mimir,
    ),
}


def known_names() -> str:
    return ", ".join(info.spelled for info in REGISTRY.values())


def parse_name(spec: str) -> tuple[DatasetInfo, str | None, str | None] | None:
    """(info, split, second split) for a dataset name, None when ``spec`` names none;
    a known name with a bad split raises."""
    name, _, rest = spec.partition(":")
    info = REGISTRY.get(name.strip().lower())
    if info is None:
        return None
    split, _, extra = rest.partition(":") if rest else (None, "", "")
    extra = extra or None
    if info.name == "mimir":
        if not split:
            raise DataError(f"mimir needs a subset: mimir:SUBSET[:SPLIT], subsets {', '.join(MIMIR_SUBSETS)}")
        return info, split, extra
    if extra is not None:
        raise DataError(f"{spec!r}: {info.name} takes at most one ':SPLIT' ({info.spelled})")
    if info.splits:
        if split is None:
            if info.default_split is None:
                raise DataError(f"{info.name} needs a split: {info.spelled}")
            split = info.default_split
        if split not in info.splits:
            raise DataError(f"{info.name} has no split {split!r}: {info.spelled}")
    elif split:
        raise DataError(f"{info.name} has no splits, got {spec!r}")
    return info, split, extra


def is_dataset_name(spec: Any) -> bool:
    return isinstance(spec, str) and spec.partition(":")[0].strip().lower() in REGISTRY


def load_named(spec: str, *, command: str = "detect", split: str | None = None):
    """The dataset ``spec`` names: a :class:`~copyprobe.data.readers.Dataset`, or for
    copybench the (file, task) that ``copyprobe.copying.data.load_copyset`` reads.
    ``split`` is another way to give the SPLIT part."""
    if split is not None and ":" not in spec:
        spec = f"{spec}:{split}"
    elif split is not None:
        raise ConfigError(f"give the split once: {spec!r} already names one, and split={split!r}")
    parsed = parse_name(spec)
    if parsed is None:
        raise DataError(f"{spec!r} is neither an existing file nor a known dataset; datasets: {known_names()}")
    info, part, extra = parsed
    if info.command != command:
        raise DataError(f"{info.name} is data for `copyprobe {info.command}`, not `{command}`")
    return info.loader(part, extra)


def describe() -> list[dict[str, str]]:
    """One row per dataset for ``copyprobe datasets``."""
    rows = []
    for info in REGISTRY.values():
        rows.append({"name": info.spelled, "command": info.command, "size": info.size,
                     "license": info.license, "source": info.source, "member": info.member,
                     "caveats": info.caveats})
    return rows
