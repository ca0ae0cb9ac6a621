"""`copyprobe plant` end to end on a tiny random Llama built in the test (seconds, no hub)."""

from __future__ import annotations

import json
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from plant_helpers import WORDS, args, read_jsonl, run_error  # noqa: E402

from copyprobe.cli.main import main  # noqa: E402
from copyprobe.errors import ConfigError  # noqa: E402
from copyprobe.plant import finetune  # noqa: E402
from copyprobe.plant.finetune import PlantSettings, plant  # noqa: E402


def member_loss(model_dir, texts):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model.eval()
    with torch.no_grad():
        losses = [float(model(**(enc := tok(t, return_tensors="pt")), labels=enc["input_ids"]).loss) for t in texts]
    return sum(losses) / len(losses)


def test_plant_end_to_end(tiny, tmp_path, capsys):
    out = tmp_path / "plant"
    assert main(args(tiny, out)) == 0
    printed = capsys.readouterr().out
    assert "members: 6, non-members: 6" in printed and f"hf:{out / 'model'}" in printed

    rows = read_jsonl(out / "data.jsonl")
    assert len(rows) == 12 and {r["label"] for r in rows} == {0, 1}
    assert sum(r["label"] for r in rows) == 6
    assert all(r["source"] == "book" and len(r["text"].split()) == 16 for r in rows)
    # a passage split gives each book two pseudo-documents, each wholly member or non-member
    docs = {}
    for r in rows:
        docs.setdefault(r["doc_id"], set()).add(r["label"])
    assert len(docs) == 2 and sorted(docs.values(), key=min) == [{0}, {1}]
    assert all(d.startswith("book#") and "member" not in d for d in docs)

    record = json.loads((out / "plant.json").read_text())
    assert record["status"] == "done"
    # random words from 60: no run of 13 is shared
    assert record["split"] == {"by": "passage", "seed": 0, "member_fraction": 0.5, "n_members": 6, "n_nonmembers": 6,
                               "n_nonmembers_sharing_member_runs": 0}
    assert record["training"]["method"] == "full" and record["training"]["epochs"] == 2
    assert record["base_model"]["spec"] == f"hf:{tiny / 'model'}" and len(record["base_model"]["fingerprint"]) == 64
    assert record["steps"] == 6 and record["steps_per_epoch"] == 3
    assert set(record["timings"]) >= {"load_s", "train_s", "save_s", "total_s", "epoch_s"}
    assert "torch" in record["versions"] and "transformers" in record["versions"]
    losses = record["losses_eval"]
    assert losses["members_after"] < losses["members_before"]
    assert losses["members_after"] < losses["nonmembers_after"]
    # the plant is also a run record, read like any run directory
    from copyprobe.record import load_run

    run = load_run(out).record
    assert run.kind == "plant" and run.plant["split"] == record["split"] and run.seed == 0
    assert run.plant["losses_eval"] == losses and run.model["fingerprint"] == record["base_model"]["fingerprint"]
    # the peak memory of this process (the plant ran in it): at most what the OS reports now, in bytes
    import resource

    peak = record["peak_memory"]["max_rss_bytes"]
    assert 0 < peak <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert "cuda_max_allocated_bytes" not in record["peak_memory"]  # trained on the CPU
    assert run.plant["peak_memory"] == record["peak_memory"]

    log = read_jsonl(out / "train_log.jsonl")
    assert [e["step"] for e in log] == [1, 2, 3, 4, 5, 6]
    assert [e["epoch"] for e in log] == [1, 1, 1, 2, 2, 2]
    assert not (out / "checkpoint").exists()

    # the saved model loads with plain transformers and fits the members better than the base
    members = [r["text"] for r in rows if r["label"] == 1]
    after = member_loss(out / "model", members)
    before = member_loss(tiny / "model", members)
    assert after < before
    assert after == pytest.approx(losses["members_after"], rel=0.05)

    # rerun with the same arguments reuses the plant without training
    mtime = (out / "model" / "model.safetensors").stat().st_mtime_ns
    assert main(args(tiny, out)) == 0
    assert "reusing it" in capsys.readouterr().err
    assert (out / "model" / "model.safetensors").stat().st_mtime_ns == mtime


def test_plant_output_runs_in_detect(tiny, tmp_path):
    out = tmp_path / "plant"
    assert main(args(tiny, out, "--epochs", "1", "--no-eval")) == 0
    from copyprobe.detect import detect

    result = detect(f"hf:{out / 'model'}", str(out / "data.jsonl"), ["loss"], cache=False, n_bootstrap=50)
    assert result.metrics is not None
    assert result.metrics["passage"]["loss"]["n"] == 12
    assert result.metrics["document"]["loss"]["n"] == 2


def test_split_by_document(tiny, tmp_path):
    corpus = tmp_path / "books"
    corpus.mkdir()
    rng = random.Random(2)
    for name in "abcdef":
        (corpus / f"{name}.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(32)))
    out = tmp_path / "o"
    assert main(args(tiny, out, "--corpus", str(corpus), "--split-by", "document", "--epochs", "1",
                     "--no-eval")) == 0
    rows = read_jsonl(out / "data.jsonl")
    assert len(rows) == 12
    labels = {}
    for r in rows:
        assert r["doc_id"] == r["source"]
        labels.setdefault(r["doc_id"], set()).add(r["label"])
    assert sorted(labels) == list("abcdef") and all(len(v) == 1 for v in labels.values())
    assert sum(min(v) for v in labels.values()) == 3
    assert json.loads((out / "plant.json").read_text())["split"]["by"] == "document"


def test_plant_lora_merges_before_saving(tiny, tmp_path):
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    out = tmp_path / "lora"
    assert main(args(tiny, out, "--lora", "--lora-r", "4", "--lr", "5e-2")) == 0
    record = json.loads((out / "plant.json").read_text())
    assert record["training"]["method"] == "lora" and record["training"]["lora_r"] == 4
    assert record["losses_eval"]["members_after"] < record["losses_eval"]["members_before"]
    keys = load_file(out / "model" / "model.safetensors").keys()
    assert not any("lora" in k for k in keys)
    base = load_file(tiny / "model" / "model.safetensors")
    merged = load_file(out / "model" / "model.safetensors")
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(base[name], merged[name])  # the adapter was merged into the weights


def _interrupt_at(monkeypatch, step: int):
    real = finetune._train_step
    calls = {"n": 0}

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == step:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(finetune, "_train_step", flaky)


def test_interrupted_training_resumes_to_the_same_weights(tiny, tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file

    full = tmp_path / "full"
    assert main(args(tiny, full, "--no-eval")) == 0

    part = tmp_path / "part"
    _interrupt_at(monkeypatch, 5)  # mid second epoch
    assert main(args(tiny, part, "--no-eval")) == 130
    said = capsys.readouterr().err.strip().splitlines()
    # one line, and it names the checkpoint (the response cache holds nothing of a plant)
    assert said[-1] == ("copyprobe: interrupted at step 4; the checkpoint is saved — run the same command "
                        "again to resume"), said
    assert not any("cache" in line for line in said)
    assert (part / "checkpoint" / "state.pt").is_file()
    meta = json.loads((part / "checkpoint" / "meta.json").read_text())
    assert meta["global_step"] == 4 and meta["epoch"] == 1 and meta["step_in_epoch"] == 1
    assert not (part / "model").exists()
    monkeypatch.undo()

    assert main(args(tiny, part, "--no-eval")) == 0
    assert "resuming from checkpoint at step 4" in capsys.readouterr().err
    record = json.loads((part / "plant.json").read_text())
    assert record["resumed_from_step"] == 4 and record["steps"] == 6
    assert [e["step"] for e in read_jsonl(part / "train_log.jsonl")] == [1, 2, 3, 4, 5, 6]
    a = load_file(full / "model" / "model.safetensors")
    b = load_file(part / "model" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key


def test_unreadable_checkpoint_restarts_cleanly(tiny, tmp_path, monkeypatch, capsys):
    out = tmp_path / "p"
    _interrupt_at(monkeypatch, 2)
    assert main(args(tiny, out, "--no-eval")) == 130
    monkeypatch.undo()
    (out / "checkpoint" / "state.pt").write_bytes(b"garbage")
    assert main(args(tiny, out, "--no-eval")) == 0
    err = capsys.readouterr().err
    assert "discarding incompatible checkpoint" in err and "restarts from the base model" in err
    record = json.loads((out / "plant.json").read_text())
    assert record["resumed_from_step"] is None and record["steps"] == 6
    assert [e["step"] for e in read_jsonl(out / "train_log.jsonl")] == [1, 2, 3, 4, 5, 6]


def test_other_settings_in_same_out_need_force(tiny, tmp_path, capsys):
    out = tmp_path / "p"
    assert main(args(tiny, out, "--epochs", "1", "--no-eval")) == 0
    capsys.readouterr()
    assert main(args(tiny, out, "--epochs", "1", "--no-eval", "--seed", "3")) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and "argument --force: is not set" in err and "Traceback" not in err
    assert main(args(tiny, out, "--epochs", "1", "--no-eval", "--seed", "3", "--force")) == 0
    assert json.loads((out / "plant.json").read_text())["split"]["seed"] == 3


def test_corpus_too_small(tiny, tmp_path, capsys):
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps({"id": str(i), "text": f"w{i} w{i + 1}"}) + "\n" for i in range(3)))
    argv = args(tiny, tmp_path / "o", "--corpus", str(small))
    assert "corpus too small to split: 3 passage(s)" in run_error(argv, capsys)
    assert not (tmp_path / "o").exists()  # nothing written before the check


def test_passage_longer_than_context(tiny, tmp_path, capsys):
    msg = run_error(args(tiny, tmp_path / "o", "--passage-tokens", "100"), capsys)
    assert "longer than the model context (64 tokens)" in msg


def test_data_rows_longer_than_context_are_truncated_and_counted(tiny, tmp_path, capsys):
    rows = [{"id": str(i), "text": " ".join(WORDS[(i + j) % 60] for j in range(80 if i < 2 else 10))}
            for i in range(6)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o"
    assert main(args(tiny, out, "--corpus", str(data), "--epochs", "1", "--no-eval")) == 0
    assert "2 passage(s) are longer than the model context (64 tokens)" in capsys.readouterr().err
    assert json.loads((out / "plant.json").read_text())["corpus"]["n_truncated"] == 2
    assert [r["text"] for r in read_jsonl(out / "data.jsonl")] == [r["text"] for r in rows]  # kept whole


def test_out_of_memory_suggests_smaller_batch(tiny, tmp_path, monkeypatch, capsys):
    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(finetune, "_train_step", oom)
    msg = run_error(args(tiny, tmp_path / "o", "--batch-size", "4"), capsys)
    assert "out of memory while training with batch_size 4" in msg and "batch_size (e.g. 2)" in msg


@pytest.mark.parametrize("extra,needle", [
    (["--epochs", "0"], "argument --epochs: must be at least 1, got 0"),
    (["--lr", "-1"], "argument --lr: must be a positive number"),
    (["--batch-size", "0"], "argument --batch-size: must be at least 1"),
    (["--member-fraction", "1"], "argument --member-fraction: must be between 0 and 1"),
    (["--seed", "-1"], "argument --seed: must be an integer in [0, 4294967295], got -1"),  # was run and recorded
    (["--model", "openai:gpt-4o"], "cannot fine-tune"),
    (["--model", "hf:/nonexistent/dir"], "model directory not found"),
    (["--model", "no-such-model"], "unknown model spec"),
    (["--corpus", "/nonexistent/corpus.txt"], "corpus not found"),
])
def test_bad_options(tiny, tmp_path, capsys, extra, needle):
    assert needle in run_error(args(tiny, tmp_path / "o", *extra), capsys)


def test_out_dir_that_is_not_a_plant_is_left_alone(tiny, tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert "is not a plant directory" in run_error(args(tiny, out), capsys)
    assert (out / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("content,needle", [
    ("[1, 2]", "plant.json: the file must be an object, got a list"),
    ('{"name": "left-pad", "version": "1.3.0"}', "'format' is missing"),
    ('{"format": 1, "status": "done", "settings_key": "k", "model": "m", "split": []}',
     "'split' must be an object, got a list"),
    ('{"format": 1, "status": "done", "settings_key": "k", "model": "m", '
     '"split": {"n_members": "6", "n_nonmembers": 6, "seed": 0}}', "'split.n_members' must be an integer"),
    ('{"format": 1, "status": "done", "settings_key": "k", "model": "m", '
     '"split": {"n_members": 6, "n_nonmembers": 6, "seed": 1' + "0" * 400 + '}}', "beyond the float range"),
    ('{"format": 1, "status": "done", "model": "m", "split": {}}', "'settings_key' is missing"),
    ("not json", "plant.json is not valid JSON"),
    ("", "plant.json is not valid JSON"),
    ('{"format": 1, "status": "paused", "settings_key": "k", "model": "m", '
     '"split": {"n_members": 6, "n_nonmembers": 6, "seed": 0}}', "'status' must be one of 'training', 'done'"),
    ('{"format": 1, "status": "done", "settings_key": 7, "model": "m", '
     '"split": {"n_members": 6, "n_nonmembers": 6, "seed": 0}}', "'settings_key' must be a string, got a number"),
    ('{"format": 1, "status": "done", "settings_key": "k", "model": "m", "losses_eval": [], '
     '"split": {"n_members": 6, "n_nonmembers": 6, "seed": 0}}', "'losses_eval' must be an object, got a list"),
    ('{"format": 1, "status": "done", "settings_key": "k", "model": "m", "peak_memory": {"max_rss_bytes": "1"}, '
     '"split": {"n_members": 6, "n_nonmembers": 6, "seed": 0}}', "'peak_memory.max_rss_bytes' must be an integer"),
])
def test_damaged_plant_json_in_out_is_one_line(tiny, tmp_path, capsys, content, needle):
    out = tmp_path / "o"
    out.mkdir()
    (out / "plant.json").write_text(content)
    assert needle in run_error(args(tiny, out), capsys)
    assert (out / "plant.json").read_text() == content  # read, never replaced without --force


def test_python_api_returns_the_record(tiny, tmp_path):
    settings = PlantSettings(model=f"hf:{tiny / 'model'}", corpus=str(tiny / "book.txt"), out=str(tmp_path / "o"),
                             passage_tokens=16, epochs=1, batch_size=4, max_steps=2, progress=False)
    record = plant(settings, log=lambda m: None)
    assert record["steps"] == 2 and record["training"]["max_steps"] == 2
    assert "exposures_given" not in record["exposure"]  # 2 steps are the whole epoch here
    # one step of 4 passages of one epoch, no background: 4 members trained once, the others never
    short = plant(PlantSettings(**{**settings.__dict__, "out": str(tmp_path / "short"), "max_steps": 1}),
                  log=lambda m: None)
    n_members, exposure = short["split"]["n_members"], short["exposure"]
    assert n_members > 4 and exposure["exposures_per_member"] is None
    assert exposure["exposures_given"] == {"min": 0, "max": 1}
    assert exposure["members_never_trained"] == n_members - 4
    with pytest.raises(ConfigError):
        PlantSettings(model="x", corpus="y", out="z", lora_r=0).validate()


def test_save_epochs_snapshot_equals_a_shorter_plant(tiny, tmp_path):
    from safetensors.torch import load_file

    two = tmp_path / "two"
    assert main(args(tiny, two, "--save-epochs", "--no-eval")) == 0
    record = json.loads((two / "plant.json").read_text())
    assert record["epoch_models"] == {"1": f"hf:{two / 'epochs' / '1'}"}
    assert not (two / "epochs" / "2").exists()  # the last epoch is model/
    one = tmp_path / "one"
    assert main(args(tiny, one, "--epochs", "1", "--no-eval")) == 0
    a = load_file(two / "epochs" / "1" / "model.safetensors")
    b = load_file(one / "model" / "model.safetensors")
    c = load_file(two / "model" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


# A plant run whose steps and checkpoint saves are slowed down, so that two Ctrl-Cs land in
# training and in the checkpoint the first one writes (the program's own signal handling: entry()).
_SLOW_PLANT = """
import sys, time
import copyprobe.plant.finetune as f
step, save = f._train_step, f._save_checkpoint
def slow_step(*a, **k):
    time.sleep(0.2)
    return step(*a, **k)
def slow_save(*a, **k):
    time.sleep(3)
    return save(*a, **k)
f._train_step, f._save_checkpoint = slow_step, slow_save
from copyprobe.cli.main import entry
entry(sys.argv[1:])
"""


def test_second_ctrl_c_while_the_checkpoint_is_written_exits_130_with_one_line(tiny, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from safetensors.torch import load_file

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "part"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
               "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_PLANT, *args(tiny, out, "--no-eval")], cwd=str(repo),
                            env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    log = out / "train_log.jsonl"
    deadline = time.monotonic() + 120
    while (not log.exists() or not log.read_text().strip()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the plant ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)  # the first Ctrl-C is now writing its checkpoint (3 s)
    assert proc.poll() is None, "the plant ended before the second Ctrl-C"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr + stdout, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "interrupted twice" in lines[0], stderr
    assert not (out / "model").exists()
    # whatever the cut-short checkpoint left, the same command finishes the plant with the
    # weights of an uninterrupted run
    assert main(args(tiny, out, "--no-eval")) == 0
    full = tmp_path / "full"
    assert main(args(tiny, full, "--no-eval")) == 0
    a, b = load_file(full / "model" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_peak_memory_on_cuda_adds_the_allocator_peak_of_the_training_device(monkeypatch):
    import resource

    asked = []
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: asked.append(device) or 3 * 2**30)
    on_gpu = finetune.peak_memory("cuda:1")
    assert on_gpu["cuda_max_allocated_bytes"] == 3 * 2**30 and asked == ["cuda:1"]
    assert 0 < on_gpu["max_rss_bytes"] <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert set(finetune.peak_memory("cpu")) == {"max_rss_bytes"} and asked == ["cuda:1"]


def test_max_steps_that_leave_members_untrained_are_said(tiny, tmp_path, capsys):
    # batch 2, one step: 2 members trained on once, the others never, yet labelled members
    assert main(args(tiny, tmp_path / "o", "--max-steps", "1")) == 0
    captured = capsys.readouterr()
    n_members = sum(r["label"] == 1 for r in read_jsonl(tmp_path / "o" / "data.jsonl"))
    assert "training stopped at 1 step (" in captured.out and "trained on 0 to 1 times" in captured.out
    assert f"warning: {n_members - 2} of {n_members} members were never trained on" in captured.err


def test_a_plant_into_a_directory_another_run_writes_is_refused(tiny, tmp_path, capsys):
    import fcntl
    import os

    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another copyprobe process holds it
    try:
        line = run_error(args(tiny, out), capsys)
    finally:
        os.close(fd)
    assert "another copyprobe run is writing to" in line and not (out / "plant.json").exists()


def test_non_members_sharing_a_run_with_a_member_are_counted_and_said(tiny, tmp_path, capsys):
    rng = random.Random(5)
    shared = " ".join(rng.choice(WORDS) for _ in range(13))  # a line of boilerplate
    rows = [{"id": f"r{i}", "text": (shared + " " if i < 6 else "") + " ".join(rng.choice(WORDS) for _ in range(3 if i < 6 else 16))}
            for i in range(12)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = args(tiny, tmp_path / "o", "--epochs", "1")
    argv[argv.index("--corpus") + 1] = str(corpus)
    assert main(argv) == 0
    err = capsys.readouterr().err
    label = {r["id"]: r["label"] for r in read_jsonl(tmp_path / "o" / "data.jsonl")}
    with_run = [label[f"r{i}"] for i in range(6)]
    expected = with_run.count(0) if 1 in with_run else 0  # the random tails share no 13 words
    assert 0 < expected < 6  # the seed split the six between the classes
    split = json.loads((tmp_path / "o" / "plant.json").read_text())["split"]
    assert split["n_nonmembers_sharing_member_runs"] == expected
    assert f"warning: {expected} non-member passage(s) share a run of 13 words with a member passage" in err


def test_single_token_passages_are_refused_before_training(tiny, tmp_path, capsys):
    rng = random.Random(2)
    rows = [{"id": f"r{i}", "text": WORDS[i] if i in (3, 8) else " ".join(rng.choice(WORDS) for _ in range(16))}
            for i in range(12)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = args(tiny, tmp_path / "o", "--epochs", "1")
    argv[argv.index("--corpus") + 1] = str(corpus)
    line = run_error(argv, capsys)
    assert "2 corpus passage(s) are a single token (first: 'r3')" in line
    assert not (tmp_path / "o").exists()  # refused before the plant directory is made
