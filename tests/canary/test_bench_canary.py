"""The canary benchmark's split and table helpers (the benchmark itself is too slow for tests)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_canary", ROOT / "benchmarks" / "bench_canary.py")
bench_canary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_canary)


def test_balanced_seed_puts_half_of_every_level_in_training():
    from copyprobe.plant.split import split_documents

    args = bench_canary.parse_args(["--repeats", "1,10,100", "--docs-per-level", "4"])
    seed = bench_canary.balanced_seed(args)
    names = sorted(n for _, n in bench_canary.doc_names(args))
    members, _ = split_documents(names, 0.5, seed)
    chosen = [names[i] for i in members]
    for r in (1, 10, 100):
        assert sum(n.startswith(f"r{r:03d}-") for n in chosen) == 2
    for earlier in range(seed):  # the smallest such seed
        m, _ = split_documents(names, 0.5, earlier)
        counts = [sum(names[i].startswith(f"r{r:03d}-") for i in m) for r in (1, 10, 100)]
        assert counts != [2, 2, 2]


def test_table_lists_every_level_and_says_what_is_missing():
    args = bench_canary.parse_args(["--repeats", "1,10", "--docs-per-level", "2", "--methods", "loss"])
    doc = lambda name, r, member, rank: {"doc": name, "repeat": r, "member": member, "intact_copies": r,  # noqa: E731
                                          "rendering": "html", "loss": {"rank": rank, "p": rank / 100, "n": 100}}
    run = {"model": "hf:m", "seconds": 1.0, "plant": {}, "documents": [doc("r001-0", 1, True, 40),
                                                                      doc("r010-0", 10, True, 1)],
           "levels": [{"repeat": 1, "member_loss_p": [0.4], "member_loss_combined_p": 0.4, "nonmember_loss_p": [0.7],
                       "loss_passage_auc": 0.6, "n_passages": 5},
                      {"repeat": 10, "member_loss_p": [0.01], "member_loss_combined_p": 0.01,
                       "nonmember_loss_p": [0.33], "loss_passage_auc": 0.9, "n_passages": 8}]}
    payload = {"created": "now", "machine": "m", "commands": ["python benchmarks/bench_canary.py --stage test"],
               "settings": {k: v for k, v in vars(args).items() if k != "stage"}, "runs": {"1": run}}
    text = bench_canary.render_md(payload)
    assert "| 1 | 0.4 | 0.4 | 0.7 | 0.6 (5 passages) |" in text
    assert "| 10 | 0.01 | 0.01 | 0.33 | 0.9 (8 passages) |" in text
    assert "| r010-0 | html | 10 | yes | 10 | 1/100 |" in text
    assert "Missing: epoch setting(s) 3" in text


def test_publisher_format_reformats_yet_canary_find_sees_every_copy():
    from copyprobe.canary.find import find_in_text
    from copyprobe.canary.kit import draw_kit, kit_from_manifest

    doc = "\n\n".join(["The harbour at Kellmouth had been quiet for most of that winter. The fishing boats stayed "
                       "tied to the wall, and the nets hung drying above the slipway. Nobody in the village "
                       "expected the storm that came in the second week of February."] * 3)
    marked, manifest = draw_kit(doc, "d.txt", n_candidates=5, seed="bench-format", repeat=3,
                                bind_to_document=False)  # as the benchmark draws
    printed = bench_canary.publisher_format(marked)
    assert printed != marked and "\ufb01" in printed  # ligatures set
    assert max(len(line) for line in printed.splitlines()) <= 61
    assert any(line.endswith("-") for line in printed.splitlines())  # a word hyphenated at a line end
    hits = [h for h in find_in_text(printed, kit_from_manifest(manifest).canaries) if h.published]
    assert len(hits) == 3


def test_null_summary_counts_ranks_and_rejections():
    args = bench_canary.parse_args(["--stage", "null", "--null-candidates", "4"])
    ranks = [1, 2, 3, 4] * 50
    payload = bench_canary.null_payload(args, ranks, "cmd", 1.0)
    assert payload["rank_counts"] == [50, 50, 50, 50] and payload["n_kits"] == 200
    assert payload["rejected_at_alpha"] == 0  # p = 1/4 at best, above 0.05
    assert payload["chisquare_p"] == 1.0 and payload["mean_p"] == (1 + 2 + 3 + 4) / 16
    skewed = bench_canary.null_payload(args, [1] * 200, "cmd", 1.0)
    assert skewed["ks_p"] < 1e-6 and skewed["chisquare_p"] < 1e-6
    text = bench_canary.render_null_md(payload)
    assert "| kits | 50 | 50 | 50 | 50 |" in text and "`cmd`" in text


def test_null_summary_breaks_ties_at_random_for_the_ks_test():
    args = bench_canary.parse_args(["--stage", "null", "--null-candidates", "10"])
    # every candidate tied: the reported rank is always 10 (conservative), the randomised p uniform
    payload = bench_canary.null_payload(args, [10] * 2000, "cmd", 1.0, ties=[9] * 2000)
    assert payload["ks_p"] > 0.001 and payload["n_kits_with_ties"] == 2000
    assert payload["mean_p"] == 1.0 and payload["rejected_at_alpha"] == 0
    assert bench_canary.null_payload(args, [10] * 2000, "cmd", 1.0)["ks_p"] < 1e-6  # ties ignored: not uniform


def test_html_and_epub_renderings_read_back_hold_every_copy(tmp_path):
    from copyprobe.canary.find import find_in_text
    from copyprobe.canary.kit import draw_kit, kit_from_manifest

    doc = "\n\n".join([f"Paragraph {k}. The ferry left the keeper's landing late -- the engine was cold, and the "
                       "fish market had already closed when she finally tied up at the wall." for k in range(4)])
    marked, manifest = draw_kit(doc, "d.txt", n_candidates=5, seed="bench-render", repeat=3)
    canaries = kit_from_manifest(manifest).canaries
    assert bench_canary.render(marked, "text", tmp_path / "t") == bench_canary.publisher_format(marked)
    for rendering, suffix in (("html", ".html"), ("epub", ".epub")):
        text = bench_canary.render(marked, rendering, tmp_path / rendering)
        assert (tmp_path / rendering).with_suffix(suffix).exists()
        assert "<p>" not in text and "Letters" in text  # markup stripped, the heading kept as text
        assert "keeper\u2019s" in text and "\u2014" in text  # typeset: curly quotes and dashes survive the reader
        assert len([h for h in find_in_text(text, canaries) if h.published]) == 3


def test_base_documents_from_a_directory_in_name_order(tmp_path):
    for name, text in (("b.txt", "second"), ("a.txt", "first"), ("c.md", "not a text file")):
        (tmp_path / name).write_text(text, encoding="utf-8")
    args = bench_canary.parse_args(["--base-docs", str(tmp_path)])
    assert bench_canary.base_texts(args) == ["first", "second"]


def test_null_table_shows_cpu_time_per_sentence():
    args = bench_canary.parse_args(["--stage", "null", "--null-candidates", "4"])
    payload = bench_canary.null_payload(args, [1, 2, 3, 4] * 5, "cmd", 9.0)
    payload["calls"] = [{"first_kit": 0, "kits": 20, "sentences": 80, "threads": 1, "batch_size": 8,
                         "dtype": "float32", "wall_s": 30.0, "cpu_s": 10.0}]
    assert "| 0..19 | 80 | 1 | 8 | float32 | 30.0 | 10.0 | 125 |" in bench_canary.render_null_md(payload)


def test_table_stage_rewrites_the_tables_and_keeps_the_reading(tmp_path):
    args = bench_canary.parse_args(["--stage", "null", "--null-candidates", "4"])
    payload = bench_canary.null_payload(args, [1, 2, 3, 4, 4], "cmd", 1.0)
    (tmp_path / "canary_null.json").write_text(json.dumps(payload))
    (tmp_path / "canary_null.md").write_text("stale table\n\n## Reading (by hand)\n\n- a note\n")
    run = {"model": "hf:m", "seconds": 1.0, "plant": {}, "documents": [], "levels": []}
    (tmp_path / "canary.json").write_text(json.dumps(
        {"created": "now", "machine": "m", "commands": [], "runs": {"1": run},
         "settings": {k: v for k, v in vars(bench_canary.parse_args([])).items() if k != "stage"}}))
    assert bench_canary.main(["--stage", "table", "--results", str(tmp_path)]) == 0
    null_md = (tmp_path / "canary_null.md").read_text()
    assert null_md.startswith(bench_canary.render_null_md(payload)) and "stale" not in null_md
    assert null_md.endswith("\n## Reading (by hand)\n\n- a note\n")
    assert "## 1 epoch(s): `hf:m`" in (tmp_path / "canary.md").read_text()
