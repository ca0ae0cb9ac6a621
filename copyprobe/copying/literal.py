"""Literal copying (§3.3): complete a ~200-word prefix; compare with the next 50 words.

ROUGE-L is rouge-score's own (``RougeScorer(["rougeL"], use_stemmer=True)``) on the output
and the reference, each first truncated to ``words`` whitespace-separated words; ``lcs`` is
the length, in rouge-score tokens, of their longest common subsequence. An item counts as
copied when ROUGE-L >= ``threshold`` (0.8, the paper's value). The ``>=`` is the released
code's rule (scripts/summary.py: ``score_rouge_l >= 0.8``); the paper (§3.3) says "greater
than", which would not count an item at exactly 0.8. The tokenizer is rouge-score's on
text in Latin script and also counts the words of other scripts
(:class:`copyprobe.text.RougeTokenizer`): rouge-score's own gave a Russian or Chinese book
copied word for word ROUGE-L 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from copyprobe.copying import prompts
from copyprobe.copying.common import GenConfig, clean_completion, text_of
from copyprobe.copying.data import LiteralItem
from copyprobe.errors import ConfigError, RowError
from copyprobe.text import lcs_length, rouge_l_scorer

DEFAULT_THRESHOLD = 0.8
DEFAULT_WORDS = 50


@lru_cache(maxsize=1)
def _scorer():
    try:
        import rouge_score  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("literal copying needs the rouge-score package: pip install rouge-score") from None
    return rouge_l_scorer(use_stemmer=True)


def truncate_words(text: str, words: int) -> str:
    return " ".join(text.split()[:words])


def literal_scores(output: str, reference: str, words: int = DEFAULT_WORDS) -> dict[str, Any]:
    """ROUGE-L F-measure and LCS length of ``output`` against ``reference``."""
    scorer = _scorer()
    out = truncate_words(output, words)
    ref = truncate_words(reference, words)
    rouge = scorer.score(ref, out)["rougeL"]
    tok = scorer._tokenizer  # the same tokenizer (stemming) rouge-score used above
    lcs = lcs_length(tok.tokenize(ref), tok.tokenize(out))
    return {"rouge_l": rouge.fmeasure, "rouge_l_precision": rouge.precision,
            "rouge_l_recall": rouge.recall, "lcs": lcs}


def copy_rate(values: Sequence[float], threshold: float = DEFAULT_THRESHOLD) -> float:
    """Share of items with ROUGE-L >= threshold (the released code's rule; the paper says
    "greater than")."""
    if not values:
        raise ValueError("no scored items")
    return sum(v >= threshold for v in values) / len(values)


def literal_prompt(item: LiteralItem, template: int = 0, demos: Sequence[tuple[str, str]] = ()) -> str:
    return prompts.LITERAL_TEMPLATES[template].render(item.input, demos)


def run_literal(
    item: LiteralItem,
    gen: GenConfig,
    *,
    template: int = 0,
    demos: Sequence[tuple[str, str]] = (),
    words: int = DEFAULT_WORDS,
    threshold: float = DEFAULT_THRESHOLD,
):
    """Runner generator: one greedy generation, then its scores."""
    prompt = literal_prompt(item, template, demos)
    (answer,) = yield [gen.request(prompt)]
    output = clean_completion(text_of(answer))
    if not output:
        raise RowError("empty generation")
    scores = literal_scores(output, item.reference, words)
    return {"output": output, **scores,
            "copied": scores["rouge_l"] >= threshold}
