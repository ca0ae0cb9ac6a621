"""Generation for the HF backend: greedy and seeded sampling in left-padded batches, a
shortcut for greedy one-token requests, stop strings and top log-probs."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from copyprobe.backends.base import GenerateRequest, Generation
from copyprobe.errors import BackendError, ConfigError

# Full-vocabulary logit rows held at once when many next-token distributions are read
# from one pass (2**25 float32 = 128 MiB).
LOGIT_ROWS = 2**25


class GenerationMixin:
    """``GenerateRequest`` answers for :class:`~copyprobe.backends.hf.HFBackend`, from its
    model's ``generate()``, tokenizer, prompts (``_prompt_ids``), ``chat`` setting,
    ``logits_processors``, forward passes (``_padded_hidden``, ``_logits``) and
    ``_context_limit``."""

    def _answer_generate(self, requests: list[GenerateRequest], progress=None):
        """Requests run in left-padded batches of the same settings. A sampled row draws
        from its own random generator seeded with its request's seed (see SeededSampler),
        so its sample does not depend on what else is in the batch."""
        answers: list[Generation | None] = [None] * len(requests)
        prompts = [self._prompt_ids(r.prompt, r.messages, self.chat) for r in requests]
        for index, request in enumerate(requests):
            if request.max_tokens < 1:
                raise ConfigError(f"max_tokens must be >= 1, got {request.max_tokens}")
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            key = (request.max_tokens, request.stop, request.repetition_penalty, request.top_logprobs,
                   request.temperature, (request.top_p, request.top_k) if request.temperature > 0 else None)
            groups.setdefault(key, []).append(index)
        with self._guard():
            for key, indices in groups.items():
                if key[0] == 1 and key[4] == 0 and not self.logits_processors:
                    # greedy one-token requests need no decoding loop (neighbourhood
                    # proposals: thousands of them, prefixes of a few texts)
                    request = requests[indices[0]]
                    for i, output in zip(indices, self._next_token_generations([prompts[i] for i in indices], request)):
                        answers[i] = output
                    if progress:
                        progress(len(indices))
                    continue
                indices = sorted(indices, key=lambda i: len(prompts[i]))
                for start in range(0, len(indices), self.batch_size):
                    chunk = indices[start:start + self.batch_size]
                    outputs = self._generate([prompts[i] for i in chunk], requests[chunk[0]],
                                             seeds=[requests[i].seed for i in chunk])
                    for i, output in zip(chunk, outputs):
                        answers[i] = output
                    if progress:
                        progress(len(chunk))
        return answers

    def _generate(self, prompts: list[list[int]], request: GenerateRequest,
                  seeds: Sequence[int | None] | None = None) -> list[Generation]:
        import torch
        from transformers import (
            GenerationConfig,
            LogitsProcessorList,
            StoppingCriteriaList,
        )

        if not all(prompts):
            raise BackendError("empty generation prompt: give a prompt or messages")
        width = max(len(p) for p in prompts)
        if width + request.max_tokens > self._context_limit():
            raise BackendError(f"prompt of {width} tokens + max_tokens {request.max_tokens} exceeds "
                               f"the model's context of {self._context_limit()} tokens")
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # left padding: every row ends at the last column
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        eos_ids = self._eos_ids()
        processors = LogitsProcessorList(self.logits_processors)
        if request.temperature > 0:
            # generate() runs greedy over the one-hot scores of our own per-row sampler,
            # which comes after every other processor (repetition penalty included)
            seeds = list(seeds or [None] * len(prompts))
            processors.append(SeededSampler(
                [s if s is not None else int.from_bytes(os.urandom(4), "little") for s in seeds],
                request.temperature, request.top_p, self.device, top_k=request.top_k))
        config = GenerationConfig(
            max_new_tokens=request.max_tokens,
            do_sample=False,
            repetition_penalty=request.repetition_penalty,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(eos_ids) or None,
            return_dict_in_generate=True,
            output_logits=request.top_logprobs > 0,
        )
        stopping = StoppingCriteriaList()
        if request.stop:
            stopping.append(stop_strings_criterion(self.tokenizer, request.stop, width))
        output = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                     generation_config=config, logits_processor=processors,
                                     stopping_criteria=stopping)
        new_tokens = output.sequences[:, width:].tolist()
        step_logprobs = None
        if request.top_logprobs > 0:
            stacked = torch.stack(output.logits, dim=1).float()  # [B, steps, V], raw model logits
            step_logprobs = torch.log_softmax(stacked, dim=-1).topk(min(request.top_logprobs, stacked.shape[-1]),
                                                                    dim=-1)
        results = []
        for row, tokens in enumerate(new_tokens):
            results.append(self._finish(tokens, len(prompts[row]), request, eos_ids, step_logprobs, row))
        return results

    def _next_token_generations(self, prompts: list[list[int]], request: GenerateRequest) -> list[Generation]:
        """Greedy one-token generations without generate(): a prompt whose tokens begin a
        longer prompt of the set is read off that prompt's forward pass (the causal state at
        its last token is the same), so all the word-boundary prompts of one text cost one
        pass of the text. Same token, top log-probs and finish reason as generate()."""
        import torch
        from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

        if not all(prompts):
            raise BackendError("empty generation prompt: give a prompt or messages")
        longest = max(len(p) for p in prompts)
        if longest + 1 > self._context_limit():
            raise BackendError(f"prompt of {longest} tokens + max_tokens 1 exceeds "
                               f"the model's context of {self._context_limit()} tokens")
        chains: list[tuple[list[int], list[int]]] = []  # (longest prompt, prompts it holds)
        for i in sorted(range(len(prompts)), key=lambda i: len(prompts[i]), reverse=True):
            ids = prompts[i]
            for head, members in reversed(chains):  # the text just opened is the likeliest
                if head[:len(ids)] == ids:
                    members.append(i)
                    break
            else:
                chains.append((ids, [i]))
        processors = LogitsProcessorList()
        if request.repetition_penalty != 1.0:
            processors.append(RepetitionPenaltyLogitsProcessor(request.repetition_penalty))
        eos_ids = self._eos_ids()
        answers: list[Generation | None] = [None] * len(prompts)
        rows_per_head = max(1, LOGIT_ROWS // self.vocab_size)
        for start in range(0, len(chains), self.batch_size):
            batch = chains[start:start + self.batch_size]
            hidden = self._padded_hidden([head for head, _ in batch])
            wanted = [(row, i) for row, (_, members) in enumerate(batch) for i in members]
            for begin in range(0, len(wanted), rows_per_head):
                part = wanted[begin:begin + rows_per_head]
                logits = self._logits(torch.stack([hidden[row, len(prompts[i]) - 1] for row, i in part]))
                top = torch.log_softmax(logits, dim=-1).topk(min(request.top_logprobs, logits.shape[-1]), dim=-1) \
                    if request.top_logprobs > 0 else None
                for k, (_, i) in enumerate(part):
                    scores = processors(torch.tensor([prompts[i]], device=self.device), logits[k:k + 1].clone())
                    step = None if top is None else (top.values[k:k + 1].unsqueeze(1), top.indices[k:k + 1].unsqueeze(1))
                    answers[i] = self._finish([int(scores.argmax())], len(prompts[i]), request, eos_ids, step, 0)
        return answers  # type: ignore[return-value]

    def _finish(self, tokens: list[int], prompt_len: int, request: GenerateRequest, eos_ids: set[int],
                step_logprobs, row: int) -> Generation:
        count = len(tokens)
        reason = "length"
        for k, token in enumerate(tokens):
            if token in eos_ids:
                count, reason = k + 1, "stop"
                break
        tokens = tokens[:count]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        cut = first_stop(text, request.stop)
        if cut is not None:
            text, reason = text[:cut], "stop"
            # the tokens it took to produce the stop string
            for k in range(1, len(tokens) + 1):
                if first_stop(self.tokenizer.decode(tokens[:k], skip_special_tokens=True), request.stop) is not None:
                    count = k
                    break
        top = None
        if step_logprobs is not None:
            values, ids = step_logprobs
            top = []
            for step in range(count):
                alternatives: dict[str, float] = {}
                for value, token_id in zip(values[row, step].tolist(), ids[row, step].tolist()):
                    piece = self._token_piece(token_id)
                    alternatives[piece] = max(value, alternatives.get(piece, -math.inf))
                top.append(alternatives)
        return Generation(text=text, finish_reason=reason, prompt_tokens=prompt_len,
                          completion_tokens=count, top_logprobs=top)

    def _token_piece(self, token_id: int) -> str:
        """A token's text as it reads after other text: " the", with its space. Decoding
        the token alone loses the space where the tokenizer's decoder strips the text's
        first space (Llama and Mistral SentencePiece tokenizers: "▁the" -> "the"), so it
        is decoded after an anchor token ("a") and the anchor's text cut off; no clean-up
        of spaces before punctuation (" ," stays " ,")."""
        anchor = getattr(self, "_piece_anchor", None)
        if anchor is None:
            ids = self.tokenizer.encode("a", add_special_tokens=False)
            anchor = self._piece_anchor = (ids, self.tokenizer.decode(ids, clean_up_tokenization_spaces=False))
        ids, text = anchor
        joined = self.tokenizer.decode([*ids, token_id], clean_up_tokenization_spaces=False)
        if ids and joined.startswith(text):
            return joined[len(text):]
        return self.tokenizer.decode([token_id], clean_up_tokenization_spaces=False)

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, list) else [eos] if eos is not None else [])


class SeededSampler:
    """Logits processor that samples every row from its own ``torch.Generator``:
    temperature, then top-k and nucleus (top_p) filtering, then one uniform draw per row and step
    through the row's cumulative distribution. It returns scores that are 0 at the chosen
    token and -inf elsewhere, so generate() in greedy mode emits exactly that token. A row's
    tokens depend only on its seed and its own logits, which lets sampled requests share a
    batch (one draw per row per step, whatever the other rows do)."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float, device: str, top_k: int = 0):
        import torch

        self.generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)

    def __call__(self, input_ids, scores):
        import torch

        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        ordered, order = probs.sort(dim=-1, descending=True)
        if 0 < self.top_k < ordered.shape[-1]:
            ordered[:, self.top_k:] = 0.0
            ordered = ordered / ordered.sum(dim=-1, keepdim=True)
        if self.top_p < 1.0:
            # keep the smallest set of likeliest tokens whose mass reaches top_p
            before = ordered.cumsum(dim=-1) - ordered
            ordered = ordered.masked_fill(before >= self.top_p, 0.0)
        cumulative = ordered.cumsum(dim=-1)
        draws = torch.stack([torch.rand((), generator=g, device=g.device) for g in self.generators])
        draws = draws.to(cumulative.device).unsqueeze(1) * cumulative[:, -1:]
        picked = torch.searchsorted(cumulative, draws).clamp_max(cumulative.shape[1] - 1)
        chosen = order.gather(1, picked)
        out = torch.full_like(scores, -math.inf)
        out.scatter_(1, chosen, 0.0)
        return out


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None


def stop_strings_criterion(tokenizer, stops: Sequence[str], prompt_width: int):
    """A row is done once its generated text contains a stop string. (transformers'
    StopStringCriteria pre-computes tables over the whole vocabulary, slow for 262k.)"""
    import torch
    from transformers import StoppingCriteria

    stops = [s for s in stops if s]

    class StopStrings(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = [
                first_stop(tokenizer.decode(row[prompt_width:], skip_special_tokens=True), stops) is not None
                for row in input_ids.tolist()
            ]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StopStrings()
