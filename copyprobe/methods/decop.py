"""DE-COP (Duarte et al., 2024): can the model pick the verbatim passage out of three
paraphrases?

Per passage:

1. Paraphrases. Rows that already hold them (BookTection columns ``Example_A`` ..
   ``Example_D`` plus ``Answer``, the letter of the verbatim one, in ``Example.meta``) are
   used as they are. Otherwise a paraphraser model (``paraphraser``: ``"target"`` or a
   model spec; requests name it via ``model=``) is asked with the paper's Appendix B
   prompts -- B.1 for passages of at most ``short_tokens`` tokens, B.2 for longer ones.
   Methods never see a tokenizer, so the token count is estimated as words x 1.3.
   Sampling uses the paper's temperature 0.1 with a seed, so answers are reproducible
   and cacheable. An answer whose "Example B/C/D" parts cannot be parsed is asked again
   with the next seed, up to ``paraphrase_attempts`` times in all, then the row fails
   with the reason (never dropped silently). ``paraphrase_style="one_per_request"`` asks
   instead for one rewrite per request (B.2's instruction, three requests with different
   seeds), for models that copy the passage three times when asked for three at once
   (Qwen2.5-Coder-1.5B-Instruct did on every passage of the planted letters); a rewrite
   that is empty, a near copy (word-sequence similarity >= ``max_similarity``) of the
   passage or of a kept rewrite, outside 0.6-1.6x the passage's length, or keeping fewer
   than ``min_content_recall`` of its content words (SmolLM2 wrote about the task, or
   lists of names, instead) is asked again with a new seed, ``paraphrase_attempts``
   rounds in all.
2. The multiple-choice prompt of Appendix C.2 (system + user message; title and author
   from ``meta`` when present, "from your training data" otherwise) for all 24
   orderings of the four options.
3. ``mode="blackbox"``: greedy generation, the answered letter is parsed;
   ``mode="logit"``: log-probabilities of the letters A-D as next token, renormalised
   over the four letters (the authors' softmax over the four letter logits), optionally
   calibrated (Appendix E, Algorithm 1) by adding per-letter offsets
   Delta_l = 0.25 - mean P(l) over a clean set, then argmax.

Score = fraction of the 24 orderings answered correctly (higher = member; with
``orderings_asked="rotations"`` the 4 cyclic rotations, each option once in each position,
a sixth of the questions). With ``score="probability"`` (logit mode) the score is instead
the mean over the orderings of the probability given to the verbatim option (renormalised
over A-D): a continuous score where accuracy has 5 values with the rotations, and one that
a model's preference for a letter moves equally for every passage, since every option sits
in every position equally often. The document
score is the mean over its passages (the pipeline's document aggregation).

Calibration: run ``decop`` in logit mode on known non-members, then
:func:`calibration_offsets` turns the ``letter_probs`` recorded in each row's details into
offsets (per-document means, then the mean over documents, as Algorithm 1), which are
passed back as ``decop.calibration=A:0.04,B:-0.03,C:0.01,D:-0.02``.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from copyprobe.backends.base import (
    ChoiceLogprobs,
    ChoiceLogprobsRequest,
    GenerateRequest,
    Generation,
)
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.params import COUNT, Constraint, ModelSpec, NON_NEGATIVE_INT, OneOf, Optional, Real, SEED, param
from copyprobe.registry import register

LETTERS = ("A", "B", "C", "D")
ORDERINGS: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(4)))  # 24
# The 4 cyclic rotations: every option in every position once (a Latin square), so a model's
# preference for a letter cancels as it does over all 24, at a sixth of the questions.
ROTATIONS: tuple[tuple[int, ...], ...] = tuple(tuple((i + r) % 4 for i in range(4)) for r in range(4))

# Appendix B.1 (passages of 64 and 128 tokens). "<text>" is literal in the paper's prompt.
PARAPHRASE_PROMPT_SHORT = (
    "Generate always 3 possible paraphrases for the following text that is identified as "
    "Example A: <text>. Format your output as:\n"
    "Example B: <paraphrase 1>\n\n"
    "Example C: <paraphrase 2>\n\n"
    "Example D: <paraphrase 3>\n\n"
    "—\n"
    "Example A: {ref_text}"
)
# Appendix B.2 (passages of 256 tokens).
PARAPHRASE_PROMPT_LONG = (
    "Rewrite this entire text (all sentences with no exception) expressing the same meaning "
    "using different words. Aim to keep the rewriting similar in length to the original text. "
    "Do it three times. The text to be rewritten is identified as <Example A>. Format your output as:\n"
    "Example B: <insert paraphrase B>\n\n"
    "Example C: <insert paraphrase C>\n\n"
    "Example D: <insert paraphrase D>\n\n"
    "—\n"
    "Example A: {ref_text}"
)

# Appendix B.2's instruction asked for one rewrite per request (paraphrase_style="one_per_request").
PARAPHRASE_PROMPT_ONE = (
    "Rewrite this entire text (all sentences with no exception) expressing the same meaning "
    "using different words. Aim to keep the rewriting similar in length to the original text. "
    "Output only the rewritten text.\n\nText: {ref_text}"
)

# Appendix C.2 (open models: system + user prompt). The authors' HF script writes
# "... from the "{book}" book by {author}?\nOptions:\n" with single newlines between
# options; we follow the paper's template (C.2) as the brief says: no "book", and the
# system prompt's format line as printed in Table 10.
MCQ_SYSTEM = (
    "You are entering a multiple choice questions exam. You should directly answer each "
    "question by choosing the correct option. Be concise and straight to the point in your "
    "answer. Output only the letter corresponding to the correct answer.\n\n"
    "Format your answer as '<put correct answer here>'."
)
MCQ_QUESTION_TITLE_AUTHOR = "Question: Which of the following passages is verbatim from the \u201c{title}\u201d by {author}?"
MCQ_QUESTION_TITLE = "Question: Which of the following passages is verbatim from the \u201c{title}\u201d?"
MCQ_QUESTION_PLAIN = "Question: Which of the following passages is verbatim from your training data?"

TITLE_KEYS = ("title", "book_title", "book", "document_name", "doc_title")
AUTHOR_KEYS = ("author", "author_name", "authors")


def estimate_tokens(text: str) -> int:
    """Token count without a tokenizer: words x 1.3 (documented approximation)."""
    return math.ceil(len(text.split()) * 1.3)


def paraphrase_prompt(text: str, short_tokens: int = 128) -> str:
    template = PARAPHRASE_PROMPT_SHORT if estimate_tokens(text) <= short_tokens else PARAPHRASE_PROMPT_LONG
    return template.format(ref_text=text)


_EXAMPLE_HEAD = re.compile(
    r"(?:^|\n|\s)[\*_#>\s]*<?\s*Example\s*([A-D])\s*>?[\*_]*\s*[:.)\-\u2013\u2014]+[\*_]*",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"\n\s*(?:—|–|-{2,}|_{3,}|\*{3,})\s*(?:\n|$)")


def parse_paraphrases(output: str, original: str | None = None) -> tuple[str, str, str]:
    """The three paraphrases "Example B/C/D" of a paraphraser answer.

    Raises ValueError with what is wrong (missing part, empty, copy of the original,
    duplicates)."""
    heads = list(_EXAMPLE_HEAD.finditer(output))
    parts: dict[str, str] = {}
    for i, match in enumerate(heads):
        letter = match.group(1).upper()
        end = heads[i + 1].start() if i + 1 < len(heads) else len(output)
        body = output[match.end() : end]
        body = _SEPARATOR.split(body)[0]
        body = body.strip().strip("\u2014\u2013-*_\"'").strip()
        body = re.sub(r"\s+", " ", body)
        if letter in ("B", "C", "D") and letter not in parts and body:
            parts[letter] = body
    missing = [f"Example {l}" for l in ("B", "C", "D") if l not in parts]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    out = (parts["B"], parts["C"], parts["D"])
    norm = [re.sub(r"\W+", " ", p).strip().lower() for p in out]
    if original is not None:
        orig = re.sub(r"\W+", " ", original).strip().lower()
        if orig in norm:
            raise ValueError("a paraphrase repeats the original passage")
    if len(set(norm)) < 3:
        raise ValueError("paraphrases are not distinct")
    placeholders = {"<paraphrase 1>", "<paraphrase 2>", "<paraphrase 3>"}
    if any(p.lower().startswith("<paraphrase") or p.lower().startswith("<insert paraphrase") or p in placeholders for p in out):
        raise ValueError("paraphrases are the prompt's placeholders")
    return out


_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """The lower-cased words of a text (letters, digits, apostrophes), as the rewrite checks count them."""
    return _WORD.findall(text.lower())


def word_similarity(a: str, b: str) -> float:
    """Word-sequence similarity of two texts in [0, 1] (difflib's ratio over lower-cased words)."""
    return difflib.SequenceMatcher(None, words(a), words(b), autojunk=False).ratio()


def clean_rewrite(output: str) -> str:
    """One rewrite as the paraphraser wrote it, without surrounding whitespace or quotes and
    without a leading "Rewritten text:"-style label line."""
    text = output.strip()
    first, _, rest = text.partition("\n")
    if rest.strip() and first.rstrip().endswith(":") and len(first.split()) <= 8:
        text = rest
    return re.sub(r"\s+", " ", text).strip().strip('"\u201c\u201d').strip()


# a rewrite's length in words, as a share of the passage's: outside these it dropped or padded
REWRITE_LENGTH = (0.6, 1.6)


def content_recall(original: str, rewrite: str) -> float:
    """Share of the passage's distinct content words (4+ letters) that the rewrite keeps: a
    proxy for "the same meaning" that needs no model."""
    content = {w for w in words(original) if len(w) >= 4}
    return len(content & set(words(rewrite))) / max(1, len(content))


def rewrite_problem(original: str, rewrite: str, kept: Sequence[str], max_similarity: float,
                    min_recall: float = 0.0) -> str:
    """Why one rewrite cannot be an option ("" when it can): empty, a near copy of the
    passage or of a kept rewrite, too short or too long, or (``min_recall``) keeping too
    few of the passage's content words (a model that talks about the task, or writes
    something else, instead of rewriting)."""
    if not rewrite:
        return "empty rewrite"
    similarity = word_similarity(original, rewrite)
    if similarity >= max_similarity:
        return f"a near copy of the passage (similarity {similarity:.2f})"
    for other in kept:
        similarity = word_similarity(other, rewrite)
        if similarity >= max_similarity:
            return f"a near copy of another rewrite (similarity {similarity:.2f})"
    ratio = len(words(rewrite)) / max(1, len(words(original)))
    if not REWRITE_LENGTH[0] <= ratio <= REWRITE_LENGTH[1]:
        return f"{ratio:.2f}x the passage's length"
    recall = content_recall(original, rewrite)
    if recall < min_recall:
        return f"keeps {recall:.2f} of the passage's content words"
    return ""


_LEAD_LETTER = re.compile(r"^[\s\W_]*([A-D])(?![A-Za-z])")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)?\s*(?:option\s*)?[\s\W_]*([A-D])(?![A-Za-z])", re.IGNORECASE)
_OPTION = re.compile(r"(?:option|passage)\s*\(?([A-D])\)?(?![A-Za-z])", re.IGNORECASE)
_STANDALONE = re.compile(r"(?<![A-Za-z])([A-D])(?![A-Za-z'])")


def parse_letter(text: str) -> str | None:
    """The option letter of a multiple-choice answer, or None when there is none or it is
    ambiguous. Accepts "B", " B.", "(B)", "'B'", "Answer: B", "The answer is B",
    "Option B" and a text naming exactly one distinct standalone letter."""
    if not text:
        return None
    for pattern in (_LEAD_LETTER, _ANSWER_IS, _OPTION):
        match = pattern.search(text)
        if match:
            return match.group(1).upper()
    found = {m.group(1) for m in _STANDALONE.finditer(text)}
    if len(found) == 1:
        return found.pop()
    return None


def letter_probs(choice: ChoiceLogprobs) -> dict[str, float] | None:
    """P(A..D) renormalised over the four letters; letters the backend did not give
    (e.g. outside an API's top-k) get 0. None when no letter has a log-prob."""
    lps = {l: choice.logprobs[l] for l in LETTERS if l in choice.logprobs and choice.logprobs[l] is not None and math.isfinite(choice.logprobs[l])}
    if not lps:
        return None
    top = max(lps.values())
    exp = {l: math.exp(v - top) for l, v in lps.items()}
    total = sum(exp.values())
    return {l: exp.get(l, 0.0) / total for l in LETTERS}


def parse_calibration(value: Any) -> dict[str, float] | None:
    """Per-letter offsets from None, a mapping, four numbers, or "A:0.1,B:-0.1,..."/"0.1,-0.1,0,0"."""
    if value is None or value == "" or value == ():
        return None
    if isinstance(value, Mapping):
        items = {str(k).strip().upper(): v for k, v in value.items()}
    else:
        parts: Sequence[Any]
        if isinstance(value, str):
            parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
        else:
            parts = list(value)
        if parts and all(isinstance(p, str) and ":" in p for p in parts):
            items = {p.split(":", 1)[0].strip().upper(): p.split(":", 1)[1] for p in parts}
        else:
            if len(parts) != 4:
                raise ConfigError(f"decop.calibration needs 4 offsets (A, B, C, D), got {len(parts)}")
            items = dict(zip(LETTERS, parts))
    if set(items) != set(LETTERS):
        raise ConfigError(f"decop.calibration needs offsets for exactly A, B, C, D, got {sorted(items)}")
    try:
        offsets = {l: float(items[l]) for l in LETTERS}
    except (TypeError, ValueError):
        raise ConfigError(f"decop.calibration offsets must be numbers, got {value!r}") from None
    if not all(math.isfinite(v) for v in offsets.values()):
        raise ConfigError("decop.calibration offsets must be finite")
    return offsets


def calibration_offsets(letter_probs_rows: Iterable[Mapping[str, float]], doc_ids: Iterable[Any] | None = None) -> dict[str, float]:
    """Algorithm 1: Delta_l = 0.25 - mean over clean documents of the mean P(l) over
    their passages (each passage's P(l) already averaged over its 24 orderings, as in
    ``details["letter_probs"]``). Without ``doc_ids`` every passage is its own document."""
    rows = list(letter_probs_rows)
    if not rows:
        raise ConfigError("calibration needs at least one clean passage scored in logit mode")
    docs = list(doc_ids) if doc_ids is not None else list(range(len(rows)))
    if len(docs) != len(rows):
        raise ConfigError("calibration: doc_ids and rows differ in length")
    per_doc: dict[Any, list[Mapping[str, float]]] = {}
    for doc, row in zip(docs, rows):
        per_doc.setdefault(doc, []).append(row)
    doc_means = [{l: sum(r[l] for r in rs) / len(rs) for l in LETTERS} for rs in per_doc.values()]
    return {l: 0.25 - sum(d[l] for d in doc_means) / len(doc_means) for l in LETTERS}


def _meta_str(meta: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        for k in (key, key.capitalize(), key.upper()):
            value = meta.get(k)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def given_options(example: Example) -> tuple[str, tuple[str, str, str]] | None:
    """(original, three paraphrases) from BookTection columns, None when the row has none.
    A row that has some but not all of them is an error for that row."""
    meta = example.meta or {}
    keys = [f"Example_{l}" for l in LETTERS]
    present = [k for k in keys if k in meta and meta[k] is not None and str(meta[k]).strip() != ""]
    if not present and "Answer" not in meta:
        return None
    missing = [k for k in keys if k not in present]
    if missing:
        raise RowError(f"row has paraphrase columns but {', '.join(missing)} is missing or empty")
    answer = meta.get("Answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and int(answer) in range(4):
        letter = LETTERS[int(answer)]
    elif isinstance(answer, str) and answer.strip().upper() in LETTERS:
        letter = answer.strip().upper()
    else:
        raise RowError(f"row has Example_A..Example_D but its Answer {answer!r} is not one of A, B, C, D")
    original = str(meta[f"Example_{letter}"]).strip()
    paraphrases = tuple(str(meta[f"Example_{l}"]).strip() for l in LETTERS if l != letter)
    return original, paraphrases  # type: ignore[return-value]


@register
class DECOP(Method):
    name = "decop"
    access = BLACK_BOX
    summary = "DE-COP: accuracy at picking the verbatim passage among 3 paraphrases, over all 24 orderings"

    mode: str = param(
        "blackbox", OneOf("blackbox", "logit"),
        "blackbox (parse the generated letter) or logit (probabilities of A-D; needs log-probs)",
    )
    paraphraser: str = param(
        "target", ModelSpec(auto=True, keywords=("target",)),
        "model that writes paraphrases: 'target' or a model spec (unused when rows hold Example_A..D)",
    )
    calibration: Any = param(
        None, Constraint(),
        "logit mode: per-letter offsets 'A:x,B:y,C:z,D:w' added to P(letter) (Appendix E); see decop.calibration_offsets",
    )
    paraphrase_style: str = param(
        "three_in_one", OneOf("three_in_one", "one_per_request"),
        "three_in_one (the paper's prompt: three paraphrases in one answer) or one_per_request (one rewrite per "
        "request, three requests; for paraphrasers that copy the passage when asked for three)",
    )
    paraphrase_temperature: float | None = param(
        None, Optional(Real(0)),
        "sampling temperature of the paraphraser; none = 0.1 for three_in_one (the paper) and 0.7 for "
        "one_per_request (distinct rewrites from different seeds)",
    )
    paraphrase_attempts: int = param(
        3, COUNT,
        "how many times to ask for parseable paraphrases (new seed each time) before the row fails "
        "(one_per_request: rounds of re-asking the rejected rewrites)",
    )
    paraphrase_max_tokens: int = param(
        0, NON_NEGATIVE_INT,
        "generation budget of a paraphrase request; 0 = auto (three_in_one: about 4x the passage's estimated "
        "tokens + 64; one_per_request: 2x + 32)",
    )
    max_similarity: float = param(
        0.9, Real(0, 1),
        "one_per_request: a rewrite this similar (word sequence, 0-1) to the passage or to a kept rewrite is asked again",
    )
    min_content_recall: float = param(
        0.3, Real(0, 1),
        "one_per_request: a rewrite keeping less than this share of the passage's content words (4+ letters) is "
        "asked again, as is one outside 0.6-1.6x the passage's length in words",
    )
    score: str = param(
        "accuracy", OneOf("accuracy", "probability"),
        "accuracy (the paper: fraction of orderings answered correctly) or probability (logit mode: mean "
        "probability of the verbatim option over the orderings, from the uncalibrated probabilities: "
        "decop.calibration does not change it)",
    )
    short_tokens: int = param(
        128, COUNT,
        "passages of at most this many estimated tokens (words x 1.3) use prompt B.1, longer ones B.2",
    )
    answer_max_tokens: int = param(8, COUNT, "blackbox mode: tokens generated for the answer")
    orderings_asked: str = param(
        "all", OneOf("all", "rotations"),
        "which orderings of the four options are asked: all 24 (the paper) or the 4 rotations (each option "
        "in each position once: the letter bias still cancels, a sixth of the cost)",
    )
    seed: int = param(0, SEED, "seed of the first paraphrase request (attempt i uses seed + i)")

    # -- parameters ----------------------------------------------------------------
    def validate(self) -> None:
        super().validate()
        offsets = parse_calibration(self.calibration)
        if offsets is not None and self.mode != "logit":
            raise ConfigError("decop.calibration needs decop.mode=logit (it shifts letter probabilities)")
        if self.score == "probability" and self.mode != "logit":
            raise ConfigError("decop.score=probability needs decop.mode=logit (it reads letter probabilities)")

    def _paraphraser_model(self) -> str | None:
        return None if self.paraphraser.strip() == "target" else self.paraphraser.strip()

    def models(self) -> set[str]:
        model = self._paraphraser_model()
        return {model} if model else set()

    # -- prompts -------------------------------------------------------------------
    def _temperature(self) -> float:
        if self.paraphrase_temperature is not None:
            return float(self.paraphrase_temperature)
        return 0.1 if self.paraphrase_style == "three_in_one" else 0.7

    def paraphrase_request(self, text: str, attempt: int) -> GenerateRequest:
        """A request for paraphrases of ``text`` (three_in_one) or for one rewrite
        (one_per_request); ``attempt`` picks the seed."""
        if self.paraphrase_style == "three_in_one":
            budget = self.paraphrase_max_tokens or 4 * estimate_tokens(text) + 64
            prompt = paraphrase_prompt(text, self.short_tokens)
        else:
            budget = self.paraphrase_max_tokens or 2 * estimate_tokens(text) + 32
            prompt = PARAPHRASE_PROMPT_ONE.format(ref_text=text)
        return GenerateRequest(
            messages=(("user", prompt),),
            max_tokens=budget,
            temperature=self._temperature(),
            seed=self.seed + attempt,
            model=self._paraphraser_model(),
        )

    def _paraphrases_three_in_one(self, original: str):
        errors = []
        for attempt in range(self.paraphrase_attempts):
            (generation,) = yield [self.paraphrase_request(original, attempt)]
            try:
                return parse_paraphrases(generation.text, original), len(errors) + 1
            except ValueError as exc:
                errors.append(str(exc))
        raise RowError(
            f"paraphraser output could not be parsed in {self.paraphrase_attempts} attempts ({'; '.join(errors)})"
        )

    def _paraphrases_one_per_request(self, original: str):
        kept: list[str] = []
        errors: list[str] = []
        asked = 0  # requests so far: the next one's seed offset
        for _ in range(self.paraphrase_attempts):
            requests = [self.paraphrase_request(original, asked + i) for i in range(3 - len(kept))]
            asked += len(requests)
            for generation in (yield requests):
                rewrite = clean_rewrite(generation.text)
                problem = rewrite_problem(original, rewrite, kept, self.max_similarity, self.min_content_recall)
                if problem:
                    errors.append(problem)
                elif len(kept) < 3:
                    kept.append(rewrite)
            if len(kept) == 3:
                return tuple(kept), asked
        raise RowError(
            f"paraphraser wrote {len(kept)} usable rewrites of 3 in {asked} requests ({'; '.join(errors)})"
        )

    @staticmethod
    def question(example: Example) -> str:
        meta = example.meta or {}
        title = _meta_str(meta, TITLE_KEYS)
        author = _meta_str(meta, AUTHOR_KEYS)
        if title and author:
            return MCQ_QUESTION_TITLE_AUTHOR.format(title=title, author=author)
        if title:
            return MCQ_QUESTION_TITLE.format(title=title)
        return MCQ_QUESTION_PLAIN

    @staticmethod
    def mcq_messages(question: str, options: Sequence[str]) -> tuple[tuple[str, str], ...]:
        body = question + "\n\nOptions:\n\n" + "\n\n".join(f"{l}. {o}" for l, o in zip(LETTERS, options)) + "\n\nAnswer:"
        return (("system", MCQ_SYSTEM), ("user", body))

    def orderings(self, original: str, paraphrases: Sequence[str]) -> list[tuple[tuple[str, ...], str]]:
        """The (options, correct letter) pairs asked (all 24, or the 4 rotations); option 0
        of the pool is the original."""
        pool = (original, *paraphrases)
        out = []
        for perm in ORDERINGS if self.orderings_asked == "all" else ROTATIONS:
            options = tuple(pool[i] for i in perm)
            out.append((options, LETTERS[perm.index(0)]))
        return out

    # -- the run -------------------------------------------------------------------
    def run(self, example: Example) -> MethodRun:
        offsets = parse_calibration(self.calibration)
        given = given_options(example)
        details: dict[str, Any] = {"mode": self.mode}
        if given is not None:
            original, paraphrases = given
            details["paraphrases_from"] = "data"
        else:
            original = example.text.strip()
            if not original:
                raise RowError("empty passage")
            writer = (self._paraphrases_three_in_one if self.paraphrase_style == "three_in_one"
                      else self._paraphrases_one_per_request)
            paraphrases, n_requests = yield from writer(original)
            details["paraphrases_from"] = self.paraphraser
            details["paraphrase_attempts"] = n_requests
        details["paraphrases"] = list(paraphrases)
        question = self.question(example)
        orderings = self.orderings(original, paraphrases)
        if self.mode == "blackbox":
            requests = [
                GenerateRequest(messages=self.mcq_messages(question, options), max_tokens=self.answer_max_tokens, temperature=0.0)
                for options, _ in orderings
            ]
        else:
            requests = [
                ChoiceLogprobsRequest(messages=self.mcq_messages(question, options), choices=LETTERS)
                for options, _ in orderings
            ]
        responses = yield requests
        return self.score_orderings([c for _, c in orderings], responses, offsets, details)

    def score_orderings(
        self,
        correct: Sequence[str],
        responses: Sequence[Any],
        offsets: dict[str, float] | None,
        details: dict[str, Any],
    ) -> Score:
        predicted: list[str | None] = []
        if self.mode == "blackbox":
            for response in responses:
                assert isinstance(response, Generation)
                predicted.append(parse_letter(response.text))
            details["raw_answers"] = [r.text for r in responses]
        else:
            sums = {l: 0.0 for l in LETTERS}
            n_probs = 0
            p_correct = []
            for response, right in zip(responses, correct):
                probs = letter_probs(response)
                if probs is None:
                    predicted.append(None)
                    continue
                n_probs += 1
                p_correct.append(probs[right])
                for l in LETTERS:
                    sums[l] += probs[l]
                adjusted = {l: probs[l] + (offsets[l] if offsets else 0.0) for l in LETTERS}
                # ties broken by letter order, like torch.argmax in the authors' script
                predicted.append(max(LETTERS, key=lambda l: (adjusted[l], -LETTERS.index(l))))
            if n_probs:
                details["letter_probs"] = {l: sums[l] / n_probs for l in LETTERS}
            if offsets:
                details["calibration"] = offsets
            if p_correct:
                details["p_correct"] = sum(p_correct) / len(p_correct)
        unanswered = sum(p is None for p in predicted)
        if unanswered == len(predicted):
            what = "no parseable letter in any answer" if self.mode == "blackbox" else "no log-prob for any of A-D in any answer"
            raise RowError(f"decop: {what} ({len(predicted)} orderings)")
        n_correct = sum(p == c for p, c in zip(predicted, correct))
        details.update(
            answers=[p or "?" for p in predicted],
            correct=list(correct),
            n_correct=n_correct,
            n_orderings=len(predicted),
            n_unanswered=unanswered,
        )
        if self.score == "probability":
            # orderings without letter log-probs are left out of the mean (n_unanswered says how many)
            return Score(value=details["p_correct"], details=details)
        return Score(value=n_correct / len(predicted), details=details)
