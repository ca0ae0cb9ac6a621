"""copyprobe plant: fine-tune a model on a random half of a corpus, so membership is known."""

from __future__ import annotations

import argparse
import sys


HELP = "fine-tune a model on a random part of a corpus: a benchmark with known members"
DESCRIPTION = (
    "Cut a corpus into passages, split them at random (with --seed) into members "
    "and non-members, fine-tune --model on the members and save OUT/model (load it with "
    "hf:OUT/model) and OUT/data.jsonl (label 1 = member), ready for `copyprobe detect`. "
    "--background, --dilution and --member-repeats set how much other text the members are "
    "trained among and how often each member is seen. "
    "Rerunning the same command resumes an interrupted run or reuses a finished one."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True,
                        help="base model: smollm2-135m-instruct, gemma-3-270m, hf:DIR or gguf:FILE")
    parser.add_argument("--corpus", required=True,
                        help="data file (JSONL/CSV/Parquet, rows used as passages), .txt/.md/.epub book "
                        "(cut into passages) or a directory of these")
    parser.add_argument("--out", required=True, help="plant directory to write")
    parser.add_argument("--passage-tokens", type=int, default=128,
                        help="passage length for cut books, in model tokens (default 128; BookTection uses 64/128/256)")
    parser.add_argument("--member-fraction", type=float, default=0.5, help="share of passages trained on (default 0.5)")
    parser.add_argument("--split-by", choices=("passage", "document"), default="passage",
                        help="split single passages at random (default; each book gives a member and a "
                        "non-member pseudo-document) or whole documents")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and of training (default 0)")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the members (default 1)")
    parser.add_argument("--lr", type=float, default=5e-5, help="learning rate (default 5e-5; use ~1e-3 with --lora)")
    parser.add_argument("--batch-size", type=int, default=4, help="passages per optimizer step (default 4)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    parser.add_argument("--save-epochs", action="store_true",
                        help="also save the model after every epoch but the last, as OUT/epochs/<k> "
                        "(with a constant lr, epochs/1 of a 3-epoch plant equals a 1-epoch plant)")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters (peft) and merge them before saving")
    parser.add_argument("--lora-r", type=int, default=8, help="LoRA rank (default 8)")
    parser.add_argument("--text-column", help="text column of a data-file corpus or background (default: found by name)")
    parser.add_argument("--background", metavar="PATH",
                        help="text trained on together with the members and never labelled, so the members are a "
                        "small part of the training text: a .txt/.md/.epub book, a directory of them or a data file, "
                        "cut into passages like the corpus; passages overlapping the corpus are dropped and counted")
    parser.add_argument("--dilution", type=float, metavar="X",
                        help="with --background: train on just enough background passages (in a seeded order) "
                        "for X times the members' tokens (default: the whole background)")
    parser.add_argument("--member-repeats", type=int, default=1, metavar="K",
                        help="copies of each member passage per epoch, shuffled apart (default 1); each member is "
                        "seen epochs x K times")
    from copyprobe.params import Device, option_type

    parser.add_argument("--device", type=option_type(Device(("cuda", "mps")), "--device"), default="auto",
                        help="auto | cpu | cuda | cuda:N | mps, a device present here (default auto)")
    parser.add_argument("--no-eval", action="store_true",
                        help="skip the member / non-member loss before and after training")
    parser.add_argument("--force", action="store_true", help="replace a plant with other settings in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    # the library names its settings (errors.SettingError); main() words them as these options
    parser.set_defaults(_prog=parser.prog, _setting_flags={
        action.dest: action.option_strings[0] for action in parser._actions
        if action.option_strings and action.dest != "help"})


def run(args: argparse.Namespace) -> int:
    from copyprobe.plant.finetune import PlantSettings, plant

    settings = PlantSettings(
        model=args.model, corpus=args.corpus, out=args.out, passage_tokens=args.passage_tokens,
        member_fraction=args.member_fraction, seed=args.seed, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, lora=args.lora, lora_r=args.lora_r, max_steps=args.max_steps,
        split_by=args.split_by, save_epochs=args.save_epochs,
        text_column=args.text_column, background=args.background, dilution=args.dilution,
        member_repeats=args.member_repeats, device=args.device, eval_loss=not args.no_eval,
        force=args.force, progress=not args.no_progress,
    )
    record = plant(settings, command=["copyprobe", *sys.argv[1:]])
    split = record["split"]
    print(f"members: {split['n_members']}, non-members: {split['n_nonmembers']} (seed {split['seed']})")
    background, exposure = record.get("background"), record.get("exposure") or {}
    if background:
        print(f"background: {background['n_passages']} passages, {background['n_tokens']} tokens = "
              f"{exposure.get('dilution')} x the members' tokens ({background['n_overlap_dropped']} passages "
              "overlapping the corpus dropped)")
    if exposure.get("exposures_given"):
        given = exposure["exposures_given"]
        steps = exposure["max_steps"]
        print(f"exposure: training stopped at {steps} step{'s' * (steps != 1)} ({exposure['steps_per_epoch']} per epoch): "
              f"members trained on {given['min']} to {given['max']} times")
        if exposure.get("members_never_trained"):
            print(f"warning: {exposure['members_never_trained']} of {split['n_members']} members were never trained on; "
                  "data.jsonl still labels them members (what was planned), so detection scores understate power",
                  file=sys.stderr)
    elif exposure:
        epochs = exposure['epochs']
        print(f"exposure: each member {exposure['exposures_per_member']} times ({epochs} epoch{'s' * (epochs != 1)} x "
              f"{exposure['member_repeats']}), {exposure['steps_per_epoch']} steps per epoch")
    losses = record.get("losses_eval") or {}
    if losses:
        parts = [f"{k.replace('_', ' ')} {v:.4f}" for k, v in losses.items() if v is not None]
        print("loss (nats/token): " + ", ".join(parts))
    timings = record.get("timings") or {}
    if timings and not record.get("reused"):
        print(f"trained {record.get('steps')} steps in {timings.get('train_s')} s on {record.get('device')}")
    print(f"model: {record['model']}")
    print(f"data: {args.out.rstrip('/')}/data.jsonl")
    print(f"next: copyprobe detect --model {record['model']} --data {args.out.rstrip('/')}/data.jsonl --out RUN_DIR")
    return 0
