"""A token bucket for limiting how often something may happen.

The bucket holds up to `capacity` tokens and gains `rate` tokens per second.
Each action takes one or more tokens; when too few are left the action must
wait or be refused.  The clock is injectable so that tests need not sleep.

    >>> clock = ManualClock()
    >>> bucket = TokenBucket(rate=2, capacity=2, clock=clock)
    >>> bucket.try_take(), bucket.try_take(), bucket.try_take()
    (True, True, False)
    >>> clock.advance(0.5)
    >>> bucket.try_take()
    True
"""

import time

__all__ = ["TokenBucket", "ManualClock"]


class ManualClock:
    """A clock that only moves when told to, for tests."""

    def __init__(self, start=0.0):
        self.now = float(start)

    def __call__(self):
        return self.now

    def advance(self, seconds):
        if seconds < 0:
            raise ValueError("a clock cannot go back")
        self.now += seconds


class TokenBucket:
    """Allow bursts of up to `capacity` actions and `rate` actions a second."""

    def __init__(self, rate, capacity=None, clock=None, full=True):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(rate)
        self.capacity = float(capacity if capacity is not None else rate)
        if self.capacity < 1:
            raise ValueError("capacity must allow at least one token")
        self._clock = clock or time.monotonic
        self._tokens = self.capacity if full else 0.0
        self._stamp = self._clock()

    def _refill(self):
        now = self._clock()
        elapsed = now - self._stamp
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._stamp = now

    @property
    def tokens(self):
        """Tokens available now (a float)."""
        self._refill()
        return self._tokens

    def try_take(self, count=1):
        """Take count tokens if they are there; return whether it did."""
        if count > self.capacity:
            raise ValueError("count exceeds the bucket's capacity")
        self._refill()
        if self._tokens >= count:
            self._tokens -= count
            return True
        return False

    def wait_time(self, count=1):
        """Seconds until count tokens will be available (0.0 if now)."""
        self._refill()
        missing = count - self._tokens
        return max(0.0, missing / self.rate)

    def take(self, count=1, sleep=time.sleep):
        """Take count tokens, sleeping until they are there."""
        while not self.try_take(count):
            sleep(self.wait_time(count))

    def __repr__(self):
        return "<TokenBucket %.2f/%.2f tokens, %.2f per second>" % (
            self.tokens, self.capacity, self.rate)


if __name__ == "__main__":
    clock = ManualClock()
    bucket = TokenBucket(rate=1, capacity=3, clock=clock)
    for step in range(8):
        print("t=%.1f took=%s left=%.2f" % (clock(), bucket.try_take(), bucket.tokens))
        clock.advance(0.4)
