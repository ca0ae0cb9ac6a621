"""Multiple-choice answers for the HF backend: the log-prob of each choice as the next
token after a prompt (DE-COP's 24 orderings of a passage per question)."""

from __future__ import annotations

from copyprobe.backends.base import ChoiceLogprobs, ChoiceLogprobsRequest
from copyprobe.errors import BackendError


class ChoiceLogprobsMixin:
    """``ChoiceLogprobsRequest`` answers for :class:`~copyprobe.backends.hf.HFBackend`, from
    its tokenizer, prompts (``_prompt_ids``), forward passes (``_padded_hidden``,
    ``_logits``) and, on CPU, the model itself through the shared-prefix walk."""

    def _answer_choice_logprobs(self, requests: list[ChoiceLogprobsRequest], progress=None):
        """Log-prob of each choice's first token at the position after the prompt.

        A choice is tried both as tokenized alone ("A") and with a leading space (" A"),
        and the larger log-prob is kept: whether "Answer:" is followed by the token "A" or
        " A" depends on the tokenizer and on how the prompt ends, and the model's
        preferred form is the one it would actually produce.
        """
        prompts = [self._prompt_ids(r.prompt, r.messages, use_chat=False) for r in requests]
        for ids in prompts:
            if not ids:
                raise BackendError("empty prompt: nothing to condition the choices on")
            if len(ids) > self._context_limit():
                raise BackendError(f"prompt of {len(ids)} tokens exceeds the model's context")
        forms = [{choice: self._choice_token_ids(choice) for choice in r.choices} for r in requests]
        columns = sorted({t for f in forms for ids in f.values() for t in ids})
        with self._guard():
            if self.device == "cpu":
                # DE-COP's 24 orderings of a passage share most of their prompt: on CPU,
                # computing each shared prefix once beats batching (issue 9's benchmark).
                from copyprobe.backends.prefix_tree import shared_prefix_logprobs

                rows = shared_prefix_logprobs(self.model, prompts, columns, progress=progress)
            else:
                rows = self._batched_next_logprobs(prompts, columns, progress)
        answers = []
        for row, choice_forms in zip(rows, forms):
            value = dict(zip(columns, row))
            answers.append(ChoiceLogprobs(logprobs={
                choice: max(value[t] for t in ids) for choice, ids in choice_forms.items()}))
        return answers

    def _batched_next_logprobs(self, prompts: list[list[int]], columns: list[int], progress):
        """Log-probs of ``columns`` as the next token after each prompt, batched by length."""
        import torch

        rows: list[list[float] | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]), reverse=True)
        index = torch.tensor(columns)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            hidden = self._padded_hidden([prompts[i] for i in chunk])
            last = torch.stack([hidden[row, len(prompts[i]) - 1] for row, i in enumerate(chunk)])
            logp = torch.log_softmax(self._logits(last).double(), dim=-1).cpu()[:, index]  # as the prefix tree's
            for row, i in enumerate(chunk):
                rows[i] = logp[row].tolist()
            if progress:
                progress(len(chunk))
        return rows

    def _choice_token_ids(self, choice: str) -> set[int]:
        ids = set()
        for form in (choice, " " + choice):
            tokens = self.tokenizer(form, add_special_tokens=False).input_ids
            if tokens:
                ids.add(tokens[0])
        if not ids:
            raise BackendError(f"choice {choice!r} tokenizes to nothing")
        return ids
