"""A complete copyprobe method: the mean token log-likelihood after dropping the least
likely tokens (a rare name or number then cannot sink a passage the model knows).

Use it from Python after importing this file, or from the command line once the package
holding it declares an entry point in its pyproject.toml:

    [project.entry-points."copyprobe.methods"]
    trimmed_loglik = "my_package.trimmed_loglik:TrimmedLoglik"
"""

from typing import Sequence

import numpy as np

from copyprobe import Method, TokenLogprobs, TokenLogprobsRequest, param, register
from copyprobe.errors import RowError
from copyprobe.params import Real


@register
class TrimmedLoglik(Method):
    name = "trimmed_loglik"
    summary = "Mean token log-likelihood without the least likely share `trim` of tokens"

    trim: float = param(0.1, Real(0, 1, high_open=True), "share of the least likely tokens to drop")

    def requests(self, example):
        # the same request as loss, zlib, min_k ...: all of them share one forward pass
        return [TokenLogprobsRequest(example.text)]

    def score(self, example, responses: Sequence[TokenLogprobs]) -> float:
        values = np.sort(np.asarray(responses[0].logprobs, dtype=float))
        kept = values[int(len(values) * self.trim):]
        if kept.size == 0:
            raise RowError("text has fewer than two tokens: nothing to score")
        return float(kept.mean())  # higher = more likely a member
