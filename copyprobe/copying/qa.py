"""Fact recall (§3.3): closed-book QA with the Fig. 7 prompt, scored as SQuAD does.

The answer is read between ``[Output_Start]`` and ``[Output_End]``; when the end marker is
missing (e.g. generation stopped at it) the text after the start marker up to the line end
is used, and when both are missing the first line — such rows carry ``format_ok: false``.
Normalisation and token F1 are those of the official SQuAD v1.1 evaluation script:
lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace; F1 over the
multiset of tokens; the best score over all reference answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from copyprobe.copying import prompts
from copyprobe.copying.common import GenConfig, text_of
from copyprobe.copying.data import QAItem
from copyprobe.errors import RowError

START, END = "[Output_Start]", "[Output_End]"


def normalize_answer(s: str) -> str:
    """SQuAD v1.1: lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def f1_score(prediction: str, ground_truth: str) -> float:
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(ground_truth).split()
    common = Counter(pred) & Counter(gold)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred)
    recall = num_same / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def best_over(metric, prediction: str, answers: Sequence[str]) -> float:
    return max(metric(prediction, a) for a in answers)


def parse_answer(text: str) -> tuple[str, bool]:
    """(answer, format_ok)."""
    start = text.find(START)
    if start != -1:
        rest = text[start + len(START):]
        end = rest.find(END)
        if end != -1:
            return rest[:end].strip(), True
        line = rest.strip().splitlines()[0] if rest.strip() else ""
        return line.strip(), False
    stripped = text.strip()
    return (stripped.splitlines()[0].strip() if stripped else ""), False


def qa_prompt(item: QAItem, demos: Sequence[tuple[str, str]] = ()) -> str:
    return prompts.QA_TEMPLATE.render(item.input, demos)


def run_qa(item: QAItem, gen: GenConfig, *, demos: Sequence[tuple[str, str]] = (), max_tokens: int = 32):
    (answer,) = yield [gen.request(qa_prompt(item, demos), max_tokens=max_tokens)]
    raw = text_of(answer)
    if not raw.strip():
        raise RowError("empty generation")
    pred, ok = parse_answer(raw)
    if not pred:
        raise RowError("empty answer between [Output_Start] and [Output_End]")
    return {"output": raw, "answer": pred, "format_ok": ok,
            "exact_match": best_over(exact_match, pred, item.reference),
            "f1": best_over(f1_score, pred, item.reference)}
