"""Frequency tables: counting, streaming in bounded memory, saving, and mismatch errors."""

from __future__ import annotations

import os
import threading
import tracemalloc
import warnings

import pytest

from copyprobe.cli.main import main
from copyprobe.errors import ConfigError, DataError, DataWarning
from copyprobe.freq import build_frequency_table, load_frequency_table


class WordTokenizer:
    """A tiny word-level tokenizer with the Hugging Face calls the table builder uses."""

    def __init__(self, words, name="words"):
        self.name_or_path = name
        self.vocab = {"<unk>": 0}
        for w in words:
            self.vocab.setdefault(w, len(self.vocab))
        self.inverse = {i: w for w, i in self.vocab.items()}

    def __len__(self):
        return len(self.vocab)

    def __call__(self, texts, add_special_tokens=True):
        assert add_special_tokens is False
        get = self.vocab.get
        return {"input_ids": [[get(w, 0) for w in t.split()] for t in texts]}

    def get_vocab(self):
        return dict(self.vocab)

    def convert_ids_to_tokens(self, ids):
        return [self.inverse[i] for i in ids]

    def decode(self, ids):
        return " ".join(self.inverse[i] for i in ids)


TOK = WordTokenizer(["the", "cat", "sat", "on", "mat"])


def test_counts_by_hand(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\nthe dog\n")
    table = build_frequency_table(TOK, [str(corpus)])
    # ids: <unk>=0 the=1 cat=2 sat=3 on=4 mat=5 ; "dog" is unknown
    assert table.counts.tolist() == [1, 3, 1, 1, 1, 1]
    assert table.total == 8 and table.vocab_size == 6
    # Laplace: (count + 1) / (total + V) = (3 + 1) / (8 + 6)
    assert table.frequencies([1, 2]) == pytest.approx([4 / 14, 2 / 14])


def test_chunk_boundaries_never_split_words(tmp_path):
    corpus = tmp_path / "c.txt"
    text = "the cat sat on the mat " * 50
    corpus.write_text(text)
    whole = build_frequency_table(TOK, [str(corpus)], chunk_chars=1 << 20)
    tiny = build_frequency_table(TOK, [str(corpus)], chunk_chars=7)
    assert tiny.counts.tolist() == whole.counts.tolist() == [0, 100, 50, 50, 50, 50]


def test_iterables_and_files_mix_and_documents_stay_apart(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat")  # no trailing space: must not glue onto the next source
    table = build_frequency_table(TOK, [str(corpus), iter(["sat on", " the mat"])])
    assert table.counts.tolist() == [0, 2, 1, 1, 1, 1]


def test_save_load_roundtrip(tmp_path):
    table = build_frequency_table(TOK, [iter(["the cat sat"])], name="toy")
    path = table.save(tmp_path / "t.npz")
    loaded = load_frequency_table(path)
    assert loaded.counts.tolist() == table.counts.tolist()
    assert loaded.name == "toy" and loaded.vocab_hash == table.vocab_hash
    loaded.check_tokenizer(TOK)  # same vocabulary: no error


def test_streams_corpus_far_larger_than_memory_used(tmp_path):
    """12 MB of text arrive through a named pipe (it cannot be read whole or seeked);
    the builder's Python memory peak must stay a small fraction of that."""
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)
    line = "the cat sat on the mat and the dog sat on the log\n"  # 13 words, 51 chars
    repeats = 240_000  # 12.2 MB
    block = line * 1000

    def writer():
        with open(fifo, "w") as f:
            for _ in range(repeats // 1000):
                f.write(block)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    tracemalloc.start()
    try:
        table = build_frequency_table(TOK, [str(fifo)], chunk_chars=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    thread.join(timeout=10)
    size = len(line) * repeats
    assert table.total == 13 * repeats
    assert table.counts[1] == 4 * repeats  # "the"
    print(f"peak {peak / 1e6:.2f} MB for {size / 1e6:.1f} MB")
    assert peak < size / 10, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB corpus"


def test_empty_corpus_is_an_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n")
    with pytest.raises(DataError, match="empty"):
        build_frequency_table(TOK, [str(empty)])
    with pytest.raises(DataError, match="no corpus"):
        build_frequency_table(TOK, [])


def test_missing_or_bad_table_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_frequency_table(tmp_path / "nope.npz")
    with pytest.raises(ConfigError, match="no frequency table"):
        load_frequency_table("")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="not a copyprobe frequency table"):
        load_frequency_table(junk)


def _truncated_npz(path):
    import numpy as np

    np.savez(path, counts=np.arange(3))
    path.write_bytes(path.read_bytes()[:100])  # a copy or download cut short


@pytest.mark.parametrize("make, words", [
    (_truncated_npz, "the .npz archive is truncated or damaged"),
    (lambda path: path.write_bytes(b"%PDF-1.4\n%\xe2\xe3\n1 0 obj"), "not a NumPy .npz archive"),
    (lambda path: path.mkdir(), "it is a directory"),
    (lambda path: path.write_bytes(b""), "the file is empty"),
    (lambda path: path.write_bytes(b"\x93NUMPY\x01\x00"), "a single NumPy .npy array, not a .npz archive"),
])
def test_unreadable_table_is_one_line_in_words(tmp_path, capsys, make, words):
    path = tmp_path / "t.npz"
    make(path)
    with pytest.raises(ConfigError) as info:
        load_frequency_table(path)
    message = str(info.value)
    assert f"is not a copyprobe frequency table ({words})" in message
    assert "Error" not in message and "\n" not in message  # no exception class names
    assert main(["freq", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_tokenizer_mismatch_errors():
    table = build_frequency_table(TOK, [iter(["the cat sat on the mat"])])
    other = WordTokenizer(["a", "b", "c", "d", "e"], name="other")
    with pytest.raises(ConfigError, match="vocabularies differ"):
        table.check_tokenizer(other)
    # ids outside the table's vocabulary
    with pytest.raises(ConfigError, match="tokenizer mismatch"):
        table.check_tokens([1, 9], None)
    # ids inside it, but the strings are another tokenizer's
    with pytest.raises(ConfigError, match="tokens differ"):
        table.check_tokens([1, 2, 3], ["a", "b", "c"])
    table.check_tokens([1, 2, 3], ["the", "cat", "sat"])  # raw spelling matches
    table.check_tokens([1, 2, 3], ["the", "cat", "xx"])  # 2 of 3 agree: accepted


def test_cli_build_and_show(tmp_path, monkeypatch, capsys):
    import copyprobe.cli.commands.freq as freq_cmd

    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n")
    monkeypatch.setattr(freq_cmd, "load_tokenizer", lambda spec: TOK)
    out = tmp_path / "t.npz"
    assert main(["freq", "build", "--tokenizer", "toy", "--corpus", str(corpus), "--out", str(out), "--quiet"]) == 0
    assert "6 tokens" in capsys.readouterr().out
    assert load_frequency_table(out).counts.tolist() == [0, 2, 1, 1, 1, 1]
    assert main(["freq", "show", str(out)]) == 0
    assert "tokenizer:   toy" in capsys.readouterr().out


def test_bytes_not_utf8_are_counted_as_u_fffd_and_said(tmp_path, monkeypatch, capsys):
    import gzip

    import copyprobe.cli.commands.freq as freq_cmd

    tok = WordTokenizer(["the", "cat", "\ufffd"])
    plain, packed = tmp_path / "c.txt", tmp_path / "d.txt.gz"
    plain.write_bytes(b"the cat \xff the \xfe\n")
    packed.write_bytes(gzip.compress(b"cat \xe9 cat\n"))
    with pytest.warns(DataWarning) as caught:
        table = build_frequency_table(tok, [str(plain), str(packed)])
    # "the cat ? the ?" and "cat ? cat": a replacement character where each byte was
    assert table.counts.tolist() == [0, 2, 3, 3]
    said = [str(w.message) for w in caught]
    assert said == [f"corpus {str(plain)!r}: 2 bytes not UTF-8, counted as the replacement character U+FFFD",
                    f"corpus {str(packed)!r}: 1 byte not UTF-8, counted as the replacement character U+FFFD"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean file warns nothing
        plain.write_text("the cat\n")
        build_frequency_table(tok, [str(plain)])
    monkeypatch.setattr(freq_cmd, "load_tokenizer", lambda spec: tok)
    assert main(["freq", "build", "--tokenizer", "toy", "--corpus", str(packed), "--out", str(tmp_path / "t.npz"),
                 "--quiet"]) == 0
    assert capsys.readouterr().err.strip() == f"copyprobe: warning: corpus {str(packed)!r}: 1 byte not UTF-8, " \
                                              "counted as the replacement character U+FFFD"


def test_cli_errors_are_one_line(tmp_path, monkeypatch, capsys):
    import copyprobe.cli.commands.freq as freq_cmd

    monkeypatch.setattr(freq_cmd, "load_tokenizer", lambda spec: TOK)
    empty = tmp_path / "e.txt"
    empty.write_text("")
    code = main(["freq", "build", "--tokenizer", "toy", "--corpus", str(empty), "--out", str(tmp_path / "t.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "corpus is empty" in err and len(err.strip().splitlines()) == 1
    code = main(["freq", "build", "--tokenizer", "toy", "--corpus", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "t.npz")])
    assert code == 2 and "not found" in capsys.readouterr().err
    code = main(["freq", "build", "--tokenizer", "toy", "--corpus", str(empty), "--out", str(tmp_path / "t.npz"),
                 "--chunk-chars", "0"])
    assert code == 2 and "argument --chunk-chars: must be an integer >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "t.npz").exists()


def test_a_binary_corpus_file_is_refused_not_counted(tmp_path, monkeypatch, capsys):
    """Random bytes are mostly not UTF-8: before, the build counted them (1,717 replaced
    bytes in a 4 kB file, exit 0) into a table of noise; now it is one line and exit 2, as
    the readers of passages refuse binary files. A text with a few stray bytes still counts."""
    import random

    import copyprobe.cli.commands.freq as freq_cmd

    tok = WordTokenizer(["the", "cat", "\ufffd"])
    noise = tmp_path / "noise.txt"
    noise.write_bytes(random.Random(0).randbytes(4096))
    with pytest.raises(DataError, match=r"is not UTF-8 text \(.* control characters and .* bytes that are not UTF-8 in "):
        build_frequency_table(tok, [str(noise)])
    controls = tmp_path / "controls.txt"
    controls.write_bytes(b"the\x01cat\x02 " * 200)  # valid UTF-8, but no text
    with pytest.raises(DataError, match="controls.txt' is not UTF-8 text .*: a binary file, or text in another"):
        build_frequency_table(tok, [str(controls)])
    monkeypatch.setattr(freq_cmd, "load_tokenizer", lambda spec: tok)
    assert main(["freq", "build", "--tokenizer", "toy", "--corpus", str(noise), "--out", str(tmp_path / "t.npz"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not UTF-8 text" in err and not (tmp_path / "t.npz").exists()
    stray = tmp_path / "stray.txt"
    stray.write_bytes(b"the cat the cat \xff " * 100)  # one byte in 18: a damaged text, counted
    with pytest.warns(DataWarning, match="100 bytes not UTF-8"):
        assert build_frequency_table(tok, [str(stray)]).counts.tolist()[1:] == [200, 200, 100]
    # text, however it looks: CJK, vertical tabs (Word's line breaks), colour codes; and a
    # stray byte far from the start is not counted against a small first chunk
    for i, sample in enumerate(["猫が好きです。" * 200, "the cat\vthe cat\f" * 200, "\x1b[31mthe cat\x1b[0m " * 200]):
        (tmp_path / f"text{i}.txt").write_text(sample, encoding="utf-8")
        build_frequency_table(tok, [str(tmp_path / f"text{i}.txt")])
    late = tmp_path / "late.txt"
    late.write_bytes(b"the cat " * 700 + b"\xff\xfe\xfd\xfc\xfb the")
    with pytest.warns(DataWarning, match="5 bytes not UTF-8"):
        build_frequency_table(tok, [str(late)], chunk_chars=20)


@pytest.mark.parametrize("sample, binary", [
    ("the cat\vthe cat\f\x1b[31mred\x1b[0m\t\r\n" * 100, False),  # Word's line breaks, colour codes, tabs
    ("the cat\x85the cat\x7f " * 100, True),  # C1 controls and DEL: counted by books, not by freq before
    ("the\x01cat\x02 " * 200, True),
    ("the cat\x00" * 3 + "the cat " * 100, False),  # three stray NULs in a text
])
def test_books_and_corpus_files_tell_binary_from_text_by_one_rule(tmp_path, sample, binary):
    """Books refused \\v and ESC, the corpus reader C1 controls; one count serves both."""
    from copyprobe.data.books import read_text

    path = tmp_path / "f.txt"
    path.write_text(sample, encoding="utf-8")
    tok = WordTokenizer(["the", "cat"])
    for read in (lambda: read_text(path), lambda: build_frequency_table(tok, [str(path)])):
        if binary:
            with pytest.raises(DataError, match="binary"):
                read()
        else:
            read()
