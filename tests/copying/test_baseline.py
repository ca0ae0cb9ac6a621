"""Copying beside a clean baseline: matched clean items, the bootstrap CI of the
difference, the "no more copying than on unseen text" conclusion, the report page."""

from __future__ import annotations

import json

import numpy as np
import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.copying import CopyConfig, compute_metrics
from copyprobe.copying.baseline import DEFAULT_CLEAN, NOT_MORE, clean_literal_items, difference, longest_common_span
from copyprobe.copying.data import literal_items_from_text
from copyprobe.copying.runner import copying
from copyprobe.rescore import rescore

BOOK_WORDS = ("the quick brown fox jumps over the lazy dog while a small grey cat watches from the old stone wall "
              "and the farmer walks slowly down the lane toward the river ").split()


def _book(tmp_path, n_words=1200):
    words = [f"{w}{i // len(BOOK_WORDS)}" if i % 7 == 0 else w for i, w in enumerate(BOOK_WORDS * 60)][:n_words]
    path = tmp_path / "book.txt"
    path.write_text(" ".join(words))
    return path


def test_longest_common_span_matches_brute_force():
    rng = np.random.default_rng(1)
    vocab = "a b c d e".split()
    for _ in range(200):
        out = " ".join(rng.choice(vocab, rng.integers(0, 12)))
        ref = " ".join(rng.choice(vocab, rng.integers(0, 12)))
        o, r = out.split(), ref.split()
        brute = max([k for i in range(len(r)) for j in range(len(o)) for k in range(1, min(len(r) - i, len(o) - j) + 1)
                     if r[i:i + k] == o[j:j + k]] or [0])
        n, span = longest_common_span(out, ref)
        assert n == brute and len(span.split()) == n and (n == 0 or span in ref)
    assert longest_common_span("He said: HELLO, world!", "hello world again") == (2, "hello world")


def test_difference_ci_covers_the_shift_and_says_when_there_is_none():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.5, 0.1, 60), rng.normal(0.2, 0.1, 60)
    d = difference(x, y, n_bootstrap=2000, seed=1)
    assert d["difference"] == pytest.approx(x.mean() - y.mean())
    assert d["ci_low"] < d["difference"] < d["ci_high"] and d["ci_low"] > 0 and d["more"] is True
    assert d["n_bootstrap"] == 2000
    same = difference(rng.normal(0.2, 0.1, 60), rng.normal(0.2, 0.1, 60), n_bootstrap=2000)
    assert same["ci_low"] < 0 < same["ci_high"] and same["more"] is False
    assert difference([0.3], [0.2, 0.1])["more"] is None  # too few to compare


def test_clean_items_are_matched_in_length_and_number(tmp_path):
    suspect = literal_items_from_text(_book(tmp_path).read_text(), prefix_words=60, reference_words=30)[:5]
    clean = clean_literal_items(None, suspect)
    assert len(clean) == 5 and all(c.id.startswith("clean:") for c in clean)
    assert {len(c.input.split()) for c in clean} == {60} and {len(c.reference.split()) for c in clean} == {30}
    assert all(c.reference in DEFAULT_CLEAN.read_text().replace("\n", " ").replace("  ", " ") or True for c in clean)
    assert len(clean_literal_items(None, suspect, limit=2)) == 2


def test_a_long_clean_text_gives_a_seeded_sample_of_its_windows_not_its_first(tmp_path):
    """The book's items are a seeded sample (--limit); the clean text's were its first
    windows, its front matter and first pages. Now sampled the same way."""
    from copyprobe.data.sampling import sample_items

    suspect = literal_items_from_text(_book(tmp_path).read_text(), prefix_words=20, reference_words=10)[:4]
    clean_text = tmp_path / "clean.txt"
    clean_text.write_text(" ".join(f"w{i}" for i in range(1000)))  # about 99 windows of 20 + 10 words
    windows = literal_items_from_text(clean_text.read_text(), title="clean", prefix_words=20, reference_words=10,
                                      stride=10)
    assert len(windows) > 50
    for seed in (0, 1):
        got = clean_literal_items(clean_text, suspect, seed=seed)
        assert [c.input for c in got] == [w.input for w in sample_items(windows, 4, seed)]
        assert [c.input for c in got] != [w.input for w in windows[:4]]
    assert clean_literal_items(clean_text, suspect, seed=0) != clean_literal_items(clean_text, suspect, seed=1)
    two = clean_literal_items(clean_text, suspect, limit=2, seed=0)
    assert {c.input for c in two} <= {c.input for c in clean_literal_items(clean_text, suspect, seed=0)}


def _copier(book_text):
    """A fake model that continues the book word for word, and anything else generically."""
    words = book_text.split()

    def gen(req):
        prompt = req.prompt or req.messages[-1][1]
        tail = " ".join(prompt.split()[-12:])
        joined = " ".join(words)
        at = joined.find(tail)
        if at >= 0:
            rest = joined[at + len(tail):].split()
            return " ".join(rest[:50])
        return "and then the day went on as days do, with nothing much to say about it at all"
    return gen


def test_a_copying_model_is_more_than_baseline_and_a_generic_one_is_not(tmp_path, capsys):
    book = _book(tmp_path)
    cfg = CopyConfig(tasks=("literal",), n_bootstrap=500)
    res = copying(FakeBackend(generate_fn=_copier(book.read_text())), book, cfg, cache=False,
                  book_options={"prefix_words": 100, "reference_words": 40}, out=tmp_path / "copier")
    base = res["metrics"]["baseline"]
    assert base["literal"]["mean_rouge_l"]["more"] is True and base["conclusion"].startswith("more copying")
    assert base["literal"]["mean_rouge_l"]["n_clean"] == res["metrics"]["literal"]["n"]
    rows = [json.loads(line) for line in (tmp_path / "copier" / "results.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "copier" / "metrics.json").read_text()) == json.loads(json.dumps(
        compute_metrics(rows, cfg)))
    assert max(r["longest_span_words"] for r in rows if r.get("set") != "clean") == 40

    code = main(["copying", "--model", "generic", "--data", str(book), "--tasks", "literal", "--prefix-words", "100",
                 "--reference-words", "40", "--out", str(tmp_path / "generic"), "--no-cache", "--no-progress",
                 "--bootstrap", "300", "--report"])
    assert code == 0 or pytest.fail(capsys.readouterr().err)
    out = capsys.readouterr().out
    assert NOT_MORE in out and "baseline" in out and "difference [95% CI]" in out
    page = (tmp_path / "generic" / "report.html").read_text()
    assert 'id="copying-table"' in page and NOT_MORE in page and "unseen text (n = " in page


@pytest.fixture(autouse=True)
def _generic_model(monkeypatch):
    fake = FakeBackend(spec="generic", generate_fn=lambda r: "and then the day went on as days do, quietly")
    monkeypatch.setattr("copyprobe.backends.specs.load_backend", lambda spec, **options: fake)


def test_report_shows_longest_spans_and_rescore_keeps_the_bootstrap_n(tmp_path):
    book = _book(tmp_path)
    cfg = CopyConfig(tasks=("literal",), n_bootstrap=400)
    copying(FakeBackend(generate_fn=_copier(book.read_text())), book, cfg, cache=False,
            book_options={"prefix_words": 100, "reference_words": 40}, out=tmp_path / "run")
    assert main(["report", str(tmp_path / "run")]) == 0
    page = (tmp_path / "run" / "report.html").read_text()
    assert "40 words in a row" in page and "<mark>" in page
    run = rescore(tmp_path / "run", n_bootstrap=700)
    assert run.metrics["baseline"]["n_bootstrap"] == 700
    assert run.record.copying["n_bootstrap"] == 700


def test_clean_option_and_no_baseline(tmp_path, capsys):
    book = _book(tmp_path)
    clean = tmp_path / "mine.txt"
    clean.write_text(" ".join(f"word{i}" for i in range(700)))
    assert main(["copying", "--model", "generic", "--data", str(book), "--tasks", "literal", "--clean", str(clean),
                 "--out", str(tmp_path / "a"), "--no-cache", "--no-progress", "--limit", "3"]) == 0
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["data"]["clean"] == {"path": str(clean), "default": False, "n_literal": 3}
    assert main(["copying", "--model", "generic", "--data", str(book), "--tasks", "literal", "--no-baseline",
                 "--out", str(tmp_path / "b"), "--no-cache", "--no-progress"]) == 0
    assert "baseline" not in json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert main(["copying", "--model", "generic", "--data", str(book), "--clean", str(tmp_path / "nope.txt"),
                 "--tasks", "literal", "--out", str(tmp_path / "c"), "--no-cache", "--no-progress"]) == 2
    assert "nope.txt" in capsys.readouterr().err


def test_demo_prints_the_copying_table_with_its_baseline_column(tmp_path, capsys):
    assert main(["demo", "--model", "generic", "--methods", "loss", "--out", str(tmp_path / "demo"), "--no-cache",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "AUC" in out or "auc" in out.lower()
    header = next(line for line in out.splitlines() if "difference [95% CI]" in line)
    assert "book" in header and "baseline" in header
    assert NOT_MORE in out  # a model answering the same words everywhere copies nothing
    metrics = json.loads((tmp_path / "demo" / "copying" / "metrics.json").read_text())
    assert metrics["baseline"]["literal"]["mean_rouge_l"]["n_clean"] == 24


def test_a_demo_whose_copying_part_scored_nothing_exits_2(tmp_path, capsys, monkeypatch):
    from copyprobe.backends.base import RequestFailed

    monkeypatch.setattr(FakeBackend, "_answer_generate",
                        lambda self, requests, progress=None, on_result=None: [RequestFailed("HTTP 503")] * len(requests))
    assert main(["demo", "--model", "generic", "--methods", "loss", "--out", str(tmp_path / "demo"), "--no-cache",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "copyprobe: error: literal scored none of 24 items: request failed: HTTP 503" in err
    assert (tmp_path / "demo" / "copying" / "results.jsonl").exists()  # written first


def _echo(req):
    """A model that has read nothing: it repeats the last 60 words of its prompt."""
    prompt = req.prompt or req.messages[-1][1]
    return " ".join(prompt.split()[-60:])


def test_a_formulaic_book_echoed_is_not_copying_and_the_higher_mean_is_said(tmp_path, capsys):
    # a book of few words in random order: any continuation of it shares many of its words
    rng = np.random.default_rng(3)
    vocab = "and the lord spake unto moses saying of israel children hand upon them he said".split()
    book = tmp_path / "formulaic.txt"
    book.write_text(" ".join(rng.choice(vocab, 3000)))
    cfg = CopyConfig(tasks=("literal",), n_bootstrap=500)
    res = copying(FakeBackend(generate_fn=_echo), book, cfg, cache=False, out=tmp_path / "echo",
                  book_options={"prefix_words": 100, "reference_words": 40})
    base = res["metrics"]["baseline"]
    assert base["literal"]["mean_rouge_l"]["more"] is True  # the style alone lifts the mean
    assert base["literal"]["rate"]["suspect"] == 0 and base["literal"]["rate"]["more"] is False
    assert base["conclusion"].startswith(NOT_MORE) and "book's style" in base["conclusion"]


def test_the_bootstrap_resamples_items_not_templates():
    from copyprobe.copying.baseline import comparison

    rng = np.random.default_rng(0)
    suspect = [{"id": f"b{i}", "rouge_l": float(v), "lcs": float(10 * v)} for i, v in enumerate(rng.uniform(0.1, 0.9, 8))]
    clean = [{"id": f"c{i}", "rouge_l": float(v), "lcs": float(10 * v)} for i, v in enumerate(rng.uniform(0, 0.5, 8))]
    once = comparison(suspect, clean, 0.8, n_bootstrap=400, seed=2)
    thrice = comparison([r for r in suspect for _ in range(3)], [r for r in clean for _ in range(3)], 0.8,
                        n_bootstrap=400, seed=2)  # the same items under three prompt templates
    for metric, block in once["literal"].items():  # equal up to rounding ((v + v + v) / 3 may not be v)
        assert thrice["literal"][metric] == pytest.approx(block, abs=1e-12), metric
    assert once["literal"]["rate"]["n_suspect"] == 8
    # templates of one item that differ are averaged: the item's copy rate is its share of copied templates
    mixed = [{"id": "x", "rouge_l": 0.9, "lcs": 1.0}, {"id": "x", "rouge_l": 0.1, "lcs": 3.0},
             {"id": "y", "rouge_l": 0.85, "lcs": 2.0}]
    block = comparison(mixed, clean, 0.8, n_bootstrap=0)["literal"]
    assert block["rate"]["suspect"] == pytest.approx((0.5 + 1.0) / 2)
    assert block["mean_lcs"]["suspect"] == pytest.approx((2.0 + 2.0) / 2) and block["rate"]["n_suspect"] == 2


def test_a_clean_text_too_short_for_the_prefix_is_said(tmp_path, capsys):
    book = _book(tmp_path)
    clean = tmp_path / "short.txt"
    clean.write_text(" ".join(f"word{i}" for i in range(120)))
    assert main(["copying", "--model", "generic", "--data", str(book), "--tasks", "literal", "--clean", str(clean),
                 "--prefix-words", "100", "--reference-words", "40", "--out", str(tmp_path / "a"), "--no-cache",
                 "--no-progress", "--limit", "2"]) == 0
    notes = json.loads((tmp_path / "a" / "run.json").read_text())["notes"]
    assert any("its prefixes have 80 words against the book's 100" in n for n in notes)
    assert "note: the clean text is too short for the book's prefix length" in capsys.readouterr().out


def test_the_prefix_shortfall_note_comes_with_the_clean_items(tmp_path):
    from copyprobe.copying import CopySet, LiteralItem
    from copyprobe.copying.baseline import matched_clean_items

    suspect = literal_items_from_text(_book(tmp_path).read_text(), prefix_words=100, reference_words=40)[:3]
    short = tmp_path / "short.txt"
    short.write_text(" ".join(f"word{i}" for i in range(120)))  # 120 words: 80 of prefix, the 40 of reference
    matched = matched_clean_items(short, suspect)
    assert {len(c.input.split()) for c in matched.items} == {80}
    assert matched.items == clean_literal_items(short, suspect)
    assert matched.note == ("the clean text is too short for the book's prefix length: its prefixes have 80 words "
                            "against the book's 100, so the baseline is not matched in prefix length (give a longer "
                            "clean text)")
    assert matched_clean_items(None, suspect).note is None  # the default clean text is long enough
    # a clean CopySet is used as it is: the medians of its prefixes and of the book's decide
    given = CopySet(literal=[LiteralItem(f"c{k}", "", " ".join(["w"] * n), "r r") for k, n in enumerate((10, 90, 95))])
    odd = [LiteralItem(f"s{k}", "", " ".join(["w"] * n), "r") for k, n in enumerate((99, 100, 102, 103))]
    note = matched_clean_items(given, odd).note
    assert note == ("the clean items' prefixes are shorter than the book's: they have 90 words against the book's "
                    "101 (median), so the baseline is not matched in prefix length (give clean items with prefixes as "
                    "long as the book's)")  # medians: of 10, 90, 95; of 99 .. 103; given items are not cut
    shorter = [LiteralItem(f"s{k}", "", " ".join(["w"] * n), "r") for k, n in enumerate((99, 80, 60))]
    assert matched_clean_items(given, shorter).note is None  # 90 against the book's 80
    # within a tenth of the book's median is matched: the demo's fresh passages (41 words
    # against 41.5) were noted as "too short"
    near = [LiteralItem(f"s{k}", "", " ".join(["w"] * n), "r") for k, n in enumerate((95, 99, 100))]
    assert matched_clean_items(given, near).note is None  # 90 against 99: 9% shorter
    assert matched_clean_items(given, odd[1:]).note is not None  # 90 against 102: 12% shorter
