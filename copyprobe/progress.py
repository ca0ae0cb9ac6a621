"""Progress bars for a run: one bar per (request kind, model), drawn on stderr.

A run's ``progress`` is None or False (no bars), True (these bars), or a factory
``(label, total) -> tick(n[, note])`` of the caller's own (see :mod:`copyprobe.drive`)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from copyprobe.errors import ConfigError


def check_progress(progress: Any) -> Callable | None:
    """The factory a run draws its bars with: None for None or False, the caller's own
    factory as it is; True is :func:`progress_bars`' to open. Anything else is refused
    before any work starts."""
    if progress is None or progress is False:
        return None
    if progress is True or callable(progress):
        return progress
    raise ConfigError(f"progress must be True, False, None or a function (label, total) -> tick, got {progress!r}")


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[Any]:
    """A progress factory for copyprobe.drive.drive: one bar per (request kind, model)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
        console=Console(stderr=True),
    )
    started = False

    def factory(label: str, total: int):
        # started at the first bar, so an error before any model work is one line on its own
        nonlocal started
        if not started:
            progress.start()
            started = True
        task = progress.add_task(label, total=total)

        def tick(n: int, note: str | None = None) -> None:  # note: e.g. the document being scored
            progress.update(task, advance=n, **({"description": f"{label}: {note}"} if note else {}))

        return tick

    try:
        yield factory
    finally:
        if started:
            progress.stop()
