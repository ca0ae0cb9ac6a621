"""Drive many methods over many examples with as few model calls as possible.

Every (example, method) pair is a generator (``Method.run``) that yields lists of
requests, or a :class:`OneStep` for a method that asks once and scores. The driver
advances all of them together: it gathers the requests of one round, removes duplicates
(ten logit methods asking for the same text's log-probs make one request), answers them
per model and kind in batches through the (cached) backends, and sends each generator
its responses. Multi-stage methods simply take more rounds.

A generator is sent its responses as soon as the last of them is answered, not when the
whole round is: backends that hand answers over as they finish (``on_result``: the HF
backend does so while its next batch runs on the device, the response cache for every
hit) then have the methods' scoring done while the device works, instead of after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, NamedTuple

from copyprobe.backends.base import Backend, Request, RequestFailed, hands_over
from copyprobe.errors import CopyprobeError, RowError


@dataclass
class Failure:
    """Why one generator produced no result (kept per row, never a silent score)."""

    reason: str


class OneStep(NamedTuple):
    """The run of a method that asks once and scores (``method.requests(example)``, then
    ``method.score(example, responses)``), driven without a generator: making, starting,
    resuming and stopping one cost more than both calls for the logit methods (8,250
    runs for 5 methods on 1,650 passages). Any run the driver takes may be one."""

    method: Any
    example: Any

    def close(self) -> None:  # a generator's, for the driver: nothing to end
        pass


@dataclass
class DriveStats:
    rounds: int = 0
    requests_total: int = 0  # requests yielded by all generators
    requests_unique: int = 0  # after de-duplication, i.e. what reached the (cached) backends
    by_model_kind: dict[str, int] = field(default_factory=dict)
    tokens_by_model: dict[str, int] = field(default_factory=dict)  # tokens in log-prob answers
    failed_requests: list[dict[str, str]] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        """The run record's ``requests`` section."""
        return {
            "rounds": self.rounds,
            "total": self.requests_total,
            "unique": self.requests_unique,
            "by_model_kind": self.by_model_kind,
            "tokens_by_model": self.tokens_by_model,
            "failed": self.failed_requests,
        }


ProgressFactory = Callable[[str, int], Callable[[int], None]]
_UNANSWERED = object()  # a slot of the round's answers not yet filled
# what a method raises for its row alone (the row fails; a CopyprobeError stops the run)
_ROW_ERRORS = (RowError, ValueError, ArithmeticError, IndexError, KeyError)


def _failed(response: RequestFailed) -> Failure:
    """The result of a run one of whose requests failed."""
    return Failure(reason=f"request failed: {response.reason}")


def _no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


# Young-generation size while driving: the answers are many small lists (a few per text),
# and at Python's default of 700 allocations the collector ran 161 times in one detect over
# WikiMIA's 1,650 passages, a third of the CPU time spent outside the model (0.32 of
# 1.1 s, measured with every answer in the cache); the process's modules (torch,
# transformers: 400,000 objects) make each full collection costly.
YOUNG_COLLECTION_THRESHOLD = 100_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage less often while requests are driven (reference counting
    still frees everything else at once); the thresholds are restored afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], YOUNG_COLLECTION_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def drive(
    runs: dict[Hashable, Any],
    backend_for: Callable[[str | None], Backend],
    progress: ProgressFactory = _no_progress,
    stats: DriveStats | None = None,
) -> dict[Hashable, Any]:
    """Run generators to completion. Returns key -> result, or key -> Failure.

    ``backend_for(None)`` is the target model; ``backend_for(spec)`` any other model a
    request names. A ``RowError`` (or ValueError/ArithmeticError) raised by a generator
    fails that row only. A ``CopyprobeError`` (e.g. a backend that lacks a capability)
    stops the run: it concerns every row.
    """
    with fewer_collections():
        return _drive(runs, backend_for, progress, stats if stats is not None else DriveStats())


def _drive(runs: dict[Hashable, Any], backend_for: Callable[[str | None], Backend], progress: ProgressFactory,
           stats: DriveStats) -> dict[Hashable, Any]:
    results: dict[Hashable, Any] = {}
    pending: dict[Hashable, tuple[Any, list[Request]]] = {}

    def finish(key: Hashable, step: OneStep, responses: list[Any]) -> None:
        try:
            results[key] = step.method.score(step.example, responses)
        except CopyprobeError:
            raise
        except _ROW_ERRORS as exc:
            results[key] = Failure(reason=str(exc) or type(exc).__name__)

    def advance(key: Hashable, gen: Any, sent: list[Any] | None) -> None:
        one_step = type(gen) is OneStep
        if one_step and sent is not None:
            finish(key, gen, sent)
            return
        try:
            if one_step:
                requests = gen.method.requests(gen.example)
            else:
                requests = gen.send(sent) if sent is not None else next(gen)
        except StopIteration as stop:
            results[key] = stop.value
            return
        except CopyprobeError:
            raise
        except _ROW_ERRORS as exc:
            results[key] = Failure(reason=str(exc) or type(exc).__name__)
            return
        requests = list(requests)
        if not requests:
            # nothing to ask: resume immediately with no responses
            advance(key, gen, [])
            return
        pending[key] = (gen, requests)

    for key, gen in runs.items():
        advance(key, gen, None)

    # placing a request loads the model it names: before another model than the target first
    # loads, the target is checked, so an unreachable or unable target is said first (a
    # reference model, gemma-3-270m, took 86 s before an openai: target's 'cannot reach')
    target_checked = False
    while pending:
        stats.rounds += 1
        # Each unique request of the round gets a slot number (its identity is hashed once
        # here; the bookkeeping below indexes lists by slot), grouped by (model, kind) in
        # first-seen order.
        slot_of: dict[Hashable, int] = {}
        unique: list[Request] = []
        groups: dict[tuple[str | None, str], list[int]] = {}
        # per slot, the runs waiting on it: a OneStep that asked for that one request (as
        # each logit method does) is scored from its answer directly ("alone"), without the
        # counting and resuming of the others (8,250 runs for WikiMIA's 1,650 passages)
        alone: list[list[tuple[Hashable, OneStep]]] = []
        waiting: list[list[Hashable]] = []
        slots: dict[Hashable, list[int]] = {}  # per run not alone, the slots of its requests
        current: dict[Hashable, tuple[Any, list[Request]]] = {}  # the runs not alone
        # each distinct request as the methods yield it -> its slot: five logit methods ask
        # for a text in two forms (with and without stats), so a passage's requests are
        # made canonical twice, not five times (6,600 copies for WikiMIA's 1,650 passages)
        placed: dict[Request, int] = {}

        def place(request: Request) -> int:
            nonlocal target_checked
            if request.model is not None and not target_checked:
                target_checked = True
                ours = [r for _gen, requests in pending.values() for r in requests if r.model is None]
                if ours:
                    backend_for(None).check(ours)
            canonical = backend_for(request.model).canonical(request)
            try:
                identity: Hashable = canonical  # (see _payload_identity)
                slot = slot_of.get(identity)
            except TypeError:  # a field holding a list
                identity = _payload_identity(canonical)
                slot = slot_of.get(identity)
            if slot is None:
                slot = slot_of[identity] = len(unique)
                unique.append(canonical)
                alone.append([])
                waiting.append([])
                groups.setdefault((canonical.model, canonical.kind), []).append(slot)
            return slot

        for key, run in pending.items():
            gen, requests = run
            own = []
            for request in requests:
                try:
                    slot = placed.get(request)
                except TypeError:  # a field holding a list: placed by its payload's hash alone
                    own.append(place(request))
                    continue
                if slot is None:
                    slot = placed[request] = place(request)
                own.append(slot)
            stats.requests_total += len(own)
            if len(own) == 1 and type(gen) is OneStep:
                alone[own[0]].append((key, gen))
            else:
                slots[key] = own
                current[key] = run
        # fail before any work if some backend lacks a needed capability
        for (model, _kind), group in groups.items():
            backend_for(model).check([unique[slot] for slot in group])
        pending.clear()  # what the generators yield next is the next round's
        answers: list[Any] = [_UNANSWERED] * len(unique)
        # how many of each run's distinct requests are unanswered
        unanswered: dict[Hashable, int] = {}
        for key, own in slots.items():
            distinct = set(own)
            unanswered[key] = len(distinct)
            for slot in distinct:
                waiting[slot].append(key)

        def resume(key: Hashable) -> None:
            gen, _requests = current.pop(key)
            responses = [answers[slot] for slot in slots[key]]
            failed = next((r for r in responses if isinstance(r, RequestFailed)), None)
            if failed is None:
                advance(key, gen, responses)
            elif type(gen) is OneStep:
                results[key] = _failed(failed)
            else:
                fail(key, gen, _failed(failed))

        def fail(key: Hashable, gen: Any, failure: Failure) -> None:
            """A failed request of a multi-step run, raised in it as a row error: a run that
            has a use for its row without that answer (non-literal copying keeps its
            character score when the event judge's requests fail) catches it and goes on;
            any other ends with the failure, as before."""
            try:
                requests = list(gen.throw(RowError(failure.reason)))
            except StopIteration as stop:
                results[key] = stop.value
            except CopyprobeError:
                raise
            except _ROW_ERRORS:
                results[key] = failure
            else:
                if requests:
                    pending[key] = (gen, requests)
                else:
                    advance(key, gen, [])

        def answered(slot: int, response: Any) -> None:
            if answers[slot] is not _UNANSWERED:  # a backend that hands an answer over twice
                return
            answers[slot] = response
            for key, step in alone[slot]:
                if isinstance(response, RequestFailed):
                    results[key] = _failed(response)
                else:
                    finish(key, step, [response])
            for key in waiting[slot]:
                unanswered[key] -= 1
                if unanswered[key] == 0:
                    resume(key)

        for (model, kind), group in groups.items():
            stats.requests_unique += len(group)
            label = f"{kind} ({model or 'target'})"
            stats.by_model_kind[label] = stats.by_model_kind.get(label, 0) + len(group)
            tick = progress(label, len(group))
            backend = backend_for(model)
            asked = [unique[slot] for slot in group]
            if hands_over(backend):
                responses = backend.answer(asked, progress=tick,
                                           on_result=lambda index, response, group=group: answered(group[index],
                                                                                                    response))
            else:
                responses = backend.answer(asked, progress=tick)
            for slot, response in zip(group, responses):
                answered(slot, response)  # those the backend did not hand over
                if isinstance(response, RequestFailed):
                    stats.failed_requests.append({"model": model or "target", "kind": kind, "reason": response.reason})
                elif hasattr(response, "token_ids"):
                    name = model or "target"
                    stats.tokens_by_model[name] = stats.tokens_by_model.get(name, 0) + len(response.token_ids)
        assert not current and not any(a is _UNANSWERED for a in answers), "every run of the round has its responses"
    return results


def _payload_identity(request: Request) -> tuple:
    """The slot key of a request that cannot be hashed (a field holding a list): its model,
    kind and payload's hash.

    A request equals another when kind, model and payload agree. Identical sampled
    requests are merged too: a method that wants k different samples gives them
    different seeds, which also makes the samples reproducible and cacheable. Any other
    request is its own key: requests are frozen dataclasses whose equality compares the
    class (so the kind) and every field (the model among them), and hashing those costs
    0.2 us where the payload's SHA-256 (Request.key) costs 6; a key tuple of model, kind
    and request hashed the request twice more a slot."""
    return (request.model, request.kind, request.key())
