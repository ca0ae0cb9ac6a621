"""Name cloze: which word is masked (spaCy and the rule fallback), masking every
occurrence, answer parsing, exact-match scoring through the runner."""

from __future__ import annotations

import re

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.name_cloze import (
    MASK,
    NAME_PROMPT,
    NOUN_PROMPT,
    _spacy_nlp,
    choose_mask,
    mask_word,
    parse_guess,
)
from copyprobe.registry import make_method
from copyprobe.drive import Failure, drive

HARRY = (
    "Getting desperate, Harry asked for the train that left at eleven o'clock, but the guard said "
    "there wasn't one. Harry was now trying hard not to panic. Hagrid must have forgotten to tell "
    "Harry something."
)
NO_NAMES = "The old man walked down to the sea. The sea was calm, and the man was tired of waiting."

TAGGERS = ["rule"] + (["spacy"] if _spacy_nlp() is not None else [])


@pytest.mark.parametrize("tagger", TAGGERS)
def test_masks_every_occurrence_of_the_most_frequent_name(tagger):
    word, kind, used = choose_mask(HARRY, tagger)
    assert (word, kind, used) == ("Harry", "name", tagger)
    masked, n = mask_word(HARRY, word)
    assert n == 3 == masked.count(MASK) and "Harry" not in masked and "Hagrid" in masked


@pytest.mark.parametrize("tagger", TAGGERS)
def test_common_noun_when_there_is_no_name(tagger):
    word, kind, _ = choose_mask(NO_NAMES, tagger)
    assert kind == "noun" and word in {"sea", "man"}
    masked, n = mask_word(NO_NAMES, word)
    assert n == 2 and re.search(rf"\b{word}\b", masked) is None


@pytest.mark.parametrize("tagger", TAGGERS)
def test_a_letters_salutation_and_titles_are_not_names(tagger):
    # spaCy tags "Dear" as a proper noun; on 17 of the 48 planted letters it was masked
    letter = "Dear Edvin, the wind came on Tuesday. Mr Brask says the ice will hold. Dear me, it will not."
    assert choose_mask(letter, tagger)[:2] in {("Edvin", "name"), ("Brask", "name")}
    assert choose_mask("Dearest Ada, the lake froze early.", tagger)[:2] == ("Ada", "name")


def test_rule_fallback_skips_sentence_starts_titles_and_common_words():
    text = '"Come here," said Mr. Bennet to Elizabeth. Elizabeth smiled. Then she left. The end.'
    assert choose_mask(text, "rule")[:2] == ("Elizabeth", "name")
    # "Then"/"The" start sentences, "Mr" is a title, "Bennet" follows "Mr." mid-sentence
    assert choose_mask("Then the Bennet family came. Then they left.", "rule")[:2] == ("Bennet", "name")


def test_mask_word_is_whole_word_and_keeps_possessives():
    masked, n = mask_word("Ann met Anna. Ann's hat fell.", "Ann")
    assert masked == "[MASK] met Anna. [MASK]'s hat fell." and n == 2


@pytest.mark.parametrize(
    "output, guess",
    [("<name>Harry</name>", "Harry"), ("Output: <name> Harry </name> is it", "Harry"),
     ("Harry.", "Harry"), ("  ", ""), ("<name>Harry Potter</name>", "Harry"),
     # sentence answers of Qwen2.5-Coder-0.5B-Instruct (benchmarks/results/blackbox.md)
     ('The word that fills in the [MASK] token in the given passage is "light".', "light"),
     ("The proper name that fills in the [MASK] token is **Elizabeth**.", "Elizabeth"),
     ("The answer would be 'Ahab' here.", "Ahab"),
     ('I think it is "God\'s".', "God's"),
     ('<name>Harry', "Harry"),  # cut off before the closing tag
     ('He said "yes" and then "no".', "He"),  # two quoted words: no single guess, first word
     ("The proper name that fills in the [MASK] token in the given passage is", "The")],
)
def test_parse_guess(output, guess):
    assert parse_guess(output) == guess


def run(method, examples, backend):
    method.validate()
    return drive({e.id: method.run(e) for e in examples}, lambda spec: backend)


def test_exact_match_scoring_through_the_runner():
    asked = []

    def fn(request):
        prompt = request.messages[-1][1]
        asked.append(prompt)
        passage = prompt.rsplit("Input: ", 1)[1]
        # knows Harry's passage, not the other one
        return "<name>harry</name>" if "Hagrid" in passage else "<name>boat</name>"

    backend = FakeBackend(generate_fn=fn)
    results = run(make_method("name_cloze", tagger="rule"), [Example("h", HARRY), Example("n", NO_NAMES)], backend)
    assert results["h"].value == 1.0 and results["h"].details["correct"] is True  # case-insensitive
    assert results["n"].value == 0.0 and results["n"].details["guess"] == "boat"
    assert asked[0] == NAME_PROMPT.format(passage=mask_word(HARRY, "Harry")[0])
    assert asked[1].startswith(NOUN_PROMPT.split("{passage}")[0])


def test_completion_prompt_mode_and_failure_without_words():
    backend = FakeBackend(generate_fn=lambda r: "Harry\nmore")
    results = run(make_method("name_cloze", tagger="rule", chat=False), [Example("h", HARRY), Example("x", "123 456 !!")], backend)
    assert results["h"].value == 1.0
    assert isinstance(results["x"], Failure) and "neither a proper name nor a common noun" in results["x"].reason


def test_bad_parameters():
    with pytest.raises(ConfigError, match="tagger"):
        make_method("name_cloze", tagger="nltk")
    with pytest.raises(ConfigError, match="max_tokens"):
        make_method("name_cloze", max_tokens=0)
