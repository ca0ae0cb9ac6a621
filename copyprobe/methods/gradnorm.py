"""Gradient norm (MIMIR, Duan et al. 2024, "Do Membership Inference Attacks Work on Large
Language Models?", the ``gradnorm`` attack; also Wang et al. 2024's white-box baseline).

A model sits near a minimum of its training loss at its training texts, so the loss's
gradient with respect to the weights is smaller there::

    gradnorm(x) = - mean over weight tensors W of || d loss(x) / d W ||_2      (norm = "mean_tensor")
    gradnorm(x) = - || d loss(x) / d theta ||_2  over all weights together     (norm = "global")

with loss(x) the mean token negative log-likelihood. The minus sign makes higher =
member. The default, ``mean_tensor``, is the statistic MIMIR computes (the mean of the
per-tensor gradient norms). White-box: only a local model (the HF backend) can answer
the :class:`~copyprobe.backends.base.GradNormRequest`; API and llama.cpp backends refuse
it before any work starts. One backward pass per text: several times a forward pass.
"""

from __future__ import annotations

import math
from typing import Sequence

from copyprobe.backends.base import GradNorm, GradNormRequest
from copyprobe.data.example import Example
from copyprobe.errors import RowError
from copyprobe.methods.base import WHITE_BOX, Method, Score
from copyprobe.params import OneOf, param
from copyprobe.registry import register


@register
class GradNormMethod(Method):
    name = "gradnorm"
    access = WHITE_BOX
    summary = "Minus the norm of the loss gradient w.r.t. the weights (MIMIR's gradnorm; local models only)"

    norm: str = param("mean_tensor", OneOf("mean_tensor", "global"),
                      "mean_tensor: mean of per-tensor gradient norms (MIMIR); global: one norm over all weights")

    def requests(self, example: Example) -> list[GradNormRequest]:
        return [GradNormRequest(example.text)]

    def score(self, example: Example, responses: Sequence[GradNorm]) -> Score:
        answer = responses[0]
        value = answer.mean_tensor_norm if self.norm == "mean_tensor" else answer.global_norm
        if not math.isfinite(value):
            raise RowError("text has fewer than two tokens: no loss, no gradient")
        return Score(-float(value), {"loss": answer.loss})
