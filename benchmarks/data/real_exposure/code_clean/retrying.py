"""Call a function again when it fails, waiting longer each time.

retry() runs a callable until it returns without raising one of the given
exception types or the attempts run out.  Waits grow geometrically and may be
spread with jitter so that many clients do not retry in step.  The sleep
function and random source can be replaced, which keeps tests fast.

    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise OSError("not yet")
    ...     return "done"
    >>> retry(flaky, attempts=5, first_wait=0, sleep=lambda s: None)
    'done'
"""

import random
import time

__all__ = ["retry", "waits", "GaveUp"]


class GaveUp(Exception):
    """Every attempt failed; `errors` holds the exceptions in order."""

    def __init__(self, errors):
        super().__init__("gave up after %d attempts: %r" % (len(errors), errors[-1]))
        self.errors = errors


def waits(attempts, first_wait=0.5, factor=2.0, longest=30.0, jitter=0.0,
          rng=random.random):
    """The waits between attempts: attempts - 1 numbers of seconds.

    jitter between 0 and 1 spreads each wait down by up to that share.
    """
    if not 0.0 <= jitter <= 1.0:
        raise ValueError("jitter must be between 0 and 1")
    wait = first_wait
    result = []
    for _ in range(attempts - 1):
        spread = 1.0 - jitter * rng()
        result.append(min(wait, longest) * spread)
        wait *= factor
    return result


def retry(func, *args, attempts=3, on=(Exception,), first_wait=0.5, factor=2.0,
          longest=30.0, jitter=0.0, sleep=time.sleep, log=None, **kwargs):
    """Return func(*args, **kwargs), retrying after the exceptions in on.

    log, when given, is called with (attempt number, exception, wait) before
    each wait.  Other exceptions propagate at once.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    errors = []
    schedule = waits(attempts, first_wait, factor, longest, jitter)
    for number in range(1, attempts + 1):
        try:
            return func(*args, **kwargs)
        except on as exc:
            errors.append(exc)
            if number == attempts:
                break
            wait = schedule[number - 1]
            if log is not None:
                log(number, exc, wait)
            sleep(wait)
    raise GaveUp(errors)


def retrying(**options):
    """Decorator form of retry(): @retrying(attempts=4, on=(OSError,))."""
    def decorate(func):
        def wrapper(*args, **kwargs):
            return retry(func, *args, **options, **kwargs)
        wrapper.__name__ = func.__name__
        wrapper.__doc__ = func.__doc__
        wrapper.__wrapped__ = func
        return wrapper
    return decorate


if __name__ == "__main__":
    print(["%.2f" % w for w in waits(6, jitter=0.5)])
    try:
        retry(int, "x", attempts=3, on=(ValueError,), first_wait=0.01,
              log=lambda n, e, w: print("attempt", n, "failed:", e))
    except GaveUp as exc:
        print(exc)
