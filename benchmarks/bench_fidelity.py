"""Do copyprobe's scores equal what the methods' published code computes? (issue 29)

For each bundled model (smollm2-135m-instruct: no leading special token; gemma-3-270m:
adds <bos>) this scores a set of texts written for this benchmark (below: they are in no
training set by construction, which does not matter here: only equality is measured)
twice:

* **copyprobe**: ``copyprobe.detect`` through a Session (batched, the response cache of a
  temporary file), for loss, zlib, lowercase, min_k, min_k_pp, reference, dc_pdd and all
  18 slope settings (ngram 0..5 x none/mean/zscore) of the ``notebook`` and
  ``probability`` variants;
* **official**: the formulas of the authors' code recomputed here from raw
  log-probabilities of one unbatched fp32 forward pass per text (and one per n-gram
  context), one thread: Min-K%++ run.py (loss, zlib, Min-K%, Min-K%++) and run_ref.py
  (lowercase, reference), DC-PDD com_det_sco.py, and the Probability Slope notebook
  (sklearn ``LinearRegression`` through token log-probabilities over the T - n tokens
  that have their n-token context; mean: slope - mean; zscore: (slope - mean) / std).
  On Gemma the n-gram context is <bos> plus the n previous tokens, as copyprobe does.

It reports the largest |copyprobe - official| over the texts for every method and
setting (target: <= 1e-3), as a table in benchmarks/results/fidelity.md and JSON in
benchmarks/results/fidelity.json. Scores are oriented "higher = member" in copyprobe;
the official values are taken in the same orientation (the Min-K% and DC-PDD scripts
store the negative and rank by it: their negative is compared).

    python benchmarks/bench_fidelity.py [--models smollm2-135m-instruct,gemma-3-270m]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

MODELS = ("smollm2-135m-instruct", "gemma-3-270m")
REFERENCE = {"smollm2-135m-instruct": "gemma-3-270m", "gemma-3-270m": "smollm2-135m-instruct"}
K = 0.2
DC_PDD_A = 0.01

# Written for this benchmark: mixed casing (lowercase), names, numbers and repeats.
TEXTS = [
    "On the third Tuesday of March, the Harbour Committee of Port Ellery voted to repaint the old "
    "signal tower in its original ochre, after Mrs. Dunmore produced a photograph from 1911.",
    "To reset the controller, hold the BLUE button for five seconds, release it, then press RESET "
    "twice. If the LED blinks amber, repeat the sequence; if it stays red, call Support.",
    "Marguerite kept her grandfather's ledger in a biscuit tin. Every page listed the same three "
    "things: the weather, the price of wool, and whether the ferry had run.",
    "The recipe asks for 250 g of flour, two eggs, a pinch of salt and enough milk to make a batter "
    "that coats the back of a spoon. Rest it for an hour before frying.",
    "In Kessler's model, each village trades only with its two neighbours, yet prices converge within "
    "a season; the puzzle, as Okafor later showed, is how fast rumours travel along the river.",
    "NOTICE: The West Reading Room will close at 4 p.m. on Friday for the installation of new "
    "shelving. Readers with reserved items may collect them from the Main Desk.",
    "He said the orchard was older than the house, older than the road, older than the name of the "
    "town, and that the trees remembered a frost nobody else did.",
    "Quarterly revenue rose 4.2% to $18.6 million, driven by the Northern Region; operating costs fell "
    "slightly, and the Board approved a dividend of 12 cents per share.",
]


# ----------------------------------------------------------------------------- official side
def forward(model, ids):
    import torch

    with torch.no_grad():
        out = model(torch.tensor([ids]), labels=torch.tensor([ids]))
    return out.loss.item(), out.logits[0].float()


def official_logprobs(model, ids):
    """Min-K%++ run.py: token log-probs, mu and sigma (a variance there) of tokens 1..T-1."""
    import torch
    import torch.nn.functional as F

    loss, logits = forward(model, ids)
    target = torch.tensor(ids[1:]).unsqueeze(-1)
    probs = F.softmax(logits[:-1], dim=-1)
    log_probs = F.log_softmax(logits[:-1], dim=-1)
    token_log_probs = log_probs.gather(dim=-1, index=target).squeeze(-1)
    mu = (probs * log_probs).sum(-1)
    sigma = (probs * torch.square(log_probs)).sum(-1) - torch.square(mu)
    return -loss, token_log_probs.numpy().astype(np.float64), mu.numpy(), sigma.numpy()


def ngram_logprobs(model, ids, lead, n):
    """log p(token p | lead + tokens p-n..p-1) for the tokens that have n text predecessors."""
    import torch
    import torch.nn.functional as F

    out = {}
    with torch.no_grad():
        for p in range(len(lead) + n, len(ids)):
            # only the last position's logits are needed (the same values, a fraction of
            # the head's work on Gemma's 262k vocabulary)
            logits = model(torch.tensor([lead + ids[p - n:p]]), logits_to_keep=1).logits[0, -1].float()
            out[p] = float(F.log_softmax(logits, dim=-1)[ids[p]])
    return out


def notebook_slope(values, normalize):
    from sklearn.linear_model import LinearRegression

    values = np.asarray(values, dtype=np.float64)
    slope = LinearRegression().fit(np.arange(len(values)).reshape(-1, 1), values).coef_[0]
    if normalize == "mean":
        return slope - values.mean()
    if normalize == "zscore":
        return (slope - values.mean()) / values.std()
    return slope


def official_scores(backend, ref_backend, table, text):
    tok = backend.tokenizer
    ids = list(tok(text).input_ids)
    lead = ids[:len(backend.lead_ids)] if ids[:len(backend.lead_ids)] == backend.lead_ids else []
    ll, tlp, mu, sigma = official_logprobs(backend.model, ids)
    ll_lowercase = official_logprobs(backend.model, list(tok(text.lower()).input_ids))[0]
    ll_ref = official_logprobs(ref_backend.model, list(ref_backend.tokenizer(text).input_ids))[0]
    k_length = int(len(tlp) * K)
    mink_plus = (tlp - mu) / np.sqrt(sigma)
    # DC-PDD com_det_sco.py: first occurrences, smoothed frequency, clip at a; -mean(ce)
    counts = table.counts
    fre_dis_smo = (counts + 1) / (counts.sum() + len(counts))
    scored_ids = ids[1:]
    indexes, seen = [], []
    for i, input_id in enumerate(scored_ids):
        if input_id not in seen:
            indexes.append(i)
            seen.append(input_id)
    ce = np.exp(tlp)[indexes] * np.log(1 / fre_dis_smo[np.array(scored_ids)[indexes]])
    ce[ce > DC_PDD_A] = DC_PDD_A
    scores = {
        "loss": ll,
        "zlib": ll / len(zlib.compress(bytes(text, "utf-8"))),
        "lowercase": ll_lowercase / ll,
        "min_k": float(np.mean(np.sort(tlp)[:k_length])),
        "min_k_pp": float(np.mean(np.sort(mink_plus)[:k_length])),
        "reference": ll - ll_ref,
        "dc_pdd": float(np.mean(ce)),  # the script's -mean(ce), ranked by its negative
    }
    full = {p: tlp[p - 1] for p in range(1, len(ids))}
    for n in range(6):
        local = ngram_logprobs(backend.model, ids, lead, n) if n else {}
        positions = sorted(local) if n else sorted(full)
        for variant, to in (("notebook", lambda v: v), ("probability", np.exp)):
            values = [to(full[p]) - to(local[p]) if n else to(full[p]) for p in positions]
            for normalize in ("none", "mean", "zscore"):
                scores[slope_column(variant, n, normalize)] = notebook_slope(values, normalize)
    return scores


def slope_column(variant, n, normalize):
    return f"slope[{variant},ngram={n},{normalize}]"


# ----------------------------------------------------------------------------- copyprobe side
def copyprobe_scores(session, freq_path):
    import copyprobe

    columns: dict[str, list[float]] = {}
    base = copyprobe.detect(session, TEXTS, ["loss", "zlib", "lowercase", "min_k", "min_k_pp", "reference", "dc_pdd"],
                            params={"min_k": {"k": K}, "min_k_pp": {"k": K}, "dc_pdd": {"freq": str(freq_path),
                                                                                        "a": DC_PDD_A}},
                            blind_baseline=False)
    for name in base.scores.columns:
        if name in ("loss", "zlib", "lowercase", "min_k", "min_k_pp", "reference", "dc_pdd"):
            columns[name] = list(base.scores[name])
    for variant, n, normalize in itertools.product(("notebook", "probability"), range(6), ("none", "mean", "zscore")):
        result = copyprobe.detect(session, TEXTS, ["slope"],
                                  params={"slope": {"ngram": n, "normalize": normalize, "variant": variant}},
                                  blind_baseline=False)
        columns[slope_column(variant, n, normalize)] = list(result.scores["slope"])
    return columns


def run_model(spec, backends, tmp):
    import copyprobe
    from copyprobe.backends.specs import load_backend
    from copyprobe.freq import build_frequency_table

    backend, ref_backend = backends[spec], backends[REFERENCE[spec]]
    # a list of strings is text (a bare string would be a file path)
    table = build_frequency_table(backend.tokenizer, [[" ".join(TEXTS[::-1]) + "\n" + "\n".join(TEXTS)]])
    freq_path = table.save(Path(tmp) / f"{spec}.npz")
    start = time.perf_counter()
    # the session closes the reference backend it loads: give it its own copy
    loader = lambda s: load_backend(s, device="cpu", dtype="float32", batch_size=4)  # noqa: E731
    with copyprobe.Session(backend, cache=Path(tmp) / f"{spec}.sqlite", loader=loader) as session:
        ours = copyprobe_scores(session, freq_path)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    official = [official_scores(backend, ref_backend, table, text) for text in TEXTS]
    official_s = time.perf_counter() - start
    rows = {}
    for column, values in ours.items():
        deltas = [abs(v - o[column]) for v, o in zip(values, official) if np.isfinite(v) and np.isfinite(o[column])]
        scale = max(abs(o[column]) for o in official)
        rows[column] = {"max_abs_delta": max(deltas), "texts": len(deltas), "max_abs_value": scale}
    return {"rows": rows, "copyprobe_s": round(ours_s, 1), "official_s": round(official_s, 1)}


def write_markdown(results, path, command):
    lines = [
        "# Fidelity: copyprobe against the methods' published code",
        "",
        f"Command: `{command}`",
        "",
        "Written by `benchmarks/bench_fidelity.py` (see its docstring for what each side computes). "
        f"{len(TEXTS)} texts written for the benchmark; CPU, fp32, one thread. Each cell is the largest "
        "|copyprobe - official| over the texts (target <= 1e-3); in brackets the largest |official value|, "
        "for scale.",
        "",
        "| method / setting | " + " | ".join(results) + " |",
        "|---|" + "---|" * len(results),
    ]
    names = list(next(iter(results.values()))["rows"])
    for name in names:
        cells = []
        for model in results:
            row = results[model]["rows"][name]
            cells.append(f"{row['max_abs_delta']:.1e} ({row['max_abs_value']:.3g})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    worst = max(r["max_abs_delta"] for m in results.values() for r in m["rows"].values())
    lines += ["", f"Largest delta over all methods, settings and models: {worst:.1e}.", ""]
    path.write_text("\n".join(lines))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "fidelity"))
    args = parser.parse_args()
    import torch

    from copyprobe.backends.specs import load_backend

    torch.set_num_threads(1)
    models = [m for m in args.models.split(",") if m]
    backends = {spec: load_backend(spec, device="cpu", dtype="float32", batch_size=4)
                for spec in set(models) | {REFERENCE[m] for m in models}}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in models:
            results[spec] = run_model(spec, backends, tmp)
            print(spec, json.dumps({k: v for k, v in results[spec].items() if k != "rows"}), flush=True)
    command = "python benchmarks/bench_fidelity.py" + ("" if args.models == ",".join(MODELS) else
                                                      f" --models {args.models}")
    out = Path(args.out)
    Path(str(out) + ".json").write_text(json.dumps({"command": command, "results": results}, indent=1))
    worst = write_markdown(results, Path(str(out) + ".md"), command)
    print(f"largest |delta| {worst:.1e} -> {out}.md")
    return 0 if worst <= 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
