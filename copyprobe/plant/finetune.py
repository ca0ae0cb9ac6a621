"""Fine-tune a base model on the member passages and save a plant directory.

Layout of ``OUT``::

    data.jsonl       id, text, label (1 = member, 0 = non-member), doc_id: every corpus passage
                     (background passages, trained on but never labelled, are not in it)
    model/           the fine-tuned model + tokenizer (save_pretrained): ``hf:OUT/model``
    epochs/<k>/      with save_epochs: the model after epoch k (k < epochs)
    plant.json       split, seed, base model, training settings, losses, timings, versions
    train_log.jsonl  one line per optimizer step: step, epoch, batch, loss, lr, seconds, tokens
    checkpoint/      while training only: state after each finished epoch (and on Ctrl-C)

Rerunning with the same arguments resumes from ``checkpoint/`` (a checkpoint that cannot
be read, or that was written with other settings, is discarded with a warning and
training restarts from the base model); once the plant is done, rerunning reuses it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copyprobe.backends.hf.loading import (
    check_gguf_file,
    context_length,
    hash_weights,
    load_config,
    load_gguf,
    load_pretrained,
    load_tokenizer,
    resolve_device,
)
from copyprobe.backends.specs import ALIASES, PREFIXES, LocalModel, resolve_local
from copyprobe.errors import ConfigError, DataError, Interrupted, SettingError, one_line
from copyprobe.params import SEED
from copyprobe.plant.background import (OVERLAP_WORDS, Background, BackgroundText, cut_background, epoch_order,
                                        overlapping, read_background, select_background)
from copyprobe.plant.corpus import Corpus, CorpusText, cut_corpus, read_corpus, tokenizer_counter
from copyprobe.plant.split import split_documents, split_passages
from copyprobe.record import RunRecord, holding, utc_now, versions, write_json, write_jsonl, write_run
from copyprobe.run_files import read_checked

PLANT_FORMAT = 1
LORA_R_DEFAULT = 8
# bounds checked before anything is written: beyond them an epoch's order alone would not fit
# in memory (Meeus et al.'s strongest copyright traps were repeated 1,000 times)
MAX_MEMBER_REPEATS = 100_000
MAX_EPOCH_ITEMS = 20_000_000  # passages (members x repeats + background) in one epoch's order
BACKGROUND_EVAL_PASSAGES = 64  # background passages whose loss is measured before and after training
# Training has no float64 statistics, so unlike scoring it may run on Apple's MPS.
ACCELERATORS = ("cuda", "mps")


def _warn(message: str) -> None:
    print(f"copyprobe: warning: {message}", file=sys.stderr)


# -- base model -------------------------------------------------------------------------
# Found, loaded and fingerprinted by the backends' code (backends/specs.py and
# backends/hf/loading.py), so plant and detection see a model spec the same way.

def resolve_model(spec: str) -> LocalModel:
    """Where the weights of a model spec are on disk (only local, trainable models): an
    hf: directory, a GGUF file, a bundled model, or a bare directory / .gguf path."""
    spec = spec.strip()
    if spec.startswith(("openai:", "http:", "https:")):
        raise ConfigError(f"cannot fine-tune {spec!r}: plant needs local weights (hf:DIR, gguf:FILE or a bundled model)")
    if not spec.startswith(PREFIXES) and spec not in ALIASES:
        path = Path(spec).expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            return LocalModel(spec, "hf", str(path))
        if path.is_file() and path.suffix.lower() == ".gguf":
            return LocalModel(spec, "gguf", str(path))
        raise ConfigError(
            f"unknown model spec {spec!r} for plant (use hf:DIR, gguf:FILE, smollm2-135m-instruct or gemma-3-270m)"
        )
    source = resolve_local(spec)
    if source.kind == "gguf":
        check_gguf_file(source.path)
        return source
    path = Path(source.path).expanduser()  # a local directory: plant does not fetch hub ids
    if not path.is_dir():
        raise ConfigError(f"model directory not found: {path} (hf:DIR needs a save_pretrained directory)")
    return LocalModel(spec, "hf", str(path))


def load_model(source: LocalModel):
    """A float32 causal LM (GGUF weights de-quantized, hence trainable)."""
    import torch

    if source.kind == "gguf":
        return load_gguf(source.path, torch.float32)[0]
    return load_pretrained(source.path, torch.float32)[0]


# -- settings, files --------------------------------------------------------------------

@dataclass
class PlantSettings:
    model: str
    corpus: str
    out: str
    passage_tokens: int = 128
    member_fraction: float = 0.5
    seed: int = 0
    epochs: int = 1
    lr: float = 5e-5
    batch_size: int = 4
    lora: bool = False
    lora_r: int = LORA_R_DEFAULT
    lora_alpha: int | None = None  # default 2 * lora_r
    max_steps: int | None = None
    split_by: str = "passage"  # or "document"
    save_epochs: bool = False  # also save the model after each epoch but the last: OUT/epochs/<k>/
    text_column: str | None = None
    background: str | None = None  # text trained on with the members, never labelled (plant/background.py)
    dilution: float | None = None  # take background tokens >= dilution x the members' tokens; None: all of it
    member_repeats: int = 1  # copies of each member per epoch
    device: str = "auto"
    eval_loss: bool = True
    force: bool = False
    progress: bool = True

    def validate(self) -> None:
        if self.passage_tokens < 8:
            raise SettingError("passage_tokens", f"must be at least 8, got {self.passage_tokens}")
        if not 0.0 < self.member_fraction < 1.0:
            raise SettingError("member_fraction", f"must be between 0 and 1 (exclusive), got {self.member_fraction}")
        if self.epochs < 1:
            raise SettingError("epochs", f"must be at least 1, got {self.epochs}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise SettingError("lr", f"must be a positive number, got {self.lr}")
        if self.batch_size < 1:
            raise SettingError("batch_size", f"must be at least 1, got {self.batch_size}")
        if self.lora_r < 1:
            raise SettingError("lora_r", f"must be at least 1, got {self.lora_r}")
        if self.lora_r != LORA_R_DEFAULT and not self.lora:  # would be ignored: full fine-tuning has no rank
            raise SettingError("lora_r", f"{self.lora_r} applies only to LoRA training, which is off: turn LoRA on, "
                                         f"or leave the rank out")
        seed_problem = SEED.reason(self.seed)  # torch and numpy seeds fit in 32 bits, as detect's do
        if seed_problem is not None:
            raise SettingError("seed", seed_problem)
        if self.split_by not in ("passage", "document"):
            raise SettingError("split_by", f"must be passage or document, got {self.split_by!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise SettingError("max_steps", f"must be at least 1, got {self.max_steps}")
        if not 1 <= self.member_repeats <= MAX_MEMBER_REPEATS:
            raise SettingError("member_repeats", f"must be between 1 and {MAX_MEMBER_REPEATS:,}, got "
                                                 f"{self.member_repeats:,}")
        if self.dilution is not None:
            if not (self.dilution > 0 and math.isfinite(self.dilution)):
                raise SettingError("dilution", f"must be a positive number, got {self.dilution}")
            if self.background is None:
                raise SettingError("dilution", "needs a background (the text the members are diluted with)")

    def training(self) -> dict[str, Any]:
        """The settings that determine the trained weights (recorded and compared on rerun)."""
        return {
            "method": "lora" if self.lora else "full",
            "epochs": self.epochs,
            "lr": self.lr,
            "batch_size": self.batch_size,
            "max_steps": self.max_steps,
            "lora_r": self.lora_r if self.lora else None,
            "lora_alpha": (self.lora_alpha or 2 * self.lora_r) if self.lora else None,
            "optimizer": "AdamW (weight_decay 0, constant lr, grad clip 1.0)",
            "seed": self.seed,
        }


# -- training ---------------------------------------------------------------------------

def _oom_error(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, MemoryError):
        return True
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


@contextmanager
def _out_of_memory_hint(batch_size: int, device: str, what: str) -> Iterator[None]:
    """Running out of memory while ``what`` becomes a one-line ConfigError saying what to change."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - anything else goes on unchanged
        if not _oom_error(exc):
            raise
        hint = f"try a smaller batch_size (e.g. {max(1, batch_size // 2)})" if batch_size > 1 else \
            "try lora, shorter passage_tokens or a machine with more memory"
        raise ConfigError(f"out of memory while {what} with batch_size {batch_size} on {device}; {hint}") from None


def _batches(token_ids: list[list[int]], order: list[int], batch_size: int) -> list[list[int]]:
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _collate(token_ids: list[list[int]], idx: list[int], pad_id: int, device: str):
    import torch

    width = max(len(token_ids[i]) for i in idx)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(idx), width), dtype=torch.long)
    for row, i in enumerate(idx):
        seq = token_ids[i]
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return ids.to(device), mask.to(device), labels.to(device)


def mean_loss(model, token_ids: list[list[int]], indices: list[int], pad_id: int, device: str,
              batch_size: int) -> float | None:
    """Token-weighted mean loss (nats/token) of the given passages."""
    import torch
    import torch.nn.functional as F

    if not indices:
        return None
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for idx in _batches(token_ids, indices, batch_size):
            ids, mask, labels = _collate(token_ids, idx, pad_id, device)
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            target = labels[:, 1:]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                   ignore_index=-100, reduction="sum")
            total += float(loss)
            count += int((target != -100).sum())
    if was_training:
        model.train()
    return total / max(count, 1)


def _train_step(model, optimizer, batch, autocast) -> float:
    import torch

    ids, mask, labels = batch
    with autocast():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def _save_model(model, tokenizer, target: Path) -> None:
    """save_pretrained into a temporary sibling, then rename: never a half-written model."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)


def _save_snapshot(model, tokenizer, target: Path, lora: bool) -> None:
    """The model as it is after an epoch (LoRA: merged into a copy; training goes on)."""
    import copy

    if lora:
        merged = copy.deepcopy(model).merge_and_unload()
        merged.to("cpu")
        _save_model(merged, tokenizer, target)
        del merged
    else:
        _save_model(model, tokenizer, target)


def _trainable_state(model) -> dict[str, Any]:
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items() if k in names}


def _save_checkpoint(ckpt_dir: Path, key: str, model, optimizer, epoch: int, step_in_epoch: int,
                     global_step: int) -> None:
    import torch

    ckpt_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "settings_key": key,
        "epoch": epoch,
        "step_in_epoch": step_in_epoch,
        "global_step": global_step,
        "trainable": _trainable_state(model),
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
    }
    tmp = ckpt_dir / ".state.pt.tmp"
    torch.save(state, tmp)
    os.replace(tmp, ckpt_dir / "state.pt")
    write_json(ckpt_dir / "meta.json", {"settings_key": key, "epoch": epoch,
                                        "step_in_epoch": step_in_epoch, "global_step": global_step,
                                        "saved": utc_now()})


def _load_checkpoint(ckpt_dir: Path, key: str) -> dict[str, Any] | None:
    """The checkpoint state if it matches ``key``; None (after discarding it) otherwise."""
    import torch

    if not ckpt_dir.exists():
        return None
    try:
        meta = json.loads((ckpt_dir / "meta.json").read_text())
        if meta.get("settings_key") != key:
            raise ValueError("written with other settings")
        state = torch.load(ckpt_dir / "state.pt", map_location="cpu", weights_only=False)
        if state.get("settings_key") != key:
            raise ValueError("state and meta disagree")
        return state
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is discarded
        _warn(f"discarding incompatible checkpoint in {ckpt_dir} ({one_line(exc)}); training restarts from the base model")
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        return None


# -- the whole plant --------------------------------------------------------------------

def _settings_key(settings: PlantSettings, fingerprint: str, corpus_sha: str, background_sha: str | None) -> str:
    payload: dict[str, Any] = {
        "format": PLANT_FORMAT,
        "model": settings.model,
        "fingerprint": fingerprint,
        "corpus_sha256": corpus_sha,
        "passage_tokens": settings.passage_tokens,
        "member_fraction": settings.member_fraction,
        "split_by": settings.split_by,
        "save_epochs": settings.save_epochs,
        "text_column": settings.text_column,
        "training": settings.training(),
    }
    # only when set, so that plants made before these settings existed keep their key
    if background_sha is not None:
        payload["background"] = {"sha256": background_sha,
                                 "dilution": None if settings.dilution is None else float(settings.dilution)}
    if settings.member_repeats != 1:
        payload["member_repeats"] = settings.member_repeats
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def data_rows(passages, member_set: set[int], split_by: str, seed: int) -> list[dict[str, Any]]:
    """Rows of data.jsonl. ``source`` is the document a passage was cut from. ``doc_id``
    must name units that are members or non-members as a whole (document-level metrics
    need that): with a document split it is the source; with a passage split it is the
    source plus an opaque tag that differs between the source's members and non-members,
    so each book yields two pseudo-documents (its member and its non-member passages).
    The tag is a hash of seed, source and label: it reveals nothing about the label."""
    has_docs = any(p.doc_id is not None for p in passages)
    rows = []
    for i, p in enumerate(passages):
        label = 1 if i in member_set else 0
        row: dict[str, Any] = {"id": p.id, "text": p.text, "label": label}
        if has_docs:
            source = p.doc_id if p.doc_id is not None else p.id
            if split_by == "document":
                row["doc_id"] = source
            else:
                tag = hashlib.sha256(f"{seed}\x1f{source}\x1f{label}".encode()).hexdigest()[:6]
                row["doc_id"] = f"{source}#{tag}"
            row["source"] = source
        rows.append(row)
    return rows


@dataclass
class _Out:
    """The plant directory as found before anything loads: whether it exists, and the
    plant.json in it (read unless it is to be replaced)."""

    path: Path
    exists: bool
    previous: dict[str, Any] | None = None


def _inspect_out(out: Path, force: bool) -> _Out:
    """What is in ``out``, read without writing anything: refuses a path that is not a
    directory or cannot become one, a directory holding files that are not a plant, and a
    plant.json that cannot be read (unless ``force`` replaces it). Whether a plant found is
    this one needs the settings key, which :func:`_prepare_out` compares once it is known."""
    if not out.exists():
        parent = out.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise ConfigError(f"cannot create the plant directory {out}: {parent} is not a directory")
        try:  # a directory made and removed at once: permissions alone do not tell (root, /proc, read-only mounts)
            os.rmdir(tempfile.mkdtemp(prefix=".copyprobe-probe-", dir=parent))
        except OSError as exc:
            raise ConfigError(f"cannot create the plant directory {out}: {parent}: {exc.strerror or exc}") from None
        return _Out(out, False)
    if not out.is_dir():
        raise ConfigError(f"the plant directory {out} exists and is not a directory")
    record = out / "plant.json"
    if not record.is_file():
        if any(out.iterdir()):
            raise ConfigError(f"{out} exists, is not empty and is not a plant directory; choose another plant directory")
        return _Out(out, True)
    return _Out(out, True, None if force else read_checked(record, what="plant directory"))


def _prepare_out(found: _Out, key: str, force: bool) -> tuple[str, dict[str, Any] | None]:
    """('new' | 'resume' | 'done', the plant.json found), from what :func:`_inspect_out`
    found. Refuses to overwrite a plant made with other settings (unless ``force``)."""
    out, previous = found.path, found.previous
    if not found.exists:
        try:
            out.mkdir(parents=True)
        except OSError as exc:  # changed since it was inspected
            raise ConfigError(f"cannot create the plant directory {out}: {exc.strerror or exc}") from None
        return "new", None
    if force:
        return _replace(out)
    if previous is None:  # an empty directory
        return "new", None
    if previous["settings_key"] == key:
        if previous["status"] == "done" and (out / "model" / "config.json").is_file():
            return "done", previous
        return "resume", previous
    if previous["status"] == "training" and not any((out / name).exists() for name in ("checkpoint", "model")):
        return _replace(out)  # a plant stopped before its first checkpoint: nothing trained to keep
    raise SettingError(
        "force", f"is not set, and {out} holds a plant made with other settings (model, corpus or training); "
                 "choose another plant directory, or set it to replace that plant"
    )


def _replace(out: Path) -> tuple[str, None]:
    """Remove a plant's files from ``out`` (and nothing else there)."""
    for name in ("model", "epochs", "checkpoint", "data.jsonl", "train_log.jsonl", "plant.json", "run.json"):
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    return "new", None


def _progress_bar(total: int, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="plant: training", unit="step",
                disable=not enabled, file=sys.stderr, dynamic_ncols=True)


def plant(settings: PlantSettings, *, command: list[str] | None = None,
          log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict[str, Any]:
    """Build (or resume, or reuse) a plant directory; returns the content of plant.json.

    Four steps: prepare (model files, tokenizer, corpus, background), split (members /
    non-members, the background passages to train on, data.jsonl), train (or resume
    training), record (plant.json and run.json). The plant directory, the corpus and the
    background are checked before the model loads; nothing is written before the corpus
    is found splittable and the background long enough."""
    settings.validate()
    started = time.perf_counter()
    source = resolve_model(settings.model)
    # the plant directory, the corpus and the background need no model to be found wrong:
    # each is refused before the tokenizer and the weights load (tens of seconds)
    found = _inspect_out(Path(settings.out).expanduser(), settings.force)
    out = found.path
    corpus_text = read_corpus(settings.corpus, text_column=settings.text_column)
    background_text = None if settings.background is None else \
        read_background(settings.background, text_column=settings.text_column)
    prepared = _prepare(settings, source, corpus_text, background_text)
    members, nonmembers = _split(settings, prepared.corpus)
    token_ids, n_truncated = _tokenize(prepared, [p.text for p in prepared.corpus.passages])
    untrainable = [p.id for p, ids in zip(prepared.corpus.passages, token_ids) if len(ids) < 2]
    if untrainable:  # no next token to predict: such a member would be a member in name only
        raise DataError(f"{len(untrainable)} corpus passage(s) are a single token (first: {untrainable[0]!r}); "
                        "training predicts each token from the ones before it, so nothing is learned from "
                        "them: remove them or join them to longer ones")
    n_shared = _nonmembers_sharing_runs(prepared.corpus, members, nonmembers)
    if n_shared:
        _warn(f"{n_shared} non-member passage(s) share a run of {OVERLAP_WORDS} words with a member passage "
              "(boilerplate, a repeated verse): training on the member trains on part of them, so they are "
              "labelled non-members but were partly seen, and detection results on them read low")
    if n_truncated:
        _warn(f"{n_truncated} passage(s) are longer than the model context ({prepared.context} tokens) and were "
              "truncated for training; detection still sees their full text")
    chosen = _choose_background(settings, prepared, sum(len(token_ids[i]) for i in members))
    per_epoch = len(members) * settings.member_repeats + (len(chosen.token_ids) if chosen else 0)
    if per_epoch > MAX_EPOCH_ITEMS:  # before the plant directory is touched
        raise SettingError("member_repeats", f"{settings.member_repeats:,} makes {per_epoch:,} passages an epoch "
                                             f"({len(members):,} members x {settings.member_repeats:,}"
                                             f"{' + background' if chosen else ''}), more than the "
                                             f"{MAX_EPOCH_ITEMS:,} one epoch's order can hold; use fewer repeats")
    background_sha = prepared.background.sha256 if prepared.background is not None else None
    key = _settings_key(settings, prepared.fingerprint, prepared.corpus.sha256, background_sha)
    # two plants into one directory would train over each other's checkpoint: the second is
    # refused (held before _prepare_out when the directory is there, else once it is made)
    with holding(out):
        state_of_out, previous = _prepare_out(found, key, settings.force)
        with holding(out):
            if state_of_out == "done":
                log(f"plant: {out} already holds this plant (same model, corpus and settings); reusing it")
                return {**previous, "reused": True}
            resume_from = previous if state_of_out == "resume" else None
            # data.jsonl first: an interrupted run still has its labelled passages (never the background)
            write_jsonl(out / "data.jsonl",
                        data_rows(prepared.corpus.passages, set(members), settings.split_by, settings.seed))
            first = len(token_ids)
            mix = _Mix(members, list(range(first, first + len(chosen.token_ids))) if chosen else [],
                       settings.member_repeats)
            token_ids = token_ids + (chosen.token_ids if chosen else [])
            record = _first_record(settings, prepared, out, key, command, members, nonmembers, n_truncated)
            record["split"]["n_nonmembers_sharing_member_runs"] = n_shared
            record["background"] = _background_record(settings, prepared.background, chosen)
            record["exposure"] = _exposure_record(settings, mix, token_ids)
            write_json(out / "plant.json", record)  # an interrupted run says what it was doing
            trained = _train(settings, prepared, out, key, token_ids, mix, nonmembers, record, resume_from, log)
            return _final_record(settings, out, record, trained, token_ids, members, started)


@dataclass
class _Prepared:
    """The base model's files and tokenizer, the corpus cut into passages, the background."""

    source: LocalModel
    tokenizer: Any
    context: int | None
    corpus: Corpus
    fingerprint: str
    background: Background | None = None


def _prepare(settings: PlantSettings, source: LocalModel, corpus_text: CorpusText,
             background_text: BackgroundText | None) -> _Prepared:
    """The tokenizer and the model's fingerprint loaded, the corpus and background (read
    already) cut into passages with it."""
    tokenizer = load_tokenizer(source.kind, source.path)
    context = context_length(load_config(source.kind, source.path))
    if context is not None and settings.passage_tokens > context:
        raise SettingError("passage_tokens", f"{settings.passage_tokens} is longer than the model context "
                                             f"({context} tokens); use at most {context}")
    count = tokenizer_counter(tokenizer)
    corpus = cut_corpus(corpus_text, settings.passage_tokens, count)
    background = None
    if background_text is not None:
        background = cut_background(background_text, settings.passage_tokens, count, [p.text for p in corpus.passages])
        if background.n_overlap:
            _warn(f"{background.n_overlap} background passage(s) overlap the corpus (a shared run of "
                  f"{OVERLAP_WORDS} words) and are not trained on")
    return _Prepared(source, tokenizer, context, corpus, hash_weights(source.kind, source.path), background)


def _nonmembers_sharing_runs(corpus: Corpus, members: list[int], nonmembers: list[int]) -> int:
    """How many non-members hold part of a run of OVERLAP_WORDS words that a member holds:
    exact duplicates are dropped when the corpus is read, near ones are only counted (which
    to drop is the user's choice of corpus, and dropping changes the split)."""
    texts = [p.text for p in corpus.passages]
    return sum(overlapping([texts[i] for i in nonmembers], [texts[i] for i in members], running=False))


def _split(settings: PlantSettings, corpus: Corpus) -> tuple[list[int], list[int]]:
    """(member, non-member) passage indices, drawn with the settings' seed."""
    if settings.split_by == "document":
        return split_documents([p.doc_id for p in corpus.passages], settings.member_fraction, settings.seed)
    return split_passages(corpus.passages, settings.member_fraction, settings.seed)


def _tokenize(prepared: _Prepared, texts: list[str]) -> tuple[list[list[int]], int]:
    """Token ids per text as trained on, cut to the model context: (ids, how many were cut)."""
    max_len = prepared.context or 10**9
    token_ids: list[list[int]] = []
    n_truncated = 0
    for text in texts:
        ids = prepared.tokenizer(text)["input_ids"]
        if len(ids) > max_len:
            ids = ids[:max_len]
            n_truncated += 1
        token_ids.append(ids)
    return token_ids, n_truncated


@dataclass
class _Chosen:
    """The background passages trained on: indices into Background.passages (seeded
    order), their token ids, and the dilution they were taken for."""

    indices: list[int]
    token_ids: list[list[int]]
    n_truncated: int
    member_tokens: int
    target_tokens: float | None


def _choose_background(settings: PlantSettings, prepared: _Prepared, member_tokens: int) -> _Chosen | None:
    """Background passages in their seeded order up to ``dilution`` x ``member_tokens``
    tokens (all of them without a dilution); a SettingError when the background is too short."""
    background = prepared.background
    if background is None:
        return None
    truncated = 0

    def tokenize(texts: list[str]) -> list[list[int]]:
        nonlocal truncated
        ids, n = _tokenize(prepared, texts)
        truncated += n
        return ids

    target = settings.dilution * member_tokens if settings.dilution is not None else None
    indices, token_ids = select_background([p.text for p in background.passages], settings.seed, tokenize, target)
    total = sum(len(ids) for ids in token_ids)
    if target is not None and total < target:
        dropped = f" (after dropping {background.n_overlap} passages that overlap the corpus)" if background.n_overlap else ""
        # 1e308 x the member tokens is inf: no integer to print
        needed = f"{math.ceil(target)}" if target < 1e15 else f"{target:.3g}"
        raise SettingError("dilution", f"{settings.dilution:g} needs {needed} background tokens "
                                       f"({settings.dilution:g} x {member_tokens} member tokens), but the background "
                                       f"{background.path} has {total}{dropped}; use a longer background or a "
                                       "smaller dilution")
    if truncated:
        _warn(f"{truncated} background passage(s) are longer than the model context ({prepared.context} tokens) "
              "and were truncated for training")
    return _Chosen(indices, token_ids, truncated, member_tokens, target)


@dataclass
class _Mix:
    """What one epoch trains on (indices into the token ids): every member ``repeats``
    times and every chosen background passage once, in a seeded order per epoch."""

    members: list[int]
    background: list[int]
    repeats: int

    def order(self, settings: PlantSettings, epoch: int) -> list[int]:
        return epoch_order(self.members, self.background, self.repeats, settings.batch_size, settings.seed, epoch)

    def steps_per_epoch(self, batch_size: int) -> int:
        return math.ceil((len(self.members) * self.repeats + len(self.background)) / batch_size)


def _background_record(settings: PlantSettings, background: Background | None,
                       chosen: _Chosen | None) -> dict[str, Any] | None:
    """plant.json's ``background``: where it came from and what of it was trained on."""
    if background is None or chosen is None:
        return None
    used = [{"n_passages_used": 0, "n_tokens_used": 0} for _ in background.sources]
    for i, ids in zip(chosen.indices, chosen.token_ids):
        counts = used[background.source_of[i]]
        counts["n_passages_used"] += 1
        counts["n_tokens_used"] += len(ids)
    n_tokens = sum(len(ids) for ids in chosen.token_ids)
    return {
        "path": str(settings.background),
        "sha256": background.sha256,
        "sources": [{**source, **counts} for source, counts in zip(background.sources, used)],
        "skipped_files": background.skipped,
        "n_passages_kept": len(background.passages),
        "n_duplicates_dropped": background.n_duplicates,
        "n_overlap_dropped": background.n_overlap,
        "n_passages": len(chosen.indices),
        "n_tokens": n_tokens,
        "n_truncated": chosen.n_truncated,
        "dilution_target": settings.dilution,
        "target_tokens": math.ceil(chosen.target_tokens) if chosen.target_tokens is not None else None,
        "n_eval_passages": min(BACKGROUND_EVAL_PASSAGES, len(chosen.indices)) if settings.eval_loss else 0,
        "selection": f"passages in a seeded order (seed {settings.seed}) until the target is reached"
                     if settings.dilution is not None else "all passages",
    }


def _exposure_record(settings: PlantSettings, mix: _Mix, token_ids: list[list[int]]) -> dict[str, Any]:
    """plant.json's ``exposure``: how often and among how much other text each member is seen."""
    member_tokens = sum(len(token_ids[i]) for i in mix.members)
    background_tokens = sum(len(token_ids[i]) for i in mix.background)
    per_epoch = member_tokens * mix.repeats
    return {
        "epochs": settings.epochs,
        "member_repeats": mix.repeats,
        "exposures_per_member": settings.epochs * mix.repeats,
        "member_passages": len(mix.members),
        "member_tokens_unique": member_tokens,
        "member_tokens_per_epoch": per_epoch,
        "background_passages_per_epoch": len(mix.background),
        "background_tokens_per_epoch": background_tokens,
        "dilution": round(background_tokens / member_tokens, 4) if member_tokens else None,
        "dilution_per_epoch": round(background_tokens / per_epoch, 4) if per_epoch else None,
        "passages_per_epoch": len(mix.members) * mix.repeats + len(mix.background),
        "steps_per_epoch": mix.steps_per_epoch(settings.batch_size),
        "max_steps": settings.max_steps,
        **_exposures_given(settings, mix),
    }


def _exposures_given(settings: PlantSettings, mix: _Mix) -> dict[str, Any]:
    """What a ``max_steps`` that ends training early leaves of the planned exposure: the
    members' fewest and most times trained on, and how many were never trained on (still
    labelled members: what was planned, not what happened). Counted from the same seeded
    batches that training draws; empty when every step runs."""
    steps_per_epoch = mix.steps_per_epoch(settings.batch_size)
    if settings.max_steps is None or settings.max_steps >= steps_per_epoch * settings.epochs:
        return {}
    seen = Counter({i: 0 for i in mix.members})
    left = settings.max_steps
    for epoch in range(settings.epochs):
        batches = _batches([], mix.order(settings, epoch), settings.batch_size)[:left]
        seen.update(i for batch in batches for i in batch if i in seen)
        left -= len(batches)
        if left <= 0:
            break
    counts = list(seen.values())
    return {"exposures_per_member": None, "exposures_given": {"min": min(counts), "max": max(counts)},
            "members_never_trained": sum(c == 0 for c in counts)}


def _first_record(settings: PlantSettings, prepared: _Prepared, out: Path, key: str, command: list[str] | None,
                  members: list[int], nonmembers: list[int], n_truncated: int) -> dict[str, Any]:
    """plant.json as written before training (status "training")."""
    source, corpus = prepared.source, prepared.corpus
    return {
        "format": PLANT_FORMAT,
        "status": "training",
        "created": utc_now(),
        "command": command,
        "settings_key": key,
        "base_model": {"spec": settings.model, "kind": source.kind, "path": str(source.path),
                       "fingerprint": prepared.fingerprint, "context": prepared.context},
        "model": f"hf:{out / 'model'}",
        "corpus": {"path": str(settings.corpus), "sources": corpus.sources, "skipped_files": corpus.skipped,
                   "sha256": corpus.sha256,
                   "n_passages": len(corpus.passages), "n_duplicates_dropped": corpus.n_duplicates,
                   "cut": corpus.cut, "passage_tokens": settings.passage_tokens if corpus.cut else None,
                   "n_truncated": n_truncated,
                   "n_documents": len({p.doc_id for p in corpus.passages if p.doc_id is not None})},
        "split": {"by": settings.split_by, "seed": settings.seed, "member_fraction": settings.member_fraction,
                  "n_members": len(members), "n_nonmembers": len(nonmembers)},
        "training": settings.training(),
        "versions": versions(),
    }


@dataclass
class _Trained:
    """What training did, for the record."""

    device: str
    steps: int
    steps_per_epoch: int
    losses_eval: dict[str, Any]
    seconds: dict[str, float]  # load_s, eval_s, train_s, save_s
    epoch_seconds: list[float]
    resumed_from_step: int | None
    peak_memory: dict[str, int | None]


@dataclass
class _Session:
    """The model being trained and what every step and every loss needs."""

    model: Any
    tokenizer: Any
    device: str
    pad_id: int
    autocast: Callable[[], Any]
    token_ids: list[list[int]]
    eval_batch: int


@dataclass
class _Position:
    """Where training stands: the epoch, the batches done in it, the steps done in all."""

    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0


def _trainable_model(settings: PlantSettings, prepared: _Prepared, device: str):
    """The base model on ``device``, with LoRA adapters when asked."""
    import torch

    torch.manual_seed(settings.seed)
    model = load_model(prepared.source)
    tokenizer = prepared.tokenizer
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    if settings.lora:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise ConfigError("lora needs the package peft (pip install peft)") from None
        config = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha or 2 * settings.lora_r,
                            lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
        model = get_peft_model(model, config)
    with _out_of_memory_hint(settings.batch_size, device, "moving the model to the device"):
        model.to(device)
    return model


def _open_session(settings: PlantSettings, prepared: _Prepared, token_ids: list[list[int]]) -> _Session:
    """The trainable model on the chosen device, its padding id and mixed precision (bf16 on CUDA when supported)."""
    import torch

    tokenizer = prepared.tokenizer
    # read before _trainable_model gives a tokenizer without one the end-of-text token for padding
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    device = resolve_device(settings.device, ACCELERATORS)
    model = _trainable_model(settings, prepared, device)
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        autocast = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    else:
        from contextlib import nullcontext as autocast  # type: ignore[assignment]
    return _Session(model, tokenizer, device, pad_id, autocast, token_ids, max(1, settings.batch_size))


def _losses(settings: PlantSettings, session: _Session, groups: dict[str, list[int]], what: str) -> dict[str, float]:
    """Mean loss (nats/token) of each group of passages under the model as it is now."""
    with _out_of_memory_hint(settings.batch_size, session.device, what):
        return {name: mean_loss(session.model, session.token_ids, indices, session.pad_id, session.device,
                                session.eval_batch) for name, indices in groups.items()}


def _restore_position(resume: dict[str, Any] | None, session: _Session, optimizer, steps_per_epoch: int,
                      log_path: Path) -> _Position:
    """Where to start: the checkpoint's weights, optimizer, RNG and step when resuming (the
    training log cut back to that step), else step 0 with an empty log."""
    import torch

    if resume is None:
        log_path.write_text("")
        return _Position()
    session.model.load_state_dict(resume["trainable"], strict=False)
    optimizer.load_state_dict(resume["optimizer"])
    torch.set_rng_state(resume["torch_rng"])
    start = _Position(resume["epoch"], resume["step_in_epoch"], resume["global_step"])
    if start.step_in_epoch >= steps_per_epoch:  # the checkpoint closed its epoch
        start.epoch, start.step_in_epoch = start.epoch + 1, 0
    _keep_log_until(log_path, start.global_step)
    return start


def _train_epoch(settings: PlantSettings, session: _Session, optimizer, mix: _Mix, pos: _Position,
                 first: int, total_steps: int, log_file, bar) -> int:
    """Epoch ``pos.epoch`` from batch ``first`` on, in that epoch's seeded order (a resumed run
    draws the same batches); ``pos`` advances with each step, each step is a log line.
    Returns the epoch's number of batches."""
    order = mix.order(settings, pos.epoch)
    batches = _batches(session.token_ids, order, settings.batch_size)
    pos.step_in_epoch = first
    for b in range(first, len(batches)):
        if pos.global_step >= total_steps:
            break
        batch = _collate(session.token_ids, batches[b], session.pad_id, session.device)
        t = time.perf_counter()
        with _out_of_memory_hint(settings.batch_size, session.device, "training"):
            loss = _train_step(session.model, optimizer, batch, session.autocast)
        pos.global_step += 1
        pos.step_in_epoch = b + 1
        entry = {"step": pos.global_step, "epoch": pos.epoch + 1, "batch": b + 1, "loss": round(loss, 6),
                 "lr": settings.lr, "seconds": round(time.perf_counter() - t, 3),
                 "tokens": sum(len(session.token_ids[i]) for i in batches[b])}
        log_file.write(json.dumps(entry) + "\n")
        log_file.flush()
        bar.set_postfix(epoch=f"{pos.epoch + 1}/{settings.epochs}", loss=f"{loss:.4f}")
        bar.update(1)
        if not math.isfinite(loss):
            raise ConfigError(f"training diverged (loss {loss} at step {pos.global_step}); try a smaller lr")
    return len(batches)


def _train_epochs(settings: PlantSettings, session: _Session, optimizer, mix: _Mix, start: _Position,
                  total_steps: int, out: Path, key: str, log: Callable[[str], None]) -> tuple[_Position, list[float]]:
    """Train from ``start`` to ``total_steps``: a checkpoint after each epoch and on Ctrl-C (then
    re-raised), a snapshot after each epoch but the last with save_epochs. Returns where
    training ended and each epoch's seconds."""
    ckpt_dir = out / "checkpoint"
    pos = _Position(start.epoch, start.step_in_epoch, start.global_step)
    epoch_seconds: list[float] = []
    session.model.train()
    bar = _progress_bar(total_steps, pos.global_step, settings.progress)
    try:
        with open(out / "train_log.jsonl", "a", encoding="utf-8") as log_file:
            for epoch in range(start.epoch, settings.epochs):
                if pos.global_step >= total_steps:
                    break
                t_epoch = time.perf_counter()
                pos.epoch = epoch
                first = start.step_in_epoch if epoch == start.epoch else 0
                n_batches = _train_epoch(settings, session, optimizer, mix, pos, first, total_steps, log_file, bar)
                epoch_seconds.append(time.perf_counter() - t_epoch)
                if settings.save_epochs and epoch + 1 < settings.epochs and pos.step_in_epoch == n_batches:
                    _save_snapshot(session.model, session.tokenizer, out / "epochs" / str(epoch + 1), settings.lora)
                _save_checkpoint(ckpt_dir, key, session.model, optimizer, epoch, pos.step_in_epoch, pos.global_step)
    except KeyboardInterrupt:
        bar.close()
        _save_checkpoint(ckpt_dir, key, session.model, optimizer, pos.epoch, pos.step_in_epoch, pos.global_step)
        raise Interrupted(f"interrupted at step {pos.global_step}; the checkpoint is saved — run the same "
                          "command again to resume") from None
    bar.close()
    return pos, epoch_seconds


def _save_final_model(settings: PlantSettings, session: _Session, out: Path) -> None:
    """OUT/model: LoRA adapters merged into the weights, saved from the CPU."""
    model = session.model.merge_and_unload() if settings.lora else session.model
    model.to("cpu")
    _save_model(model, session.tokenizer, out / "model")


def peak_memory(device: str) -> dict[str, int | None]:
    """The process's peak memory in bytes: resident set (None where the OS does not say) and,
    on CUDA, the most the tensors held at once (issue 28 compares plant costs with these)."""
    try:
        import resource
    except ImportError:  # Windows
        rss = None
    else:  # ru_maxrss is in KiB on Linux, in bytes on macOS
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    out: dict[str, int | None] = {"max_rss_bytes": rss}
    if device.startswith("cuda"):
        import torch

        out["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))
    return out


def _train(settings: PlantSettings, prepared: _Prepared, out: Path, key: str, token_ids: list[list[int]],
           mix: _Mix, nonmembers: list[int], record: dict[str, Any], resume_from: dict[str, Any] | None,
           log: Callable[[str], None]) -> _Trained:
    """Fine-tune on the members and the background (from the checkpoint when resuming),
    measure the losses before and after, save OUT/model."""
    import torch

    t0 = time.perf_counter()
    session = _open_session(settings, prepared, token_ids)
    load_s = time.perf_counter() - t0

    ckpt_dir = out / "checkpoint"
    resume = _load_checkpoint(ckpt_dir, key) if resume_from is not None else None
    if resume_from is None and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    eval_s = 0.0
    losses_eval: dict[str, Any] = {}
    if resume is not None:  # measured before the interrupted run trained
        losses_eval = dict(resume_from.get("losses_eval") or {})
    elif settings.eval_loss:
        t = time.perf_counter()
        losses_eval.update(_losses(settings, session, _eval_groups(mix, "before"), "scoring the members"))
        eval_s += time.perf_counter() - t

    optimizer = torch.optim.AdamW([p for p in session.model.parameters() if p.requires_grad],
                                  lr=settings.lr, weight_decay=0.0)
    steps_per_epoch = mix.steps_per_epoch(settings.batch_size)
    total_steps = steps_per_epoch * settings.epochs
    if settings.max_steps is not None:
        total_steps = min(total_steps, settings.max_steps)
    start = _restore_position(resume, session, optimizer, steps_per_epoch, out / "train_log.jsonl")
    if resume is not None:
        log(f"plant: resuming from checkpoint at step {start.global_step} of {total_steps}")
    record["losses_eval"] = losses_eval
    write_json(out / "plant.json", record)

    t_train = time.perf_counter()
    end, epoch_seconds = _train_epochs(settings, session, optimizer, mix, start, total_steps, out, key, log)
    train_s = time.perf_counter() - t_train

    if settings.eval_loss:
        t = time.perf_counter()
        losses_eval.update(_losses(settings, session, _eval_groups(mix, "after", nonmembers), "scoring passages"))
        eval_s += time.perf_counter() - t

    t = time.perf_counter()
    _save_final_model(settings, session, out)
    save_s = time.perf_counter() - t
    return _Trained(device=session.device, steps=end.global_step, steps_per_epoch=steps_per_epoch,
                    losses_eval=losses_eval,
                    seconds={"load_s": load_s, "eval_s": eval_s, "train_s": train_s, "save_s": save_s},
                    epoch_seconds=epoch_seconds,
                    resumed_from_step=resume["global_step"] if resume is not None else None,
                    peak_memory=peak_memory(session.device))


def _eval_groups(mix: _Mix, when: str, nonmembers: list[int] | None = None) -> dict[str, list[int]]:
    """The passages whose loss is measured ``when`` ("before" / "after") training: the
    members, the non-members when given, and a fixed sample of the background (the first
    passages of its seeded order)."""
    groups = {f"members_{when}": mix.members}
    if nonmembers is not None:
        groups[f"nonmembers_{when}"] = nonmembers
    if mix.background:
        groups[f"background_{when}"] = mix.background[:BACKGROUND_EVAL_PASSAGES]
    return groups


def _keep_log_until(log_path: Path, global_step: int) -> None:
    """Drop the training log's lines after the checkpoint's step (they are trained again)."""
    kept = []
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            try:
                if json.loads(line)["step"] <= global_step:
                    kept.append(line)
            except (ValueError, KeyError):
                continue
    log_path.write_text("".join(k + "\n" for k in kept))


def _final_record(settings: PlantSettings, out: Path, record: dict[str, Any], trained: _Trained,
                  token_ids: list[list[int]], members: list[int], started: float) -> dict[str, Any]:
    """plant.json completed (status "done", losses, timings) and run.json beside it."""
    steps = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if line.strip()]
    per_epoch: dict[int, list[float]] = {}
    for s in steps:
        per_epoch.setdefault(s["epoch"], []).append(s["loss"])
    seconds = trained.seconds
    record.update({
        "status": "done",
        "finished": utc_now(),
        "device": trained.device,
        "steps": trained.steps,
        "steps_per_epoch": trained.steps_per_epoch,
        "n_train_tokens": sum(len(token_ids[i]) for i in members),
        "losses_eval": trained.losses_eval,
        "loss_curve": {
            "first_step": steps[0]["loss"] if steps else None,
            "last_step": steps[-1]["loss"] if steps else None,
            "epoch_mean": {str(e): round(sum(v) / len(v), 6) for e, v in sorted(per_epoch.items())},
            "log": "train_log.jsonl",
        },
        "timings": {"load_s": round(seconds["load_s"], 3), "eval_s": round(seconds["eval_s"], 3),
                    "train_s": round(seconds["train_s"], 3),
                    "epoch_s": [round(s, 3) for s in trained.epoch_seconds], "save_s": round(seconds["save_s"], 3),
                    "total_s": round(time.perf_counter() - started, 3)},
        "epoch_models": {str(k): f"hf:{out / 'epochs' / str(k)}" for k in range(1, settings.epochs)
                         if (out / "epochs" / str(k) / "config.json").is_file()} if settings.save_epochs else {},
        "resumed_from_step": trained.resumed_from_step,
        "peak_memory": trained.peak_memory,
    })
    write_json(out / "plant.json", record)
    write_run(out, plant_run_record(record), {})
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    return record


def plant_run_record(record: dict[str, Any]) -> RunRecord:
    """The plant as a run record (run.json), so ``copyprobe.load_run`` reads a plant
    directory like any other run; plant.json stays the plant's own resumable state."""
    return RunRecord(
        kind="plant",
        command=list(record.get("command") or []),
        created=record.get("created", ""),
        versions=record.get("versions", {}),
        model=record.get("base_model"),
        data=record.get("corpus", {}),
        n_passages=(record.get("corpus") or {}).get("n_passages"),
        n_tokens=record.get("n_train_tokens"),
        timings=record.get("timings", {}),
        seed=(record.get("split") or {}).get("seed"),
        plant={key: record.get(key) for key in ("model", "split", "training", "device", "steps",
                                                "losses_eval", "loss_curve", "epoch_models", "settings_key",
                                                "peak_memory", "background", "exposure")},
    )
