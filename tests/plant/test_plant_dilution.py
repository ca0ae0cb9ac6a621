"""`copyprobe plant --background / --dilution / --member-repeats` end to end on the tiny
random Llama of the plant tests (seconds, no hub)."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from plant_helpers import WORDS, args, read_jsonl, run_error  # noqa: E402

from copyprobe.cli.main import main  # noqa: E402
from copyprobe.plant import finetune  # noqa: E402
from copyprobe.plant.finetune import PlantSettings, _settings_key  # noqa: E402

# the tiny model's tokenizer is one token per word, no special tokens: 12 corpus passages of
# 16 tokens, 6 of them members (96 member tokens); the background is 40 passages of 16
N_BACKGROUND = 40


@pytest.fixture(scope="module")
def background(tiny):
    path = tiny / "background.txt"
    rng = random.Random(7)
    path.write_text(" ".join(rng.choice(WORDS) for _ in range(16 * N_BACKGROUND)))
    return path


def bg_args(tiny, background, out, *extra):
    return args(tiny, out, "--background", str(background), *extra)


def spy_on_training(monkeypatch, tiny):
    """The texts of every batch trained on, per step (decoded from the ids the model got)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny / "model")
    steps: list[list[str]] = []
    real = finetune._train_step

    def spy(model, optimizer, batch, autocast):
        ids, mask, _ = batch
        steps.append([tok.decode(row[m.bool()].tolist()) for row, m in zip(ids, mask)])
        return real(model, optimizer, batch, autocast)

    monkeypatch.setattr(finetune, "_train_step", spy)
    return steps


def test_background_is_trained_with_repeated_members_and_never_labelled(tiny, background, tmp_path, monkeypatch,
                                                                        capsys):
    steps = spy_on_training(monkeypatch, tiny)
    out = tmp_path / "p"
    assert main(bg_args(tiny, background, out, "--dilution", "2.3", "--member-repeats", "3")) == 0
    printed = capsys.readouterr().out
    rows = read_jsonl(out / "data.jsonl")
    members = [r["text"] for r in rows if r["label"] == 1]
    nonmembers = [r["text"] for r in rows if r["label"] == 0]
    book = (tiny / "book.txt").read_text()
    words = background.read_text().split()
    background_texts = {" ".join(words[i:i + 16]) for i in range(0, len(words), 16)}
    # data.jsonl: the 12 corpus passages, labelled; no background passage
    assert len(rows) == 12 and len(members) == 6 and all(r["text"] in book for r in rows)
    assert not {r["text"] for r in rows} & background_texts

    member_tokens = sum(len(t.split()) for t in members)
    assert member_tokens == 96
    target = 2.3 * member_tokens  # 220.8: 14 passages of 16 tokens, the 14th needed
    record = json.loads((out / "plant.json").read_text())
    bg = record["background"]
    assert bg["n_tokens"] == 224 and bg["n_passages"] == 14 and target <= bg["n_tokens"] < target + 16
    assert bg["sha256"] and bg["n_overlap_dropped"] == 0 and bg["dilution_target"] == 2.3
    assert bg["sources"] == [{"path": str(background), "sha256": hashlib.sha256(background.read_bytes()).hexdigest(),
                              "n_passages_read": N_BACKGROUND, "n_passages_used": 14, "n_tokens_used": 224}]
    exposure = record["exposure"]
    assert exposure == {
        "epochs": 2, "member_repeats": 3, "exposures_per_member": 6, "member_passages": 6,
        "member_tokens_unique": 96, "member_tokens_per_epoch": 288, "background_passages_per_epoch": 14,
        "background_tokens_per_epoch": 224, "dilution": round(224 / 96, 4), "dilution_per_epoch": round(224 / 288, 4),
        "passages_per_epoch": 6 * 3 + 14, "steps_per_epoch": 16, "max_steps": None}
    assert record["steps"] == 32 and record["steps_per_epoch"] == 16
    log = read_jsonl(out / "train_log.jsonl")
    assert [e["epoch"] for e in log] == [1] * 16 + [2] * 16
    assert "each member 6 times (2 epochs x 3), 16 steps per epoch" in printed
    assert "background: 14 passages, 224 tokens" in printed

    # what the model was given: per epoch every member 3 times (never twice in one step),
    # the same 14 background passages once, no non-member
    assert len(steps) == 32
    for epoch in (steps[:16], steps[16:]):
        seen = Counter(text for batch in epoch for text in batch)
        assert all(seen[m] == 3 for m in members)
        assert not any(seen[n] for n in nonmembers)
        trained_background = {t for t in seen if t not in members}
        assert len(trained_background) == 14 and trained_background <= background_texts
        assert all(seen[t] == 1 for t in trained_background)
        assert all(len(set(batch)) == len(batch) for batch in epoch)
    assert {t for b in steps[:16] for t in b} == {t for b in steps[16:] for t in b}
    assert [e["tokens"] for e in log] == [sum(len(t.split()) for t in batch) for batch in steps]
    assert steps[:16] != steps[16:]  # each epoch its own order

    losses = record["losses_eval"]
    assert set(losses) == {"members_before", "members_after", "nonmembers_after", "background_before",
                           "background_after"}
    assert losses["background_after"] < losses["background_before"]
    assert losses["members_after"] < losses["members_before"]
    assert bg["n_eval_passages"] == 14


def test_without_dilution_the_whole_background_is_used(tiny, background, tmp_path):
    out = tmp_path / "p"
    assert main(bg_args(tiny, background, out, "--epochs", "1", "--no-eval")) == 0
    record = json.loads((out / "plant.json").read_text())
    assert record["background"]["n_passages"] == N_BACKGROUND and record["background"]["n_tokens"] == 16 * N_BACKGROUND
    assert record["exposure"]["steps_per_epoch"] == math.ceil((6 + N_BACKGROUND) / 2) == record["steps"]
    assert record["exposure"]["dilution"] == round(16 * N_BACKGROUND / 96, 4)


def test_background_overlapping_the_corpus_is_dropped_and_counted(tiny, background, tmp_path, capsys):
    mixed = tmp_path / "mixed.txt"  # the corpus book, then the background: 12 passages overlap
    mixed.write_text((tiny / "book.txt").read_text() + " " + background.read_text())
    out = tmp_path / "p"
    assert main(args(tiny, out, "--background", str(mixed), "--epochs", "1", "--no-eval")) == 0
    assert "12 background passage(s) overlap the corpus" in capsys.readouterr().err
    bg = json.loads((out / "plant.json").read_text())["background"]
    assert bg["n_overlap_dropped"] == 12 and bg["n_passages"] == N_BACKGROUND
    assert len(read_jsonl(out / "data.jsonl")) == 12


def test_interrupted_diluted_training_resumes_to_the_same_weights(tiny, background, tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file

    extra = ("--dilution", "1.5", "--member-repeats", "2", "--no-eval")
    full = tmp_path / "full"
    assert main(bg_args(tiny, background, full, *extra)) == 0
    steps_per_epoch = math.ceil((6 * 2 + 9) / 2)  # 144 tokens = 9 background passages
    assert json.loads((full / "plant.json").read_text())["steps_per_epoch"] == steps_per_epoch

    part = tmp_path / "part"
    real, calls = finetune._train_step, {"n": 0}

    def interrupt_mid_second_epoch(*a, **k):
        calls["n"] += 1
        if calls["n"] == steps_per_epoch + 4:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(finetune, "_train_step", interrupt_mid_second_epoch)
    assert main(bg_args(tiny, background, part, *extra)) == 130
    meta = json.loads((part / "checkpoint" / "meta.json").read_text())
    assert meta["epoch"] == 1 and meta["step_in_epoch"] == 3 and meta["global_step"] == steps_per_epoch + 3
    monkeypatch.undo()
    capsys.readouterr()
    assert main(bg_args(tiny, background, part, *extra)) == 0
    assert f"resuming from checkpoint at step {steps_per_epoch + 3}" in capsys.readouterr().err
    a = load_file(full / "model" / "model.safetensors")
    b = load_file(part / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_save_epochs_of_a_diluted_plant_equals_a_shorter_one(tiny, background, tmp_path):
    from safetensors.torch import load_file

    extra = ("--dilution", "1", "--member-repeats", "2", "--no-eval")
    two = tmp_path / "two"
    assert main(bg_args(tiny, background, two, "--save-epochs", *extra)) == 0
    one = tmp_path / "one"
    assert main(bg_args(tiny, background, one, "--epochs", "1", *extra)) == 0
    a = load_file(two / "epochs" / "1" / "model.safetensors")
    b = load_file(one / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_lora_with_background(tiny, background, tmp_path):
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    out = tmp_path / "lora"
    assert main(bg_args(tiny, background, out, "--lora", "--lora-r", "4", "--lr", "5e-2", "--dilution", "2",
                        "--member-repeats", "2")) == 0
    record = json.loads((out / "plant.json").read_text())
    assert record["training"]["method"] == "lora" and record["exposure"]["exposures_per_member"] == 4
    assert record["steps_per_epoch"] == math.ceil((6 * 2 + 12) / 2)
    losses = record["losses_eval"]
    assert losses["members_after"] < losses["members_before"]
    assert losses["background_after"] < losses["background_before"]
    merged = load_file(out / "model" / "model.safetensors")
    assert not any("lora" in k for k in merged)
    base = load_file(tiny / "model" / "model.safetensors")
    assert not torch.equal(base["model.layers.0.self_attn.q_proj.weight"], merged["model.layers.0.self_attn.q_proj.weight"])


def test_settings_key_names_background_dilution_and_repeats(tmp_path):
    def key(**kw):
        settings = PlantSettings(model="m", corpus="c", out="o", **kw)
        return _settings_key(settings, "fp", "corpus-sha", "bg-sha" if kw.get("background") else None)

    plain = key()
    assert key(member_repeats=1) == plain  # plants made before these settings keep their key
    keys = {plain, key(member_repeats=2), key(background="b"), key(background="b", dilution=10),
            key(background="b", dilution=100), key(background="b", dilution=10, member_repeats=4)}
    assert len(keys) == 6
    assert key(background="b", dilution=10) == key(background="b", dilution=10.0)
    settings = PlantSettings(model="m", corpus="c", out="o", background="b")
    assert _settings_key(settings, "fp", "corpus-sha", "other-sha") != key(background="b")


def test_other_background_settings_in_the_same_out_are_refused(tiny, background, tmp_path, capsys):
    out = tmp_path / "p"
    base = ("--epochs", "1", "--no-eval", "--max-steps", "1")
    assert main(bg_args(tiny, background, out, *base, "--dilution", "1")) == 0
    capsys.readouterr()
    for extra in (("--dilution", "2"), ("--dilution", "1", "--member-repeats", "2")):
        assert "other settings" in run_error(bg_args(tiny, background, out, *base, *extra), capsys)
    assert "other settings" in run_error(args(tiny, out, *base), capsys)  # no background
    changed = tmp_path / "changed.txt"
    changed.write_text(background.read_text().replace("w1 ", "w2 ", 1))
    assert "other settings" in run_error(args(tiny, out, "--background", str(changed), *base, "--dilution", "1"), capsys)
    assert main(bg_args(tiny, background, out, *base, "--dilution", "1")) == 0
    assert "reusing it" in capsys.readouterr().err


@pytest.mark.parametrize("extra,needle", [
    (["--member-repeats", "0"], "argument --member-repeats: must be between 1 and 100,000, got 0"),
    (["--member-repeats", "1000000000000"], "argument --member-repeats: must be between 1 and 100,000, got 1,000,000,000,000"),
    (["--background", "BG", "--dilution", "1e308"], "argument --dilution: 1e+308 needs inf background tokens"),
    (["--background", "BG", "--dilution", "0"], "argument --dilution: must be a positive number, got 0.0"),
    (["--background", "BG", "--dilution", "-2"], "argument --dilution: must be a positive number"),
    (["--background", "BG", "--dilution", "nan"], "argument --dilution: must be a positive number"),
    (["--dilution", "10"], "argument --dilution: needs a background"),
    (["--background", "/nonexistent/bg.txt"], "background not found: /nonexistent/bg.txt"),
    (["--background", "TINY"], "yields no passages"),
    (["--background", "BOOK"], "overlaps the corpus"),
    (["--background", "BG", "--dilution", "100"],
     "argument --dilution: 100 needs 9600 background tokens (100 x 96 member tokens), but the background"),
])
def test_bad_background_options(tiny, background, tmp_path, capsys, extra, needle):
    small = tmp_path / "tiny.txt"
    small.write_text("w1 w2 w3")
    swap = {"BG": str(background), "TINY": str(small), "BOOK": str(tiny / "book.txt")}
    out = tmp_path / "o"
    message = run_error(args(tiny, out, *[swap.get(e, e) for e in extra]), capsys)
    assert needle in message, message
    assert not out.exists()  # refused before anything is written
    if "100 needs" in needle:
        assert f"has {16 * N_BACKGROUND};" in message
