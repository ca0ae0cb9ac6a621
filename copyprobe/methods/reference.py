"""Reference-model calibration (Carlini et al. 2021): a text the target finds much
likelier than a reference model does was probably in the target's training data."""

from __future__ import annotations

from typing import Sequence

from copyprobe.backends.base import TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError
from copyprobe.methods.base import Method, Score
from copyprobe.methods.likelihood import mean_loglik
from copyprobe.params import ModelSpec, param
from copyprobe.registry import register


@register
class Reference(Method):
    name = "reference"
    calibration_models = ("model",)
    summary = "Target log-likelihood minus a reference model's (Carlini et al. 2021)"

    model: str = param(
        "auto", ModelSpec(auto=True),
        "reference model spec; 'auto' = smollm2 for a gemma target, gemma-3-270m for any other",
    )

    def models(self) -> set[str]:
        return {self.model}

    def requests(self, example: Example) -> list[TokenLogprobsRequest]:
        if self.model == "auto":
            raise ConfigError("reference.model 'auto' must be resolved against the target model first")
        return [
            TokenLogprobsRequest(example.text, stats=False),
            TokenLogprobsRequest(example.text, stats=False, model=self.model),
        ]

    def score(self, example: Example, responses: Sequence[TokenLogprobs]) -> Score:
        # both halves kept: the audit asks the reference model whether it knows the text itself
        # (copyprobe.evaluation.witness)
        target, reference = mean_loglik(responses[0]), mean_loglik(responses[1])
        return Score(target - reference, {"target": target, "reference": reference})
