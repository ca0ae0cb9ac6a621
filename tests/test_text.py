"""copyprobe.text's ROUGE tokenizer: rouge-score's tokens on text in Latin script, and the
words of other scripts counted (rouge-score keeps only [a-z0-9])."""

from __future__ import annotations

import random
import sys
import unicodedata

import pytest
from rouge_score import rouge_scorer, tokenizers

from copyprobe.text import RougeTokenizer, rouge_l_scorer

# Latin script and the symbols all scripts share, ASCII to fullwidth forms and mathematical letters
LATIN_POOL = [chr(c) for c in (*range(0x20, 0x370), *range(0x1D00, 0x1F00), *range(0x2000, 0x2C00),
                              *range(0xA720, 0xA800), *range(0xFB00, 0xFB07), *range(0xFF01, 0xFF5F),
                              *range(0x1D400, 0x1D500))] + [" "] * 40 + list("abcdefghij") * 5


@pytest.mark.parametrize("use_stemmer", [False, True])
def test_latin_script_gives_rouge_score_s_own_tokens(use_stemmer):
    rng = random.Random(7)
    mine, theirs = RougeTokenizer(use_stemmer), tokenizers.DefaultTokenizer(use_stemmer)
    for _ in range(5000):
        text = "".join(rng.choice(LATIN_POOL) for _ in range(rng.randint(0, 50)))
        assert mine.tokenize(text) == theirs.tokenize(text), repr(text)
    for text in ("The running dogs ran.", "Café naïve \u2126mega \u212aelvin ﬁne 𝐀", "İstanbul ẞtraße"):
        assert mine.tokenize(text) == theirs.tokenize(text)


def test_every_latin_letter_number_sign_and_symbol_is_treated_as_rouge_score_treats_it():
    """Over every code point whose Unicode name says Latin, or that is no letter of a word (a
    symbol, punctuation, a space, a control, a number like ½ or ①), told apart by unicodedata
    and not by the tokenizer's own ranges: the same tokens as rouge-score's."""
    mine, theirs = RougeTokenizer(), tokenizers.DefaultTokenizer()
    checked, differ = 0, []
    for code in range(0x80, sys.maxunicode + 1):
        ch = chr(code)
        category = unicodedata.category(ch)
        if category in ("Cn", "Co"):  # unassigned and private use: no word in either (and 940,000 of them)
            continue
        name = unicodedata.name(ch, "")
        if " LATIN " in f" {name} " or category == "No" or category[0] in "SPZC" or "FULLWIDTH" in name \
                or name.startswith("MATHEMATICAL "):
            checked += 1
            text = f"ab{ch}cd {ch}"
            if mine.tokenize(text) != theirs.tokenize(text):
                differ.append(f"U+{code:04X} {name}")
    assert checked > 10_000 and differ == []


@pytest.mark.parametrize("text, tokens", [
    ("Слово за словом, running dogs", ["слово", "за", "словом", "run", "dog"]),  # stemmed: ASCII only
    ("Ελληνικά κείμενα", ["ελληνικά", "κείμενα"]),
    ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),  # vowel signs and virama (marks) stay in the word
    ("שָׁלוֹם עולם", ["שָׁלוֹם", "עולם"]),
    ("مرحبا ١٢٣", ["مرحبا", "١٢٣"]),
    ("文字 中文", ["文", "字", "中", "文"]),  # Han and kana: a token each
    ("カタカナ", ["カ", "タ", "カ", "ナ"]),
    ("abcдеф", ["abc", "деф"]),  # a change of script ends a word
    ("ΟΔΟΣ οδος", ["οδοσ", "οδοσ"]),  # case-folded: the final sigma meets the σ of the capitals
    ("カタカナ・テスト", ["カ", "タ", "カ", "ナ", "テ", "ス", "ト"]),  # the middle dot is punctuation
    ("½ ① ௰ word", ["word"]),  # numbers that are no digits of a word, as rouge-score drops them
])
def test_other_scripts_make_words(text, tokens):
    assert RougeTokenizer(use_stemmer=True).tokenize(text) == tokens


@pytest.mark.parametrize("text", ["слово " * 50, "文字" * 40, "שלום עולם " * 25])
def test_a_text_copied_word_for_word_scores_one_in_any_script(text):
    """rouge-score's own scorer gives these 0: no token survives its [a-z0-9] filter."""
    assert rouge_scorer.RougeScorer(["rougeL"]).score(text, text)["rougeL"].fmeasure == 0.0
    assert rouge_l_scorer(use_stemmer=True).score(text, text)["rougeL"].fmeasure == 1.0
    half = " ".join(text.split()[: len(text.split()) // 2]) or text[: len(text) // 2]
    assert 0 < rouge_l_scorer().score(text, half)["rougeL"].fmeasure < 1
